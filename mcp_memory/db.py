"""SQLite access: the database file, its connections and pragmas, the one writer path, reader snapshots.

One aiosqlite connection is one thread and one transaction state, so all writes go through a
single writer connection guarded by a lock and opened with `BEGIN IMMEDIATE` (the write lock is
taken up front, so a transaction never fails half-way for another process's lock). Nested
transactions become savepoints. Reads use separate connections, so in WAL mode they see the last
committed state and never wait for a write in progress. sqlite3 errors are translated to the
domain error tree here and in connection.py (which runs the statements), nowhere else.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import math
import os
import sqlite3
import unicodedata
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from mcp_memory.connection import (
    Conn,
    Later,
    Params,
    Row,
    Tx,
    begin_with_retry,
    rollback_open,
    run_batch,
    translate_error,
)
from mcp_memory.errors import StorageError

__all__ = ["Conn", "Database", "Later", "Params", "Row", "Tx"]

logger = logging.getLogger(__name__)

NESTED_ACTIONS = "nested_actions"
"""The audit row's detail key listing the actions of transactions run inside it (a forget in an import)."""
WRITER_WAIT_MS = 250
"""How long the writer's SQLite waits for another process's write lock before begin_with_retry
tries again (until busy_timeout has passed in all): a wait inside SQLite cannot be cancelled, so
a server stopping, or a call cancelled, waits at most this long for it rather than the whole
busy_timeout."""

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
        self._files: dict[Path, tuple[int, int]] = {}
        """The database file and its write-ahead log as opened: a write checks they are still there."""
        self._begin_listeners: list[Callable[[Tx], None]] = []

    def _check_files(self) -> None:
        """Refuse a write when the file (or its log) was deleted or replaced since it was opened: the
        write would land in a file no path leads to any more, and vanish when the server stops."""
        for file, opened in self._files.items():
            if _identity(file) != opened:
                raise StorageError(
                    f"{file} was deleted or replaced while the server had it open; nothing was written. "
                    "Restart the server to open the database at that path again"
                )

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
        from mcp_memory.migrate import apply_migrations

        try:
            await anyio.Path(path.parent).mkdir(parents=True, exist_ok=True)
            writer = await _connect(path, busy_timeout_ms, synchronous)
        except (OSError, sqlite3.Error) as exc:
            raise _cannot_open(path, exc) from exc
        db = cls(path, writer, [], busy_timeout_ms=busy_timeout_ms)
        try:
            await _refuse_foreign(writer, path)  # before WAL mode: that alone would change the file
            mode = await (await writer.execute("PRAGMA journal_mode=WAL")).fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise StorageError(f"could not switch {path} to WAL mode (got {mode and mode[0]})")
            for _ in range(readers):
                reader = await _connect(path, busy_timeout_ms, synchronous)
                db._readers.append(reader)
                # A reader never writes, so a read transaction that cannot commit may simply roll back.
                await reader.execute("PRAGMA query_only=ON")
            db._free_readers = list(db._readers)
            db._reader_available = anyio.Semaphore(readers)
            # after the readers: an up-to-date file is recognised by a read, without the write lock
            await apply_migrations(db)
            # From here every write begins through begin_with_retry, which owns the whole timeout.
            await writer.execute(f"PRAGMA busy_timeout={min(busy_timeout_ms, WRITER_WAIT_MS)}")
            db._files = {f: i for f in (path, _wal(path)) if (i := _identity(f)) is not None}
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
            if action != outer.action:  # said in the audit row: a forget inside an import is a forget too
                nested = outer.extra.setdefault(NESTED_ACTIONS, [])
                if action not in nested:
                    nested.append(action)
            async with self._savepoint(outer) as tx:
                yield tx
            return
        async with self._write_lock:
            self._check_files()
            tx = Tx(self._writer, action, actor, project, self._busy_timeout_s)
            token = _current_tx.set(tx)
            try:
                for listener in self._begin_listeners:
                    listener(tx)
                yield tx
                with anyio.CancelScope(shield=True):  # once COMMIT is sent, know whether it landed
                    await tx.commit(tx.audit_row())
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
        tx.push_frame()
        try:
            yield tx
            await tx.flush()
        except BaseException:
            tx.discard()
            tx.pop_frame(keep=False)
            with anyio.CancelScope(shield=True):
                await self._exec_raw(f"ROLLBACK TO {name}")
                await self._exec_raw(f"RELEASE {name}")
            raise
        tx.pop_frame(keep=True)
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
                # Shielded: a BEGIN handed to the connection's thread runs there even if we stop
                # waiting, and a reader returned inside a transaction fails every later read.
                with anyio.CancelScope(shield=True):
                    await raw.execute("BEGIN")
                try:
                    yield Conn(raw)
                finally:
                    with anyio.CancelScope(shield=True):
                        await _end_read(raw)
            except sqlite3.Error as exc:
                raise translate_error(exc) from exc
            finally:
                self._free_readers.append(raw)

    async def _begin(self) -> None:
        async def trip() -> None:
            await self._writer._execute(run_batch, self._writer._conn, [], True)  # type: ignore[no-untyped-call]

        await begin_with_retry(trip, self._busy_timeout_s)

    async def _rollback(self) -> None:
        try:
            # On the connection's thread, after any trip still running there: a cancelled trip
            # may yet open the transaction (its BEGIN rides with it) after we stopped waiting.
            await self._writer._execute(rollback_open, self._writer._conn)  # type: ignore[no-untyped-call]
        except sqlite3.Error as exc:
            logger.error("rollback failed: %s", exc)

    async def _exec_raw(self, sql: str) -> None:
        try:
            await self._writer.execute(sql)
        except sqlite3.Error as exc:
            raise translate_error(exc) from exc

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


def _run_callbacks(tx: Tx, listeners: list[Callable[[Tx], None]]) -> None:
    callbacks = tx.commit_callbacks()
    callbacks += [functools.partial(listener, tx) for listener in listeners]
    for callback in callbacks:
        try:
            callback()
        except Exception:  # the data is committed; a failed cache update must not hide that
            logger.exception("post-commit callback failed after %s", tx.action)


async def _refuse_foreign(conn: aiosqlite.Connection, path: Path) -> None:
    """Refuse a file that holds another program's tables: migrating it would change that program's data."""
    rows = await conn.execute_fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    )
    names = [str(row[0]) for row in rows]
    if names and "schema_migrations" not in names:
        shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
        raise StorageError(
            f"{path} is another program's SQLite database (tables: {shown}); mcp-memory leaves it alone: "
            "give --db a new file or one mcp-memory made"
        )


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _identity(file: Path) -> tuple[int, int] | None:
    """Which file `file` names now (device and inode), or None when there is none."""
    try:
        found = os.stat(file)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _cannot_open(path: Path, exc: OSError | sqlite3.Error) -> StorageError:
    """The one-line error of a database file that cannot be used at all."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if isinstance(exc, FileExistsError):  # mkdir meeting a file where a folder of the path should be
        reason = f"{exc.filename or path.parent} is a file, not a folder"
    return StorageError(f"cannot open database {path}: {reason}")


MAX_VARIABLES = 32_766
"""Parameters one statement may bind: stock SQLite's limit (the SQLite of python.org's builds),
which some builds raise (Debian's to 250,000). Every connection is held to it, so a statement
binding one parameter per record fails in the tests here as it would on a user's machine."""


class _PortableConnection(sqlite3.Connection):
    """A connection that binds no more parameters per statement than stock SQLite allows, and has
    `pow` (lessons decay by it in SQL) even where SQLite was built without its math functions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, MAX_VARIABLES)
        try:
            self.execute("SELECT pow(2, 2)")
        except sqlite3.OperationalError:  # no such function: a build without SQLITE_ENABLE_MATH_FUNCTIONS
            self.create_function("pow", 2, math.pow, deterministic=True)


async def _connect(path: Path, busy_timeout_ms: int, synchronous: str) -> aiosqlite.Connection:
    # isolation_level=None: the driver never opens transactions behind our back; we say BEGIN.
    pending = aiosqlite.connect(path, isolation_level=None, factory=_PortableConnection)
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
        # Migrations name projects in their stored spelling with it; never in a query of the tools.
        await raw.create_function("nfc", 1, _composed, deterministic=True)
        # Tags are compared folded; SQLite's NOCASE folds ASCII letters only ("Été" would miss "été").
        await raw.create_function("folded", 1, _folded, deterministic=True)
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


async def _end_read(raw: aiosqlite.Connection) -> None:
    """End a read transaction; one that cannot commit (on a damaged file, say) is rolled back if
    still open, as a reader returned to the pool inside a transaction would fail every later read."""
    try:
        await raw.execute("COMMIT")
    except sqlite3.Error as exc:
        logger.warning("a read transaction could not commit: %s", exc)
        if raw.in_transaction:
            await raw.execute("ROLLBACK")


def fold_tag(tag: str) -> str:
    """A tag as tags are compared: stripped, composed (NFC, as project names are) and casefolded (full
    Unicode), so "cafe\u0301" and "CAFÉ" are one tag. Composed again after folding, which can decompose
    ("ǰ" folds to "j" and a combining caron)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", tag.strip()).casefold())


def stored_tag(tag: str) -> str:
    """A tag as it is stored: stripped and composed (NFC)."""
    return unicodedata.normalize("NFC", tag.strip())


def distinct_tags(tags: Iterable[str]) -> list[str]:
    """Tags as stored (`stored_tag`), one per spelling as `fold_tag` compares them (the first kept),
    in the order given; blank ones dropped."""
    kept: dict[str, str] = {}
    for tag in tags:
        if tag.strip():
            kept.setdefault(fold_tag(tag), stored_tag(tag))
    return list(kept.values())


def _folded(value: object) -> object:
    """SQL folded(text): `fold_tag` of a text (anything else unchanged)."""
    return fold_tag(value) if isinstance(value, str) else value


def _composed(value: object) -> object:
    """SQL nfc(text): the text in Unicode normal form C (anything else unchanged)."""
    return unicodedata.normalize("NFC", value) if isinstance(value, str) else value
