"""SQL for export and import: every exported table read and upserted generically."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

from mcp_memory.errors import ConflictError
from mcp_memory.repositories.archive_tables import TABLES_BY_NAME, TableSpec
from mcp_memory.repositories.base import Repository, chunked, dump_json, placeholders, row_dict

_GLOBAL = "*"  # the project of records every project shares (lessons and slots)
_SORT_ROWS = 20_000  # rows of some projects above which an export walks the key index (see dump_pages)
_CHUNK = 400  # keys looked up per query (two columns each at most: well under SQLite's variable limit)


class RowConflict(ConflictError):
    """A row has the `unique` values of another record of its table; `position` is its index among
    the records upserted."""

    def __init__(self, spec: TableSpec, position: int) -> None:
        super().__init__(f"{spec.name}: another record has the same {', '.join(spec.unique)}")
        self.position = position
        self.columns = spec.unique


class ChainLink(NamedTuple):
    """One version's place in its memory chain, as stored."""

    id: str
    parent_id: str | None
    version: int
    is_latest: bool
    superseded_by: str | None


@dataclass(frozen=True, slots=True)
class UpsertResult:
    """What an upsert did to one row."""

    inserted: bool
    updated: bool
    foreign: bool = False
    """The key names a stored row of another project; nothing was written."""


class ArchiveRepository(Repository):
    """Reads whole tables for export and writes rows back for import."""

    async def dump(self, spec: TableSpec, projects: Sequence[str] | None) -> list[dict[str, Any]]:
        """Rows of a table as plain dicts (lists decoded), ordered by key, optionally for some projects."""
        rows = await self.conn.fetchall(*_dump_query(spec, projects))
        return [row_dict(row, spec.json_columns, spec.bool_columns) for row in rows]

    async def count(self, spec: TableSpec, projects: Sequence[str] | None) -> int:
        """How many rows `dump` would return."""
        where, params = _scope(spec, projects)
        return int(await self.conn.fetchval(f"SELECT COUNT(*) FROM {spec.source} t {spec.join} {where}", params))

    async def dump_pages(
        self, spec: TableSpec, projects: Sequence[str] | None, size: int = 1000
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The rows `dump` returns, `size` at a time (a million rows never sit in memory at once)."""
        # Rows of some projects come from their project index and are then sorted by key, in
        # memory (temp_store=MEMORY). For many rows, walk the key index instead and skip the
        # other projects' rows: slower for a small project in a big table, but never a big sort.
        walk = projects is not None and await self.count(spec, projects) > _SORT_ROWS
        async for rows in self.conn.pages(*_dump_query(spec, projects, walk), size=size):
            yield [row_dict(row, spec.json_columns, spec.bool_columns) for row in rows]

    async def upsert_many(self, spec: TableSpec, records: Sequence[BaseModel]) -> list[UpsertResult]:
        """Insert each record, or update it when the stored copy is older; identical rows are left alone.

        Records are taken in order, as if upserted one by one (a key repeated in `records` meets
        the copy written just before it), but stored rows are looked up a chunk at a time. A row
        that would share the `unique` values of another record raises RowConflict.
        """
        if spec.meta_prefix is not None:
            return await self._upsert_meta(spec, records)
        cols = spec.columns
        rows = [self._row(spec, record) for record in records]
        current = await self._stored(spec, rows)
        key_where = " AND ".join(f"{k} = ?" for k in spec.key)
        changed = [c for c in cols if c not in spec.key]
        holders = await self._holders(spec, rows)
        results = []
        for position, values in enumerate(rows):
            key = tuple(values[k] for k in spec.key)
            existing = current.get(key)
            if existing is not None and existing.get("project", values.get("project")) != values.get("project"):
                results.append(UpsertResult(False, False, foreign=True))
                continue
            if existing is not None and _keeps(spec, values, existing):
                results.append(UpsertResult(False, False))
                continue
            if spec.unique:
                unique = tuple(values[c] for c in spec.unique)
                if holders.get(unique, key) != key:
                    raise RowConflict(spec, position)
                if existing is not None:
                    holders.pop(tuple(existing[c] for c in spec.unique), None)
                holders[unique] = key
            if existing is None:
                await self.conn.execute(
                    f"INSERT INTO {spec.name} ({', '.join(cols)}) VALUES ({placeholders(len(cols))})",
                    tuple(values[c] for c in cols),
                )
                results.append(UpsertResult(True, False))
            else:
                await self.conn.execute(
                    f"UPDATE {spec.name} SET {', '.join(f'{c} = ?' for c in changed)} WHERE {key_where}",
                    (*(values[c] for c in changed), *key),
                )
                results.append(UpsertResult(False, True))
            current[key] = values
        return results

    async def stored_alike(self, spec: TableSpec, records: Sequence[BaseModel]) -> list[bool]:
        """Whether each record is stored as it is, or as a newer copy: upserting it would change nothing."""
        rows = [self._row(spec, record) for record in records]
        current = await self._stored(spec, rows)
        return [
            (existing := current.get(tuple(values[k] for k in spec.key))) is not None
            and existing.get("project") == values.get("project")
            and _keeps(spec, values, existing)
            for values in rows
        ]

    async def _stored(self, spec: TableSpec, rows: Sequence[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        """key -> stored row, for the stored rows with the keys of some of `rows`."""
        current: dict[tuple[Any, ...], dict[str, Any]] = {}
        keys = list(dict.fromkeys(tuple(row[k] for k in spec.key) for row in rows))
        for chunk in chunked(keys, _CHUNK):
            tuples = ", ".join(f"({placeholders(len(spec.key))})" for _ in chunk)
            found = await self.conn.fetchall(
                f"SELECT {', '.join(spec.columns)} FROM {spec.name} WHERE ({', '.join(spec.key)}) IN (VALUES {tuples})",
                tuple(v for key in chunk for v in key),
            )
            for stored in found:
                row = dict(zip(stored.keys(), tuple(stored), strict=True))
                current[tuple(row[k] for k in spec.key)] = row
        return current

    async def twins(self, spec: TableSpec, records: Sequence[BaseModel]) -> dict[str, str]:
        """id -> the id of the stored record holding the same `unique` values, for those of
        `records` (of a table keyed by id) that such a record of another id holds."""
        rows = [self._row(spec, record) for record in records]
        holders = await self._holders(spec, rows)
        found = {}
        for row in rows:
            held = holders.get(tuple(row[c] for c in spec.unique))
            if held is not None and held[0] != row["id"]:
                found[row["id"]] = held[0]
        return found

    async def _holders(self, spec: TableSpec, rows: Sequence[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        """unique values -> key of the stored records holding the `unique` values of some of `rows`."""
        if not spec.unique:
            return {}
        found: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        wanted = list(dict.fromkeys(tuple(row[c] for c in spec.unique) for row in rows))
        for chunk in chunked(wanted, _CHUNK * 2 // len(spec.unique)):
            tuples = ", ".join(f"({placeholders(len(spec.unique))})" for _ in chunk)
            stored = await self.conn.fetchall(
                f"SELECT {', '.join((*spec.unique, *spec.key))} FROM {spec.name} "
                f"WHERE ({', '.join(spec.unique)}) IN (VALUES {tuples})",
                tuple(v for values in chunk for v in values),
            )
            width = len(spec.unique)
            found.update((tuple(row)[:width], tuple(row)[width:]) for row in stored)
        return found

    async def _upsert_meta(self, spec: TableSpec, records: Sequence[BaseModel]) -> list[UpsertResult]:
        """`upsert_many` for a table kept in the meta table: a project's entry is replaced by a newer
        one, or for a `union` table merged with it."""
        results = []
        for record in records:
            values = record.model_dump()
            key = f"{spec.meta_prefix}{values.pop('project')}"
            stored = await self.conn.fetchval("SELECT value FROM meta WHERE key = ?", (key,))
            old = None if stored is None else json.loads(stored)
            if old is not None and spec.union is not None:
                values[spec.union] = sorted({*old.get(spec.union, ()), *values[spec.union]})
                values[spec.stamp] = max(str(values[spec.stamp]), str(old.get(spec.stamp, "")))
            text = json.dumps(values, sort_keys=True)  # as the services write it (reflect.py, MetaRepository)
            if old is not None and (stored == text or (spec.union is None and not _newer(spec, values, old))):
                results.append(UpsertResult(False, False))
                continue
            await self.conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, text),
            )
            results.append(UpsertResult(stored is None, stored is not None))
        return results

    @staticmethod
    def _row(spec: TableSpec, record: BaseModel) -> dict[str, Any]:
        """A record's column values as stored: JSON columns as text, booleans as 0/1."""
        values = record.model_dump()
        for column in spec.json_columns:
            values[column] = dump_json(values[column])
        for column in spec.bool_columns:
            if values[column] is not None:
                values[column] = int(values[column])
        return values

    async def owners(self, table: str, ids: Sequence[str]) -> dict[str, str]:
        """id -> project of the rows of `table` (one of TABLES with a project column) with those ids."""
        return await self._column_by_id(table, "project", ids)

    async def memory_roots(self, ids: Sequence[str]) -> dict[str, str]:
        """id -> root id of the stored memories with those ids."""
        return await self._column_by_id("memories", "root_id", ids)

    async def _column_by_id(self, table: str, column: str, ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(ids))
        for chunk in chunked(unique, _CHUNK):
            rows = await self.conn.fetchall(
                f"SELECT id, {column} FROM {TABLES_BY_NAME[table].name} WHERE id IN ({placeholders(len(chunk))})",
                tuple(chunk),
            )
            found.update((row[0], row[1]) for row in rows)
        return found

    async def chain_links(self, root_ids: Sequence[str]) -> dict[str, list[ChainLink]]:
        """root id -> how each version of that memory chain is linked, by version number."""
        found: dict[str, list[ChainLink]] = {}
        unique = list(dict.fromkeys(root_ids))
        for chunk in chunked(unique, _CHUNK):
            rows = await self.conn.fetchall(
                "SELECT root_id, id, parent_id, version, is_latest, superseded_by FROM memories "
                f"WHERE root_id IN ({placeholders(len(chunk))}) ORDER BY root_id, version, id",
                tuple(chunk),
            )
            for row in rows:
                found.setdefault(row[0], []).append(ChainLink(row[1], row[2], row[3], bool(row[4]), row[5]))
        return found

    async def in_cycles(self, edges: Literal["parent", "dependency", "waits"], ids: Sequence[str]) -> set[str]:
        """Those of the actions `ids` that reach themselves along their parents ("parent"), their
        dependencies ("dependency"), or what each waits for ("waits": its dependencies and its
        children, as the tools judge a cycle)."""
        if edges == "waits":
            return await self._waiting_on_themselves(ids)
        table, start, end = _ACTION_EDGES[edges]
        found: set[str] = set()
        unique = list(dict.fromkeys(ids))
        for chunk in chunked(unique, _CHUNK):
            # UNION (not UNION ALL) keeps each (start, node) pair once, so a walk round a cycle ends.
            rows = await self.conn.fetchall(
                f"""WITH RECURSIVE walk (origin, node) AS (
                        SELECT {start}, {end} FROM {table}
                        WHERE {start} IN ({placeholders(len(chunk))}) AND {end} IS NOT NULL
                        UNION
                        SELECT walk.origin, e.{end} FROM walk JOIN {table} e ON e.{start} = walk.node
                        WHERE e.{end} IS NOT NULL
                    )
                    SELECT DISTINCT origin FROM walk WHERE node = origin""",
                tuple(chunk),
            )
            found.update(row[0] for row in rows)
        return found

    async def _waiting_on_themselves(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in chunked(list(dict.fromkeys(ids)), _CHUNK // 2):  # the ids are bound twice
            marks = placeholders(len(chunk))
            # Each step follows the stored edges by their indexes (a dependency, a child), and UNION
            # keeps each (start, node) pair once, so a walk round a cycle ends.
            rows = await self.conn.fetchall(
                f"""WITH RECURSIVE walk (origin, node) AS (
                        SELECT action_id, depends_on FROM action_dependencies WHERE action_id IN ({marks})
                        UNION
                        SELECT parent_id, id FROM actions WHERE parent_id IN ({marks})
                        UNION
                        SELECT walk.origin, d.depends_on FROM walk JOIN action_dependencies d ON d.action_id = walk.node
                        UNION
                        SELECT walk.origin, a.id FROM walk JOIN actions a ON a.parent_id = walk.node
                    )
                    SELECT DISTINCT origin FROM walk WHERE node = origin""",
                (*chunk, *chunk),
            )
            found.update(row[0] for row in rows)
        return found

    async def drop_dependencies(
        self, action_ids: Sequence[str], keep: AbstractSet[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        """Delete the stored dependencies of those actions that `keep` lacks; returns them, as
        (action id, what it depended on), in that order."""
        dropped: list[tuple[str, str]] = []
        for chunk in chunked(list(dict.fromkeys(action_ids)), _CHUNK):
            rows = await self.conn.fetchall(
                "SELECT action_id, depends_on FROM action_dependencies "
                f"WHERE action_id IN ({placeholders(len(chunk))}) ORDER BY action_id, depends_on",
                tuple(chunk),
            )
            dropped += [(row[0], row[1]) for row in rows if (row[0], row[1]) not in keep]
        for pairs in chunked(dropped, _CHUNK):
            await self.conn.execute(
                "DELETE FROM action_dependencies WHERE (action_id, depends_on) "
                f"IN (VALUES {', '.join('(?, ?)' for _ in pairs)})",
                tuple(value for pair in pairs for value in pair),
            )
        return dropped

    async def defer_foreign_keys(self) -> None:
        """Check foreign keys at commit instead of per row, so rows may arrive in any order."""
        await self.conn.execute("PRAGMA defer_foreign_keys = ON")


# How actions point at other actions: (table, the pointing column, the column pointed along).
_ACTION_EDGES = {
    "parent": ("actions", "id", "parent_id"),
    "dependency": ("action_dependencies", "action_id", "depends_on"),
}


def _scope(spec: TableSpec, projects: Sequence[str] | None, walk: bool = False) -> tuple[str, tuple[str, ...]]:
    """WHERE clause and parameters limiting a table's rows to some projects (all when None).

    A `shared` table's global rows named by the projects' relations come too: without them an
    export's relations could not be imported anywhere they are not stored already.
    With `walk`, the project column is written `+column` so that SQLite cannot use its index.
    """
    if projects is None:
        return "", ()
    column, marks = f"{'+' if walk else ''}{spec.scope}", placeholders(len(projects))
    if not spec.shared:
        return f"WHERE {column} IN ({marks})", tuple(projects)
    named = (
        f"SELECT source_id FROM relations WHERE project IN ({marks}) "
        f"UNION SELECT target_id FROM relations WHERE project IN ({marks})"
    )
    return f"WHERE {column} IN ({marks}) OR ({column} = '{_GLOBAL}' AND t.id IN ({named}))", tuple(projects) * 3


def _dump_query(spec: TableSpec, projects: Sequence[str] | None, walk: bool = False) -> tuple[str, tuple[str, ...]]:
    """SQL and parameters of a table's rows in key order, optionally only some projects'."""
    cols = ", ".join(f"t.{c}" for c in spec.columns)
    where, params = _scope(spec, projects, walk)
    order = ", ".join(f"t.{k}" for k in spec.key)
    return f"SELECT {cols} FROM {spec.source} t {spec.join} {where} ORDER BY {order}", params


def _keeps(spec: TableSpec, values: dict[str, Any], stored: dict[str, Any]) -> bool:
    """Whether a row upserted over its stored copy leaves it as it is (the same, or not newer)."""
    return stored == values or not _newer(spec, values, stored)


def _newer(spec: TableSpec, values: dict[str, Any], stored: dict[str, Any]) -> bool:
    """Whether an imported row was updated after the stored copy (rows without the column never are)."""
    return spec.stamp in values and str(values[spec.stamp]) > str(stored.get(spec.stamp))
