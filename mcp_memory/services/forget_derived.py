"""What memory_forget takes with a record: what was learned from it alone, or quotes its words.

A derived lesson, a mistake card or the profile's reflection may repeat a forgotten record's text;
forgetting it must not leave that text behind. Learning is re-derived from what remains (the next
outcome or reflect finds a pattern that still recurs), so nothing that still stands is lost for good.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from mcp_memory.db import Conn, Tx
from mcp_memory.ids import kind_of
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository, OutcomeRepository
from mcp_memory.services.lesson_identity import rule_outcomes

_EVIDENCE_KINDS = frozenset({"observation", "outcome", "memory", "session"})
_QUOTED = ("strategy", "error")
"""Outcome fields a heuristic (its strategy) or an anti-pattern (its error) quotes in its source."""


@dataclass
class Derived:
    """What goes with the records a forget deletes."""

    lessons: list[str] = field(default_factory=list)
    mistake_cards: list[str] = field(default_factory=list)
    reflection: bool = False
    """Whether the project's reflection insights go (they may quote what was forgotten)."""


async def derived_from(conn: Conn, project: str, doomed: AbstractSet[str]) -> Derived:
    """The derived records of `project` that stand on, or quote, the `doomed` records."""
    found = Derived()
    if not any(kind_of(i) in _EVIDENCE_KINDS or kind_of(i) is None for i in doomed):
        return found  # slots, actions and relations teach nothing
    outcomes = sorted(i for i in doomed if kind_of(i) == "outcome")
    repo, going = OutcomeRepository(conn), set(outcomes)
    # A strategy or error that an outcome which stays says too is not the forgotten one's alone.
    quoted = {
        (name, text)
        for o in await repo.get_many(outcomes, project)
        for name, text in (("strategy", o.strategy), ("error", o.error))
        if text and not await repo.said_elsewhere(project, name, text, going)
    }
    for lesson in await LessonRepository(conn).find([project], include_deleted=True):
        source = lesson.source
        evidence = source.get("evidence")
        failed = [i for i in source.get("failed_outcomes") or () if isinstance(i, str)]
        if (
            (isinstance(evidence, list) and not doomed.isdisjoint(e for e in evidence if isinstance(e, str)))
            # one of the outcomes that said it, with every other still on record (one forgotten before
            # counts for nothing)
            or (not doomed.isdisjoint(said := rule_outcomes(source)) and not set(await repo.on_record(said)) - doomed)
            or (failed and all(i in doomed for i in failed))  # every failure an anti-pattern counts
            or any((name, source.get(name)) in quoted for name in _QUOTED)
        ):
            found.lessons.append(lesson.id)
    found.mistake_cards = await MistakeCardRepository(conn).only_from(outcomes) if outcomes else []
    found.reflection = bool(await reflection_insights(conn, project))
    return found


async def reflection_insights(conn: Conn, project: str) -> list[str]:
    """The insights the project's last reflection keeps on its profile."""
    insights = (await MetaRepository(conn).reflection(project)).get("insights")
    return [str(i) for i in insights] if isinstance(insights, list) else []


async def clear_reflection(tx: Tx, project: str, at: str) -> None:
    """Empty the profile's reflection insights, stamped `at` so no older copy's import restores them."""
    await MetaRepository(tx).keep_reflection(project, at, [])
    tx.changed("profile", project, "forget")
