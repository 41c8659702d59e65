"""Imports and what other projects forgot or named: a note of one project's forget is never dropped
or dodged by another's records, a repeated import changes nothing, and one conversation stored
scoped on one machine and plain on another stays one session."""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from pathlib import Path

from mcp import Client

from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_import_chains import machines
from tests.test_tools_operations import export_document, fresh_settings


async def test_a_restricted_restore_keeps_another_projects_note_of_a_session_name_both_use(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path, "ay-home"), clock)) as home:
        await call(home, "memory_observe", content="Ay's own chat.", session_id="conv-1", project="ay")
        ay_backup = await export_document(home, project="ay")
    shared = fresh_settings(tmp_path, "shared")
    async with Client(build_server(shared, clock)) as admin:
        await call(admin, "memory_observe", content="Bee's private chat.", session_id="conv-1", project="bee")
        clock.advance(minutes=1)
        await call(admin, "memory_forget", ids=["conv-1"], project="bee")
        before = await export_document(admin, project="bee")
    async with Client(build_server(shared.model_copy(update={"project": "ay", "isolated": True}), clock)) as ay:
        restored = await call(ay, "memory_import", document=ay_backup, restore_forgotten=True)
    async with Client(build_server(shared, clock)) as admin:
        after = await export_document(admin, project="bee")

    assert restored["restored"] == 0  # ay had forgotten nothing
    assert restored["projects"] == ["ay"]
    assert ("conv-1", "bee") in {(n["id"], n["project"]) for n in before["tables"]["forgotten"]}
    assert after["tables"]["forgotten"] == before["tables"]["forgotten"]


async def test_a_forgotten_session_stays_forgotten_when_its_name_was_taken_since(
    client: Client, clock: FakeClock
) -> None:
    await call(client, "memory_observe", content="Plan: acquire Initech in March.", session_id="conv-1", project="bee")
    backup = await export_document(client, project="bee")
    clock.advance(minutes=5)
    await call(client, "memory_forget", ids=["conv-1"], project="bee")
    clock.advance(minutes=5)
    await call(client, "memory_observe", content="Unrelated work in project ay.", session_id="conv-1", project="ay")

    imported = await call(client, "memory_import", document=backup)
    bee = await export_document(client, project="bee")
    found = await call(client, "memory_recall", query="acquire Initech", project="bee")
    ay = await call(client, "memory_observations", session_id="conv-1", project="ay")

    assert imported["forgotten"] == 2  # the session, stored under its scoped id, and its observation
    assert bee["tables"]["sessions"] == []
    assert bee["tables"]["observations"] == []
    assert found["hits"] == []
    assert [o["title"] for o in ay["observations"]] == ["Unrelated work in project ay."]


async def test_importing_a_backup_of_forgotten_records_again_changes_nothing(client: Client, clock: FakeClock) -> None:
    memory = await call(client, "memory_save", content="Ephemeral fact about the staging cluster.")
    backup = await export_document(client)
    clock.advance(minutes=1)
    await call(client, "memory_forget", ids=[memory["id"]])
    noted = await export_document(client)

    reports, copies = [], []
    for _ in range(2):
        clock.advance(hours=1)
        reports.append(await call(client, "memory_import", document=backup))
        copies.append(await export_document(client))

    assert [r["forgotten"] for r in reports] == [1, 1]
    assert noted["tables"]["forgotten"][0]["forgotten_at"] == "2026-01-05T09:01:00.000000Z"
    assert copies == [noted, noted]  # the note keeps the time of the forget


async def test_one_conversation_scoped_on_one_machine_and_plain_on_another_stays_one(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        x, y = await machines(stack, tmp_path, clock, "x", "y")
        await call(x, "memory_observe", content="Ay chat on X.", session_id="conv-1", project="ay")
        await call(x, "memory_observe", content="Bee turn one, recorded on X.", session_id="conv-1", project="bee")
        clock.advance(minutes=1)
        await call(y, "memory_observe", content="Bee turn two, recorded on Y.", session_id="conv-1", project="bee")
        from_x = await export_document(x, project="bee")

        imported = await call(y, "memory_import", document=from_x)
        again = await call(y, "memory_import", document=from_x)
        sessions = await call(y, "memory_sessions", project="bee")
        turns = await call(y, "memory_observations", session_id="conv-1", project="bee")
        on_y = await export_document(y, project="bee")

    assert from_x["tables"]["sessions"][0]["id"].startswith("conv-1#")  # ay held the name on X
    assert imported["inserted"].get("sessions", 0) == 0
    assert imported["inserted"]["observations"] == 1
    assert not any(again["inserted"].values())
    assert [(s["id"], s["observation_count"]) for s in sessions["sessions"]] == [("conv-1", 2)]
    assert sorted(o["title"] for o in turns["observations"]) == [
        "Bee turn one, recorded on X.",
        "Bee turn two, recorded on Y.",
    ]
    assert {o["session_id"] for o in on_y["tables"]["observations"]} == {"conv-1"}


async def test_a_card_seen_on_both_machines_counts_as_updated(tmp_path: Path) -> None:
    clock = FakeClock()
    card = {"type": "process", "correct_decision": "add retries"}
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        await call(a, "memory_outcome_record", task="Fix the flaky upload", success=False, mistake_cards=[card])
        clock.advance(minutes=1)
        for _ in range(2):
            await call(b, "memory_outcome_record", task="Fix the flaky upload", success=False, mistake_cards=[card])
        imported = await call(b, "memory_import", document=await export_document(a))
        insights = await call(b, "memory_insights")

    assert [c["seen_count"] for c in insights["mistake_cards"]] == [3]
    assert imported["matched_by_name"]["mistake_cards"] == 1
    assert imported["updated"]["mistake_cards"] == 1  # B's row was kept, but its count grew
    assert imported["unchanged"]["mistake_cards"] == 0


async def test_an_export_to_a_long_file_name_fits_its_temporary_file_beside_it(client: Client, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / ("é" * 110 + ".json")  # 225 bytes: a valid name, too long with a temporary's affixes
    await call(client, "memory_save", content="Something worth keeping.")

    written = await call(client, "memory_export", path=str(target))

    assert written["path"] == str(target)
    assert os.listdir(folder) == [target.name]
    assert target.read_text(encoding="utf-8").startswith("{")
