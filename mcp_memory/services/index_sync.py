"""Following other processes: what they commit to the same database reaches this process's index.

Every write lists the records it touched in the audit log; the indexer (services/indexing.py)
reads just those records' stored terms since the last audit row it saw and applies them, instead
of rebuilding the index.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from mcp_memory.db import Conn, Database, Later
from mcp_memory.repositories.embeddings import EmbeddingRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.search.index import IndexDoc, SearchIndex
from mcp_memory.search.postings import decode_terms
from mcp_memory.services.index_docs import VectorFeed

logger = logging.getLogger(__name__)

_SYNC_PAGE = 1_000  # audit rows read at a time
REANALYSED = "reanalyse"
SWEPT = "sweep"
"""The audit op of a pass that deleted stored words no record used: every follower checks its vocabulary."""
"""The audit entry a finished re-analysis leaves: every record's stored terms were derived again
(and words only the old terms used may be deleted), so a follower loads them all afresh."""


@dataclass(frozen=True, slots=True)
class Changes:
    """What other processes committed since the index last looked (read by sync, then applied)."""

    ids: set[str]
    last: int
    vocab: dict[str, int]
    docs: dict[str, IndexDoc]
    vectors: Sequence[tuple[str, str, bytes]]
    zone: str | None
    """The time zone the database's date terms are analysed in now (another server may have changed it)."""
    everything: bool = False
    """Another process re-analysed every record: `vocab` and `docs` are the whole store, not changes."""
    dead: frozenset[int] = frozenset()
    """Ids of terms the changed records used here that another process deleted (no record uses them)."""


class Follower:
    """The indexer's part that applies other processes' commits to the in-memory index."""

    index: SearchIndex
    vectors: VectorFeed | None
    _seen_seq: int  # the last audit-log row whose changes the in-memory index reflects
    _vocab_mark: int  # every term id up to this one was read from the database

    async def sync(self, db: Database) -> int:
        """Apply what other processes wrote since we last looked; returns how many documents changed.

        Every write lists the records it touched in the audit log, so this re-reads just those
        records' stored terms instead of rebuilding the index.
        """
        while True:
            seen = self._seen_seq
            # Nothing new is the usual answer: one statement says so, where a snapshot costs two
            # more trips to the database's thread (its BEGIN and COMMIT) on every call.
            async with db.read(snapshot=False) as conn:
                if await MetaRepository(conn).last_audit_seq() <= seen:
                    return 0
            async with db.read() as conn:
                changes = await self._read_changes(conn)
            if changes is None:
                return 0
            # Applied only if no other catch-up applied newer commits meanwhile (ours may be older).
            if self._seen_seq == seen:
                return self._apply_changes(changes)

    async def _read_changes(self, conn: Conn, head: Later | None = None) -> Changes | None:
        """The records other processes wrote since the audit row last seen (None: nothing new)."""
        meta = MetaRepository(conn)
        if await meta.last_audit_seq(head) <= self._seen_seq:
            return None
        ids: set[str] = set()
        last = self._seen_seq
        everything = swept = False
        while True:
            rows = await meta.audit_since(last, limit=_SYNC_PAGE)
            for seq, _, changes in rows:
                last = seq
                for change in json.loads(changes):
                    if change.get("op") == REANALYSED:
                        everything = True
                    elif change.get("op") == SWEPT:
                        swept = True
                    else:
                        ids.add(change["id"])
            if len(rows) < _SYNC_PAGE:
                break
        store = SearchDocRepository(conn)
        if everything:
            docs = {doc.doc_id: doc for doc in await store.all_docs()}
            vectors = [] if self.vectors is None else await EmbeddingRepository(conn).current(self.vectors.model)
            return Changes(set(), last, await store.vocabulary(), docs, vectors, await meta.get("timezone"), True)
        # Not the largest id we know: our own new terms interleave with other processes' ones. A
        # word deleted and stored again comes back under a new id, so it is among these too.
        vocab = await store.vocabulary(after_id=self._vocab_mark)
        docs = {doc.doc_id: doc for doc in await store.get_many(sorted(ids))}
        vectors = (
            [] if self.vectors is None else await EmbeddingRepository(conn).current(self.vectors.model, sorted(docs))
        )
        # A word whose last record went there is deleted there: of the words the changed records used
        # here and use no more, those not stored now must leave the vocabulary too (a query would
        # still count them, and diagnose its terms). Most changes drop no word: nothing to ask then.
        dropped = self.index.held_terms(ids).difference(
            *(decode_terms(doc.terms)["t"].tolist() for doc in docs.values())
        )
        if swept:  # words no changed record names went too: every known one is checked (a rare pass)
            dropped = set(self.index.vocab.values())
        dead = frozenset(dropped - await store.existing_term_ids(sorted(dropped))) if dropped else frozenset()
        return Changes(ids, last, vocab, docs, vectors, await meta.get("timezone"), dead=dead)

    def _follow_zone(self, zone: str | None) -> None:
        """Analyse dates in the database's zone, which a server started with another --timezone may
        have changed (re-analysing every record): one file must not mix two calendars."""
        if zone and zone != self.index.zone.key:
            logger.warning(
                "another server re-analysed the dates in time zone %s; following it (was %s)", zone, self.index.zone.key
            )
            self.index.zone = ZoneInfo(zone)

    def _apply_changes(self, changes: Changes) -> int:
        """Bring the index in line with what _read_changes found; returns how many records changed."""
        self._follow_zone(changes.zone)
        if changes.everything:
            # Stale terms would keep old dates, and vouch for words the re-analysis deleted.
            self.index.set_vocabulary(changes.vocab)
            self.index.load(changes.docs.values())
            self.index.load_vectors(changes.vectors)
            self._vocab_mark = max(changes.vocab.values(), default=0)
            self._seen_seq = max(self._seen_seq, changes.last)
            logger.warning("another server re-analysed every record: index reloaded (%d records)", len(changes.docs))
            return len(changes.docs)
        self.index.learn_terms(changes.vocab)
        if changes.dead:
            self.index.forget_term_ids(changes.dead)
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
