"""What is forgotten stays forgotten: consolidation does not promote a forgotten memory's fact again,
a time-window forget reaches the lines of folded observations in their session's digest, and a
session with nothing left gets no summary."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from mcp_memory.services import forget as forget_service
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_operations import export_document, fresh_settings

FACT = "Dana from accounting is going through a divorce"


async def session_view(client: Client, session_id: str) -> dict[str, object]:
    listed = await call(client, "memory_sessions", status="all", limit=100)
    return next(s for s in listed["sessions"] if s["id"] == session_id)


async def observe_recurring(client: Client, clock: FakeClock, fact: str, first_day: int = 0) -> None:
    """The same fact noted in three sessions, so consolidation promotes it."""
    for day in range(first_day, first_day + 3):
        await call(client, "memory_observe", content=f"day {day}: talked about the office", session_id=f"day-{day}")
        await call(client, "memory_observe", content=f"day {day} again", session_id=f"day-{day}", facts=[fact])
        clock.advance(hours=1)


def promoted(report: dict[str, object]) -> list[str]:
    changes = report["changes"]
    assert isinstance(changes, list)
    return [c["detail"] for c in changes if c["action"] == "promoted"]


# -- consolidation keeps a forgotten memory forgotten ---------------------------------------------------


async def test_a_forgotten_promoted_memory_is_not_promoted_again(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as client:
        await observe_recurring(client, clock, FACT)
        first = await call(client, "memory_consolidate")
        [memory_id] = [c["id"] for c in first["changes"] if c["action"] == "promoted"]
        await call(client, "memory_forget", ids=[memory_id])
        # the fact still recurs, in other words and in more sessions
        await observe_recurring(client, clock, "DANA, from accounting, is going through a divorce!", first_day=3)
        again = await call(client, "memory_consolidate", dry_run=True)
        real = await call(client, "memory_consolidate")
        found = await call(client, "memory_smart_search", query="Dana divorce", kinds=["memory"])
    # restarting keeps the record of what was forgotten
    async with Client(build_server(settings, clock)) as client:
        after_restart = await call(client, "memory_consolidate")

    assert promoted(first) == [f"seen in 3 sessions: {FACT}"]
    assert (promoted(again), promoted(real), promoted(after_restart)) == ([], [], [])
    assert found["hits"] == []
    # what is kept is a fingerprint, never the fact's words
    with sqlite3.connect(settings.db) as db:
        rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
    assert not [v for v in rows.values() if "dana" in v.casefold() or "divorce" in v.casefold()]
    [fingerprint] = json.loads(rows["forgotten_facts:test"])["fingerprints"]
    assert len(fingerprint) == 64


async def test_a_memory_forgotten_by_filter_stays_forgotten_and_other_facts_still_promote(
    client: Client, clock: FakeClock
) -> None:
    await call(client, "memory_save", content=FACT, kind="fact")
    await call(client, "memory_forget", kind="memory")
    other = "The staging database is rebuilt every Sunday night"
    for day in range(3):
        await call(client, "memory_observe", content=f"standup {day}", session_id=f"s-{day}", facts=[FACT, other])
        clock.advance(hours=1)

    report = await call(client, "memory_consolidate")

    assert promoted(report) == [f"seen in 3 sessions: {other}"]


QUEUE = "Our worker queue uses rabbitmq with three replicas."
QUEUE_AGAIN = "The worker queue uses RabbitMQ with three replicas"


async def test_a_forgotten_or_corrected_fact_is_not_promoted_again_in_other_filler_words(
    client: Client, clock: FakeClock
) -> None:
    forgotten = await call(client, "memory_save", content=QUEUE)
    await call(client, "memory_forget", ids=[forgotten["id"]])
    await observe_recurring(client, clock, QUEUE_AGAIN)
    assert promoted(await call(client, "memory_consolidate")) == []

    old = await call(client, "memory_save", content="Builds run on three Jenkins agents in the basement.")
    await call(client, "memory_save", content="Builds moved to GitHub Actions.", supersedes=old["id"])
    await observe_recurring(client, clock, "our builds run on three Jenkins agents in the basement", first_day=3)
    assert promoted(await call(client, "memory_consolidate")) == []


async def test_a_fingerprint_an_earlier_release_stored_still_keeps_its_fact_forgotten(
    client: Client, clock: FakeClock
) -> None:
    document = await export_document(client)
    legacy = forget_service.fact_fingerprints(QUEUE_AGAIN)[1]  # every word hashed, as releases before did
    document["tables"]["forgotten_facts"] = [
        {"project": "test", "fingerprints": [legacy], "forgotten_at": "2026-01-01T00:00:00.000000Z"}
    ]
    await call(client, "memory_import", document=document)
    await observe_recurring(client, clock, QUEUE_AGAIN)
    assert promoted(await call(client, "memory_consolidate")) == []


# -- forgetting a time window reaches folded observations -------------------------------------------------


async def test_forgetting_a_time_window_removes_its_folded_observations_from_the_digest(
    settings: Settings, clock: FakeClock
) -> None:
    capped = settings.model_copy(update={"observation_cap": 10})
    async with Client(build_server(capped, clock)) as client:
        await call(client, "memory_observe", content="Decided to ship on Friday", type="decision", session_id="s1")
        clock.advance(minutes=10)
        for n in range(4):  # 09:10 to 09:40, the least valuable: folded first
            content = f"Chit-chat {n}: my neighbour's platypus named Gerald escaped again"
            await call(client, "memory_observe", content=content, importance=0.1, session_id="s1")
            clock.advance(minutes=10)
        for n in range(10):
            content = f"Work item {n}: reviewed the caching pull request"
            await call(client, "memory_observe", content=content, type="decision", session_id="s1")
            clock.advance(minutes=10)
        before = (await call(client, "memory_smart_search", ids=["s1"]))["sessions"][0]["folded_digest"]
        window = {"since": "2026-01-05T09:05:00Z", "until": "2026-01-05T09:45:00Z"}
        dry = await call(client, "memory_forget", dry_run=True, **window)
        done = await call(client, "memory_forget", **window)
        view = await session_view(client, "s1")
        after = (await call(client, "memory_smart_search", ids=["s1"]))["sessions"][0]["folded_digest"]
        recalled = await call(client, "memory_recall", query="platypus Gerald")
        searched = await call(client, "memory_smart_search", query="platypus")
        exported = json.dumps(await export_document(client))
        context = (await call(client, "memory_context", query="platypus"))["text"]
        # the next observation is numbered after what remains: its neighbour is the last work item
        await call(client, "memory_observe", content="Wrapped up the zeppelin release", session_id="s1")
        last = (await call(client, "memory_recall", query="zeppelin", neighbours=1))["hits"][0]

    chit_chat = "my neighbour's platypus named Gerald escaped again"
    assert before.splitlines() == [
        *(f"- 09:{n + 1}0 [note] Chit-chat {n}: {chit_chat}" for n in range(4)),
        "- 09:00 [decision] Decided to ship on Friday",
    ]
    expected = {"observation": [], "memory": [], "session": [], "folded_observation": ["s1"] * 4}
    assert (dry["deleted"], dry["total"]) == (expected, 4)
    assert (done["deleted"], done["total"]) == (expected, 4)
    assert after == "- 09:00 [decision] Decided to ship on Friday"
    assert (view["observation_count"], view["folded_count"], view["recorded_count"]) == (10, 1, 11)
    assert recalled["hits"] == []
    assert searched["hits"] == []
    assert "platypus" not in exported
    assert "platypus" not in context
    assert last["context"] == ["-1: Work item 9: reviewed the caching pull request"]


async def test_a_digest_line_carries_the_date_when_it_is_not_the_sessions_first_day(
    settings: Settings,
) -> None:
    clock = FakeClock(datetime(2026, 1, 5, 23, 50, tzinfo=UTC))
    capped = settings.model_copy(update={"observation_cap": 10})
    async with Client(build_server(capped, clock)) as client:
        await call(client, "memory_observe", content="Late note about the zebra", importance=0.1, session_id="n")
        clock.advance(minutes=20)  # past midnight
        await call(client, "memory_observe", content="Early note about the yak", importance=0.1, session_id="n")
        for n in range(10):
            clock.advance(minutes=1)
            await call(client, "memory_observe", content=f"Decision {n}", type="decision", session_id="n")
        folded = (await call(client, "memory_smart_search", ids=["n"]))["sessions"][0]["folded_digest"]
        # the window holds the second day's line only
        done = await call(client, "memory_forget", kind="observation", since="2026-01-06", until="2026-01-06T00:10Z")
        kept = (await call(client, "memory_smart_search", ids=["n"]))["sessions"][0]["folded_digest"]

    assert folded.splitlines() == [
        "- 23:50 [note] Late note about the zebra",
        "- 2026-01-06 00:10 [note] Early note about the yak",
    ]
    assert done["deleted"]["folded_observation"] == ["n"]
    assert kept == "- 23:50 [note] Late note about the zebra"


async def test_digest_lines_without_a_time_go_with_their_session_but_not_with_part_of_it(
    settings: Settings, clock: FakeClock
) -> None:
    """Digests folded before lines carried a time: a window cannot tell when such a line was made."""
    capped = settings.model_copy(update={"observation_cap": 10})
    async with Client(build_server(capped, clock)) as client:
        for n in range(11):
            await call(client, "memory_observe", content=f"Step {n} of the walrus migration", session_id="old")
            clock.advance(minutes=1)
    with sqlite3.connect(settings.db) as db:  # as an older release wrote it
        db.execute("UPDATE sessions SET folded_digest = '- [note] Step 0 of the walrus migration'")
    async with Client(build_server(capped, clock)) as client:
        early = {"since": "2026-01-05T09:00Z", "until": "2026-01-05T09:05Z"}
        part = await call(client, "memory_forget", kind="observation", **early)
        whole = await call(client, "memory_forget", kind="observation", since="2026-01-05", dry_run=True)
        by_session = await call(client, "memory_forget", kind="observation", session_id="old")
        view = await session_view(client, "old")
        searched = await call(client, "memory_smart_search", query="walrus")

    assert len(part["deleted"]["observation"]) == 5  # 09:01 to 09:05; 09:00 was folded
    assert "folded_observation" not in part["deleted"]
    assert whole["deleted"]["folded_observation"] == ["old"]
    assert by_session["deleted"]["folded_observation"] == ["old"]
    assert (view["observation_count"], view["folded_count"], view["recorded_count"]) == (0, 0, 0)
    assert searched["hits"] == []


# -- a session with nothing left gets no summary ---------------------------------------------------------


async def test_a_session_whose_observations_were_all_forgotten_gets_no_summary(client: Client) -> None:
    for n in range(3):
        await call(client, "memory_observe", content=f"scratch note {n}", session_id="scratch")
    await call(client, "memory_observe", content="done", session_id="scratch", end_session=True)
    [written] = (await call(client, "memory_crystallize"))["sessions"]
    await call(client, "memory_forget", kind="observation", session_id="scratch")

    crystallized = await call(client, "memory_crystallize")
    consolidated = await call(client, "memory_consolidate")
    named = await call_error(client, "memory_crystallize", session_id="scratch")
    view = await session_view(client, "scratch")
    context = (await call(client, "memory_context"))["text"]

    assert written["summary"].startswith("scratch note 0 — 4 observations,")
    assert crystallized["sessions"] == []
    assert [c for c in consolidated["changes"] if c["action"] == "crystallized"] == []
    assert "'scratch' has nothing left to summarise" in named
    assert (view["summary"], view["observation_count"]) == (None, 0)
    assert "scratch: 0 observations" not in context
    assert "scratch note" not in context


async def test_ids_with_a_filter_are_refused_and_nothing_goes(client: Client) -> None:
    first = await call(client, "memory_observe", content="first turn of the chat", session_id="chat-1")
    second = await call(client, "memory_observe", content="second turn of the chat", session_id="chat-1")
    memory = await call(client, "memory_save", content="The deploy script lives in ops/deploy.sh")

    refused = [
        await call_error(client, "memory_forget", ids=[second["id"]], session_id="chat-1"),
        await call_error(client, "memory_forget", ids=[memory["id"]], kind="lesson", dry_run=True),
        await call_error(client, "memory_forget", ids=[first["id"]], since="2000-01-01"),
    ]
    kept = await call(client, "memory_observations", session_id="chat-1")
    alone = await call(client, "memory_forget", ids=[second["id"]])

    assert all("ids: give ids or filters (kind, session_id, since, until), not both" in e for e in refused)
    assert sorted(o["id"] for o in kept["observations"]) == sorted([first["id"], second["id"]])
    assert (await call(client, "memory_get", id=memory["id"]))["memory"]["id"] == memory["id"]
    assert (alone["counts"]["observation"], alone["total"]) == (1, 1)


# -- what was forgotten travels with an export -------------------------------------------------------


async def forget_promoted(client: Client, clock: FakeClock, fact: str, first_day: int) -> None:
    await observe_recurring(client, clock, fact, first_day)
    report = await call(client, "memory_consolidate")
    await call(client, "memory_forget", ids=[c["id"] for c in report["changes"] if c["action"] == "promoted"])


async def test_a_forgotten_fact_stays_forgotten_in_the_copy_an_import_makes(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    async with Client(build_server(settings, clock)) as client:
        await forget_promoted(client, clock, FACT, first_day=0)
        document = await export_document(client)
    copy_settings = fresh_settings(tmp_path, "copy")
    async with Client(build_server(copy_settings, clock)) as copy:
        imported = await call(copy, "memory_import", document=document)
        report = await call(copy, "memory_consolidate")
        again = await export_document(copy)

    [entry] = document["tables"]["forgotten_facts"]
    assert sorted(entry) == ["fingerprints", "forgotten_at", "project"]  # a fingerprint, never the words
    assert (entry["project"], [len(f) for f in entry["fingerprints"]]) == ("test", [64])
    assert imported["inserted"]["forgotten_facts"] == 1
    # the copy still holds the three sessions that mention the fact, and does not promote it again
    assert promoted(report) == []
    assert again["tables"]["forgotten_facts"] == document["tables"]["forgotten_facts"]


async def test_importing_keeps_what_either_copy_forgot(settings: Settings, clock: FakeClock, tmp_path: Path) -> None:
    other_fact = "The office wifi password changes every Monday"
    other_settings = fresh_settings(tmp_path, "other")
    async with Client(build_server(other_settings, clock)) as other:
        await forget_promoted(other, clock, other_fact, first_day=0)
        theirs = await export_document(other)
    clock.advance(days=1)
    async with Client(build_server(settings, clock)) as client:
        await forget_promoted(client, clock, FACT, first_day=10)
        ours = (await export_document(client))["tables"]["forgotten_facts"]
        merged = await call(client, "memory_import", document=theirs)
        repeated = await call(client, "memory_import", document=theirs)
        await observe_recurring(client, clock, other_fact, first_day=20)
        report = await call(client, "memory_consolidate")
        after = (await export_document(client))["tables"]["forgotten_facts"]

    [mine], [their] = ours, theirs["tables"]["forgotten_facts"]
    assert their["forgotten_at"] < mine["forgotten_at"]  # the older entry is merged in, not dropped
    assert (merged["updated"]["forgotten_facts"], repeated["unchanged"]["forgotten_facts"]) == (1, 1)
    assert after == [
        {
            "project": "test",
            "forgotten_at": mine["forgotten_at"],
            "fingerprints": sorted(mine["fingerprints"] + their["fingerprints"]),
        }
    ]
    assert promoted(report) == []


async def test_a_forget_reaching_many_records_lists_some_ids_and_counts_all(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forget_service, "LISTED_IDS", 2)  # 1,000 in earnest
    ids = [(await call(client, "memory_observe", content=f"Note {i} about caching"))["id"] for i in range(3)]

    planned = await call(client, "memory_forget", kind="observation", dry_run=True)
    done = await call(client, "memory_forget", kind="observation")

    for result in (planned, done):
        assert result["counts"]["observation"] == 3
        assert {kind: len(ids) for kind, ids in result["deleted"].items() if kind != "observation"} == {
            kind: count for kind, count in result["counts"].items() if kind != "observation"
        }
        assert result["total"] == 3
        assert len(result["deleted"]["observation"]) == 2
        assert set(result["deleted"]["observation"]) < set(ids)
    assert (await call(client, "memory_diagnose"))["counts"]["observations"] == 0
