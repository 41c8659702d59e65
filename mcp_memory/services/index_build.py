"""Builds the in-memory search index at start-up and keeps its cache on disk.

The index is loaded from its cache when that is current enough, else from the stored terms of
every record (re-analysed first after an analyzer upgrade, services/reanalysis.py). The load runs
in a thread so the server answers while a large store is read; the cache is written in the
background after a rebuild, and deleted by a forget.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from mcp_memory.clock import local_zone_name, zone
from mcp_memory.db import Database
from mcp_memory.errors import MCPMemoryError
from mcp_memory.repositories.embeddings import EmbeddingRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.search.cache import (
    FORMAT,
    CacheError,
    CacheHeader,
    CacheReader,
    discard,
    publish,
    unused_terms,
    with_postings,
    write_cache,
)
from mcp_memory.search.index import IndexState
from mcp_memory.services.indexing import Indexer
from mcp_memory.services.reanalysis import Reanalysis, stored_zone

logger = logging.getLogger(__name__)

_REPLAY_MIN = 1_000  # changes since the cache that are always replayed rather than rebuilt
_CACHE_GRACE_S = 5.0  # how long shutdown waits for a cache write in progress
FORGET_ACTION = "memory_forget"  # the audit action after which an older index cache is never used


@dataclass(frozen=True, slots=True)
class CachePlan:
    """Where the index cache lives, whether it is used, and from what size of store it is written."""

    path: Path
    enabled: bool = True  # off: never read or written, but still deleted by a forget
    min_docs: int = 10_000


class IndexBuilder:
    """Builds the indexer's index once (in the background or awaited) and writes its cache."""

    def __init__(self, indexer: Indexer, cache: CachePlan | None = None, timezone: str | None = None) -> None:
        self.indexer = indexer
        self.cache = cache
        self.timezone = timezone  # asked for (--timezone); None: the database's own
        self.source = ""  # how the index was built: "cache" or "rebuild"
        self.replayed = 0  # changes applied on top of the cache at start-up
        self.failure: str | None = None  # why the last build failed (a damaged file), until one succeeds
        self._build: asyncio.Task[int] | None = None
        self._cache_write: asyncio.Task[bool] | None = None

    def start_build(self, db: Database) -> asyncio.Task[int] | None:
        """Build the index in a background task unless it is built; returns the build in progress."""
        if self.indexer.built:
            return None
        if self._build is None or self._build.done():  # none yet, or the last one failed
            self._build = asyncio.get_running_loop().create_task(self.rebuild(db), name="mcp-memory-index-build")
            self._build.add_done_callback(_log_failed_build)
        return self._build

    async def ensure_built(self, db: Database) -> None:
        """Return once the index is built: wait for the build in progress, or start one.

        The build belongs to no caller: one that is cancelled stops waiting, not building. A build
        that failed (the database was unreadable) raises here and is started again by the next call.
        """
        build = self.start_build(db)
        if build is not None:
            try:
                await asyncio.shield(build)
            except MCPMemoryError as exc:
                self.failure = str(exc)
                raise

    async def stop_build(self) -> None:
        """At shutdown: cancel a build in progress; give a cache write a few seconds to finish, so a
        short first session still leaves a cache behind (a cancelled write leaves the file as it was)."""
        if self._cache_write is not None and not self._cache_write.done():
            with contextlib.suppress(Exception):  # too slow (TimeoutError), or failed: logged by the task
                await asyncio.wait_for(asyncio.shield(self._cache_write), _CACHE_GRACE_S)
        for task in (self._build, self._cache_write):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def rebuild(self, db: Database) -> int:
        """Load the index: from the index cache when it is current enough, else from stored terms
        (re-analysing first when the analyzer version changed).

        The CPU-bound load runs in a thread, so the event loop keeps answering (the MCP handshake,
        health checks) while a large index is built; callers wait in ensure_built().
        """
        async with db.read() as conn:
            stale = await SearchDocRepository(conn).stale_count(ANALYZER_VERSION)
            meta = MetaRepository(conn)
            recorded = await meta.get("analyzer_version")
            analysed_in = stored_zone(recorded, await meta.get("timezone"))
        zone = self._zone(analysed_in)
        reanalysed = 0
        if stale or recorded != str(ANALYZER_VERSION) or analysed_in != zone:
            reanalysed = await Reanalysis(self.indexer, zone).run(db)
        elif (plan := self._active_cache()) is not None and (count := await self._from_cache(db, plan)) is not None:
            return count
        async with db.read() as conn:  # one snapshot: the documents and the audit row they reflect
            store = SearchDocRepository(conn)
            seen = await MetaRepository(conn).last_audit_seq()
            vocab = await store.vocabulary()
            docs = await store.all_docs()
        index = self.indexer.index
        index.set_vocabulary(vocab)
        count = len(docs)
        await in_daemon_thread(index.load, docs)
        del docs  # the rows' transient fields: the index keeps only what it needs
        self.indexer.loaded(seen, max(vocab.values(), default=0))
        await self._finish_build(db, "rebuild")
        if reanalysed:  # words only the previous analyzer made are left in the vocabulary
            async with db.transaction("reindex") as tx:
                swept = await self.indexer.sweep_terms(tx)
            logger.info("words the re-analysis left unused deleted: %d", swept)
        if (plan := self._active_cache()) is not None and count >= max(plan.min_docs, 1):
            self.write_cache(db)
        logger.info("search index built: %d documents, %d terms", count, len(vocab))
        return count

    def _zone(self, analysed_in: str | None) -> str:
        """Set the index's time zone: the one asked for, else the database's, else this machine's;
        returns its name."""
        name = self.timezone or analysed_in or local_zone_name()
        try:
            self.indexer.index.zone = zone(name)
        except ValueError:  # the database came from a machine whose zone data knows more zones
            logger.warning("the database's time zone %r is unknown here: searching dates in UTC", name)
            name, self.indexer.index.zone = "UTC", zone("UTC")
        return name

    async def _from_cache(self, db: Database, plan: CachePlan) -> int | None:
        """Load the index from the cache and apply the writes made since; None when it will not do.

        A cache is used only when the audit row it is current to is this database's (same time),
        no `memory_forget` came after it (a forgotten record must not come back from disk), and
        fewer changes came after it than half the documents it holds (beyond that a rebuild is
        as quick). Whatever goes wrong reading it, the index is rebuilt instead.
        """
        try:
            with await asyncio.to_thread(CacheReader, plan.path) as reader:
                header = reader.header
                async with db.read() as conn:
                    meta = MetaRepository(conn)
                    stamp = await meta.audit_stamp(header.seq)
                    forgotten = await meta.action_since(header.seq, FORGET_ACTION)
                    pending = await meta.changes_since(header.seq)
                unfit = _unfit(header, self.indexer.index.zone.key, stamp, forgotten, pending)
                if unfit is not None:
                    logger.info("index cache not used (%s): rebuilding the index", unfit)
                    return None
                state = await in_daemon_thread(CacheReader.state, reader)
            await in_daemon_thread(self.indexer.index.restore, state)
            del state
        except Exception as exc:  # a damaged file must never keep the server from starting
            log = logger.info if isinstance(exc, CacheError) else logger.warning
            log("index cache not used (%s): rebuilding the index", exc)
            return None
        self.indexer.loaded(header.seq, header.vocab_mark)
        self.replayed = await self.indexer.sync(db)
        await self._finish_build(db, "cache")
        if pending >= max(_REPLAY_MIN, header.docs // 50):  # keep the next start's replay short
            self.write_cache(db)
        logger.info("search index loaded from its cache: %d documents, %d changes applied", header.docs, pending)
        return self.indexer.index.doc_count()

    async def _finish_build(self, db: Database, source: str) -> None:
        """Attach the stored vectors and start following commits."""
        feed = self.indexer.vectors
        if feed is not None:
            async with db.read() as conn:
                vectors = await EmbeddingRepository(conn).current(feed.model)
            self.indexer.index.load_vectors(vectors)
            del vectors
        _return_free_memory()
        self.source = source
        self.failure = None
        self.indexer.follow(db)

    def write_cache(self, db: Database) -> asyncio.Task[bool] | None:
        """Save the index to its cache in the background (one write at a time); returns the write."""
        plan = self._active_cache()
        if plan is None or not self.indexer.built:
            return None
        if self._cache_write is None or self._cache_write.done():
            self._cache_write = asyncio.get_running_loop().create_task(
                self._write_cache(db, plan), name="mcp-memory-index-cache"
            )
            self._cache_write.add_done_callback(_log_failed_cache_write)
        return self._cache_write

    async def _write_cache(self, db: Database, plan: CachePlan) -> bool:
        """Write the cache; False when it was not published (a forget came while it was written)."""
        state = self.indexer.index.state()  # on the loop, between writes: consistent with the marks below
        seq, mark = self.indexer.marks
        async with db.read() as conn:
            stamp = await MetaRepository(conn).audit_stamp(seq)
        if stamp is None:  # the database was replaced under us
            return False
        state, unused = await in_daemon_thread(_grouped_and_unused, state)
        # Another process may have deleted words this one still knows (their last records were
        # dropped there): they must not reach the disk, nor stay in memory.
        dead: dict[str, int] = {}
        if unused:
            async with db.read() as conn:
                stored = await SearchDocRepository(conn).existing_term_ids(sorted(unused.values()))
            dead = {term: term_id for term, term_id in unused.items() if term_id not in stored}
            self.indexer.forget_terms(dead)
        header = CacheHeader(FORMAT, ANALYZER_VERSION, self.indexer.index.zone.key, seq, stamp, mark, state.doc_count)
        temporary = await in_daemon_thread(lambda st: write_cache(plan.path, header, _without(st, dead)), state)
        del state
        async with db.read() as conn:
            forgotten = await MetaRepository(conn).action_since(seq, FORGET_ACTION)
        if forgotten:
            discard(temporary)
            return False
        publish(temporary, plan.path)
        logger.info("index cache written: %d documents, current to audit row %d", header.docs, seq)
        return True

    def drop_cache(self) -> None:
        """Delete the cache file (after a forget, so nothing forgotten stays on disk in it), even
        when the cache is switched off: an earlier run with it on may have left one."""
        if self.cache is not None:
            discard(self.cache.path)

    def _active_cache(self) -> CachePlan | None:
        return None if self.cache is None or not self.cache.enabled else self.cache


_T = TypeVar("_T")
_R = TypeVar("_R")


async def in_daemon_thread(fn: Callable[[_T], _R], arg: _T, name: str = "mcp-memory-index-load") -> _R:
    """Run `fn(arg)` in a thread of its own; a daemon, so that a process told to stop while a large
    index loads (or a model answers) exits at once instead of joining it (anyio's worker threads are
    joined at exit). A cancelled caller abandons the thread, whose result is then dropped."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[_R] = loop.create_future()

    def settle(result: _R | None, error: BaseException | None) -> None:
        if not done.done():  # cancelled meanwhile: the caller has gone
            if error is None:
                done.set_result(result)  # type: ignore[arg-type]  # no error: fn returned it
            else:
                done.set_exception(error)

    def work() -> None:
        result: _R | None = None
        error: BaseException | None = None
        try:
            result = fn(arg)
        except BaseException as exc:  # handed to the awaiting task, which re-raises it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: the process is stopping
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await done


def _grouped_and_unused(state: IndexState) -> tuple[IndexState, dict[str, int]]:
    """`state` with its postings grouped, and its vocabulary entries that no document uses."""
    grouped = with_postings(state)
    return grouped, unused_terms(grouped)


def _without(state: IndexState, terms: Mapping[str, int]) -> IndexState:
    """`state` with `terms` left out of its vocabulary."""
    if not terms:
        return state
    return replace(state, vocab={term: term_id for term, term_id in state.vocab.items() if term not in terms})


def _unfit(header: CacheHeader, timezone: str, stamp: str | None, forgotten: bool, pending: int) -> str | None:
    """Why a cache may not be used for the database as it is now (None: it may)."""
    if header.analyzer != ANALYZER_VERSION:
        return f"made by analyzer {header.analyzer}"
    if header.timezone != timezone:
        return f"dates in time zone {header.timezone}"
    if stamp is None or stamp != header.stamp:
        return "from another history of the database"
    if forgotten:
        return "older than a memory_forget"
    if pending > max(_REPLAY_MIN, header.docs // 2):
        return f"{pending} changes behind"
    return None


def _log_failed_cache_write(task: asyncio.Task[bool]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        logger.warning("could not write the index cache (the next start rebuilds the index): %s", exc)


def _log_failed_build(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        logger.error("could not build the search index (the next call tries again): %s", exc)


def _return_free_memory() -> None:
    """Hand the build's freed temporaries back to the OS.

    glibc keeps freed heap memory for reuse, and the build frees several times the index's own
    size (at a million records, gigabytes): without a trim the server would keep that resident.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # not glibc (musl, for one): nothing to trim so
        ctypes.CDLL("libc.so.6").malloc_trim(0)
