"""memory_import keeps the rules the tools keep: a row no tool would write is refused, naming it."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.migrations import MIGRATIONS
from mcp_memory.server import build_server
from mcp_memory.services import operations
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_operations import export_document, fresh_settings

LATEST = MIGRATIONS[-1][0]

Tables = dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def exported(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    """The export of a project with a row in every table (made once; tests copy it)."""
    source = Settings(db=tmp_path_factory.mktemp("source") / "memory.db", project="test", synchronous="normal")
    clock = FakeClock()
    async with Client(build_server(source, clock)) as client:
        await call(client, "memory_observe", content="Chose msgpack for the wire format.", session_id="conv-1")
        clock.advance(minutes=1)
        first = await call(client, "memory_save", content="The API listens on port 8080.", kind="fact")
        clock.advance(minutes=1)
        await call(client, "memory_save", content="The API listens on port 9090.", supersedes=first["id"])
        lesson = await call(client, "memory_lesson_save", content="Run the migrations before the tests.")
        await call(
            client,
            "memory_outcome_record",
            task="Deploy the API",
            success=False,
            error="expired credentials",
            mistake_cards=[{"type": "process", "correct_decision": "Refresh the credentials first"}],
        )
        await call(client, "memory_slot_create", name="notes", content="Short notes.", size_limit=200)
        parent = await call(client, "memory_action_create", title="Ship the API")
        await call(client, "memory_action_create", title="Write the docs", depends_on=[parent["action"]["id"]])
        await call(client, "memory_relate", source_id=first["id"], target_id=lesson["lesson"]["id"])
        yield await export_document(client)


def first_latest(tables: Tables) -> int:
    """Position of the latest version of the memory chain."""
    return next(i for i, m in enumerate(tables["memories"]) if m["is_latest"])


def add_reverse_dependency(tables: Tables) -> None:
    edge = tables["action_dependencies"][0]
    tables["action_dependencies"].append({"action_id": edge["depends_on"], "depends_on": edge["action_id"]})


def parents_in_a_circle(tables: Tables) -> None:
    one, two = tables["actions"]
    one["parent_id"], two["parent_id"] = two["id"], one["id"]


def two_latest(tables: Tables) -> None:
    for memory in tables["memories"]:
        memory["is_latest"] = True
        memory["superseded_by"] = None


def edit(table: str, index: int = 0, **values: Any) -> Callable[[Tables], None]:
    return lambda tables: tables[table][index].update(values)


# (how a valid export is broken, what the error must say)
BROKEN: dict[str, tuple[Callable[[Tables], None], str]] = {
    "importance above 1": (edit("memories", importance=5), "memories[0].importance: Input should be less than or"),
    "importance below 0": (edit("memories", importance=-1), "memories[0].importance: Input should be greater than"),
    "lesson confidence 7": (edit("lessons", confidence=7), "lessons[0].confidence: Input should be less than or"),
    "relation weight 9": (edit("relations", weight=9), "relations[0].weight: Input should be less than or equal"),
    "seen_count below 1": (edit("mistake_cards", seen_count=-3), "mistake_cards[0].seen_count: Input should be"),
    "priority 1e12": (edit("actions", priority=10**12), "actions[0].priority: Input should be less than or equal"),
    "observation_count -5": (edit("sessions", observation_count=-5), "sessions[0].observation_count: Input"),
    # past what SQLite's integers hold: refused by name, not an OverflowError when it is written
    "reinforcements 10^20": (edit("lessons", reinforcements=10**20), "lessons[0].reinforcements: Input should be"),
    "seq 2^63": (edit("observations", seq=2**63), "observations[0].seq: Input should be less than or equal"),
    "empty content": (edit("memories", content=""), "memories[0].content: String should have at least 1 character"),
    "huge content": (edit("observations", content="x" * 100_001), "observations[0].content: must be at most 100000"),
    "huge memory": (edit("memories", content="x" * 20_001), "memories[0].content: must be at most 20000 characters"),
    "only a secret": (
        edit("memories", content="<private>the pin is 1234</private>"),
        "memories[0].content: must contain text other than private or secret parts",
    ),
    "slot over its limit": (
        edit("slots", content="y" * 201),
        "slots[0].content: 201 characters, over the slot's size_limit of 200",
    ),
    "slot name": (edit("slots", name="Bad Name!"), "slots[0].name: String should match pattern"),
    "lesson kind": (edit("lessons", kind="banana"), "lessons[0].kind: must be one of lesson, heuristic,"),
    "observation type": (edit("observations", type="Not A Type!"), "observations[0].type: String should match"),
    "memory kind": (edit("memories", kind="???"), "memories[0].kind: String should match pattern"),
    "action status": (edit("actions", status="wat"), "actions[0].status: must be one of pending, active, blocked"),
    "session summary source": (edit("sessions", summary_source="guess"), "sessions[0].summary_source: Input"),
    "action depends on itself": (
        lambda t: t["action_dependencies"][0].update(depends_on=t["action_dependencies"][0]["action_id"]),
        "action_dependencies[0].depends_on: must differ from action_id",
    ),
    "action is its own parent": (
        lambda t: t["actions"][0].update(parent_id=t["actions"][0]["id"]),
        "actions[0].parent_id: must name another action, not the action itself",
    ),
    # the tools stamp completed_at exactly when an action is done
    "open action completed": (
        edit("actions", status="pending", completed_at="2026-01-05T09:00:00.000000Z"),
        "actions[0].completed_at: must be null when status is pending",
    ),
    "done action never completed": (
        edit("actions", status="done", completed_at=None),
        "actions[0].completed_at: is required when status is done",
    ),
    "relation to itself": (
        lambda t: t["relations"][0].update(target_id=t["relations"][0]["source_id"]),
        "relations[0].target_id: must differ from source_id",
    ),
    "dependency cycle": (add_reverse_dependency, "depends_on: would make a dependency cycle through action act_"),
    "parent cycle": (parents_in_a_circle, "parent_id: would make action act_"),
    "two latest versions": (two_latest, ".is_latest: the document marks more than one version of memory chain mem_"),
    "wrong id prefix": (edit("memories", id="zzz_123"), "memories[0].id: must be a mem_… id"),
    "observation id as a memory's": (
        lambda t: t["memories"][0].update(id=t["observations"][0]["id"]),
        "memories[0].id: must be a mem_… id",
    ),
    "parent of another kind": (
        lambda t: t["memories"][first_latest(t)].update(parent_id=t["lessons"][0]["id"]),
        ".parent_id: must be a mem_… id",
    ),
    "session id": (edit("sessions", id="has space"), "sessions[0].id: must be 1-128 characters of letters"),
    # references: named row and field, not a foreign key failure at commit
    "unknown session": (edit("observations", session_id="ghost"), "observations[0].session_id: names 'ghost',"),
    "unknown parent": (
        lambda t: t["memories"][first_latest(t)].update(parent_id="mem_doesnotexist"),
        ".parent_id: names 'mem_doesnotexist', which is neither in the document nor stored",
    ),
    "unknown dependency": (
        edit("action_dependencies", depends_on="act_ghost"),
        "action_dependencies[0].depends_on: names 'act_ghost', which is neither in the document nor stored",
    ),
    "unknown relation target": (
        edit("relations", target_id="mem_ghost"),
        "relations[0].target_id: names 'mem_ghost', which is neither in the document nor stored",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.parametrize("via", ["document", "path"])
async def test_a_row_no_tool_would_write_is_refused_naming_it_and_nothing_is_written(
    exported: dict[str, Any], tmp_path: Path, case: str, via: str
) -> None:
    breaks, expected = BROKEN[case]
    bad = copy.deepcopy(exported)
    breaks(bad["tables"])

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        if via == "path":
            source = tmp_path / "bad.json"
            source.write_text(json.dumps(bad), encoding="utf-8")
            message = await call_error(fresh, "memory_import", path=str(source))
        else:
            message = await call_error(fresh, "memory_import", document=bad)
        left = await export_document(fresh, all_projects=True)
        diagnosis = await call(fresh, "memory_diagnose")

    assert "document.tables." in message
    assert expected in message
    assert "FOREIGN KEY" not in message
    assert all(rows == [] for rows in left["tables"].values())
    assert diagnosis["counts"]["audit_log"] == 0


async def test_the_valid_export_those_cases_break_imports(exported: dict[str, Any], tmp_path: Path) -> None:
    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        result = await call(fresh, "memory_import", document=exported)
        copied = await export_document(fresh)

    assert copied == exported
    assert sum(result["inserted"].values()) == sum(len(rows) for rows in exported["tables"].values())


async def test_a_text_that_grew_by_redaction_markers_still_round_trips(client: Client, tmp_path: Path) -> None:
    # The tool takes 100,000 characters; the marker standing for the password is longer than it.
    content = "password=abc " + "x" * (100_000 - 13)
    await call(client, "memory_observe", content=content)
    document = await export_document(client)
    assert len(document["tables"]["observations"][0]["content"]) > 100_000

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        await call(fresh, "memory_import", document=document)
        assert await export_document(fresh) == document


async def test_a_row_may_leave_a_chain_or_a_parent_broken_until_a_later_row_mends_it(
    client: Client, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await call(client, "memory_save", content="The cache holds 10 entries.")
    one = (await call(client, "memory_action_create", title="Plan the release"))["action"]
    two = (await call(client, "memory_action_create", title="Tag the release", parent_id=one["id"]))["action"]
    before = await export_document(client)
    clock.advance(minutes=5)
    second = await call(client, "memory_save", content="The cache holds 20 entries.", supersedes=first["id"])
    await call(client, "memory_action_update", id=two["id"], clear_parent=True)
    await call(client, "memory_action_update", id=one["id"], parent_id=two["id"])
    after = await export_document(client)
    # Newest versions first, one row per chunk: in between, the chain has two latest versions and
    # the two actions are each other's parent; the rows after mend both.
    after["tables"]["memories"].reverse()
    after["tables"]["actions"].sort(key=lambda a: a["id"] != one["id"])
    monkeypatch.setattr(operations, "IMPORT_CHUNK", 1)

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        await call(fresh, "memory_import", document=before)
        result = await call(fresh, "memory_import", document=after)
        stored = await call(fresh, "memory_get", id=second["id"])
        actions = await call(fresh, "memory_action_list")

    assert sum(result["inserted"].values()) == result["inserted"]["memories"] == 1
    assert result["updated"] == {"memories": 1, "actions": 2}
    assert [v["is_latest"] for v in stored["versions"]] == [False, True]
    assert {a["id"]: a["parent_id"] for a in actions["actions"]} == {one["id"]: two["id"], two["id"]: None}


async def test_two_rows_of_a_document_with_one_unique_name_are_refused_naming_the_second(
    client: Client, tmp_path: Path
) -> None:
    await call(client, "memory_slot_create", name="notes", content="Mine.")
    document = await export_document(client)
    twin = document["tables"]["slots"][0] | {"id": "slot_01elsewhere0000000000", "content": "Twin."}
    document["tables"]["slots"].append(twin)

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        message = await call_error(fresh, "memory_import", document=document)
        left = await call(fresh, "memory_slot_list")

    assert "document.tables.slots[1].name: another record (stored, or earlier in the document)" in message
    assert "has the same project, name; give the row that record's id, or change it" in message
    assert "notes" not in {s["name"] for s in left["slots"]}


# -- the document's versions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema_version", "expected"),
    [
        (99, f"document: schema_version 99 is newer than this mcp-memory knows ({LATEST}); upgrade mcp-memory"),
        ("5", f"document: schema_version must be a whole number from 1 to {LATEST}"),
        (0, f"document: schema_version must be a whole number from 1 to {LATEST}"),
    ],
)
@pytest.mark.parametrize("via", ["document", "path"])
async def test_a_document_of_an_unknown_schema_version_is_refused(
    exported: dict[str, Any], tmp_path: Path, schema_version: Any, expected: str, via: str
) -> None:
    bad = exported | {"schema_version": schema_version}
    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        if via == "path":
            source = tmp_path / "bad.json"
            source.write_text(json.dumps(bad), encoding="utf-8")
            message = await call_error(fresh, "memory_import", path=str(source))
        else:
            message = await call_error(fresh, "memory_import", document=bad)
        left = await export_document(fresh)

    assert expected in message
    assert all(rows == [] for rows in left["tables"].values())


async def test_every_schema_version_a_release_wrote_is_read(exported: dict[str, Any], tmp_path: Path) -> None:
    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        for version in (1, 2, 3, 4):
            await call(fresh, "memory_import", document=exported | {"schema_version": version})
        without = {k: v for k, v in exported.items() if k != "schema_version"}  # as written by hand
        again = await call(fresh, "memory_import", document=without)

    assert sum(again["unchanged"].values()) == sum(len(rows) for rows in exported["tables"].values())


# -- what memory_reflect keeps on the profile ---------------------------------------------------------


async def reflected(client: Client) -> dict[str, Any]:
    """The profile of a project a reflection has looked at."""
    for _ in range(2):
        await call(client, "memory_observe", content="pytest failed: numpy ABI mismatch", type="error")
    await call(client, "memory_reflect")
    profile = await call(client, "memory_profile")
    assert profile["reflected_at"] is not None
    assert profile["insights"]
    return profile


async def test_the_reflection_on_the_profile_survives_export_and_import(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    profile = await reflected(client)
    document = await export_document(client)

    async with Client(build_server(fresh_settings(tmp_path), clock)) as fresh:
        imported = await call(fresh, "memory_import", document=document)
        copied = await export_document(fresh)
        restored = await call(fresh, "memory_profile")

    assert document["tables"]["reflections"] == [
        {"project": "test", "reflected_at": profile["reflected_at"], "insights": profile["insights"]}
    ]
    assert imported["inserted"]["reflections"] == 1
    assert copied == document
    assert (restored["reflected_at"], restored["insights"]) == (profile["reflected_at"], profile["insights"])


async def test_an_older_reflection_does_not_replace_a_newer_one(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    await reflected(client)
    old = await export_document(client)
    clock.advance(days=1)
    await call(client, "memory_outcome_record", task="Pin numpy below 2", success=True)
    newer = await call(client, "memory_reflect")

    again = await call(client, "memory_import", document=old)
    profile = await call(client, "memory_profile")

    assert again["unchanged"]["reflections"] == 1
    assert profile["insights"] == newer["insights"] != old["tables"]["reflections"][0]["insights"]


async def test_a_document_from_before_reflections_were_exported_still_imports(
    exported: dict[str, Any], tmp_path: Path
) -> None:
    older = copy.deepcopy(exported)
    del older["tables"]["reflections"]

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        await call(fresh, "memory_import", document=older)
        profile = await call(fresh, "memory_profile")

    assert profile["reflected_at"] is None
    assert profile["memories"] == 1


# -- paths ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["", "   "])
async def test_an_empty_path_is_refused_not_read_as_the_current_folder(client: Client, path: str) -> None:
    export_message = await call_error(client, "memory_export", path=path, overwrite=True)
    import_message = await call_error(client, "memory_import", path=path)

    for message in (export_message, import_message):
        assert "path: must name a file; leave path out for an inline document" in message


async def test_a_folder_is_refused_as_a_path(client: Client, tmp_path: Path) -> None:
    export_message = await call_error(client, "memory_export", path=str(tmp_path), overwrite=True)
    import_message = await call_error(client, "memory_import", path=str(tmp_path))

    for message in (export_message, import_message):
        assert f"path: {tmp_path} is a folder; name a file" in message
