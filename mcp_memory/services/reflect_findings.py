"""Reflect's findings: what the evidence of a session or window supports, found without a database.

Errors whose words recur become anti-pattern candidates (with the fix that followed one of them);
step sequences that recur in successful outcomes become heuristics, or retire one that no longer
holds; two texts on one topic conflict when one negates the other or their numbers differ.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import NamedTuple

from mcp_memory.config import Settings
from mcp_memory.models.records import Observation, Outcome
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.services.compress import counted, shorten
from mcp_memory.services.fixes import fixes_of

_NEGATION = re.compile(
    r"\b(not|no|never|don't|dont|doesn't|doesnt|isn't|isnt|aren't|arent|won't|wont|can't|cant|cannot|"
    r"without|disabled?|avoid|stop(?:ped)?|none)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


class Finding(NamedTuple):
    """A lesson the evidence supports, found before the write transaction that learns it."""

    content: str
    kind: str
    context: str | None
    evidence: list[str]
    confidence: float | None = None
    task_type: str | None = None
    share: float | None = None
    retire: bool = False  # a heuristic these steps taught before, which no longer holds


def recurring_errors(observations: Sequence[Observation], analyzer: Analyzer, settings: Settings) -> list[Finding]:
    """Anti-pattern candidates: errors whose words recur, each with the fix that followed one of them."""
    errors = [o for o in observations if o.type == "error"]
    clusters: list[list[Observation]] = []
    words = {o.id: frozenset(analyzer.terms(f"{o.title} {' '.join(o.facts)}")) for o in errors}
    # Each error joins the first cluster whose first error's words overlap its own by the threshold
    # (Jaccard, as services/common.jaccard computes it). The words it shares with each cluster's
    # first error are counted through an inverted list of those words: only clusters sharing a word
    # can reach a threshold above 0, and counting is far cheaper than comparing every cluster's set.
    heads_by_word: dict[str, list[int]] = defaultdict(list)
    for error in errors:
        mine = words[error.id]
        shared: Counter[int] = Counter()
        for word in mine:
            shared.update(heads_by_word.get(word, ()))
        home = next(
            (
                i
                for i in sorted(shared)
                if shared[i] / (len(mine) + len(words[clusters[i][0].id]) - shared[i]) >= settings.similarity
            ),
            None,
        )
        if home is None:
            for word in mine:
                heads_by_word[word].append(len(clusters))
            clusters.append([error])
        else:
            clusters[home].append(error)
    learned = []
    for cluster in clusters:
        if len(cluster) < settings.anti_pattern_min_failures:
            continue
        head = cluster[0]
        fix = _first_fix(cluster, observations, analyzer)
        context = f"Seen {len(cluster)} times."
        if fix is not None:
            context += f" Fixed by: {shorten(fix.title, 160)}"
        learned.append(
            Finding(
                f"Recurring error: {shorten(head.title, 200)}",
                kind="anti_pattern",
                context=context,
                evidence=[o.id for o in cluster],
                confidence=min(0.95, 0.5 + 0.1 * (len(cluster) - 1)),
            )
        )
    return learned


def _first_fix(
    errors: Sequence[Observation], observations: Sequence[Observation], analyzer: Analyzer
) -> Observation | None:
    """What fixed the earliest of `errors` that has a fix in its own session, as a summary pairs them."""
    for error in errors:
        session = sorted((o for o in observations if o.session_id == error.session_id), key=lambda o: o.seq)
        if fix := fixes_of(analyzer, [error], session).get(error.id):
            return fix
    return None


def recurring_sequences(outcomes: Sequence[Outcome], settings: Settings) -> list[Finding]:
    """Heuristics from step sequences that recur in successes and mostly succeed where they are used.

    Failures that went through the same steps count against a sequence, so a strategy that mostly
    fails is never recommended (nor both recommended and, by an anti-pattern, avoided); a
    sequence learned before that no longer holds is retired.
    """
    by_type: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        if len(outcome.steps) >= 2:
            by_type[outcome.task_type].append(outcome)
    learned = []
    for task_type, tried in by_type.items():
        wins: Counter[tuple[str, ...]] = Counter()
        uses: Counter[tuple[str, ...]] = Counter()
        owners: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for outcome in tried:
            steps = [" ".join(s.casefold().split()) for s in outcome.steps]
            for gram in {tuple(steps[i : i + n]) for n in (2, 3) for i in range(len(steps) - n + 1)}:
                uses[gram] += 1
                owners[gram].append(outcome.id)
                wins[gram] += bool(outcome.success)
        common = [g for g, n in wins.items() if n >= 2]
        if not common:
            continue
        best = max(common, key=lambda g: (wins[g], len(g), g))
        share = wins[best] / uses[best]
        content = f"For {task_type} tasks: " + " -> ".join(best)
        learned.append(
            Finding(
                content,
                kind="heuristic",
                task_type=task_type,
                context=f"These steps succeeded in {wins[best]} of the {uses[best]} outcomes that took them.",
                evidence=owners[best],
                confidence=share,
                share=share,
                retire=share <= settings.heuristic_min_success,
            )
        )
    return learned


def conflict(first: str, second: str) -> bool:
    """Whether two texts on one topic disagree: one negates, or their numbers differ."""
    if bool(_NEGATION.search(first)) != bool(_NEGATION.search(second)):
        return True
    numbers_a, numbers_b = set(_NUMBER.findall(first)), set(_NUMBER.findall(second))
    return bool(numbers_a and numbers_b and numbers_a != numbers_b)


def insights_of(
    observations: Sequence[Observation], outcomes: Sequence[Outcome], anti: int, heuristics: int, contradictions: int
) -> list[str]:
    """Plain-language findings on the evidence: counts take in what it had already taught."""
    found = [f"{counted(len(observations), 'observation')} and {counted(len(outcomes), 'outcome')} reviewed."]
    if outcomes:
        wins = sum(1 for o in outcomes if o.success)
        found.append(f"{wins} of {len(outcomes)} outcomes succeeded.")
    errors = Counter(o.type for o in observations)["error"]
    if errors:
        found.append(f"{errors} errors recorded; {anti} recurring ones became anti-patterns.")
    if heuristics:
        found.append(f"{heuristics} recurring successful step sequences became heuristics.")
    if contradictions:
        found.append(f"{contradictions} pairs of memories look contradictory; check them with memory_related.")
    concepts = Counter(c for o in observations for c in o.concepts)
    if concepts:
        found.append("Most discussed: " + ", ".join(c for c, _ in concepts.most_common(5)) + ".")
    return found
