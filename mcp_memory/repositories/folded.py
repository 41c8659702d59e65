"""SQL for the notes of folded observations: ids whose rows their sessions' digests stand for."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.models.records import Observation
from mcp_memory.repositories.base import Repository


class FoldedRepository(Repository):
    """Folded observations by id, with their session and when they happened (never their text)."""

    async def note(self, folded: Sequence[Observation], at: str) -> None:
        """Note observations as folded (before or after their rows go; a note already there stays)."""
        await self.conn.executemany(
            "INSERT INTO folded_observations (id, project, session_id, happened_at, folded_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            [(o.id, o.project, o.session_id, o.occurred_at or o.created_at, at) for o in folded],
        )

    async def made_between(
        self, project: str, session_id: str | None, since: str | None, until: str | None
    ) -> list[str]:
        """Ids of the project's folded observations (of one session, when given) made in [since, until]:
        any of the minute their digest line keeps (forget.py cuts those lines) in the window."""
        minute = "substr(happened_at, 1, 16)"
        sql = "SELECT id FROM folded_observations WHERE project = ?"
        params: list[str] = [project]
        for clause, value in (
            ("session_id = ?", session_id),
            (f"{minute} || ':59.999999Z' >= ?", since),
            (f"{minute} || ':00' <= ?", until),
        ):
            if value is not None:
                sql += f" AND {clause}"
                params.append(value)
        return [str(r[0]) for r in await self.conn.fetchall(sql + " ORDER BY happened_at, id", params)]

    async def outside(self, ids: Sequence[str], session_ids: Sequence[str]) -> list[str]:
        """Those of `ids` noted in none of `session_ids`, in the order given."""
        rows = await self.fetch_in("SELECT id, session_id FROM folded_observations WHERE id IN ({ids})", ids)
        going = set(session_ids)
        within = {str(r[0]) for r in rows if r[1] in going}
        return [i for i in ids if i not in within]

    async def in_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """Ids of the folded observations noted in these sessions."""
        rows = await self.fetch_in("SELECT id FROM folded_observations WHERE session_id IN ({ids})", session_ids)
        return sorted(str(r[0]) for r in rows)

    async def delete(self, ids: Sequence[str]) -> None:
        await self.delete_in("folded_observations", ids)
