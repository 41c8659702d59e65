"""SQL for memories and their version chains."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mcp_memory.db import Row
from mcp_memory.errors import NotFoundError
from mcp_memory.models.records import Memory, MemoryDigest, searchable_text
from mcp_memory.repositories.base import Repository, dump_json, placeholders, row_dict

_COLUMNS = (
    "id, project, agent_id, session_id, kind, title, content, concepts, files, importance, ref, "
    "occurred_at, root_id, parent_id, version, is_latest, superseded_by, similarity, created_at, updated_at"
)

SAME_CONTENT_SQL = (
    # `+content`: a bare `content = ?` lets SQLite put the value in place of the column in the other
    # terms, which then no longer match the expressions memories_by_content holds
    f"SELECT {_COLUMNS} FROM memories WHERE project = ? AND is_latest = 1 AND length(content) = length(?) "
    "AND substr(content, 1, 16) = substr(?, 1, 16) AND +content = ? ORDER BY created_at, id LIMIT 1"
)
"""The first saved latest memory of a project with exactly some content, sought in memories_by_content."""


def _memory(row: Row) -> Memory:
    return Memory(**row_dict(row, ("concepts", "files"), ("is_latest",)))


def _digest(row: Row) -> MemoryDigest:
    memory_id, root_id, created_at, title, content, concepts, files = row
    text = searchable_text(title, content, json.loads(concepts or "[]"), json.loads(files or "[]"))
    return MemoryDigest(memory_id, root_id, created_at, text)


class MemoryRepository(Repository):
    """Memories of one project at a time; a chain is every version sharing a root id."""

    async def add(self, mem: Memory) -> None:
        await self.conn.execute(
            f"INSERT INTO memories ({_COLUMNS}) VALUES ({placeholders(20)})",
            (
                mem.id,
                mem.project,
                mem.agent_id,
                mem.session_id,
                mem.kind,
                mem.title,
                mem.content,
                dump_json(mem.concepts),
                dump_json(mem.files),
                mem.importance,
                mem.ref,
                mem.occurred_at,
                mem.root_id,
                mem.parent_id,
                mem.version,
                int(mem.is_latest),
                mem.superseded_by,
                mem.similarity,
                mem.created_at,
                mem.updated_at,
            ),
        )

    async def get_or_none(self, mem_id: str, project: str) -> Memory | None:
        row = await self.conn.fetchone(
            f"SELECT {_COLUMNS} FROM memories WHERE id = ? AND project = ?", (mem_id, project)
        )
        return None if row is None else _memory(row)

    async def get(self, mem_id: str, project: str, field: str | None = None) -> Memory:
        """A memory of the project (any version), or an error naming the argument (`field`) that named it."""
        found = await self.get_or_none(mem_id, project)
        if found is None:
            raise NotFoundError("memory", mem_id, "call memory_smart_search to find memory ids", field=field)
        return found

    async def latest_with_content(self, project: str, content: str) -> Memory | None:
        """The first saved of the project's latest memories whose content is exactly `content`."""
        row = await self.conn.fetchone(SAME_CONTENT_SQL, (project, content, content, content))
        return None if row is None else _memory(row)

    async def get_many(self, ids: Sequence[str], project: str) -> list[Memory]:
        rows = await self.fetch_in(
            f"SELECT {_COLUMNS} FROM memories WHERE +project = ? AND id IN ({{ids}})", ids, (project,)
        )
        by_id = {r["id"]: _memory(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def chain(self, root_id: str, project: str) -> list[Memory]:
        """Every version of a memory, oldest first."""
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM memories WHERE root_id = ? AND project = ? ORDER BY version, created_at",
            (root_id, project),
        )
        return [_memory(r) for r in rows]

    async def chain_lengths(self, root_ids: Sequence[str], project: str) -> dict[str, int]:
        """How many versions each of these chains has (chains with none are left out)."""
        rows = await self.fetch_in(
            "SELECT root_id, count(*) FROM memories WHERE project = ? AND root_id IN ({ids}) GROUP BY root_id",
            root_ids,
            (project,),
        )
        return {r[0]: r[1] for r in rows}

    async def versions_of(self, ids: Sequence[str], project: str) -> dict[str, list[str]]:
        """For each of `ids` that is a memory of the project, every version id of its chain, latest first."""
        rows = await self.fetch_in(
            "SELECT asked.id, version.id FROM memories AS asked "
            "JOIN memories AS version ON version.root_id = asked.root_id AND version.project = asked.project "
            "WHERE asked.project = ? AND asked.id IN ({ids}) "
            "ORDER BY version.is_latest DESC, version.version DESC, version.id",
            ids,
            (project,),
        )
        found: dict[str, list[str]] = {}
        for row in rows:
            found.setdefault(row[0], []).append(row[1])
        return found

    async def mark_superseded(self, mem_id: str, by: str, at: str) -> None:
        await self.conn.execute(
            "UPDATE memories SET is_latest = 0, superseded_by = ?, updated_at = ? WHERE id = ?",
            (by, at, mem_id),
        )

    async def relink(self, mem: Memory) -> None:
        """Store a version's place in its chain: parent, version number, latest flag, successor, similarity."""
        await self.conn.execute(
            "UPDATE memories SET parent_id = ?, version = ?, is_latest = ?, superseded_by = ?, similarity = ?, "
            "updated_at = ? WHERE id = ?",
            (mem.parent_id, mem.version, int(mem.is_latest), mem.superseded_by, mem.similarity, mem.updated_at, mem.id),
        )

    async def reroot(self, old_root: str, new_root: str, project: str, at: str) -> list[str]:
        """Move every version of one chain into another (by root id); returns the ids moved."""
        rows = await self.conn.fetchall(
            "SELECT id FROM memories WHERE root_id = ? AND project = ? ORDER BY id", (old_root, project)
        )
        await self.conn.execute(
            "UPDATE memories SET root_id = ?, updated_at = ? WHERE root_id = ? AND project = ?",
            (new_root, at, old_root, project),
        )
        return [row[0] for row in rows]

    async def chains_out_of_line(self, project: str | None = None) -> list[tuple[str, str]]:
        """(project, root id) of every memory chain (of one project, or all) that is not one line as the
        tools leave it: its root not a first version, a version not following the one before it or not
        followed by the one after, no latest version or more than one. By project, then root id."""
        where, params = ("m.project = ?", (project,)) if project is not None else ("1", ())
        # Each row is checked against its neighbours by version number, through memories_chain.
        rows = await self.conn.fetchall(
            f"""SELECT DISTINCT m.project, m.root_id FROM memories AS m
                LEFT JOIN memories AS root ON root.id = m.root_id
                LEFT JOIN memories AS prev ON prev.root_id = m.root_id AND prev.version = m.version - 1
                LEFT JOIN memories AS next ON next.root_id = m.root_id AND next.version = m.version + 1
                WHERE {where} AND (
                    root.id IS NULL OR root.root_id IS NOT root.id OR root.version IS NOT 1
                    OR m.parent_id IS NOT prev.id OR m.superseded_by IS NOT next.id
                    OR m.is_latest IS NOT (next.id IS NULL)
                )
                ORDER BY m.project, m.root_id""",
            params,
        )
        return [(row[0], row[1]) for row in rows]

    async def page(
        self, project: str, kinds: Sequence[str] | None, latest_only: bool, limit: int, offset: int
    ) -> tuple[list[Memory], int]:
        where, params = self._where(project, kinds, latest_only)
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM memories WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        total = await self.conn.fetchval(f"SELECT count(*) FROM memories WHERE {where}", params)
        return [_memory(r) for r in rows], int(total)

    async def important(self, project: str, limit: int) -> list[Memory]:
        """Latest memories, most important first, then newest."""
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM memories WHERE project = ? AND is_latest = 1 "
            "ORDER BY importance DESC, created_at DESC, id LIMIT ?",
            (project, limit),
        )
        return [_memory(r) for r in rows]

    async def root_ids_matching(
        self,
        project: str,
        kinds: Sequence[str] | None,
        since: str | None,
        until: str | None,
        session_id: str | None = None,
    ) -> list[str]:
        """Root ids of chains whose latest version matches (forget by filter works on whole chains)."""
        where, params = self._where(project, kinds, True)
        clauses, extra = [where], list(params)
        if session_id is not None:
            clauses.append("session_id = ?")
            extra.append(session_id)
        if since is not None:
            clauses.append("coalesce(occurred_at, created_at) >= ?")
            extra.append(since)
        if until is not None:
            clauses.append("coalesce(occurred_at, created_at) <= ?")
            extra.append(until)
        rows = await self.conn.fetchall(
            f"SELECT DISTINCT root_id FROM memories WHERE {' AND '.join(clauses)} ORDER BY root_id", extra
        )
        return [r[0] for r in rows]

    async def latest_in_sessions(self, session_ids: Sequence[str], project: str) -> list[Memory]:
        """Latest memory versions saved in any of these sessions."""
        rows = await self.fetch_in(
            f"SELECT {_COLUMNS} FROM memories WHERE project = ? AND is_latest = 1 AND session_id IN ({{ids}})",
            session_ids,
            (project,),
        )
        return [_memory(r) for r in rows]

    async def ids_in_sessions(self, session_ids: Sequence[str], project: str) -> dict[str, bool]:
        """Every memory version saved in any of these sessions: its id, and whether it is the latest."""
        rows = await self.fetch_in(
            "SELECT id, is_latest FROM memories WHERE project = ? AND session_id IN ({ids}) ORDER BY id",
            session_ids,
            (project,),
        )
        return {str(r[0]): bool(r[1]) for r in rows}

    async def latest_ids_updated_between(self, project: str, start: str | None, end: str | None) -> list[str]:
        """Ids of the latest memory versions last updated within [start, end] (either end open), oldest first."""
        rows = await self.conn.fetchall(
            "SELECT id FROM memories WHERE project = ? AND is_latest = 1 "
            "AND updated_at >= ? AND updated_at <= ? ORDER BY updated_at, id",
            (project, start or "", end or "9999"),
        )
        return [r[0] for r in rows]

    async def merge_chains(self, older: Memory, newer: Memory, older_versions: int, at: str) -> None:
        """Put the newer memory's chain after the older one's: one chain, the newer memory latest.

        Every moved row gets `at` as its update time, so an import of the result replaces stale copies.
        """
        await self.conn.execute(
            "UPDATE memories SET root_id = ?, version = version + ?, updated_at = ? WHERE root_id = ? AND project = ?",
            (older.root_id, older_versions, at, newer.root_id, newer.project),
        )
        await self.conn.execute(
            "UPDATE memories SET parent_id = ? WHERE id = ? AND parent_id IS NULL", (older.id, newer.root_id)
        )
        await self.conn.execute(  # followed by the newer chain's first version, not by its latest
            "UPDATE memories SET is_latest = 0, superseded_by = ?, updated_at = ? WHERE id = ?",
            (newer.root_id, at, older.id),
        )

    async def delete_chain(self, root_id: str, project: str) -> list[str]:
        """Delete every version of a chain; returns the deleted ids."""
        rows = await self.conn.fetchall("SELECT id FROM memories WHERE root_id = ? AND project = ?", (root_id, project))
        ids = [r[0] for r in rows]
        if ids:
            await self.conn.execute("DELETE FROM memories WHERE root_id = ? AND project = ?", (root_id, project))
        return ids

    async def count(self, project: str | None = None, latest_only: bool = False) -> int:
        clauses, params = [], []
        if project is not None:
            clauses.append("project = ?")
            params.append(project)
        if latest_only:
            clauses.append("is_latest = 1")
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return int(await self.conn.fetchval(f"SELECT count(*) FROM memories {where}", params))

    async def latest_in_project(self, project: str) -> list[Memory]:
        return await self.fetch_paged(
            f"SELECT {_COLUMNS} FROM memories WHERE project = ? AND is_latest = 1", (project,), _memory
        )

    async def superseded_contents(self, project: str) -> list[str]:
        """The content of every version of a project's memories that a newer version replaced."""
        return await self.fetch_paged(
            "SELECT content FROM memories WHERE project = ? AND is_latest = 0", (project,), lambda row: str(row[0])
        )

    async def latest_digests(self, project: str) -> list[MemoryDigest]:
        """What near-duplicate passes compare of every latest memory of a project, oldest first."""
        return await self.fetch_paged(
            "SELECT id, root_id, created_at, title, content, concepts, files FROM memories "
            "WHERE project = ? AND is_latest = 1 ORDER BY created_at, id",
            (project,),
            _digest,
        )

    @staticmethod
    def _where(project: str, kinds: Sequence[str] | None, latest_only: bool) -> tuple[str, tuple[object, ...]]:
        clauses, params = ["project = ?"], [project]
        if latest_only:
            clauses.append("is_latest = 1")
        if kinds:
            clauses.append(f"kind IN ({placeholders(len(kinds))})")
            params.extend(kinds)
        return " AND ".join(clauses), tuple(params)

    async def latest_contents_holding(self, project: str, kind: str, groups: Sequence[Sequence[str]]) -> list[str]:
        """The content of each latest memory of the project and kind that holds, as written (case and all),
        every fragment of one of `groups` (an empty group: any); none when no group is given."""
        if not groups:
            return []
        held = " OR ".join(" AND ".join(["(1", *("instr(content, ?) > 0" for _ in group)]) + ")" for group in groups)
        rows = await self.conn.fetchall(
            f"SELECT content FROM memories WHERE project = ? AND is_latest = 1 AND kind = ? AND ({held})",
            (project, kind, *(fragment for group in groups for fragment in group)),
        )
        return [str(row[0]) for row in rows]
