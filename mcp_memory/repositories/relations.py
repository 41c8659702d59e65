"""SQL for relations (typed, weighted edges between any two records) and for naming any record."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.db import Row
from mcp_memory.ids import SCOPE_MARK, kind_of
from mcp_memory.models.records import Relation
from mcp_memory.repositories.base import Repository, chunked, placeholders, row_dict

_COLUMNS = "id, project, source_id, target_id, type, weight, note, created_at, updated_at"

# How to find and name a record of each kind: (table, title expression); a session is named as public_id does.
_TITLES: dict[str, tuple[str, str]] = {
    "observation": ("observations", "title"),
    "memory": ("memories", "coalesce(title, substr(content, 1, 120))"),
    "lesson": ("lessons", "substr(content, 1, 120)"),
    "action": ("actions", "title"),
    "session": ("sessions", f"coalesce(title, substr(id, 1, instr(id || '{SCOPE_MARK}', '{SCOPE_MARK}') - 1))"),
    "outcome": ("outcomes", "substr(task, 1, 120)"),
    "mistake_card": ("mistake_cards", "substr(correct_decision, 1, 120)"),
    "slot": ("slots", "name"),
    "relation": ("relations", "type || ': ' || source_id || ' -> ' || target_id"),
}


def table_of(record_id: str) -> str:
    """The table holding a record, by its id's prefix (caller-chosen session ids have none)."""
    return _TITLES[kind_of(record_id) or "session"][0]


def _relation(row: Row) -> Relation:
    return Relation(**row_dict(row))


class RelationRepository(Repository):
    """Edges by source and target id."""

    async def upsert(self, relation: Relation) -> bool:
        """Store an edge, or update the weight and note of the project's same (source, target, type); True if new."""
        existing = await self.conn.fetchval(
            "SELECT id FROM relations WHERE project = ? AND source_id = ? AND target_id = ? AND type = ?",
            (relation.project, relation.source_id, relation.target_id, relation.type),
        )
        if existing is not None:
            await self.conn.execute(
                "UPDATE relations SET weight = ?, note = coalesce(?, note), updated_at = ? WHERE id = ?",
                (relation.weight, relation.note, relation.updated_at, existing),
            )
            return False
        await self.conn.execute(
            f"INSERT INTO relations ({_COLUMNS}) VALUES ({placeholders(9)})",
            (
                relation.id,
                relation.project,
                relation.source_id,
                relation.target_id,
                relation.type,
                relation.weight,
                relation.note,
                relation.created_at,
                relation.updated_at,
            ),
        )
        return True

    async def get(self, source_id: str, target_id: str, type_: str, project: str) -> Relation | None:
        """The project's edge of this type between two records (each project relates global records on its own)."""
        row = await self.conn.fetchone(
            f"SELECT {_COLUMNS} FROM relations WHERE project = ? AND source_id = ? AND target_id = ? AND type = ?",
            (project, source_id, target_id, type_),
        )
        return None if row is None else _relation(row)

    async def get_many(self, ids: Sequence[str], project: str) -> list[Relation]:
        """The project's edges among `ids`, in the order asked for."""
        rows = await self.fetch_in(
            f"SELECT {_COLUMNS} FROM relations WHERE +project = ? AND id IN ({{ids}})", ids, (project,)
        )
        by_id = {r["id"]: _relation(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def between(
        self, project: str, sources: Sequence[str], targets: Sequence[str], type_: str
    ) -> Relation | None:
        """The project's edge of this type from any of `sources` to any of `targets` (the newest, if
        there are several)."""
        found = await self.all_between(project, sources, targets, type_)
        return found[0] if found else None

    async def all_between(
        self, project: str, sources: Sequence[str], targets: Sequence[str], type_: str
    ) -> list[Relation]:
        """The project's edges of this type from any of `sources` to any of `targets`, the last
        updated first (then by id, descending), so the first is the one a fold of duplicates keeps."""
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM relations WHERE project = ? AND type = ? "
            f"AND source_id IN ({placeholders(len(sources))}) AND target_id IN ({placeholders(len(targets))}) "
            "ORDER BY updated_at DESC, id DESC",
            (project, type_, *sources, *targets),
        )
        return [_relation(r) for r in rows]

    async def touching(
        self, project: str, ids: Sequence[str], direction: str, types: Sequence[str] | None
    ) -> list[Relation]:
        """Edges of the project leaving (out), entering (in) or touching (both) any of `ids`."""
        found: dict[str, Relation] = {}  # an edge between two of `ids` may come in two chunks
        for chunk in chunked(ids):
            marks = placeholders(len(chunk))
            sides = {"out": f"source_id IN ({marks})", "in": f"target_id IN ({marks})"}
            where = sides.get(direction, f"(source_id IN ({marks}) OR target_id IN ({marks}))")
            params: list[object] = [project, *chunk, *(chunk if direction == "both" else [])]
            if types:
                where += f" AND type IN ({placeholders(len(types))})"
                params.extend(types)
            rows = await self.conn.fetchall(f"SELECT {_COLUMNS} FROM relations WHERE project = ? AND {where}", params)
            found.update((r["id"], _relation(r)) for r in rows)
        return sorted(found.values(), key=lambda r: (-r.weight, r.id))

    async def ids_touching(self, ids: Sequence[str]) -> list[str]:
        """Ids of every relation (of any project) whose source or target is among `ids`, and of every
        edge naming one of those, all the way down: what deleting the records `ids` must delete."""
        return list(await self._ends_touching(ids))

    async def delete_touching(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Delete every relation whose source or target is among `ids`, and every edge naming one of
        those, all the way down; returns each one's (source, target) by id."""
        found = await self._ends_touching(ids)
        await self.delete_in("relations", list(found))
        return found

    async def delete_with_dependents(self, relation_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Delete these relations and every edge naming one of them, all the way down; returns each
        one's (source, target) by id."""
        rows = await self.fetch_in("SELECT id, source_id, target_id FROM relations WHERE id IN ({ids})", relation_ids)
        found = await self._ends_touching([r[0] for r in rows], {r[0]: (r[1], r[2]) for r in rows})
        await self.delete_in("relations", list(found))
        return found

    async def _ends_touching(
        self, ids: Sequence[str], found: dict[str, tuple[str, str]] | None = None
    ) -> dict[str, tuple[str, str]]:
        """(source, target) by id of the relations (of any project) touching `ids`, added to `found`;
        an edge may name another edge, so those naming the ones found are found too, level by level."""
        found = {} if found is None else found
        frontier = list(dict.fromkeys(ids))
        while frontier:
            fresh: dict[str, tuple[str, str]] = {}  # an edge between two of `ids` may come in two chunks
            for chunk in chunked(frontier):
                marks = placeholders(len(chunk))
                rows = await self.conn.fetchall(
                    f"SELECT id, source_id, target_id FROM relations "
                    f"WHERE source_id IN ({marks}) OR target_id IN ({marks})",
                    (*chunk, *chunk),
                )
                fresh.update((r[0], (r[1], r[2])) for r in rows if r[0] not in found)
            found.update(fresh)
            frontier = list(fresh)  # only a relation id can be named by the next level's edges
        return found

    async def pointed_at(self, ids: Sequence[str]) -> set[str]:
        """Which of `ids` are the target of at least one relation."""
        return {
            r[0]
            for r in await self.fetch_in("SELECT DISTINCT target_id FROM relations WHERE target_id IN ({ids})", ids)
        }


class RecordNames(Repository):
    """Finds records of any kind by id and names them (for relations and the context's omissions)."""

    async def describe(self, ids: Sequence[str], scopes: Sequence[str]) -> dict[str, tuple[str, str]]:
        """id -> (kind, title) for the ids that exist in the scopes (a project, and "*" for lessons/slots)."""
        by_kind: dict[str, list[str]] = {}
        for record_id in ids:
            by_kind.setdefault(kind_of(record_id) or "session", []).append(record_id)
        found: dict[str, tuple[str, str]] = {}
        for kind, kind_ids in by_kind.items():
            table, title = _TITLES[kind]
            rows = await self.fetch_in(
                f"SELECT id, {title} FROM {table} WHERE +project IN ({placeholders(len(scopes))}) AND id IN ({{ids}})",
                kind_ids,
                scopes,
            )
            found.update((r[0], (kind, str(r[1]))) for r in rows)
        return found

    async def delete(self, kind: str, ids: Sequence[str]) -> None:
        """Delete records of one kind by id (foreign keys cascade to their links)."""
        await self.delete_in(_TITLES[kind][0], ids)
