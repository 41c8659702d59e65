"""A database written by an older release opens, migrates and is re-analysed without losing anything."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.migrations import MIGRATIONS
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_tools_lessons import _since_us_of

TURNS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That sounds wonderful. What happened there?",
    "Caroline: People shared their transgender stories and I felt accepted.",
]


def undo_after_schema_6(conn: sqlite3.Connection) -> None:
    """Take away what migrations 7 to 20 added: the profile's running count, the triggers that keep
    it, the notes of forgotten records, the index of observations by type, the notes of folded ones,
    the index of relations by source, the scores of pruned outcomes (13 changed data only), the
    index of observations by session and time, the observations' fix cues, lessons' standings and
    the index of sessions by activity (19 changed triggers the first line drops) and the index of
    memories by content."""
    for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE profile_tally")
    conn.execute("DROP TABLE forgotten")
    conn.execute("DROP INDEX observations_by_type")
    conn.execute("DROP TABLE folded_observations")
    conn.execute("DROP INDEX relations_by_source")
    conn.execute("DROP TABLE pruned_outcomes")
    conn.execute("DROP INDEX observations_by_session_time")
    conn.execute("ALTER TABLE observations DROP COLUMN fix_cues")
    conn.execute("DROP INDEX lessons_by_standing")
    conn.execute("ALTER TABLE lessons DROP COLUMN since_us")
    conn.execute("DROP INDEX sessions_by_activity")
    conn.execute("DROP INDEX memories_by_content")
    conn.execute("DELETE FROM schema_migrations WHERE version > 6")


def _downgrade_to_schema_1(path: Path) -> None:
    """Make the file look like one written by schema 1 and analyzer 1, the release before ranking."""
    with sqlite3.connect(path) as conn:
        undo_after_schema_6(conn)
        conn.execute("DROP TABLE embeddings")
        conn.execute("DROP INDEX search_docs_analyzer")
        conn.execute("ALTER TABLE search_docs DROP COLUMN digest")
        conn.execute("ALTER TABLE search_docs DROP COLUMN seq")
        conn.execute("ALTER TABLE search_docs DROP COLUMN weight")
        conn.execute("DELETE FROM schema_migrations WHERE version > 1")
        conn.execute("PRAGMA user_version = 1")
        # the old analysis knew nothing of dates: leave it without terms so only a re-analysis finds them
        conn.execute("UPDATE search_docs SET terms = x'', length = 0, analyzer = 1")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'analyzer_version'")


async def test_a_schema_1_file_is_migrated_and_re_analysed(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as client:
        ids = []
        for turn in TURNS:
            saved = await call(
                client,
                "memory_observe",
                content=turn,
                type="conversation",
                session_id="chat-1",
                occurred_at="2023-05-08T13:56:00Z",
            )
            ids.append(saved["id"])
        await call(client, "memory_save", content="Caroline is researching adoption agencies.", kind="fact")
    _downgrade_to_schema_1(settings.db)

    async with Client(build_server(settings, clock)) as client:
        diagnosis = await call(client, "memory_diagnose")
        hits = (await call(client, "memory_recall", query="Caroline support group 7 May 2023"))["hits"]
        found = await call(client, "memory_smart_search", query="adoption agencies")

    assert diagnosis["schema_version"] == MIGRATIONS[-1][0] == 20
    assert diagnosis["analyzer_version"] == ANALYZER_VERSION
    assert diagnosis["index_in_sync"] is True
    assert diagnosis["index_docs"] == diagnosis["stored_docs"] == {"observation": 3, "memory": 1}
    assert hits[0]["id"] == ids[0]
    # the re-analysis restored each turn's place in its session, so context reaches the next turn
    assert ids[1] in {h["id"] for h in hits}
    assert [h["kind"] for h in found["hits"]] == ["memory"]


async def test_relations_left_dangling_by_an_older_release_are_dropped(settings: Settings) -> None:
    async with Client(build_server(settings)) as client:
        memory = (await call(client, "memory_save", content="The deploy runs from the release branch."))["id"]
        lesson = (await call(client, "memory_lesson_save", content="Tag the release before deploying."))["lesson"]
        await call(client, "memory_relate", source_id=memory, target_id=lesson["id"])
    with sqlite3.connect(settings.db) as conn:
        # what slot deletion and mistake-card trimming used to leave behind
        for relation, source, target in [
            ("rel_a", memory, "slot_gone"),
            ("rel_b", "mc_gone", memory),
            ("rel_c", "mem_gone", lesson["id"]),
        ]:
            conn.execute(
                "INSERT INTO relations (id, project, source_id, target_id, type, created_at, updated_at) "
                "VALUES (?, 'test', ?, ?, 'related', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
                (relation, source, target),
            )
        undo_after_schema_6(conn)
        conn.execute("DELETE FROM schema_migrations WHERE version >= 5")

    async with Client(build_server(settings)) as client:
        edges = (await call(client, "memory_related", id=memory))["edges"]
    with sqlite3.connect(settings.db) as conn:
        stored = conn.execute("SELECT source_id, target_id FROM relations").fetchall()

    assert stored == [(memory, lesson["id"])]
    assert [(e["source_id"], e["target_id"]) for e in edges] == [(memory, lesson["id"])]


async def test_a_schema_6_file_gets_the_profile_count_of_what_it_holds(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as client:
        await call(client, "memory_observe", content="Parser rewrite", concepts=["parser"], files=["src/app.py"])
        await call(client, "memory_observe", content="Parser tests", concepts=["parser", "auth"])
        old = await call(client, "memory_save", content="The parser is hand-written.", concepts=["parser"])
        await call(
            client, "memory_save", content="The parser is generated.", concepts=["codegen"], supersedes=old["id"]
        )
    with sqlite3.connect(settings.db) as conn:
        undo_after_schema_6(conn)
        conn.execute("UPDATE observations SET concepts = '[\"router\"]' WHERE content = 'Parser tests'")
    async with Client(build_server(settings, clock)) as reopened:
        profile = await call(reopened, "memory_profile")
    with sqlite3.connect(settings.db) as conn:
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'profile_tally'")}

    assert [(c["name"], c["count"]) for c in profile["top_concepts"]] == [("codegen", 1), ("parser", 1), ("router", 1)]
    assert [(f["name"], f["count"]) for f in profile["top_files"]] == [("src/app.py", 1)]
    assert "profile_tally_top" not in indexes  # migration 8 took it away again


async def test_a_schema_16_file_gets_the_standing_of_every_lesson(settings: Settings, clock: FakeClock) -> None:
    """Migration 17 works out, for the lessons a file already holds, the time each confidence decays
    from, so SQL ranks them as the service judges them."""
    async with Client(build_server(settings, clock)) as client:
        old = (await call(client, "memory_lesson_save", content="Run the linter before pushing."))["lesson"]
        clock.advance(weeks=2, seconds=0.5)
        new = (await call(client, "memory_lesson_save", content="Pin the base image by digest.", confidence=0.46))[
            "lesson"
        ]
        clock.advance(weeks=1)
        before = (await call(client, "memory_lessons"))["lessons"]
    with sqlite3.connect(settings.db) as conn:
        conn.execute("DROP INDEX lessons_by_standing")
        conn.execute("DROP TRIGGER lessons_since_us_insert")
        conn.execute("DROP TRIGGER lessons_since_us_update")
        conn.execute("ALTER TABLE lessons DROP COLUMN since_us")
        conn.execute("DROP INDEX sessions_by_activity")
        conn.execute("DROP INDEX memories_by_content")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 17")

    async with Client(build_server(settings, clock)) as client:
        after = (await call(client, "memory_lessons"))["lessons"]
    backfilled = _since_us_of(settings.db)

    # 0.46 decayed for a week (0.437) outranks 0.5 decayed for three (0.429)
    assert [x["id"] for x in after] == [x["id"] for x in before] == [new["id"], old["id"]]
    assert after == before
    assert len(backfilled) == 2
    assert all(stored == expected for stored, expected in backfilled.values())
