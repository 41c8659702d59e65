"""SQL for the project profile: what a project's records talk about most."""

from __future__ import annotations

from mcp_memory.repositories.base import Repository

_LIST_COLUMNS = ("concepts", "files")


class ProfileRepository(Repository):
    """Aggregates over observations and the latest memories of a project."""

    async def top_values(
        self, project: str, column: str, limit: int, recent: int | None = None
    ) -> list[tuple[str, int]]:
        """Most frequent entries of a JSON list column (concepts or files), with counts: over every
        observation and live memory, or over the `recent` latest of each (by when they happened)."""
        if column not in _LIST_COLUMNS:
            raise ValueError(f"not a list column: {column}")
        # LIMIT -1 is no limit; the ordered scans walk the time indexes, so a window reads only its rows
        window = -1 if recent is None else recent
        rows = await self.conn.fetchall(
            "SELECT value, count(*) AS n FROM ("
            f" SELECT j.value FROM (SELECT {column} AS list FROM observations WHERE project = ?"
            "  ORDER BY coalesce(occurred_at, created_at) DESC LIMIT ?) o, json_each(o.list) j"
            " UNION ALL"
            f" SELECT j.value FROM (SELECT {column} AS list FROM memories WHERE project = ? AND is_latest = 1"
            "  ORDER BY created_at DESC LIMIT ?) m, json_each(m.list) j"
            ") GROUP BY value ORDER BY n DESC, value LIMIT ?",
            (project, window, project, window, limit),
        )
        return [(str(r[0]), int(r[1])) for r in rows]
