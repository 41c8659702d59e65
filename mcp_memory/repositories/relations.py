"""SQL for relations (typed, weighted edges between any two records)."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.repositories.base import Repository, placeholders


class RelationRepository(Repository):
    """Edges by source and target id."""

    async def delete_touching(self, ids: Sequence[str]) -> list[str]:
        """Delete every relation whose source or target is among `ids`; returns the relation ids."""
        if not ids:
            return []
        marks = placeholders(len(ids))
        rows = await self.conn.fetchall(
            f"SELECT id FROM relations WHERE source_id IN ({marks}) OR target_id IN ({marks})", (*ids, *ids)
        )
        found = [r[0] for r in rows]
        if found:
            await self.conn.execute(f"DELETE FROM relations WHERE id IN ({placeholders(len(found))})", found)
        return found
