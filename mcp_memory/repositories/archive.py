"""SQL for export and import: every exported table read and upserted generically."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from mcp_memory.models import records as r
from mcp_memory.repositories.base import Repository, dump_json, placeholders, row_dict


@dataclass(frozen=True, slots=True)
class TableSpec:
    """How one table is exported: its record model, key, and how rows are scoped to projects."""

    name: str
    model: type[BaseModel]
    key: tuple[str, ...]
    json_columns: tuple[str, ...] = ()
    bool_columns: tuple[str, ...] = ()
    scope: str = "t.project"
    join: str = ""

    @property
    def columns(self) -> list[str]:
        return list(self.model.model_fields)


TABLES: tuple[TableSpec, ...] = (
    TableSpec("sessions", r.Session, ("id",)),
    TableSpec("observations", r.Observation, ("id",), ("facts", "concepts", "files")),
    TableSpec("memories", r.Memory, ("id",), ("concepts", "files"), ("is_latest",)),
    TableSpec("lessons", r.Lesson, ("id",), ("tags", "source")),
    TableSpec("outcomes", r.Outcome, ("id",), ("steps", "mistakes", "successes"), ("success", "task_type_inferred")),
    TableSpec("mistake_cards", r.MistakeCard, ("id",)),
    TableSpec(
        "outcome_mistake_cards",
        r.OutcomeMistakeCard,
        ("outcome_id", "card_id"),
        scope="o.project",
        join="JOIN outcomes o ON o.id = t.outcome_id",
    ),
    TableSpec("slots", r.Slot, ("id",), bool_columns=("pinned",)),
    TableSpec("actions", r.Action, ("id",), ("tags",)),
    TableSpec(
        "action_dependencies",
        r.ActionDependency,
        ("action_id", "depends_on"),
        scope="a.project",
        join="JOIN actions a ON a.id = t.action_id",
    ),
    TableSpec("relations", r.Relation, ("id",)),
)
TABLES_BY_NAME = {spec.name: spec for spec in TABLES}


@dataclass(frozen=True, slots=True)
class UpsertResult:
    """What an upsert did to one row."""

    inserted: bool
    updated: bool


class ArchiveRepository(Repository):
    """Reads whole tables for export and writes rows back for import."""

    async def dump(self, spec: TableSpec, projects: Sequence[str] | None) -> list[dict[str, Any]]:
        """Rows of a table as plain dicts (lists decoded), ordered by key, optionally for some projects."""
        cols = ", ".join(f"t.{c}" for c in spec.columns)
        where = "" if projects is None else f"WHERE {spec.scope} IN ({placeholders(len(projects))})"
        order = ", ".join(f"t.{k}" for k in spec.key)
        rows = await self.conn.fetchall(
            f"SELECT {cols} FROM {spec.name} t {spec.join} {where} ORDER BY {order}", tuple(projects or ())
        )
        return [row_dict(row, spec.json_columns, spec.bool_columns) for row in rows]

    async def upsert(self, spec: TableSpec, record: BaseModel) -> UpsertResult:
        """Insert a record, or update it when the stored copy is older; identical rows are left alone."""
        values = record.model_dump()
        for column in spec.json_columns:
            values[column] = dump_json(values[column])
        for column in spec.bool_columns:
            if values[column] is not None:
                values[column] = int(values[column])
        key_where = " AND ".join(f"{k} = ?" for k in spec.key)
        key_values = tuple(values[k] for k in spec.key)
        cols = spec.columns
        existing = await self.conn.fetchone(f"SELECT {', '.join(cols)} FROM {spec.name} WHERE {key_where}", key_values)
        if existing is None:
            await self.conn.execute(
                f"INSERT INTO {spec.name} ({', '.join(cols)}) VALUES ({placeholders(len(cols))})",
                tuple(values[c] for c in cols),
            )
            return UpsertResult(True, False)
        current = dict(zip(existing.keys(), tuple(existing), strict=True))
        newer = "updated_at" in values and str(values["updated_at"]) > str(current.get("updated_at"))
        if current == values or not newer:
            return UpsertResult(False, False)
        changed = [c for c in cols if c not in spec.key]
        await self.conn.execute(
            f"UPDATE {spec.name} SET {', '.join(f'{c} = ?' for c in changed)} WHERE {key_where}",
            (*(values[c] for c in changed), *key_values),
        )
        return UpsertResult(False, True)

    async def defer_foreign_keys(self) -> None:
        """Check foreign keys at commit instead of per row, so rows may arrive in any order."""
        await self.conn.execute("PRAGMA defer_foreign_keys = ON")
