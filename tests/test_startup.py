"""The server answers the MCP handshake at once and builds its search index afterwards.

A store of a million records takes tens of seconds to load; clients time out handshakes sooner.
Calls that need the index wait for it (or get a clear error if it cannot be built), so what they
see is the same as if the build had finished before the handshake.

A real second writer holding SQLite's write lock keeps the build from finishing: the analyzer
version is set back, so opening the store re-analyses it, and that needs the lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import SharedApp, build_server
from tests.conftest import FakeClock, call, call_error

NOTES = [
    "Switched the importer to streaming JSON so large exports fit in memory.",
    "The flaky upload test was a race in the temp-dir cleanup.",
]


async def _store_notes(settings: Settings, clock: FakeClock) -> list[str]:
    async with Client(build_server(settings, clock)) as client:
        return [(await call(client, "memory_observe", content=note, type="note"))["id"] for note in NOTES]


@asynccontextmanager
async def _opened_while_another_writer_holds_the_lock(
    settings: Settings, clock: FakeClock, busy_timeout_ms: int
) -> AsyncIterator[tuple[Client, SharedApp, sqlite3.Connection]]:
    """A server connected while another writer holds the write lock, which its index build needs
    (the store asks for re-analysis); the test releases the lock with `other.execute("ROLLBACK")`."""
    with sqlite3.connect(settings.db) as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'analyzer_version'")
    settings = settings.model_copy(update={"busy_timeout_ms": busy_timeout_ms})
    shared = SharedApp(settings, clock)
    other = sqlite3.connect(settings.db, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        async with Client(build_server(settings, clock, shared=shared)) as client:
            yield client, shared, other
    finally:
        other.close()


async def test_the_handshake_and_tool_list_do_not_wait_for_the_index(settings: Settings, clock: FakeClock) -> None:
    ids = await _store_notes(settings, clock)
    async with _opened_while_another_writer_holds_the_lock(settings, clock, 60_000) as (client, shared, other):
        tools = await client.list_tools()
        assert "memory_recall" in {tool.name for tool in tools.tools}
        assert not await shared.ready()

        answers: list[dict[str, Any]] = []

        async def recall() -> None:
            answers.append(await call(client, "memory_recall", query="flaky upload test"))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(recall)
            tasks.start_soon(recall)
            await anyio.sleep(0.3)
            assert answers == []  # waiting for the index, not answering from an empty one
            other.execute("ROLLBACK")
        assert await shared.ready()
        assert [answer["hits"][0]["id"] for answer in answers] == [ids[1], ids[1]]
        diagnosis = await call(client, "memory_diagnose")
    assert diagnosis["index_in_sync"] is True
    assert diagnosis["index_docs"] == {"observation": 2}


async def test_a_build_that_fails_is_reported_by_the_call_and_tried_again(settings: Settings, clock: FakeClock) -> None:
    ids = await _store_notes(settings, clock)
    async with _opened_while_another_writer_holds_the_lock(settings, clock, 50) as (client, shared, other):
        error = await call_error(client, "memory_recall", query="streaming importer")
        assert "the search index could not be built" in error
        assert "locked by another writer" in error
        assert not await shared.ready()

        other.execute("ROLLBACK")
        hits = (await call(client, "memory_recall", query="streaming importer"))["hits"]
        assert await shared.ready()
    assert [hit["id"] for hit in hits] == [ids[0]]
