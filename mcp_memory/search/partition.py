"""One project's searchable partition: its BM25 model ranked for a query, alone or fused with vectors.

The lexical ranking is the Okapi score (search/bm25.py) with each record's context and session
evidence and the bounded importance and recency boosts (search/ranking.py), weak matches of a tiny
corpus following the positive ones; given a query vector, it is fused with the cosine ranking.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt

from mcp_memory.search.bm25 import BM25Model, BM25Params, FloatArray
from mcp_memory.search.docstore import Filter, IntArray
from mcp_memory.search.postings import decode_terms
from mcp_memory.search.ranking import (
    Ranked,
    RankParams,
    boosted,
    contenders,
    joined_idf,
    lone_factor,
    reciprocal_rank_fusion,
    rerank_pool,
    with_context,
)
from mcp_memory.search.termsets import TermSets

FUSION_DEPTH = 100
"""How deep each ranking goes into a fusion: far enough that a record ranked low by one method
but high by the other still meets the page."""


class Partition(BM25Model):
    """One project's documents, BM25 model and vectors, ranked for a search."""

    def __init__(self, params: BM25Params, rank: RankParams | None = None) -> None:
        super().__init__(params)
        self.rank = rank or RankParams()

    def similar(
        self, terms: frozenset[int], min_share: float, flt: Filter, unknown: int, leave_out: AbstractSet[int]
    ) -> dict[str, float]:
        """Documents passing `flt` whose term sets, less `leave_out`, reach Jaccard >= `min_share`
        with `terms` (plus `unknown` terms none holds), each with that Jaccard.

        Prefix filtering finds the candidates: a document at the threshold shares at least
        `need = ceil(min_share * (len(terms) + unknown))` terms, so it holds at least one of the
        rarest `len(terms) - need + 1`.
        """
        ordered = sorted(terms, key=lambda t: (self.df.get(t, 0), t))
        need = math.ceil(min_share * (len(ordered) + unknown) - 1e-9)  # 0.3 * 10 is 3.0000000000000004
        found: dict[str, float] = {}
        for key in self.containing_any(ordered[: max(0, len(ordered) - need + 1)], flt):
            held = self.terms_of(key)
            other = frozenset(() if held is None else held.tolist()) - leave_out
            shared = len(terms & other)
            share = shared / (len(terms) + unknown + len(other) - shared)
            if share >= min_share:
                found[key] = share
        return found

    def term_sets(self, flt: Filter, leave_out: AbstractSet[int]) -> TermSets:
        """The term sets, less `leave_out`, of every live document passing `flt` (their stored
        blobs: TermSets decodes them in `prepare`, off the event loop)."""
        return TermSets(self.filtered_blobs(flt), leave_out)

    def search(
        self,
        query: Sequence[int],
        flt: Filter,
        limit: int,
        now: float | None = None,
        vector: npt.NDArray[np.float32] | None = None,
    ) -> Ranked:
        """Top `limit` (key, score, at) among live documents passing the filter, best first.

        Without a query vector this is the BM25 ranking; with one, the BM25 and vector rankings
        fused (search/ranking.py), and the score is the fused one, even where no document here has
        a vector yet: a search over several partitions sorts their hits together, on one scale.
        """
        if self.n_docs == 0 or limit <= 0:
            return []
        if vector is None:
            return self._lexical(query, flt, limit, now)
        semantic = self._semantic(vector, flt, max(limit, FUSION_DEPTH), now)
        lexical = self._lexical(query, flt, max(limit, FUSION_DEPTH), now) if query else []
        fused = reciprocal_rank_fusion([(lexical, 1.0), (semantic, self.rank.vector_weight)], self.rank.rrf_k)
        return fused[:limit]

    def search_as_guest(
        self,
        host: BM25Model,
        repeats: Mapping[int, int],
        flt: Filter,
        limit: int,
        now: float | None,
        date_terms: AbstractSet[int],
    ) -> Ranked:
        """Top `limit` (key, score, at) of this partition's documents holding a query term, each
        scored as a record of `host` would be: `host`'s idf and average length (a term `host` lacks:
        as if the documents holding it joined it), as a record outside any session, boosted."""
        keys = self.containing_any(sorted(repeats), flt)
        k1, b = self.params.k1, self.params.b
        avgdl = host.total_len / host.n_docs
        idf = {t: host.idf(t) if host.df.get(t) else joined_idf(host.n_docs, self.df.get(t, 0)) for t in repeats}
        ranked: list[tuple[float, float, str]] = []
        weak: list[tuple[int, float, str]] = []  # matches scoring <= 0 (tiny corpora), as search has them
        for key in keys:
            blob, attrs = self.blobs[self.local[key]], self.attrs_of(key)
            if blob is None or attrs is None:
                continue
            terms = decode_terms(blob)
            words = np.fromiter((t not in date_terms for t in terms["t"].tolist()), bool, len(terms))
            norm = k1 * (1 - b + b * float(terms["f"][words].sum()) / avgdl)
            raw = sum(repeats[t] * idf[t] * f * (k1 + 1) / (f + norm) for t, f in terms.tolist() if t in repeats)
            at = np.array([attrs.at])
            score = boosted(np.array([raw * lone_factor(self.rank)]), np.array([attrs.weight]), at, now, self.rank)
            if score[0] > 0:
                ranked.append((float(score[0]), attrs.at, key))
            else:
                weak.append((sum(t in repeats for t in terms["t"].tolist()), attrs.at, key))
        ranked.sort(key=lambda r: (-r[0], -r[1], r[2]))
        weak.sort(key=lambda r: (-r[0], -r[1], r[2]))
        return [(key, score, at) for score, at, key in [*ranked, *((0.0, at, key) for _, at, key in weak)][:limit]]

    def _semantic(self, vector: npt.NDArray[np.float32], flt: Filter, depth: int, now: float | None) -> Ranked:
        """The documents closest to `vector` (cosine), with the importance and recency boosts."""
        docs, sims = self.nearest(vector, flt, depth)
        if len(docs) == 0:
            return []
        return self._top(
            docs, boosted(sims.astype(np.float64), self._weight[docs], self._at[docs], now, self.rank), depth
        )

    def _lexical(self, query: Sequence[int], flt: Filter, limit: int, now: float | None) -> Ranked:
        """The BM25 ranking: Okapi scores with context, session evidence and the bounded boosts.

        Documents scoring above zero come first. When there are fewer than `limit` of them,
        documents that contain query terms but score <= 0 (in tiny corpora every idf can be
        negative) follow with score 0.0, by how many query terms they contain. Ties go to the
        newer document, then the key.
        """
        hits, acc = self._positives(query)
        n = len(self.keys)
        eligible = self._alive[:n] & self._mask(None, flt)
        pool, scope = rerank_pool(acc, hits, eligible, self.rank.depth)
        docs, scores = with_context(
            acc, pool, self._prev[:n], self._next[:n], self._session[:n], self._seq[:n], self.rank, eligible, scope
        )
        positive = scores > 0
        docs, scores = docs[positive], scores[positive]
        keep = contenders(scores, limit, self.rank, now is not None)
        docs, scores = docs[keep], scores[keep]
        scores = boosted(scores, self._weight[docs], self._at[docs], now, self.rank)
        ranked = self._top(docs, scores, limit)
        if len(ranked) < limit:
            acc, matched = self._accumulate(query, with_matched=True)
            assert matched is not None
            weak = np.flatnonzero((matched > 0) & (acc <= 0)).astype(np.int32)
            weak = np.setdiff1d(weak, docs, assume_unique=True)  # context may have ranked some already
            weak = weak[self._alive[weak]]
            weak = weak[self._mask(weak, flt)]
            # Order the weak matches by terms matched, then by their (non-positive) score.
            key = matched[weak] + 1.0 / (2.0 - acc[weak])
            ranked += [(k, 0.0, at) for k, _, at in self._top(weak, key, limit - len(ranked))]
        return ranked

    def _top(self, docs: IntArray, key: FloatArray, limit: int) -> Ranked:
        """The `limit` best (key, score, at) by `key`, ties to the newer document, then the key."""
        chosen = self.best(docs, key, limit)
        found = docs[chosen].tolist()
        return [
            (self.keys[i] or "", score, at)
            for i, score, at in zip(found, key[chosen].tolist(), self._at[found].tolist(), strict=True)
        ]
