"""Two copies exchanging exports agree: a session one copy ended as idle ends on the other too (its
row is stamped when it ends), and a crystallized summary comes back from an export as it was
stored (its first line never reads to the privacy filter as a secret)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from tests.conftest import FakeClock, call
from tests.test_import_chains import machines
from tests.test_tools_operations import export_document


def session_row(document: dict[str, Any], session_id: str) -> dict[str, Any]:
    return next(s for s in document["tables"]["sessions"] if s["id"] == session_id)


async def test_a_session_ended_as_idle_on_one_copy_ends_on_the_other(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        first = await call(a, "memory_observe", content="Restarted the postgres proxy.")
        await call(b, "memory_import", document=await export_document(a))
        clock.advance(hours=3)  # past the idle limit: B's next observation starts a session
        later = await call(b, "memory_observe", content="Tuned the cache timeout.")
        imported = await call(a, "memory_import", document=await export_document(b))
        on_a, on_b = await export_document(a), await export_document(b)

    assert later["session_id"] != first["session_id"]
    ended = session_row(on_b, first["session_id"])
    assert ended["ended_at"] == ended["last_activity_at"]  # as of its last activity, stamped when it ended
    assert ended["updated_at"] > ended["ended_at"]
    assert imported["updated"]["sessions"] == 1
    assert session_row(on_a, first["session_id"]) == ended


async def test_a_crystallized_summary_comes_back_from_an_export_as_stored(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        await call(a, "memory_observe", content="Rotated the deploy token.", session_id="keys")
        clock.advance(minutes=5)
        (made,) = (await call(a, "memory_crystallize", session_id="keys", force=True))["sessions"]
        imported = await call(b, "memory_import", document=await export_document(a))
        kept = session_row(await export_document(b), "keys")["summary"]

    assert made["summary"].startswith("Rotated the deploy token — 1 observation, ")
    assert kept == made["summary"]
    assert imported["redacted"] == {}


async def test_importing_again_a_copy_that_holds_a_turn_forgotten_here_changes_nothing(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        first = await call(a, "memory_observe", content="Rotated the latency config.")
        await call(a, "memory_observe", content="Rebuilt the cluster proxy.")
        await call(b, "memory_import", document=await export_document(a))
        clock.advance(hours=1)
        await call(a, "memory_forget", ids=[first["id"]])
        from_b = await export_document(b)  # still holds the turn
        clock.advance(minutes=1)
        once = await call(a, "memory_import", document=from_b)
        before = await export_document(a)
        clock.advance(minutes=1)
        again = await call(a, "memory_import", document=from_b)
        after = await export_document(a)
        clock.advance(minutes=1)
        await call(b, "memory_import", document=after)
        on_b = await export_document(b)

    assert once["forgotten"] == again["forgotten"] == 1
    assert [o["content"] for o in after["tables"]["observations"]] == ["Rebuilt the cluster proxy."]
    assert after == before  # the session is not stamped again: nothing about it changed
    # b takes the forget, and the two copies hold one session row
    assert on_b["tables"]["sessions"] == after["tables"]["sessions"]
    assert on_b["tables"]["observations"] == after["tables"]["observations"]


async def test_a_summary_imported_over_turns_only_this_copy_holds_is_written_again(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        await call(a, "memory_observe", content="Tuned the docker logger.", session_id="ops")
        await call(b, "memory_import", document=await export_document(a))
        clock.advance(hours=1)
        await call(b, "memory_observe", content="Moved the replica socket.", session_id="ops")
        clock.advance(hours=1)
        await call(a, "memory_crystallize", session_id="ops", force=True)  # of its one turn
        clock.advance(hours=1)
        await call(b, "memory_import", document=await export_document(a))  # a's newer row, summary and all
        again = await call(b, "memory_crystallize", session_id="ops")
        (on_b,) = (await call(b, "memory_sessions", status="all"))["sessions"]
        await call(a, "memory_import", document=await export_document(b))
        (on_a,) = (await call(a, "memory_sessions", status="all"))["sessions"]
        repeated = await call(b, "memory_import", document=await export_document(a))

    assert on_b["observation_count"] == 2
    assert "Moved the replica socket" in on_b["summary"]
    assert [s["changed"] for s in again["sessions"]] == [False]  # written again by the import already
    assert on_a["summary"] == on_b["summary"]
    assert repeated["updated"].get("sessions", 0) == 0


async def test_copies_that_numbered_a_session_apart_come_to_the_same_positions(tmp_path: Path) -> None:
    clock = FakeClock()

    def positions(document: dict[str, Any]) -> dict[str, int]:
        return {o["content"]: o["seq"] for o in document["tables"]["observations"]}

    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        for content in ("First turn on b.", "Second turn on b."):
            await call(b, "memory_observe", content=content, session_id="work")
            clock.advance(minutes=30)
        await call(a, "memory_import", document=await export_document(b))
        await call(b, "memory_observe", content="Third turn on b.", session_id="work")
        # a records a turn that happened before all of them, at the next position it knows
        await call(
            a, "memory_observe", content="Early turn on a.", session_id="work", occurred_at="2025-12-15T10:00:00Z"
        )
        clock.advance(days=1)
        await call(b, "memory_import", document=await export_document(a))  # collides: b numbers in time order
        clock.advance(days=1)
        await call(a, "memory_import", document=await export_document(b))  # no collision here, but apart
        on_a, on_b = await export_document(a), await export_document(b)
        again = await call(a, "memory_import", document=on_b)

    assert positions(on_b) == {
        "Early turn on a.": 1,
        "First turn on b.": 2,
        "Second turn on b.": 3,
        "Third turn on b.": 4,
    }
    assert positions(on_a) == positions(on_b)
    assert again["updated"].get("sessions", 0) == 0


async def test_a_session_forgotten_where_it_was_kept_apart_is_forgotten_where_it_has_its_name(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        await call(a, "memory_observe", content="Restored the replica queue.", session_id="chat", project="other")
        await call(b, "memory_observe", content="Tuned the alert schema.", session_id="chat")  # b's "test" has it
        clock.advance(hours=1)
        await call(b, "memory_import", document=await export_document(a, all_projects=True))  # kept apart on b
        clock.advance(hours=1)
        gone = await call(b, "memory_forget", ids=["chat"], project="other")
        clock.advance(hours=1)
        imported = await call(a, "memory_import", document=await export_document(b, all_projects=True))
        again = await call(a, "memory_import", document=await export_document(b, all_projects=True))
        on_a = {p: (await call(a, "memory_sessions", status="all", project=p))["sessions"] for p in ("other", "test")}

    assert gone["counts"]["session"] == 1
    assert on_a["other"] == []  # its observation and the session itself
    assert [s["id"] for s in on_a["test"]] == ["chat"]  # b's own, kept apart here in turn
    assert imported["forgotten"] == 2
    assert again["forgotten"] == 0
