"""SQL for the ids of forgotten records: what memory_forget deleted, kept so that imports leave it gone."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.repositories.base import Repository, placeholders
from mcp_memory.repositories.relations import table_of

_CHUNK = 500  # ids per statement (SQLite caps the parameters of one)


def _chunks(ids: Sequence[str]) -> list[Sequence[str]]:
    return [ids[i : i + _CHUNK] for i in range(0, len(ids), _CHUNK)]


class ForgottenRepository(Repository):
    """Forgotten records by id, with the project they were in and when they were first forgotten."""

    async def remember(self, kind: str, ids: Sequence[str], at: str) -> None:
        """Note records of one kind as forgotten, read from their table for their project, before they
        are deleted; a record forgotten before keeps its first time (so copies agree on it)."""
        for chunk in _chunks(ids):
            await self.conn.execute(
                f"INSERT INTO forgotten (id, project, kind, forgotten_at) SELECT id, project, ?, ? "
                f"FROM {table_of(chunk[0])} WHERE id IN ({placeholders(len(chunk))}) ON CONFLICT (id) DO NOTHING",
                (kind, at, *chunk),
            )

    async def among(self, ids: Sequence[str]) -> dict[str, str]:
        """id -> project of the forgotten records among `ids`."""
        found: dict[str, str] = {}
        for chunk in _chunks(ids):
            rows = await self.conn.fetchall(
                f"SELECT id, project FROM forgotten WHERE id IN ({placeholders(len(chunk))})", tuple(chunk)
            )
            found.update((str(r[0]), str(r[1])) for r in rows)
        return found

    async def unforget(self, ids: Sequence[str]) -> int:
        """Drop the notes of `ids` (records brought back on purpose); returns how many there were."""
        dropped = 0
        for chunk in _chunks(ids):
            rows = await self.conn.fetchall(
                f"DELETE FROM forgotten WHERE id IN ({placeholders(len(chunk))}) RETURNING id", tuple(chunk)
            )
            dropped += len(rows)
        return dropped
