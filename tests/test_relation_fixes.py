"""Relations belong to their project, session names cannot be squatted, and a project's export restores."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.ids import scoped_session_id
from mcp_memory.migrations import MIGRATIONS
from mcp_memory.repositories import archive
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_operations import export_document, fresh_settings
from tests.test_upgrade import undo_after_schema_6

OLD_RELATIONS = """CREATE TABLE relations (
    id TEXT PRIMARY KEY, project TEXT NOT NULL, source_id TEXT NOT NULL, target_id TEXT NOT NULL,
    type TEXT NOT NULL, weight REAL NOT NULL DEFAULT 1.0, note TEXT, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, UNIQUE (source_id, target_id, type))"""


async def global_pair(client: Client) -> tuple[str, str]:
    """A global lesson and a global slot: records every project may relate."""
    lesson = await call(client, "memory_lesson_save", content="Always tag a release before deploying.", scope="global")
    slot = await call(client, "memory_slot_create", name="house_rules", content="Be brief.", scope="global")
    return lesson["lesson"]["id"], slot["slot"]["id"]


async def edges(client: Client, start: str, project: str) -> list[tuple[str, float, str | None]]:
    related = await call(client, "memory_related", id=start, project=project)
    return [(e["id"], e["weight"], e["note"]) for e in related["edges"]]


def export_file(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "document.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# -- 1. an edge between global records is each project's own ---------------------------------------------


async def test_two_projects_relating_the_same_global_records_each_keep_their_own_edge(client: Client) -> None:
    lesson, slot = await global_pair(client)
    alpha = await call(
        client, "memory_relate", source_id=lesson, target_id=slot, note="alpha's private note", project="alpha"
    )

    beta = await call(client, "memory_relate", source_id=lesson, target_id=slot, weight=0.1, project="beta")
    again = await call(
        client, "memory_relate", source_id=lesson, target_id=slot, weight=0.2, note="beta's", project="beta"
    )

    assert (alpha["created"], beta["created"], again["created"]) == (True, True, False)
    assert beta["relation"]["id"] == again["relation"]["id"] != alpha["relation"]["id"]
    assert beta["relation"]["note"] is None
    assert await edges(client, lesson, "alpha") == [(alpha["relation"]["id"], 1.0, "alpha's private note")]
    assert await edges(client, lesson, "beta") == [(beta["relation"]["id"], 0.2, "beta's")]


async def test_a_schema_5_file_gets_relations_unique_per_project(settings: Settings) -> None:
    async with Client(build_server(settings)) as client:
        lesson, slot = await global_pair(client)
        made = await call(client, "memory_relate", source_id=lesson, target_id=slot, note="kept", project="alpha")
    with sqlite3.connect(settings.db) as conn:  # the relations table as schema 5 left it
        undo_after_schema_6(conn)
        conn.execute("DROP TABLE relations")
        conn.execute(OLD_RELATIONS)
        conn.execute("CREATE INDEX relations_by_target ON relations (target_id)")
        conn.execute(
            "INSERT INTO relations VALUES (?, 'alpha', ?, ?, 'related', 1.0, 'kept', ?, ?)",
            (made["relation"]["id"], lesson, slot, made["relation"]["created_at"], made["relation"]["created_at"]),
        )
        conn.execute("DELETE FROM schema_migrations WHERE version >= 6")
        conn.execute("PRAGMA user_version = 5")

    async with Client(build_server(settings)) as client:
        diagnosis = await call(client, "memory_diagnose")
        beta = await call(client, "memory_relate", source_id=lesson, target_id=slot, project="beta")
        kept = await edges(client, lesson, "alpha")
    with sqlite3.connect(settings.db) as conn:
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'relations'")}
        table_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'relations'").fetchone()[0]

    assert diagnosis["schema_version"] == MIGRATIONS[-1][0]
    assert diagnosis["integrity_ok"] is True
    assert beta["created"] is True
    assert kept == [(made["relation"]["id"], 1.0, "kept")]
    assert "UNIQUE (project, source_id, target_id, type)" in table_sql
    assert "relations_by_target" in indexes


# -- 2. a session name cannot be squatted by an import ---------------------------------------------------


async def test_an_import_cannot_store_a_session_under_another_projects_mark(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "memory.db", project="alpha", synchronous="normal", isolated=True)
    squatted = scoped_session_id("chat-main", "beta")
    async with Client(build_server(settings)) as alpha:
        await call(alpha, "memory_observe", content="Alpha talks in chat-main.", session_id="chat-main")
        document = await export_document(alpha)
        session = document["tables"]["sessions"][0]
        memory = await call(alpha, "memory_save", content="Alpha's note.")
        forged = document | {"tables": {"sessions": [session | {"id": squatted}]}}
        refused = await call_error(alpha, "memory_import", document=forged)
        relation = {
            "id": "rel_01m80y2zswg25dk27enn5k", "project": "alpha", "source_id": squatted,
            "target_id": memory["id"], "type": "related", "created_at": session["created_at"],
            "updated_at": session["created_at"],
        }  # fmt: skip
        pointing = await call_error(alpha, "memory_import", document=document | {"tables": {"relations": [relation]}})
    own = scoped_session_id("chat-main", "alpha")
    async with Client(build_server(settings.model_copy(update={"project": "beta"}))) as beta:
        observed = await call(beta, "memory_observe", content="Beta's first message.", session_id="chat-main")

    assert refused.startswith(
        f"Error executing tool memory_import: document.tables.sessions[0].id: must be 'chat-main' or {own!r} "
        "in a row of project 'alpha'"
    )
    assert "document.tables.relations[0].source_id: must be 'chat-main' or" in pointing
    assert (observed["session_id"], observed["session_created"]) == ("chat-main", True)


async def test_a_session_name_whose_scoped_id_is_taken_is_refused_cleanly(settings: Settings) -> None:
    async with Client(build_server(settings)) as client:
        await call(
            client, "memory_observe", content="Alpha talks in chat-main.", session_id="chat-main", project="alpha"
        )
    with sqlite3.connect(settings.db) as conn:  # what an older release's import could leave behind
        conn.execute(
            "INSERT INTO sessions (id, project, started_at, last_activity_at, created_at, updated_at) "
            "SELECT ?, 'alpha', started_at, last_activity_at, created_at, updated_at FROM sessions",
            (scoped_session_id("chat-main", "beta"),),
        )

    async with Client(build_server(settings)) as client:
        refused = await call_error(client, "memory_observe", content="Beta.", session_id="chat-main", project="beta")
        other = await call(client, "memory_observe", content="Beta.", session_id="chat-2", project="beta")

    assert "UNIQUE" not in refused
    assert "session_id: 'chat-main' cannot name a new session of this project" in refused
    assert other["session_created"] is True


# -- 3. a project's export restores ---------------------------------------------------------------------


async def _project_with_global_edges(client: Client) -> dict[str, str]:
    lesson, slot = await global_pair(client)
    await call(client, "memory_lesson_save", content="An unrelated global lesson about naming.", scope="global")
    memory = (await call(client, "memory_save", content="Alpha tags releases with the date.", project="alpha"))["id"]
    await call(client, "memory_relate", source_id=memory, target_id=lesson, type="derived_from", project="alpha")
    await call(client, "memory_relate", source_id=slot, target_id=memory, project="alpha")
    await call(client, "memory_save", content="Beta's own note.", project="beta")
    return {"lesson": lesson, "slot": slot, "memory": memory}


@pytest.mark.parametrize("walk", [False, True], ids=["sorted", "walked"])
async def test_a_project_export_carries_the_global_records_its_relations_name_and_round_trips(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walk: bool
) -> None:
    if walk:
        monkeypatch.setattr(archive, "_SORT_ROWS", 0)
    ids = await _project_with_global_edges(client)
    document = await export_document(client, project="alpha")
    written = await call(client, "memory_export", project="alpha", path=str(tmp_path / "alpha.json"))

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        imported = await call(fresh, "memory_import", document=document)
        again = await export_document(fresh, project="alpha")
        walked = await call(fresh, "memory_related", id=ids["memory"], project="alpha")

    assert [row["id"] for row in document["tables"]["lessons"]] == [ids["lesson"]]
    assert [row["id"] for row in document["tables"]["slots"]] == [ids["slot"]]
    assert written["counts"] == {name: len(rows) for name, rows in document["tables"].items()}
    assert imported["inserted"]["relations"] == 2
    assert again == document
    assert {node["id"] for node in walked["nodes"]} == {ids["lesson"], ids["slot"]}


async def test_a_restricted_caller_reimports_its_export_but_never_adds_or_changes_a_global_record(
    tmp_path: Path, clock: FakeClock
) -> None:
    settings = Settings(db=tmp_path / "memory.db", project="test", synchronous="normal")
    async with Client(build_server(settings, clock)) as admin:
        ids = await _project_with_global_edges(admin)
    restricted = settings.model_copy(update={"project": "alpha", "isolated": True})
    async with Client(build_server(restricted, clock)) as alpha:
        document = await export_document(alpha)
        again = await call(alpha, "memory_import", document=document)
        lesson = document["tables"]["lessons"][0]
        changed = lesson | {"content": "Rewritten by alpha.", "updated_at": "2099-01-01T00:00:00Z"}
        rewrite = await call_error(alpha, "memory_import", document=document | {"tables": {"lessons": [changed]}})
        lessons = (await call(alpha, "memory_lessons", scope="all"))["lessons"]
    elsewhere = restricted.model_copy(update={"db": tmp_path / "fresh.db"})
    async with Client(build_server(elsewhere, clock)) as fresh:
        into_fresh = await call_error(fresh, "memory_import", document=document)
        left = await export_document(fresh)

    assert again["inserted"] == dict.fromkeys(again["inserted"], 0)
    assert again["unchanged"]["lessons"] == again["unchanged"]["slots"] == 1
    expected = "document.tables.lessons[0].project: this connection may only import into 'alpha'; a global record"
    assert expected in rewrite
    assert expected in into_fresh
    assert [entry["content"] for entry in lessons if entry["id"] == ids["lesson"]] == [lesson["content"]]
    assert all(rows == [] for rows in left["tables"].values())


# -- 4. a session named ses_… is found by its name ----------------------------------------------------------


async def test_relate_and_related_reach_a_project_session_named_like_a_server_id(client: Client) -> None:
    await call(client, "memory_observe", content="Alpha talks about kiwis.", session_id="ses_chat1", project="alpha")
    ours = await call(
        client, "memory_observe", content="Beta talks about mangoes.", session_id="ses_chat1", project="beta"
    )
    memory = (await call(client, "memory_save", content="Beta likes mangoes.", project="beta"))["id"]

    made = await call(client, "memory_relate", source_id="ses_chat1", target_id=memory, project="beta")
    related = await call(client, "memory_related", id="ses_chat1", project="beta")
    alphas = await call(client, "memory_related", id="ses_chat1", project="alpha")

    assert ours["session_id"] == "ses_chat1"
    assert made["relation"]["source_id"] == "ses_chat1"
    assert (related["start"], [n["id"] for n in related["nodes"]]) == ("ses_chat1", [memory])
    assert alphas["nodes"] == []


# -- 5, 6. diagnose and errors ------------------------------------------------------------------------------


async def test_diagnose_without_an_embedding_provider_counts_no_record_as_lacking_a_vector(client: Client) -> None:
    await call(client, "memory_save", content="The cache is warmed at start-up.")
    await call(client, "memory_observe", content="Warmed the cache by hand.")

    embeddings = (await call(client, "memory_diagnose"))["embeddings"]

    assert (embeddings["provider"], embeddings["vectors"], embeddings["lacking"]) == ("none", 0, 0)


async def test_related_names_the_id_field_of_an_unknown_record(client: Client) -> None:
    message = await call_error(client, "memory_related", id="mem_01m80y2zswg25dk27enn5k")

    assert "id: No record 'mem_01m80y2zswg25dk27enn5k' in this project" in message


# -- 7. a secret in a note is reported, as other writing tools report it ------------------------------------


async def test_relate_reports_a_secret_redacted_from_its_note(client: Client) -> None:
    lesson, slot = await global_pair(client)
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"

    made = await call(client, "memory_relate", source_id=lesson, target_id=slot, note=f"deploy key {token} here")
    plain = await call(client, "memory_relate", source_id=slot, target_id=lesson, note="no secret here")

    assert made["redacted"] == {"github_token": 1}
    assert made["relation"]["note"] == "deploy key [REDACTED:github_token] here"
    assert token not in str(await call(client, "memory_related", id=lesson))
    assert plain["redacted"] == {}


# -- 7. a memory is one node for relate as for related ------------------------------------------------------

V1 = "The staging database runs Postgres 15 on port 5433 behind pgbouncer"
V2 = "The staging database runs Postgres 16 on port 5433 behind pgbouncer"


async def test_relating_a_newer_version_again_updates_the_edge_made_to_an_older_one(client: Client) -> None:
    old = (await call(client, "memory_save", content=V1))["id"]
    action = (await call(client, "memory_action_create", title="Upgrade staging DB"))["action"]["id"]
    first = await call(client, "memory_relate", source_id=old, target_id=action, weight=0.9)
    new = (await call(client, "memory_save", content=V2))["id"]

    again = await call(client, "memory_relate", source_id=new, target_id=action, weight=0.1, note="less sure now")
    related = await call(client, "memory_related", id=action)

    assert (again["created"], again["relation"]["id"], again["relation"]["weight"]) == (
        False,
        first["relation"]["id"],
        0.1,
    )
    assert [(n["id"], n["weight"]) for n in related["nodes"]] == [(new, 0.1)]
    assert [(e["id"], e["note"]) for e in related["edges"]] == [(first["relation"]["id"], "less sure now")]


async def test_two_versions_of_one_memory_are_not_related_to_each_other(client: Client) -> None:
    old = (await call(client, "memory_save", content=V1))["id"]
    new = (await call(client, "memory_save", content=V2))["id"]

    message = await call_error(client, "memory_relate", source_id=old, target_id=new, type="contradicts")

    assert "target_id: is a version of the same memory as source_id" in message
    assert (await call(client, "memory_related", id=new))["edges"] == []
