"""memory_diagnose on a damaged database file reports the damage instead of failing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

PAGE = 4096


def _overwrite_pages_of(db: Path, table: str, pages: int) -> None:
    """Overwrite some leaf pages of one table: damage that start-up and search never read."""
    with sqlite3.connect(db) as conn:
        numbers = [
            n for (n,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,))
        ]
    assert len(numbers) > pages
    with db.open("r+b") as f:
        for number in numbers[1 : pages + 1]:
            f.seek((number - 1) * PAGE)
            f.write(b"\xff" * PAGE)


async def test_a_damaged_file_is_reported_by_diagnose_and_reads_keep_working(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        for n in range(300):
            await call(client, "memory_save", content=f"Record {n} about topic{n} " + f"w{n}x " * 60)
        healthy = await call(client, "memory_diagnose")
    _overwrite_pages_of(settings.db, "audit_log", 3)

    async with Client(build_server(settings, clock)) as client:
        damaged = await call(client, "memory_diagnose")
        again = await call(client, "memory_diagnose")  # the reader that met the damage went back clean
        found = await call(client, "memory_smart_search", query="topic7", limit=1)

    assert healthy["integrity_ok"] is True
    assert damaged["integrity_ok"] is False
    assert damaged["integrity"] != ["ok"]
    assert any("malformed" in line or "corrupt" in line or "Page" in line for line in damaged["integrity"])
    assert again["integrity"] == damaged["integrity"]
    assert found["hits"][0]["title"].startswith("Record 7 about topic7")


async def test_diagnose_reports_damage_that_keeps_the_search_index_from_being_built(
    settings: Settings, clock: FakeClock
) -> None:
    unbuilt = settings.model_copy(update={"index_cache": False})  # no cache to load in place of the stored terms
    async with Client(build_server(unbuilt, clock)) as client:
        for n in range(300):
            await call(client, "memory_save", content=f"Record {n} about topic{n} " + f"w{n}x " * 60)
    _overwrite_pages_of(settings.db, "search_docs", 2)

    async with Client(build_server(unbuilt, clock)) as client:
        damaged = await call(client, "memory_diagnose")
        search = await client.call_tool("memory_smart_search", {"query": "topic7"})

    assert damaged["integrity_ok"] is False
    assert "malformed" in (damaged["index_error"] or "")
    assert damaged["index_in_sync"] is False
    assert search.is_error  # every other tool says why it cannot answer
