"""What memory_forget leaves of the learning drawn from outcomes: heuristics and anti-patterns that
counted a forgotten outcome are recounted without it, so none overstates its evidence or keeps a
forgotten failure's id, and one whose evidence no longer holds is retired (restorable, as decay is).

Lessons that stand on the forgotten records alone, or quote them, go with them (forget_derived.py);
this is for those that stand on others too.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.db import Tx
from mcp_memory.models.records import Lesson, Outcome
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.outcomes import OutcomeRepository
from mcp_memory.services.common import Deps, Service
from mcp_memory.services.compress import shorten
from mcp_memory.services.lesson_identity import (
    evidence_of,
    fix_of,
    from_outcomes,
    heuristic_strategy,
    named_strategy,
    tried_of,
    why_bad,
)
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.outcomes import FAILED, TRIED_CHARS, anti_pattern_confidence, source_count, worked
from mcp_memory.services.strategies import Strategies, Tally


class Recount(Service):
    """Recounts the heuristics and anti-patterns of the task types outcomes were forgotten from."""

    def __init__(self, deps: Deps, lessons: LessonService) -> None:
        super().__init__(deps)
        self.lessons = lessons
        self.strategies = Strategies(deps.index, deps.settings)

    async def after_forget(self, tx: Tx, gone: Sequence[Outcome]) -> list[str]:
        """Bring the live lessons of the `gone` outcomes' task types in line with what stays on
        record (call once they are deleted); returns the ids of the lessons changed."""
        changed = []
        for project, task_type in sorted({(o.project, o.task_type) for o in gone}):
            mine = [o for o in gone if (o.project, o.task_type) == (project, task_type)]
            peers = await OutcomeRepository(tx).evidence(project, task_type)
            for lesson in await LessonRepository(tx).find(
                [project], kinds=["heuristic", "anti_pattern"], task_type=task_type
            ):
                if lesson.kind == "heuristic":
                    done = await self._heuristic(tx, lesson, peers, mine)
                else:
                    done = from_outcomes(lesson) and await self._anti_pattern(tx, lesson, peers, mine)
                if done:
                    changed.append(lesson.id)
        return changed

    async def _heuristic(self, tx: Tx, lesson: Lesson, peers: Sequence[Outcome], gone: Sequence[Outcome]) -> bool:
        """Take the `gone` outcomes' share out of a heuristic's tally; retire it when it no longer holds."""
        strategy = heuristic_strategy(lesson)  # its text names it; an older source may name a similar one
        before, after = self.strategies.tally([*peers, *gone], strategy), self.strategies.tally(peers, strategy)
        lost = Tally(before.outcomes - after.outcomes, before.successes - after.successes)
        if not lost.outcomes:
            return False
        source = lesson.source
        live = Tally(
            max(0, source_count(source, "outcomes") - lost.outcomes),
            max(0, source_count(source, "successes") - lost.successes),
        )
        tally = Tally(
            live.outcomes + source_count(source, "pruned_outcomes"),
            live.successes + source_count(source, "pruned_successes"),
        )
        figures: dict[str, object] = {"outcomes": live.outcomes, "successes": live.successes}
        await self._settle(tx, lesson, self.strategies.holds(tally), tally.share, figures, worked(tally))
        return True

    async def _anti_pattern(self, tx: Tx, lesson: Lesson, peers: Sequence[Outcome], gone: Sequence[Outcome]) -> bool:
        """Drop the `gone` failures from an anti-pattern's count, and a forgotten success from its
        alternative; retire it when too few failures are left."""
        ids, gone_ids = evidence_of(lesson, FAILED), {o.id for o in gone}
        alternative = lesson.source.get("alternative")
        forgotten_alternative = isinstance(alternative, str) and any(o.strategy == alternative for o in gone)
        if ids.isdisjoint(gone_ids) and not forgotten_alternative:
            return False
        kept = ids - gone_ids
        failing = [o for o in peers if o.id in kept]
        if forgotten_alternative:
            alternative = self.strategies.better(peers, failing, named_strategy(lesson))
        # A strategy only forgotten failures tried is not quoted any more.
        said = {shorten(o.strategy, TRIED_CHARS) for o in failing if o.strategy}
        dropped = {shorten(o.strategy, TRIED_CHARS) for o in gone if o.strategy}
        tried = [t for t in tried_of(lesson) if t in said or t not in dropped]
        failures = len(kept) if ids else source_count(lesson.source, "failures")
        error = str(lesson.source.get("error", ""))
        figures: dict[str, object] = {"failures": failures, "alternative": alternative, FAILED: sorted(kept)}
        if "tried" in lesson.source:
            figures["tried"] = tried
        better = alternative if isinstance(alternative, str) else None
        context = why_bad(failures, error, better, fix_of(lesson), tried, lesson.content)
        holds = failures >= self.settings.anti_pattern_min_failures
        await self._settle(tx, lesson, holds, anti_pattern_confidence(failures), figures, context)
        return True

    async def _settle(
        self, tx: Tx, lesson: Lesson, holds: bool, confidence: float, figures: dict[str, object], context: str
    ) -> None:
        """Store a recounted lesson's figures: as it stands (not a reinforcement) or retired."""
        if not holds:
            await self.lessons.retire(tx, lesson, confidence=confidence, source=figures, context=context)
            return
        update: dict[str, object] = {"confidence": confidence, "decayed_at": None, "updated_at": self.now_iso()}
        update |= {"source": lesson.source | figures, "context": context}
        await self.lessons.store(tx, lesson.model_copy(update=update), "update")
