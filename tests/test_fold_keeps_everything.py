"""Folding keeps a line for every folded observation however long the session grows, and what is
forgotten of a folded session takes what was learned from it and its counts with it."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from mcp_memory.services.episodic_docs import INDEXED_DIGEST_CHARS, indexed_digest
from tests.conftest import FakeClock, call, call_error

LETTERS = "abcdefghijklmnop"
ERROR = "pytest failed: ModuleNotFoundError: No module named 'zqfrobnicator'"


def word(n: int) -> str:
    """A word of its own for each turn, so recall can tell the turns apart."""
    return f"zq{LETTERS[n % 16]}{LETTERS[n // 16 % 16]}word"


async def fill(client: Client, clock: FakeClock, count: int) -> None:
    for i in range(count):
        await call(client, "memory_observe", content=f"Ran the checker {word(i)} on module {i}.", type="tool_use",
                   session_id="big")  # fmt: skip
        clock.advance(minutes=1)


async def session(client: Client, session_id: str) -> dict[str, Any]:
    listed = await call(client, "memory_sessions", status="all")
    return next(s for s in listed["sessions"] if s["id"] == session_id)


async def test_every_folded_turn_keeps_its_line_and_is_found(settings: Settings, clock: FakeClock) -> None:
    # 140 lines run past the 6,000 characters a digest used to keep (its oldest lines then went)
    async with Client(build_server(settings.model_copy(update={"observation_cap": 10}), clock)) as client:
        await fill(client, clock, 150)
        [full] = (await call(client, "memory_smart_search", ids=["big"]))["sessions"]
        hits = await call(client, "memory_recall", query=word(0))

    assert full["folded_count"] == 140
    assert len([line for line in full["folded_digest"].split("\n") if line.startswith("- ")]) == 140
    assert [h["id"] for h in hits["hits"]][:1] == ["big"]


async def test_forgetting_every_turn_of_a_long_folded_session_leaves_no_count(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings.model_copy(update={"observation_cap": 10}), clock)) as client:
        await fill(client, clock, 150)
        forgot = await call(client, "memory_forget", kind="observation", session_id="big")
        left = await session(client, "big")

    assert forgot["counts"]["folded_observation"] == 140
    assert (left["observation_count"], left["folded_count"], left["recorded_count"], left["title"]) == (0, 0, 0, None)


async def _learned_from_folded_errors(settings: Settings, clock: FakeClock) -> str:
    """Two errors an anti-pattern was reflected from, then folded away; returns a time after them."""
    async with Client(build_server(settings, clock)) as client:
        for _ in range(2):
            await call(client, "memory_observe", content=ERROR, type="error", session_id="s1", importance=0.05)
            clock.advance(minutes=1)
        clock.advance(minutes=30)
        after = clock.now.isoformat().replace("+00:00", "Z")
        clock.advance(minutes=30)
        for n in range(12):
            await call(client, "memory_observe", content=f"Decided to keep layout {n} flat.", type="decision",
                       session_id="s1")  # fmt: skip
            clock.advance(minutes=1)
        await call(client, "memory_reflect", since="2026-01-01", until="2026-12-31")
        assert len((await call(client, "memory_lessons", kinds=["anti_pattern"]))["lessons"]) == 1
    async with Client(build_server(settings.model_copy(update={"observation_cap": 10}), clock)) as client:
        report = await call(client, "memory_consolidate")
        assert len([c for c in report["changes"] if c["action"] == "folded"]) == 4
    return after


async def test_forgetting_folded_evidence_by_time_takes_the_lesson_drawn_from_it(
    settings: Settings, clock: FakeClock
) -> None:
    until = await _learned_from_folded_errors(settings, clock)
    async with Client(build_server(settings, clock)) as client:
        forgot = await call(client, "memory_forget", kind="observation", until=until)
        left = await call(client, "memory_lessons", kinds=["anti_pattern"], status="all")

    assert forgot["counts"]["folded_observation"] == 2
    assert left["lessons"] == []


async def test_forgetting_a_folded_session_takes_the_lesson_drawn_from_its_folded_turns(
    settings: Settings, clock: FakeClock
) -> None:
    await _learned_from_folded_errors(settings, clock)
    async with Client(build_server(settings, clock)) as client:
        forgot = await call(client, "memory_forget", ids=["s1"])
        left = await call(client, "memory_lessons", kinds=["anti_pattern"], status="all")

    assert forgot["counts"]["session"] == 1
    assert left["lessons"] == []


async def test_a_long_digest_travels_and_one_too_long_for_its_folds_is_refused(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings.model_copy(update={"observation_cap": 10}), clock)) as client:
        await fill(client, clock, 20)
        document = (await call(client, "memory_export"))["document"]
    # as a session of 700 folded turns exports it: past the 100,000 characters a digest row was once allowed
    [row] = document["tables"]["sessions"]
    line = row["folded_digest"].split("\n")[0]
    row["folded_digest"] = "\n".join(f"{line[:-1]}{n} " + "x" * 120 for n in range(700))
    row["folded_count"], row["observation_count"] = 700, 710
    assert len(row["folded_digest"]) > 100_000

    async with Client(build_server(settings.model_copy(update={"db": settings.db.with_name("b.db")}), clock)) as other:
        await call(other, "memory_import", document=document)
        again = (await call(other, "memory_export"))["document"]
        forged = json.loads(json.dumps(document))
        forged["tables"]["sessions"][0]["folded_count"] = 1
        refused = await call_error(other, "memory_import", document=forged)

    assert again["tables"]["sessions"][0]["folded_digest"] == row["folded_digest"]
    assert "sessions[0].folded_digest: must be at most 100000 characters for 1 folded observations" in refused


def test_the_index_reads_the_newest_whole_lines_of_a_long_digest() -> None:
    lines = [f"- 09:{i % 60:02d} [note] turn {i} " + "y" * 90 for i in range(2_000)]
    digest = "\n".join(lines)

    indexed = indexed_digest(digest)

    assert len(digest) > INDEXED_DIGEST_CHARS >= len(indexed)
    assert indexed.split("\n") == lines[-len(indexed.split("\n")) :]
    assert indexed_digest("\n".join(lines[:10])) == "\n".join(lines[:10])
