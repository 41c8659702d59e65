"""A real `mcp-memory serve` subprocess over stdio: data and ranking survive a restart."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.conftest import call

NOTES = [
    ("decision", "We chose SQLite in WAL mode so readers never wait for the writer."),
    ("error", "The deploy failed: migration 0042 timed out on the orders table."),
    ("fix", "Raised the statement timeout for migrations; the deploy of the orders table went through."),
    ("note", "Caroline prefers short pull requests with one topic each."),
    ("file_change", "Renamed getUserName to get_user_name in src/app/user_service.py."),
]


def _server(db: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_memory", "serve", "--db", str(db), "--project", "stdio-test"]
    )


async def _ranking(client: Client, query: str) -> list[tuple[str, float]]:
    result = await call(client, "memory_recall", query=query, limit=5, include_memories=True)
    return [(h["id"], h["score"]) for h in result["hits"]]


async def test_data_and_ranking_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with Client(_server(db)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"memory_observe", "memory_recall", "memory_save", "memory_export"} <= tools
        ids = [(await call(client, "memory_observe", content=text, type=kind))["id"] for kind, text in NOTES]
        saved = await call(client, "memory_save", content="The orders table migration needs a long timeout.")
        first = await _ranking(client, "orders table migration timeout")
        renamed = await _ranking(client, "get_user_name")

    async with Client(_server(db)) as client:
        assert await _ranking(client, "orders table migration timeout") == first
        assert await _ranking(client, "get_user_name") == renamed
        listed = await call(client, "memory_observations", order="oldest", limit=10)
        assert [o["id"] for o in listed["observations"]] == ids
        assert (await call(client, "memory_get", id=saved["id"]))["memory"]["content"].startswith("The orders")
        health = await call(client, "memory_diagnose")
        assert health["index_in_sync"] is True
        assert health["counts"]["observations"] == len(NOTES)

    assert first[0][0] in {ids[1], ids[2], saved["id"]}
    assert renamed[0][0] == ids[4]
