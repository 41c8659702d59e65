"""The re-analysis of an older store when several servers open it: one does it, the others wait."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

DONE_MESSAGE = "search terms re-analysed"


async def fill(client: Client) -> list[str]:
    """Records of every indexed kind (each kind is re-analysed in batches of its own); the memories' ids."""
    for session in ("chat-1", "chat-2"):
        for turn in ("Caroline went to the support group", "Melanie painted a sunrise over the lake"):
            await call(client, "memory_observe", content=turn, session_id=session)
    await call(client, "memory_lesson_save", content="Run the migrations before the tests")
    return [
        str((await call(client, "memory_save", content=text))["id"])
        for text in ("The staging database lives on port 5433", "Deploys go out on Tuesdays")
    ]


def make_older(path: Path, recorded: str = "3") -> None:
    """Make the store look analysed by the previous analyzer: no stored terms at all."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE search_docs SET terms = x'', length = 0, analyzer = 3")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'analyzer_version'", (recorded,))


def recorded_version(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("SELECT value FROM meta WHERE key = 'analyzer_version'").fetchone()[0])


async def port(client: Client) -> list[str]:
    return [hit["id"] for hit in (await call(client, "memory_smart_search", query="staging port"))["hits"]]


async def test_servers_started_together_on_an_older_store_re_analyse_it_once(
    settings: Settings, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(build_server(settings, clock)) as client:
        staging, _ = await fill(client)
        expected = (await call(client, "memory_diagnose"))["stored_docs"]
    make_older(settings.db)
    caplog.set_level(logging.INFO, logger="mcp_memory.services.reanalysis")

    async with Client(build_server(settings, clock)) as first, Client(build_server(settings, clock)) as second:
        diagnoses = await asyncio.gather(call(first, "memory_diagnose"), call(second, "memory_diagnose"))
        hits = [await port(first), await port(second)]

    for diagnosis in diagnoses:
        assert diagnosis["index_docs"] == diagnosis["stored_docs"] == expected
        assert diagnosis["index_in_sync"] is True
    assert hits == [[staging], [staging]]
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith(DONE_MESSAGE)] == [
        f"{DONE_MESSAGE}: {sum(expected.values())} records"
    ]
    assert recorded_version(settings.db) == str(ANALYZER_VERSION)


async def test_a_server_waits_for_another_process_re_analysing_and_keeps_its_work(
    settings: Settings, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(build_server(settings, clock)) as client:
        staging, _ = await fill(client)
    # another process has claimed the re-analysis and renewed its claim just now
    with sqlite3.connect(settings.db) as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'analyzer_version'", (f"re-analysing: 4242.other at {time.time()}",)
        )
    caplog.set_level(logging.INFO, logger="mcp_memory.services.reanalysis")

    async with Client(build_server(settings, clock)) as client:
        search = asyncio.create_task(port(client))
        await asyncio.sleep(0.6)
        waited = not search.done()
        with sqlite3.connect(settings.db) as conn:  # the other process finishes
            conn.execute("UPDATE meta SET value = ? WHERE key = 'analyzer_version'", (str(ANALYZER_VERSION),))
        hits = await asyncio.wait_for(search, 10)

    assert waited
    assert hits == [staging]  # the stored terms the other process wrote were not cleared
    assert not [r for r in caplog.records if r.getMessage().startswith(DONE_MESSAGE)]


@pytest.mark.parametrize("recorded", ["re-analysing: 4242.gone at 0.000", "rebuilding"])
async def test_a_claim_left_by_a_process_that_died_is_taken_over(
    settings: Settings, clock: FakeClock, recorded: str
) -> None:
    async with Client(build_server(settings, clock)) as client:
        staging, _ = await fill(client)
    make_older(settings.db, recorded)

    async with Client(build_server(settings, clock)) as client:
        diagnosis = await asyncio.wait_for(call(client, "memory_diagnose"), 10)
        hits = await port(client)

    assert diagnosis["index_docs"] == diagnosis["stored_docs"]
    assert hits == [staging]
    assert recorded_version(settings.db) == str(ANALYZER_VERSION)
