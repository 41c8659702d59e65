"""Provider tokens in disguise (fullwidth or mathematical look-alikes, invisible characters inside),
found on a folded view of the text and redacted in the original."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right, insort
from collections.abc import Sequence
from functools import lru_cache

from mcp_memory.privacy.markers import _MARKER
from mcp_memory.privacy.rules import _Rule

# Characters that render as nothing: a token split by them looks whole to a reader (and one copied
# from a web page or a chat often carries them), so the folded view drops them.
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
# What the folded view folds: the invisible characters, and the look-alikes of ASCII that NFKC folds
# one for one into what tokens are made of: fullwidth letters, digits and `+-./=_~` (which an East
# Asian input method types) and mathematical letters and digits. Fullwidth punctuation such as
# `：，（）` is left out, since no token holds it and Chinese or Japanese prose is full of it; looking
# for these characters alone keeps the check cheap on the many texts with other non-ASCII.
_FOLDS = f"{_INVISIBLE}\uff0b\uff0d-\uff19\uff1d\uff21-\uff3a\uff3f\uff41-\uff5a\uff5e\U0001d400-\U0001d7ff"
_FOLDABLE = re.compile(f"[{_FOLDS}]")
# A run of what tokens are made of with a foldable character in it, from its start (so that each
# character is scanned once): the only place a disguised token can be. It leaves out the few token
# rules whose matches hold spaces (a PEM block, `aws_secret_access_key = …`), whose disguise is unlikely.
_TOKEN_CHARS = r"\-A-Za-z0-9_.+/=~:"
_DISGUISED = re.compile(f"(?<![{_TOKEN_CHARS}{_FOLDS}])[{_TOKEN_CHARS}]*+[{_FOLDS}][{_TOKEN_CHARS}{_FOLDS}]*+")


@lru_cache(maxsize=2048)
def _fold_char(ch: str) -> str:
    if ch in _INVISIBLE:
        return ""
    folded = unicodedata.normalize("NFKC", ch)
    return folded if len(folded) == 1 else ch


def _fold_match(m: re.Match[str]) -> str:
    return _fold_char(m.group())


def _unfold_tokens(rules: Sequence[_Rule], needles: frozenset[str], text: str, counts: dict[str, int]) -> str:
    """Redact the provider tokens `text` holds in disguise: in fullwidth or mathematical letters, or
    split by invisible characters. They are matched on a folded view of `text` and each is redacted
    in `text` whole, invisible characters included; text without such characters is returned as it is.
    `needles` are those of `rules`.
    """
    if text.isascii() or _FOLDABLE.search(text) is None:
        return text
    # The shortest token any rule matches is longer than 10 characters.
    runs = [
        _FOLDABLE.sub(_fold_match, m.group()).casefold() for m in _DISGUISED.finditer(text) if m.end() - m.start() > 10
    ]
    if not runs:
        return text
    present = {n for n in needles if any(n in run for run in runs)}
    rules = [r for r in rules if not present.isdisjoint(r.needles)]
    if not rules:
        return text
    view = _FOLDABLE.sub(_fold_match, text)
    # Folding keeps every character but the invisible ones, so the view's index `v` is the text's
    # `v` plus the number of characters dropped before it; `dropped[j]` is where the j-th one would be.
    dropped = [m.start() - j for j, m in enumerate(_FOLDABLE.finditer(text)) if not _fold_char(m.group())]
    # Spans taken in `view`, kept sorted and disjoint: our markers first (no match may start inside
    # one), then each token found, which a later rule's match may not overlap (the first rule wins).
    taken = [m.span() for m in _MARKER.finditer(view)]
    found: list[tuple[int, int, str]] = []  # (start, end, kind) in `view`
    for rule in rules:
        for m in rule.pattern.finditer(view):
            span = rule.pick(m)
            if span is None or span[1] <= span[0]:
                continue
            i = bisect_right(taken, (span[0], len(view) + 1))
            if (i > 0 and taken[i - 1][1] > span[0]) or (i < len(taken) and taken[i][0] < span[1]):
                continue
            insort(taken, span)
            found.append((span[0], span[1], rule.kind))
    if not found:
        return text
    out: list[str] = []
    pos = 0
    for start, end, kind in sorted(found):
        out += (text[pos : start + bisect_right(dropped, start)], f"[REDACTED:{kind}]")
        pos = end + bisect_right(dropped, end - 1)
        counts[kind] = counts.get(kind, 0) + 1
    out.append(text[pos:])
    return "".join(out)
