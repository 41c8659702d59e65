"""The documents of one BM25 partition: ids, filter attributes, and each session's order.

Local ids index numpy arrays of per-document attributes, so filters and ranking steps run
vectorised. Episodic records (a session's observations, in order) are linked to their
neighbours, which ranking uses to let a record collect its context's scores.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int32]

_ARRAYS = (
    "_dl", "_alive", "_kind", "_subtype", "_session", "_at", "_seq", "_weight", "_prev", "_next", "_digest", "_has_vec",
)  # fmt: skip


_RIGHT_ANGLE = 1e-6
"""Cosines at or below this count as a right angle to the query: no semantic match."""


@dataclass(frozen=True, slots=True)
class DocAttrs:
    """What filters look at: small integer codes chosen by the caller, and a time in epoch seconds."""

    kind: int
    subtype: int
    session: int
    at: float
    seq: int = 0  # position in its session (episodic records only; 0 = none)
    weight: float = 0.5  # importance, 0..1
    digest: int = 0  # of the indexed text: a vector belongs to the text it was made from


@dataclass(frozen=True, slots=True)
class Filter:
    """Restrictions applied to candidates before ranking (None means no restriction)."""

    kinds: frozenset[int] | None = None
    subtypes: frozenset[int] | None = None
    session: int | None = None
    since: float | None = None
    until: float | None = None
    subtyped: frozenset[int] | None = None  # the kinds `subtypes` narrow; None: every kind


@dataclass(frozen=True, slots=True)
class Columns:
    """A batch of documents as columns, for a vectorised bulk load."""

    keys: list[str]
    blobs: list[bytes]
    lengths: npt.NDArray[np.float64]
    kinds: npt.NDArray[np.int32]
    subtypes: npt.NDArray[np.int32]
    sessions: npt.NDArray[np.int32]
    ats: npt.NDArray[np.float64]
    seqs: npt.NDArray[np.int32]
    weights: npt.NDArray[np.float64]
    digests: npt.NDArray[np.int64]


def _one_of(values: IntArray, codes: frozenset[int]) -> npt.NDArray[np.bool_]:
    """values ∈ codes; a few equality tests beat np.isin for the handful of codes filters use."""
    if len(codes) > 4:
        return np.isin(values, list(codes))
    hit = np.zeros(len(values), dtype=bool)
    for code in codes:
        hit |= values == code
    return hit


class DocStore:
    """Keys, stored term blobs and per-document arrays, grown by doubling."""

    def _reset_docs(self) -> None:
        self.keys: list[str | None] = []
        self.local: dict[str, int] = {}
        self.blobs: list[bytes | None] = []
        self._dl = np.zeros(16, dtype=np.float64)
        self._alive = np.zeros(16, dtype=bool)
        self._kind = np.zeros(16, dtype=np.int32)
        self._subtype = np.zeros(16, dtype=np.int32)
        self._session = np.zeros(16, dtype=np.int32)
        self._at = np.zeros(16, dtype=np.float64)
        self._seq = np.zeros(16, dtype=np.int32)
        self._weight = np.zeros(16, dtype=np.float64)
        self._prev = np.full(16, -1, dtype=np.int32)
        self._next = np.full(16, -1, dtype=np.int32)
        self._digest = np.zeros(16, dtype=np.int64)  # of the indexed text; 0 = unknown
        self._has_vec = np.zeros(16, dtype=bool)
        # One embedding row per local id; no columns until the first vector says its dimension.
        self._vectors: npt.NDArray[np.float32] = np.zeros((16, 0), dtype=np.float32)
        # Each session's episodic records in order, as (seq, local id): the neighbour links.
        self._chains: dict[int, list[tuple[int, int]]] = {}

    def _load_docs(self, columns: Columns) -> None:
        """Fill the store from columns (the store was just reset)."""
        count = len(columns.keys)
        self._grow(count)
        self.keys, self.blobs = list(columns.keys), list(columns.blobs)
        self.local = {key: i for i, key in enumerate(columns.keys)}
        self._dl[:count] = columns.lengths
        self._alive[:count] = True
        self._kind[:count] = columns.kinds
        self._subtype[:count] = columns.subtypes
        self._session[:count] = columns.sessions
        self._at[:count] = columns.ats
        self._seq[:count] = columns.seqs
        self._weight[:count] = columns.weights
        self._digest[:count] = columns.digests
        self._build_chains(count)

    def _live_columns(self) -> Columns:
        """The live documents as columns, in local-id order (copies: later writes leave them be)."""
        live = np.flatnonzero(self._alive[: len(self.keys)]).astype(np.int32)
        if len(live) == len(self.keys):  # nothing removed: no None in the lists
            keys, blobs = cast(list[str], list(self.keys)), cast(list[bytes], list(self.blobs))
        else:
            keys = [self.keys[i] or "" for i in live.tolist()]
            blobs = [self.blobs[i] or b"" for i in live.tolist()]
        return Columns(
            keys=keys,
            blobs=blobs,
            lengths=self._dl[live],
            kinds=self._kind[live],
            subtypes=self._subtype[live],
            sessions=self._session[live],
            ats=self._at[live],
            seqs=self._seq[live],
            weights=self._weight[live],
            digests=self._digest[live],
        )

    def filtered_keys(self, flt: Filter) -> list[str]:
        """Keys of every live document passing the filter (no ranking), newest first."""
        docs = np.flatnonzero(self._alive[: len(self.keys)]).astype(np.int32)
        docs = docs[self._mask(docs, flt)]
        order = np.argsort(-self._at[docs], kind="stable")
        return [self.keys[i] or "" for i in docs[order].tolist()]

    def filtered_blobs(self, flt: Filter) -> list[tuple[str, bytes]]:
        """Every live document passing the filter, as (key, stored term blob), in local-id order."""
        docs = np.flatnonzero(self._alive[: len(self.keys)]).astype(np.int32)
        docs = docs[self._mask(docs, flt)].tolist()
        return [(self.keys[i] or "", self.blobs[i] or b"") for i in docs]

    def date_span(self, flt: Filter) -> tuple[float, float] | None:
        """The earliest and latest date (epoch seconds) of the live documents passing the filter."""
        count = len(self.keys)
        ats = self._at[:count][self._alive[:count] & self._mask(None, flt)]
        return (float(ats.min()), float(ats.max())) if len(ats) else None

    def kind_counts(self) -> dict[int, int]:
        """Live documents per kind code."""
        live = self._kind[: len(self.keys)][self._alive[: len(self.keys)]]
        codes, counts = np.unique(live, return_counts=True)
        return dict(zip(codes.tolist(), counts.tolist(), strict=True))

    def attrs_of(self, key: str) -> DocAttrs | None:
        """The filter attributes of a live document, or None."""
        i = self.local.get(key)
        return None if i is None else self._attrs(i)

    def _mask(self, docs: IntArray | None, flt: Filter) -> npt.NDArray[np.bool_]:
        """Which of `docs` (None: every local id) pass the filter."""
        if docs is None:
            count = len(self.keys)
            keep = np.ones(count, dtype=bool)
            docs = slice(0, count)  # type: ignore[assignment]  # a view, not a gather
        else:
            keep = np.ones(len(docs), dtype=bool)
        if flt.kinds is not None:
            keep &= _one_of(self._kind[docs], flt.kinds)
        if flt.subtypes is not None:
            typed = _one_of(self._subtype[docs], flt.subtypes)
            if flt.subtyped is not None:  # records of other kinds pass whatever their subtype
                typed |= ~_one_of(self._kind[docs], flt.subtyped)
            keep &= typed
        if flt.session is not None:
            keep &= self._session[docs] == flt.session
        if flt.since is not None:
            keep &= self._at[docs] >= flt.since
        if flt.until is not None:
            keep &= self._at[docs] <= flt.until
        return keep

    def _allocate(self) -> int:
        i = len(self.keys)
        if i >= len(self._dl):
            self._grow(max(16, 2 * i))
        return i

    def _grow(self, capacity: int) -> None:
        if capacity <= len(self._dl):
            return
        for name in _ARRAYS:
            old = getattr(self, name)
            new = np.full(capacity, -1 if name in ("_prev", "_next") else 0, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        vectors = np.zeros((capacity, self._vectors.shape[1]), dtype=np.float32)
        vectors[: len(self._vectors)] = self._vectors
        self._vectors = vectors

    # -- vectors ----------------------------------------------------------------------------------

    @property
    def vector_dim(self) -> int:
        """Dimension of the stored vectors (0 before the first one)."""
        return int(self._vectors.shape[1])

    @property
    def vector_count(self) -> int:
        """Live documents that have a vector."""
        n = len(self.keys)
        return int(np.count_nonzero(self._has_vec[:n] & self._alive[:n]))

    def set_vector(self, key: str, digest: int, vector: npt.NDArray[np.float32]) -> bool:
        """Attach a unit-length vector to a live document indexed from the text `digest` names.

        Returns False (and stores nothing) when the document is gone, was re-indexed from other
        text since the vector was made, or the vector's dimension is not the index's (one model).
        """
        i = self.local.get(key)
        if i is None or self._digest[i] != digest or len(vector) != (self.vector_dim or len(vector)):
            return False
        if self.vector_dim == 0:
            self._vectors = np.zeros((len(self._dl), len(vector)), dtype=np.float32)
        self._vectors[i] = vector
        self._has_vec[i] = True
        return True

    def has_vector(self, key: str) -> bool:
        i = self.local.get(key)
        return i is not None and bool(self._has_vec[i])

    def drop_vectors(self) -> None:
        """Forget every vector (the model changed)."""
        self._has_vec[:] = False
        self._vectors = np.zeros((len(self._dl), 0), dtype=np.float32)

    def nearest(
        self, vector: npt.NDArray[np.float32], flt: Filter, depth: int
    ) -> tuple[IntArray, npt.NDArray[np.float32]]:
        """The `depth` live documents passing `flt` closest to `vector`, and their cosines, closest first."""
        n = len(self.keys)
        if self.vector_dim != len(vector) or n == 0:
            return np.empty(0, dtype=np.int32), np.empty(0, dtype=np.float32)
        docs = np.flatnonzero(self._has_vec[:n] & self._alive[:n]).astype(np.int32)
        docs = docs[self._mask(docs, flt)]
        # one matrix-vector product over every row beats gathering the candidates' rows first
        sims = (self._vectors[:n] @ vector)[docs] if len(docs) else np.empty(0, dtype=np.float32)
        # A record at a right angle to the query, or facing away, is no semantic match. Float32
        # rounding gives a right angle a cosine of about ±1e-8 that depends on where its row lies,
        # so "above 0" alone let a process's layout decide what another process left out.
        close = sims > _RIGHT_ANGLE
        docs, sims = docs[close], sims[close]
        keep = self.best(docs, sims, depth)
        return docs[keep], sims[keep]

    def best(self, docs: IntArray, key: npt.NDArray[np.floating[Any]], limit: int) -> npt.NDArray[np.int64]:
        """Positions in `docs` of the `limit` highest by `key`, highest first; ties go to the newer
        document, then the key, so which of equals are kept never depends on numpy's selection."""
        if len(docs) == 0 or limit <= 0:
            return np.empty(0, dtype=np.int64)
        pos = np.arange(len(docs))
        if len(docs) > limit:
            # argpartition first so a huge candidate set costs O(n), then sort the survivors exactly
            pos = np.flatnonzero(key >= key[np.argpartition(-key, limit - 1)[:limit]].min())
        chosen = docs[pos]
        names = [self.keys[i] or "" for i in chosen.tolist()]
        rows = zip(key[pos].tolist(), self._at[chosen].tolist(), names, pos.tolist(), strict=True)
        order = sorted(rows, key=lambda r: (-r[0], -r[1], r[2]))[:limit]
        return np.fromiter((r[3] for r in order), dtype=np.int64, count=len(order))

    def set_vectors(self, keys: Sequence[str], digests: npt.NDArray[np.int64], matrix: npt.NDArray[np.float32]) -> int:
        """Attach many vectors at once (the start-up load); returns how many were current."""
        rows = np.fromiter((self.local.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
        ok = rows >= 0
        ok[ok] = self._digest[rows[ok]] == digests[ok]
        if not ok.any() or matrix.shape[1] != (self.vector_dim or matrix.shape[1]):
            return 0
        if self.vector_dim == 0:
            self._vectors = np.zeros((len(self._dl), matrix.shape[1]), dtype=np.float32)
        self._vectors[rows[ok]] = matrix[ok]
        self._has_vec[rows[ok]] = True
        return int(ok.sum())

    def _saved_vector(self, key: str) -> tuple[int, npt.NDArray[np.float32]] | None:
        """(digest, vector) of a document about to be replaced, if it has a vector."""
        i = self.local.get(key)
        return None if i is None or not self._has_vec[i] else (int(self._digest[i]), self._vectors[i].copy())

    def _restore_vector(self, i: int, saved: tuple[int, npt.NDArray[np.float32]] | None) -> None:
        """Give a re-indexed document back its vector when its text did not change."""
        if saved is not None and saved[0] == self._digest[i] != 0:
            self._vectors[i] = saved[1]
            self._has_vec[i] = True

    def _keep_vectors(self, live: IntArray) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        return self._vectors[live].copy(), self._has_vec[live].copy()

    def _put_back_vectors(self, kept: tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]) -> None:
        """After a compaction renumbered the documents 0..n-1 in their old order."""
        vectors, has = kept
        if has.any():
            self._vectors = np.zeros((len(self._dl), vectors.shape[1]), dtype=np.float32)
            self._vectors[: len(vectors)] = vectors
            self._has_vec[: len(has)] = has

    def _set_attrs(self, i: int, length: int, attrs: DocAttrs) -> None:
        self._dl[i] = length
        self._alive[i] = True
        self._kind[i] = attrs.kind
        self._subtype[i] = attrs.subtype
        self._session[i] = attrs.session
        self._at[i] = attrs.at
        self._seq[i] = attrs.seq
        self._weight[i] = attrs.weight
        self._digest[i] = attrs.digest
        self._has_vec[i] = False

    def _retag(self, i: int, attrs: DocAttrs) -> bool:
        """Give document `i` the kind, type, time and importance of `attrs` if its session, position
        and text digest are those of `attrs` (its links and vector then stay as they are)."""
        if (int(self._session[i]), int(self._seq[i]), int(self._digest[i])) != (attrs.session, attrs.seq, attrs.digest):
            return False
        self._kind[i], self._subtype[i] = attrs.kind, attrs.subtype
        self._at[i], self._weight[i] = attrs.at, attrs.weight
        return True

    def _attrs(self, i: int) -> DocAttrs:
        return DocAttrs(
            int(self._kind[i]),
            int(self._subtype[i]),
            int(self._session[i]),
            float(self._at[i]),
            int(self._seq[i]),
            float(self._weight[i]),
            int(self._digest[i]),
        )

    def _link(self, i: int, session: int, seq: int) -> None:
        chain = self._chains.setdefault(session, [])
        place = bisect.bisect_left(chain, (seq, i))
        chain.insert(place, (seq, i))
        before = chain[place - 1][1] if place > 0 else -1
        after = chain[place + 1][1] if place + 1 < len(chain) else -1
        self._prev[i], self._next[i] = before, after
        if before >= 0:
            self._next[before] = i
        if after >= 0:
            self._prev[after] = i

    def _unlink(self, i: int) -> None:
        if self._seq[i] <= 0 or not self._session[i]:
            return
        chain = self._chains.get(int(self._session[i]), [])
        place = bisect.bisect_left(chain, (int(self._seq[i]), i))
        if place < len(chain) and chain[place][1] == i:
            del chain[place]
        before, after = int(self._prev[i]), int(self._next[i])
        if before >= 0:
            self._next[before] = after
        if after >= 0:
            self._prev[after] = before
        self._prev[i] = self._next[i] = -1

    def _build_chains(self, count: int) -> None:
        """Neighbour links of every episodic record, after a bulk load."""
        self._prev[:count] = -1
        self._next[:count] = -1
        members = np.flatnonzero((self._seq[:count] > 0) & (self._session[:count] != 0)).astype(np.int32)
        order = members[np.lexsort((members, self._seq[members], self._session[members]))]
        if len(order) > 1:
            same = self._session[order[1:]] == self._session[order[:-1]]
            self._next[order[:-1][same]] = order[1:][same]
            self._prev[order[1:][same]] = order[:-1][same]
        sessions = self._session[order]
        cuts = (np.flatnonzero(sessions[1:] != sessions[:-1]) + 1).tolist() if len(order) else []
        starts, ends = [0, *cuts], [*cuts, len(order)]
        locals_, seqs = order.tolist(), self._seq[order].tolist()
        self._chains = {
            int(sessions[start]): list(zip(seqs[start:end], locals_[start:end], strict=True))
            for start, end in zip(starts, ends, strict=True)
            if end > start
        }
