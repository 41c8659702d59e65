"""Stable, sortable record ids with a kind prefix (`obs_…`, `mem_…`, `ses_…`)."""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case

PREFIXES: dict[str, str] = {
    "session": "ses",
    "observation": "obs",
    "memory": "mem",
    "lesson": "les",
    "outcome": "out",
    "mistake_card": "mc",
    "slot": "slot",
    "action": "act",
    "relation": "rel",
}
KIND_OF_PREFIX: dict[str, str] = {prefix: kind for kind, prefix in PREFIXES.items()}


def _encode(number: int, length: int) -> str:
    chars = []
    for _ in range(length):
        number, digit = divmod(number, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


_TIME_CHARS, _RANDOM_CHARS = 10, 12


_RANDOM_LIMIT = 1 << 60
_last = (0, 0)  # the millisecond and random part of the id made last
_lock = threading.Lock()


def new_id(kind: str) -> str:
    """A new id for `kind`: prefix, 48-bit millisecond time, 60 random bits (time-ordered, unique).

    Ids one process makes in the same millisecond follow one another (the random part of the first
    counts up, as monotonic ULIDs do): records made together, such as the rules of one outcome, sort
    in the order they were made rather than by chance.
    """
    global _last
    millis = time.time_ns() // 1_000_000
    with _lock:
        last_millis, last_rand = _last
        rand = int.from_bytes(os.urandom(8), "big") >> 4
        if millis <= last_millis:  # the same millisecond, or a clock that stepped back: still after the last
            millis, rand = (last_millis, last_rand + 1) if last_rand + 1 < _RANDOM_LIMIT else (last_millis + 1, rand)
        _last = (millis, rand)
    return f"{PREFIXES[kind]}_{_encode(millis, _TIME_CHARS)}{_encode(rand, _RANDOM_CHARS)}"


def kind_of(record_id: str) -> str | None:
    """The record kind an id names by its prefix, or None for a malformed id."""
    prefix, sep, rest = record_id.partition("_")
    if not sep or not rest:
        return None
    return KIND_OF_PREFIX.get(prefix)


_SERVER_SESSION = re.compile(rf"{PREFIXES['session']}_[{_ALPHABET}]{{{_TIME_CHARS + _RANDOM_CHARS}}}")
SERVER_SESSION_GLOB = f"{PREFIXES['session']}_" + f"[{_ALPHABET}]" * (_TIME_CHARS + _RANDOM_CHARS)
"""What `new_id("session")` makes, as an SQLite GLOB pattern."""


def is_server_session_id(session_id: str) -> bool:
    """Whether `session_id` has the shape of the ids the server gives the sessions it starts
    (a caller's name, even one starting with "ses_", has another)."""
    return _SERVER_SESSION.fullmatch(session_id) is not None


SCOPE_MARK = "#"  # never part of a caller's session name, so a scoped id cannot meet a name


def scoped_session_id(name: str, project: str) -> str:
    """The stored id of a caller-named session when another project already holds that name.

    Names are the caller's (a client's conversation key), so two projects may pick the same one;
    the second gets the name marked with its project, and callers still see and use the name.
    """
    digest = int.from_bytes(hashlib.sha256(project.encode()).digest()[:8], "big") >> 4
    return f"{name}{SCOPE_MARK}{_encode(digest, 12)}"


def public_id(record_id: str) -> str:
    """The id a caller sees: a scoped session's name without its project mark; any other id as it is."""
    return record_id.partition(SCOPE_MARK)[0]
