"""SQL for lessons (including heuristics, anti-patterns and rules, which are lessons of a kind)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from mcp_memory.db import Row
from mcp_memory.models.records import Lesson
from mcp_memory.repositories.base import Repository, dump_json, placeholders, row_dict

_COLUMNS = (
    "id, project, agent_id, kind, content, context, tags, task_type, confidence, reinforcements, fingerprint, "
    "last_reinforced_at, decayed_at, deleted_at, source, created_at, updated_at"
)


# The later of the two times a confidence was set, compared as text as LessonService.confidence does.
_STANDING_COLUMNS = (
    "id, task_type, confidence, reinforcements, max(last_reinforced_at, coalesce(decayed_at, '')) AS since, "
    "deleted_at IS NOT NULL AS deleted"
)


class LessonStanding(NamedTuple):
    """What ranks a lesson (its confidence as stored and since when, whether it is deleted), without its text:
    cheap to read for every lesson of a scope, so only the page shown is read whole."""

    id: str
    task_type: str | None
    confidence: float
    reinforcements: int
    since: str
    deleted: bool


def _lesson(row: Row) -> Lesson:
    return Lesson(**row_dict(row, ("tags", "source")))


def _where(
    scopes: Sequence[str], kinds: Sequence[str] | None, task_type: str | None, include_deleted: bool
) -> tuple[str, list[object]]:
    """The WHERE clause and parameters selecting lessons of the scopes, kinds and task type."""
    clauses = [f"project IN ({placeholders(len(scopes))})"]
    params: list[object] = list(scopes)
    if kinds:
        clauses.append(f"kind IN ({placeholders(len(kinds))})")
        params.extend(kinds)
    if task_type is not None:
        clauses.append("task_type = ?")
        params.append(task_type)
    if not include_deleted:
        clauses.append("deleted_at IS NULL")
    return " AND ".join(clauses), params


class LessonRepository(Repository):
    """Lessons of one or more scopes (a project, and the global scope "*")."""

    async def add(self, lesson: Lesson) -> None:
        await self.conn.execute(
            f"INSERT INTO lessons ({_COLUMNS}) VALUES ({placeholders(17)})",
            (
                lesson.id,
                lesson.project,
                lesson.agent_id,
                lesson.kind,
                lesson.content,
                lesson.context,
                dump_json(lesson.tags),
                lesson.task_type,
                lesson.confidence,
                lesson.reinforcements,
                lesson.fingerprint,
                lesson.last_reinforced_at,
                lesson.decayed_at,
                lesson.deleted_at,
                dump_json(lesson.source),
                lesson.created_at,
                lesson.updated_at,
            ),
        )

    async def update(self, lesson: Lesson) -> None:
        """Write back every mutable field of a lesson."""
        await self.conn.execute(
            "UPDATE lessons SET kind = ?, content = ?, context = ?, tags = ?, task_type = ?, confidence = ?, "
            "reinforcements = ?, last_reinforced_at = ?, decayed_at = ?, deleted_at = ?, source = ?, updated_at = ? "
            "WHERE id = ?",
            (
                lesson.kind,
                lesson.content,
                lesson.context,
                dump_json(lesson.tags),
                lesson.task_type,
                lesson.confidence,
                lesson.reinforcements,
                lesson.last_reinforced_at,
                lesson.decayed_at,
                lesson.deleted_at,
                dump_json(lesson.source),
                lesson.updated_at,
                lesson.id,
            ),
        )

    async def get_or_none(self, lesson_id: str, scopes: Sequence[str]) -> Lesson | None:
        row = await self.conn.fetchone(
            f"SELECT {_COLUMNS} FROM lessons WHERE id = ? AND project IN ({placeholders(len(scopes))})",
            (lesson_id, *scopes),
        )
        return None if row is None else _lesson(row)

    async def get_many(self, ids: Sequence[str], scopes: Sequence[str]) -> list[Lesson]:
        rows = await self.fetch_in(
            f"SELECT {_COLUMNS} FROM lessons WHERE +project IN ({placeholders(len(scopes))}) AND id IN ({{ids}})",
            ids,
            scopes,
        )
        by_id = {r["id"]: _lesson(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def by_fingerprint(self, project: str, fingerprint: str) -> Lesson | None:
        row = await self.conn.fetchone(
            f"SELECT {_COLUMNS} FROM lessons WHERE project = ? AND fingerprint = ?", (project, fingerprint)
        )
        return None if row is None else _lesson(row)

    async def set_fingerprint(self, lesson_id: str, fingerprint: str) -> None:
        """Re-key a lesson whose stored fingerprint came from an older normalisation."""
        await self.conn.execute("UPDATE lessons SET fingerprint = ? WHERE id = ?", (fingerprint, lesson_id))

    async def find(
        self,
        scopes: Sequence[str],
        *,
        kinds: Sequence[str] | None = None,
        task_type: str | None = None,
        include_deleted: bool = False,
    ) -> list[Lesson]:
        """Lessons of the scopes, optionally of some kinds and one task type, newest first."""
        where, params = _where(scopes, kinds, task_type, include_deleted)
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM lessons WHERE {where} ORDER BY created_at DESC, id DESC", params
        )
        return [_lesson(r) for r in rows]

    async def standings(
        self,
        scopes: Sequence[str],
        *,
        kinds: Sequence[str] | None = None,
        task_type: str | None = None,
        include_deleted: bool = False,
    ) -> list[LessonStanding]:
        """The standing of every lesson `find` would return, in no particular order."""
        where, params = _where(scopes, kinds, task_type, include_deleted)
        rows = await self.conn.fetchall(f"SELECT {_STANDING_COLUMNS} FROM lessons WHERE {where}", params)
        return [LessonStanding(*row) for row in rows]

    async def standings_of(self, ids: Sequence[str], scopes: Sequence[str]) -> list[LessonStanding]:
        """The standing of each of these lessons of the scopes that is not deleted, in no particular order."""
        rows = await self.fetch_in(
            f"SELECT {_STANDING_COLUMNS} FROM lessons WHERE +project IN ({placeholders(len(scopes))}) "
            "AND deleted_at IS NULL AND id IN ({ids})",
            ids,
            scopes,
        )
        return [LessonStanding(*row) for row in rows]

    async def delete(self, ids: Sequence[str]) -> None:
        await self.delete_in("lessons", ids)

    async def count(self, project: str | None = None) -> int:
        if project is None:
            return int(await self.conn.fetchval("SELECT count(*) FROM lessons WHERE deleted_at IS NULL"))
        return int(
            await self.conn.fetchval(
                "SELECT count(*) FROM lessons WHERE project = ? AND deleted_at IS NULL", (project,)
            )
        )
