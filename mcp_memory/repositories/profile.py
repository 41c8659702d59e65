"""SQL for the project profile: what a project's records talk about most."""

from __future__ import annotations

from mcp_memory.repositories.base import Repository

_LIST_COLUMNS = ("concepts", "files")


class ProfileRepository(Repository):
    """Aggregates over observations and the latest memories of a project."""

    async def top_values(self, project: str, column: str, limit: int) -> list[tuple[str, int]]:
        """Most frequent entries of a JSON list column (concepts or files), with counts."""
        if column not in _LIST_COLUMNS:
            raise ValueError(f"not a list column: {column}")
        rows = await self.conn.fetchall(
            "SELECT value, count(*) AS n FROM ("
            f" SELECT j.value FROM observations o, json_each(o.{column}) j WHERE o.project = ?"
            " UNION ALL"
            f" SELECT j.value FROM memories m, json_each(m.{column}) j WHERE m.project = ? AND m.is_latest = 1"
            ") GROUP BY value ORDER BY n DESC, value LIMIT ?",
            (project, project, limit),
        )
        return [(str(r[0]), int(r[1])) for r in rows]
