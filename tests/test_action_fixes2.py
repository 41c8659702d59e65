"""Actions across machines and spellings: a parent reopened by its child is stamped, so an import
elsewhere reopens it too; an imported action's dependencies are those of the row kept (newer replaces
older, dependencies included); and a tag typed composed or decomposed is one tag."""

from __future__ import annotations

import unicodedata
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error
from tests.test_import_chains import machines
from tests.test_tools_actions import create, update
from tests.test_tools_operations import export_document, fresh_settings

ALL = ["pending", "active", "blocked", "done", "cancelled"]
NFD, NFC = "cafe\u0301", "caf\u00e9"


async def actions(client: Client, **extra: Any) -> dict[str, dict[str, Any]]:
    listed = await call(client, "memory_action_list", status=ALL, limit=100, **extra)
    return {a["id"]: a for a in listed["actions"]}


# -- a reopened parent is stamped -----------------------------------------------------------------


async def test_a_parent_reopened_by_its_child_is_stamped_and_an_import_elsewhere_reopens_it(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        top = await create(a, "Release 2.0", clock)
        parent = await create(a, "Ship the exporter", clock, parent_id=top["id"])
        child = await create(a, "Write the exporter", clock, parent_id=parent["id"])
        for done in (child, parent, top):
            await update(a, done["id"], status="done")
            clock.advance(minutes=1)
        await call(b, "memory_import", document=await export_document(a))  # b copies them all done
        clock.advance(hours=1)
        reopened = await update(a, child["id"], status="active")
        on_a = await actions(a)

        imported = await call(b, "memory_import", document=await export_document(a))
        on_b = await actions(b)
        again = await call(b, "memory_import", document=await export_document(a))

    assert reopened["also_changed"] == [parent["id"], top["id"]]
    stamp = reopened["action"]["updated_at"]
    assert [(on_a[i]["status"], on_a[i]["updated_at"]) for i in (parent["id"], top["id"])] == [
        ("active", stamp),
        ("active", stamp),
    ]
    assert imported["updated"] == {"actions": 3}
    assert {i: (on_b[i]["status"], on_b[i]["completed_at"]) for i in on_b} == {
        child["id"]: ("active", None),
        parent["id"]: ("active", None),
        top["id"]: ("active", None),
    }
    assert on_b == on_a
    assert again["updated"] == {"actions": 0}
    assert again["inserted"] == {"actions": 0}


# -- an imported action brings its dependencies as they are --------------------------------------


async def test_an_imported_newer_action_replaces_its_dependencies_with_the_documents(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        schema = await create(a, "Write the schema", clock)
        docs = await create(a, "Write the docs", clock)
        ship = await create(a, "Ship", clock, depends_on=[schema["id"], docs["id"]])
        await call(b, "memory_import", document=await export_document(a))
        clock.advance(hours=1)
        tests = await create(a, "Write the tests", clock)
        await update(a, ship["id"], remove_depends_on=[schema["id"]], add_depends_on=[tests["id"]])
        newer = await export_document(a)

        imported = await call(b, "memory_import", document=newer)
        on_b = await actions(b)
        again = await call(b, "memory_import", document=newer)
        back = await export_document(b)

    assert on_b[ship["id"]]["depends_on"] == sorted([docs["id"], tests["id"]])
    assert imported["inserted"] == {"actions": 1, "action_dependencies": 1}
    assert imported["updated"] == {"actions": 1, "action_dependencies": 0}
    assert imported["unchanged"] == {"actions": 2, "action_dependencies": 1}
    assert again["inserted"] == {"actions": 0, "action_dependencies": 0}
    assert again["updated"] == {"actions": 0, "action_dependencies": 0}
    assert back["tables"]["action_dependencies"] == newer["tables"]["action_dependencies"]


async def test_a_dependency_dropped_on_one_machine_no_longer_blocks_the_done_action_on_another(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        first = await create(a, "A", clock)
        then = await create(a, "B", clock, depends_on=[first["id"]])
        older = await export_document(a)
        clock.advance(hours=1)
        await update(a, then["id"], remove_depends_on=[first["id"]])
        clock.advance(hours=1)
        await update(a, then["id"], status="done")
        await call(b, "memory_import", document=older)
        await call(b, "memory_import", document=await export_document(a))
        on_b = (await actions(b))[then["id"]]

    assert (on_b["status"], on_b["depends_on"], on_b["blocked_by"]) == ("done", [], [])


async def test_an_older_export_does_not_bring_back_a_dependency_removed_since(client: Client, clock: FakeClock) -> None:
    first = await create(client, "A", clock)
    then = await create(client, "B", clock, depends_on=[first["id"]])
    older = await export_document(client)
    clock.advance(hours=1)
    await update(client, then["id"], remove_depends_on=[first["id"]])

    imported = await call(client, "memory_import", document=older)
    after = (await actions(client))[then["id"]]
    frontier = await call(client, "memory_frontier")

    assert after["depends_on"] == []
    assert imported["unchanged"] == {"actions": 2, "action_dependencies": 1}
    assert imported["inserted"] == {"actions": 0, "action_dependencies": 0}
    assert sorted(x["title"] for x in frontier["actions"]) == ["A", "B"]


async def test_a_restricted_import_replaces_dependencies_only_in_its_own_project(tmp_path: Path) -> None:
    clock = FakeClock()
    shared = fresh_settings(tmp_path, "shared")
    async with Client(build_server(fresh_settings(tmp_path, "home"), clock)) as home:
        first = await create(home, "A", clock, project="ay")
        then = await create(home, "B", clock, project="ay", depends_on=[first["id"]])
        older = await export_document(home, project="ay")
        clock.advance(hours=1)
        await update(home, then["id"], project="ay", remove_depends_on=[first["id"]])
        newer = await export_document(home, project="ay")
    async with Client(build_server(shared, clock)) as admin:
        await call(admin, "memory_import", document=older)
        x = await create(admin, "X", clock, project="bee")
        y = await create(admin, "Y", clock, project="bee", depends_on=[x["id"]])
    async with Client(build_server(shared.model_copy(update={"project": "ay", "isolated": True}), clock)) as ay:
        imported = await call(ay, "memory_import", document=newer)
        on_ay = await actions(ay)
    async with Client(build_server(shared, clock)) as admin:
        on_bee = await actions(admin, project="bee")

    assert imported["projects"] == ["ay"]
    assert on_ay[then["id"]]["depends_on"] == []
    assert on_bee[y["id"]]["depends_on"] == [x["id"]]


# -- tags in either Unicode form ------------------------------------------------------------------


@pytest.mark.parametrize("into", ["b", "a"])
async def test_an_import_that_would_make_an_action_wait_for_itself_is_refused(tmp_path: Path, into: str) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        release = await create(a, "Release", clock)
        feature = await create(a, "Feature", clock)
        task = await create(a, "Task", clock, parent_id=feature["id"])
        await call(b, "memory_import", document=await export_document(a))
        clock.advance(minutes=5)
        await update(a, task["id"], add_depends_on=[release["id"]])  # sound on A
        clock.advance(minutes=5)
        await update(b, feature["id"], parent_id=release["id"])  # sound on B
        source, target = (a, b) if into == "b" else (b, a)
        document = await export_document(source)
        before = await export_document(target)

        refused = await call_error(target, "memory_import", document=document)
        after = await export_document(target)

    # merged, the release waits for its child the feature, the feature for its child the task, and
    # the task for the release: none could ever be done (the tools refuse the same graph)
    assert ("dependency cycle through action" in refused) != ("wait for itself" in refused)  # one of the two
    assert after["tables"]["actions"] == before["tables"]["actions"]


async def test_a_tag_typed_composed_or_decomposed_is_one_tag_and_either_form_finds_it(client: Client) -> None:
    both = await create(client, "A", tags=[NFD, NFC.upper(), "backend"])
    decomposed = await create(client, "B", tags=[NFD])
    await create(client, "C", tags=["cafe"])
    stored = (await export_document(client))["tables"]["actions"]

    assert both["tags"] == ["backend", NFC]
    assert decomposed["tags"] == [NFC]
    assert all(unicodedata.is_normalized("NFC", tag) for row in stored for tag in row["tags"])
    for typed in (NFC, NFD, NFC.upper(), unicodedata.normalize("NFD", NFC.upper())):
        listed = await call(client, "memory_action_list", tag=typed)
        ready = await call(client, "memory_frontier", tag=typed)
        assert [x["title"] for x in listed["actions"]] == ["A", "B"], typed
        assert [x["title"] for x in ready["actions"]] == ["A", "B"], typed


async def test_tags_stored_decomposed_read_composed_and_match_either_form(client: Client, clock: FakeClock) -> None:
    made = await create(client, "Old", clock)
    document = await export_document(client)
    (row,) = document["tables"]["actions"]
    row.update(tags=[NFD, NFC, "Backend"], updated_at="2026-02-01T00:00:00.000000Z")  # as stored before
    await call(client, "memory_import", document=document)

    read = (await actions(client))[made["id"]]
    by_nfc = await call(client, "memory_action_list", tag=NFC)
    by_nfd = await call(client, "memory_frontier", tag=NFD)
    retagged = await update(client, made["id"], title="Old, renamed")
    stored = (await export_document(client))["tables"]["actions"][0]["tags"]

    assert read["tags"] == [NFC, "Backend"]
    assert [x["id"] for x in by_nfc["actions"]] == [made["id"]]
    assert [x["id"] for x in by_nfd["actions"]] == [made["id"]]
    assert retagged["action"]["tags"] == [NFC, "Backend"]
    assert stored == [NFC, "Backend"]  # written back as read by the action's next update
