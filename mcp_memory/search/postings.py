"""Posting lists: the stored (term id, count) form of a document, and the documents of each term.

A partition (search/bm25.py) keeps one Postings per term: settled NumPy arrays plus a compact
buffer of what was added since; a full load groups every document's pairs by term at once.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mcp_memory.search.docstore import Columns, IntArray

TERM_DTYPE = np.dtype([("t", "<i4"), ("f", "<u2")])
"""Stored form of a document's terms: (term id, count) pairs, 6 bytes each."""

MAX_TF = 65_535


def encode_terms(counts: Iterable[tuple[int, int]]) -> bytes:
    """Pack (term id, count) pairs into the stored blob form."""
    pairs = sorted(counts)
    arr = np.empty(len(pairs), dtype=TERM_DTYPE)
    if pairs:
        arr["t"] = [t for t, _ in pairs]
        arr["f"] = [min(f, MAX_TF) for _, f in pairs]
    return arr.tobytes()


def decode_terms(blob: bytes) -> npt.NDArray[np.void]:
    """Unpack a stored blob into a structured array with fields `t` and `f`."""
    return np.frombuffer(blob, dtype=TERM_DTYPE)


EMPTY_DOCS: IntArray = np.empty(0, dtype=np.int32)
EMPTY_TFS: npt.NDArray[np.uint16] = np.empty(0, dtype=np.uint16)


class Postings:
    """Documents containing one term: settled arrays plus a compact buffer of recent additions."""

    __slots__ = ("_room_docs", "_room_tfs", "added", "docs", "tfs")

    def __init__(self, docs: IntArray, tfs: npt.NDArray[np.uint16]) -> None:
        self.docs = docs
        self.tfs = tfs
        # Created on the first incremental add: one C array of `doc << 16 | tf`, not lists of tuples,
        # because a bulk import adds millions of postings before a query settles them (8 bytes
        # each, not ~70), and one array rather than two, because a save creates ~80 of them.
        self.added: array[int] | None = None
        # Once settled, `docs` and `tfs` are the start of these, with room after them, so settling a
        # few additions copies those, not the whole list (a common word's 70k postings, after every
        # save, on the next query). A loaded slice has none: the next term's postings follow it.
        self._room_docs: IntArray | None = None
        self._room_tfs: npt.NDArray[np.uint16] | None = None

    def append(self, doc: int, tf: int) -> None:
        if self.added is None:
            self.added = array("q")
        self.added.append(doc << 16 | tf)

    def extend(self, docs: IntArray, tfs: npt.NDArray[np.uint16]) -> None:
        if self.added is None:
            self.added = array("q")
        packed = docs.astype(np.int64) << 16
        packed |= tfs
        self.added.frombytes(packed.tobytes())

    def settle(self) -> None:
        """Move the recent additions into the arrays, growing them by a quarter when full."""
        if self.added:
            packed = np.frombuffer(self.added, dtype=np.int64)
            have, total = len(self.docs), len(self.docs) + len(packed)
            room_docs, room_tfs = self._room_docs, self._room_tfs
            if room_docs is None or room_tfs is None or len(room_docs) < total:
                capacity = total + max(16, total // 4)
                room_docs, room_tfs = np.empty(capacity, dtype=np.int32), np.empty(capacity, dtype=np.uint16)
                room_docs[:have], room_tfs[:have] = self.docs, self.tfs
                self._room_docs, self._room_tfs = room_docs, room_tfs
            # past the end of `docs`: views handed out before never see these places
            room_docs[have:total] = packed >> 16
            room_tfs[have:total] = packed & 0xFFFF
            self.docs, self.tfs = room_docs[:total], room_tfs[:total]
        self.added = None

    def __len__(self) -> int:
        return len(self.docs) + len(self.added or ())

    @classmethod
    def empty(cls) -> Postings:
        return cls(EMPTY_DOCS, EMPTY_TFS)


def group_by_term(pairs: npt.NDArray[np.void], owners: IntArray) -> tuple[IntArray, IntArray, npt.NDArray[np.uint16]]:
    """(terms, docs, tfs) of every posting, ordered by term (then document).

    Sorting one packed int64 key (term | doc | tf) is about twice as fast as an argsort of the
    terms followed by three gathers; it applies while ids fit their bit fields. Callers pass both
    arrays as temporaries, so dropping them here frees them before the sort (a million records
    carry ~90 million postings: every full-size temporary is hundreds of MiB).
    """
    terms = pairs["t"].astype(np.int64)
    if len(terms) and (int(terms.max()) >= 1 << 23 or int(owners.max()) >= 1 << 24):
        order = np.argsort(terms, kind="stable")
        return terms[order].astype(np.int32), owners[order].astype(np.int32), pairs["f"][order]
    # in place: each temporary of a few million int64s costs more in page faults than in arithmetic
    key = terms
    key <<= 24
    key |= owners
    del owners
    key <<= 16
    key |= pairs["f"]
    del pairs
    key.sort()
    tfs = key.astype(np.uint16)  # the low 16 bits
    key >>= 16
    docs = (key & 0xFFFFFF).astype(np.int32)
    key >>= 24
    return key.astype(np.int32), docs, tfs


def term_runs(terms: IntArray) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Start and end offsets of each run of equal values in sorted `terms`."""
    if not len(terms):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    starts = np.concatenate([[0], np.flatnonzero(np.diff(terms)) + 1]).astype(np.int64)
    return starts, np.concatenate([starts[1:], [len(terms)]]).astype(np.int64)


@dataclass(frozen=True, slots=True)
class GroupedPostings:
    """Every posting of a partition grouped by term: term i's documents are docs[ends[i-1]:ends[i]]."""

    terms: IntArray  # distinct term ids, ascending
    ends: npt.NDArray[np.int64]
    docs: IntArray
    tfs: npt.NDArray[np.uint16]


def group_postings(columns: Columns) -> GroupedPostings:
    """The postings of documents given as columns (document i is local id i)."""
    count = len(columns.keys)
    sizes = np.fromiter((len(b) // TERM_DTYPE.itemsize for b in columns.blobs), dtype=np.int64, count=count)
    terms, docs, tfs = group_by_term(
        decode_terms(b"".join(columns.blobs)), np.repeat(np.arange(count, dtype=np.int32), sizes)
    )
    starts, ends = term_runs(terms)
    return GroupedPostings(terms[starts].astype(np.int32), ends, docs, tfs)
