"""SQL for slots."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.db import Row
from mcp_memory.models.records import Slot
from mcp_memory.repositories.base import Repository, placeholders, row_dict

_COLUMNS = "id, project, name, content, size_limit, pinned, description, created_at, updated_at"


def _slot(row: Row) -> Slot:
    return Slot(**row_dict(row, bool_columns=("pinned",)))


class SlotRepository(Repository):
    """Slots by (scope, name); a scope is a project or the global "*"."""

    async def get_or_none(self, scope: str, name: str) -> Slot | None:
        row = await self.conn.fetchone(f"SELECT {_COLUMNS} FROM slots WHERE project = ? AND name = ?", (scope, name))
        return None if row is None else _slot(row)

    async def get_many(self, ids: Sequence[str], scopes: Sequence[str]) -> list[Slot]:
        rows = await self.fetch_in(
            f"SELECT {_COLUMNS} FROM slots WHERE +project IN ({placeholders(len(scopes))}) AND id IN ({{ids}})",
            ids,
            scopes,
        )
        by_id = {r["id"]: _slot(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def in_scopes(self, scopes: Sequence[str]) -> list[Slot]:
        """Slots of the scopes, in scope order, then by name."""
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM slots WHERE project IN ({placeholders(len(scopes))})", tuple(scopes)
        )
        order = {scope: i for i, scope in enumerate(scopes)}
        return sorted((_slot(r) for r in rows), key=lambda s: (order[s.project], s.name))

    async def add(self, slot: Slot) -> None:
        await self.conn.execute(
            f"INSERT INTO slots ({_COLUMNS}) VALUES ({placeholders(9)})",
            (
                slot.id,
                slot.project,
                slot.name,
                slot.content,
                slot.size_limit,
                int(slot.pinned),
                slot.description,
                slot.created_at,
                slot.updated_at,
            ),
        )

    async def update(self, slot: Slot) -> None:
        await self.conn.execute(
            "UPDATE slots SET content = ?, size_limit = ?, pinned = ?, description = ?, updated_at = ? WHERE id = ?",
            (slot.content, slot.size_limit, int(slot.pinned), slot.description, slot.updated_at, slot.id),
        )

    async def delete(self, slot_id: str) -> None:
        await self.conn.execute("DELETE FROM slots WHERE id = ?", (slot_id,))
