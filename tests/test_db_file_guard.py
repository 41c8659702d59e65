"""The database file is guarded: another program's SQLite file is left alone, and a write refuses a
file deleted or replaced under the running server instead of landing where no path leads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.db import Database
from mcp_memory.errors import StorageError
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error


def _foreign(path: Path) -> bytes:
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE users (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT)")
        raw.execute("INSERT INTO users (name) VALUES ('ada')")
        raw.execute("PRAGMA user_version = 3")
    raw.close()
    return path.read_bytes()


async def test_another_programs_database_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    before = _foreign(path)
    with pytest.raises(StorageError, match=r"another program's SQLite database \(tables: users\)"):
        await Database.open(path)
    assert path.read_bytes() == before
    assert not (tmp_path / "app.db-wal").exists()


async def test_an_empty_sqlite_file_is_taken_as_new(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    db = await Database.open(path)
    try:
        async with db.read() as conn:
            assert await conn.fetchval("SELECT count(*) FROM schema_migrations") > 0
    finally:
        await db.close()


@pytest.mark.parametrize("victim", ["memory.db", "memory.db-wal"])
async def test_a_write_to_a_deleted_file_is_refused(tmp_path: Path, victim: str) -> None:
    settings = Settings(db=tmp_path / "memory.db", project="test", timezone="UTC")
    async with Client(build_server(settings, FakeClock())) as client:
        await call(client, "memory_save", content="The build runs on Python 3.11.")
        for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
            if name == victim or victim == "memory.db":
                (tmp_path / name).unlink(missing_ok=True)
        error = await call_error(client, "memory_save", content="This write must not be acknowledged.")
        assert "was deleted or replaced while the server had it open; nothing was written" in error
        assert str(tmp_path / victim) in error


async def test_a_replaced_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    settings = Settings(db=path, project="test", timezone="UTC")
    async with Client(build_server(settings, FakeClock())) as client:
        await call(client, "memory_save", content="First fact.")
        moved = tmp_path / "moved.db"
        path.rename(moved)
        path.write_bytes(b"")
        error = await call_error(client, "memory_save", content="Second fact.")
        assert "was deleted or replaced" in error
