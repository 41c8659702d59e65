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
    read for the lessons a query matches and those SQL cannot judge, so only the page shown is read whole."""

    id: str
    task_type: str | None
    confidence: float
    reinforcements: int
    since: str
    deleted: bool


class Decay(NamedTuple):
    """How lessons' confidence fades, as of one moment: what judging them in SQL needs."""

    keep_per_week: float  # the share of confidence a week without reinforcement leaves
    fade_at: float  # a never-reinforced lesson at or below this confidence has faded
    now_us: int  # the moment, in microseconds since 1970 (UTC)


_EXACT = 2**53
"""Microsecond spans up to this many convert to a float exactly; the weeks of a longer one (a lesson
set over 285 years before now) could round apart from LessonService's, so Python judges it."""

# SQL judges a lesson with the very float operations of LessonService.confidence and .faded, so the
# two never disagree, even at the fade threshold: the span since the later of the two times the
# confidence was set, in whole microseconds (since_us, which triggers keep from the stored text),
# divided by a week's; the stored confidence times keep ** weeks.
_TIMED = (
    "SELECT id, task_type, deleted_at, reinforcements, confidence, since_us, keep, fade, now_us - since_us AS span "
    "FROM lessons, decay WHERE {where}"
)
_JUDGED = (
    "SELECT id, task_type, c, deleted_at IS NOT NULL OR (reinforcements = 0 AND c <= fade) AS faded FROM "
    "(SELECT *, confidence * pow(keep, max(span / 604800000000.0, 0.0)) AS c FROM timed WHERE abs(span) <= ?)"
)
_STATUS = {"active": "NOT faded", "faded": "faded", "all": "1"}


def _lesson(row: Row) -> Lesson:
    return Lesson(**row_dict(row, ("tags", "source")))


def _where(
    scopes: Sequence[str],
    kinds: Sequence[str] | None,
    task_type: str | None,
    include_deleted: bool,
    untyped: bool = False,
) -> tuple[str, list[object]]:
    """The WHERE clause and parameters selecting lessons of the scopes, kinds and task type (and with
    `untyped`, the lessons of no task type as well: they hold for every type)."""
    clauses = [f"project IN ({placeholders(len(scopes))})"]
    params: list[object] = list(scopes)
    if kinds:
        clauses.append(f"kind IN ({placeholders(len(kinds))})")
        params.extend(kinds)
    if task_type is not None:
        clauses.append("(task_type = ? OR task_type IS NULL)" if untyped else "task_type = ?")
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

    async def ranked(
        self,
        scopes: Sequence[str],
        decay: Decay,
        *,
        kinds: Sequence[str] | None = None,
        task_type: str | None = None,
        applies_to: str | None = None,
        status: str = "active",
        untyped: bool = False,
        limit: int,
    ) -> list[tuple[float, str, str | None]]:
        """(confidence as of `decay.now_us`, id, task type) of the best `limit` lessons SQL can judge
        (see `unjudged`) that have `status` ("active", "faded" or "all"): highest first, then by id.

        `task_type` keeps only that type's lessons (and with `untyped`, the untyped ones too); `applies_to`
        keeps that type's and untyped ones, its own first.
        """
        first = "task_type IS NULL, " if applies_to is not None else ""
        sql, params = self._judged(scopes, decay, kinds, task_type, applies_to, status, untyped)
        rows = await self.conn.fetchall(
            f"{sql} SELECT c, id, task_type FROM judged WHERE {_STATUS[status]} ORDER BY {first}c DESC, id LIMIT ?",
            (*params, limit),
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def counts_by_task_type(
        self,
        scopes: Sequence[str],
        decay: Decay,
        *,
        kinds: Sequence[str] | None = None,
        task_type: str | None = None,
        status: str = "active",
        untyped: bool = False,
    ) -> dict[str | None, int]:
        """How many lessons SQL can judge have `status`, by task type (None: untyped)."""
        sql, params = self._judged(scopes, decay, kinds, task_type, None, status, untyped)
        rows = await self.conn.fetchall(
            f"{sql} SELECT task_type, count(*) FROM judged WHERE {_STATUS[status]} GROUP BY task_type", params
        )
        return {row[0]: int(row[1]) for row in rows}

    async def unjudged(
        self,
        scopes: Sequence[str],
        decay: Decay,
        *,
        kinds: Sequence[str] | None = None,
        task_type: str | None = None,
        include_deleted: bool = False,
        untyped: bool = False,
    ) -> list[LessonStanding]:
        """The standings of the lessons `ranked` leaves out, for Python to judge: those set over 285
        years from now, or at a time not stored in the canonical form (none, as the tools store them)."""
        where, params = _where(scopes, kinds, task_type, include_deleted, untyped)
        rows = await self.conn.fetchall(
            f"SELECT {_STANDING_COLUMNS} FROM lessons WHERE {where} AND (since_us IS NULL OR abs(? - since_us) > ?)",
            (*params, decay.now_us, _EXACT),
        )
        return [LessonStanding(*row) for row in rows]

    @staticmethod
    def _judged(
        scopes: Sequence[str],
        decay: Decay,
        kinds: Sequence[str] | None,
        task_type: str | None,
        applies_to: str | None,
        status: str,
        untyped: bool = False,
    ) -> tuple[str, list[object]]:
        """A `WITH` clause naming `judged` (id, task type, confidence `c` and whether `faded`) for the
        lessons selected that SQL can judge, read from the index lessons_by_standing alone; and its parameters."""
        if status not in _STATUS:
            raise ValueError(f"unknown status {status!r}")
        where, params = _where(scopes, kinds, task_type, status != "active", untyped)
        if applies_to is not None:
            where += " AND (task_type IS NULL OR task_type = ?)"
            params.append(applies_to)
        sql = (
            "WITH decay (keep, fade, now_us) AS (SELECT ?, ?, ?), "
            f"timed AS ({_TIMED.format(where=where)}), judged AS ({_JUDGED})"
        )
        return sql, [*decay, *params, _EXACT]

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
