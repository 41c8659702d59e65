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
import os
import sys
import threading
import time
import uuid
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, TypeVar

from mcp_memory.clock import epoch
from mcp_memory.db import Conn, Database, Later, Tx
from mcp_memory.repositories.embeddings import EmbeddingRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.search import dates
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.search.bm25 import Partition, decode_terms
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
from mcp_memory.search.index import IndexDoc, IndexState, SearchIndex

logger = logging.getLogger(__name__)

_REINDEX_BATCH = 500
_NEW_TERMS = "indexer.new_terms"  # Tx notes: term -> id of terms this transaction stored or looked up
_GONE_TERMS = "indexer.gone_terms"  # Tx notes: term -> id of terms this transaction deleted
_LOGGED = "indexer.logged"  # Tx notes: how many entries of the transaction's _Pending log are current
_SYNC_PAGE = 1_000
_REPLAY_MIN = 1_000  # changes since the cache that are always replayed rather than rebuilt
_CACHE_GRACE_S = 5.0  # how long shutdown waits for a cache write in progress
_CLAIM_PREFIX = "re-analysing: "  # the analyzer_version meta value while a process re-analyses
_CLAIM_TTL_S = 30.0  # a re-analysis claim not renewed for this long was left by a process that died
_CLAIM_POLL_S = 0.25  # how often a process waiting for another's re-analysis looks again
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


class _Pending:
    """The index changes of one open transaction, so that a drop can tell which terms the
    transaction leaves without any document.

    The in-memory index shows the committed documents; this log says what the transaction did to
    some of them. A savepoint that rolls back takes its entries with it: a transaction note (which
    the rollback forgets) says how many entries are current.
    """

    __slots__ = ("blobs", "delta", "folded", "log")

    def __init__(self) -> None:
        # (document id, its terms as the transaction had left them before, or None; after), b"": dropped
        self.log: list[tuple[str, bytes | None, bytes]] = []
        self.blobs: dict[str, bytes] = {}  # each document the transaction wrote, as it leaves it
        self.delta: Counter[int] = Counter()  # term id -> documents gained minus lost by log[:folded]
        self.folded = 0


@dataclass(frozen=True, slots=True)
class _Changes:
    """What other processes committed since the index last looked (read by sync, then applied)."""

    ids: set[str]
    last: int
    vocab: dict[str, int]
    docs: dict[str, IndexDoc]
    vectors: Sequence[tuple[str, str, bytes]]


class Indexer:
    """The only writer of the search index and of its stored form."""

    def __init__(self, index: SearchIndex, cache: CachePlan | None = None) -> None:
        self.index = index
        self.cache = cache
        self.built = False
        self.source = ""  # how the index was built: "cache" or "rebuild"
        self.replayed = 0  # changes applied on top of the cache at start-up
        self._build: asyncio.Task[int] | None = None
        self._owner = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"  # names this process's re-analysis claim
        self._cache_write: asyncio.Task[bool] | None = None
        self._seen_seq = 0  # the last audit-log row whose changes the in-memory index reflects
        self._vocab_mark = 0  # every term id up to this one was read from the database
        self._sources: dict[str, DocSource] = {}
        self._lookups: dict[str, DocLookup] = {}
        self.vectors: VectorFeed | None = None  # set when an embedding provider is configured
        self._caught_up: weakref.WeakSet[Tx] = weakref.WeakSet()
        self._open: weakref.WeakKeyDictionary[Tx, _Pending] = weakref.WeakKeyDictionary()
        self._collected: weakref.WeakSet[Tx] = weakref.WeakSet()  # transactions that deleted terms
        # each transaction's audit head, read in its first trip right after BEGIN (see _catch_up)
        self._heads: weakref.WeakKeyDictionary[Tx, Later] = weakref.WeakKeyDictionary()

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
        # The vocabulary may still map a word that another process has deleted since (its last
        # record dropped): only a term some indexed record uses is sure to be stored, once the
        # index has caught up (before the build, the index holds only this process's re-analysis).
        # The rest are looked up (or stored) in the database; terms this transaction stored are
        # learned at commit, and until then its notes give them.
        caught_up = await self._catch_up(tx)
        partitions = self._partitions({spec.project for spec in specs}) if caught_up or not self.built else []
        in_use = [part.df for part in partitions]  # a term some record uses has a document frequency
        collected = tx in self._collected
        vocab = self.index.vocab
        known: dict[str, int] = {}
        missing: list[str] = []
        for term in {t for _, _, counts in counted for t in counts}:
            if collected and tx.noted(_GONE_TERMS, term) is not None:
                missing.append(term)
                continue
            found = vocab.get(term)
            if found is not None and not any(found in df for df in in_use):
                found = None
            if found is None:
                found = tx.noted(_NEW_TERMS, term)
            if found is not None:
                known[term] = found
            else:
                missing.append(term)
        store = SearchDocRepository(tx)
        looked_up = await store.term_ids(sorted(missing)) if missing else {}
        tx.note(_NEW_TERMS, looked_up)
        ids = known | looked_up
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
        self._log(tx, {doc.doc_id: doc.terms for doc in docs})
        await EmbeddingRepository(tx).delete_stale([(d.doc_id, d.digest) for d in docs])
        # Kept until commit only for the embedder: an import holds every document of its transaction.
        texts = [whole for _, whole, _ in counted] if self.vectors is not None else []

        def apply() -> None:
            self.index.learn_terms(looked_up)
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
        """Remove records from the index inside the caller's transaction, with every term of theirs
        that no remaining record (of any project) uses: a forgotten record's words leave the store."""
        if not doc_ids:
            return
        ids = list(dict.fromkeys(doc_ids))
        store = SearchDocRepository(tx)
        # Without the index caught up nothing tells which terms other records use: keep them all.
        blobs = await store.term_blobs(ids) if await self._catch_up(tx) else []
        await store.delete(ids)
        await EmbeddingRepository(tx).delete(ids)
        self._log(tx, dict.fromkeys(ids, b""))
        gone = await self._delete_unused(tx, set(decode_terms(b"".join(blobs))["t"].tolist())) if blobs else {}

        def apply() -> None:
            for doc_id in ids:
                self.index.remove(doc_id)
            self._forget_terms(gone)

        tx.on_commit(apply)

    async def sweep_terms(self, tx: Tx) -> int:
        """Delete every stored word that no record uses; returns how many went.

        drop() keeps the vocabulary clean as records go; this clears what it could not: words of
        records forgotten by releases before it, or analysed differently before a re-analysis.
        """
        if not await self._catch_up(tx):
            return 0
        gone = await self._delete_unused(tx, await SearchDocRepository(tx).all_term_ids())
        tx.on_commit(lambda: self._forget_terms(gone))
        return len(gone)

    async def _delete_unused(self, tx: Tx, candidates: set[int]) -> dict[str, int]:
        """Delete those of `candidates` (term ids) that no record uses once `tx` commits; returns
        them, and notes them so a later write of `tx` stores such a word anew."""
        unused = self._unused(tx, candidates)
        if not unused:
            return {}
        gone = await SearchDocRepository(tx).delete_terms(unused)
        tx.note(_GONE_TERMS, gone)
        self._collected.add(tx)
        return gone

    async def _catch_up(self, tx: Tx) -> bool:
        """Apply every commit the index has not seen, once per transaction; False when the index
        cannot be relied on in `tx` (not built yet, or built after `tx` had written to it).

        The transaction holds the write lock, so nothing else commits before it ends: once caught
        up, the index shows every committed record, and the transaction's log says what it changed.
        Another process may have deleted a term since the index last looked (see drop), or made a
        record use one this transaction is about to find unused.
        """
        if tx in self._caught_up:
            return True
        if not self.built or tx in self._open:
            return False
        while True:
            seen = self._seen_seq
            changes = await self._read_changes(tx, self._heads.pop(tx, None))  # none of tx's own rows yet
            if changes is None or self._seen_seq == seen:
                break
        if changes is not None:
            self._apply_changes(changes)
        self._caught_up.add(tx)
        return True

    def _log(self, tx: Tx, changes: Mapping[str, bytes]) -> None:
        """Record that the transaction leaves these documents with these terms (b"": dropped)."""
        pending = self._pending(tx)
        for doc_id, blob in changes.items():
            pending.log.append((doc_id, pending.blobs.get(doc_id), blob))
            pending.blobs[doc_id] = blob
        tx.note(_LOGGED, {_LOGGED: len(pending.log)})

    def _pending(self, tx: Tx) -> _Pending:
        """The transaction's log, without the entries of savepoints rolled back since."""
        pending = self._open.get(tx)
        if pending is None:
            pending = self._open[tx] = _Pending()
        current = tx.noted(_LOGGED, _LOGGED) or 0
        while len(pending.log) > current:
            doc_id, before, after = pending.log.pop()
            if len(pending.log) < pending.folded:
                pending.folded -= 1
                self._count(pending.delta, doc_id, before, after, -1)
            if before is None:
                del pending.blobs[doc_id]
            else:
                pending.blobs[doc_id] = before
        return pending

    def _count(self, delta: Counter[int], doc_id: str, before: bytes | None, after: bytes, sign: int) -> None:
        """Add (sign 1) or take back (-1) one log entry's change to documents per term."""
        if before is not None:
            old = decode_terms(before)["t"].tolist()
        else:  # the transaction's first change to it: the document as committed
            place = self.index.locate(doc_id)
            part = None if place is None else self.index.partition(place[1])
            terms = None if part is None else part.terms_of(doc_id)
            old = [] if terms is None else terms.tolist()
        delta.update(dict.fromkeys(decode_terms(after)["t"].tolist(), sign))
        delta.update(dict.fromkeys(old, -sign))

    def _unused(self, tx: Tx, candidates: set[int]) -> list[int]:
        """Those of `candidates` (term ids) that no record uses once the transaction commits.

        O(terms of the documents the transaction wrote): the index counts each term's committed
        documents, the log the transaction's changes to them.
        """
        pending = self._pending(tx)
        for doc_id, before, after in pending.log[pending.folded :]:
            self._count(pending.delta, doc_id, before, after, 1)
        pending.folded = len(pending.log)
        partitions = self._partitions()
        unused = []
        for term in candidates:
            users = pending.delta[term]
            for part in partitions:  # a term still used is mostly found so in the first few
                if users > 0:
                    break
                users += part.df.get(term, 0)
            if users <= 0:
                unused.append(term)
        return sorted(unused)

    def _partitions(self, first: Set[str] = frozenset()) -> list[Partition]:
        """Every project's partition: those of `first` first, then the largest (likeliest to hold a term)."""
        found = [(name, part) for name in self.index.projects() if (part := self.index.partition(name)) is not None]
        found.sort(key=lambda row: (row[0] not in first, -row[1].n_docs))
        return [part for _, part in found]

    def _forget_terms(self, terms: Mapping[str, int]) -> None:
        """Take deleted terms out of the vocabulary (unless a word came back under a new id)."""
        vocab = self.index.vocab
        for term, term_id in terms.items():
            if vocab.get(term) == term_id:
                del vocab[term]

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
        reanalysed = 0
        if stale or recorded != str(ANALYZER_VERSION):
            reanalysed = await self.reanalyse(db)
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
        if reanalysed:  # words only the previous analyzer made are left in the vocabulary
            async with db.transaction("reindex") as tx:
                swept = await self.sweep_terms(tx)
            logger.info("words the re-analysis left unused deleted: %d", swept)
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
        db.at_every_begin(self._queue_head)

    def _queue_head(self, tx: Tx) -> None:
        # Under the write lock the head cannot move until the transaction ends, so the read that
        # rides with BEGIN is the one _catch_up needs, without a trip of its own.
        self._heads[tx] = MetaRepository.queue_last_audit_seq(tx)

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
        state, unused = await _in_daemon_thread(_grouped_and_unused, state)
        # Another process may have deleted words this one still knows (their last records were
        # dropped there): they must not reach the disk, nor stay in memory.
        dead: dict[str, int] = {}
        if unused:
            async with db.read() as conn:
                stored = await SearchDocRepository(conn).existing_term_ids(sorted(unused.values()))
            dead = {term: term_id for term, term_id in unused.items() if term_id not in stored}
            self._forget_terms(dead)
        header = CacheHeader(FORMAT, ANALYZER_VERSION, seq, stamp, mark, state.doc_count)
        temporary = await _in_daemon_thread(lambda st: write_cache(plan.path, header, _without(st, dead)), state)
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
        """Re-derive every record's stored terms from its source text (analyzer upgrade); returns
        how many records this process re-analysed (0 when another process did it meanwhile).

        One process does it at a time: servers started together on an older store would otherwise
        clear each other's work, and one could load its index halfway through another's pass. The
        claim is the `analyzer_version` meta value, renewed with every batch; the others poll it
        and go on once the version is current. A claim left unrenewed for _CLAIM_TTL_S was left
        by a process that died, and the next one takes it over and starts again.
        """
        while True:
            async with db.read() as conn:
                recorded = await MetaRepository(conn).get("analyzer_version")
            if not self._held_elsewhere(recorded):
                claimed = await self._claim(db)
                if claimed is None:
                    return 0
                if claimed:
                    break
            await asyncio.sleep(_CLAIM_POLL_S)
        # Unchanged text keeps its stored vector; the embedder's start-up pass finds the rest.
        feed, self.vectors = self.vectors, None
        try:
            total = await self._reanalyse_claimed(db)
        finally:
            self.vectors = feed
        if total is None:  # taken over after this process stalled: wait for the one that took it
            logger.warning("another process took the re-analysis over: waiting for it to finish")
            return await self.reanalyse(db)
        logger.info("search terms re-analysed: %d records", total)
        return total

    async def _reanalyse_claimed(self, db: Database) -> int | None:
        """The re-analysis itself, once claimed; None when the claim was lost on the way."""
        total = 0
        for kind, source in self._sources.items():
            async for batch in source(db):
                async with db.transaction("reindex") as tx:
                    if not await self._renew(tx):
                        return None
                    await self.put_many(tx, batch)
                total += len(batch)
            logger.debug("re-analysed %s records", kind)
        async with db.transaction("reindex") as tx:
            if not await self._renew(tx):
                return None
            await MetaRepository(tx).set("analyzer_version", str(ANALYZER_VERSION))
        return total

    async def _claim(self, db: Database) -> bool | None:
        """Claim the re-analysis and clear the stored terms: True when this process claimed it,
        False when another process holds it, None when there is nothing left to re-analyse."""
        async with db.transaction("reindex") as tx:
            meta = MetaRepository(tx)
            store = SearchDocRepository(tx)
            recorded = await meta.get("analyzer_version")
            if recorded == str(ANALYZER_VERSION) and not await store.stale_count(ANALYZER_VERSION):
                return None
            if self._held_elsewhere(recorded):
                return False
            await store.clear()
            await meta.set("analyzer_version", self._claim_text())
        return True

    async def _renew(self, tx: Tx) -> bool:
        """Renew this process's claim inside `tx`; False when it no longer holds it."""
        meta = MetaRepository(tx)
        claim = _parse_claim(await meta.get("analyzer_version"))
        if claim is None or claim[0] != self._owner:
            return False
        await meta.set("analyzer_version", self._claim_text())
        return True

    def _claim_text(self) -> str:
        return f"{_CLAIM_PREFIX}{self._owner} at {time.time():.3f}"

    def _held_elsewhere(self, recorded: str | None) -> bool:
        """Whether `recorded` is another process's live claim on the re-analysis."""
        claim = _parse_claim(recorded)
        return claim is not None and claim[0] != self._owner and time.time() - claim[1] < _CLAIM_TTL_S

    def _after_commit(self, tx: Tx) -> None:
        # Our own commit was applied through its callbacks; skip it in sync() if nothing came between.
        if tx.audit_seq is not None and tx.audit_seq == self._seen_seq + 1:
            self._seen_seq = tx.audit_seq

    async def sync(self, db: Database) -> int:
        """Apply what other processes wrote since we last looked; returns how many documents changed.

        Every write lists the records it touched in the audit log, so this re-reads just those
        records' stored terms instead of rebuilding the index.
        """
        while True:
            seen = self._seen_seq
            async with db.read() as conn:
                changes = await self._read_changes(conn)
            if changes is None:
                return 0
            # Applied only if no other catch-up applied newer commits meanwhile (ours may be older).
            if self._seen_seq == seen:
                return self._apply_changes(changes)

    async def _read_changes(self, conn: Conn, head: Later | None = None) -> _Changes | None:
        """The records other processes wrote since the audit row last seen (None: nothing new)."""
        meta = MetaRepository(conn)
        if await meta.last_audit_seq(head) <= self._seen_seq:
            return None
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
        # Not the largest id we know: our own new terms interleave with other processes' ones. A
        # word deleted and stored again comes back under a new id, so it is among these too.
        vocab = await store.vocabulary(after_id=self._vocab_mark)
        docs = {doc.doc_id: doc for doc in await store.get_many(sorted(ids))}
        vectors = (
            [] if self.vectors is None else await EmbeddingRepository(conn).current(self.vectors.model, sorted(docs))
        )
        return _Changes(ids, last, vocab, docs, vectors)

    def _apply_changes(self, changes: _Changes) -> int:
        """Bring the index in line with what _read_changes found; returns how many records changed."""
        self.index.learn_terms(changes.vocab)
        self._vocab_mark = max(changes.vocab.values(), default=self._vocab_mark)
        for doc_id in changes.ids - changes.docs.keys():
            self.index.remove(doc_id)
        self.index.upsert_many(changes.docs.values())
        if self.vectors is not None:
            self.index.load_vectors(changes.vectors)
            lacking = [doc_id for doc_id in changes.docs if not self.index.has_vector(doc_id)]
            if lacking:
                self.vectors.lacking_elsewhere(lacking)
        self._seen_seq = max(self._seen_seq, changes.last)
        logger.debug("index synced with other writers: %d records", len(changes.ids))
        return len(changes.ids)

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


def _grouped_and_unused(state: IndexState) -> tuple[IndexState, dict[str, int]]:
    """`state` with its postings grouped, and its vocabulary entries that no document uses."""
    grouped = with_postings(state)
    return grouped, unused_terms(grouped)


def _without(state: IndexState, terms: Mapping[str, int]) -> IndexState:
    """`state` with `terms` left out of its vocabulary."""
    if not terms:
        return state
    return replace(state, vocab={term: term_id for term, term_id in state.vocab.items() if term not in terms})


def _parse_claim(recorded: str | None) -> tuple[str, float] | None:
    """Who holds a re-analysis claim and when they last renewed it (None: `recorded` is a
    version, or a claim from before claims were owned, which nobody renews)."""
    if recorded is None or not recorded.startswith(_CLAIM_PREFIX):
        return None
    owner, sep, renewed = recorded[len(_CLAIM_PREFIX) :].rpartition(" at ")
    try:
        return (owner, float(renewed)) if sep else None
    except ValueError:
        return None


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
