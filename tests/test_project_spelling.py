"""A project name is one project however its accents are spelled (composed or decomposed)."""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import ListRootsResult, Root

from mcp_memory.auth import load_grants
from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

COMPOSED = "Café"
DECOMPOSED = unicodedata.normalize("NFD", COMPOSED)


def test_the_two_spellings_differ_and_the_settings_keep_the_composed_one(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{'t' * 20} {DECOMPOSED}\n")

    settings = Settings(db=tmp_path / "m.db", project=DECOMPOSED, auth_token_file=tokens)

    assert DECOMPOSED != COMPOSED
    assert settings.project == COMPOSED
    assert [grant.project for grant in load_grants(settings)] == [COMPOSED]


def test_a_token_file_naming_a_project_no_call_could_use_is_refused_at_start(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# team tokens\n{'t' * 20} team/a\n")

    with pytest.raises(ValueError, match=r"tokens:2: project must be 1-128 characters"):
        load_grants(Settings(db=tmp_path / "m.db", auth_token_file=tokens))


async def test_either_spelling_of_the_argument_reaches_one_project(client: Client) -> None:
    saved = await call(
        client, "memory_save", content="The espresso machine needs descaling monthly.", project=DECOMPOSED
    )
    found = await call(client, "memory_smart_search", query="espresso descaling", project=COMPOSED)
    listed = await call(client, "memory_observations", project=DECOMPOSED)

    assert [hit["id"] for hit in found["hits"]] == [saved["id"]]
    assert listed["project"] == COMPOSED


async def test_a_decomposed_folder_name_in_the_roots_is_the_project_an_agent_types(
    tmp_path: Path, clock: FakeClock
) -> None:
    folder = tmp_path / DECOMPOSED  # as a macOS client often reports an accented folder
    folder.mkdir()

    async def list_roots(_: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=folder.as_uri(), name="workspace")])

    settings = Settings(db=tmp_path / "m.db", project="fallback", isolated=True)
    async with Client(build_server(settings, clock), list_roots_callback=list_roots, mode="legacy") as client:
        implicit = await call(client, "memory_observations")
        named = await call(client, "memory_observations", project=COMPOSED)
        refused = await call_error(client, "memory_save", content="Elsewhere.", project="fallback")

    assert implicit["project"] == named["project"] == COMPOSED
    assert f"may only use project {COMPOSED!r}" in refused


async def test_imported_rows_in_the_other_spelling_join_the_project(client: Client, tmp_path: Path) -> None:
    await call(client, "memory_save", content="Milk is steamed to sixty degrees.", project=COMPOSED)
    document = (await call(client, "memory_export", project=COMPOSED))["document"]
    for row in document["tables"]["memories"]:
        row["project"] = DECOMPOSED
        row["id"] = row["id"] + "x"
    source = tmp_path / "decomposed.json"
    source.write_text(json.dumps(document), encoding="utf-8")

    imported = await call(client, "memory_import", path=str(source))
    listed = await call(client, "memory_export", project=COMPOSED)

    assert imported["inserted"] == {"memories": 1}
    assert sorted(row["project"] for row in listed["document"]["tables"]["memories"]) == [COMPOSED, COMPOSED]


def _respell_as_an_older_release_stored_it(path: Path) -> None:
    """Rename the composed project to its decomposed spelling everywhere, and undo migrations 13 to 18
    (19 replaces its own triggers again)."""
    with sqlite3.connect(path) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if "project" in columns and table != "profile_tally":  # the triggers move its counts
                conn.execute(f"UPDATE {table} SET project = ? WHERE project = ?", (DECOMPOSED, COMPOSED))
        conn.execute("DROP TABLE pruned_outcomes")
        conn.execute("DROP INDEX observations_by_session_time")
        conn.execute("DROP TRIGGER observations_fix_cues_stale")
        conn.execute("ALTER TABLE observations DROP COLUMN fix_cues")
        conn.execute("DROP INDEX lessons_by_standing")
        conn.execute("DROP TRIGGER lessons_since_us_insert")
        conn.execute("DROP TRIGGER lessons_since_us_update")
        conn.execute("ALTER TABLE lessons DROP COLUMN since_us")
        conn.execute("DROP INDEX sessions_by_activity")
        conn.execute("DROP INDEX memories_by_content")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 13")


def _projects_of(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return sorted(project for (project,) in conn.execute(f"SELECT project FROM {table}"))


async def test_an_older_file_with_decomposed_names_is_renamed_and_keeps_everything(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        memory = await call(
            client,
            "memory_save",
            content="Beans come from the roaster on Tuesdays.",
            concepts=["beans"],
            project=COMPOSED,
        )
        await call(
            client, "memory_observe", content="Checked the roaster invoice.", files=["invoice.pdf"], project=COMPOSED
        )
        await call(client, "memory_slot_create", name="notes", content="decomposed notes", project=COMPOSED)
        await call(client, "memory_lesson_save", content="Weigh the beans before grinding.", project=COMPOSED)
    _respell_as_an_older_release_stored_it(settings.db)
    with sqlite3.connect(settings.db) as conn:  # the older release kept a slot of that name in each spelling
        conn.execute(
            "INSERT INTO slots SELECT 'slot_composed', ?, name, 'composed notes', size_limit, pinned, description,"
            " created_at, updated_at FROM slots WHERE project = ?",
            (COMPOSED, DECOMPOSED),
        )

    async with Client(build_server(settings, clock)) as client:
        diagnosis = await call(client, "memory_diagnose")
        recalled = await call(client, "memory_smart_search", query="roaster Tuesdays", project=COMPOSED)
        profile = await call(client, "memory_profile", project=COMPOSED)
        lessons = await call(client, "memory_lesson_recall", query="weigh beans", project=COMPOSED)
        slot = await call(client, "memory_slot_get", name="notes", project=COMPOSED)

    assert diagnosis["index_in_sync"] is True
    assert recalled["hits"][0]["id"] == memory["id"]
    assert (profile["memories"], profile["observations"], profile["lessons"]) == (1, 1, 1)
    assert [c["name"] for c in profile["top_concepts"]][:1] == ["beans"]
    assert [f["name"] for f in profile["top_files"]] == ["invoice.pdf"]
    assert len(lessons["lessons"]) == 1
    assert slot["content"] == "composed notes"
    # The slot that would have collided is kept whole under its old spelling, not merged or lost.
    assert _projects_of(settings.db, "slots") == sorted([COMPOSED, DECOMPOSED])
    assert _projects_of(settings.db, "memories") == [COMPOSED]
    assert _projects_of(settings.db, "observations") == [COMPOSED]
    assert set(_projects_of(settings.db, "profile_tally")) == {COMPOSED}
