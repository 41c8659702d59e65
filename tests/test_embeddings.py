"""Hybrid search: vectors kept current off the write path, stored, reloaded, fused with BM25.

The provider is a deterministic hashed character n-gram model (tests/_embedding.py): texts that
share word pieces are close, so it finds what BM25's whole-word terms miss, without a download.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.search.bm25 import BM25Params
from mcp_memory.search.docstore import DocAttrs, Filter
from mcp_memory.search.embeddings import EmbeddingProvider
from mcp_memory.search.partition import Partition
from mcp_memory.search.postings import encode_terms
from mcp_memory.search.ranking import RankParams, reciprocal_rank_fusion
from mcp_memory.server import build_server
from tests._embedding import FakeEmbeddingServer, HashedNgrams
from tests.conftest import FakeClock, call

PANORAMAS = "The photographer exhibited panoramas of the harbour."
DISTRACTORS = [
    "We switched SQLite to WAL journal mode so readers never block the writer.",
    "Pinned PyStemmer below version 4, which fixed the import error.",
    "The release checklist lives in docs/RELEASING.md.",
]
TYPO_QUERY = "panoramik photografy"  # no term in common with PANORAMAS, nor one slip from one (search/spelling.py)


@asynccontextmanager
async def serving(settings: Settings, clock: FakeClock, provider: EmbeddingProvider | None) -> AsyncIterator[Client]:
    async with Client(build_server(settings, clock, provider=provider)) as client:
        yield client


async def diagnose_until(client: Client, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll memory_diagnose's embedding report until `done` holds (the worker runs in the background)."""
    with anyio.fail_after(15):
        while True:
            report = (await call(client, "memory_diagnose"))["embeddings"]
            if done(report):
                return report
            await anyio.sleep(0.02)


def settled(report: dict[str, Any]) -> bool:
    """Nothing left to embed, and the stored vectors caught up with the ones in memory."""
    stored = report["stored_by_model"].get(report["provider"], 0)
    return report["queued"] == 0 and report["lacking"] == 0 and stored == report["vectors"]


async def observe_all(client: Client, texts: list[str]) -> list[str]:
    return [(await call(client, "memory_observe", content=text))["id"] for text in texts]


# -- through the server -------------------------------------------------------------------------------


async def test_vectors_find_what_bm25_misses(settings: Settings, clock: FakeClock) -> None:
    async with serving(settings, clock, None) as client:
        ids = await observe_all(client, [PANORAMAS, *DISTRACTORS])
        lexical = (await call(client, "memory_recall", query=TYPO_QUERY))["hits"]
    assert lexical == []  # BM25 alone: no shared term

    provider = HashedNgrams()
    async with serving(settings, clock, provider) as client:
        report = await diagnose_until(client, settled)
        hybrid = (await call(client, "memory_recall", query=TYPO_QUERY))["hits"]
        searched = (await call(client, "memory_smart_search", query=TYPO_QUERY))["hits"]

    assert report["provider"] == "test:hashed-ngrams-64"
    assert report["dimension"] == 64
    assert report["vectors"] == 4
    assert report["embedded"] == 4  # the start-up catch-up embedded the records written without a provider
    assert report["stored_by_model"] == {"test:hashed-ngrams-64": 4}
    assert hybrid[0]["id"] == ids[0]
    assert searched[0]["id"] == ids[0]
    assert hybrid[0]["score"] > hybrid[1]["score"]


async def test_a_write_never_waits_for_its_embedding_and_bm25_finds_it_meanwhile(
    settings: Settings, clock: FakeClock
) -> None:
    gate = threading.Event()
    provider = HashedNgrams(gate=gate)
    impatient = settings.model_copy(update={"embedding_timeout_s": 0.2})  # the query's embedding is gated too
    try:
        async with serving(impatient, clock, provider) as client:
            await diagnose_until(client, lambda r: r["queued"] == 0)  # the (empty) start-up pass is done
            saved = await call(client, "memory_observe", content=PANORAMAS)
            # the worker now holds the record's text, blocked inside the model
            with anyio.fail_after(5):
                while not provider.calls:  # noqa: ASYNC110 - set by the worker thread, not by a task
                    await anyio.sleep(0.01)
            assert provider.calls == [[PANORAMAS]]
            found = (await call(client, "memory_recall", query="photographer harbour"))["hits"]
            waiting = (await call(client, "memory_diagnose"))["embeddings"]
            assert [h["id"] for h in found] == [saved["id"]]
            assert (waiting["vectors"], waiting["lacking"]) == (0, 1)
            assert "longer than 0.2 s" in waiting["last_error"]  # the recall went on with BM25 alone

            gate.set()
            report = await diagnose_until(client, settled)
            assert report["vectors"] == 1
    finally:
        gate.set()


async def test_failed_embeddings_are_retried(settings: Settings, clock: FakeClock) -> None:
    provider = HashedNgrams(fail_times=2)
    async with serving(settings, clock, provider) as client:
        await observe_all(client, [PANORAMAS, *DISTRACTORS])
        report = await diagnose_until(client, settled)
    assert report["failures"] == 2
    assert "scripted failure" in report["last_error"]
    assert report["vectors"] == 4
    assert provider.calls[0] == provider.calls[1] == provider.calls[2]  # the same batch, tried three times


async def test_stored_vectors_are_loaded_at_start_up_not_recomputed(settings: Settings, clock: FakeClock) -> None:
    async with serving(settings, clock, HashedNgrams()) as client:
        await observe_all(client, [PANORAMAS, *DISTRACTORS])
        await diagnose_until(client, settled)

    again = HashedNgrams()
    async with serving(settings, clock, again) as client:
        report = await diagnose_until(client, settled)
        hits = (await call(client, "memory_recall", query=TYPO_QUERY))["hits"]
    assert report["vectors"] == 4
    assert report["embedded"] == 0
    assert again.calls == [[TYPO_QUERY]]  # only the query was embedded
    assert hits[0]["snippet"].startswith("The photographer")


async def test_another_model_re_embeds_everything(settings: Settings, clock: FakeClock) -> None:
    async with serving(settings, clock, HashedNgrams(64)) as client:
        await observe_all(client, [PANORAMAS, *DISTRACTORS])
        await diagnose_until(client, settled)
    async with serving(settings, clock, HashedNgrams(32)) as client:
        report = await diagnose_until(client, settled)
    assert report["provider"] == "test:hashed-ngrams-32"
    assert report["embedded"] == 4
    assert report["stored_by_model"] == {"test:hashed-ngrams-32": 4}  # replaced, not added


@pytest.mark.parametrize("says_length_up_front", [True, False])
async def test_a_model_whose_vectors_changed_length_behind_its_name_embeds_everything_again(
    settings: Settings, clock: FakeClock, says_length_up_front: bool
) -> None:
    before, after = HashedNgrams(64), HashedNgrams(32)
    before.name = after.name = "test:same-name"
    if not says_length_up_front:
        after._dim = None  # as an HTTP provider: the length is known from the first answer
    async with serving(settings, clock, before) as client:
        await observe_all(client, [PANORAMAS, *DISTRACTORS])
        await diagnose_until(client, settled)

    async with serving(settings, clock, after) as client:
        await call(client, "memory_recall", query=TYPO_QUERY)  # tells the length, if nothing did
        report = await diagnose_until(client, lambda r: settled(r) and r["embedded"] == 4)
        hits = (await call(client, "memory_recall", query=TYPO_QUERY))["hits"]

    assert (report["dimension"], report["vectors"], report["stored_by_model"]) == (32, 4, {"test:same-name": 4})
    assert hits[0]["snippet"].startswith("The photographer")


async def test_changed_text_gets_a_new_vector_and_forgotten_records_lose_theirs(
    settings: Settings, clock: FakeClock
) -> None:
    provider = HashedNgrams()
    async with serving(settings, clock, provider) as client:
        note = (await call(client, "memory_lesson_save", content="Run the migrations before the deploy."))["lesson"]
        await diagnose_until(client, settled)
        calls_before = len(provider.calls)
        # saving the same lesson again reinforces it: same text, so the vector stays
        await call(client, "memory_lesson_save", content="Run the migrations before the deploy.")
        report = await diagnose_until(client, settled)
        assert (report["vectors"], len(provider.calls)) == (1, calls_before)

        memory = await call(client, "memory_save", content=PANORAMAS)
        await diagnose_until(client, settled)
        newer = await call(client, "memory_save", content=PANORAMAS + " Sold out.", supersedes=memory["id"])
        report = await diagnose_until(client, settled)
        assert report["stored_by_model"] == {"test:hashed-ngrams-64": 2}  # the lesson and the latest version
        assert provider.calls[-1] == [PANORAMAS + " Sold out."]

        await call(client, "memory_forget", ids=[newer["id"], note["id"]])
        report = await diagnose_until(client, settled)
    assert report["vectors"] == 0
    assert report["stored_by_model"] == {}


async def test_a_failing_query_embedding_falls_back_to_bm25(settings: Settings, clock: FakeClock) -> None:
    with FakeEmbeddingServer() as server:
        configured = settings.model_copy(
            update={"embeddings": "openai", "embedding_model": "hashed", "embedding_url": server.url}
        )
        async with serving(configured, clock, None) as client:
            ids = await observe_all(client, [PANORAMAS, *DISTRACTORS])
            report = await diagnose_until(client, settled)
            assert report["provider"] == "openai:hashed"
            assert report["vectors"] == 4
            hybrid = (await call(client, "memory_recall", query=TYPO_QUERY))["hits"]
            assert hybrid[0]["id"] == ids[0]

            server.answer_next(1, status=500)
            fallback = (await call(client, "memory_recall", query="photographer harbour"))["hits"]
            report = (await call(client, "memory_diagnose"))["embeddings"]
    assert fallback[0]["id"] == ids[0]  # BM25 alone: the record sharing terms, then its neighbours
    assert all(h["score"] < fallback[0]["score"] for h in fallback[1:])
    assert report["failures"] == 1
    assert "500" in report["last_error"]
    assert all(r.path == "/v1/embeddings" for r in server.requests)


async def test_records_written_by_a_process_without_a_provider_are_embedded_by_one_with_it(
    tmp_path: Path, clock: FakeClock
) -> None:
    settings = Settings(db=tmp_path / "shared.db", project="test", synchronous="normal")
    provider = HashedNgrams()
    async with serving(settings, clock, provider) as hybrid, serving(settings, clock, None) as plain:
        await diagnose_until(hybrid, settled)
        ids = await observe_all(plain, [PANORAMAS, *DISTRACTORS])
        # the next call of the hybrid process applies the other writer's changes, then embeds them
        report = await diagnose_until(hybrid, lambda r: r["vectors"] == 4 and settled(r))
        hits = (await call(hybrid, "memory_recall", query=TYPO_QUERY))["hits"]
        other = (await call(plain, "memory_diagnose"))["embeddings"]
    assert report["embedded"] == 4
    assert hits[0]["id"] == ids[0]
    assert other["provider"] == "none"
    assert other["stored_by_model"] == {"test:hashed-ngrams-64": 4}


# -- the index -----------------------------------------------------------------------------------------


def _unit(values: list[float]) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def _doc(partition: Partition, key: str, terms: list[int], digest: int, kind: int = 1, at: float = 0.0) -> None:
    partition.add(key, encode_terms([(t, 1) for t in terms]), len(terms), DocAttrs(kind, 0, 0, at, digest=digest))


def test_a_vector_belongs_to_the_text_it_was_made_from() -> None:
    partition = Partition(BM25Params(), RankParams())
    _doc(partition, "a", [1, 2], digest=11)
    assert partition.set_vector("a", 99, _unit([1, 0])) is False  # made from other text
    assert partition.set_vector("a", 11, _unit([1, 0])) is True
    _doc(partition, "a", [1, 3], digest=11)  # re-indexed, same text: the vector stays
    assert partition.has_vector("a")
    _doc(partition, "a", [1, 4], digest=12)  # new text: the vector is stale
    assert not partition.has_vector("a")
    assert partition.set_vector("a", 12, _unit([1, 0, 0])) is False  # another dimension than the index's
    partition.remove("a")
    assert partition.vector_count == 0


def test_vectors_survive_compaction() -> None:
    partition = Partition(BM25Params(), RankParams())
    # evenly spread angles: whole radians wrap round the circle, and two of them land within
    # float32's resolution of each other (300 and 2430), which made the nearest one a tie
    angle = 2 * np.pi / 3000
    for i in range(3000):
        _doc(partition, f"d{i}", [i % 50], digest=i + 1)
        partition.set_vector(f"d{i}", i + 1, _unit([np.cos(i * angle), np.sin(i * angle)]))
    for i in range(3000):
        if i % 3:
            partition.remove(f"d{i}")  # crosses the compaction threshold
    assert len(partition.keys) < 3000
    assert partition.vector_count == 1000
    docs, sims = partition.nearest(_unit([np.cos(300 * angle), np.sin(300 * angle)]), Filter(), 1)
    assert partition.keys[int(docs[0])] == "d300"
    assert sims[0] == pytest.approx(1.0, abs=1e-6)


def test_nearest_applies_filters_before_ranking() -> None:
    partition = Partition(BM25Params(), RankParams())
    for i in range(20):
        _doc(partition, f"d{i}", [1], digest=i + 1, kind=2 if i < 10 else 1)
        partition.set_vector(f"d{i}", i + 1, _unit([1.0, i / 100]))  # lower i: closer to the query
    docs, _ = partition.nearest(_unit([1.0, 0.0]), Filter(kinds=frozenset({1})), 3)
    assert sorted(partition.keys[int(i)] or "" for i in docs) == ["d10", "d11", "d12"]


def test_a_record_at_a_right_angle_is_no_match_whatever_float_rounding_gives_it() -> None:
    partition = Partition(BM25Params(), RankParams())
    _doc(partition, "near", [1], digest=1)
    partition.set_vector("near", 1, _unit([1.0, 0.1]))
    _doc(partition, "square", [1], digest=2)
    partition.set_vector("square", 2, _unit([1e-8, 1.0]))  # a right angle, give or take rounding
    docs, _ = partition.nearest(_unit([1.0, 0.0]), Filter(), 5)
    # its cosine of 1e-8 (or -1e-8 elsewhere in the matrix) once decided whether it was a match
    assert [partition.keys[int(i)] for i in docs] == ["near"]


def test_reciprocal_rank_fusion_adds_weighted_reciprocal_ranks() -> None:
    lexical = [("a", 9.0, 1.0), ("b", 5.0, 1.0), ("c", 1.0, 1.0)]
    semantic = [("c", 0.9, 1.0), ("d", 0.8, 2.0), ("a", 0.1, 1.0)]
    fused = reciprocal_rank_fusion([(lexical, 1.0), (semantic, 0.5)], k=60)
    scores = {key: score for key, score, _ in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 0.5 / 63)
    assert scores["c"] == pytest.approx(1 / 63 + 0.5 / 61)
    assert scores["d"] == pytest.approx(0.5 / 62)
    assert [key for key, _, _ in fused] == ["a", "c", "b", "d"]


def test_hybrid_search_without_query_terms_uses_vectors_alone() -> None:
    partition = Partition(BM25Params(), RankParams(vector_weight=1.0))
    for i, direction in enumerate([[1, 0], [0, 1], [1, 1]]):
        _doc(partition, f"d{i}", [10 + i], digest=i + 1)
        partition.set_vector(f"d{i}", i + 1, _unit(direction))
    found = partition.search([], Filter(), 3, None, _unit([0.1, 1]))
    assert [key for key, _, _ in found] == ["d1", "d2", "d0"]


def test_equal_cosines_at_the_cut_keep_the_newer_documents() -> None:
    partition = Partition(BM25Params(), RankParams())
    # 40 copies of one text share one vector; shuffled so that the order they were indexed in says
    # nothing of their age
    for i in np.random.default_rng(5).permutation(40).tolist():
        _doc(partition, f"d{i:02d}", [1], digest=i + 1, at=float(i // 2))  # two of each age: the key decides
        partition.set_vector(f"d{i:02d}", i + 1, _unit([1.0, 1.0]))
    _doc(partition, "closest", [1], digest=99, at=0.0)
    partition.set_vector("closest", 99, _unit([1.0, 0.0]))
    docs, _ = partition.nearest(_unit([1.0, 0.0]), Filter(), 6)
    assert sorted(partition.keys[int(i)] or "" for i in docs) == ["closest", "d34", "d36", "d37", "d38", "d39"]
