"""Importing the export of another machine merges sessions that grew apart on both: every session the
import writes to counts and numbers the observations it holds, and the index learns the new positions."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_tools_operations import export_document, fresh_settings


async def observe(client: Client, clock: FakeClock, session_id: str, *contents: str) -> list[str]:
    made = []
    for content in contents:
        made.append((await call(client, "memory_observe", content=content, session_id=session_id))["id"])
        clock.advance(minutes=1)
    return made


async def session_view(client: Client, session_id: str) -> dict[str, Any]:
    listed = await call(client, "memory_sessions", status="all")
    return next(s for s in listed["sessions"] if s["id"] == session_id)


def positions(document: dict[str, Any], session_id: str) -> list[tuple[int, str]]:
    """(seq, content) of a session's observations in an export, in seq order."""
    rows = [o for o in document["tables"]["observations"] if o["session_id"] == session_id]
    return sorted((o["seq"], o["content"]) for o in rows)


def indexed_positions(db: Path) -> dict[str, int]:
    """doc id -> the position the stored search index keeps for each observation."""
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT doc_id, seq FROM search_docs WHERE kind = 'observation'").fetchall())


async def grow_apart(
    tmp_path: Path, clock: FakeClock, shared: int = 5, cap: int | None = None
) -> tuple[Settings, Settings, dict[str, Any]]:
    """Machine A records `shared` turns of session "work" (under an observation cap of `cap`, when
    given), B imports A's export, then A records two more turns and B three; returns both machines'
    settings and B's export."""
    a, b = fresh_settings(tmp_path, "a"), fresh_settings(tmp_path, "b")
    first = a if cap is None else fresh_settings(tmp_path, "a", observation_cap=cap)
    async with Client(build_server(first, clock)) as laptop:
        await observe(laptop, clock, "work", *(f"Shared turn {i} on the search refactor" for i in range(shared)))
        document = await export_document(laptop)
    async with Client(build_server(b, clock)) as desktop:
        await call(desktop, "memory_import", document=document)
    async with Client(build_server(a, clock)) as laptop:
        await observe(laptop, clock, "work", "Laptop turn one on tokenizer", "Laptop turn two on tokenizer")
    async with Client(build_server(b, clock)) as desktop:
        await observe(desktop, clock, "work", "Desktop turn one on ranking", "Desktop turn two", "Desktop turn three")
        return a, b, await export_document(desktop)


async def test_a_session_that_grew_apart_counts_and_numbers_every_observation_once_merged(
    tmp_path: Path, clock: FakeClock
) -> None:
    a, _, theirs = await grow_apart(tmp_path, clock)

    async with Client(build_server(a, clock)) as laptop:
        await call(laptop, "memory_import", document=theirs)
        view = await session_view(laptop, "work")
        listed = await call(laptop, "memory_observations", session_id="work", order="oldest")
        profile = await call(laptop, "memory_profile")
        recalled = await call(laptop, "memory_recall", query="desktop turn two", neighbours=1, limit=1)
        health = await call(laptop, "memory_diagnose")
        merged = await export_document(laptop)
        clock.advance(minutes=1)
        later = await call(laptop, "memory_observe", content="Laptop turn three after the merge", session_id="work")
        after = await export_document(laptop)

    assert (view["observation_count"], view["recorded_count"], view["folded_count"]) == (10, 10, 0)
    assert listed["total"] == profile["observations"] == 10
    # one position per observation, in the order they happened (the laptop's turns came first)
    assert positions(merged, "work") == [
        *((i + 1, f"Shared turn {i} on the search refactor") for i in range(5)),
        (6, "Laptop turn one on tokenizer"),
        (7, "Laptop turn two on tokenizer"),
        (8, "Desktop turn one on ranking"),
        (9, "Desktop turn two"),
        (10, "Desktop turn three"),
    ]
    assert [o["title"] for o in listed["observations"]] == [content for _, content in positions(merged, "work")]
    assert recalled["hits"][0]["context"] == ["-1: Desktop turn one on ranking", "+1: Desktop turn three"]
    assert view["last_activity_at"] == max(o["created_at"] for o in merged["tables"]["observations"])
    assert health["index_in_sync"] is True
    # the stored index keeps the new positions, and the next turn takes the next one
    assert indexed_positions(a.db) == {o["id"]: o["seq"] for o in after["tables"]["observations"]}
    assert (11, "Laptop turn three after the merge") in positions(after, "work")
    assert later["session_id"] == "work"


async def test_importing_the_merged_export_again_changes_nothing(tmp_path: Path, clock: FakeClock) -> None:
    a, _, theirs = await grow_apart(tmp_path, clock)

    async with Client(build_server(a, clock)) as laptop:
        await call(laptop, "memory_import", document=theirs)
        once = await export_document(laptop)
        clock.advance(minutes=5)
        again = await call(laptop, "memory_import", document=theirs)
        twice = await export_document(laptop)

    assert sum(again["inserted"].values()) == sum(again["updated"].values()) == 0
    assert again["reindexed"] == 0
    assert twice == once


async def test_both_machines_agree_once_each_has_imported_the_others_export(tmp_path: Path, clock: FakeClock) -> None:
    a, b, theirs = await grow_apart(tmp_path, clock)
    async with Client(build_server(a, clock)) as laptop:
        await call(laptop, "memory_import", document=theirs)
        ours = await export_document(laptop)
    clock.advance(minutes=5)

    async with Client(build_server(b, clock)) as desktop:
        await call(desktop, "memory_import", document=ours)
        view = await session_view(desktop, "work")
        synced = await export_document(desktop)

    assert (view["observation_count"], view["recorded_count"]) == (10, 10)
    assert synced["tables"]["sessions"] == ours["tables"]["sessions"]
    assert synced["tables"]["observations"] == ours["tables"]["observations"]
    assert indexed_positions(b.db) == {o["id"]: o["seq"] for o in synced["tables"]["observations"]}


async def test_a_merged_session_with_folded_observations_numbers_its_kept_ones_after_them(
    tmp_path: Path, clock: FakeClock
) -> None:
    # Twelve shared turns under a cap of ten fold the two oldest away (B imports the folded session);
    # both machines then run with the default cap, so nothing more folds.
    a, _, theirs = await grow_apart(tmp_path, clock, shared=12, cap=10)

    async with Client(build_server(a, clock)) as laptop:
        await call(laptop, "memory_import", document=theirs)
        view = await session_view(laptop, "work")
        merged = await export_document(laptop)

    assert (view["observation_count"], view["recorded_count"], view["folded_count"]) == (15, 17, 2)
    assert [seq for seq, _ in positions(merged, "work")] == list(range(3, 18))
    assert positions(merged, "work")[-5:] == [
        (13, "Laptop turn one on tokenizer"),
        (14, "Laptop turn two on tokenizer"),
        (15, "Desktop turn one on ranking"),
        (16, "Desktop turn two"),
        (17, "Desktop turn three"),
    ]


async def test_a_newer_session_row_from_elsewhere_is_recounted_with_the_observations_kept_here(
    tmp_path: Path, clock: FakeClock
) -> None:
    a, b = fresh_settings(tmp_path, "a"), fresh_settings(tmp_path, "b")
    async with Client(build_server(a, clock)) as laptop:
        await observe(laptop, clock, "work", "Shared turn about the parser", "Another shared turn")
        document = await export_document(laptop)
    async with Client(build_server(b, clock)) as desktop:
        await call(desktop, "memory_import", document=document)
    async with Client(build_server(a, clock)) as laptop:
        latest = await observe(laptop, clock, "work", "Laptop-only turn about the lexer")
    async with Client(build_server(b, clock)) as desktop:  # only summarises: its session row is newer
        await call(desktop, "memory_crystallize", session_id="work")
        theirs = await export_document(desktop)

    async with Client(build_server(a, clock)) as laptop:
        result = await call(laptop, "memory_import", document=theirs)
        view = await session_view(laptop, "work")
        merged = await export_document(laptop)

    assert result["updated"]["sessions"] == 1
    assert view["summary"] is not None
    assert (view["observation_count"], view["recorded_count"]) == (3, 3)
    mine = next(o for o in merged["tables"]["observations"] if o["id"] == latest[0])
    assert view["last_activity_at"] == mine["created_at"]
    assert [seq for seq, _ in positions(merged, "work")] == [1, 2, 3]


async def test_a_session_with_folds_and_a_backdated_turn_round_trips_into_a_fresh_database(
    tmp_path: Path, clock: FakeClock
) -> None:
    # Positions a session came by honestly (gaps left by folding, a turn recorded late about an
    # earlier moment) are kept as they are: only colliding positions are renumbered.
    source = fresh_settings(tmp_path, "source", observation_cap=10)
    async with Client(build_server(source, clock)) as client:
        await observe(client, clock, "work", *(f"Turn {i} about the build cache" for i in range(12)))
        await call(
            client,
            "memory_observe",
            content="Recalled that the cache broke last week",
            session_id="work",
            occurred_at="2026-01-01T08:00:00Z",
        )
        original = await export_document(client)

    async with Client(build_server(fresh_settings(tmp_path, "fresh"), clock)) as fresh:
        imported = await call(fresh, "memory_import", document=original)
        copied = await export_document(fresh)

    assert [seq for seq, _ in positions(original, "work")][:2] == [4, 5]  # 1-3 folded away
    assert copied == original
    assert imported["inserted"] == {"sessions": 1, "folded_observations": 3, "observations": 10}
