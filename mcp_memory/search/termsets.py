"""Near-duplicates among a fixed group of documents, for passes that compare each with all the rest.

One query against the whole index reads every posting of its terms, most of them of documents of
other kinds (a common word is in half the observations); a pass over thousands of memories would
read them thousands of times. This holds just the group's term sets, each ordered rarest term
first (by how many members hold it), and answers a probe one of two exact ways, whichever reads
less:

- prefix filtering: two sets at Jaccard >= t share a term among each one's first
  `n - ceil(t * n) + 1`, and what follows the first shared term on both sides bounds their
  overlap; so only those prefixes are indexed, a probe reads the postings of its own prefix (rare
  terms, short lists), and the few candidates left are compared in full;
- every posting of the probe's terms counted at once for all members, which wins at a low
  threshold, when prefixes hold most terms.

Comparing each of 100,000 synthetic memories with all the rest at the supersede threshold took
57 s the second way alone, and takes 9 s choosing between them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memory.search.postings import TERM_DTYPE, decode_terms

IntArray = npt.NDArray[np.int32]
Int64Array = npt.NDArray[np.int64]
Ints = npt.NDArray[np.integer[Any]]

_SLACK = 1e-9
"""Kept off `t * n` before rounding up: 0.7 * 10 is 7.000000000000001, and a need one too high
would shorten a prefix past a true match. Too low only lengthens prefixes, which stays exact."""

_LOW = 0xFFFFFFFF
"""The low 32 bits, where a pair packed in one int64 (to sort by both at once) keeps its second."""


def _distinct(values: Int64Array) -> Int64Array:
    """`values` sorted, each once (a sort and a pass: quicker than np.unique's hashing at this size)."""
    ordered = np.sort(values)
    return ordered[np.diff(ordered, prepend=-1) != 0] if len(ordered) else ordered


def _counted(values: Ints) -> tuple[Ints, Int64Array]:
    """The distinct `values`, ascending, and how many times each came."""
    ordered = np.sort(values)
    firsts = np.flatnonzero(np.diff(ordered, prepend=-1))
    return ordered[firsts], np.diff(firsts, append=len(ordered))


def _ranges(starts: Int64Array, lengths: Int64Array) -> Int64Array:
    """The positions start..start+length of every range, one after another."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    shift = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return shift + np.arange(total, dtype=np.int64)


def _flattened(sets: list[IntArray | bytes]) -> tuple[Int64Array, Int64Array]:
    """Every term of every set, one set after another, and the place of the set each came from."""
    blobs = [s for s in sets if isinstance(s, bytes)]
    if len(blobs) == len(sets):  # stored blobs: one decoding for them all
        sizes = [len(b) // TERM_DTYPE.itemsize for b in blobs]
        terms = decode_terms(b"".join(blobs))["t"].astype(np.int64)
    else:
        arrays = [decode_terms(s)["t"] if isinstance(s, bytes) else s for s in sets]
        sizes = [len(a) for a in arrays]
        terms = np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, dtype=np.int64)
    return terms, np.repeat(np.arange(len(sets), dtype=np.int64), sizes)


class _Postings:
    """For each term rank, the members holding it, `members[starts[r]:starts[r + 1]]`, and (when
    `placed`) each one's place for that term, 0 for its rarest; only prefix filtering needs those."""

    def __init__(
        self, ranks: Ints, positions: Int64Array, owners: Ints, offsets: Int64Array, vocab: int, placed: bool
    ) -> None:
        """The postings of the terms at `positions` (ascending) of the members' terms, of `ranks`."""
        # one sort of (rank, position) pairs packed in an int64: quicker than a stable argsort
        at = np.sort((ranks.astype(np.int64) << 32) | positions) & _LOW
        self.members = owners[at]
        self.places = (at - offsets[self.members]).astype(np.int32) if placed else self.members[:0]
        self.starts = np.concatenate(([0], np.cumsum(np.bincount(ranks, minlength=vocab)))).astype(np.int64)

    def lengths(self, ranks: Int64Array) -> Int64Array:
        """How many members hold each of `ranks`."""
        return self.starts[ranks + 1] - self.starts[ranks]

    def holding(self, ranks: Int64Array) -> Int64Array:
        """The members holding each of `ranks`, one list after another (slices: quicker than `at`)."""
        bounds = zip(self.starts[ranks].tolist(), self.starts[ranks + 1].tolist(), strict=True)
        return np.concatenate([self.members[:0], *(self.members[start:end] for start, end in bounds)])

    def at(self, ranks: Int64Array) -> Int64Array:
        """Positions of the postings of `ranks`, the first rank's first."""
        return _ranges(self.starts[ranks], self.lengths(ranks))


class TermSets:
    """The distinct term ids of each of a group of documents, searchable by Jaccard overlap."""

    def __init__(self, members: Iterable[tuple[str, IntArray | bytes]], leave_out: Iterable[int] = ()) -> None:
        """`members` are (key, term ids) pairs, the ids an array or a stored term blob (see
        search/postings.py); the terms in `leave_out` are dropped from every set. The sets are
        only kept here: `prepare` does the work, decoding included."""
        keys: list[str] = []
        sets: list[IntArray | bytes] = []
        for key, terms in members:
            keys.append(key)
            sets.append(terms)
        self.keys = keys
        self._sets: list[IntArray | bytes] | None = sets
        self._leave_out = np.fromiter(leave_out, dtype=np.int64)
        self._prefixes: dict[float, _Postings] = {}

    def prepare(self, *min_shares: float) -> None:
        """Order the sets and index them (and their prefixes for each of `min_shares`) ahead of the
        first probe. Pure NumPy on data of its own, so a pass can run it in a worker thread."""
        if self._sets is not None:
            self._build(self._sets)
            self._sets = None
        for min_share in min_shares:
            self._prefix_index(min_share)

    def _build(self, sets: list[IntArray | bytes]) -> None:
        """Each set's distinct terms ranked rarest first, and the postings of every term."""
        terms, docs = _flattened(sets)
        keep = ~np.isin(terms, self._leave_out)
        docs, terms = docs[keep], terms[keep]
        if np.any((np.diff(terms) <= 0) & (np.diff(docs) == 0)):  # the index gives each set sorted, once
            pairs = _distinct((docs << 32) | terms)
            docs, terms = pairs >> 32, pairs & _LOW
        # Rank every term the group holds, rarest first (ties by id): one order shared by all sets.
        self._vocab, held_by = _counted(terms)
        ranked = np.lexsort((self._vocab, held_by))
        self._rank_of = np.empty(len(self._vocab), dtype=np.int64)
        self._rank_of[ranked] = np.arange(len(self._vocab))
        self._ranks = (np.sort((docs << 32) | self._ranked(terms)) & _LOW).astype(np.int32)  # rarest first
        self._sizes = np.bincount(docs, minlength=len(self.keys)).astype(np.int64)
        self._offsets = np.concatenate(([0], np.cumsum(self._sizes))).astype(np.int64)
        self._owners = np.repeat(np.arange(len(self.keys), dtype=np.int32), self._sizes)
        everywhere = np.arange(len(self._ranks), dtype=np.int64)
        self._all = _Postings(self._ranks, everywhere, self._owners, self._offsets, len(self._vocab), False)
        self._marked = np.zeros(len(self._vocab), dtype=bool)  # the probe's ranks, while one is compared

    def _ranked(self, terms: Ints) -> Int64Array:
        """The rank of each of `terms`, all held by the group."""
        top = int(self._vocab[-1]) + 1 if len(self._vocab) else 0
        if top > 4 * len(terms) + (1 << 20):  # ids too sparse for a table by id
            return self._rank_of[np.searchsorted(self._vocab, terms)]
        table = np.zeros(top, dtype=np.int64)
        table[self._vocab] = self._rank_of  # a table by term id: quicker than a search per term
        ranks: Int64Array = table[terms]
        return ranks

    def __len__(self) -> int:
        return len(self.keys)

    def similar(self, terms: Iterable[int], min_share: float, unknown: int = 0) -> dict[str, float]:
        """Members whose term sets reach Jaccard >= `min_share` with `terms`, each with that Jaccard
        (computed as `len(a & b) / len(a | b)`); `unknown` counts probe words no member can hold."""
        self.prepare()
        probe = np.unique(np.fromiter(terms, dtype=np.int64))
        size = len(probe) + unknown
        if not len(probe) or not len(self._vocab):
            return {}
        at = np.searchsorted(self._vocab, probe).clip(max=len(self._vocab) - 1)
        known = np.sort(self._rank_of[at[self._vocab[at] == probe]])
        # Terms no member holds come first in the order (the rarest of all) and match nothing.
        absent = size - len(known)
        prefix = known[: max(0, size - self._need(min_share, size) + 1 - absent)]
        if not len(prefix):
            return {}
        index = self._prefix_index(min_share)
        # Measured: a prefix posting costs about sixty times a counted one (sorted by member, then
        # its member compared in full), and counting also costs about one per member.
        if 60 * index.lengths(prefix).sum() < self._all.lengths(known).sum() + len(self.keys):
            candidates = self._candidates(index, prefix, absent, size, min_share)
            sizes = self._sizes[candidates]
            owner = np.repeat(np.arange(len(candidates), dtype=np.int64), sizes)
            self._marked[known] = True
            held = self._ranks[_ranges(self._offsets[candidates], sizes)]
            shared = np.bincount(owner[self._marked[held]], minlength=len(candidates))
            self._marked[known] = False
        else:
            candidates, sizes = None, self._sizes
            shared = np.bincount(self._all.holding(known), minlength=len(self.keys))
        # float64 division of the same integers: equal to Python's len(a & b) / len(a | b)
        share = shared / (size + sizes - shared)
        hits = np.flatnonzero((shared > 0) & (share >= min_share)).tolist()
        members = hits if candidates is None else candidates[hits].tolist()
        return {self.keys[m]: float(share[h]) for h, m in zip(hits, members, strict=True)}

    @staticmethod
    def _need(min_share: float, sizes: int | Int64Array) -> Int64Array:
        """Fewest shared terms a set of each size has with any set it reaches `min_share` with."""
        return np.ceil(np.multiply(min_share, sizes) - _SLACK).astype(np.int64)

    def _prefix_index(self, min_share: float) -> _Postings:
        """The postings of every member's prefix for `min_share`, made on first use."""
        self.prepare()
        index = self._prefixes.get(min_share)
        if index is None:
            lengths = np.clip(self._sizes - self._need(min_share, self._sizes) + 1, 0, self._sizes)
            at = _ranges(self._offsets[:-1], lengths)
            index = _Postings(self._ranks[at], at, self._owners, self._offsets, len(self._vocab), True)
            self._prefixes[min_share] = index
        return index

    def _candidates(self, index: _Postings, prefix: Int64Array, first_place: int, size: int, min_share: float) -> Ints:
        """Members whose prefix shares a term with the probe's `prefix` (its rarest known terms, the
        first at place `first_place`), less those whose overlap cannot reach `min_share`."""
        at = index.at(prefix)  # rarest probe term first, so a member's first posting is its rarest shared
        members: Ints
        first: Int64Array
        members, first = np.unique(index.members[at], return_index=True)
        probe_place = np.repeat(np.arange(len(prefix), dtype=np.int64) + first_place, index.lengths(prefix))[first]
        sizes = self._sizes[members]
        # Every shared term comes at or after the rarest one on both sides, so what follows it there
        # bounds the overlap, and a pair at the threshold shares t / (1 + t) of both sizes together.
        most = np.minimum(size - probe_place, sizes - index.places[at][first])
        kept: Ints = members[most >= self._need(min_share / (1 + min_share), size + sizes)]
        return kept
