"""Privacy filter applied to every piece of text before it is stored or indexed.

``<private>…</private>`` blocks are replaced by the marker ``[private]`` and secrets by
``[REDACTED:<kind>]``. Callers only ever see per-kind counts, never the redacted text.
Every pattern is compiled once and uses bounded quantifiers, so cleaning is roughly
linear in the input size and cannot backtrack catastrophically.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from mcp_memory.privacy.folding import _unfold_tokens
from mcp_memory.privacy.markers import _KIND, _MARKER, _strip_private, says_something, without_markers
from mcp_memory.privacy.rules import _GENERIC, _SPECIFIC, _SPECIFIC_NEEDLES, _Rule

__all__ = [
    "PrivacyFilter",
    "Redaction",
    "merge_counts",
    "name_problem",
    "redacted",
    "says_something",
    "without_markers",
]


@dataclass(frozen=True, slots=True)
class Redaction:
    """Result of cleaning one text: the safe text plus how many things of each kind were removed."""

    text: str
    counts: Mapping[str, int]


def _apply(rule: _Rule, text: str, counts: dict[str, int]) -> str:
    """Replace every match of one rule, skipping matches that begin inside an existing marker."""
    markers: list[tuple[int, int]] | None = None  # found on the first match: most rules match nothing
    starts: list[int] = []
    out: list[str] = []
    pos = found = 0
    for m in rule.pattern.finditer(text):
        for span in (rule.pick(m),) if rule.picks is None else rule.picks(m):
            if span is None or span[1] <= span[0] or span[0] < pos:
                continue
            if markers is None:
                markers = [m.span() for m in _MARKER.finditer(text)]
                starts = [s for s, _ in markers]
            i = bisect_right(starts, span[0]) - 1
            if i >= 0 and markers[i][1] > span[0]:
                continue
            out += (text[pos : span[0]], f"[REDACTED:{rule.kind}]")
            pos, found = span[1], found + 1
    if not found:
        return text
    counts[rule.kind] = counts.get(rule.kind, 0) + found
    out.append(text[pos:])
    return "".join(out)


class _RulePlan:
    """Which of a sequence of rules can match a text, from the needles found in it."""

    def __init__(self, rules: tuple[_Rule, ...]) -> None:
        self.rules = rules
        self._always = frozenset(i for i, r in enumerate(rules) if not r.needles)
        by_needle: dict[str, set[int]] = {}
        for i, rule in enumerate(rules):
            for needle in rule.needles:
                by_needle.setdefault(needle, set()).add(i)
        self._by_needle = {n: frozenset(ids) for n, ids in by_needle.items()}
        self.needles = frozenset(by_needle)
        """Every rule's needles: what a text is searched for before any pattern runs."""

    def select(self, present: Iterable[str]) -> list[_Rule]:
        """The rules, in their order, that have no needles or one of `present`."""
        chosen = self._always.union(*(self._by_needle.get(n, ()) for n in present))
        return [self.rules[i] for i in sorted(chosen)]


class PrivacyFilter:
    """Removes <private> blocks and redacts secrets before text is stored or indexed.

    A removed block becomes ``[private]`` (an unclosed one takes the rest of the text with it) and
    each secret becomes ``[REDACTED:<kind>]``; cleaning already-cleaned text changes nothing.
    """

    def __init__(self, *, extra_patterns: Sequence[tuple[str, str]] = ()) -> None:
        """Build the filter; `extra_patterns` are configured (kind, regex) pairs, whole match redacted.

        Raises ValueError for a kind that is not a short identifier and re.error for a bad regex.
        """
        extras = []
        for kind, regex in extra_patterns:
            if not _KIND.fullmatch(kind):
                raise ValueError(f"invalid redaction kind {kind!r}")
            extras.append(_Rule(kind, re.compile(regex)))
        # Configured patterns are assumed more specific than the generic key/value heuristics.
        self._plan = _RulePlan((*_SPECIFIC, *extras, *_GENERIC))

    @property
    def _rules(self) -> tuple[_Rule, ...]:
        """Every rule, in the order they run."""
        return self._plan.rules

    @_rules.setter
    def _rules(self, rules: tuple[_Rule, ...]) -> None:
        self._plan = _RulePlan(rules)  # a test runs every rule on every text, its needles taken away

    def clean(self, text: str) -> Redaction:
        """Return `text` with private blocks and secrets removed, plus per-kind redaction counts."""
        counts: dict[str, int] = {}
        text = _strip_private(text, counts)
        text = _unfold_tokens(_SPECIFIC, _SPECIFIC_NEEDLES, text, counts)
        # Redactions only add markers, inside which no match counts, so one folding serves every pass.
        folded = text.casefold()
        present = {n for n in self._plan.needles if n in folded}  # substring tests are far cheaper than patterns
        rules = self._plan.select(present)
        # A replacement can change the context an earlier rule saw (a word edge, say): repeat until stable.
        for _ in range(3):
            before = sum(counts.values())
            for rule in rules:
                text = _apply(rule, text, counts)
            if sum(counts.values()) == before:
                break
        return Redaction(text=text, counts=counts)

    def clean_all(self, texts: Iterable[str]) -> tuple[list[str], dict[str, int]]:
        """Clean several texts (e.g. the fields of one record) and sum their counts."""
        results = [self.clean(t) for t in texts]
        return [r.text for r in results], merge_counts(*(r.counts for r in results))


_BUILT_IN = PrivacyFilter()


def redacted(text: str) -> str:
    """`text` with the secrets the built-in rules find redacted: for quoting what a caller gave in an
    error (which is logged, too) where no configured filter is at hand."""
    return _BUILT_IN.clean(text).text


def name_problem(name: str) -> str | None:
    """Why `name` (a session id, a project) may not be stored, when it holds a secret or a private part; else None.

    Such a name is refused, not cleaned: a name with `[REDACTED:…]` in it would name another record.
    Only the built-in rules apply, since names are checked where no configured filter is at hand.
    The rule names what was found, never the text.
    """
    found = _BUILT_IN.clean(name).counts
    secrets = sorted(kind for kind in found if kind != "private")
    if secrets:
        return (
            f"looks like it contains a secret ({', '.join(secrets)}), which is never stored; choose a name without it"
        )
    if found:
        return "must not contain a <private> tag (private text is never stored); choose a name without it"
    return None


def merge_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    """Sum several kind -> count mappings into one, e.g. for a tool result's `redacted` field."""
    total: dict[str, int] = {}
    for mapping in counts:
        for kind, n in mapping.items():
            total[kind] = total.get(kind, 0) + n
    return {kind: n for kind, n in total.items() if n}
