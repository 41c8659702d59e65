"""From BM25 scores to a ranking: the context of a hit, its session, its importance and its age.

Conversation and work sessions answer in the record after the one that matches the question, so
a record also collects a share of its neighbours' scores: `before` of the records just before it
and `after` of those just after, within `window` positions (halved at distance 2, a third at 3).
A session with a strongly matching record lifts its other records by `session` × that best
score. Then two bounded boosts: importance (± `importance` / 2 around the default 0.5) and
recency (up to + `recency` for a record written now, halving every `half_life_days`).

With embeddings, the BM25 ranking (all of the above) and the vector ranking (cosine, with the
same two boosts) are fused by reciprocal rank fusion: each record scores
Σ weight / (rrf_k + rank) over the rankings it appears in.

The defaults were chosen by measurement on the LoCoMo dev set (bench/locomo.py), each kept only
because it helped every question category; every weight is a setting, and 0 turns a step off.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int32]

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
    vector_weight: float = 0.1  # of the vector ranking in the fusion (BM25's is 1)
    rrf_k: int = 60


def with_context(
    acc: FloatArray,
    hits: IntArray,
    prev: IntArray,
    nxt: IntArray,
    session: IntArray,
    seq: IntArray,
    params: RankParams,
) -> tuple[IntArray, FloatArray]:
    """Candidates (the hits and their neighbours) and their scores with context and session added.

    `acc` holds every record's BM25 score, `hits` the records scoring above zero, `prev`/`nxt`
    each record's neighbour in its session (-1 for none), `seq` its position in its session:
    positive for a session's records, negative for the session's own summary (it lends its score
    to the session's records but is not one of them), 0 for records outside sessions.
    """
    parts = [hits]
    if params.window and (params.before or params.after):
        for links in (nxt, prev):  # a hit lends its score to the records after and before it
            ring = hits
            for _ in range(params.window):
                ring = links[ring]
                ring = ring[ring >= 0]
                parts.append(ring)
    candidates = np.unique(np.concatenate(parts)).astype(np.int32)
    scores = acc[candidates].copy()
    if params.window and (params.before or params.after):
        back, ahead = candidates.copy(), candidates.copy()
        for distance in range(1, params.window + 1):
            back = np.where(back >= 0, prev[np.maximum(back, 0)], -1)
            ahead = np.where(ahead >= 0, nxt[np.maximum(ahead, 0)], -1)
            scores += params.before / distance * np.where(back >= 0, acc[np.maximum(back, 0)], 0.0)
            scores += params.after / distance * np.where(ahead >= 0, acc[np.maximum(ahead, 0)], 0.0)
    if params.session:
        strong = hits[seq[hits] != 0]
        if len(strong):
            codes, inverse = np.unique(session[strong], return_inverse=True)
            best = np.zeros(len(codes), dtype=np.float64)
            np.maximum.at(best, inverse, acc[strong])
            place = np.minimum(np.searchsorted(codes, session[candidates]), len(codes) - 1)
            same = (codes[place] == session[candidates]) & (seq[candidates] > 0)
            scores += params.session * np.where(same, best[place], 0.0)
    return candidates, scores


def boosted(
    scores: FloatArray, weight: FloatArray, at: FloatArray, now: float | None, params: RankParams
) -> FloatArray:
    """Scores with the bounded importance and recency boosts applied."""
    out = scores * (1.0 + params.importance * (weight - 0.5))
    if now is not None and params.recency:
        age_days = np.maximum(now - at, 0.0) / DAY_S
        out *= 1.0 + params.recency * np.exp2(-age_days / params.half_life_days)
    return out


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
