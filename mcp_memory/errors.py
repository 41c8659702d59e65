"""The error tree of mcp-memory; each message tells the agent what to do next."""

from __future__ import annotations

from mcp_memory.ids import PREFIXES, kind_of
from mcp_memory.privacy import redacted


class MCPMemoryError(Exception):
    """Base of every error the services raise on purpose (never a bug)."""


class InvalidInputError(MCPMemoryError):
    """An argument broke a rule the schema could not express; the message names the field."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


class NotFoundError(MCPMemoryError):
    """An id does not exist in the caller's project (or never existed: we do not say which)."""

    def __init__(self, kind: str, record_id: str, hint: str = "", field: str | None = None) -> None:
        # The id is the caller's, but the message is logged too: a secret pasted as an id stays out.
        message = f"No {kind} {redacted(record_id)!r} in this project"
        named = _named_kind(kind, record_id)
        if named:
            message += f" (that is {named} id, not {_article(kind)} {kind.replace('_', ' ')}'s)"
        if field:
            message = f"{field}: {message}"
        super().__init__(f"{message}; {hint}" if hint else message)
        self.kind = kind
        self.record_id = record_id


class ConflictError(MCPMemoryError):
    """A write would break a uniqueness or consistency rule (duplicate name, cycle, bad transition)."""


class LimitExceededError(MCPMemoryError):
    """A size limit would be exceeded; nothing was truncated or written."""


class StorageError(MCPMemoryError):
    """The database failed in a way the caller cannot fix (disk full, corruption, I/O error)."""


class BusyError(StorageError):
    """The database stayed locked by another writer for longer than the busy timeout."""


class ImportFormatError(MCPMemoryError):
    """An import document is not a mcp-memory export this version can read."""


def _named_kind(kind: str, record_id: str) -> str | None:
    """The kind an id's prefix names when it is not `kind` ("an observation"), else None.

    Callers' own session names never start with a record-id prefix, so the prefix always tells.
    """
    other = kind_of(record_id)
    if kind not in PREFIXES or other is None or other == kind:
        return None
    return f"{_article(other)} {other.replace('_', ' ')}"


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"
