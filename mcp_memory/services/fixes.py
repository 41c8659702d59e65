"""Which observation fixed which error: what session summaries and reflection name as an error's fix."""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from mcp_memory.models.records import Observation
from mcp_memory.search.analyzer import Analyzer

_MAY_FIX = {"note", "file_change", "decision", "discovery", "tool_use"}
"""Types an agent also records a fix as, when it does not call it a fix."""
_SAYS_FIXED = re.compile(
    r"\b(?:fix(?:ed|es)?|resolv(?:ed|es)|solv(?:ed|es)|worked|works (?:now|again)|working again|"
    r"pass(?:es|ed|ing)?(?: again)?|workaround|repaired|no longer)\b",
    re.IGNORECASE,
)
_GENERIC_WORDS = "error errors fix fixed fixes fixing fail failed failing failure bug issue problem exception resolved"
"""Words every error or fix may say: sharing only these does not make a fix the fix of an error."""


def fixes_of(
    analyzer: Analyzer, errors: Sequence[Observation], observations: Sequence[Observation]
) -> dict[str, Observation]:
    """The fix of each error (by error id) among a session's `observations` (in order): the first
    later fix sharing a file, concept or word with it, else a fix recorded right after it, else the
    first later observation of another type that says it fixed something ("tests pass again") and
    shares a file, concept or word with it."""
    generic = set(analyzer.terms(_GENERIC_WORDS))

    def terms(obs: Observation) -> set[str]:
        found = analyzer.terms("\n".join([obs.title, *obs.concepts, *obs.files]))
        return {t for t in found if t not in generic and not t.isdigit()}

    fixes = [(o, terms(o)) for o in observations if o.type == "fix"]
    # the opening of a note says what it did; a long one is not read to its end for every summary
    told = [(o, terms(o)) for o in observations if o.type in _MAY_FIX and _SAYS_FIXED.search(o.content, 0, 2_000)]
    following = {a.id: b for a, b in pairwise(observations)}
    paired: dict[str, Observation] = {}
    for error in errors:
        words = terms(error)
        fix = next((f for f, its in fixes if f.seq > error.seq and words & its), None)
        if fix is None and (after := following.get(error.id)) is not None and after.type == "fix":
            fix = after
        if fix is None:
            fix = next((f for f, its in told if f.seq > error.seq and words & its), None)
        if fix is not None:
            paired[error.id] = fix
    return paired
