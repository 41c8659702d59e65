"""Feeds the search index: analyses records, stores their terms, applies changes after commit.

Every searchable record has one index document. The services describe it as a `DocSpec` (which
text, weighted by field); this module turns that into terms, stores them in the same transaction as
the record, and updates the in-memory index only once the transaction has committed. It also
follows what other processes commit to the same database (services/index_sync.py). Building the index at start-up
is services/index_build.py's.
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter
from collections.abc import Mapping, Sequence, Set

from mcp_memory.clock import epoch
from mcp_memory.db import Database, Later, Tx
from mcp_memory.repositories.embeddings import EmbeddingRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.search.index import IndexDoc, SearchIndex
from mcp_memory.search.partition import Partition
from mcp_memory.search.postings import decode_terms
from mcp_memory.services.index_docs import DocLookup, DocSource, DocSpec, EmbedJob, VectorFeed, spec_terms, text_digest
from mcp_memory.services.index_sync import SWEPT, Follower

logger = logging.getLogger(__name__)

_REINDEX_BATCH = 500
_NEW_TERMS = "indexer.new_terms"  # Tx notes: term -> id of terms this transaction stored or looked up
_GONE_TERMS = "indexer.gone_terms"  # Tx notes: term -> id of terms this transaction deleted
_LOGGED = "indexer.logged"  # Tx notes: how many entries of the transaction's _Pending log are current


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


class Indexer(Follower):
    """The only writer of the search index and of its stored form."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index
        self.built = False  # set once the index is loaded (services/index_build.py) and follows commits
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
        self._zones: weakref.WeakKeyDictionary[Tx, Later] = weakref.WeakKeyDictionary()

    def register_source(self, kind: str, source: DocSource, lookup: DocLookup) -> None:
        """Tell the indexer how to enumerate every record of `kind`, and how to fetch some by id."""
        self._sources[kind] = source
        self._lookups[kind] = lookup

    @property
    def sources(self) -> Mapping[str, DocSource]:
        """Every indexed kind's enumeration of its records (for a re-analysis)."""
        return self._sources

    @property
    def marks(self) -> tuple[int, int]:
        """The last audit row the index reflects, and the term id up to which it knows the vocabulary."""
        return self._seen_seq, self._vocab_mark

    def loaded(self, seen_seq: int, vocab_mark: int) -> None:
        """The index was just loaded as of audit row `seen_seq`, with every term id up to `vocab_mark`."""
        self._seen_seq, self._vocab_mark = seen_seq, vocab_mark

    def follow(self, db: Database) -> None:
        """Once the index is loaded: mark it built, and follow every commit on `db` from now on."""
        self.built = True
        db.after_every_commit(self._after_commit)
        db.at_every_begin(self._queue_head)

    async def put(self, tx: Tx, spec: DocSpec) -> None:
        """Index (or re-index) one record inside the caller's transaction."""
        await self.put_many(tx, [spec])

    async def put_many(self, tx: Tx, specs: Sequence[DocSpec]) -> None:
        """Index several records inside the caller's transaction."""
        if not specs:
            return
        # Caught up first: another process's commits may have changed the zone dates are analysed in.
        caught_up = await self._catch_up(tx)
        analyzer, zone = self.index.analyzer, self.index.zone
        counted = [(spec, *spec_terms(spec, analyzer, zone)) for spec in specs]
        # The vocabulary may still map a word that another process has deleted since (its last
        # record dropped): only a term some indexed record uses is sure to be stored, once the
        # index has caught up (before the build, the index holds only this process's re-analysis).
        # The rest are looked up (or stored) in the database; terms this transaction stored are
        # learned at commit, and until then its notes give them.
        partitions = self._partitions({spec.project for spec in specs}) if caught_up or not self.built else []
        in_use = [part.df for part in partitions]  # a term some record uses has a document frequency
        collected = tx in self._collected
        vocab = self.index.vocab
        known: dict[str, int] = {}
        missing: list[str] = []
        for term in {t for _, _, counts, _ in counted for t in counts}:
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
        for spec, whole, counts, length in counted:
            doc = IndexDoc(
                doc_id=spec.doc_id,
                kind=spec.kind,
                subtype=spec.subtype,
                project=spec.project,
                session_id=spec.session_id,
                at=epoch(spec.at),
                length=length,
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
        texts = [whole for _, whole, _, _ in counted] if self.vectors is not None else []

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

    async def redate(self, tx: Tx, doc: IndexDoc, at: float) -> None:
        """Move an indexed record to another time on the same local day, inside the caller's
        transaction: its text and so its words and date tokens are unchanged, nothing is analysed."""
        moved = doc._replace(at=at)
        await SearchDocRepository(tx).put(moved, ANALYZER_VERSION)
        self._log(tx, {moved.doc_id: moved.terms})
        tx.on_commit(lambda: self.index.upsert_many([moved]))

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
            self.forget_terms(gone)

        tx.on_commit(apply)

    async def sweep_terms(self, tx: Tx) -> int:
        """Delete every stored word that no record uses; returns how many went.

        drop() keeps the vocabulary clean as records go; this clears what it could not: words of
        records forgotten by releases before it, or analysed differently before a re-analysis.
        """
        if not await self._catch_up(tx):
            return 0
        gone = await self._delete_unused(tx, await SearchDocRepository(tx).all_term_ids())
        tx.on_commit(lambda: self.forget_terms(gone))
        if gone:  # other processes' indexes learn of it from the audit log (no record changed)
            tx.changed("index", "*", SWEPT)
        return len(gone)

    async def catch_up(self, tx: Tx) -> None:
        """Bring the index up to every commit before a write reads it to decide what to change: the
        caller's index was synced before it waited for the write lock, and another process may have
        committed in between."""
        await self._catch_up(tx)

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
        # Built, so any re-analysis of ours is done: a zone other than ours is another server's.
        self._follow_zone(await MetaRepository(tx).zone(self._zones.pop(tx, None)))
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

    def forget_terms(self, terms: Mapping[str, int]) -> None:
        """Take deleted terms out of the vocabulary (unless a word came back under a new id)."""
        vocab = self.index.vocab
        for term, term_id in terms.items():
            if vocab.get(term) == term_id:
                del vocab[term]

    def _queue_head(self, tx: Tx) -> None:
        # Under the write lock the head cannot move until the transaction ends, so the read that
        # rides with BEGIN is the one _catch_up needs, without a trip of its own.
        self._heads[tx] = MetaRepository.queue_last_audit_seq(tx)
        self._zones[tx] = MetaRepository.queue_zone(tx)

    def _after_commit(self, tx: Tx) -> None:
        # Our own commit was applied through its callbacks; skip it in sync() if nothing came between.
        if tx.audit_seq is not None and tx.audit_seq == self._seen_seq + 1:
            self._seen_seq = tx.audit_seq

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
