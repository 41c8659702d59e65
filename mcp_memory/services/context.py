"""The start-of-session context: the best of everything, packed into a token budget.

Sections, in order: pinned slots, project profile, lessons (heuristics and anti-patterns included)
ranked by confidence × relevance, the most seen mistake cards, recent sessions, and memories
relevant to the query or task type (else the most important ones). A query or task type focuses,
never filters: what matches it comes first, and the best of the rest follow while budget remains.
Tokens are estimated as ceil(characters / 4) of the final text, which never exceeds the budget.
Each section is cut at an item boundary; what did not fit is listed with its public id so the
agent can fetch it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypeVar

from mcp_memory.ids import public_id
from mcp_memory.models.learning import LessonView, ProfileResult
from mcp_memory.models.organising import ContextResult, ContextSection, OmittedItem
from mcp_memory.models.records import Memory, MistakeCard
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.search.index import SearchFilter
from mcp_memory.services.common import GLOBAL_PROJECT, Deps, Service
from mcp_memory.services.compress import shorten
from mcp_memory.services.insights import InsightsService
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.slots import SlotService

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """The documented estimator: one token per four characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class _Item:
    text: str
    id: str | None
    title: str


@dataclass
class _Section:
    name: str
    heading: str
    items: list[_Item] = field(default_factory=list)


class ContextService(Service):
    """Compiles the context from the other services' reads."""

    def __init__(self, deps: Deps, lessons: LessonService, slots: SlotService, insights: InsightsService) -> None:
        super().__init__(deps)
        self.lessons = lessons
        self.slots = slots
        self.insights = insights

    async def compile(
        self, project: str, *, query: str | None = None, task_type: str | None = None, budget: int | None = None
    ) -> ContextResult:
        """The context for a session in `project`, focused on `query` / `task_type` when given."""
        budget = budget or self.settings.context_budget
        sections = [
            await self._pinned(project),
            self._profile(await self.insights.profile(project, top=8)),
            await self._lessons(project, query, task_type),
            await self._mistakes(project, task_type),
            await self._sessions(project),
            await self._memories(project, query, task_type),
        ]
        text = f"# Memory for project {project}\n"
        report: list[ContextSection] = []
        omitted: list[OmittedItem] = []
        for section in sections:
            included = 0
            for position, item in enumerate(section.items):
                block = (section.heading if included == 0 else "") + item.text + "\n"
                if estimate_tokens(text + block) > budget:
                    omitted += [
                        OmittedItem(
                            section=section.name,
                            id=i.id,
                            title=i.title,
                            fetch=f"memory_smart_search(ids=[{public_id(i.id)!r}])" if i.id else "memory_profile()",
                        )
                        for i in section.items[position:]
                    ]
                    break
                text += block
                included += 1
            if section.items:
                report.append(
                    ContextSection(
                        name=section.name,
                        included=included,
                        omitted=len(section.items) - included,
                        tokens=estimate_tokens("".join(i.text + "\n" for i in section.items[:included])),
                    )
                )
        return ContextResult(
            project=project, text=text, tokens=estimate_tokens(text), budget=budget, sections=report, omitted=omitted
        )

    async def _pinned(self, project: str) -> _Section:
        section = _Section("pinned_slots", "\n## Pinned\n")
        for slot in await self.slots.pinned(project):
            if slot.content.strip():
                section.items.append(_Item(f"### {slot.name}\n{slot.content.strip()}", slot.id, slot.name))
        return section

    @staticmethod
    def _profile(profile: ProfileResult) -> _Section:
        section = _Section("profile", "\n## Project profile\n")
        if not (profile.sessions or profile.memories or profile.lessons):
            return section
        lines = [
            f"{profile.sessions} sessions, {profile.observations} observations, "
            f"{profile.memories} memories, {profile.lessons} lessons."
        ]
        if profile.top_concepts:
            lines.append("Concepts: " + ", ".join(c.name for c in profile.top_concepts))
        if profile.top_files:
            lines.append("Files: " + ", ".join(f.name for f in profile.top_files))
        for stats in profile.task_types[:5]:
            lines.append(
                f"{stats.task_type}: {stats.successes}/{stats.outcomes} succeeded, mean score {stats.mean_score:.2f}"
            )
        lines += [f"Preference: {shorten(p, 160)}" for p in profile.preferences[:5]]
        section.items.append(_Item("\n".join(lines), None, "project profile"))
        return section

    async def _lessons(self, project: str, query: str | None, task_type: str | None) -> _Section:
        section = _Section("lessons", "\n## Lessons\n")
        focus = query or (task_type.replace("_", " ") if task_type else None)
        found = []
        for scope, limit in ((project, 10), (GLOBAL_PROJECT, 5)):
            if scope == GLOBAL_PROJECT and project == GLOBAL_PROJECT:
                continue
            # The focus puts what matches first; then what applies to the task type (its own lessons and
            # untyped ones), then the best of the rest, each by confidence.
            relevant = await self.lessons.ranked(scope, focus, task_type=task_type, limit=limit) if focus else []
            applicable = await self.lessons.ranked(scope, None, task_type=task_type, limit=limit)
            rest = await self.lessons.ranked(scope, None, limit=limit) if task_type else []
            found += _unique(relevant + applicable + rest)[:limit]
        for lesson in found:
            detail = f" — {lesson.context}" if lesson.kind == "anti_pattern" and lesson.context else ""
            line = f"- [{lesson.kind} {lesson.confidence:.2f}] {shorten(lesson.content, 300)}{detail} ({lesson.id})"
            section.items.append(_Item(line, lesson.id, shorten(lesson.content, 80)))
        return section

    async def _mistakes(self, project: str, task_type: str | None) -> _Section:
        section = _Section("mistake_cards", "\n## Mistakes to avoid\n")
        async with self.db.read() as conn:
            repo = MistakeCardRepository(conn)
            # The task type's cards first, then the most seen of the others.
            focused = await repo.top(project, task_type, 5) if task_type else []
            cards = _unique(focused + await repo.top(project, None, 5))[:5]
        for c in cards:
            line = f"- Seen {c.seen_count}x, {c.type} in {shorten(c.task, 80)!r}: do {shorten(c.correct_decision, 160)}"
            if c.wrong_decision:
                line += f", not {shorten(c.wrong_decision, 120)}"
            if c.why:
                line += f" ({shorten(c.why, 120)})"
            section.items.append(_Item(line, c.id, shorten(c.correct_decision, 80)))
        return section

    async def _sessions(self, project: str) -> _Section:
        section = _Section("sessions", "\n## Recent sessions\n")
        async with self.db.read() as conn:
            found, _ = await SessionRepository(conn).page(project, "all", "", 5, 0)
        for s in found:
            summary = s.summary or s.folded_digest or ""
            kept = s.observation_count - s.folded_count
            line = f"- {s.last_activity_at[:10]} {s.title or public_id(s.id)} ({kept} observations)"
            if summary:
                line += f": {shorten(summary, 400)}"
            section.items.append(_Item(line, s.id, s.title or public_id(s.id)))
        return section

    async def _memories(self, project: str, query: str | None, task_type: str | None) -> _Section:
        section = _Section("memories", "\n## Memories\n")
        focus = query or (task_type.replace("_", " ") if task_type else None)
        vector = await self.query_vector(focus) if focus else None
        async with self.db.read() as conn:
            repo = MemoryRepository(conn)
            memories = await repo.important(project, 10)
            if focus:
                hits = self.deps.index.search(
                    project, focus, SearchFilter(kinds=frozenset({"memory"})), 10, self.now().timestamp(), vector
                )
                memories = _unique(await repo.get_many([h.doc_id for h in hits], project) + memories)[:10]
        for m in memories:
            line = f"- [{m.kind}] {shorten(m.content, 300)} ({m.id})"
            section.items.append(_Item(line, m.id, m.title or shorten(m.content, 80)))
        return section


_T = TypeVar("_T", LessonView, Memory, MistakeCard)


def _unique(items: list[_T]) -> list[_T]:
    """First occurrence of each record, in order."""
    seen: set[str] = set()
    out = []
    for item in items:
        if item.id not in seen:
            seen.add(item.id)
            out.append(item)
    return out
