"""SQL for the ids of forgotten records: what memory_forget deleted, kept so that imports leave it gone."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from mcp_memory.ids import kind_of, public_id, scoped_session_id
from mcp_memory.repositories.base import ID_CHUNK, Repository, chunked, placeholders
from mcp_memory.repositories.relations import table_of

_LATER_WINS = (
    "ON CONFLICT (id) DO UPDATE SET project = excluded.project, forgotten_at = excluded.forgotten_at "
    "WHERE excluded.forgotten_at > forgotten.forgotten_at"
)
"""A record forgotten again keeps the later note."""

_KEEP = "ON CONFLICT (id) DO NOTHING"
"""A record an import brought back and that is deleted again keeps the note it has."""


class ForgottenRepository(Repository):
    """Forgotten records by id, with the project they were in and when they were (last) forgotten."""

    async def remember(self, kind: str, ids: Sequence[str], at: str, *, again: bool = False) -> None:
        """Note records of one kind as forgotten, read from their table for their project, before they
        are deleted; a record forgotten again (a session named again after its forget) moves the
        note to the later time, as an import of the other note would. With `again` (the rows an
        import brought back, deleted once more) a note keeps its time, so repeating the import
        changes nothing."""
        conflict = _KEEP if again else _LATER_WINS
        for chunk in chunked(ids):
            await self.conn.execute(
                f"INSERT INTO forgotten (id, project, kind, forgotten_at) SELECT id, project, ?, ? "
                f"FROM {table_of(chunk[0])} WHERE id IN ({placeholders(len(chunk))}) {conflict}",
                (kind, at, *chunk),
            )

    async def note(self, kind: str, project: str, ids: Sequence[str], at: str, *, again: bool = False) -> None:
        """Note records of one kind and project as forgotten when no row of theirs is left to read
        (folded observations, whose digest lines were cut); `again` as for `remember`."""
        conflict = _KEEP if again else _LATER_WINS
        await self.conn.executemany(
            f"INSERT INTO forgotten (id, project, kind, forgotten_at) VALUES (?, ?, ?, ?) {conflict}",
            [(record_id, project, kind, at) for record_id in ids],
        )

    async def still_stored(self, ids: Sequence[str], noted_as: Mapping[str, str] | None = None) -> dict[str, str]:
        """id -> project of the stored records among `ids` that a note says were forgotten: in the
        project it names, and made no later than the forget. A record made after it under the same
        id (a caller names its sessions) is another record, which the note does not cover.
        `noted_as` maps a stored id to the id a note may know it by (a session an import stored
        under its scoped id, as another project had taken its name since it was forgotten)."""
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
        # A session forgotten on a copy that kept it apart (scoped, its name being another project's
        # there) is noted by that id; here its project may hold it under the bare name.
        bare = sorted((public_id(i), i) for i in ids if kind_of(i) is None and public_id(i) != i and i not in found)
        for stored_id, noted_id in [*sorted((noted_as or {}).items()), *bare]:
            row = await self.conn.fetchone(
                f"SELECT t.project FROM {table_of(stored_id)} t JOIN forgotten f ON f.id = ? "
                "WHERE t.id = ? AND t.project = f.project AND t.created_at <= f.forgotten_at",
                (noted_id, stored_id),
            )
            # a scoped id names its project: a note of another project's session by that name is not this one's
            if row is not None and (
                public_id(noted_id) == noted_id or scoped_session_id(stored_id, str(row[0])) == noted_id
            ):
                found[stored_id] = str(row[0])
        return found

    async def covering(self, records: Sequence[tuple[str, str, str]]) -> set[str]:
        """The ids of records, given as (id, project, created_at) and not stored yet, whose forget a
        note records: in the project it names, made no later than the forget (see `still_stored`)."""
        noted = {
            str(r[0]): (str(r[1]), str(r[2]))
            for r in await self.fetch_in(
                "SELECT id, project, forgotten_at FROM forgotten WHERE id IN ({ids})", [i for i, _, _ in records]
            )
        }
        return {i for i, project, made in records if i in noted and noted[i][0] == project and made <= noted[i][1]}

    async def unforget(self, records: Sequence[tuple[str, str]]) -> int:
        """Drop the notes of records, as (id, project), brought back on purpose; a note of the same
        id in another project (a session name both used) stays. Returns how many notes went."""
        gone = 0
        for chunk in chunked(records, ID_CHUNK // 2):  # two values a record
            rows = await self.conn.fetchall(
                f"DELETE FROM forgotten WHERE (id, project) IN (VALUES {', '.join(['(?, ?)'] * len(chunk))}) "
                "RETURNING id",
                [value for pair in chunk for value in pair],
            )
            gone += len(rows)
        return gone
