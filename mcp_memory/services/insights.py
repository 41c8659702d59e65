"""Insights and the project profile: score history, derived lessons, mistake cards, top concepts."""

from __future__ import annotations

from mcp_memory.db import Conn
from mcp_memory.models.learning import (
    CountedName,
    InsightsResult,
    MistakeCardView,
    ProfileResult,
    ScorePoint,
    TaskTypeStats,
)
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository, OutcomeRepository
from mcp_memory.repositories.profile import ProfileRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.services.common import Deps, Service
from mcp_memory.services.compress import shorten
from mcp_memory.services.lessons import LessonService

HISTORY = 10
"""Outcomes shown per task type in a score history."""
PREFERENCE_CHARS = 240
"""A preference in the profile is cut to this many characters."""


class InsightsService(Service):
    """Read-only summaries of what the project has learned and what it is about."""

    def __init__(self, deps: Deps, lessons: LessonService) -> None:
        super().__init__(deps)
        self.lessons = lessons

    async def insights(self, project: str, task_type: str | None, limit: int) -> InsightsResult:
        """Score history, heuristics, anti-patterns, rules and the most seen mistake cards."""
        async with self.db.read() as conn:
            stats = (await self.task_types(conn, project, task_type, limit=limit))[:limit]
            cards = await MistakeCardRepository(conn).top(project, task_type, limit)
        by_kind = {}
        for kind in ("heuristic", "anti_pattern", "rule_works", "rule_avoid"):
            by_kind[kind] = await self.lessons.ranked(project, None, task_type=task_type, kinds=[kind], limit=limit)
        return InsightsResult(
            project=project,
            task_type=task_type,
            task_types=stats,
            heuristics=by_kind["heuristic"],
            anti_patterns=by_kind["anti_pattern"],
            works=by_kind["rule_works"],
            avoid=by_kind["rule_avoid"],
            mistake_cards=[
                MistakeCardView(
                    id=c.id,
                    type=c.type,
                    task=c.task,
                    task_type=c.task_type,
                    wrong_decision=c.wrong_decision,
                    correct_decision=c.correct_decision,
                    why=c.why,
                    seen_count=c.seen_count,
                    last_seen_at=c.last_seen_at,
                )
                for c in cards
            ],
        )

    async def task_types(
        self, conn: Conn, project: str, task_type: str | None = None, limit: int = HISTORY
    ) -> list[TaskTypeStats]:
        """Per task type, most outcomes first: counts, success rate, mean score and the last `limit` scores."""
        outcomes = OutcomeRepository(conn)
        stats = []
        for name, count, successes, mean in await outcomes.task_type_stats(project, task_type):
            history = await outcomes.score_history(project, name, limit)
            stats.append(
                TaskTypeStats(
                    task_type=name,
                    outcomes=count,
                    successes=successes,
                    success_rate=round(successes / count, 4) if count else 0.0,
                    mean_score=round(mean, 4),
                    history=[
                        ScorePoint(outcome_id=i, at=at, score=score, success=success)
                        for i, at, score, success in history
                    ],
                )
            )
        return stats

    async def profile(self, project: str, top: int = 10, active_lessons: int | None = None) -> ProfileResult:
        """What the project is about and how it has gone; `active_lessons` when the caller has just
        ranked the project's lessons (every lesson is read to count the active ones)."""
        if active_lessons is None:
            active_lessons = await self.lessons.active_count(project)
        async with self.db.read() as conn:
            aggregates, sessions = ProfileRepository(conn), SessionRepository(conn)
            concepts = await aggregates.top_values(project, "concepts", top)
            files = await aggregates.top_values(project, "files", top)
            preferences, _ = await MemoryRepository(conn).page(project, ["preference"], True, top, 0)
            reflection = await MetaRepository(conn).reflection(project)
            return ProfileResult(
                project=project,
                sessions=await sessions.count(project),
                observations=await sessions.kept_observations(project),
                memories=await MemoryRepository(conn).count(project, latest_only=True),
                lessons=active_lessons,
                top_concepts=[CountedName(name=n, count=c) for n, c in concepts],
                top_files=[CountedName(name=n, count=c) for n, c in files],
                preferences=[shorten(m.content, PREFERENCE_CHARS) for m in preferences],
                task_types=await self.task_types(conn, project),
                reflected_at=reflection.get("reflected_at"),
                insights=reflection.get("insights", []),
            )
