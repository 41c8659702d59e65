"""Feeds the search index: analyses records, stores their terms, applies changes after commit.

Every searchable record has one index document. The services describe it as a `DocSpec` (which
text, weighted by field); this module turns that into terms, stores them in the same transaction as
the record, and updates the in-memory index only once the transaction has committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import json
import logging
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from mcp_memory.clock import epoch
from mcp_memory.db import Conn, Database, Tx
from mcp_memory.repositories.embeddings import EmbeddingRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.search import dates
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.search.cache import FORMAT, CacheError, CacheHeader, CacheReader, discard, publish, write_cache
from mcp_memory.search.index import IndexDoc, SearchIndex

logger = logging.getLogger(__name__)

_REINDEX_BATCH = 500
_NEW_TERMS = "indexer.new_terms"  # Tx notes: term -> id of terms this transaction stored
_SYNC_PAGE = 1_000
_REPLAY_MIN = 1_000  # changes since the cache that are always replayed rather than rebuilt
_CACHE_GRACE_S = 5.0  # how long shutdown waits for a cache write in progress
FORGET_ACTION = "memory_forget"  # the audit action after which an older index cache is never used


@dataclass(frozen=True, slots=True)
class DocSpec:
    """What to index for one record: identity, filter attributes and weighted text fields."""

    doc_id: str
    kind: str
    project: str
    at: str
    fields: Sequence[tuple[str, int]] = field(default_factory=tuple)
    subtype: str | None = None
    session_id: str | None = None
    seq: int = 0  # position in the session, for records that are part of one (observations)
    weight: float = 0.5  # importance, 0..1
    dated: bool = False  # index the record's date and the dates its text points at


DocSource = Callable[[Database], AsyncIterator[list[DocSpec]]]
"""Yields every record of one kind as batches of DocSpecs (used to re-analyse everything)."""

DocLookup = Callable[[Conn, str, Sequence[str]], Awaitable[list[DocSpec]]]
"""The DocSpecs of some records of one kind in one project, by id (missing ones left out)."""


def spec_text(spec: DocSpec) -> str:
    """The text a record is indexed (and embedded) from."""
    return "\n".join(text for text, _ in spec.fields if text)


def text_digest(text: str) -> str:
    """Short digest of indexed text: a stored vector is current while its digest matches."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class EmbedJob:
    """A record whose text needs a vector."""

    doc_id: str
    digest: str
    text: str


class VectorFeed(Protocol):
    """What the indexer tells the embedder (services/embedding.py) when vectors are enabled."""

    model: str

    def wanted(self, jobs: Sequence[EmbedJob]) -> None:
        """These records were (re-)indexed and have no current vector."""

    def lacking_elsewhere(self, doc_ids: Sequence[str]) -> None:
        """Another process indexed these records, and they have no vector yet."""


@dataclass(frozen=True, slots=True)
class CachePlan:
    """Where the index cache lives, whether it is used, and from what size of store it is written."""

    path: Path
    enabled: bool = True  # off: never read or written, but still deleted by a forget
    min_docs: int = 10_000


class Indexer:
    """The only writer of the search index and of its stored form."""

    def __init__(self, index: SearchIndex, cache: CachePlan | None = None) -> None:
        self.index = index
        self.cache = cache
        self.built = False
        self.source = ""  # how the index was built: "cache" or "rebuild"
        self.replayed = 0  # changes applied on top of the cache at start-up
        self._build: asyncio.Task[int] | None = None
        self._cache_write: asyncio.Task[bool] | None = None
        self._seen_seq = 0  # the last audit-log row whose changes the in-memory index reflects
        self._vocab_mark = 0  # every term id up to this one was read from the database
        self._sources: dict[str, DocSource] = {}
        self._lookups: dict[str, DocLookup] = {}
        self.vectors: VectorFeed | None = None  # set when an embedding provider is configured

    def register_source(self, kind: str, source: DocSource, lookup: DocLookup) -> None:
        """Tell the indexer how to enumerate every record of `kind`, and how to fetch some by id."""
        self._sources[kind] = source
        self._lookups[kind] = lookup

    async def put(self, tx: Tx, spec: DocSpec) -> None:
        """Index (or re-index) one record inside the caller's transaction."""
        await self.put_many(tx, [spec])

    async def put_many(self, tx: Tx, specs: Sequence[DocSpec]) -> None:
        """Index several records inside the caller's transaction."""
        if not specs:
            return
        analyzer = self.index.analyzer
        counted: list[tuple[DocSpec, str, Counter[str]]] = []
        for spec in specs:
            counts: Counter[str] = Counter()
            for text, weight in spec.fields:
                if text:
                    for term in analyzer.terms(text):
                        counts[term] += weight
            whole = spec_text(spec)
            if spec.dated:
                counts.update(dates.record_tokens(whole, epoch(spec.at)))
            counted.append((spec, whole, counts))
        # Terms new to the index are learned at commit; until then this transaction's earlier
        # writes (an import's previous chunks) are asked, so each new term is stored only once.
        vocab = self.index.vocab
        known: dict[str, int] = {}
        missing: list[str] = []
        for term in {t for _, _, counts in counted for t in counts}:
            found = vocab.get(term)
            if found is None:
                found = tx.noted(_NEW_TERMS, term)
            if found is not None:
                known[term] = found
            else:
                missing.append(term)
        store = SearchDocRepository(tx)
        created = await store.term_ids(sorted(missing)) if missing else {}
        tx.note(_NEW_TERMS, created)
        ids = known | created
        docs = []
        for spec, whole, counts in counted:
            doc = IndexDoc(
                doc_id=spec.doc_id,
                kind=spec.kind,
                subtype=spec.subtype,
                project=spec.project,
                session_id=spec.session_id,
                at=epoch(spec.at),
                length=sum(counts.values()),
                terms=self.index.pack(counts, ids),
                seq=spec.seq,
                weight=spec.weight,
                digest=text_digest(whole),
            )
            await store.put(doc, ANALYZER_VERSION)
            docs.append(doc)
        await EmbeddingRepository(tx).delete_stale([(d.doc_id, d.digest) for d in docs])
        # Kept until commit only for the embedder: an import holds every document of its transaction.
        texts = [whole for _, whole, _ in counted] if self.vectors is not None else []

        def apply() -> None:
            self.index.learn_terms(created)
            self.index.upsert_many(docs)  # keeps each record's vector if its text did not change
            if self.vectors is not None:
                jobs = [
                    EmbedJob(doc.doc_id, doc.digest, text)
                    for doc, text in zip(docs, texts, strict=True)
                    if text and not self.index.has_vector(doc.doc_id)
                ]
                if jobs:
                    self.vectors.wanted(jobs)

        tx.on_commit(apply)

    async def drop(self, tx: Tx, doc_ids: Sequence[str]) -> None:
        """Remove records from the index inside the caller's transaction."""
        if not doc_ids:
            return
        ids = list(doc_ids)
        await SearchDocRepository(tx).delete(ids)
        await EmbeddingRepository(tx).delete(ids)

        def apply() -> None:
            for doc_id in ids:
                self.index.remove(doc_id)

        tx.on_commit(apply)

    def start_build(self, db: Database) -> asyncio.Task[int] | None:
        """Build the index in a background task unless it is built; returns the build in progress."""
        if self.built:
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
            await asyncio.shield(build)

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
            recorded = await MetaRepository(conn).get("analyzer_version")
        if stale or recorded != str(ANALYZER_VERSION):
            await self.reanalyse(db)
        elif (plan := self._active_cache()) is not None and (count := await self._from_cache(db, plan)) is not None:
            return count
        async with db.read() as conn:  # one snapshot: the documents and the audit row they reflect
            store = SearchDocRepository(conn)
            seen = await MetaRepository(conn).last_audit_seq()
            vocab = await store.vocabulary()
            docs = await store.all_docs()
        self.index.set_vocabulary(vocab)
        count = len(docs)
        await _in_daemon_thread(self.index.load, docs)
        del docs  # the rows' transient fields: the index keeps only what it needs
        self._seen_seq = seen
        self._vocab_mark = max(vocab.values(), default=0)
        await self._finish_build(db, "rebuild")
        if (plan := self._active_cache()) is not None and count >= max(plan.min_docs, 1):
            self.write_cache(db)
        logger.info("search index built: %d documents, %d terms", count, len(vocab))
        return count

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
                unfit = _unfit(header, stamp, forgotten, pending)
                if unfit is not None:
                    logger.info("index cache not used (%s): rebuilding the index", unfit)
                    return None
                state = await _in_daemon_thread(CacheReader.state, reader)
            await _in_daemon_thread(self.index.restore, state)
            del state
        except Exception as exc:  # a damaged file must never keep the server from starting
            log = logger.info if isinstance(exc, CacheError) else logger.warning
            log("index cache not used (%s): rebuilding the index", exc)
            return None
        self._seen_seq, self._vocab_mark = header.seq, header.vocab_mark
        self.replayed = await self.sync(db)
        await self._finish_build(db, "cache")
        if pending >= max(_REPLAY_MIN, header.docs // 50):  # keep the next start's replay short
            self.write_cache(db)
        logger.info("search index loaded from its cache: %d documents, %d changes applied", header.docs, pending)
        return self.index.doc_count()

    async def _finish_build(self, db: Database, source: str) -> None:
        """Attach the stored vectors and start following commits."""
        if self.vectors is not None:
            async with db.read() as conn:
                vectors = await EmbeddingRepository(conn).current(self.vectors.model)
            self.index.load_vectors(vectors)
            del vectors
        _return_free_memory()
        self.source = source
        self.built = True
        db.after_every_commit(self._after_commit)

    def write_cache(self, db: Database) -> asyncio.Task[bool] | None:
        """Save the index to its cache in the background (one write at a time); returns the write."""
        plan = self._active_cache()
        if plan is None or not self.built:
            return None
        if self._cache_write is None or self._cache_write.done():
            self._cache_write = asyncio.get_running_loop().create_task(
                self._write_cache(db, plan), name="mcp-memory-index-cache"
            )
            self._cache_write.add_done_callback(_log_failed_cache_write)
        return self._cache_write

    async def _write_cache(self, db: Database, plan: CachePlan) -> bool:
        """Write the cache; False when it was not published (a forget came while it was written)."""
        state = self.index.state()  # on the loop, between writes: consistent with the marks below
        seq, mark = self._seen_seq, self._vocab_mark
        async with db.read() as conn:
            stamp = await MetaRepository(conn).audit_stamp(seq)
        if stamp is None:  # the database was replaced under us
            return False
        header = CacheHeader(FORMAT, ANALYZER_VERSION, seq, stamp, mark, state.doc_count)
        temporary = await _in_daemon_thread(lambda st: write_cache(plan.path, header, st), state)
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

    async def reanalyse(self, db: Database) -> int:
        """Re-derive every record's stored terms from its source text (analyzer upgrade)."""
        total = 0
        # Unchanged text keeps its stored vector; the embedder's start-up pass finds the rest.
        feed, self.vectors = self.vectors, None
        try:
            async with db.transaction("reindex") as tx:
                await SearchDocRepository(tx).clear()
                await MetaRepository(tx).set("analyzer_version", "rebuilding")
            for kind, source in self._sources.items():
                async for batch in source(db):
                    async with db.transaction("reindex") as tx:
                        await self.put_many(tx, batch)
                    total += len(batch)
                logger.debug("re-analysed %s records", kind)
            async with db.transaction("reindex") as tx:
                await MetaRepository(tx).set("analyzer_version", str(ANALYZER_VERSION))
        finally:
            self.vectors = feed
        return total

    def _after_commit(self, tx: Tx) -> None:
        # Our own commit was applied through its callbacks; skip it in sync() if nothing came between.
        if tx.audit_seq is not None and tx.audit_seq == self._seen_seq + 1:
            self._seen_seq = tx.audit_seq

    async def sync(self, db: Database) -> int:
        """Apply what other processes wrote since we last looked; returns how many documents changed.

        Every write lists the records it touched in the audit log, so this re-reads just those
        records' stored terms instead of rebuilding the index.
        """
        async with db.read() as conn:
            meta = MetaRepository(conn)
            if await meta.last_audit_seq() <= self._seen_seq:
                return 0
            ids: set[str] = set()
            last = self._seen_seq
            while True:
                rows = await meta.audit_since(last, limit=_SYNC_PAGE)
                for seq, _, changes in rows:
                    last = seq
                    ids.update(change["id"] for change in json.loads(changes))
                if len(rows) < _SYNC_PAGE:
                    break
            store = SearchDocRepository(conn)
            # Not the largest id we know: our own new terms interleave with other processes' ones.
            vocab = await store.vocabulary(after_id=self._vocab_mark)
            docs = {doc.doc_id: doc for doc in await store.get_many(sorted(ids))}
            vectors = (
                []
                if self.vectors is None
                else await EmbeddingRepository(conn).current(self.vectors.model, sorted(docs))
            )
        self.index.learn_terms(vocab)
        self._vocab_mark = max(vocab.values(), default=self._vocab_mark)
        for doc_id in ids - docs.keys():
            self.index.remove(doc_id)
        self.index.upsert_many(docs.values())
        if self.vectors is not None:
            self.index.load_vectors(vectors)
            lacking = [doc_id for doc_id in docs if not self.index.has_vector(doc_id)]
            if lacking:
                self.vectors.lacking_elsewhere(lacking)
        self._seen_seq = max(self._seen_seq, last)
        logger.debug("index synced with other writers: %d records", len(ids))
        return len(ids)

    async def specs_of(self, db: Database, doc_ids: Sequence[str]) -> list[DocSpec]:
        """The DocSpecs of indexed records, by id, as their services describe them now."""
        groups: dict[tuple[str, str], list[str]] = {}
        for doc_id in doc_ids:
            place = self.index.locate(doc_id)
            if place is not None:
                groups.setdefault(place, []).append(doc_id)
        specs: list[DocSpec] = []
        async with db.read() as conn:
            for (kind, project), ids in groups.items():
                lookup = self._lookups.get(kind)
                if lookup is not None:
                    specs += await lookup(conn, project, ids)
        return specs

    def batches(self, specs: Sequence[DocSpec]) -> list[list[DocSpec]]:
        """Split specs into transaction-sized batches."""
        return [list(specs[i : i + _REINDEX_BATCH]) for i in range(0, len(specs), _REINDEX_BATCH)]


_T = TypeVar("_T")
_R = TypeVar("_R")


async def _in_daemon_thread(fn: Callable[[_T], _R], arg: _T) -> _R:
    """Run `fn(arg)` in a thread of its own; a daemon, so that a process told to stop while a large
    index loads exits at once instead of joining it (anyio's worker threads are joined at exit)."""
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

    threading.Thread(target=work, name="mcp-memory-index-load", daemon=True).start()
    return await done


def _unfit(header: CacheHeader, stamp: str | None, forgotten: bool, pending: int) -> str | None:
    """Why a cache may not be used for the database as it is now (None: it may)."""
    if header.analyzer != ANALYZER_VERSION:
        return f"made by analyzer {header.analyzer}"
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
