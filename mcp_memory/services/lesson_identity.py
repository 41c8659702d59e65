"""When two texts are the same lesson: the fingerprint a lesson is stored under, and finding its twin.

A lesson is identified by its text normalised (Unicode, case, whitespace, the punctuation that
frames a sentence), and a derived lesson by its kind and task type as well. Rows stored under the
older rule, which hashed the text as sent and dropped every edge symbol, are recognised and
brought up to date as they are met, so no migration is needed.

What derived lessons are about has an identity too: two strategies are the same when their words
overlap once what each says *not* to do is told apart, and a failure or a recurring error is
another case of the anti-pattern that shares its evidence or, failing that, its error's words.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence

from mcp_memory.db import Tx
from mcp_memory.models.records import Lesson
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.services.common import jaccard
from mcp_memory.services.compress import shorten

# Only what frames a sentence is trimmed: quotes, a list bullet, and closing punctuation. Other
# symbols at an edge carry meaning ("Prefer C++" is not "Prefer C", "Use C#" not "Use C").
_QUOTES = "\"'`“”‘’‚„«»‹›「」『』"
_LEADING = re.compile(rf"^(?:[\s{_QUOTES}¿¡]|[-*•–—](?=\s))+")
_TRAILING = re.compile(rf"[\s{_QUOTES}.,;:!?…。、]+$")
_LEGACY_EDGES = re.compile(r"^[\s\W_]+|[\s\W_]+$")


def normalised(content: str) -> str:
    """Content as fingerprinted: NFKC, case-folded, whitespace collapsed, framing punctuation trimmed.

    NFKC (not just NFC) because it is what the search analyser uses: text that search treats as the
    same words (a composed or decomposed "é", a ligature, full-width letters) is one lesson too.
    """
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", content).casefold())
    return _TRAILING.sub("", _LEADING.sub("", " ".join(text.split())))


def fingerprint(content: str, kind: str = "lesson", task_type: str | None = None) -> str:
    """SHA-256 of the normalised content (see `normalised`).

    Lessons saved by an agent are identified by their text alone. A derived lesson (heuristic,
    anti-pattern, rule) also by its kind and task type, so the same advice learned for two task
    types, or as a rule and as a saved lesson, stays two lessons.
    """
    return _digest(normalised(content), kind, task_type)


def _legacy_fingerprint(content: str, kind: str = "lesson", task_type: str | None = None) -> str:
    """The fingerprint stored before Unicode normalisation, when every edge symbol was dropped."""
    return _digest(_LEGACY_EDGES.sub("", " ".join(content.casefold().split())), kind, task_type)


def _digest(normal: str, kind: str, task_type: str | None) -> str:
    if kind != "lesson":
        normal = f"{kind}\x1f{task_type or ''}\x1f{normal}"
    return hashlib.sha256(normal.encode()).hexdigest()


async def find_twin(
    tx: Tx, project: str, content: str, kind: str = "lesson", task_type: str | None = None
) -> Lesson | None:
    """The stored lesson this content is the same lesson as, if any.

    Fingerprints stored before the current normalisation are brought up to date as they are met,
    so no migration is needed: a row is matched only when its own content normalises to the same
    text, and a stale row in the way of a different lesson is moved to its own fingerprint.
    """
    repo = LessonRepository(tx)
    key = fingerprint(content, kind, task_type)
    found = await repo.by_fingerprint(project, key)
    if found is not None:
        own = fingerprint(found.content, found.kind, found.task_type)
        if own == key:
            return found
        # Stored under the old rule, it took this key from a different lesson ("Prefer C++" for "Prefer C").
        taken = await repo.by_fingerprint(project, own) is not None
        await repo.set_fingerprint(found.id, own if not taken else f"stale:{found.id}")
        tx.changed("lesson", found.id, "rekey")
        return None
    # The old rule hashed the text as sent: try it composed and decomposed as well.
    for form in dict.fromkeys((content, *(unicodedata.normalize(f, content) for f in ("NFC", "NFD")))):
        legacy = _legacy_fingerprint(form, kind, task_type)
        found = None if legacy == key else await repo.by_fingerprint(project, legacy)
        if found is not None and fingerprint(found.content, found.kind, found.task_type) == key:
            await repo.set_fingerprint(found.id, key)
            tx.changed("lesson", found.id, "rekey")
            return found.model_copy(update={"fingerprint": key})
    return None


async def rename(tx: Tx, lesson: Lesson, content: str, task_type: str | None) -> Lesson:
    """The lesson re-keyed under a new text and task type (to be stored by the caller), or as it was
    when another lesson already has that identity."""
    key = fingerprint(content, lesson.kind, task_type)
    repo = LessonRepository(tx)
    if key != lesson.fingerprint:
        if await repo.by_fingerprint(lesson.project, key) is not None:
            return lesson
        await repo.set_fingerprint(lesson.id, key)
        tx.changed("lesson", lesson.id, "rekey")
    return lesson.model_copy(update={"content": content, "task_type": task_type, "fingerprint": key})


# -- strategies ---------------------------------------------------------------------------------

# What a strategy says not to do. Such a cue negates the rest of its clause, which ends at
# punctuation or at "then", "and", "but" or a lone "instead" ("skip the reset and run migrate").
_NEGATION = re.compile(
    r"\b(?:without|not|no|never|none|nor|cannot|\w+n['’]t|dont|doesnt|didnt|isnt|cant|wont|"
    r"skip(?:s|ped|ping)?|avoid(?:s|ed|ing)?|instead\s+of|rather\s+than)\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[,;:.!?()\[\]\n]+|\b(?:then|and|but|instead(?!\s+of))\b", re.IGNORECASE)


def strategy_terms(analyse: Callable[[str], Iterable[str]], text: str) -> frozenset[str]:
    """The words of a strategy, those it says not to do marked apart: "run migrate without resetting
    the database" shares "run migrate" with "reset the database, then run migrate", not "reset"."""
    terms: set[str] = set()
    for clause in _CLAUSE.split(text):
        cue = _NEGATION.search(clause)
        terms.update(analyse(clause if cue is None else clause[: cue.start()]))
        if cue is not None:
            terms.update(f"not {term}" for term in analyse(clause[cue.end() :]))  # a space: no term has one
    return frozenset(terms)


# -- anti-patterns ------------------------------------------------------------------------------

ERROR_PREFIX = "Recurring error: "
"""How an anti-pattern memory_reflect finds in error observations begins; the error follows."""
FROM_ERROR = "the approach that led to: "
"""What an anti-pattern drawn from failures without a strategy says to avoid, before their error."""
_FIXED_BY = " Fixed by: "


def evidence_of(lesson: Lesson, key: str = "evidence") -> set[str]:
    """The ids of the records a derived lesson was learned from: those memory_reflect saw, or under
    "failed_outcomes" the failures an anti-pattern counts (kept apart from reflect's evidence)."""
    ids = lesson.source.get(key)
    return {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()


RULE_OUTCOMES = "outcomes_saying"
"""Where a works/avoid rule said by more than one outcome keeps them all (its "outcome" is the latest)."""


def rule_outcomes(source: dict[str, object]) -> list[str]:
    """The outcomes a rule stands on: every one that said it, or the one it was drawn from."""
    ids = source.get(RULE_OUTCOMES)
    if isinstance(ids, list):
        return [i for i in ids if isinstance(i, str)]
    latest = source.get("outcome")
    return [latest] if isinstance(latest, str) else []


def from_outcomes(lesson: Lesson) -> bool:
    """Whether failed outcomes drew (or took over) this anti-pattern: it counts their failures."""
    return "failures" in lesson.source


def error_of(lesson: Lesson) -> str:
    """The error an anti-pattern is about: the last one its outcomes recorded, or the one reflect saw."""
    error = lesson.source.get("error")
    return error if isinstance(error, str) else lesson.content.removeprefix(ERROR_PREFIX)


def fix_of(lesson: Lesson) -> str | None:
    """The fix memory_reflect saw follow the error, if any (kept in its source once outcomes share it)."""
    fix = lesson.source.get("fix")
    if isinstance(fix, str):
        return fix
    _, found, after = (lesson.context or "").partition(_FIXED_BY)
    return (after or None) if found else None


def named_strategy(lesson: Lesson) -> str | None:
    """The strategy an outcome-derived anti-pattern says to avoid (None when it names an error instead)."""
    prefix = f"Avoid in {lesson.task_type} tasks: "
    if not lesson.content.startswith(prefix):
        return None
    pattern = lesson.content.removeprefix(prefix)
    return None if pattern.startswith(FROM_ERROR) else pattern


def heuristic_strategy(lesson: Lesson) -> str:
    """The strategy an outcome-derived heuristic recommends: the one its text names ("" for one
    memory_reflect drew from steps). Its source's was once overwritten by each similar strategy
    counted toward it, so the text, never rewritten, is what identifies it."""
    strategy = lesson.source.get("strategy")
    if not isinstance(strategy, str):
        return ""
    prefix = f"For {lesson.task_type} tasks: "
    return lesson.content.removeprefix(prefix) if lesson.content.startswith(prefix) else strategy


def tried_of(lesson: Lesson) -> list[str]:
    """The different strategies the failures of an anti-pattern about an error tried."""
    tried = lesson.source.get("tried")
    return [t for t in tried if isinstance(t, str)] if isinstance(tried, list) else []


def seen_context(seen: int, fix: str | None) -> str:
    """Why a recurring error is an anti-pattern, as memory_reflect puts it."""
    return f"Seen {seen} times.{_FIXED_BY}{fix}" if fix else f"Seen {seen} times."


def why_bad(
    failures: int,
    error: str,
    alternative: str | None,
    fix: str | None = None,
    tried: Sequence[str] = (),
    content: str = "",
) -> str:
    """Why an anti-pattern's strategy is bad, as failed outcomes put it (with the strategies `tried`
    when they differ; the error unless its `content` already says it), and what to do instead: a
    better strategy from successful ones, and the fix memory_reflect saw."""
    said = " ".join(shorten(error, 200).rstrip("…").split()).casefold()
    why = f"Failed {failures} times"
    if said not in " ".join(content.split()).casefold():
        why += f" with errors like: {shorten(error, 200)}"
    if tried:
        why += ". Tried: " + "; ".join(tried)
    if alternative:
        why += f". Better: {alternative}"
    if fix:  # last: fix_of reads it back from the end
        return f"{why}.{_FIXED_BY}{fix}"
    return why if alternative else f"{why}. No successful alternative recorded yet."


async def anti_patterns_for(tx: Tx, project: str, task_type: str | None) -> list[Lesson]:
    """The anti-patterns (soft-deleted too) a problem of this task type may be a case of: the task
    type's and those of none (reflect's); every one when the task type is not known."""
    found = await LessonRepository(tx).find([project], kinds=["anti_pattern"], include_deleted=True)
    return [lesson for lesson in found if task_type is None or lesson.task_type in (None, task_type)]


def same_problem(
    known: Iterable[Lesson],
    words: Callable[[str], frozenset[str]],
    error: str,
    evidence: Iterable[str],
    similarity: float,
) -> Lesson | None:
    """Of `known`, the anti-pattern this error (seen in `evidence`) is another case of, if any.

    Shared evidence comes first (the most shared), then the most similar error; a live lesson
    before a soft-deleted one, so the same problem is not learned twice over.
    """
    mine, ids = words(error), set(evidence)
    best, best_rank = None, (0, False, 0.0)
    for lesson in known:
        seen = evidence_of(lesson) | evidence_of(lesson, "failed_outcomes")
        shared, overlap = len(ids & seen), jaccard(mine, words(error_of(lesson)))
        rank = (shared, lesson.deleted_at is None, overlap)
        if (shared or overlap >= similarity) and rank > best_rank:
            best, best_rank = lesson, rank
    return best
