"""The in-memory search index over every searchable record, one BM25 partition per project.

It never reads the database itself: the services feed it at start-up (from stored terms) and after
each committed write. Per-project partitions keep each project's statistics its own, so one
project's writes never change another's ranking, and project filtering costs nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import date, datetime
from typing import NamedTuple
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt

from mcp_memory.search import dates
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.search.bm25 import BM25Params, PartitionState
from mcp_memory.search.codes import Codes
from mcp_memory.search.docstore import Columns, DocAttrs, Filter
from mcp_memory.search.partition import Partition
from mcp_memory.search.postings import encode_terms
from mcp_memory.search.ranking import RankParams
from mcp_memory.search.termsets import TermSets


def digest_code(digest: str) -> int:
    """A text digest (hex) as the int64 the index compares; 0 when unknown."""
    return int.from_bytes(bytes.fromhex(digest[:16]), "big", signed=True) if digest else 0


class IndexDoc(NamedTuple):
    """A record as the index stores it: ids, filter attributes and packed term counts."""

    doc_id: str
    kind: str
    subtype: str | None
    project: str
    session_id: str | None
    at: float
    length: int
    terms: bytes
    seq: int = 0
    weight: float = 0.5
    digest: str = ""  # of the text indexed (hex); a vector made from other text is stale


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Caller-level filters, by name; applied before ranking."""

    kinds: frozenset[str] | None = None
    subtypes: frozenset[str] | None = None
    session_id: str | None = None
    since: float | None = None
    until: float | None = None
    subtyped_kinds: frozenset[str] | None = None
    """The kinds `subtypes` narrow (observation types narrow observations, not memories); None: every kind."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked result: which record, its kind and its BM25 score."""

    doc_id: str
    kind: str
    score: float
    at: float


@dataclass(frozen=True, slots=True)
class IndexState:
    """Everything the index holds but the vectors, detached from later writes (the index cache)."""

    vocab: dict[str, int]
    kinds: list[str | None]  # name of each code the partitions' columns use
    subtypes: list[str | None]
    sessions: list[str | None]
    partitions: dict[str, PartitionState]

    @property
    def doc_count(self) -> int:
        return sum(len(p.columns.keys) for p in self.partitions.values())


class SearchIndex:
    """BM25 partitions by project, the term vocabulary, and the analyzer used for queries."""

    def __init__(self, analyzer: Analyzer, params: BM25Params, rank: RankParams | None = None) -> None:
        self.analyzer = analyzer
        self.params = params
        self.rank = rank or RankParams()
        self.vocab: dict[str, int] = {}
        # The database's time zone: the day a record falls on, and the "today" of a query's "yesterday".
        self.zone = ZoneInfo("UTC")
        self._date_terms: set[int] = set()  # ids of date tokens, which say when, not what
        self._partitions: dict[str, Partition] = {}
        self._where: dict[str, str] = {}
        self._kinds = Codes()
        self._subtypes = Codes()
        self._sessions = Codes()

    # -- vocabulary -------------------------------------------------------------------------------

    def learn_terms(self, terms: Mapping[str, int]) -> None:
        """Add committed (term -> id) pairs to the vocabulary cache."""
        self.vocab.update(terms)
        self._date_terms.update(tid for term, tid in terms.items() if term.startswith(dates.PREFIX))

    def forget_term_ids(self, ids: AbstractSet[int]) -> None:
        """Take out of the vocabulary the terms another process deleted, by id (ids are never reused)."""
        for term in [term for term, term_id in self.vocab.items() if term_id in ids]:
            del self.vocab[term]
        self._date_terms -= ids

    def held_terms(self, doc_ids: Iterable[str]) -> set[int]:
        """Every term id (date tokens too) that the indexed documents among `doc_ids` use."""
        held: set[int] = set()
        for doc_id in doc_ids:
            project = self._where.get(doc_id)
            terms = None if project is None else self._partitions[project].terms_of(doc_id)
            if terms is not None:
                held.update(terms.tolist())
        return held

    def set_vocabulary(self, terms: Mapping[str, int]) -> None:
        """Replace the vocabulary cache with the complete committed vocabulary."""
        self.vocab = {}
        self._date_terms = set()
        self.learn_terms(terms)

    def pack(self, counts: Mapping[str, int], ids: Mapping[str, int]) -> bytes:
        """Packed (term id, count) blob for a document whose terms all have ids in `ids`."""
        return encode_terms((ids[term], count) for term, count in counts.items())

    def query_words(self, text: str, now: float | None = None) -> list[str]:
        """A query's terms, repeats kept; with `now`, the dates it names (search/dates.py) too.

        The words of an absolute date are left out once its date tokens stand for it: a day's or
        year's number would otherwise match any number ("Feb 9" finding "ruff 0.1.9").
        """
        if now is None:
            return self.analyzer.terms(text)
        found, spans = dates.query_dates(text, datetime.fromtimestamp(now, self.zone))
        return self.analyzer.terms(dates.blanked(text, spans)) + found

    def query_dates(self, text: str, now: float) -> list[dates.DatePhrase]:
        """The dates a query names, relative ones counting from the day `now` falls on here."""
        return dates.query_phrases(text, datetime.fromtimestamp(now, self.zone))

    def query_terms(self, text: str, now: float | None = None) -> list[int]:
        """Known term ids of a query, repeats kept (as rank-bm25 scores repeated query words)."""
        return [tid for term in self.query_words(text, now) if (tid := self.vocab.get(term)) is not None]

    # -- documents --------------------------------------------------------------------------------

    def load(self, docs: Iterable[IndexDoc]) -> None:
        """Replace everything with `docs` (the start-up rebuild)."""
        by_project: dict[str, list[IndexDoc]] = {}
        self._partitions.clear()
        self._where.clear()
        for doc in docs:
            by_project.setdefault(doc.project, []).append(doc)
            self._where[doc.doc_id] = doc.project
        kind, subtype, session = self._kinds.code, self._subtypes.code, self._sessions.code
        for project, rows in by_project.items():
            count = len(rows)
            self._partition(project).bulk_load(
                Columns(
                    keys=[d.doc_id for d in rows],
                    blobs=[d.terms for d in rows],
                    lengths=np.fromiter((d.length for d in rows), dtype=np.float64, count=count),
                    kinds=np.fromiter((kind(d.kind) for d in rows), dtype=np.int32, count=count),
                    subtypes=np.fromiter((subtype(d.subtype) for d in rows), dtype=np.int32, count=count),
                    sessions=np.fromiter((session(d.session_id) for d in rows), dtype=np.int32, count=count),
                    ats=np.fromiter((d.at for d in rows), dtype=np.float64, count=count),
                    seqs=np.fromiter((d.seq for d in rows), dtype=np.int32, count=count),
                    weights=np.fromiter((d.weight for d in rows), dtype=np.float64, count=count),
                    digests=np.fromiter((digest_code(d.digest) for d in rows), dtype=np.int64, count=count),
                )
            )

    def state(self) -> IndexState:
        """A copy of what the index holds (not the vectors), for the index cache."""
        return IndexState(
            vocab=dict(self.vocab),
            kinds=self._kinds.names,
            subtypes=self._subtypes.names,
            sessions=self._sessions.names,
            partitions={project: part.state() for project, part in self._partitions.items() if part.n_docs},
        )

    def restore(self, state: IndexState) -> None:
        """Replace everything with a saved state (the start-up load from the index cache)."""
        self.set_vocabulary(state.vocab)
        self._kinds, self._subtypes = Codes.of(state.kinds), Codes.of(state.subtypes)
        self._sessions = Codes.of(state.sessions)
        self._partitions.clear()
        self._where.clear()
        for project, saved in state.partitions.items():
            self._partition(project).restore(saved)
            self._where.update(dict.fromkeys(saved.columns.keys, project))

    def upsert(self, doc: IndexDoc) -> None:
        """Add or replace one document."""
        self.upsert_many([doc])

    def upsert_many(self, docs: Iterable[IndexDoc]) -> None:
        """Add or replace documents (a repeated id: the last wins), each project's in one batch."""
        by_project: dict[str, list[tuple[str, bytes, int, DocAttrs]]] = {}
        for doc in {d.doc_id: d for d in docs}.values():
            previous = self._where.get(doc.doc_id)
            if previous is not None and previous != doc.project:
                self._partitions[previous].remove(doc.doc_id)
            by_project.setdefault(doc.project, []).append((doc.doc_id, doc.terms, doc.length, self._attrs(doc)))
            self._where[doc.doc_id] = doc.project
        for project, rows in by_project.items():
            self._partition(project).add_many(rows)

    def remove(self, doc_id: str) -> bool:
        """Remove a document if it is indexed."""
        project = self._where.pop(doc_id, None)
        return project is not None and self._partitions[project].remove(doc_id)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._where

    # -- queries ----------------------------------------------------------------------------------

    def search(
        self,
        project: str,
        query: str | Sequence[int],
        flt: SearchFilter,
        limit: int,
        now: float | None = None,
        vector: npt.NDArray[np.float32] | None = None,
    ) -> list[Hit]:
        """The best `limit` documents of `project` for `query` that pass `flt`, best first.

        `now` (epoch seconds) enables the recency boost and resolves relative dates in the query;
        `vector` (the query's embedding) adds the vector ranking by fusion.
        """
        partition = self._partitions.get(project)
        if partition is None or limit <= 0:
            return []
        terms = self.query_terms(query, now) if isinstance(query, str) else list(query)
        if vector is not None and not vector.any():
            # A zero vector (nothing the model could read) is as close to every record as to none.
            vector = None
        if not terms and vector is None:
            return []
        low = self._low_filter(flt)
        if low is None:
            return []
        found = partition.search(terms, low, limit, now, vector)
        return [Hit(key, self._kind_of(partition, key), score, at) for key, score, at in found]

    def search_among(
        self, project: str, host: str, query: str, flt: SearchFilter, limit: int, now: float | None = None
    ) -> list[Hit]:
        """The best `limit` documents of `project` (global lessons) for `query`, scored as if they
        were part of `host`'s partition, so their scores rank among `host`'s hits.

        A small partition's own statistics would score them on a scale of their own (in a few
        documents every word is common, so idf is low or floored). Here each scores as a record
        of `host` would: its idf and average length (a term it lacks: as if the documents holding
        it joined it), as a record outside any session (search/ranking.py's `lone_factor`), with
        the bounded boosts.
        """
        guest, home = self._partitions.get(project), self._partitions.get(host)
        if home is None or not home.n_docs or guest is None or guest is home:
            return self.search(project, query, flt, limit, now)
        low = self._low_filter(flt)
        if low is None or limit <= 0:
            return []
        found = guest.search_as_guest(home, Counter(self.query_terms(query, now)), low, limit, now, self._date_terms)
        return [Hit(key, self._kind_of(guest, key), score, at) for key, score, at in found]

    # -- vectors ----------------------------------------------------------------------------------

    def set_vector(self, doc_id: str, digest: str, vector: npt.NDArray[np.float32]) -> bool:
        """Attach a record's embedding, if the record is still indexed from the text it was made from."""
        project = self._where.get(doc_id)
        return project is not None and self._partitions[project].set_vector(doc_id, digest_code(digest), vector)

    def load_vectors(self, rows: Sequence[tuple[str, str, bytes]]) -> int:
        """Attach stored (doc_id, digest, float32 bytes) vectors in bulk; returns how many were current."""
        if not rows:
            return 0
        dim = len(rows[0][2]) // 4  # one model, one dimension; a stray row of another size is skipped
        by_project: dict[str, list[tuple[str, str, bytes]]] = {}
        for row in rows:
            project = self._where.get(row[0])
            if project is not None and len(row[2]) == dim * 4:
                by_project.setdefault(project, []).append(row)
        loaded = 0
        for project, found in by_project.items():
            matrix = np.frombuffer(b"".join(r[2] for r in found), dtype=np.float32).reshape(len(found), dim)
            digests = np.fromiter((digest_code(r[1]) for r in found), dtype=np.int64, count=len(found))
            loaded += self._partitions[project].set_vectors([r[0] for r in found], digests, matrix)
        return loaded

    def locate(self, doc_id: str) -> tuple[str, str] | None:
        """(kind, project) of an indexed document."""
        project = self._where.get(doc_id)
        return None if project is None else (self._kind_of(self._partitions[project], doc_id), project)

    def has_vector(self, doc_id: str) -> bool:
        project = self._where.get(doc_id)
        return project is not None and self._partitions[project].has_vector(doc_id)

    def vector_count(self, project: str | None = None) -> int:
        """Indexed records that have a vector, in one project or all."""
        return sum(p.vector_count for p in self._scope(project))

    def vector_dims(self) -> set[int]:
        """The lengths of the vectors attached (one, unless the model changed behind its name)."""
        return {p.vector_dim for p in self._partitions.values() if p.vector_dim}

    def drop_vectors(self, keep_dim: int = 0) -> None:
        """Forget every vector, or every one not `keep_dim` long (another model took over)."""
        for partition in self._partitions.values():
            if partition.vector_dim != keep_dim:
                partition.drop_vectors()

    def browse(self, project: str, flt: SearchFilter) -> list[str]:
        """Every indexed id of `project` passing `flt`, newest first (no query)."""
        partition = self._partitions.get(project)
        low = self._low_filter(flt)
        return [] if partition is None or low is None else partition.filtered_keys(low)

    def date_span(self, project: str, flt: SearchFilter) -> tuple[date, date] | None:
        """The first and last day (in this index's zone) of `project`'s records passing `flt`."""
        partition = self._partitions.get(project)
        low = self._low_filter(flt)
        span = None if partition is None or low is None else partition.date_span(low)
        return None if span is None else (dates.local_day(span[0], self.zone), dates.local_day(span[1], self.zone))

    def terms_of(self, doc_id: str) -> frozenset[int]:
        """The term ids of an indexed document's words, date tokens left out (empty if not indexed)."""
        project = self._where.get(doc_id)
        terms = None if project is None else self._partitions[project].terms_of(doc_id)
        return frozenset() if terms is None else frozenset(terms.tolist()) - self._date_terms

    def similar(
        self, project: str, terms: frozenset[int], min_share: float, flt: SearchFilter, unknown: int = 0
    ) -> dict[str, float]:
        """Documents whose term sets (date tokens left out, as in `terms_of`) reach Jaccard
        >= `min_share` with `terms`, each with that Jaccard; `unknown` counts probe words that no
        document holds (they widen the union only)."""
        partition = self._partitions.get(project)
        low = self._low_filter(flt)
        if partition is None or low is None or not terms:
            return {}
        return partition.similar(terms, min_share, low, unknown, self._date_terms)

    def term_sets(self, project: str, flt: SearchFilter) -> TermSets:
        """The term sets (date tokens left out) of every document of `project` passing `flt`, for a
        pass that looks for near-duplicates among them all."""
        partition = self._partitions.get(project)
        low = self._low_filter(flt)
        if partition is None or low is None:
            return TermSets([])
        return partition.term_sets(low, self._date_terms)

    # -- statistics -------------------------------------------------------------------------------

    def doc_count(self, project: str | None = None) -> int:
        """Indexed documents, in one project or all."""
        if project is not None:
            part = self._partitions.get(project)
            return 0 if part is None else part.n_docs
        return sum(p.n_docs for p in self._partitions.values())

    def counts_by_kind(self, project: str | None = None) -> dict[str, int]:
        """Indexed documents per kind, in one project or across projects."""
        counts: Counter[str] = Counter()
        for partition in self._scope(project):
            for code, count in partition.kind_counts().items():
                counts[self._kinds.name(code) or "?"] += count
        return dict(counts)

    def posting_count(self, project: str | None = None) -> int:
        """Postings held in memory (including dead ones awaiting compaction), in one project or all."""
        return sum(p.posting_count for p in self._scope(project))

    def term_count(self, project: str | None = None) -> int:
        """Distinct terms: the vocabulary, or those occurring in one project's documents."""
        if project is None:
            return len(self.vocab)
        return sum(len(p.df) for p in self._scope(project))

    def _scope(self, project: str | None) -> list[Partition]:
        if project is None:
            return list(self._partitions.values())
        partition = self._partitions.get(project)
        return [] if partition is None else [partition]

    def projects(self) -> list[str]:
        """Projects with at least one indexed document."""
        return sorted(p for p, part in self._partitions.items() if part.n_docs)

    def partition(self, project: str) -> Partition | None:
        """The raw partition of a project (tests compare it with rank-bm25)."""
        return self._partitions.get(project)

    # -- internals --------------------------------------------------------------------------------

    def _partition(self, project: str) -> Partition:
        part = self._partitions.get(project)
        if part is None:
            part = self._partitions[project] = Partition(self.params, self.rank)
        return part

    def _attrs(self, doc: IndexDoc) -> DocAttrs:
        return DocAttrs(
            self._kinds.code(doc.kind),
            self._subtypes.code(doc.subtype),
            self._sessions.code(doc.session_id),
            doc.at,
            doc.seq,
            doc.weight,
            digest_code(doc.digest),
        )

    def _kind_of(self, partition: Partition, key: str) -> str:
        attrs = partition.attrs_of(key)
        return "" if attrs is None else self._kinds.name(attrs.kind) or ""

    def _low_filter(self, flt: SearchFilter) -> Filter | None:
        """Translate names to codes; None when a named value has never been indexed (no match)."""
        kinds = subtypes = subtyped = None
        if flt.kinds is not None:
            kinds = frozenset(c for k in flt.kinds if (c := self._kinds.lookup(k)) is not None)
            if not kinds:
                return None
        if flt.subtypes is not None:
            subtypes = frozenset(c for k in flt.subtypes if (c := self._subtypes.lookup(k)) is not None)
            if flt.subtyped_kinds is not None:
                subtyped = frozenset(c for k in flt.subtyped_kinds if (c := self._kinds.lookup(k)) is not None)
            elif not subtypes:
                return None
        session = None
        if flt.session_id is not None:
            session = self._sessions.lookup(flt.session_id)
            if session is None:
                return None
        return Filter(kinds, subtypes, session, flt.since, flt.until, subtyped)
