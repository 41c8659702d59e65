"""The BM25 index: equal to rank-bm25's Okapi scores, incremental updates equal to a rebuild."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.search import bm25, dates
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.search.bm25 import BM25Params
from mcp_memory.search.docstore import Columns, DocAttrs, Filter
from mcp_memory.search.index import IndexDoc, SearchFilter, SearchIndex
from mcp_memory.search.partition import Partition
from mcp_memory.search.postings import Postings, encode_terms
from mcp_memory.services.index_docs import DocSpec

TEXTS = [
    "The deploy failed because the database migration timed out on the orders table.",
    "We decided to keep SQLite in WAL mode and to take the write lock with BEGIN IMMEDIATE.",
    "Caroline went to the LGBTQ support group yesterday and found it powerful.",
    "Melanie painted a lake sunrise last year; painting helps her relax.",
    "The flaky test in tests/test_db.py was caused by two tasks sharing one connection.",
    "Use getUserName from src/app/user_service.py instead of reading the session directly.",
    "The orders table has an index on created_at; the migration added it in May 2023.",
    "Prefer small commits with messages that say what and why.",
    "The support group meets every Tuesday evening at the community centre.",
    "Running the migration again after the timeout fixed the deploy.",
]


def _corpus() -> list[list[str]]:
    analyzer = Analyzer()
    return [analyzer.terms(text) for text in TEXTS]


def _partition(corpus: list[list[str]], vocab: dict[str, int]) -> Partition:
    partition = Partition(BM25Params())
    for i, doc in enumerate(corpus):
        counts = Counter(vocab.setdefault(t, len(vocab)) for t in doc)
        partition.add(f"d{i}", encode_terms(counts.items()), len(doc), DocAttrs(1, 0, 0, float(i)))
    return partition


def _dense(partition: Partition, query: list[int], size: int) -> np.ndarray:
    docs, scores = partition.scores(query)
    out = np.zeros(size)
    out[docs] = scores
    return out


@pytest.mark.parametrize(
    "query",
    [
        "when did the deploy fail",
        "database migration timeout orders",
        "support group",
        "getUserName user service",
        "painting painting lake",  # a repeated word counts twice in rank-bm25
        "tests/test_db.py connection",
    ],
)
def test_scores_equal_rank_bm25_okapi(query: str) -> None:
    corpus = _corpus()
    vocab: dict[str, int] = {}
    partition = _partition(corpus, vocab)
    terms = Analyzer().terms(query)
    expected = BM25Okapi(corpus).get_scores(terms)
    ours = _dense(partition, [vocab[t] for t in terms if t in vocab], len(corpus))
    positive = expected > 0
    assert positive.any()
    np.testing.assert_allclose(ours[positive], expected[positive], rtol=1e-12)
    assert not ours[~positive].any(), "documents rank-bm25 scores <= 0 are not returned as positive"


def test_stop_words_do_not_score() -> None:
    corpus = _corpus()
    vocab: dict[str, int] = {}
    partition = _partition(corpus, vocab)
    assert "the" not in vocab
    assert "and" not in vocab
    ranked = partition.search([vocab[t] for t in Analyzer().terms("the deploy")], Filter(), 3)
    assert sorted(key for key, _, _ in ranked) == ["d0", "d9"]


def test_search_orders_by_score_then_newer_first() -> None:
    partition = Partition(BM25Params())
    blob = encode_terms([(7, 1)])
    for i in range(5):
        partition.add(f"d{i}", encode_terms([(i + 100, 1)]), 1, DocAttrs(1, 0, 0, float(i)))
    partition.add("a", blob, 1, DocAttrs(1, 0, 0, 10.0))
    partition.add("b", blob, 1, DocAttrs(1, 0, 0, 20.0))
    ranked = partition.search([7], Filter(), 10)
    assert [key for key, _, _ in ranked] == ["b", "a"]
    assert ranked[0][1] == ranked[1][1] > 0


def test_tiny_corpus_still_finds_matching_documents() -> None:
    # With one or two documents every idf is negative; matching documents still come back.
    partition = Partition(BM25Params())
    partition.add("only", encode_terms([(1, 1), (2, 1)]), 2, DocAttrs(1, 0, 0, 0.0))
    assert partition.scores([1])[0].size == 0
    assert [key for key, _, _ in partition.search([1], Filter(), 5)] == ["only"]
    assert partition.search([3], Filter(), 5) == []


def test_filters_apply_before_ranking() -> None:
    partition = Partition(BM25Params())
    for i in range(30):
        # the ten best-scoring documents are of kind 2; kind 1 documents must still fill the page
        tf = 5 if i < 10 else 1
        kind = 2 if i < 10 else 1
        partition.add(f"d{i}", encode_terms([(1, tf), (2, 1)]), tf + 1, DocAttrs(kind, 0, i % 3, float(i)))
    ranked = partition.search([1], Filter(kinds=frozenset({1})), 5)
    assert len(ranked) == 5
    assert all(int(key[1:]) >= 10 for key, _, _ in ranked)
    in_session = partition.search([1], Filter(session=1, since=10.0, until=20.0), 100)
    assert sorted(int(k[1:]) for k, _, _ in in_session) == [i for i in range(10, 21) if i % 3 == 1]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 40), st.lists(st.integers(0, 25), min_size=1, max_size=12)),
        st.tuples(st.just("remove"), st.integers(0, 40), st.just([])),
        st.tuples(st.just("batch"), st.integers(0, 40), st.lists(st.integers(0, 25), min_size=1, max_size=12)),
    ),
    min_size=1,
    max_size=120,
)


@settings(max_examples=60, deadline=None)
@given(ops=operations, query=st.lists(st.integers(0, 27), min_size=1, max_size=5))
# idfs that sum to 0: rank-bm25's epsilon floor is rounding noise (see below)
@example(
    ops=[
        ("add", 0, [0]),
        ("add", 2, [0]),
        ("add", 1, [0, 3, 7, 8, 9]),
        ("batch", 2, [1, 1, 2, 4, 5, 6]),
        ("remove", 0, []),
    ],
    query=[1],
)
# the same, where a plain sum's rounding gave the updated index and the rebuilt one opposite signs
@example(
    ops=[
        ("add", 0, [0]),
        ("add", 9, [0, 4, 7, 12, 14, 15]),
        ("batch", 1, [1, 2, 3, 4, 5, 6, 9, 11]),
        ("add", 0, [0, 1, 2, 3, 5, 6, 7, 8, 10, 13]),
        ("remove", 1, []),
    ],
    query=[1],
)
def test_incremental_updates_equal_a_rebuild(ops: list[tuple[str, int, list[int]]], query: list[int]) -> None:
    live = Partition(BM25Params())
    docs: dict[str, list[int]] = {}
    for op, number, terms in ops:
        key = f"k{number}"
        if op == "add":
            live.add(key, encode_terms(Counter(terms).items()), len(terms), DocAttrs(1, 0, 0, float(number)))
            docs[key] = terms
        elif op == "batch":
            batch = {f"k{(number + j) % 41}": terms[j:] + terms[:j] for j in range(len(terms))}
            rows = [
                (k, encode_terms(Counter(t).items()), len(t), DocAttrs(1, 0, 0, float(k[1:]))) for k, t in batch.items()
            ]
            first = [(k, encode_terms({t[0]: 1}.items()), 1, DocAttrs(1, 0, 0, 0.0)) for k, t in batch.items()]
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(bm25, "_GROUPED_BATCH", 2)  # a batch of one goes the one-by-one way
                live.add_many(first + rows)  # every key twice: the last copy wins
            docs.update(batch)
        else:
            assert live.remove(key) == (key in docs)
            docs.pop(key, None)
    rebuilt = Partition(BM25Params())
    n = len(docs)
    rebuilt.bulk_load(
        Columns(
            keys=list(docs),
            blobs=[encode_terms(Counter(t).items()) for t in docs.values()],
            lengths=np.array([len(t) for t in docs.values()], dtype=np.float64),
            kinds=np.ones(n, dtype=np.int32),
            subtypes=np.zeros(n, dtype=np.int32),
            sessions=np.zeros(n, dtype=np.int32),
            ats=np.array([float(key[1:]) for key in docs], dtype=np.float64),
            seqs=np.zeros(n, dtype=np.int32),
            weights=np.full(n, 0.5),
            digests=np.zeros(n, dtype=np.int64),
        )
    )
    assert live.n_docs == rebuilt.n_docs == len(docs)
    assert live.df == rebuilt.df
    got = dict(zip(*(x.tolist() for x in _keys_scores(live, query)), strict=True))
    want = dict(zip(*(x.tolist() for x in _keys_scores(rebuilt, query)), strict=True))
    assert got.keys() == want.keys()
    for key, score in want.items():
        assert got[key] == pytest.approx(score, rel=1e-9)
    if docs:
        corpus = [[str(t) for t in terms] for terms in docs.values()]
        expected = BM25Okapi(corpus).get_scores([str(t) for t in query])
        for key, score in zip(docs, expected.tolist(), strict=True):
            # A corpus whose idfs sum to exactly 0 gives rank-bm25 an epsilon floor of ±1e-17, its
            # sign set by the order of summation: scores that small count as none.
            if score > _NOISE:
                assert got[key] == pytest.approx(score, rel=1e-9)
            else:
                assert got.get(key, 0.0) <= _NOISE


_NOISE = 1e-12


def _keys_scores(partition: Partition, query: list[int]) -> tuple[np.ndarray, np.ndarray]:
    docs, scores = partition.scores(query)
    return np.array([partition.keys[i] for i in docs.tolist()], dtype=object), scores


def test_a_record_moved_in_time_keeps_its_postings_and_ranks_as_a_fresh_index_does() -> None:
    def turn(number: int, seq: int, at: float, weight: float = 0.5) -> DocAttrs:
        return DocAttrs(1, 0, 1, at, seq, weight, digest=number)

    first = {"t1": [1, 2, 3], "t2": [2, 4, 5, 5], "t3": [1, 5, 6], "s": [1, 2, 4, 6] * 40}  # "s": a long digest
    attrs = {"t1": turn(1, 1, 10.0), "t2": turn(2, 2, 20.0), "t3": turn(3, 3, 30.0), "s": turn(4, -1, 30.0)}
    live = Partition(BM25Params())
    for key, terms in first.items():
        live.add(key, encode_terms(Counter(terms).items()), len(terms), attrs[key])
    postings = live.posting_count
    # the session's summary re-dated and an observation's importance changed: the same words
    attrs["s"] = turn(4, -1, 86_400.0 * 40)
    attrs["t1"] = turn(1, 1, 10.0, weight=0.9)
    live.add("s", encode_terms(Counter(first["s"]).items()), len(first["s"]), attrs["s"])
    live.add_many([("t1", encode_terms(Counter(first["t1"]).items()), len(first["t1"]), attrs["t1"])])

    assert live.posting_count == postings  # no dead copy of the digest's terms left behind
    assert len(live.keys) == live.n_docs == 4
    fresh = Partition(BM25Params())
    for key, terms in first.items():
        fresh.add(key, encode_terms(Counter(terms).items()), len(terms), attrs[key])
    now = 86_400.0 * 41
    for query in ([1], [5], [2, 6], [4, 5, 6]):
        got, want = live.search(query, Filter(), 10, now), fresh.search(query, Filter(), 10, now)
        assert [(k, at) for k, _, at in got] == [(k, at) for k, _, at in want]
        assert [score for _, score, _ in got] == pytest.approx([score for _, score, _ in want], rel=1e-12)
    assert [key for key, _, _ in live.search([1], Filter(since=86_400.0), 10)] == ["s"]  # filtered by its new time


def test_postings_settled_bit_by_bit_hold_every_addition_and_leave_earlier_views_and_neighbours_alone() -> None:
    loaded_docs = np.arange(10, dtype=np.int32)
    loaded_tfs = np.arange(10, dtype=np.uint16)
    postings = Postings(loaded_docs[:4], loaded_tfs[:4])  # a loaded slice: the next term's postings follow
    rng = random.Random(3)
    want_docs, want_tfs = list(range(4)), list(range(4))
    views = []
    for round_ in range(60):
        for _ in range(rng.randrange(1, 9)):
            doc, tf = 100 + len(want_docs), rng.randrange(1, 50)
            postings.append(doc, tf)
            want_docs.append(doc)
            want_tfs.append(tf)
        if round_ % 3 == 0:
            postings.extend(np.array([7_000 + round_], dtype=np.int32), np.array([2], dtype=np.uint16))
            want_docs.append(7_000 + round_)
            want_tfs.append(2)
        postings.settle()
        views.append((postings.docs, postings.tfs, list(want_docs), list(want_tfs)))
        assert postings.docs.tolist() == want_docs
        assert postings.tfs.tolist() == want_tfs
    assert loaded_docs.tolist() == list(range(10))
    assert loaded_tfs.tolist() == list(range(10))
    # settled into room left after them: a new array a quarter larger now and then, not one per settle
    assert len({docs.ctypes.data for docs, _, _, _ in views}) <= 15
    for docs, tfs, at_docs, at_tfs in views:  # what a query read earlier is as it was
        assert docs.tolist() == at_docs
        assert tfs.tolist() == at_tfs


def test_compaction_keeps_results() -> None:
    partition = Partition(BM25Params())
    rng = random.Random(7)
    for i in range(3000):
        terms = [rng.randrange(50) for _ in range(6)]
        partition.add(f"d{i}", encode_terms(Counter(terms).items()), len(terms), DocAttrs(1, 0, 0, float(i)))
    for i in range(0, 3000, 3):
        partition.remove(f"d{i}")
    for i in range(1, 3000, 3):
        partition.remove(f"d{i}")  # crosses the dead > live / 2 threshold: compaction runs
    assert partition.n_docs == 1000
    assert len(partition.keys) < 3000, "dead documents were dropped by a compaction"
    assert len(partition.keys) - partition.n_docs <= 1024
    ranked = partition.search([3, 4], Filter(), 1000)
    assert ranked
    assert all(int(key[1:]) % 3 == 2 for key, _, _ in ranked)


def test_projects_keep_their_own_statistics() -> None:
    analyzer = Analyzer()
    index = SearchIndex(analyzer, BM25Params())
    vocab: dict[str, int] = {}

    def doc(doc_id: str, project: str, text: str) -> IndexDoc:
        counts = Counter(vocab.setdefault(t, len(vocab)) for t in analyzer.terms(text))
        return IndexDoc(
            doc_id, "observation", None, project, None, 0.0, sum(counts.values()), encode_terms(counts.items())
        )

    for i, text in enumerate(TEXTS):
        index.upsert(doc(f"a{i}", "alpha", text))
    index.learn_terms(vocab)
    before = index.search("alpha", "support group", SearchFilter(), 5)
    for i in range(50):
        index.upsert(doc(f"b{i}", "beta", "support group support group meeting"))
    index.learn_terms(vocab)
    after = index.search("alpha", "support group", SearchFilter(), 5)
    assert [(h.doc_id, h.score) for h in before] == [(h.doc_id, h.score) for h in after]
    assert {h.doc_id for h in index.search("beta", "support group", SearchFilter(), 100)} == {
        f"b{i}" for i in range(50)
    }


def _near_duplicates(seed: int) -> tuple[SearchIndex, dict[str, set[str]], dict[str, int]]:
    """An index of random memories (some removed, some of another kind), their word sets and vocabulary."""
    index = SearchIndex(Analyzer(), BM25Params())
    vocab: dict[str, int] = {}
    rng = random.Random(seed)
    words = [f"word{i}" for i in range(200)] + [f"{dates.PREFIX}2024-05"]
    index.learn_terms({w: vocab.setdefault(w, len(vocab)) for w in words})
    sets: dict[str, set[str]] = {}
    for i in range(300):
        terms = rng.sample(words[:40], rng.randint(3, 12)) + rng.sample(words, rng.randint(0, 4))
        counts = Counter(vocab[t] for t in terms)
        kind = "memory" if i % 7 else "observation"
        index.upsert(IndexDoc(f"m{i}", kind, None, "p", None, 0.0, len(terms), encode_terms(counts.items())))
        if kind == "memory":
            sets[f"m{i}"] = {t for t in terms if not t.startswith(dates.PREFIX)}  # dates say when, not what
    for gone in rng.sample(sorted(sets), 20):
        index.remove(gone)
        del sets[gone]
    return index, sets, vocab


def _brute(sets: dict[str, set[str]], probe: set[str], min_share: float) -> dict[str, float]:
    shares = {k: len(s & probe) / len(s | probe) for k, s in sets.items() if s and probe}
    return {k: v for k, v in shares.items() if v >= min_share}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("min_share", [0.3, 0.5, 0.7])
def test_similar_finds_exactly_the_near_duplicates(seed: int, min_share: float) -> None:
    index, sets, vocab = _near_duplicates(seed)
    memories = SearchFilter(kinds=frozenset({"memory"}))
    every = index.term_sets("p", memories)
    assert sorted(every.keys) == sorted(sets)
    rng = random.Random(seed + 100)
    checked = 0
    for name in rng.sample(sorted(sets), 25):
        probe = set(rng.sample(sorted(sets[name]), max(1, len(sets[name]) - 1))) | {"unheard"}
        expected = _brute(sets, probe, min_share)
        known = frozenset(vocab[t] for t in probe if t in vocab)
        assert index.similar("p", known, min_share, memories, unknown=1) == expected
        assert every.similar(known, min_share, unknown=1) == expected
        checked += bool(expected)
    assert checked >= 5  # the probes did find near-duplicates, so the comparison had something to compare


def test_term_sets_of_an_empty_project_find_nothing() -> None:
    index = SearchIndex(Analyzer(), BM25Params())
    every = index.term_sets("nowhere", SearchFilter(kinds=frozenset({"memory"})))
    assert len(every) == 0
    assert every.similar([1, 2, 3], 0.1) == {}


class TestAnalyzer:
    analyzer = Analyzer()

    def test_lower_cases_stems_and_drops_stop_words(self) -> None:
        assert self.analyzer.terms("The Runners were RUNNING quickly") == ["runner", "run", "quick"]

    def test_splits_identifiers_and_keeps_them_whole(self) -> None:
        terms = self.analyzer.terms("getUserName in src/app/user_service.py and os.path.join")
        for expected in ("getusername", "get", "user", "name", "src/app/user_service.py", "servic", "os.path.join"):
            assert expected in terms
        assert "HTTPServerError".casefold() in self.analyzer.terms("HTTPServerError")
        assert {"http", "server", "error"} <= set(self.analyzer.terms("HTTPServerError"))

    def test_unicode_words_and_cjk(self) -> None:
        assert self.analyzer.terms("Die Straße") == self.analyzer.terms("DIE STRASSE")  # full case folding
        assert "東京" in self.analyzer.terms("東京に行きました")
        assert self.analyzer.terms("ÉCOLE") == self.analyzer.terms("école")

    def test_remembered_tokens_give_the_terms_a_fresh_analysis_gives(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from mcp_memory.search import analyzer as module

        monkeypatch.setattr(module, "_MEMO_SIZE", 3)  # full after three distinct tokens: emptied and refilled
        warm = Analyzer()
        texts = ["getUserName saved", "the runners RUNNING", "東京 getUserName", "Melanie's runners"] * 3
        for text in texts:  # _analyse: past the per-text cache, so every token goes through the memo
            assert list(warm._analyse(text)) == Analyzer().terms(text)
        assert 0 < len(warm._memo) <= 3

    def test_numbers_dates_and_possessives(self) -> None:
        terms = self.analyzer.terms("Melanie's 5 kids on 2023-05-08")
        assert terms[:2] == ["melani", "5"]
        assert {"2023-05-08", "2023", "05", "08"} <= set(terms)


def test_a_batch_that_moves_a_record_between_projects_leaves_it_in_the_last_one() -> None:
    index = SearchIndex(Analyzer(), BM25Params())
    index.learn_terms({"move": 1, "stay": 2})

    def doc(doc_id: str, project: str, term: int) -> IndexDoc:
        return IndexDoc(doc_id, "observation", None, project, None, 0.0, 1, encode_terms([(term, 1)]))

    index.upsert(doc("m", "alpha", 1))
    index.upsert_many([doc("m", "beta", 1), doc("s", "alpha", 2), doc("m", "gamma", 1)])

    assert index.locate("m") == ("observation", "gamma")
    assert (index.doc_count("alpha"), index.doc_count("beta"), index.doc_count("gamma")) == (1, 0, 1)
    assert [h.doc_id for h in index.search("gamma", "moved", SearchFilter(), 5)] == ["m"]
    assert index.search("alpha", "moved", SearchFilter(), 5) == []


@pytest.mark.anyio
async def test_a_new_term_of_a_rolled_back_savepoint_is_stored_again_by_the_next_write(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "m.db", project="p", synchronous="normal")

    def spec(doc_id: str, text: str) -> DocSpec:
        return DocSpec(doc_id, "memory", "p", "2026-01-01T00:00:00Z", fields=((text, 1),))

    async with open_app(settings) as app:
        db, indexer = app.deps.db, app.deps.indexer

        async def failing_inner() -> None:
            async with db.transaction("inner") as inner:
                await indexer.put_many(inner, [spec("mem_a", "zyzzyva quokka")])
                raise ValueError("inner")

        async with db.transaction("outer") as tx:
            with pytest.raises(ValueError, match="inner"):
                await failing_inner()
            await indexer.put_many(tx, [spec("mem_b", "zyzzyva wombat")])
        live = [h.doc_id for h in app.deps.index.search("p", "zyzzyva", SearchFilter(), 10)]
    async with open_app(settings) as app:  # the index rebuilt from stored terms alone
        rebuilt = [h.doc_id for h in app.deps.index.search("p", "zyzzyva", SearchFilter(), 10)]
        quokka = app.deps.index.search("p", "quokka", SearchFilter(), 10)

    assert live == rebuilt == ["mem_b"]
    assert quokka == []
