"""SQLite access: connections, pragmas, the one writer path, reader snapshots, error translation.

One aiosqlite connection is one thread and one transaction state, so all writes go through a
single writer connection guarded by a lock and opened with `BEGIN IMMEDIATE` (the write lock is
taken up front, so a transaction never fails half-way for another process's lock). Nested
transactions become savepoints. Reads use separate connections, so in WAL mode they see the last
committed state and never wait for a write in progress. sqlite3 errors are translated to the
domain error tree here and nowhere else.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import anyio

from mcp_memory.errors import BusyError, ConflictError, StorageError

logger = logging.getLogger(__name__)

Row = sqlite3.Row
Params = Sequence[Any] | dict[str, Any]

_BEGIN_RETRY_PAUSE_S = 0.05
T = TypeVar("T")


def _translate(exc: sqlite3.Error) -> Exception:
    """Map a driver error to the domain error the services understand."""
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError):
        return ConflictError(f"the write conflicts with stored data ({text})")
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return BusyError("the database stayed locked by another writer; try again")
    logger.error("SQLite error: %s", text)
    return StorageError(f"storage error: {text}")


class Conn:
    """A connection as the repositories see it: statements in, rows out, domain errors only."""

    def __init__(self, raw: aiosqlite.Connection) -> None:
        self._raw = raw

    # Each await is a round trip to the connection's thread, so every method makes exactly one.

    async def execute(self, sql: str, params: Params = ()) -> None:
        """Run one statement."""
        try:
            await self._raw.execute_fetchall(sql, params)
        except sqlite3.Error as exc:
            raise _translate(exc) from exc

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Run an INSERT; returns the new row's rowid."""
        try:
            row = await self._raw.execute_insert(sql, params)
        except sqlite3.Error as exc:
            raise _translate(exc) from exc
        return int(row[0]) if row else 0

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        """Run one statement for each parameter set."""
        try:
            await self._raw.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise _translate(exc) from exc

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        """All rows of a query."""
        try:
            return list(await self._raw.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise _translate(exc) from exc

    async def pages(self, sql: str, params: Params = (), size: int = 1000) -> AsyncIterator[list[Row]]:
        """The rows of a query `size` at a time, so a large result never sits in memory whole."""
        try:
            cursor = await self._raw.execute(sql, params)
            try:
                while rows := await cursor.fetchmany(size):
                    yield list(rows)
            finally:
                with anyio.CancelScope(shield=True):
                    await cursor.close()
        except sqlite3.Error as exc:
            raise _translate(exc) from exc

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of a query, or None."""
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, params: Params = ()) -> Any:
        """The first column of the first row, or None."""
        row = await self.fetchone(sql, params)
        return None if row is None else row[0]


# How a queued statement runs: no result, once per parameter set, its rows, its new rowid.
_EXEC, _MANY, _ROWS, _ROWID = range(4)
_Op = tuple[str, Any, int, "Later | None"]


class _BeginFailed(Exception):
    """BEGIN IMMEDIATE failed on the connection's thread (nothing of the batch ran)."""

    def __init__(self, error: sqlite3.OperationalError) -> None:
        super().__init__(str(error))
        self.error = error


def _run_batch(conn: sqlite3.Connection, ops: list[_Op], begin: bool) -> list[Any]:
    """Runs on the connection's thread: BEGIN IMMEDIATE when asked, then each statement in order;
    returns the rows (or rowid) of each statement that wants them."""
    if begin:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _BeginFailed(exc) from exc
    out: list[Any] = []
    for sql, args, mode, _ in ops:
        if mode == _MANY:
            conn.executemany(sql, args)
            continue
        cursor = conn.execute(sql, args)
        if mode == _ROWS:
            out.append(cursor.fetchall())
        elif mode == _ROWID:
            out.append(cursor.lastrowid)
    return out


def _rollback_open(conn: sqlite3.Connection) -> None:
    """Runs on the connection's thread: roll back the open transaction, if there is one."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


async def _begin_with_retry(send: Callable[[], Awaitable[T]], busy_timeout_s: float) -> T:
    """Run `send`, whose trip starts with BEGIN IMMEDIATE, retrying while that BEGIN reports busy.

    BEGIN IMMEDIATE waits busy_timeout for the lock, but SQLite can also report busy at once
    (e.g. while another connection recovers the WAL), so a busy BEGIN is retried; retrying is
    safe (nothing ran yet) and stops once busy_timeout has passed in all.
    """
    deadline = time.monotonic() + busy_timeout_s
    attempt = 0
    while True:
        try:
            return await send()
        except _BeginFailed as failed:
            attempt += 1
            text = str(failed.error)
            pause = min(_BEGIN_RETRY_PAUSE_S * attempt, 0.5)
            if not ("locked" in text or "busy" in text) or time.monotonic() + pause >= deadline:
                raise _translate(failed.error) from failed.error
            logger.info("database busy, retrying BEGIN IMMEDIATE (%d)", attempt)
            await anyio.sleep(pause)


class Later:
    """A query queued in a transaction: its rows arrive with the transaction's next round trip."""

    __slots__ = ("params", "rows", "sql")

    def __init__(self, sql: str, params: Params) -> None:
        self.sql = sql
        self.params = params
        self.rows: list[Row] | None = None


@dataclass(eq=False)
class _Frame:
    """What one (sub)transaction did: changed records and callbacks to run after commit."""

    changes: list[tuple[str, str, str]] = field(default_factory=list)
    on_commit: list[Callable[[], None]] = field(default_factory=list)
    notes: dict[str, dict[Any, Any]] = field(default_factory=dict)


class Tx(Conn):
    """The writer connection inside a transaction: also records changes for the audit log.

    Statements that return nothing are queued and sent with the next statement that does (or at
    commit), so a tool call's writes cost one round trip to the connection's thread instead of
    one each; BEGIN IMMEDIATE rides with the first trip and COMMIT with the last. Any error still
    fails the whole transaction, which then rolls back.
    """

    def __init__(
        self, raw: aiosqlite.Connection, action: str, actor: str | None, project: str | None, busy_timeout_s: float
    ) -> None:
        super().__init__(raw)
        self.action = action
        self.actor = actor
        self.project = project
        self._frames: list[_Frame] = [_Frame()]
        self.extra: dict[str, Any] = {}
        self.audit_seq: int | None = None  # the audit-log row of this transaction, once written
        self._pending: list[_Op] = []
        self._begun = False
        self._busy_timeout_s = busy_timeout_s

    async def execute(self, sql: str, params: Params = ()) -> None:
        """Queue a statement; it runs before the next one that returns something."""
        self._pending.append((sql, params, _EXEC, None))

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        """Queue a statement for each parameter set."""
        self._pending.append((sql, list(rows), _MANY, None))

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        """Run the queued statements, then this query; returns its rows."""
        self._pending.append((sql, params, _ROWS, None))
        return list((await self._send())[-1])

    def fetch_later(self, sql: str, params: Params = ()) -> Later:
        """Queue a query without a trip of its own; `rows_of` gives its rows."""
        later = Later(sql, params)
        self._pending.append((sql, params, _ROWS, later))
        return later

    async def rows_of(self, later: Later) -> list[Row]:
        """The rows of a query queued by `fetch_later` (sending it now if it has not gone yet)."""
        if later.rows is None:
            await self.flush()
        if later.rows is None:  # its savepoint rolled back before it was sent
            return await self.fetchall(later.sql, later.params)
        return later.rows

    async def pages(self, sql: str, params: Params = (), size: int = 1000) -> AsyncIterator[list[Row]]:
        """Run the queued statements, then page through this query's rows."""
        await self.flush()
        async for page in super().pages(sql, params, size):
            yield page

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Run the queued statements, then this INSERT; returns its rowid."""
        self._pending.append((sql, params, _ROWID, None))
        return int((await self._send())[-1] or 0)

    async def flush(self) -> None:
        """Run the queued statements now (and open the transaction, if no trip has yet)."""
        if self._pending or not self._begun:
            await self._send()

    async def commit(self, audit: tuple[str, Params] | None) -> None:
        """Send the queued statements, the audit row and COMMIT in one trip.

        A transaction that never sent anything and queued only reads (such as those queued at
        begin) has nothing to commit and makes no trip.
        """
        if not self._begun and audit is None and all(later is not None for *_, later in self._pending):
            self._pending.clear()
            return
        if audit is not None:
            self._pending.append((*audit, _ROWID, None))
        self._pending.append(("COMMIT", (), _EXEC, None))
        results = await self._send()
        if audit is not None:
            self.audit_seq = int(results[-1])

    def discard(self) -> None:
        """Forget the queued statements (their transaction or savepoint is being rolled back)."""
        self._pending.clear()

    async def _send(self) -> list[Any]:
        ops, self._pending = self._pending, []

        async def trip() -> list[Any]:
            # aiosqlite has no public way to run several statements in one trip to its thread.
            result: list[Any] = await self._raw._execute(  # type: ignore[no-untyped-call]
                _run_batch, self._raw._conn, ops, not self._begun
            )
            return result

        try:
            results = await (trip() if self._begun else _begin_with_retry(trip, self._busy_timeout_s))
        except sqlite3.Error as exc:
            self._begun = True  # the BEGIN ran (a failed one raises _BeginFailed, translated above)
            raise _translate(exc) from exc
        self._begun = True
        waiting = [later for _, _, mode, later in ops if mode in (_ROWS, _ROWID)]
        for later, rows in zip(waiting, results, strict=True):
            if later is not None:
                later.rows = list(rows)
        return results

    def changed(self, kind: str, record_id: str, op: str) -> None:
        """Note that a record was created, updated or deleted (kept for the audit log)."""
        self._frames[-1].changes.append((kind, record_id, op))

    def on_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the outermost transaction has committed (never on rollback)."""
        self._frames[-1].on_commit.append(callback)

    def note(self, book: str, entries: dict[Any, Any]) -> None:
        """Remember facts about rows written in this transaction (forgotten if their savepoint rolls back)."""
        if entries:
            self._frames[-1].notes.setdefault(book, {}).update(entries)

    def noted(self, book: str, key: Any) -> Any:
        """What `note` remembered under `key` in this transaction, or None."""
        for frame in reversed(self._frames):
            value = frame.notes.get(book, {}).get(key)
            if value is not None:
                return value
        return None

    @property
    def changes(self) -> list[tuple[str, str, str]]:
        """Every change recorded so far in this transaction, in order."""
        return [c for frame in self._frames for c in frame.changes]


_current_tx: contextvars.ContextVar[Tx | None] = contextvars.ContextVar("mcp_memory_tx", default=None)


class Database:
    """The SQLite file: one writer connection, a small pool of readers, migrations applied at open."""

    def __init__(
        self,
        path: Path,
        writer: aiosqlite.Connection,
        readers: list[aiosqlite.Connection],
        *,
        busy_timeout_ms: int = 10_000,
    ) -> None:
        self.path = path
        self._busy_timeout_s = busy_timeout_ms / 1000
        self._writer = writer
        self._write_lock = anyio.Lock()
        self._readers = readers
        self._free_readers = list(readers)
        self._reader_available = anyio.Semaphore(len(readers))
        self._savepoint_seq = 0
        self._commit_listeners: list[Callable[[Tx], None]] = []
        self._begin_listeners: list[Callable[[Tx], None]] = []

    def at_every_begin(self, listener: Callable[[Tx], None]) -> None:
        """Call `listener(tx)` as each transaction of this process starts, before its first trip
        (a listener may queue reads with `tx.fetch_later`; they ride with that trip)."""
        self._begin_listeners.append(listener)

    def after_every_commit(self, listener: Callable[[Tx], None]) -> None:
        """Call `listener(tx)` after each committed transaction of this process."""
        self._commit_listeners.append(listener)

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        busy_timeout_ms: int = 10_000,
        synchronous: str = "full",
        readers: int = 2,
    ) -> Database:
        """Open (creating if needed) the database file, configure it and apply pending migrations."""
        from mcp_memory.migrations import apply_migrations

        try:
            await anyio.Path(path.parent).mkdir(parents=True, exist_ok=True)
            writer = await _connect(path, busy_timeout_ms, synchronous)
        except (OSError, sqlite3.Error) as exc:
            raise _cannot_open(path, exc) from exc
        db = cls(path, writer, [], busy_timeout_ms=busy_timeout_ms)
        try:
            mode = await (await writer.execute("PRAGMA journal_mode=WAL")).fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise StorageError(f"could not switch {path} to WAL mode (got {mode and mode[0]})")
            for _ in range(readers):
                db._readers.append(await _connect(path, busy_timeout_ms, synchronous))
            db._free_readers = list(db._readers)
            db._reader_available = anyio.Semaphore(readers)
            # after the readers: an up-to-date file is recognised by a read, without the write lock
            await apply_migrations(db)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                for conn in (*db._readers, writer):
                    await conn.close()
            if isinstance(exc, sqlite3.Error):
                raise _cannot_open(path, exc) from exc
            raise
        return db

    async def close(self) -> None:
        """Optimise query plans, checkpoint and close every connection."""
        with anyio.CancelScope(shield=True):
            async with self._write_lock:
                for reader in self._readers:
                    await reader.close()
                try:
                    await self._writer.execute("PRAGMA optimize")
                    await self._writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:  # closing must not fail because a checkpoint could not run
                    logger.warning("checkpoint at close failed: %s", exc)
                await self._writer.close()

    @asynccontextmanager
    async def transaction(
        self, action: str, *, actor: str | None = None, project: str | None = None
    ) -> AsyncIterator[Tx]:
        """One atomic write: `BEGIN IMMEDIATE` … `COMMIT`, or a savepoint when already inside one.

        Every recorded change lands in the audit log in the same transaction. After commit the
        registered callbacks run (the search index is updated there, so it never sees a rollback).
        """
        outer = _current_tx.get()
        if outer is not None:
            async with self._savepoint(outer) as tx:
                yield tx
            return
        async with self._write_lock:
            tx = Tx(self._writer, action, actor, project, self._busy_timeout_s)
            token = _current_tx.set(tx)
            try:
                for listener in self._begin_listeners:
                    listener(tx)
                yield tx
                with anyio.CancelScope(shield=True):  # once COMMIT is sent, know whether it landed
                    await tx.commit(_audit_row(tx))
            except BaseException:
                tx.discard()
                with anyio.CancelScope(shield=True):
                    await self._rollback()
                raise
            finally:
                _current_tx.reset(token)
            # Still under the lock: the next writer must see the index as this commit left it.
            _run_callbacks(tx, self._commit_listeners)

    @asynccontextmanager
    async def _savepoint(self, tx: Tx) -> AsyncIterator[Tx]:
        self._savepoint_seq += 1
        name = f"sp_{self._savepoint_seq}"
        await tx.flush()  # what was queued before the savepoint belongs to the outer transaction
        await self._exec_raw(f"SAVEPOINT {name}")
        tx._frames.append(_Frame())
        try:
            yield tx
            await tx.flush()
        except BaseException:
            tx.discard()
            tx._frames.pop()
            with anyio.CancelScope(shield=True):
                await self._exec_raw(f"ROLLBACK TO {name}")
                await self._exec_raw(f"RELEASE {name}")
            raise
        frame = tx._frames.pop()
        tx._frames[-1].changes.extend(frame.changes)
        tx._frames[-1].on_commit.extend(frame.on_commit)
        for book, entries in frame.notes.items():
            tx.note(book, entries)
        await self._exec_raw(f"RELEASE {name}")

    @asynccontextmanager
    async def read(self, snapshot: bool = True) -> AsyncIterator[Conn]:
        """A reader connection (or the open transaction, inside one).

        With `snapshot` every statement sees the same committed state (BEGIN … COMMIT); without
        it each statement sees the latest, which saves two round trips when that is enough.
        """
        outer = _current_tx.get()
        if outer is not None:
            yield outer
            return
        async with self._reader_available:
            raw = self._free_readers.pop()
            try:
                if not snapshot:
                    yield Conn(raw)
                    return
                await raw.execute("BEGIN")
                try:
                    yield Conn(raw)
                finally:
                    with anyio.CancelScope(shield=True):
                        await raw.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
            finally:
                self._free_readers.append(raw)

    async def _begin(self) -> None:
        async def trip() -> None:
            await self._writer._execute(_run_batch, self._writer._conn, [], True)  # type: ignore[no-untyped-call]

        await _begin_with_retry(trip, self._busy_timeout_s)

    async def _rollback(self) -> None:
        try:
            # On the connection's thread, after any trip still running there: a cancelled trip
            # may yet open the transaction (its BEGIN rides with it) after we stopped waiting.
            await self._writer._execute(_rollback_open, self._writer._conn)  # type: ignore[no-untyped-call]
        except sqlite3.Error as exc:
            logger.error("rollback failed: %s", exc)

    async def _exec_raw(self, sql: str) -> None:
        try:
            await self._writer.execute(sql)
        except sqlite3.Error as exc:
            raise _translate(exc) from exc

    @asynccontextmanager
    async def migration_step(self) -> AsyncIterator[Conn]:
        """A raw `BEGIN IMMEDIATE` transaction on the writer, for migrations only (no audit)."""
        async with self._write_lock:
            await self._begin()
            try:
                yield Conn(self._writer)
                await self._exec_raw("COMMIT")
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._rollback()
                raise


def _audit_row(tx: Tx) -> tuple[str, Params] | None:
    """The audit-log INSERT of a transaction's recorded changes (None when it changed nothing)."""
    changes = tx.changes
    if not changes:
        return None
    detail = json.dumps(tx.extra, sort_keys=True, default=str) if tx.extra else None
    return (
        "INSERT INTO audit_log (at, project, actor, action, changes, detail) "
        "VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?, ?, ?, ?, ?)",
        (tx.project, tx.actor, tx.action, json.dumps([{"kind": k, "id": i, "op": o} for k, i, o in changes]), detail),
    )


def _run_callbacks(tx: Tx, listeners: list[Callable[[Tx], None]]) -> None:
    callbacks: list[Callable[[], None]] = [c for frame in tx._frames for c in frame.on_commit]
    callbacks += [functools.partial(listener, tx) for listener in listeners]
    for callback in callbacks:
        try:
            callback()
        except Exception:  # the data is committed; a failed cache update must not hide that
            logger.exception("post-commit callback failed after %s", tx.action)


def _cannot_open(path: Path, exc: OSError | sqlite3.Error) -> StorageError:
    """The one-line error of a database file that cannot be used at all."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StorageError(f"cannot open database {path}: {reason}")


async def _connect(path: Path, busy_timeout_ms: int, synchronous: str) -> aiosqlite.Connection:
    # isolation_level=None: the driver never opens transactions behind our back; we say BEGIN.
    pending = aiosqlite.connect(path, isolation_level=None)
    try:
        raw = await pending
    except BaseException:
        # aiosqlite stops its thread after a failed open without waiting for it; wait here, or the
        # thread outlives the event loop and dies with a traceback at exit.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(pending._thread.join, 5.0)
        raise
    raw.row_factory = sqlite3.Row
    try:
        for pragma in (
            f"PRAGMA busy_timeout={int(busy_timeout_ms)}",
            "PRAGMA foreign_keys=ON",
            f"PRAGMA synchronous={'FULL' if synchronous == 'full' else 'NORMAL'}",
            "PRAGMA temp_store=MEMORY",
        ):
            await raw.execute(pragma)
    except BaseException:
        # An open connection's thread is not a daemon: left open, it keeps the process alive.
        with anyio.CancelScope(shield=True):
            await raw.close()
        raise
    return raw
