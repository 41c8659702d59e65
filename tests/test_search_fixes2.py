"""Scrubbed lesson queries, equally relevant lessons ranked by confidence, observation types that leave
memories alone, timelines around tied observations, searches with nothing to search, and not-found
errors that name their field — all through the real server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import numpy as np
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.search.embeddings import EmbeddingProvider
from mcp_memory.server import build_server
from tests._embedding import HashedNgrams
from tests.conftest import FakeClock, call, call_error

API_KEY = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


# -- lesson recall scrubs its query ----------------------------------------------------------------


async def test_lesson_recall_echoes_and_searches_the_query_without_secrets(client: Client) -> None:
    saved = await call(client, "memory_lesson_save", content="Kubernetes upgrades need every node drained first")

    private = await call(client, "memory_lesson_recall", query=f"<private>kubernetes upgrades</private> {API_KEY}")
    mixed = await call(client, "memory_lesson_recall", query=f"upgrades with {API_KEY}")
    plain = await call(client, "memory_lesson_recall", query="kubernetes upgrades")

    assert private["query"] == "[private] [REDACTED:anthropic_key]"
    assert private["lessons"] == []  # only private and secret parts: nothing is searched
    assert mixed["query"] == "upgrades with [REDACTED:anthropic_key]"
    assert [lesson["id"] for lesson in mixed["lessons"]] == [saved["lesson"]["id"]]
    assert [lesson["id"] for lesson in plain["lessons"]] == [saved["lesson"]["id"]]


async def test_lesson_recall_without_a_query_still_ranks_by_confidence(client: Client) -> None:
    low = await call(client, "memory_lesson_save", content="Prefer small pull requests", confidence=0.4)
    high = await call(client, "memory_lesson_save", content="Pin the toolchain version", confidence=0.8)

    for query in (None, ""):
        args = {} if query is None else {"query": query}
        found = await call(client, "memory_lesson_recall", **args)
        assert found["query"] == query
        assert [lesson["id"] for lesson in found["lessons"]] == [high["lesson"]["id"], low["lesson"]["id"]]


# -- equally relevant lessons: confidence decides -------------------------------------------------


async def test_equally_relevant_weak_matches_rank_by_confidence(client: Client, clock: FakeClock) -> None:
    # Two lessons holding every query term: each idf is negative, so BM25 scores them <= 0.
    older = await call(
        client,
        "memory_lesson_save",
        content="Always run database migrations before deploying the alpha service",
        confidence=0.9,
    )
    clock.advance(minutes=1)
    newer = await call(
        client,
        "memory_lesson_save",
        content="Always run database migrations before deploying the beta service",
        confidence=0.5,
    )

    found = await call(client, "memory_lesson_recall", query="database migrations deploying")

    ranked = [(lesson["id"], lesson["confidence"], lesson["score"]) for lesson in found["lessons"]]
    assert ranked == [(older["lesson"]["id"], 0.9, 0.0009), (newer["lesson"]["id"], 0.5, 0.0005)]


async def test_equally_relevant_lessons_of_equal_confidence_keep_one_order(client: Client) -> None:
    ids = []
    for service in ("gamma", "delta", "alpha"):  # saved at one instant (the clock does not move): equal confidence
        saved = await call(client, "memory_lesson_save", content=f"Run the migrations before deploying {service}")
        ids.append(saved["lesson"]["id"])

    first = await call(client, "memory_lesson_recall", query="migrations deploying")
    again = await call(client, "memory_lesson_recall", query="migrations deploying")

    assert [lesson["id"] for lesson in first["lessons"]] == sorted(ids)
    assert again["lessons"] == first["lessons"]
    assert len({lesson["score"] for lesson in first["lessons"]}) == 1


# -- recall types narrow observations only -----------------------------------------------------------


async def test_recall_types_narrow_observations_not_memories(client: Client) -> None:
    error = await call(client, "memory_observe", content="kafka consumer lag alert fired", type="error")
    decision = await call(client, "memory_observe", content="kafka retention set to 7 days", type="decision")
    fact = await call(client, "memory_save", content="kafka brokers run on three nodes", kind="fact")
    chosen = await call(client, "memory_save", content="we decided kafka over rabbitmq", kind="decision")
    memories = {fact["id"], chosen["id"]}

    errors = await call(client, "memory_recall", query="kafka", types=["error"], include_memories=True)
    facts = await call(client, "memory_recall", query="kafka", types=["fact"], include_memories=True)
    decisions = await call(client, "memory_recall", query="kafka", types=["decision"], include_memories=True)
    episodic = await call(client, "memory_recall", query="kafka", types=["decision"])

    assert {h["id"] for h in errors["hits"]} == {error["id"], *memories}
    assert {h["id"] for h in facts["hits"]} == memories  # "fact" is no observation's type
    assert {h["id"] for h in decisions["hits"]} == {decision["id"], *memories}
    assert [h["id"] for h in episodic["hits"]] == [decision["id"]]


async def test_recall_types_with_memories_fill_the_page_past_other_observations(client: Client) -> None:
    notes = [
        (await call(client, "memory_observe", content=f"kafka kafka partition note {n}", type="note"))["id"]
        for n in range(12)
    ]
    error = await call(client, "memory_observe", content="kafka broker crashed once", type="error")
    fact = await call(client, "memory_save", content="kafka runs in the eu cluster", kind="fact")

    found = await call(client, "memory_recall", query="kafka", types=["error"], include_memories=True, limit=2)

    assert {h["id"] for h in found["hits"]} == {error["id"], fact["id"]}
    assert not {h["id"] for h in found["hits"]} & set(notes)


# -- the timeline around observations tied in time and position ------------------------------------


async def test_timeline_around_an_anchor_shows_observations_tied_with_it(client: Client) -> None:
    ids = [
        (
            await call(
                client, "memory_observe", content=f"history item {n}", session_id=f"hist-{n}", occurred_at="2023-05-08"
            )
        )["id"]
        for n in range(4)
    ]  # four sessions, one moment, each observation its session's first

    around = await call(client, "memory_timeline", anchor=ids[1])
    narrow = await call(client, "memory_timeline", anchor=ids[1], before=1, after=1)

    assert [e["id"] for e in around["entries"]] == sorted(ids)
    assert [e["id"] for e in narrow["entries"]] == sorted(ids)[:3]
    assert [e["anchor"] for e in around["entries"]] == [i == ids[1] for i in sorted(ids)]


async def test_timeline_at_a_moment_keeps_tied_observations_in_one_order(client: Client) -> None:
    ids = [
        (await call(client, "memory_observe", content=f"parallel chat {n}", session_id=f"chat-{n}"))["id"]
        for n in range(3)
    ]  # same instant (the clock does not move), each seq 1

    now = await call(client, "memory_timeline")
    at = await call(client, "memory_timeline", at="2026-01-05T09:00:00Z")

    assert [e["id"] for e in now["entries"]] == sorted(ids)
    assert [e["id"] for e in at["entries"]] == sorted(ids)


# -- nothing to search: no arbitrary records ---------------------------------------------------------


@asynccontextmanager
async def serving(settings: Settings, clock: FakeClock, provider: EmbeddingProvider) -> AsyncIterator[Client]:
    async with Client(build_server(settings, clock, provider=provider)) as client:
        yield client


async def embedded_everything(client: Client) -> None:
    with anyio.fail_after(15):
        while True:
            report: dict[str, Any] = (await call(client, "memory_diagnose"))["embeddings"]
            stored = report["stored_by_model"].get(report["provider"], 0)
            if report["queued"] == 0 and report["lacking"] == 0 and stored == report["vectors"] > 0:
                return
            await anyio.sleep(0.02)


TEXTS = [
    "The photographer exhibited panoramas of the harbour.",
    "We switched SQLite to WAL journal mode so readers never block the writer.",
    "Deploys go out every Tuesday afternoon",
    "zzz qqq",
]


async def test_a_query_the_model_cannot_read_finds_nothing(settings: Settings, clock: FakeClock) -> None:
    async with serving(settings, clock, HashedNgrams()) as client:
        ids = [(await call(client, "memory_observe", content=text))["id"] for text in TEXTS]
        await embedded_everything(client)
        unreadable = {q: await call(client, "memory_recall", query=q) for q in ("???", "🚀", "!!! ...")}
        searched = await call(client, "memory_smart_search", query="???")
        lexical = await call(client, "memory_recall", query="sqlite wal")

    assert {q: r["hits"] for q, r in unreadable.items()} == {"???": [], "🚀": [], "!!! ...": []}
    assert searched["hits"] == []
    assert lexical["hits"][0]["id"] == ids[1]  # BM25 (fused with the vectors) as before


async def test_semantic_hits_need_a_positive_cosine(settings: Settings, clock: FakeClock) -> None:
    provider = HashedNgrams()
    query = "the and of"  # stop words only: the vectors alone rank
    cosines = provider.embed(TEXTS) @ provider.embed([query])[0]
    assert (cosines > 0).any()  # the fixture has records on both sides of the query
    assert (cosines < 0).any()
    async with serving(settings, clock, provider) as client:
        ids = [(await call(client, "memory_observe", content=text))["id"] for text in TEXTS]
        await embedded_everything(client)
        found = await call(client, "memory_recall", query=query)

    expected = [ids[i] for i in np.argsort(-cosines) if cosines[i] > 0]
    assert [h["id"] for h in found["hits"]] == expected


# -- not-found errors name the argument -------------------------------------------------------------


async def test_unknown_memory_ids_are_named_by_their_field(client: Client) -> None:
    elsewhere = await call(client, "memory_save", content="The other team deploys on Fridays", project="other")
    unknown = "mem_0000000000unknown000"

    for record_id in (unknown, elsewhere["id"]):
        got = await call_error(client, "memory_get", id=record_id)
        superseding = await call_error(client, "memory_save", content="Deploys happen daily", supersedes=record_id)
        hint = "in this project; call memory_smart_search to find memory ids"
        assert got == f"Error executing tool memory_get: id: No memory {record_id!r} {hint}"
        assert superseding == f"Error executing tool memory_save: supersedes: No memory {record_id!r} {hint}"
    assert (await call(client, "memory_diagnose"))["counts"]["memories"] == 1  # the other project's: nothing saved


async def test_an_unknown_or_empty_timeline_anchor_is_named(client: Client) -> None:
    elsewhere = await call(client, "memory_observe", content="Another project's note", project="other")

    unknown = await call_error(client, "memory_timeline", anchor="obs_0000000000unknown000")
    foreign = await call_error(client, "memory_timeline", anchor=elsewhere["id"])
    empty = await call_error(client, "memory_timeline", anchor="")

    assert "anchor: No observation 'obs_0000000000unknown000' in this project" in unknown
    assert foreign == unknown.replace("obs_0000000000unknown000", elsewhere["id"])
    assert "anchor:" in empty


async def test_a_project_whose_only_record_has_no_terms_answers_without_a_numpy_warning(client: Client) -> None:
    import warnings

    await call(client, "memory_save", content="x")  # a record with no searchable words: no length at all
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # 0/0 in the length normalisation once warned
        diagnosis = await call(client, "memory_diagnose")
        found = await call(client, "memory_recall", query="x", include_memories=True)

    assert diagnosis["counts"]["memories"] == 1
    assert found["hits"] == []
