"""SQL for the project profile: what a project's records talk about most."""

from __future__ import annotations

from mcp_memory.repositories.base import Repository

_LIST_COLUMNS = ("concepts", "files")


class ProfileRepository(Repository):
    """Reads the running count of concepts and files that triggers keep (migration 7)."""

    async def top_values(self, project: str, column: str, limit: int) -> list[tuple[str, int]]:
        """Most frequent entries of a JSON list column (concepts or files) over every observation
        and live memory of a project, with their counts."""
        if column not in _LIST_COLUMNS:
            raise ValueError(f"not a list column: {column}")
        rows = await self.conn.fetchall(
            "SELECT value, n FROM profile_tally WHERE project = ? AND field = ? ORDER BY n DESC, value LIMIT ?",
            (project, column, limit),
        )
        return [(str(r[0]), int(r[1])) for r in rows]
