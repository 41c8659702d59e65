"""Near-duplicates among a fixed group of documents, for passes that compare each with all the rest.

One query against the whole index reads every posting of its terms, most of them of documents of
other kinds (a common word is in half the observations); a pass over thousands of memories would
read them thousands of times. This holds just the group's term sets, sorted by term, so each probe
reads only the group's own postings and scores every member at once.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int32]


class TermSets:
    """The distinct term ids of each of a group of documents, searchable by Jaccard overlap."""

    def __init__(self, members: Iterable[tuple[str, IntArray]], leave_out: Iterable[int] = ()) -> None:
        """`members` are (key, term ids) pairs; the terms in `leave_out` are dropped from every set."""
        keys: list[str] = []
        arrays: list[IntArray] = []
        for key, terms in members:
            keys.append(key)
            arrays.append(terms)
        self.keys = keys
        terms = np.concatenate(arrays).astype(np.int32) if arrays else np.zeros(0, dtype=np.int32)
        docs = np.repeat(np.arange(len(arrays), dtype=np.int32), [len(a) for a in arrays])
        keep = ~np.isin(terms, np.fromiter(leave_out, dtype=np.int32))
        terms, docs = terms[keep], docs[keep]
        order = np.lexsort((docs, terms))
        terms, docs = terms[order], docs[order]
        distinct = np.ones(len(terms), dtype=bool)  # a term counted once per set, however often it came
        distinct[1:] = (terms[1:] != terms[:-1]) | (docs[1:] != docs[:-1])
        self._terms, self._docs = terms[distinct], docs[distinct]
        self._sizes = np.bincount(self._docs, minlength=len(keys)).astype(np.int64)

    def __len__(self) -> int:
        return len(self.keys)

    def similar(self, terms: Iterable[int], min_share: float, unknown: int = 0) -> dict[str, float]:
        """Members whose term sets reach Jaccard >= `min_share` with `terms`, each with that Jaccard
        (computed as `len(a & b) / len(a | b)`); `unknown` counts probe words no member can hold."""
        probe = np.unique(np.fromiter(terms, dtype=np.int32))
        size = len(probe) + unknown
        if not len(probe) or not self.keys:
            return {}
        starts = np.searchsorted(self._terms, probe, side="left")
        ends = np.searchsorted(self._terms, probe, side="right")
        held = [self._docs[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True) if e > s]
        if not held:
            return {}
        shared = np.bincount(np.concatenate(held), minlength=len(self.keys))
        # float64 division of the same integers: equal to Python's len(a & b) / len(a | b)
        share = shared / (size + self._sizes - shared)
        hits = np.flatnonzero((shared > 0) & (share >= min_share))
        return {self.keys[i]: float(share[i]) for i in hits.tolist()}
