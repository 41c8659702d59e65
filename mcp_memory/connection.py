"""Statements on one SQLite connection (Conn), and the writer's transaction (Tx), whose writes
travel to the connection's thread in batches: BEGIN IMMEDIATE rides with the first trip and COMMIT
with the last, so a tool call's writes cost a round trip or two, not one each. sqlite3 errors
become the domain's errors here (translate_error); db.py owns the connections and the lock.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiosqlite
import anyio

from mcp_memory.errors import BusyError, ConflictError, StorageError

logger = logging.getLogger(__name__)

Row = sqlite3.Row
Params = Sequence[Any] | dict[str, Any]

_BEGIN_RETRY_PAUSE_S = 0.01
T = TypeVar("T")


def translate_error(exc: sqlite3.Error) -> Exception:
    """Map a driver error to the domain error the services understand."""
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError):
        return ConflictError(f"the write conflicts with stored data ({text})")
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return BusyError("the database stayed locked by another writer; try again")
    logger.error("SQLite error: %s", text)
    code = getattr(exc, "sqlite_errorcode", None)  # absent on errors the driver raises itself
    advice = _ADVICE.get(code & 0xFF) if isinstance(code, int) else None
    return StorageError(f"storage error: {text}" + (f" ({advice})" if advice else ""))


# What to do about the storage errors a user can fix, by SQLite's primary result code. A failed
# call is one rolled-back transaction, so each can say that nothing was changed.
_ADVICE = {
    sqlite3.SQLITE_FULL: "the disk holding the database or SQLite's temporary files has no room left; "
    "this call changed nothing: free some space and try again",
    sqlite3.SQLITE_IOERR: "the system refused to read or write the database's files (a full disk, a file size "
    "limit, a failing device or a removed folder); this call changed nothing",
    sqlite3.SQLITE_READONLY: "the database file or its folder cannot be written to; this call changed nothing: "
    "check their permissions",
}


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
            raise translate_error(exc) from exc

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Run an INSERT; returns the new row's rowid."""
        try:
            row = await self._raw.execute_insert(sql, params)
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc
        return int(row[0]) if row else 0

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        """Run one statement for each parameter set."""
        try:
            await self._raw.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        """All rows of a query."""
        try:
            return list(await self._raw.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc

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
            raise translate_error(exc) from exc

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


def run_batch(conn: sqlite3.Connection, ops: list[_Op], begin: bool) -> list[Any]:
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


def rollback_open(conn: sqlite3.Connection) -> None:
    """Runs on the connection's thread: roll back the open transaction, if there is one."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


async def begin_with_retry(send: Callable[[], Awaitable[T]], busy_timeout_s: float) -> T:
    """Run `send`, whose trip starts with BEGIN IMMEDIATE, retrying while that BEGIN reports busy.

    The writer's SQLite waits only a slice of busy_timeout for the lock (db.WRITER_WAIT_MS): a wait
    inside SQLite cannot be cancelled, and a server asked to stop would sit in it for the whole
    timeout. So a busy BEGIN (or one SQLite reports busy at once, as while another connection
    recovers the WAL) is retried here; retrying is safe (nothing ran yet) and stops once
    busy_timeout has passed in all.
    """
    deadline = time.monotonic() + busy_timeout_s
    attempt = 0
    while True:
        try:
            return await send()
        except _BeginFailed as failed:
            attempt += 1
            text = str(failed.error)
            pause = min(_BEGIN_RETRY_PAUSE_S * attempt, 0.1)  # SQLite has just waited its slice
            if not ("locked" in text or "busy" in text) or time.monotonic() + pause >= deadline:
                raise translate_error(failed.error) from failed.error
            logger.log(
                logging.INFO if attempt == 1 else logging.DEBUG, "database busy, retrying BEGIN IMMEDIATE (%d)", attempt
            )
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
                run_batch, self._raw._conn, ops, not self._begun
            )
            return result

        try:
            results = await (trip() if self._begun else begin_with_retry(trip, self._busy_timeout_s))
        except sqlite3.Error as exc:
            self._begun = True  # the BEGIN ran (a failed one raises _BeginFailed, translated above)
            raise translate_error(exc) from exc
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

    def push_frame(self) -> None:
        """A savepoint begins: what follows is recorded apart until it is released or rolled back."""
        self._frames.append(_Frame())

    def pop_frame(self, keep: bool) -> None:
        """A savepoint ends: released (`keep`), its records join the enclosing frame; else they go."""
        frame = self._frames.pop()
        if keep:
            self._frames[-1].changes.extend(frame.changes)
            self._frames[-1].on_commit.extend(frame.on_commit)
            for book, entries in frame.notes.items():
                self.note(book, entries)

    def commit_callbacks(self) -> list[Callable[[], None]]:
        """What to run once the transaction has committed, in the order it was registered."""
        return [c for frame in self._frames for c in frame.on_commit]

    def audit_row(self) -> tuple[str, Params] | None:
        """The audit-log INSERT of the recorded changes (None when the transaction changed nothing)."""
        changes = self.changes
        if not changes:
            return None
        detail = json.dumps(self.extra, sort_keys=True, default=str) if self.extra else None
        entries = json.dumps([{"kind": k, "id": i, "op": o} for k, i, o in changes])
        return (
            "INSERT INTO audit_log (at, project, actor, action, changes, detail) "
            "VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?, ?, ?, ?, ?)",
            (self.project, self.actor, self.action, entries, detail),
        )
