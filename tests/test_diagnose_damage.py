"""memory_diagnose on a damaged database file reports the damage instead of failing."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

PAGE = 4096


def _overwrite_pages_in_the_middle(db: Path, pages: int) -> None:
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.seek(size // 2 // PAGE * PAGE)
        f.write(b"\xff" * PAGE * pages)


async def test_a_damaged_file_is_reported_by_diagnose_and_reads_keep_working(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        for n in range(300):
            await call(client, "memory_save", content=f"Record {n} about topic{n} " + f"w{n}x " * 60)
        healthy = await call(client, "memory_diagnose")
    _overwrite_pages_in_the_middle(settings.db, 3)

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
