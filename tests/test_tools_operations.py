"""Operations tools through the real server: diagnose, export, import."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.migrations import MIGRATIONS
from mcp_memory.server import build_server
from mcp_memory.services import operations
from tests.conftest import FakeClock, call, call_error

DB_FACT = "The production database runs PostgreSQL 15 on the primary host db1 in the Frankfurt region."
DB_FACT_V2 = "The production database runs PostgreSQL 16 on the primary host db1 in the Frankfurt region."


def fresh_settings(tmp_path: Path, name: str = "fresh", **update: Any) -> Settings:
    return Settings(db=tmp_path / name / "memory.db", project="test", synchronous="normal", **update)


async def populate(client: Client, clock: FakeClock) -> dict[str, Any]:
    """A small but varied project: two sessions, observations, a memory chain and a lone memory."""
    obs = []
    for text, kind in [
        ("Chose msgpack for the wire format because JSON was too slow.", "decision"),
        ("Benchmark: msgpack encode 3x faster than json.dumps.", "discovery"),
    ]:
        obs.append(await call(client, "memory_observe", content=text, type=kind, session_id="conv-1"))
        clock.advance(minutes=1)
    obs.append(
        await call(
            client,
            "memory_observe",
            content="Flaky timeout in test_sync.py.",
            type="error",
            session_id="conv-2",
            end_session=True,
        )
    )
    clock.advance(minutes=1)
    v1 = await call(client, "memory_save", content=DB_FACT, kind="fact", concepts=["infra"])
    clock.advance(minutes=1)
    v2 = await call(client, "memory_save", content=DB_FACT_V2, kind="fact", concepts=["infra"])
    lone = await call(client, "memory_save", content="Always run ruff before committing.", kind="convention")
    return {"observations": obs, "chain": [v1, v2], "lone": lone}


async def export_document(client: Client, **args: Any) -> dict[str, Any]:
    document = (await call(client, "memory_export", **args))["document"]
    assert document is not None
    return document


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def exported(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    """The export document of a populated database, made once for the tests that only read it."""
    source = Settings(db=tmp_path_factory.mktemp("source") / "memory.db", project="test", synchronous="normal")
    clock = FakeClock()
    async with Client(build_server(source, clock)) as client:
        await populate(client, clock)
        yield await export_document(client)


# -- diagnose ---------------------------------------------------------------------------------------


async def test_diagnose_on_an_empty_database(client: Client, settings: Settings) -> None:
    diagnosis = await call(client, "memory_diagnose")

    assert diagnosis["schema_version"] == MIGRATIONS[-1][0] == 20
    assert diagnosis["integrity_ok"] is True
    assert diagnosis["integrity"] == ["ok"]
    assert diagnosis["db_path"] == str(settings.db)
    assert diagnosis["counts"]["observations"] == diagnosis["counts"]["memories"] == 0
    assert diagnosis["index_in_sync"] is True
    assert diagnosis["latency"]["queries"] == 0
    assert diagnosis["projects"] == []
    assert diagnosis["sqlite"]["journal_mode"] == "wal"
    assert diagnosis["embeddings"] == {
        "provider": "none",
        "dimension": None,
        "vectors": 0,
        "lacking": 0,
        "queued": 0,
        "embedded": 0,
        "failures": 0,
        "last_error": None,
        "stored_by_model": {},
    }


async def test_diagnose_counts_what_was_stored(client: Client, clock: FakeClock) -> None:
    await populate(client, clock)

    diagnosis = await call(client, "memory_diagnose")

    counts = diagnosis["counts"]
    assert (counts["sessions"], counts["observations"], counts["memories"]) == (2, 3, 3)
    assert diagnosis["index_docs"] == {"observation": 3, "memory": 2}  # only the latest version is indexed
    assert diagnosis["stored_docs"] == diagnosis["index_docs"]
    assert diagnosis["index_in_sync"] is True
    assert diagnosis["integrity_ok"] is True
    assert diagnosis["projects"] == ["test"]
    assert diagnosis["latency"]["queries"] > 0
    assert diagnosis["latency"]["max_ms"] >= diagnosis["latency"]["p95_ms"] >= diagnosis["latency"]["p50_ms"] >= 0
    assert diagnosis["index_terms"] > 0
    assert diagnosis["db_bytes"] > 0


async def test_diagnose_stays_in_sync_after_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        await populate(first, clock)
        before = await call(first, "memory_diagnose")
    async with Client(build_server(settings, clock)) as second:
        after = await call(second, "memory_diagnose")

    assert after["index_in_sync"] is True
    assert after["index_docs"] == before["index_docs"]
    assert after["counts"] == before["counts"]


# -- export and import ------------------------------------------------------------------------------


async def test_export_document_shape(client: Client, clock: FakeClock) -> None:
    stored = await populate(client, clock)

    result = await call(client, "memory_export")
    document = result["document"]

    assert document["format"] == "mcp-memory-export"
    assert document["format_version"] == 1
    assert document["schema_version"] == MIGRATIONS[-1][0]
    assert document["projects"] == ["test"]
    assert result["path"] is None
    assert result["counts"]["observations"] == 3
    assert result["counts"]["memories"] == 3
    assert result["counts"]["sessions"] == 2
    assert sorted(m["id"] for m in document["tables"]["memories"]) == sorted(
        [stored["chain"][0]["id"], stored["chain"][1]["id"], stored["lone"]["id"]]
    )


async def test_export_covers_one_project_unless_all_projects(client: Client) -> None:
    await call(client, "memory_save", content="Mine.")
    await call(client, "memory_save", content="Theirs.", project="other")

    mine = await export_document(client)
    theirs = await export_document(client, project="other")
    everything = await export_document(client, all_projects=True)

    assert [m["content"] for m in mine["tables"]["memories"]] == ["Mine."]
    assert [m["content"] for m in theirs["tables"]["memories"]] == ["Theirs."]
    assert sorted(m["content"] for m in everything["tables"]["memories"]) == ["Mine.", "Theirs."]
    assert everything["projects"] == "*"


async def test_export_then_import_into_a_fresh_database_round_trips(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    await populate(client, clock)
    original = await export_document(client)

    async with Client(build_server(fresh_settings(tmp_path), clock)) as fresh:
        imported = await call(fresh, "memory_import", document=original)
        copied = await export_document(fresh)

    assert copied == original
    assert imported["inserted"] == {"sessions": 2, "observations": 3, "memories": 3}
    assert sum(imported["updated"].values()) == 0
    assert imported["reindexed"] == 8
    assert imported["projects"] == ["test"]  # where the records went: the project they were exported from


async def test_importing_the_same_document_twice_changes_nothing_the_second_time(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    await populate(client, clock)
    original = await export_document(client)

    async with Client(build_server(fresh_settings(tmp_path), clock)) as fresh:
        await call(fresh, "memory_import", document=original)
        once = await export_document(fresh)
        again = await call(fresh, "memory_import", document=original)
        twice = await export_document(fresh)

    assert sum(again["inserted"].values()) == 0
    assert sum(again["updated"].values()) == 0
    assert again["unchanged"] == {"sessions": 2, "observations": 3, "memories": 3}
    assert again["reindexed"] == 0
    assert again["projects"] == []
    assert twice == once


async def test_a_large_import_reports_progress_chunk_by_chunk(
    exported: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "IMPORT_CHUNK", 2)
    received: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        received.append((progress, total, message))

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        result = await fresh.call_tool("memory_import", {"document": exported}, progress_callback=on_progress)

    assert not result.is_error
    # sessions 2, observations 3, memories 3: chunks of two rows, table by table
    assert [(p, t) for p, t, _ in received] == [(2, 8), (4, 8), (5, 8), (7, 8), (8, 8)]
    assert [m for _, _, m in received][-1] == "imported 8 of 8 rows (memories)"


async def test_a_cancelled_import_leaves_nothing_behind(
    exported: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "IMPORT_CHUNK", 2)
    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        empty = await export_document(fresh)
        with anyio.CancelScope() as scope:

            async def cancel_midway(progress: float, total: float | None, message: str | None) -> None:
                if progress == 5:  # sessions and some observations are written, not committed
                    scope.cancel()

            await fresh.call_tool("memory_import", {"document": exported}, progress_callback=cancel_midway)

        after = await export_document(fresh)
        health = await call(fresh, "memory_diagnose")
        done = await call(fresh, "memory_import", document=exported)

    assert scope.cancelled_caught
    assert after == empty
    assert health["index_in_sync"] is True
    assert sum(health["index_docs"].values()) == 0
    assert done["inserted"] == {"sessions": 2, "observations": 3, "memories": 3}


async def test_importing_back_into_the_source_database_is_a_no_op(client: Client, clock: FakeClock) -> None:
    await populate(client, clock)
    original = await export_document(client)

    result = await call(client, "memory_import", document=original)

    assert sum(result["inserted"].values()) == sum(result["updated"].values()) == 0
    assert await export_document(client) == original


async def test_an_import_replaces_older_rows_with_newer_ones(client: Client, clock: FakeClock) -> None:
    saved = await call(client, "memory_save", content="Original wording of the convention.")
    document = await export_document(client)
    newer = copy.deepcopy(document)
    newer["tables"]["memories"][0]["content"] = "Edited wording of the convention."
    newer["tables"]["memories"][0]["updated_at"] = "2026-02-01T00:00:00.000000Z"
    older = copy.deepcopy(document)
    older["tables"]["memories"][0]["content"] = "Stale wording."
    older["tables"]["memories"][0]["updated_at"] = "2025-01-01T00:00:00.000000Z"

    stale = await call(client, "memory_import", document=older)
    fresh = await call(client, "memory_import", document=newer)

    assert stale["unchanged"] == {"memories": 1}
    assert fresh["updated"] == {"memories": 1}
    got = await call(client, "memory_get", id=saved["id"])
    assert got["memory"]["content"] == "Edited wording of the convention."
    hits = await call(client, "memory_smart_search", query="edited wording")
    assert [h["id"] for h in hits["hits"]] == [saved["id"]]
    assert (await call(client, "memory_smart_search", query="original"))["hits"] == []


async def test_a_row_repeated_in_one_document_is_taken_in_order(client: Client, clock: FakeClock) -> None:
    saved = await call(client, "memory_save", content="Original wording of the convention.")
    document = await export_document(client)
    row = document["tables"]["memories"][0]
    newer, newest, stale = (copy.deepcopy(row) for _ in range(3))
    newer.update(content="Second wording.", updated_at="2026-02-01T00:00:00.000000Z")
    newest.update(content="Third wording.", updated_at="2026-03-01T00:00:00.000000Z")
    stale.update(content="Stale wording.", updated_at="2026-02-15T00:00:00.000000Z")
    document["tables"]["memories"] = [newer, newest, stale, newest]

    result = await call(client, "memory_import", document=document)

    assert result["updated"] == {"memories": 2}
    assert result["unchanged"] == {"memories": 2}  # older than the copy just written, then identical
    got = await call(client, "memory_get", id=saved["id"])
    assert got["memory"]["content"] == "Third wording."


async def test_recall_works_on_an_imported_database(client: Client, clock: FakeClock, tmp_path: Path) -> None:
    stored = await populate(client, clock)
    document = await export_document(client)
    target = fresh_settings(tmp_path)

    async with Client(build_server(target, clock)) as fresh:
        await call(fresh, "memory_import", document=document)
        recalled = await call(fresh, "memory_recall", query="msgpack wire format")
        searched = await call(fresh, "memory_smart_search", query="PostgreSQL Frankfurt", kinds=["memory"])
        diagnosis = await call(fresh, "memory_diagnose")
    async with Client(build_server(target, clock)) as restarted:
        after_restart = await call(restarted, "memory_recall", query="msgpack wire format")

    assert recalled["hits"][0]["id"] == stored["observations"][0]["id"]
    assert [h["id"] for h in searched["hits"]] == [stored["chain"][1]["id"]]  # latest version only
    assert diagnosis["index_in_sync"] is True
    assert diagnosis["index_docs"] == {"observation": 3, "memory": 2}
    assert [h["id"] for h in after_restart["hits"]] == [h["id"] for h in recalled["hits"]]


async def test_a_memory_chain_continues_after_import(client: Client, clock: FakeClock, tmp_path: Path) -> None:
    stored = await populate(client, clock)
    document = await export_document(client)

    async with Client(build_server(fresh_settings(tmp_path), clock)) as fresh:
        await call(fresh, "memory_import", document=document)
        v3 = await call(
            fresh,
            "memory_save",
            content="The production database runs PostgreSQL 17 on the primary host db1 in the Frankfurt region.",
            concepts=["infra"],
        )

    assert v3["version"] == 3
    assert v3["superseded_id"] == stored["chain"][1]["id"]


def broken(document: dict[str, Any], how: str) -> tuple[dict[str, Any], str]:
    """A copy of `document` broken in one way, and the location the error must name."""
    bad = copy.deepcopy(document)
    if how == "format":
        bad["format"] = "some-other-tool"
        return bad, "document: format"
    if how == "format_version":
        bad["format_version"] = 99
        return bad, "document: format_version"
    if how == "unknown_key":
        bad["memories"] = bad["tables"]["memories"]
        return bad, "document.memories: unknown field"
    if how == "unknown_table":
        bad["tables"]["widgets"] = []
        return bad, "document.tables: unknown table 'widgets'"
    if how == "tables_not_object":
        bad["tables"] = []
        return bad, "document.tables:"
    if how == "rows_not_list":
        bad["tables"]["memories"] = {"id": "x"}
        return bad, "document.tables.memories:"
    if how == "bad_field":
        bad["tables"]["memories"][0]["content"] = 12345
        return bad, "document.tables.memories[0].content"
    if how == "missing_field":
        del bad["tables"]["observations"][1]["session_id"]
        return bad, "document.tables.observations[1].session_id"
    if how == "unknown_field":
        bad["tables"]["memories"][1]["colour"] = "blue"
        return bad, "document.tables.memories[1].colour"
    if how == "row_not_object":
        bad["tables"]["sessions"][0] = "conv-1"
        return bad, "document.tables.sessions[0]"
    if how == "bad_project":
        bad["tables"]["memories"][2]["project"] = "a/b"
        return bad, "document.tables.memories[2].project"
    if how == "dangling_reference":
        bad["tables"]["sessions"] = [s for s in bad["tables"]["sessions"] if s["id"] != "conv-1"]
        return bad, "document"
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "format",
        "format_version",
        "unknown_key",
        "unknown_table",
        "tables_not_object",
        "rows_not_list",
        "bad_field",
        "missing_field",
        "unknown_field",
        "row_not_object",
        "bad_project",
        "dangling_reference",
    ],
)
@pytest.mark.parametrize("via", ["document", "path"])
async def test_a_bad_document_is_rejected_naming_where_and_nothing_is_written(
    client: Client, exported: dict[str, Any], how: str, via: str, tmp_path: Path
) -> None:
    bad, where = broken(exported, how)
    if via == "path":  # streamed from a file: rows may be stored before the fault is read, then rolled back
        source = tmp_path / "bad.json"
        source.write_text(json.dumps(bad, indent=1, sort_keys=True), encoding="utf-8")
        message = await call_error(client, "memory_import", path=str(source))
    else:
        message = await call_error(client, "memory_import", document=bad)
    diagnosis = await call(client, "memory_diagnose")
    left = await export_document(client, all_projects=True)

    assert where in message
    assert "Traceback" not in message
    assert all(rows == [] for rows in left["tables"].values())
    assert diagnosis["counts"]["sessions"] == diagnosis["counts"]["observations"] == 0
    assert diagnosis["counts"]["audit_log"] == 0
    assert diagnosis["index_docs"] == {}
    assert sum((await call(client, "memory_import", document=exported))["inserted"].values()) == 8  # the good one


async def test_import_needs_exactly_one_of_document_or_path(client: Client, tmp_path: Path) -> None:
    neither = await call_error(client, "memory_import")
    both = await call_error(
        client, "memory_import", document={"format": "mcp-memory-export"}, path=str(tmp_path / "x.json")
    )

    assert "document" in neither
    assert "document" in both


async def test_export_and_import_through_a_file(client: Client, clock: FakeClock, tmp_path: Path) -> None:
    await populate(client, clock)
    original = await export_document(client)
    target = tmp_path / "backup.json"

    written = await call(client, "memory_export", path=str(target))

    assert written["path"] == str(target)
    assert written["document"] is None
    assert written["counts"]["memories"] == 3
    assert json.loads(target.read_text()) == original
    async with Client(build_server(fresh_settings(tmp_path), clock)) as fresh:
        imported = await call(fresh, "memory_import", path=str(target))
        copied = await export_document(fresh)
    assert imported["inserted"] == {"sessions": 2, "observations": 3, "memories": 3}
    assert copied == original


async def test_importing_a_file_that_is_not_json_names_path(client: Client, tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("not json at all")

    message = await call_error(client, "memory_import", path=str(target))
    missing = await call_error(client, "memory_import", path=str(tmp_path / "nope.json"))

    assert "path:" in message
    assert "path:" in missing


async def test_file_paths_are_refused_when_the_server_disallows_them(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    locked = settings.model_copy(update={"allow_file_paths": False})
    target = tmp_path / "backup.json"
    target.write_text(json.dumps({"format": "mcp-memory-export", "format_version": 1, "tables": {}}))

    async with Client(build_server(locked, clock)) as client:
        await call(client, "memory_save", content="Something to export.")
        export_message = await call_error(client, "memory_export", path=str(tmp_path / "out.json"))
        import_message = await call_error(client, "memory_import", path=str(target))
        inline = await call(client, "memory_export")

    assert export_message.startswith("Error executing tool memory_export: path:")
    assert import_message.startswith("Error executing tool memory_import: path:")
    assert not (tmp_path / "out.json").exists()
    assert inline["document"]["tables"]["memories"][0]["content"] == "Something to export."


async def test_imported_text_is_scrubbed_of_secrets(client: Client) -> None:
    document = await export_document(client)
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    document["tables"]["memories"] = [
        {
            "id": "mem_imported000000000001",
            "project": "test",
            "kind": "fact",
            "content": f"The CI token is {secret} and lives in the vault.",
            "root_id": "mem_imported000000000001",
            "created_at": "2025-01-01T00:00:00.000000Z",
            "updated_at": "2025-01-01T00:00:00.000000Z",
        }
    ]

    result = await call(client, "memory_import", document=document)
    stored = await call(client, "memory_get", id="mem_imported000000000001")

    assert sum(result["redacted"].values()) >= 1
    assert secret not in stored["memory"]["content"]
    assert secret not in json.dumps(result)
    assert "vault" in stored["memory"]["content"]


async def test_an_imported_row_with_a_bad_timestamp_is_rejected_naming_it(client: Client) -> None:
    document = await export_document(client)
    document["tables"]["memories"] = [
        {
            "id": "mem_imported000000000002",
            "project": "test",
            "kind": "fact",
            "content": "Imported with a broken date.",
            "root_id": "mem_imported000000000002",
            "created_at": "yesterday",
            "updated_at": "2025-01-01T00:00:00.000000Z",
        }
    ]

    message = await call_error(client, "memory_import", document=document)

    assert (await call(client, "memory_diagnose"))["counts"]["memories"] == 0  # holds today: rolled back
    assert "document.tables.memories[0].created_at" in message


async def test_imported_timestamps_with_an_offset_are_normalised_to_utc(client: Client) -> None:
    native = await call(
        client, "memory_observe", content="Native observation.", occurred_at="2025-03-01T11:00:00Z", session_id="s1"
    )
    document = await export_document(client)
    row = dict(document["tables"]["observations"][0])
    row.update(id="obs_imported0000000000001", seq=2, content="Imported observation.")
    row["occurred_at"] = "2025-03-01T12:00:00+02:00"  # 10:00 UTC: an hour before the native one
    document["tables"]["observations"].append(row)
    await call(client, "memory_import", document=document)

    oldest_first = await call(client, "memory_observations", order="oldest")
    after = await call(client, "memory_observations", since="2025-03-01T10:30:00Z")

    assert [o["id"] for o in oldest_first["observations"]] == ["obs_imported0000000000001", native["id"]]
    assert [o["id"] for o in after["observations"]] == [native["id"]]


async def test_an_import_into_the_global_project_name_is_rejected_for_memories(client: Client) -> None:
    document = await export_document(client)
    document["tables"]["memories"] = [
        {
            "id": "mem_imported000000000003",
            "project": "*",
            "kind": "fact",
            "content": "Stranded in the global scope.",
            "root_id": "mem_imported000000000003",
            "created_at": "2025-01-01T00:00:00.000000Z",
            "updated_at": "2025-01-01T00:00:00.000000Z",
        }
    ]

    message = await call_error(client, "memory_import", document=document)

    assert "document.tables.memories[0].project" in message


async def test_exporting_into_a_missing_folder_names_path(client: Client, tmp_path: Path) -> None:
    await call(client, "memory_save", content="Something to export.")

    message = await call_error(client, "memory_export", path=str(tmp_path / "no" / "such" / "out.json"))

    assert "path" in message


# -- an import stays inside its projects --------------------------------------------------------------


async def _another_projects_records(client: Client) -> dict[str, Any]:
    """Records of project "beta" that an import for "alpha" will try to reach; returns beta's export."""
    await call(
        client, "memory_observe", content="Beta chose Kafka for the event bus.", session_id="conv-b", project="beta"
    )
    await call(client, "memory_save", content="Beta's vault combination is kept in the safe.", project="beta")
    await call(
        client,
        "memory_outcome_record",
        task="Rotate the beta certificates",
        success=False,
        error="expired intermediate",
        mistake_cards=[{"type": "skipped_check", "correct_decision": "Check the whole chain first"}],
        project="beta",
    )
    await call(client, "memory_action_create", title="Renew the beta domain", project="beta")
    return await export_document(client, project="beta")


def _forgeries(beta: dict[str, Any]) -> list[tuple[str, dict[str, list[dict[str, Any]]]]]:
    """(the field the import must name, tables of project "alpha" reaching into beta's records)."""
    t = beta["tables"]
    session, memory, outcome = t["sessions"][0], t["memories"][0], t["outcomes"][0]
    card, action = t["mistake_cards"][0], t["actions"][0]
    mine = memory | {"id": "mem_alphaown00000000000", "root_id": "mem_alphaown00000000000", "project": "alpha"}
    mine["session_id"] = None
    own_outcome = outcome | {"id": "out_alphaown00000000000", "project": "alpha", "session_id": None}
    relation = {
        "id": "rel_alphaown00000000000",
        "project": "alpha",
        "source_id": mine["id"],
        "target_id": memory["id"],
        "type": "related",
        "created_at": memory["created_at"],
        "updated_at": memory["updated_at"],
    }
    return [
        ("memories[0].id", {"memories": [memory | {"project": "alpha", "updated_at": "2099-01-01T00:00:00.000000Z"}]}),
        (
            "memories[1].session_id",
            {"memories": [mine, mine | {"id": "mem_alphaown00000000001", "session_id": session["id"]}]},
        ),
        ("memories[0].parent_id", {"memories": [mine | {"parent_id": memory["id"], "version": 2}]}),
        (
            "observations[0].session_id",
            {"observations": [t["observations"][0] | {"id": "obs_alphaown00000000000", "project": "alpha"}]},
        ),
        (
            "outcome_mistake_cards[0].card_id",
            {
                "outcomes": [own_outcome],
                "outcome_mistake_cards": [{"outcome_id": own_outcome["id"], "card_id": card["id"]}],
            },
        ),
        (
            "actions[0].parent_id",
            {"actions": [action | {"id": "act_alphaown00000000000", "project": "alpha", "parent_id": action["id"]}]},
        ),
        ("relations[0].target_id", {"memories": [mine], "relations": [relation]}),
    ]


async def test_an_import_never_replaces_or_links_to_another_projects_records(client: Client) -> None:
    before = await _another_projects_records(client)

    for field, tables in _forgeries(before):
        document = {"format": "mcp-memory-export", "format_version": 1, "tables": tables}
        message = await call_error(client, "memory_import", document=document)
        assert f"document.tables.{field}:" in message, (field, message)
        assert "another project" in message

    assert await export_document(client, project="beta") == before
    assert sum(len(rows) for rows in (await export_document(client, project="alpha"))["tables"].values()) == 0


async def test_a_restricted_import_cannot_link_another_projects_records_either(tmp_path: Path) -> None:
    settings = fresh_settings(tmp_path)
    async with Client(build_server(settings)) as anyone:
        beta = await _another_projects_records(anyone)
    outcome, card = beta["tables"]["outcomes"][0], beta["tables"]["mistake_cards"][0]
    link = {"outcome_mistake_cards": [{"outcome_id": outcome["id"], "card_id": card["id"]}]}
    async with Client(build_server(settings.model_copy(update={"project": "alpha", "isolated": True}))) as alpha:
        message = await call_error(
            alpha, "memory_import", document={"format": "mcp-memory-export", "format_version": 1, "tables": link}
        )
    assert "document.tables.outcome_mistake_cards[0].outcome_id: names a record of another project" in message


async def test_an_import_may_link_to_global_lessons_and_to_rows_later_in_the_file(
    client: Client, tmp_path: Path
) -> None:
    lesson = (await call(client, "memory_lesson_save", content="Pin tool versions in CI.", scope="global"))["lesson"]
    memory = {
        "id": "mem_alphaown00000000000",
        "project": "alpha",
        "kind": "fact",
        "content": "Alpha pins ruff in CI.",
        "root_id": "mem_alphaown00000000000",
        "created_at": "2025-01-01T00:00:00.000000Z",
        "updated_at": "2025-01-01T00:00:00.000000Z",
    }
    relations = [
        {
            "id": f"rel_alphaown0000000000{i}",
            "project": "alpha",
            "source_id": memory["id"],
            "target_id": target,
            "type": "related",
            "created_at": memory["created_at"],
            "updated_at": memory["updated_at"],
        }
        for i, target in enumerate([lesson["id"], "mem_alphaown00000000001"])
    ]
    later = memory | {
        "id": "mem_alphaown00000000001",
        "root_id": "mem_alphaown00000000001",
        "content": "Alpha pins mypy.",
    }
    document = {
        "format": "mcp-memory-export",
        "format_version": 1,
        "tables": {"relations": relations, "memories": [memory, later]},  # a file is read in its own order
    }
    path = tmp_path / "forward.json"
    path.write_text(json.dumps(document))

    result = await call(client, "memory_import", path=str(path))

    assert result["inserted"] == {"relations": 2, "memories": 2}
    related = await call(client, "memory_related", id=memory["id"], project="alpha")
    assert {n["id"] for n in related["nodes"]} >= {lesson["id"], later["id"]}

    theirs = later | {"id": "mem_betaown000000000001", "root_id": "mem_betaown000000000001", "project": "beta"}
    relations[1] |= {"id": "rel_alphaown00000000009", "target_id": theirs["id"]}
    path.write_text(json.dumps(document | {"tables": {"relations": relations, "memories": [memory, theirs]}}))
    message = await call_error(client, "memory_import", path=str(path))
    assert "document.tables.relations[1].target_id: names a record of another project" in message


async def test_an_imported_session_named_like_another_projects_is_kept_apart(client: Client, tmp_path: Path) -> None:
    async with Client(build_server(fresh_settings(tmp_path, "laptop"))) as laptop:
        note = await call(laptop, "memory_observe", content="Q's laptop note.", session_id="main", project="q")
        await call(laptop, "memory_save", content="Q keeps its keys in the vault.", session_id="main", project="q")
        await call(laptop, "memory_relate", source_id="main", target_id=note["id"], project="q")
        document = await export_document(laptop, project="q")
    mine = await call(client, "memory_observe", content="P's desktop note.", session_id="main", project="p")

    first = await call(client, "memory_import", document=document)
    again = await call(client, "memory_import", document=document)

    assert first["inserted"] == {"sessions": 1, "observations": 1, "memories": 1, "relations": 1}
    assert sum(again["inserted"].values()) + sum(again["updated"].values()) == 0
    for project, expected in (("q", note["id"]), ("p", mine["id"])):
        listed = await call(client, "memory_observations", session_id="main", project=project)
        assert [o["id"] for o in listed["observations"]] == [expected]
        assert [o["session_id"] for o in listed["observations"]] == ["main"]
    related = await call(client, "memory_related", id="main", project="q")
    assert [n["id"] for n in related["nodes"]] == [note["id"]]
    saved = await call(client, "memory_smart_search", query="vault keys", project="q")
    assert [h["session_id"] for h in saved["hits"] if h["kind"] == "memory"] == ["main"]


async def test_an_inline_export_past_its_row_limit_is_refused_saying_how_to_get_it(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    small = settings.model_copy(update={"export_inline_max_rows": 2})
    remote = small.model_copy(update={"allow_file_paths": False})
    async with Client(build_server(small, clock)) as client:
        for i in range(2):
            await call(client, "memory_save", content=f"Fact number {i} about the deploy.")
        fits = await call(client, "memory_export")
        await call(client, "memory_save", content="One fact too many for an inline export.")
        refused = await call_error(client, "memory_export")
        to_file = await call(client, "memory_export", path=str(tmp_path / "out.json"))
    async with Client(build_server(remote, clock)) as client:
        refused_remote = await call_error(client, "memory_export")
    async with Client(build_server(small.model_copy(update={"export_inline_max_rows": 0}), clock)) as client:
        unlimited = await call(client, "memory_export")

    assert fits["counts"]["memories"] == 2
    assert refused == (
        "Error executing tool memory_export: path: this export holds 3 rows, more than the 2 returned inline; "
        "pass path to write it to a file"
    )
    assert to_file["counts"]["memories"] == 3
    assert "file paths are off on this server, so its --export-inline-max-rows decides" in refused_remote
    assert unlimited["counts"]["memories"] == 3
