"""Reflect's findings: what the evidence of a session or window supports, found without a database.

Errors whose words recur become anti-pattern candidates (with the fix that followed one of them);
step sequences that recur in successful outcomes become heuristics, or retire one that no longer
holds; two texts on one topic conflict when one negates the other, or each gives a number the
other lacks for something both speak of.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from mcp_memory.config import Settings
from mcp_memory.models.records import Observation, Outcome
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.services.common import compared_terms, jaccard
from mcp_memory.services.compress import counted, sentences, shorten
from mcp_memory.services.fixes import CueBook, pair_fixes
from mcp_memory.services.lesson_identity import ERROR_PREFIX, seen_context

ERROR_CHARS = 400
"""A recurring error is shown up to this long, cut between words; its evidence holds it whole."""

_NEGATION = re.compile(
    r"\b(not|no|never|don't|dont|doesn't|doesnt|isn't|isnt|aren't|arent|won't|wont|can't|cant|cannot|"
    r"without|disabled?|avoid|stop(?:ped)?|none)\b",
    re.IGNORECASE,
)
# A number (as a whole token: "5434", "3.11", the 14 of "14/5433", not the 2 of "v2"), a word, or punctuation
# that ends a clause; "and" and "but" end one too ("port 8080 and 4 workers" are two things).
_PIECE = re.compile(r"\b\d+(?:\.\d+)?\b|[^\W\d_]+(?:['’][^\W\d_]+)*|[,;!?()\[\]]|\.(?!\d)")
_CLAUSE_BREAKS = frozenset({",", ";", "!", "?", "(", ")", "[", "]", ".", "and", "but"})


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
    error: str | None = None  # a recurring error as observed, whole
    fix: str | None = None  # what fixed it
    outcomes: tuple[str, ...] = ()  # failed outcomes with a similar error


def recurring_errors(
    observations: Sequence[Observation],
    analyzer: Analyzer,
    settings: Settings,
    outcomes: Sequence[Outcome] = (),
    cues: Mapping[str, str | None] | None = None,
) -> list[Finding]:
    """Anti-pattern candidates: errors whose words recur, each with the fix that followed one of them
    (among `observations`, with their stored fix `cues` where given) and, when failed `outcomes` had
    a similar error, their task type.

    Two errors recur when their words overlap by `settings.similarity`, or the errors they state do
    (`error_signature`): one missing module hit by `pytest` and by `python -m app` is one error, and
    the anti-pattern then names that error rather than the first command that hit it (as it does
    when the first error's title leaves the error out, as a traceback's first line does).
    """
    errors = [o for o in observations if o.type == "error"]
    said = {o.id: _error_text(o) for o in errors}
    signatures = {o.id: error_signature(o.content) for o in errors}
    clusters = _cluster(
        errors,
        [
            {o.id: compared_terms(analyzer.terms, f"{o.title} {' '.join(o.facts)}") for o in errors},
            {o.id: compared_terms(analyzer.terms, sig) for o in errors if (sig := signatures[o.id]) is not None},
        ],
        settings.similarity,
    )
    learned = []
    failed = [(o, compared_terms(analyzer.terms, o.error)) for o in outcomes if not o.success and o.error]
    # Each error's fix is looked for in its own session: grouped once, with each observation's cues
    # worked out once, not for every error of every cluster (errors × observations at 100k: minutes).
    sessions: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        sessions[obs.session_id].append(obs)
    for session in sessions.values():
        session.sort(key=lambda o: o.seq)
    book = CueBook(analyzer, cues)
    for cluster, by_signature in clusters:
        if len(cluster) < settings.anti_pattern_min_failures:
            continue
        # Named by what the first error says, unless its errors recur by the error they state or
        # what it says leaves that out (a traceback's first line): then by that error.
        first, stated = said[cluster[0].id], signatures[cluster[0].id]
        error = stated if stated is not None and (by_signature or stated not in first) else first
        found = _first_fix(cluster, sessions, analyzer, book)
        fix = shorten(found.title, 160) if found is not None else None
        mine = compared_terms(analyzer.terms, error)
        # Failed outcomes with this error tell its task type, and which anti-pattern it may already be.
        alike = [o for o, theirs in failed if jaccard(mine, theirs) >= settings.similarity]
        task_types = Counter(o.task_type for o in alike).most_common(1)
        learned.append(
            Finding(
                ERROR_PREFIX + shorten(error, ERROR_CHARS),
                kind="anti_pattern",
                context=seen_context(len(cluster), fix),
                evidence=[o.id for o in cluster],
                confidence=min(0.95, 0.5 + 0.1 * (len(cluster) - 1)),
                task_type=task_types[0][0] if task_types else None,
                error=error,
                fix=fix,
                outcomes=tuple(o.id for o in alike),
            )
        )
    return learned


def _cluster(
    errors: Sequence[Observation], views: Sequence[dict[str, frozenset[str]]], threshold: float
) -> list[tuple[list[Observation], bool]]:
    """Errors grouped: each joins the first group whose first error's words overlap its own by
    `threshold` (Jaccard, as services/common.jaccard computes it) in any of `views` (word sets by
    id; an error missing from a view is not compared in it). Each group comes with whether an error
    joined it only through a later view.

    The words an error shares with each group's first error are counted through an inverted list of
    those words: only groups sharing a word can reach a threshold above 0, and counting is far
    cheaper than comparing every group's set.
    """
    groups: list[tuple[list[Observation], bool]] = []
    heads_by_word: list[dict[str, list[int]]] = [defaultdict(list) for _ in views]
    for error in errors:
        home: tuple[int, bool] | None = None
        for n, (view, heads) in enumerate(zip(views, heads_by_word, strict=True)):
            mine = view.get(error.id)
            if mine is None:
                continue
            shared: Counter[int] = Counter()
            for word in mine:
                shared.update(heads.get(word, ()))
            for i in sorted(shared):
                theirs = view.get(groups[i][0][0].id, frozenset())
                if shared[i] / (len(mine) + len(theirs) - shared[i]) >= threshold:
                    if home is None or i < home[0]:
                        home = (i, n > 0)
                    break
        if home is None:
            for view, heads in zip(views, heads_by_word, strict=True):
                for word in view.get(error.id, ()):
                    heads[word].append(len(groups))
            groups.append(([error], False))
        else:
            members, joined_later = groups[home[0]]
            members.append(error)
            groups[home[0]] = (members, joined_later or home[1])
    return groups


# Where an error states itself: an exception's name ("ModuleNotFoundError: No module named 'x'"),
# or a tool's "error:" / "fatal:" / "panic:" ("error[E0308]: mismatched types", "fatal: not a git repository").
_SIGNATURE = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\b(?:error|fatal|panic)(?:\[\w+\])?:")
_SIGNATURE_TERMS = 3
"""An error statement with fewer words than this ("ValueError" alone) says too little to match on."""


def error_signature(text: str) -> str | None:
    """The error an error observation states: from the last exception name or tool's "error:" in it
    (a traceback ends with the one raised) that says enough, to the end of its line; else None."""
    for found in reversed(list(_SIGNATURE.finditer(text))):
        statement = " ".join(text[found.start() :].split("\n", 1)[0].split()).rstrip(".;,")
        if len(re.findall(r"\w+", statement)) >= _SIGNATURE_TERMS:
            return statement
    return None


def _error_text(error: Observation) -> str:
    """The error as observed: its title, or the first sentence whole when the title is that sentence cut short."""
    if error.title.endswith("…"):
        first = sentences(error.content)[:1]
        if first and " ".join(first[0].split()).startswith(error.title[:-1]):
            return " ".join(first[0].split())
    return error.title


def _first_fix(
    errors: Sequence[Observation], sessions: dict[str, list[Observation]], analyzer: Analyzer, book: CueBook
) -> Observation | None:
    """What fixed the earliest of `errors` that has a fix in its own session (`sessions`: the
    observations of each, in order), as a summary pairs them."""
    for error in errors:
        if fix := pair_fixes(analyzer, [error], sessions[error.session_id], book=book).get(error.id):
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


def conflict(first: str, second: str, analyse: Callable[[str], Iterable[str]]) -> bool:
    """Whether two texts on one topic disagree: one negates, or each gives a number the other lacks for
    something both speak of ("port 5434" against "port 5433", not "port 8080" against "2 GB of memory")."""
    if bool(_NEGATION.search(first)) != bool(_NEGATION.search(second)):
        return True
    mine, theirs = _numbers(first, analyse), _numbers(second, analyse)
    words_a = frozenset(analyse(first))
    words_b = frozenset(analyse(second))
    return _disputes(mine, theirs, words_b) and _disputes(theirs, mine, words_a)


def _disputes(mine: dict[str, frozenset[str]], theirs: dict[str, frozenset[str]], their_words: frozenset[str]) -> bool:
    """Whether `mine` has a number `theirs` lacks, said of something the other text also speaks of.

    A bare number, said of nothing that can be told, counts: the rule cannot tell it is about another thing.
    """
    return any(not about or about & their_words for number, about in mine.items() if number not in theirs)


def _numbers(text: str, analyse: Callable[[str], Iterable[str]]) -> dict[str, frozenset[str]]:
    """Each number in `text` with the words it is said of: up to two before it and one after, in its clause."""
    pieces = _PIECE.findall(text)
    found: dict[str, frozenset[str]] = {}
    for i, piece in enumerate(pieces):
        if piece[0].isdigit():
            before = _words_near(reversed(pieces[:i]), 2, analyse)
            after = _words_near(pieces[i + 1 :], 1, analyse)
            found[piece] = found.get(piece, frozenset()) | before | after
    return found


def _words_near(pieces: Iterable[str], count: int, analyse: Callable[[str], Iterable[str]]) -> frozenset[str]:
    """The analysed words of the first `count` pieces that carry any, up to a clause break."""
    words: set[str] = set()
    for piece in pieces:
        if piece.casefold() in _CLAUSE_BREAKS or count == 0:
            break
        if not piece[0].isdigit() and (terms := set(analyse(piece))):
            words |= terms
            count -= 1
    return frozenset(words)


class Tally:
    """What a reflection counts of the observations it reviews: how many, how many errors, and how
    often each concept came up (in the order first seen, which breaks ties)."""

    def __init__(self) -> None:
        self.observations = 0
        self.errors = 0
        self.concepts: Counter[str] = Counter()

    def add(self, kind: str, concepts: Iterable[str]) -> None:
        self.observations += 1
        self.errors += kind == "error"
        self.concepts.update(concepts)

    @classmethod
    def of(cls, observations: Iterable[Observation]) -> Tally:
        tally = cls()
        for obs in observations:
            tally.add(obs.type, obs.concepts)
        return tally


def insights_of(
    tally: Tally, outcomes: Sequence[Outcome], anti: int, heuristics: int, contradictions: int
) -> list[str]:
    """Plain-language findings on the evidence: counts take in what it had already taught."""
    found = [f"{counted(tally.observations, 'observation')} and {counted(len(outcomes), 'outcome')} reviewed."]
    if outcomes:
        wins = sum(1 for o in outcomes if o.success)
        found.append(f"{wins} of {len(outcomes)} outcomes succeeded.")
    errors = tally.errors
    if errors:
        became = (
            "1 recurring one became an anti-pattern" if anti == 1 else f"{anti} recurring ones became anti-patterns"
        )
        found.append(f"{counted(errors, 'error')} recorded; {became}.")
    if heuristics:
        sequences = counted(heuristics, "recurring successful step sequence")
        found.append(f"{sequences} became {'a heuristic' if heuristics == 1 else 'heuristics'}.")
    if contradictions:
        pairs = "1 pair of memories looks" if contradictions == 1 else f"{contradictions} pairs of memories look"
        found.append(f"{pairs} contradictory; check them with memory_related.")
    if tally.concepts:
        found.append("Most discussed: " + ", ".join(c for c, _ in tally.concepts.most_common(5)) + ".")
    return found
