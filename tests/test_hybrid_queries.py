"""Hybrid search asks the model once per call and ranks on one scale: the searches that explain an
empty result reuse the query's vector, and a partition with no vector near the query (global
lessons, here) is fused all the same, not ranked by raw BM25 beside fused scores."""

from __future__ import annotations

from mcp_memory.config import Settings
from tests._embedding import HashedNgrams
from tests.conftest import FakeClock, call
from tests.test_embeddings import DISTRACTORS, PANORAMAS, diagnose_until, observe_all, serving, settled

QUERY = "photographer harbour"


async def test_a_search_that_finds_nothing_asks_the_model_for_its_query_once(
    settings: Settings, clock: FakeClock
) -> None:
    provider = HashedNgrams()
    async with serving(settings, clock, provider) as client:
        await observe_all(client, [PANORAMAS, *DISTRACTORS])
        await diagnose_until(client, settled)
        provider.calls.clear()
        # no error was recorded: the recall finds nothing, and its hint searches without the type
        recalled = await call(client, "memory_recall", query=QUERY, types=["error"])
        asked_by_recall = [texts for texts in provider.calls if QUERY in texts]
        provider.calls.clear()
        searched = await call(client, "memory_smart_search", query=QUERY, kinds=["lesson"])
        asked_by_search = [texts for texts in provider.calls if QUERY in texts]

    assert recalled["hits"] == []
    assert "without them some records match" in recalled["hint"]
    assert searched["hits"] == []
    assert searched["hint"] is not None
    assert (len(asked_by_recall), len(asked_by_search)) == (1, 1)


async def test_global_lessons_with_no_vector_near_the_query_rank_on_the_fused_scale(
    settings: Settings, clock: FakeClock
) -> None:
    async with serving(settings, clock, HashedNgrams()) as client:
        for text in ("Harbour fjord nymph sphinx.", "Fjord yacht.", "Blimp fjord.", "Fjord cobalt.", "Fjord jazz."):
            await call(client, "memory_lesson_save", content=text, scope="global")
        ids = [(await call(client, "memory_save", content=text))["id"] for text in [PANORAMAS, *DISTRACTORS]]
        await diagnose_until(client, settled)
        hits = (await call(client, "memory_smart_search", query=QUERY))["hits"]

    assert hits[0]["id"] == ids[0]  # the memory saying both words, not a lesson sharing one
    assert all(hit["score"] < 1 for hit in hits)  # reciprocal ranks, every one
