"""SQL for the ids of forgotten records: what memory_forget deleted, kept so that imports leave it gone."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from mcp_memory.repositories.base import Repository, chunked, placeholders
from mcp_memory.repositories.relations import table_of

_LATER_WINS = (
    "ON CONFLICT (id) DO UPDATE SET project = excluded.project, forgotten_at = excluded.forgotten_at "
    "WHERE excluded.forgotten_at > forgotten.forgotten_at"
)
"""A record forgotten again keeps the later note."""


class ForgottenRepository(Repository):
    """Forgotten records by id, with the project they were in and when they were (last) forgotten."""

    async def remember(self, kind: str, ids: Sequence[str], at: str) -> None:
        """Note records of one kind as forgotten, read from their table for their project, before they
        are deleted; a record forgotten again (a session named again after its forget) moves the
        note to the later time, as an import of the other note would."""
        for chunk in chunked(ids):
            await self.conn.execute(
                f"INSERT INTO forgotten (id, project, kind, forgotten_at) SELECT id, project, ?, ? "
                f"FROM {table_of(chunk[0])} WHERE id IN ({placeholders(len(chunk))}) {_LATER_WINS}",
                (kind, at, *chunk),
            )

    async def note(self, kind: str, project: str, ids: Sequence[str], at: str) -> None:
        """Note records of one kind and project as forgotten when no row of theirs is left to read
        (folded observations, whose digest lines were cut)."""
        await self.conn.executemany(
            f"INSERT INTO forgotten (id, project, kind, forgotten_at) VALUES (?, ?, ?, ?) {_LATER_WINS}",
            [(record_id, project, kind, at) for record_id in ids],
        )

    async def still_stored(self, ids: Sequence[str]) -> dict[str, str]:
        """id -> project of the stored records among `ids` that a note says were forgotten: in the
        project it names, and made no later than the forget. A record made after it under the same
        id (a caller names its sessions) is another record, which the note does not cover."""
        by_table: dict[str, list[str]] = defaultdict(list)
        for record_id in ids:
            by_table[table_of(record_id)].append(record_id)
        found: dict[str, str] = {}
        for table, table_ids in sorted(by_table.items()):
            rows = await self.fetch_in(
                f"SELECT t.id, t.project FROM {table} t JOIN forgotten f ON f.id = t.id "
                "WHERE t.id IN ({ids}) AND t.project = f.project AND t.created_at <= f.forgotten_at",
                table_ids,
            )
            found.update((str(r[0]), str(r[1])) for r in rows)
        return found

    async def unforget(self, ids: Sequence[str]) -> int:
        """Drop the notes of `ids` (records brought back on purpose); returns how many there were."""
        return len(await self.fetch_in("DELETE FROM forgotten WHERE id IN ({ids}) RETURNING id", ids))
