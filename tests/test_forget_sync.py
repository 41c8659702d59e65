"""What memory_forget deletes stays deleted across copies: an export carries the forgotten ids (never
their text), an import forgets them on the other machine too, and no import of an older copy brings
them back unless it asks to restore them."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_operations import export_document, fresh_settings

ADDRESS = "The user's home address is 12 Elm Street, Springfield."


async def _machines(stack: AsyncExitStack, tmp_path: Path, clock: FakeClock, *names: str) -> list[Client]:
    """A connected server per name, each on its own database, open until `stack` closes."""
    return [
        await stack.enter_async_context(Client(build_server(fresh_settings(tmp_path, name), clock))) for name in names
    ]


async def _history(client: Client, clock: FakeClock) -> dict[str, Any]:
    """Two sessions, a memory chain related to an observation, a lesson and a slot."""
    made: dict[str, Any] = {}
    made["s1"] = [
        (await call(client, "memory_observe", content=f"Debugged the flaky upload test, step {n}.", session_id="s1"))[
            "id"
        ]
        for n in range(2)
    ]
    clock.advance(minutes=5)
    made["s2"] = (await call(client, "memory_observe", content="Moved the CI to larger runners.", session_id="s2"))[
        "id"
    ]
    first = await call(client, "memory_save", content=ADDRESS, kind="preference")
    clock.advance(minutes=1)
    second = await call(client, "memory_save", content=ADDRESS.replace("12", "14"), supersedes=first["id"])
    made["chain"] = [first["id"], second["id"]]
    made["relation"] = (await call(client, "memory_relate", source_id=second["id"], target_id=made["s2"]))["relation"][
        "id"
    ]
    made["lesson"] = (await call(client, "memory_lesson_save", content="Pin the runner image version."))["lesson"]["id"]
    await call(client, "memory_slot_create", name="scratch", content="Half an idea.")
    return made


async def _forget_on(client: Client, made: dict[str, Any]) -> dict[str, Any]:
    return await call(client, "memory_forget", ids=[made["chain"][1], "s1", made["lesson"]])


async def test_a_forget_reaches_the_other_machine_and_its_copy_never_brings_it_back(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await _machines(stack, tmp_path, clock, "a", "b")
        made = await _history(a, clock)
        await call(b, "memory_import", document=await export_document(a))
        from_b_before = await export_document(b)
        clock.advance(hours=1)
        forgot = await _forget_on(a, made)
        after_forgetting = await export_document(a)

        into_a = await call(a, "memory_import", document=from_b_before)  # B's copy still holds them all
        a_after = await export_document(a)
        path = tmp_path / "from-a.json"
        await call(a, "memory_export", path=str(path))
        into_b = await call(b, "memory_import", path=str(path))  # a file is read as a stream
        b_after = await export_document(b)
        again = await call(b, "memory_import", path=str(path))
        found_on_b = await call(b, "memory_smart_search", query="home address Elm Street")
        related_on_b = await call(b, "memory_related", id=made["s2"])
        sessions_on_b = await call(b, "memory_sessions")

    gone = {made["chain"][0], made["chain"][1], "s1", *made["s1"], made["lesson"], made["relation"]}
    assert forgot["total"] == len(gone)
    assert into_a["forgotten"] == len(gone)  # written by the import, then deleted again in it
    assert a_after["tables"] == after_forgetting["tables"]
    assert into_b["forgotten"] == len(gone)
    assert b_after["tables"] == a_after["tables"]  # the two copies agree, notes of forgotten records too
    assert {row["id"] for row in a_after["tables"]["forgotten"]} >= gone
    assert again["forgotten"] == 0
    assert again["inserted"] == {} or not any(again["inserted"].values())
    assert found_on_b["hits"] == []
    assert related_on_b["edges"] == []
    assert [s["id"] for s in sessions_on_b["sessions"]] == ["s2"]


async def test_an_old_backup_keeps_what_was_forgotten_gone_unless_restored(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path), clock)) as client:
        saved = await call(client, "memory_save", content=ADDRESS)
        backup = await export_document(client)
        clock.advance(days=1)
        await call(client, "memory_forget", ids=[saved["id"]])
        kept_gone = await call(client, "memory_import", document=backup)
        missing = await call_error(client, "memory_get", id=saved["id"])
        notes = await export_document(client)
        restored = await call(client, "memory_import", document=backup, restore_forgotten=True)
        back = await call(client, "memory_get", id=saved["id"])
        after_restoring = await export_document(client)

    assert kept_gone["forgotten"] == 1
    assert kept_gone["inserted"].get("memories", 0) == 0  # stored, then forgotten again: not "inserted"
    assert saved["id"] in missing
    assert notes["tables"]["memories"] == []
    assert [(n["id"], n["kind"], n["project"]) for n in notes["tables"]["forgotten"]] == [
        (saved["id"], "memory", "test")
    ]
    assert "Elm" not in json.dumps(notes)  # a note keeps the id, never the text
    assert (restored["restored"], restored["forgotten"]) == (1, 0)
    assert back["memory"]["content"] == ADDRESS
    assert after_restoring["tables"]["forgotten"] == []
    assert after_restoring["tables"]["memories"] == backup["tables"]["memories"]


async def test_an_import_counts_what_it_forgot_again_as_forgotten_only(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path), clock)) as client:
        memory = await call(client, "memory_save", content=ADDRESS)
        observation = await call(client, "memory_observe", content="Ran the migration on staging.", session_id="s1")
        lesson = (await call(client, "memory_lesson_save", content="Check the staging logs first."))["lesson"]
        await call(client, "memory_action_create", title="Rotate the key")
        backup = await export_document(client)
        await call(client, "memory_forget", ids=[memory["id"], observation["id"], lesson["id"]])
        imported = await call(client, "memory_import", document=backup)
        again = await call(client, "memory_import", document=backup)
        counts = (await call(client, "memory_diagnose"))["counts"]

    for result in (imported, again):
        written = {t: n for t in result["inserted"] if (n := result["inserted"][t] + result["updated"][t])}
        assert written == {}, written  # every record it held is here already, or forgotten
        assert result["forgotten"] == 3
    assert (counts["memories"], counts["observations"], counts["actions"]) == (0, 0, 1)


async def test_a_note_deletes_only_in_its_own_project_and_names_the_kind_of_its_id(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path), clock)) as client:
        theirs = await call(client, "memory_save", content="Beta's deploy key lives in the vault.", project="beta")
        document = await export_document(client, project="alpha")
        at = "2026-01-02T00:00:00.000000Z"
        document["tables"]["forgotten"] = [
            {"id": theirs["id"], "project": "alpha", "kind": "memory", "forgotten_at": at}
        ]
        imported = await call(client, "memory_import", document=document)
        still = await call(client, "memory_get", id=theirs["id"], project="beta")
        document["tables"]["forgotten"] = [
            {"id": theirs["id"], "project": "alpha", "kind": "lesson", "forgotten_at": at}
        ]
        wrong_kind = await call_error(client, "memory_import", document=document)

    assert imported["forgotten"] == 0
    assert still["memory"]["content"] == "Beta's deploy key lives in the vault."
    assert "document.tables.forgotten[0].kind: must be the kind its id names ('memory')" in wrong_kind


async def test_a_session_named_again_after_its_forget_is_a_new_record_everywhere(tmp_path: Path) -> None:
    # A caller names its sessions, so a forgotten session's id can come back as a new session: the
    # note of the old one must not delete the new one on the machine that imports it, nor on a
    # machine that had the note already.
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await _machines(stack, tmp_path, clock, "a", "b")
        await call(a, "memory_observe", content="Drafted the launch plan with private numbers.", session_id="chat-1")
        clock.advance(minutes=5)
        await call(a, "memory_forget", ids=["chat-1"])
        assert (await call(a, "memory_diagnose"))["counts"]["forgotten"] == 2  # the session and its observation
        await call(b, "memory_import", document=await export_document(a))  # b holds the note now
        clock.advance(minutes=5)
        again = await call(a, "memory_observe", content="Started over: the launch checklist.", session_id="chat-1")
        document = await export_document(a)

        imported = await call(b, "memory_import", document=document)
        listed = await call(b, "memory_observations", session_id="chat-1")
        assert imported["forgotten"] == 0
        assert [o["id"] for o in listed["observations"]] == [again["id"]]

        # and the old copy still cannot bring the first session back (on a fresh machine either)
        async with Client(build_server(fresh_settings(tmp_path, "c"), clock)) as c:
            await call(c, "memory_import", document=document)
            listed = await call(c, "memory_observations", session_id="chat-1")
            assert [o["id"] for o in listed["observations"]] == [again["id"]]

        # forgetting the new one too reaches b, whose copy of it is older than the second forget
        clock.advance(minutes=5)
        await call(a, "memory_forget", ids=["chat-1"])
        imported = await call(b, "memory_import", document=await export_document(a))
        assert imported["forgotten"] == 2  # the session and its observation
        assert "chat-1" not in [s["id"] for s in (await call(b, "memory_sessions"))["sessions"]]


async def test_a_deleted_slot_does_not_come_back_from_an_older_copy(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path), clock)) as client:
        await call(client, "memory_slot_create", name="scratch", content="Half an idea.")
        backup = await export_document(client)
        clock.advance(minutes=5)
        await call(client, "memory_slot_delete", name="scratch")
        kept_gone = await call(client, "memory_import", document=backup)
        listed = await call(client, "memory_slot_list")
        clock.advance(minutes=5)
        await call(client, "memory_slot_create", name="scratch", content="A new idea.")  # a new record
        again = await call(client, "memory_import", document=backup)
        made_again = await call(client, "memory_slot_get", name="scratch")

    assert kept_gone["forgotten"] == 1
    assert "scratch" not in [s["name"] for s in listed["slots"]]
    assert again["forgotten"] == 1  # the backup's slot, still forgotten: never taken as the new one
    assert made_again["content"] == "A new idea."
