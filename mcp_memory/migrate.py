"""Applies the numbered migrations, each recorded in the same transaction as its change.

`apply_migrations` runs at start-up and is safe when several processes open the same file at once
(each step re-checks the version inside its own `BEGIN IMMEDIATE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_memory.errors import StorageError
from mcp_memory.migrations import MIGRATIONS

if TYPE_CHECKING:
    from mcp_memory.db import Database


async def schema_version(db: Database) -> int:
    """The highest migration applied to this file (0 for a new file)."""
    async with db.read() as conn:
        exists = await conn.fetchval(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        )
        if not exists:
            return 0
        return int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations") or 0)


async def apply_migrations(db: Database) -> int:
    """Apply every migration newer than the file's version; returns the resulting version."""
    known = MIGRATIONS[-1][0]
    if await schema_version(db) == known:
        return known  # the common case needs no write lock, which another process may hold for long
    async with db.migration_step() as conn:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        newest = int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations") or 0)
    if newest > known:
        raise StorageError(
            f"{db.path} has schema version {newest}, newer than this mcp-memory knows ({known}); upgrade mcp-memory"
        )
    version = 0
    for number, name, statements in MIGRATIONS:
        async with db.migration_step() as conn:
            applied = await conn.fetchval("SELECT 1 FROM schema_migrations WHERE version = ?", (number,))
            if not applied:
                for statement in statements:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) "
                    "VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                    (number, name),
                )
                await conn.execute(f"PRAGMA user_version = {number}")
        version = number
    return version
