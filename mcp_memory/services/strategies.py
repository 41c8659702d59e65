"""When two outcomes' strategies count as one strategy.

Word overlap (Jaccard of the words each says to do, its "not" words marked apart) decides first:
below `similarity` they differ, at `REWORDED` or more they are one. Between the two, the record
decides: "replace the API one module at a time" and "replace the API in one big change" share most
of their words, and when one has mostly worked and the other mostly failed the words they do not
share are what mattered, so they are two strategies. Alike wording with records that agree (or no
record yet) stays one strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from mcp_memory.config import Settings
from mcp_memory.models.records import Outcome
from mcp_memory.privacy import without_markers
from mcp_memory.search.index import SearchIndex
from mcp_memory.services.common import compared_terms, jaccard
from mcp_memory.services.lesson_identity import strategy_terms

REWORDED = 0.8
"""Strategies at least this alike are one strategy whatever their records (a rewording)."""


@dataclass(slots=True)
class Records:
    """How each strategy (by its word set) went among some outcomes: (outcomes, successes)."""

    words: Callable[[str | None], frozenset[str]]
    tally: dict[frozenset[str], tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, words: Callable[[str | None], frozenset[str]], outcomes: Iterable[Outcome]) -> Records:
        records = cls(words)
        for outcome in outcomes:
            if outcome.strategy:
                key = words(outcome.strategy)
                n, won = records.tally.get(key, (0, 0))
                records.tally[key] = (n + 1, won + bool(outcome.success))
        return records

    def contrary(self, a: str, b: str) -> bool:
        """Whether one of the two strategies has mostly worked and the other mostly failed."""
        left, right = self.tally.get(self.words(a)), self.tally.get(self.words(b))
        if left is None or right is None:
            return False
        lean = [(won * 2 > n) - (won * 2 < n) for n, won in (left, right)]  # +1 mostly won, -1 mostly lost
        return lean[0] * lean[1] == -1


def same_strategy(
    words: Callable[[str | None], frozenset[str]],
    a: str | None,
    b: str | None,
    similarity: float,
    records: Records | None,
) -> bool:
    """Whether two strategies count as one (see the module doc); without records, by wording alone."""
    overlap = jaccard(words(a), words(b))
    if overlap < similarity:
        return False
    if overlap >= REWORDED or records is None or a is None or b is None:
        return True
    return not records.contrary(a, b)


@dataclass(frozen=True, slots=True)
class Tally:
    """How the outcomes with a similar strategy went."""

    outcomes: int
    successes: int

    @property
    def share(self) -> float:
        return self.successes / self.outcomes if self.outcomes else 0.0


class Strategies:
    """Judges errors and strategies alike or not, and how a strategy has gone, for the lessons
    outcomes teach (services/outcomes.py)."""

    def __init__(self, index: SearchIndex, settings: Settings) -> None:
        self.index = index
        self.settings = settings
        self._strategies: dict[str, frozenset[str]] = {}

    def words(self, text: str | None) -> frozenset[str]:
        """The analysed word set similarity is measured on."""
        return compared_terms(self.index.analyzer.terms, text)

    def similar(self, a: str | None, b: str | None) -> bool:
        """Whether two errors are similar enough to count as the same."""
        return jaccard(self.words(a), self.words(b)) >= self.settings.similarity

    def strategy_words(self, text: str | None) -> frozenset[str]:
        """The words strategies are compared on, remembered: one record compares hundreds of pairs."""
        found = self._strategies.get(text or "")
        if found is None:
            if len(self._strategies) >= 4096:
                self._strategies.clear()
            found = self._strategies[text or ""] = strategy_terms(
                self.index.analyzer.terms, without_markers(text or "")
            )
        return found

    def same(self, a: str | None, b: str | None, records: Records | None = None) -> bool:
        """Whether two strategies count as the same: alike enough, and not with opposite `records`."""
        return same_strategy(self.strategy_words, a, b, self.settings.similarity, records)

    def records(self, peers: Sequence[Outcome]) -> Records:
        """How each strategy among `peers` went."""
        return Records.of(self.strategy_words, peers)

    def tally(self, peers: Sequence[Outcome], strategy: str) -> Tally:
        """How the outcomes of the task type with the same strategy as this one went."""
        records = self.records(peers)
        alike = [o for o in peers if o.strategy and self.same(strategy, o.strategy, records)]
        return Tally(len(alike), sum(1 for o in alike if o.success))

    def holds(self, tally: Tally) -> bool:
        """Whether a strategy's record makes it a heuristic."""
        s = self.settings
        return tally.outcomes >= s.heuristic_min_outcomes and tally.share > s.heuristic_min_success

    def shared_by(self, strategy: str | None, failures: Sequence[Outcome]) -> str | None:
        """`strategy`, when every one of `failures` that names a strategy tried that same one."""
        if not strategy or not all(self.same(strategy, o.strategy) for o in failures if o.strategy):
            return None
        return strategy

    def better(self, peers: Sequence[Outcome], failures: Sequence[Outcome], named: str | None) -> str | None:
        """The best successful strategy of the task type unlike every strategy that failed this way."""
        failed = list(dict.fromkeys([o.strategy for o in failures if o.strategy] + ([named] if named else [])))
        records = self.records(peers)
        # Best first, so the search stops at the first one unlike every failure (each strategy judged once:
        # a long history repeats its strategies).
        judged: set[str] = set()
        for o in sorted(peers, key=lambda o: (o.score or 0.0, o.created_at), reverse=True):
            if not o.success or not o.strategy or o.strategy in judged:
                continue
            judged.add(o.strategy)
            if self.words(o.strategy) and not any(self.same(o.strategy, f, records) for f in failed):
                return o.strategy
        return None
