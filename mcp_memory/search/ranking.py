"""From BM25 scores to a ranking: the context of a hit, its session, its importance and its age.

Conversation and work sessions answer in the record after the one that matches the question, so
a record also collects a share of its neighbours' scores: `before` of the records just before it
and `after` of those just after, within `window` positions (halved at distance 2, a third at 3).
A session with a strongly matching record lifts its other records by `session` × that best
score; a record matching no query word gets that share only right next to a match. A record
outside any session's sequence (a memory, a lesson) has nothing to lend it scores, so it counts
as its own context (`lone_factor`) and meets observations on one scale in a search across kinds.
Then two bounded boosts: importance (± `importance` / 2 around the default 0.5) and recency (up
to + `recency` for a record written now, halving every `half_life_days`).

Context and session evidence re-rank a pool: every BM25 match when there are up to `depth` of
them, else the `depth` best (plus the `depth` best passing the query's filter), with their
neighbours. A record whose own score and whose neighbours' are all below the pool's cannot be
returned by that query, which keeps a query matching most of a 100k corpus as fast as one
matching a few records; the scores of the records ranked are exact.

With embeddings, the BM25 ranking (all of the above) and the vector ranking (cosine, with the
same two boosts) are fused by reciprocal rank fusion: each record scores
Σ weight / (rrf_k + rank) over the rankings it appears in.

The defaults were chosen by measurement on the LoCoMo dev set (bench/locomo.py), each kept only
because it helped every question category; every weight is a setting, and 0 turns a step off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]

DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class RankParams:
    """Weights of the ranking steps that follow BM25."""

    before: float = 0.4
    after: float = 0.2
    window: int = 2
    session: float = 0.4
    importance: float = 0.1
    recency: float = 0.05
    half_life_days: float = 30.0
    depth: int = 1000  # BM25 matches whose context is weighed (see rerank_pool)
    vector_weight: float = 0.1  # of the vector ranking in the fusion (BM25's is 1)
    rrf_k: int = 60


def rerank_pool(acc: FloatArray, hits: IntArray, eligible: BoolArray, depth: int) -> tuple[IntArray, IntArray]:
    """The hits whose context and session are weighed (ascending): all of them up to `depth`, else
    the `depth` best overall (they lend their scores) and the `depth` best passing the filter;
    and the hits a session's best is taken over (see with_context's `matches`). `hits` are the
    live records scoring above zero in `acc` (ascending), `eligible` flags each record of `acc`
    that is alive and passes the filter.

    Records outside the pool and not next to it can still be returned by a smaller query, never
    by this one; the pool includes every tie at its edge, so the answer does not depend on the
    order records were added in. Within the pool, the best of a session is the best of its
    matches, except when the best eligible records reach below the overall best: a stronger
    record of their session may then lie outside the pool, so every match scoring at least the
    weakest of them counts for its session.
    """
    if len(hits) <= depth:
        return hits, hits
    overall = _best(acc, hits, depth)
    # Whether every hit is eligible, counted over dense masks (`eligible` admits only live
    # records, so its positive scores are its hits): gathering a common word's matches costs more.
    if np.count_nonzero(eligible & (acc > 0)) == len(hits):
        return overall, overall
    allowed = hits[eligible[hits]]
    best_allowed = _best(acc, allowed, depth)
    pool = _sorted_unique(np.concatenate([overall, best_allowed]))
    if not len(best_allowed) or acc[best_allowed].min() >= acc[overall].min():
        return pool, pool
    scope: IntArray = hits[acc[hits] >= acc[best_allowed].min()]
    return pool, scope


def _best(acc: FloatArray, docs: IntArray, depth: int) -> IntArray:
    if len(docs) <= depth:
        return docs
    scores = acc[docs]
    edge = float(np.partition(scores, len(docs) - depth)[len(docs) - depth])
    best: IntArray = docs[scores >= edge]
    return best


def with_context(
    acc: FloatArray,
    hits: IntArray,
    prev: IntArray,
    nxt: IntArray,
    session: IntArray,
    seq: IntArray,
    params: RankParams,
    eligible: BoolArray | None = None,
    matches: IntArray | None = None,
) -> tuple[IntArray, FloatArray]:
    """Candidates (the hits and their neighbours) and their scores with context and session added.

    `acc` holds every record's BM25 score, `hits` the records scoring above zero whose context
    counts (ascending; see rerank_pool), `prev`/`nxt` each record's neighbour in its session (-1
    for none), `seq` its position in its session: positive for a session's records, negative for
    the session's own summary (it lends its score to the session's records but is not one of
    them), 0 for records outside sessions. `eligible` marks the records that may be returned
    (alive and passing the filter); the others still lend their scores. `matches` (default
    `hits`) are every record scoring above zero: a session's best is taken over them, since a
    pool cut to the best eligible records can leave out a stronger record of their session.
    """
    context = bool(params.window and (params.before or params.after))
    candidates, scores = _context(acc, hits, prev, nxt, params) if context else (hits, acc[hits])
    if params.session:
        best = _session_best(acc, hits if matches is None else matches, session, seq, candidates)
        # A record matching no query word takes its session's share only right next to a match
        # (the answer after a question), so one further away, lent scores alone, does not outrank
        # records that match (none of the LoCoMo figures moved; without the share next to a match,
        # R@10 fell 0.763 -> 0.751).
        scores = scores + params.session * np.where(_near_match(acc, candidates, prev, nxt), best, 0.0)
    lone = seq[candidates] == 0  # memories and lessons: no neighbours, no session to lend them scores
    scores = np.where(lone, acc[candidates] * lone_factor(params), scores)
    if eligible is not None:
        keep = eligible[candidates]
        candidates, scores = candidates[keep], scores[keep]
    return candidates, scores


def _context(
    acc: FloatArray, hits: IntArray, prev: IntArray, nxt: IntArray, params: RankParams
) -> tuple[IntArray, FloatArray]:
    """The hits and their neighbours, with the shares of their neighbours' scores added."""
    parts = [hits]
    for links in (nxt, prev):  # a hit lends its score to the records after and before it
        ring = hits
        for _ in range(params.window):
            ring = links[ring]
            ring = ring[ring >= 0]
            parts.append(ring)
    candidates = _sorted_unique(np.concatenate(parts))
    scores = acc[candidates].copy()
    back, ahead = candidates.copy(), candidates.copy()
    for distance in range(1, params.window + 1):
        back = np.where(back >= 0, prev[np.maximum(back, 0)], -1)
        ahead = np.where(ahead >= 0, nxt[np.maximum(ahead, 0)], -1)
        scores += params.before / distance * np.where(back >= 0, acc[np.maximum(back, 0)], 0.0)
        scores += params.after / distance * np.where(ahead >= 0, acc[np.maximum(ahead, 0)], 0.0)
    return candidates, scores


def lone_factor(params: RankParams) -> float:
    """What a record outside any session's sequence (a memory, a lesson) multiplies its BM25 score by.

    It is its own context: it lends itself every share a neighbour and its session would lend it,
    so it meets an observation on the scale of one amid records that match as well as it does.
    Without this, observations carried by their neighbours outrank every memory and lesson in a
    search across kinds (audit: smart search MRR on lesson questions 0.395 -> 0.798, on the
    others 0.784 -> 0.732, mostly a fitting lesson now ranked above the observation asked for).
    """
    shares = sum((params.before + params.after) / distance for distance in range(1, params.window + 1))
    return 1.0 + params.session + shares


def joined_idf(n_docs: int, df: int) -> float:
    """rank-bm25's idf of a term that none of `n_docs` documents holds, once the `df` documents
    holding it join them (0 rather than negative: the term is common only among those)."""
    return max(math.log(n_docs + 0.5) - math.log(df + 0.5), 0.0)


def _near_match(acc: FloatArray, docs: IntArray, prev: IntArray, nxt: IntArray) -> BoolArray:
    """Whether each of `docs` matches the query itself or is next to a record that does."""
    near: BoolArray = acc[docs] > 0
    for links in (prev, nxt):
        other = links[docs]
        near |= (other >= 0) & (acc[np.maximum(other, 0)] > 0)
    return near


def _sorted_unique(values: IntArray) -> IntArray:
    """np.unique by sorting (NumPy's hash-based unique is far slower on tens of thousands of ints)."""
    values = np.sort(values)
    if len(values) > 1:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values.astype(np.int32)


def _session_best(acc: FloatArray, hits: IntArray, session: IntArray, seq: IntArray, docs: IntArray) -> FloatArray:
    """For each of `docs`, the best score among the hits of its session (0 outside sessions)."""
    strong = hits[seq[hits] != 0]
    if not len(strong):
        return np.zeros(len(docs), dtype=np.float64)
    best = np.zeros(int(session[strong].max()) + 2, dtype=np.float64)  # the last slot stays 0
    np.maximum.at(best, session[strong], acc[strong])
    codes = np.minimum(session[docs], len(best) - 1)
    return np.where(seq[docs] > 0, np.take(best, codes), 0.0)


def boosted(
    scores: FloatArray, weight: FloatArray, at: FloatArray, now: float | None, params: RankParams
) -> FloatArray:
    """Scores with the bounded importance and recency boosts applied."""
    out = scores * (1.0 + params.importance * (np.clip(weight, 0.0, 1.0) - 0.5))
    if now is not None and params.recency:
        age_days = np.maximum(now - at, 0.0) / DAY_S
        out *= 1.0 + params.recency * np.exp2(-age_days / params.half_life_days)
    return out


def contenders(scores: FloatArray, limit: int, params: RankParams, recency: bool) -> IntArray:
    """Positions of the positive `scores` that the boosts could still carry into the top `limit`.

    The boosts move a score by bounded factors, so a record whose best case stays below the
    worst case of the `limit`-th best cannot make the page; skipping them spares boosting and
    sorting a corpus-sized candidate set when a query matches most records.
    """
    if len(scores) <= 4 * limit:
        return np.arange(len(scores), dtype=np.int32)
    low = 1.0 - params.importance / 2
    high = (1.0 + params.importance / 2) * (1.0 + params.recency if recency else 1.0)
    kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
    # a hair of slack so a rounding difference from boosted() never drops a true contender
    return np.flatnonzero(scores * high >= kth * low * (1 - 1e-9)).astype(np.int32)


Ranked = list[tuple[str, float, float]]
"""(key, score, at) best first."""


def reciprocal_rank_fusion(rankings: list[tuple[Ranked, float]], k: int) -> Ranked:
    """Fuse weighted rankings: a record scores Σ weight / (k + rank); ties to the newer, then the key."""
    fused: dict[str, float] = {}
    at: dict[str, float] = {}
    for ranking, weight in rankings:
        for rank, (key, _, when) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
            at[key] = when
    order = sorted(fused, key=lambda key: (-fused[key], -at[key], key))
    return [(key, fused[key], at[key]) for key in order]
