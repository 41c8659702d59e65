"""Consolidation's upkeep of heuristics: prune the old outcomes a lesson stands for, drop heuristics
that no longer hold (see services/consolidate.py for the pass they belong to)."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from mcp_memory.clock import to_iso
from mcp_memory.db import Tx
from mcp_memory.models.loop import Change
from mcp_memory.models.records import Lesson, Outcome
from mcp_memory.repositories.forgotten import ForgottenRepository
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.outcomes import OutcomeRepository
from mcp_memory.repositories.relations import RelationRepository
from mcp_memory.services.common import Deps, Service, earlier_by, jaccard
from mcp_memory.services.lesson_identity import evidence_of, heuristic_strategy
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.outcomes import FAILED, source_count
from mcp_memory.services.relations import drop_relations
from mcp_memory.services.strategies import Strategies


class HeuristicUpkeep(Service):
    """The consolidation steps that weigh heuristics against their evidence."""

    def __init__(self, deps: Deps, lessons: LessonService) -> None:
        super().__init__(deps)
        self.lessons = lessons

    async def prune_outcomes(self, tx: Tx, project: str) -> list[Change]:
        """Prune outcomes past the retention that a holding heuristic or a live anti-pattern counts."""
        cutoff = to_iso(earlier_by(self.now(), timedelta(days=1), self.settings.outcome_retention_days))
        lessons = await LessonRepository(tx).find([project], kinds=["heuristic", "anti_pattern"])
        # Only a heuristic that holds outlives this pass (the next step drops the rest), so only
        # such a one may stand in for the outcomes it was drawn from.
        holding = [
            lesson
            for lesson in lessons
            if lesson.kind == "heuristic"
            and not self.lessons.faded(lesson, self.lessons.confidence(lesson))
            and self._holds(lesson)
        ]
        learned = {lesson.task_type for lesson in holding}
        old = [o for o in await OutcomeRepository(tx).older_than(project, cutoff) if o.task_type in learned]
        counted_in = self._counted_in(holding, old)
        # An outcome a live heuristic or anti-pattern names as its evidence is known by it; any other
        # (a strategy no heuristic shares, an error none records) is evidence nothing keeps, so it stays.
        standing = {lesson.id for lesson in holding}
        named_by = {
            outcome_id: lesson.id
            for lesson in reversed(lessons)  # oldest first: the newest lesson naming an outcome is the one given
            if lesson.id in standing or (lesson.kind == "anti_pattern" and lesson.deleted_at is None)
            for outcome_id in evidence_of(lesson) | evidence_of(lesson, FAILED)
        }
        keep = await RelationRepository(tx).pointed_at([o.id for o in old])
        doomed = [o for o in old if o.id not in keep and (o.id in counted_in or o.id in named_by)]
        await self._carry_tallies(tx, holding, doomed, counted_in)
        ids = [o.id for o in doomed]
        # Noted as forgotten, as memory_forget would: a copy made before this pass brings none back
        # (its tally would count them twice, live and pruned).
        await ForgottenRepository(tx).remember("outcome", ids, self.now_iso())
        await OutcomeRepository(tx).prune(ids, self.now_iso())
        await drop_relations(tx, ids)
        changes = []
        for outcome_id in ids:
            tx.changed("outcome", outcome_id, "prune")
            lessons_of = dict.fromkeys(i for i in (counted_in.get(outcome_id), named_by.get(outcome_id)) if i)
            detail = "its task type has a heuristic that holds; counted in " + " and ".join(lessons_of)
            changes.append(Change(kind="outcome", action="pruned", id=outcome_id, detail=detail))
        return changes

    def _counted_in(self, heuristics: list[Lesson], outcomes: list[Outcome]) -> dict[str, str]:
        """The heuristic each outcome's tally counts it in: the one of its task type whose strategy
        is most like its own, when the same strategy (services/strategies.py)."""
        judge = Strategies(self.deps.index, self.settings)
        records = judge.records(outcomes)
        counted_in: dict[str, str] = {}
        for outcome in outcomes:
            if not outcome.strategy:
                continue  # no strategy, so no heuristic counted it
            words = judge.strategy_words(outcome.strategy)
            scored = [
                (jaccard(words, judge.strategy_words(theirs)), h.id)
                for h in heuristics
                if h.task_type == outcome.task_type
                and judge.same(outcome.strategy, theirs := heuristic_strategy(h), records)
            ]
            best = max(scored, default=None)
            if best is not None:
                counted_in[outcome.id] = best[1]
        return counted_in

    async def _carry_tallies(
        self, tx: Tx, heuristics: list[Lesson], doomed: list[Outcome], counted_in: dict[str, str]
    ) -> None:
        """Move pruned outcomes from the live tally of the heuristic they support to its pruned tally.

        A heuristic's `outcomes` / `successes` count the stored outcomes of a similar strategy; what
        the pruned ones showed lives on in `pruned_outcomes` / `pruned_successes`, so its evidence
        outlives them.
        """
        moved: dict[str, list[Outcome]] = defaultdict(list)
        for outcome in doomed:
            if outcome.id in counted_in:
                moved[counted_in[outcome.id]].append(outcome)
        for heuristic in heuristics:
            if heuristic.id not in moved:
                continue
            gone, won = len(moved[heuristic.id]), sum(1 for o in moved[heuristic.id] if o.success)
            source = heuristic.source | {
                "outcomes": max(0, source_count(heuristic.source, "outcomes") - gone),
                "successes": max(0, source_count(heuristic.source, "successes") - won),
                "pruned_outcomes": source_count(heuristic.source, "pruned_outcomes") + gone,
                "pruned_successes": source_count(heuristic.source, "pruned_successes") + won,
            }
            await self.lessons.store(
                tx, heuristic.model_copy(update={"source": source, "updated_at": self.now_iso()}), "update"
            )

    async def drop_heuristics(self, tx: Tx, project: str) -> list[Change]:
        """Soft-delete heuristics whose evidence no longer holds (unless a relation points at them)."""
        changes = []
        stamp = self.now_iso()
        heuristics = await LessonRepository(tx).find([project], kinds=["heuristic"])
        keep = await RelationRepository(tx).pointed_at([h.id for h in heuristics])
        for lesson in heuristics:
            if self._holds(lesson) or lesson.id in keep:
                continue
            await self.lessons.store(tx, lesson.model_copy(update={"deleted_at": stamp, "updated_at": stamp}), "drop")
            detail = f"confidence {evidence_share(lesson):.2f}"
            changes.append(Change(kind="lesson", action="dropped", id=lesson.id, detail=detail))
        return changes

    def _holds(self, heuristic: Lesson) -> bool:
        """Whether a heuristic's evidence still supports it (its age aside: decay is the fade rule's)."""
        return evidence_share(heuristic) > self.settings.heuristic_min_success


def evidence_share(heuristic: Lesson) -> float:
    """The success share a heuristic's evidence gives it, before any time decay.

    Outcome-derived heuristics keep their tally (`outcomes`, `successes`, plus the `pruned_…`
    counts of outcomes consolidation has pruned) and reflected ones their `share`; for one that has
    neither, its stored confidence is the best record there is.
    """
    source = heuristic.source
    outcomes = source_count(source, "outcomes") + source_count(source, "pruned_outcomes")
    if outcomes > 0:
        return (source_count(source, "successes") + source_count(source, "pruned_successes")) / outcomes
    share = source.get("share")
    if isinstance(share, int | float):
        return float(share)
    return heuristic.confidence
