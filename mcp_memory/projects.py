"""What a project name (and an agent id) may be, and the one spelling it is stored and compared under."""

from __future__ import annotations

import re
import unicodedata

from mcp_memory.errors import InvalidInputError
from mcp_memory.privacy import name_problem

_PROJECT = re.compile(r"[^\x00-\x1f\x7f-\x9f*/\\]{1,128}")
_UNSEEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories of characters a project name may not hold: controls, and those that show as
nothing (zero-width spaces, direction marks, a byte order mark), so two names that look the same
are the same name."""


def check_project(project: str) -> str:
    """A project name in its stored form (trimmed, composed), or an error naming the field.

    Composed (NFC) because one name arrives in two spellings: a folder name from a macOS client's
    roots is often decomposed ("e" + accent), a name an agent types is composed; both are one project.
    """
    name = unicodedata.normalize("NFC", project.strip())
    categories = {unicodedata.category(c) for c in name}
    if not _PROJECT.fullmatch(name) or categories & _UNSEEN or all(c.startswith("M") for c in categories):
        raise InvalidInputError(
            "project",
            "must be 1-128 characters without control characters, invisible ones (zero-width, direction "
            "marks), '*', '/' or '\\', and not only combining marks",
        )
    # A project name is stored in every row of the project: one holding a secret is refused, not redacted.
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInputError("project", problem)
    return name


def check_agent_id(agent_id: str | None) -> str | None:
    """An agent id as stored (trimmed, composed; blank: none given), or an error naming the field:
    an id of blanks or invisible characters is one no one could tell apart from another."""
    if agent_id is None or not (name := unicodedata.normalize("NFC", agent_id.strip())):
        return None
    name = name.replace("\x00", "\ufffd")  # as every text argument stores a NUL
    if {unicodedata.category(c) for c in name} & _UNSEEN:
        raise InvalidInputError(
            "agent_id", "must hold no control characters or invisible ones (zero-width, direction marks)"
        )
    return name
