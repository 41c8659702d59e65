"""Our own output: `<private>` blocks replaced by `[private]`, and the `[private]` / `[REDACTED:…]`
markers that cleaning emits and every later step must recognise."""

from __future__ import annotations

import re

_PRIVATE_MARKER = "[private]"

# Text we emitted ourselves; a match starting inside one is skipped so clean() is idempotent.
_MARKER = re.compile(r"\[(?:REDACTED:[A-Za-z0-9_.-]{1,64}|private)\]")
_KIND = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TAG = re.compile(r"<\s{0,5}(/?)\s{0,5}private(?:\s[^<>]{0,200})?>", re.IGNORECASE)


def _strip_private_once(text: str) -> tuple[str, int]:
    out: list[str] = []
    pos = depth = removed = 0
    for m in _TAG.finditer(text):
        if not m.group(1):
            if depth == 0:
                out.append(text[pos : m.start()])
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                out.append(_PRIVATE_MARKER)
                pos, removed = m.end(), removed + 1
        else:  # stray closing tag: dropped
            out.append(text[pos : m.start()])
            pos = m.end()
    if depth:  # unclosed block: fail closed and drop everything after it
        return "".join([*out, _PRIVATE_MARKER]), removed + 1
    out.append(text[pos:])
    return "".join(out), removed


def _strip_private(text: str, counts: dict[str, int]) -> str:
    removed = 0
    # Dropping a stray closing tag can splice a new tag together ("<priv</private>ate>"), so repeat;
    # pathological inputs that keep doing so are cut at the first remaining tag.
    for _ in range(3):
        if _TAG.search(text) is None:
            break
        text, n = _strip_private_once(text)
        removed += n
    else:
        leftover = _TAG.search(text)
        if leftover is not None:
            text, removed = text[: leftover.start()] + _PRIVATE_MARKER, removed + 1
    if removed:
        counts["private"] = removed
    return text


def without_markers(text: str) -> str:
    """`text` with our own `[private]` / `[REDACTED:…]` markers taken out (to see what is left)."""
    return _MARKER.sub(" ", text)


def says_something(text: str) -> bool:
    """Whether cleaned `text` holds a letter or digit outside the markers of what was removed."""
    return any(ch.isalnum() for ch in without_markers(text))
