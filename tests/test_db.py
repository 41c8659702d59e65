"""The database layer: migrations, atomic writes, savepoints, audit log, readers beside a writer."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_memory.db import WRITER_WAIT_MS, Database
from mcp_memory.errors import BusyError, ConflictError, StorageError
from mcp_memory.migrate import apply_migrations
from mcp_memory.migrations import MIGRATIONS
from mcp_memory.repositories.memories import SAME_CONTENT_SQL
from mcp_memory.repositories.observations import SPANS_SQL
from mcp_memory.repositories.sessions import RECENT_FIRST

SPEC_TABLES = {
    "sessions", "observations", "memories", "lessons", "outcomes", "mistake_cards", "slots", "actions",
    "action_dependencies", "relations", "audit_log",
}  # fmt: skip


def _insert_slot(name: str) -> tuple[str, tuple[str, ...]]:
    return (
        "INSERT INTO slots (id, project, name, size_limit, created_at, updated_at) VALUES (?, 'p', ?, 100, 'x', 'x')",
        (f"slot_{name}", name),
    )


async def test_new_file_gets_every_table_and_records_its_schema_version(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "nested" / "dir" / "m.db")
    try:
        async with db.read() as conn:
            tables = {r[0] for r in await conn.fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")}
            versions = await conn.fetchall("SELECT version, name FROM schema_migrations")
            mode = await conn.fetchval("PRAGMA journal_mode")
            fks = await conn.fetchval("PRAGMA foreign_keys")
        assert tables >= SPEC_TABLES
        assert [v[0] for v in versions] == [m[0] for m in MIGRATIONS]
        assert (mode, fks) == ("wal", 1)
    finally:
        await db.close()


async def test_when_sessions_happened_is_found_without_reading_their_observations(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        async with db.read() as conn:
            plan = await conn.fetchall(f"EXPLAIN QUERY PLAN {SPANS_SQL}", ('["a", "b"]',))
        searches = [row[3] for row in plan if row[3].startswith("SEARCH")]
        # a min and a max per session and table (kept and folded turns), each a seek to one end of its
        # run in the index that holds the time, not a pass over every row of the session
        assert searches == [
            "SEARCH observations USING INDEX observations_by_session_time (session_id=?)",
            "SEARCH observations USING INDEX observations_by_session_time (session_id=?)",
            "SEARCH folded_observations USING COVERING INDEX folded_observations_by_session (session_id=?)",
            "SEARCH folded_observations USING COVERING INDEX folded_observations_by_session (session_id=?)",
        ]
        assert not [row[3] for row in plan if row[3].startswith("SCAN observations")]
    finally:
        await db.close()


async def test_the_edges_of_records_going_away_are_found_without_reading_every_edge(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        async with db.read() as conn:
            plan = await conn.fetchall(
                "EXPLAIN QUERY PLAN SELECT id FROM relations WHERE source_id IN (?, ?) OR target_id IN (?, ?)",
                ("a", "b", "a", "b"),
            )
        details = [row[3] for row in plan]
        assert "SCAN relations" not in details
        assert any("relations_by_source" in d for d in details)
        assert any("relations_by_target" in d for d in details)
    finally:
        await db.close()


async def test_the_most_recent_sessions_are_read_without_sorting_every_session(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        async with db.read() as conn:
            plan = await conn.fetchall(
                f"EXPLAIN QUERY PLAN SELECT * FROM sessions WHERE project = ? AND ended_at IS NULL {RECENT_FIRST} "
                "LIMIT 5",
                ("p",),
            )
        details = [row[3] for row in plan]
        # walked in the index's order and stopped after five, not every session sorted to find them
        assert details == ["SEARCH sessions USING INDEX sessions_by_activity (project=?)"]
    finally:
        await db.close()


async def test_the_same_content_is_sought_without_reading_every_memory(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        async with db.read() as conn:
            plan = await conn.fetchall(f"EXPLAIN QUERY PLAN {SAME_CONTENT_SQL}", ("p", "x", "x", "x"))
        details = [row[3] for row in plan]
        assert details[0] == "SEARCH memories USING INDEX memories_by_content (project=? AND <expr>=? AND <expr>=?)"
    finally:
        await db.close()


async def test_migrations_are_applied_once(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        assert await apply_migrations(db) == MIGRATIONS[-1][0]
        async with db.read() as conn:
            assert await conn.fetchval("SELECT count(*) FROM schema_migrations") == len(MIGRATIONS)
    finally:
        await db.close()
    reopened = await Database.open(tmp_path / "m.db")
    await reopened.close()


async def test_an_up_to_date_file_opens_while_another_process_writes(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    await (await Database.open(path)).close()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # a long write elsewhere, such as a large import
        other.execute(*_insert_slot("theirs"))
        db = await Database.open(path, busy_timeout_ms=50)  # no migration is due: no write lock needed
        try:
            async with db.read() as conn:
                assert await conn.fetchval("SELECT count(*) FROM schema_migrations") == len(MIGRATIONS)
                assert await conn.fetchval("SELECT count(*) FROM slots") == 0  # theirs is not committed yet
        finally:
            other.execute("COMMIT")
            await db.close()
    finally:
        other.close()


async def test_a_failed_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:

        async def fail_half_way() -> None:
            async with db.transaction("test") as tx:
                await tx.execute(*_insert_slot("a"))
                tx.changed("slot", "slot_a", "create")
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            await fail_half_way()
        async with db.read() as conn:
            assert await conn.fetchval("SELECT count(*) FROM slots") == 0
            assert await conn.fetchval("SELECT count(*) FROM audit_log") == 0
    finally:
        await db.close()


async def test_nested_transaction_is_a_savepoint(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    ran: list[str] = []
    try:
        async with db.transaction("outer", actor="agent-1", project="p") as tx:
            await tx.execute(*_insert_slot("kept"))
            tx.changed("slot", "slot_kept", "create")
            tx.on_commit(lambda: ran.append("outer"))

            async def failing_inner() -> None:
                async with db.transaction("inner") as inner:
                    await inner.execute(*_insert_slot("dropped"))
                    inner.changed("slot", "slot_dropped", "create")
                    inner.on_commit(lambda: ran.append("inner"))
                    raise ValueError("inner")

            with pytest.raises(ValueError, match="inner"):
                await failing_inner()
        async with db.read() as conn:
            names = [r[0] for r in await conn.fetchall("SELECT name FROM slots")]
            audit = await conn.fetchall("SELECT actor, project, action, changes FROM audit_log")
        assert names == ["kept"]
        assert ran == ["outer"]
        assert len(audit) == 1
        assert tuple(audit[0])[:3] == ("agent-1", "p", "outer")
        assert json.loads(audit[0][3]) == [{"kind": "slot", "id": "slot_kept", "op": "create"}]
    finally:
        await db.close()


async def test_notes_of_a_rolled_back_savepoint_are_forgotten_and_a_released_one_kept(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        async with db.transaction("outer") as tx:
            tx.note("terms", {"alpha": 1})

            async def failing_inner() -> None:
                async with db.transaction("inner") as inner:
                    inner.note("terms", {"beta": 2})
                    assert inner.noted("terms", "alpha") == 1
                    raise ValueError("inner")

            with pytest.raises(ValueError, match="inner"):
                await failing_inner()
            async with db.transaction("kept") as inner:
                inner.note("terms", {"gamma": 3})
            seen = [tx.noted("terms", key) for key in ("alpha", "beta", "gamma", "delta")]
        async with db.read() as conn:
            audit = await conn.fetchall("SELECT detail FROM audit_log")
        assert seen == [1, None, 3, None]
        assert audit == []  # notes are not changes: nothing was written, so nothing is audited
    finally:
        await db.close()


async def test_driver_errors_become_domain_errors(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        async with db.transaction("first") as tx:
            await tx.execute(*_insert_slot("a"))
        with pytest.raises(ConflictError):
            async with db.transaction("dup") as tx:
                await tx.execute(*_insert_slot("a"))
        with pytest.raises(StorageError):
            async with db.read() as conn:
                await conn.fetchall("SELECT * FROM no_such_table")
    finally:
        await db.close()


async def test_reads_do_not_wait_for_a_write_in_progress(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    writing = anyio.Event()
    release = anyio.Event()
    seen: list[int] = []

    async def writer() -> None:
        async with db.transaction("slow") as tx:
            await tx.execute(*_insert_slot("new"))
            await tx.flush()  # the write lock is taken and the row written, not yet committed
            writing.set()
            await release.wait()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            await writing.wait()
            with anyio.fail_after(5):
                async with db.read() as conn:
                    seen.append(await conn.fetchval("SELECT count(*) FROM slots"))
            release.set()
        async with db.read() as conn:
            seen.append(await conn.fetchval("SELECT count(*) FROM slots"))
        assert seen == [0, 1], "the reader saw the last committed state, then the commit"
    finally:
        await db.close()


async def test_cancelled_transaction_rolls_back(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        with anyio.move_on_after(0.2):
            async with db.transaction("cancelled") as tx:
                await tx.execute(*_insert_slot("half"))
                await anyio.sleep_forever()
        async with db.transaction("after") as tx:  # the writer is usable again
            await tx.execute(*_insert_slot("whole"))
        async with db.read() as conn:
            assert [r[0] for r in await conn.fetchall("SELECT name FROM slots")] == ["whole"]
    finally:
        await db.close()


def _count_trips(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the functions sent to the writer connection's thread from now on (one per round trip)."""
    trips: list[str] = []
    send = db._writer._execute

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        trips.append(getattr(fn, "__name__", repr(fn)))
        return await send(fn, *args, **kwargs)

    monkeypatch.setattr(db._writer, "_execute", counted)
    return trips


async def test_begin_rides_with_the_first_statement_and_commit_with_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        trips = _count_trips(db, monkeypatch)
        async with db.transaction("two trips") as tx:
            head = tx.fetch_later("SELECT count(*) FROM slots")  # rides with the next trip
            await tx.execute(*_insert_slot("a"))
            assert [tuple(r) for r in await tx.fetchall("SELECT name FROM slots")] == [("a",)]
            assert [tuple(r) for r in await tx.rows_of(head)] == [(0,)], "queued before the insert ran"
            tx.changed("slot", "slot_a", "create")
        assert len(trips) == 2, trips
        trips.clear()
        async with db.transaction("nothing"):
            pass
        db.at_every_begin(lambda tx: tx.fetch_later("SELECT 1"))  # as the search index does
        async with db.transaction("nothing but a read queued at begin"):
            pass
        assert trips == [], "an empty transaction makes no trip"
        async with db.read() as conn:
            assert await conn.fetchval("SELECT count(*) FROM slots") == 1
            assert [r[0] for r in await conn.fetchall("SELECT action FROM audit_log")] == ["two trips"]
    finally:
        await db.close()


async def test_a_transaction_cancelled_during_its_first_trip_leaves_the_writer_usable(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db")
    try:
        with anyio.CancelScope() as scope:
            async with db.transaction("cancelled") as tx:
                await tx.execute(*_insert_slot("half"))
                scope.cancel()
                # handed to the connection's thread, then cancelled before it answers: BEGIN and the
                # insert still run there after the rollback was decided on
                await tx.fetchall("SELECT 1")
        assert scope.cancelled_caught
        async with db.transaction("after") as tx:
            await tx.execute(*_insert_slot("whole"))
        async with db.read() as conn:
            assert [r[0] for r in await conn.fetchall("SELECT name FROM slots")] == ["whole"]
    finally:
        await db.close()


async def test_a_read_cancelled_before_its_begin_answers_leaves_the_reader_usable(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "m.db", readers=1)
    count = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) SELECT count(*) FROM n"
    try:
        with anyio.move_on_after(0.05):
            async with db.read(snapshot=False) as conn:
                await conn.fetchval(count)  # given up on: the reader is free while its thread still counts
        with anyio.move_on_after(0.05) as scope:
            async with db.read() as conn:  # its BEGIN waits behind the count, and is given up on there
                await conn.fetchval("SELECT 1")
        assert scope.cancelled_caught
        async with db.read() as conn:
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await db.close()


async def test_a_write_lock_held_elsewhere_past_the_timeout_is_a_busy_error(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    db = await Database.open(path, busy_timeout_ms=100)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")

        async def blocked() -> None:
            async with db.transaction("blocked") as tx:
                await tx.execute(*_insert_slot("blocked"))
                await tx.fetchall("SELECT 1")

        with pytest.raises(BusyError):
            await blocked()
        other.execute("ROLLBACK")
        async with db.transaction("free") as tx:
            await tx.execute(*_insert_slot("free"))
        async with db.read() as conn:
            assert [r[0] for r in await conn.fetchall("SELECT name FROM slots")] == ["free"]
    finally:
        other.close()
        await db.close()


async def test_a_write_waits_out_another_process_in_slices_and_can_be_given_up_on(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    db = await Database.open(path, busy_timeout_ms=30_000)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        assert [tuple(r) for r in await db._writer.execute_fetchall("PRAGMA busy_timeout")] == [(WRITER_WAIT_MS,)]
        other.execute("BEGIN IMMEDIATE")

        async def write(name: str) -> None:
            async with db.transaction(name) as tx:
                await tx.execute(*_insert_slot(name))
                await tx.fetchall("SELECT 1")

        # Given up on while another process holds the lock: the wait inside SQLite is one slice,
        # not the 30 s timeout, so the call ends about when asked to and writes nothing.
        with anyio.move_on_after(0.1) as scope:
            await write("given_up")
        started = anyio.current_time()
        async with db.read() as conn:
            assert await conn.fetchall("SELECT name FROM slots") == []
        assert scope.cancelled_caught
        # Held for several slices, then let go: the write retries until it gets the lock.
        async with anyio.create_task_group() as tg:
            tg.start_soon(write, "waited")
            await anyio.sleep(3 * WRITER_WAIT_MS / 1000)
            await anyio.to_thread.run_sync(other.execute, "ROLLBACK")
        assert anyio.current_time() - started < 10  # far under the timeout: retried, not timed out
        async with db.read() as conn:
            assert [r[0] for r in await conn.fetchall("SELECT name FROM slots")] == ["waited"]
    finally:
        other.close()
        await db.close()


async def test_refuses_a_database_from_a_newer_version(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    db = await Database.open(path)
    await db.close()
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO schema_migrations VALUES (999, 'from the future', 'x')")
    with pytest.raises(StorageError, match="newer"):
        await Database.open(path)
