"""Ranking after BM25: context from neighbours, session evidence, bounded boosts, stable ties."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcp_memory.search.bm25 import BM25Params
from mcp_memory.search.docstore import Columns, DocAttrs, Filter
from mcp_memory.search.partition import Partition
from mcp_memory.search.postings import encode_terms
from mcp_memory.search.ranking import DAY_S, RankParams, boosted, rerank_pool, with_context

OFF = RankParams(before=0, after=0, window=0, session=0, importance=0, recency=0)
NOW = 1_800_000_000.0

# Ten filler documents give the query terms below a positive idf.
FILLER = [[100 + i, 200 + i] for i in range(10)]


def _partition(docs: list[tuple[str, list[int], DocAttrs]], rank: RankParams) -> Partition:
    partition = Partition(BM25Params(), rank)
    for i, terms in enumerate(FILLER):
        partition.add(f"filler{i}", encode_terms(Counter(terms).items()), len(terms), DocAttrs(9, 0, 0, 0.0))
    for key, terms, attrs in docs:
        partition.add(key, encode_terms(Counter(terms).items()), len(terms), attrs)
    return partition


def _scores(partition: Partition, query: list[int], limit: int = 50) -> dict[str, float]:
    return {key: score for key, score, _ in partition.search(query, Filter(kinds=frozenset({1, 2})), limit, NOW)}


def _turn(session: int, seq: int, at: float = NOW) -> DocAttrs:
    return DocAttrs(1, 0, session, at, seq)


# -- context ---------------------------------------------------------------------------------------


def test_a_record_collects_shares_of_its_neighbours_scores() -> None:
    rank = RankParams(before=0.4, after=0.2, window=2, session=0, importance=0, recency=0)
    turns = [("t1", [1, 2], _turn(5, 1)), ("t2", [3], _turn(5, 2)), ("t3", [4], _turn(5, 3)), ("t4", [5], _turn(5, 4))]
    base = _scores(_partition(turns, OFF), [1])
    assert list(base) == ["t1"]
    s = base["t1"]

    got = _scores(_partition(turns, rank), [1])

    assert got["t1"] == pytest.approx(s)
    assert got["t2"] == pytest.approx(0.4 * s)  # the record right after a match answers it most often
    assert got["t3"] == pytest.approx(0.4 / 2 * s)  # two steps away: half the share
    assert "t4" not in got  # beyond the window
    assert list(got) == ["t1", "t2", "t3"]


def test_a_record_before_a_match_collects_the_after_share() -> None:
    rank = RankParams(before=0.4, after=0.2, window=1, session=0, importance=0, recency=0)
    turns = [("t1", [3], _turn(5, 1)), ("t2", [1, 2], _turn(5, 2))]
    s = _scores(_partition(turns, OFF), [1])["t2"]
    got = _scores(_partition(turns, rank), [1])
    assert got["t1"] == pytest.approx(0.2 * s)


def test_neighbours_are_the_same_sessions_records_in_order_not_in_insertion_order() -> None:
    rank = RankParams(before=0.5, after=0, window=1, session=0, importance=0, recency=0)
    # added out of order and interleaved with another session; seq decides who follows whom
    turns = [
        ("a3", [7], _turn(1, 3)),
        ("b1", [8], _turn(2, 1)),
        ("a1", [1, 2], _turn(1, 1)),
        ("b2", [9], _turn(2, 2)),
        ("a2", [6], _turn(1, 2)),
    ]
    got = _scores(_partition(turns, rank), [1])
    assert set(got) == {"a1", "a2"}


def test_removing_a_record_joins_its_neighbours() -> None:
    rank = RankParams(before=0.5, after=0, window=1, session=0, importance=0, recency=0)
    turns = [("t1", [1, 2], _turn(1, 1)), ("t2", [3], _turn(1, 2)), ("t3", [4], _turn(1, 3))]
    partition = _partition(turns, rank)
    assert set(_scores(partition, [1])) == {"t1", "t2"}
    partition.remove("t2")
    assert set(_scores(partition, [1])) == {"t1", "t3"}


# -- session evidence -----------------------------------------------------------------------------


def test_a_strongly_matching_session_lifts_its_other_matching_records() -> None:
    rank = RankParams(before=0, after=0, window=0, session=0.5, importance=0, recency=0)
    turns = [
        ("strong", [1, 1, 2], _turn(1, 1)),
        ("weak_here", [2, 30, 31], _turn(1, 2)),
        ("weak_there", [2, 32, 33], _turn(2, 1)),
    ]
    base = _scores(_partition(turns, OFF), [1, 2])
    assert base["weak_here"] == pytest.approx(base["weak_there"])

    got = _scores(_partition(turns, rank), [1, 2])

    assert got["weak_here"] == pytest.approx(base["weak_here"] + 0.5 * base["strong"])
    assert got["weak_there"] == pytest.approx(1.5 * base["weak_there"])  # its own session's best is itself
    assert got["weak_here"] > got["weak_there"]


def test_a_session_summary_lends_its_score_to_the_sessions_records() -> None:
    rank = RankParams(before=0, after=0, window=0, session=0.5, importance=0, recency=0)
    docs = [
        ("summary", [1, 1, 2], DocAttrs(2, 0, 1, NOW, -1)),
        ("obs_here", [2, 30], _turn(1, 1)),
        ("obs_there", [2, 31], _turn(2, 1)),
    ]
    base = _scores(_partition(docs, OFF), [1, 2])
    got = _scores(_partition(docs, rank), [1, 2])
    assert got["summary"] == pytest.approx(base["summary"])  # the summary lends, it does not receive
    assert got["obs_here"] == pytest.approx(base["obs_here"] + 0.5 * base["summary"])
    assert got["obs_here"] > got["obs_there"]


# -- bounded boosts and ties ----------------------------------------------------------------------


def test_importance_and_recency_are_bounded_boosts() -> None:
    rank = RankParams(before=0, after=0, window=0, session=0, importance=0.1, recency=0.05, half_life_days=30)
    scores = np.array([1.0, 1.0, 1.0, 1.0])
    weight = np.array([1.0, 0.0, 0.5, 0.5])
    at = np.array([NOW, NOW - 365 * DAY_S, NOW - 30 * DAY_S, NOW + 10 * DAY_S])
    out = boosted(scores, weight, at, NOW, rank)
    assert out[0] == pytest.approx(1.05 * 1.05)  # most important and brand new: the most any record gains
    assert out[1] == pytest.approx(0.95 * (1 + 0.05 * 2 ** (-365 / 30)))
    assert out[2] == pytest.approx(1 + 0.05 / 2)  # one half-life old
    assert out[3] == pytest.approx(1.05)  # a future date counts as now, never more
    assert boosted(scores, weight, at, None, rank)[2] == pytest.approx(1.0)  # no clock, no recency
    # so a record needs more than (1.05 × 1.05) / 0.95 ≈ 1.16 times the relevance to lose to boosts
    assert out.max() / out.min() < 1.17


def test_clearly_more_relevant_beats_important_and_new() -> None:
    rank = RankParams(before=0, after=0, window=0, session=0, importance=0.1, recency=0.05)
    docs = [
        ("relevant_old_minor", [1, 1, 1, 2], DocAttrs(1, 0, 0, NOW - 900 * DAY_S, 0, 0.0)),
        ("weaker_new_major", [1, 40, 41, 42], DocAttrs(1, 0, 0, NOW, 0, 1.0)),
    ]
    assert list(_scores(_partition(docs, rank), [1, 2])) == ["relevant_old_minor", "weaker_new_major"]


def test_equal_relevance_is_decided_by_importance_then_recency() -> None:
    rank = RankParams(before=0, after=0, window=0, session=0, importance=0.1, recency=0.05)
    docs = [
        ("old_minor", [1, 50], DocAttrs(1, 0, 0, NOW - 100 * DAY_S, 0, 0.2)),
        ("old_major", [1, 51], DocAttrs(1, 0, 0, NOW - 100 * DAY_S, 0, 0.9)),
        ("new_minor", [1, 52], DocAttrs(1, 0, 0, NOW, 0, 0.2)),
    ]
    assert list(_scores(_partition(docs, rank), [1])) == ["old_major", "new_minor", "old_minor"]


def test_exact_ties_go_to_the_newer_record_then_the_key() -> None:
    docs = [
        (key, [1, 60 + i], DocAttrs(1, 0, 0, at)) for i, (key, at) in enumerate([("b", 5.0), ("c", 9.0), ("a", 5.0)])
    ]
    for _ in range(3):  # the same answer every time, whatever the insertion order did
        assert list(_scores(_partition(docs, OFF), [1])) == ["c", "a", "b"]


def test_with_context_returns_hits_and_their_neighbours_once() -> None:
    acc = np.array([0.0, 2.0, 0.0, 1.0, 0.0])
    prev = np.array([-1, 0, 1, 2, 3], dtype=np.int32)
    nxt = np.array([1, 2, 3, 4, -1], dtype=np.int32)
    session = np.ones(5, dtype=np.int32)
    seq = np.arange(1, 6, dtype=np.int32)
    rank = RankParams(before=0.5, after=0.25, window=1, session=0)
    docs, scores = with_context(acc, np.array([1, 3], dtype=np.int32), prev, nxt, session, seq, rank)
    assert docs.tolist() == [0, 1, 2, 3, 4]
    assert scores.tolist() == pytest.approx([0.25 * 2, 2.0, 0.5 * 2 + 0.25 * 1, 1.0, 0.5 * 1])


@settings(max_examples=80, deadline=None)
@given(
    sessions=st.lists(st.integers(0, 3), min_size=1, max_size=40),
    scores=st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5, -0.25]), min_size=40, max_size=40),
    allowed=st.lists(st.booleans(), min_size=40, max_size=40),
    depth=st.integers(1, 6),
)
# The best eligible record reaches below the overall best, and a stronger ineligible record of
# its session (the session's summary) is outside the pool: it must still count for the session.
@example(
    sessions=[0, 0, 0, 1, 1],
    scores=[0.0, 0.0, 2.5, 1.0, 0.5] + [0.0] * 35,
    allowed=[False] * 4 + [True] + [False] * 35,
    depth=1,
)
def test_a_rerank_pool_scores_its_candidates_exactly(
    sessions: list[int], scores: list[float], allowed: list[bool], depth: int
) -> None:
    # Records in session order, each session's first record being its summary (seq < 0).
    n = len(sessions)
    prev, nxt = np.full(n, -1, dtype=np.int32), np.full(n, -1, dtype=np.int32)
    seq = np.zeros(n, dtype=np.int32)
    last: dict[int, int] = {}
    for i, code in enumerate(sessions):
        if code == 0:
            continue
        if code not in last:
            seq[i], last[code] = -1, -1
            continue
        seq[i] = i + 1
        if last[code] >= 0:
            prev[i], nxt[last[code]] = last[code], i
        last[code] = i
    acc = np.array(scores[:n])
    eligible = np.array(allowed[:n])
    hits = np.flatnonzero(acc > 0).astype(np.int32)
    rank = RankParams(before=0.4, after=0.2, window=2, session=0.4)
    session = np.array(sessions, dtype=np.int32)

    def scored(pool: np.ndarray, scope: np.ndarray) -> dict[int, float]:
        docs, values = with_context(acc, pool, prev, nxt, session, seq, rank, eligible, scope)
        return dict(zip(docs.tolist(), values.tolist(), strict=True))

    full, pooled = scored(hits, hits), scored(*rerank_pool(acc, hits, eligible, depth))
    # a smaller pool drops candidates but never changes the score of one it keeps
    assert set(pooled) <= set(full)
    assert all(pooled[doc] == full[doc] for doc in pooled)
    # and keeps the best matches that may be returned, ties included
    best = sorted((acc[i] for i in hits if eligible[i]), reverse=True)
    if best:
        edge = best[min(depth, len(best)) - 1]
        assert {int(i) for i in hits if eligible[i] and acc[i] >= edge} <= set(pooled)


def test_a_filtered_query_finds_its_records_beyond_the_pool_of_the_whole_corpus() -> None:
    # 30 strong matches of another kind would fill a pool of 5; the two weak turns of kind 1 still count
    docs = [(f"other{i}", [1, 1, 1], DocAttrs(2, 0, 0, NOW)) for i in range(30)]
    docs += [("weak", [1, 50], _turn(1, 1)), ("next", [50], _turn(1, 2))]
    rank = RankParams(before=0.4, after=0.2, window=1, session=0, importance=0, recency=0, depth=5)
    partition = _partition(docs, rank)
    found = [key for key, _, _ in partition.search([1], Filter(kinds=frozenset({1})), 10, NOW)]
    assert found == ["weak", "next"]


# -- incremental equals rebuilt, with sessions ----------------------------------------------------

session_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.integers(0, 30),
            st.integers(0, 3),  # session 0 = none
            st.lists(st.integers(0, 20), min_size=1, max_size=8),
        ),
        st.tuples(st.just("remove"), st.integers(0, 30), st.just(0), st.just([])),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=60, deadline=None)
@given(ops=session_ops, query=st.lists(st.integers(0, 21), min_size=1, max_size=4))
def test_incremental_context_ranking_equals_a_rebuild(
    ops: list[tuple[str, int, int, list[int]]], query: list[int]
) -> None:
    rank = RankParams(before=0.4, after=0.2, window=2, session=0.4, importance=0.1, recency=0.05)
    live = Partition(BM25Params(), rank)
    docs: dict[str, tuple[list[int], int, int]] = {}
    for op, number, session, terms in ops:
        key, seq = f"k{number}", number + 1  # a record's place in its session is unique, as in real sessions
        if op == "add":
            live.add(key, encode_terms(Counter(terms).items()), len(terms), _turn(session, seq, float(number)))
            docs[key] = (terms, session, seq)
        else:
            live.remove(key)
            docs.pop(key, None)
    rebuilt = Partition(BM25Params(), rank)
    n = len(docs)
    rebuilt.bulk_load(
        Columns(
            keys=list(docs),
            blobs=[encode_terms(Counter(t).items()) for t, _, _ in docs.values()],
            lengths=np.array([len(t) for t, _, _ in docs.values()], dtype=np.float64),
            kinds=np.ones(n, dtype=np.int32),
            subtypes=np.zeros(n, dtype=np.int32),
            sessions=np.array([s for _, s, _ in docs.values()], dtype=np.int32),
            ats=np.array([float(key[1:]) for key in docs], dtype=np.float64),
            seqs=np.array([q for _, _, q in docs.values()], dtype=np.int32),
            weights=np.full(n, 0.5),
            digests=np.zeros(n, dtype=np.int64),
        )
    )
    got = live.search(query, Filter(), 100, NOW)
    want = rebuilt.search(query, Filter(), 100, NOW)
    assert [k for k, _, _ in got] == [k for k, _, _ in want]
    assert [s for _, s, _ in got] == pytest.approx([s for _, s, _ in want], rel=1e-9)


def test_a_weak_match_lifted_by_its_context_is_listed_once() -> None:
    # Term 1 is in every record and term 2 in one, so the mean idf is negative and term 1 scores
    # below zero: "y" matches only term 1, yet the strong record before it lifts it above zero.
    rank = RankParams(before=0.4, after=0.2, window=1, session=0, importance=0, recency=0)
    partition = Partition(BM25Params(), rank)
    for key, terms, seq in (("x", [1, 2, 2, 2], 1), ("y", [1], 2), ("z", [1, 3], 3)):
        partition.add(key, encode_terms(Counter(terms).items()), len(terms), _turn(1, seq))
    ranked = partition.search([1, 2], Filter(), 10, NOW)
    keys = [key for key, _, _ in ranked]
    assert sorted(keys) == ["x", "y", "z"]
    assert keys[:2] == ["x", "y"]
