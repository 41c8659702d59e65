"""A query word no record holds is searched as the known word one typing slip away, and says so."""

from __future__ import annotations

from collections import Counter

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.search.spelling import respell
from mcp_memory.server import build_server
from tests._embedding import HashedNgrams
from tests.conftest import FakeClock, call
from tests.test_embeddings import diagnose_until, settled

pytestmark = pytest.mark.anyio


def _holders(*texts: str) -> Counter[str]:
    analyzer = Analyzer()
    return Counter(term for text in texts for term in set(analyzer.terms(text)))


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("tiemout", "timeout"),  # two letters swapped
        ("timout", "timeout"),  # one left out
        ("timeoutt", "timeout"),  # one typed twice
        ("timeiut", "timeout"),  # the key beside it
        ("Tiemout", "timeout"),  # capitalised at the start of a question
    ],
)
def test_each_kind_of_slip_is_respelled(typed: str, meant: str) -> None:
    held = _holders("the busy timeout is five seconds")
    found = respell(f"what {typed} did we set", lambda term: held[term], Analyzer())
    assert found.text == f"what {meant} did we set"
    assert found.changes == ((typed, meant),)
    assert found.note() == f"Searched for {meant!r} in place of {typed!r}, which no record holds."


@pytest.mark.parametrize(
    ("query", "store"),
    [
        ("relationship status", "she visited the states"),  # u and e are far apart: another word, not a slip
        ("pursue writing", "waiting for the bus"),
        ("what happened in march", "the match was won"),  # a month is a date, never a slip
        ("tset", "the test passed"),  # too short to tell a slip from another word
        ("getUsrName", "getUserName failed"),  # an identifier is searched as written
        ("timeout", "timeouts and retries"),  # known (as "timeout" stems): nothing to respell
    ],
)
def test_words_that_are_not_slips_are_searched_as_typed(query: str, store: str) -> None:
    held = _holders(store)
    found = respell(query, lambda term: held[term], Analyzer())
    assert found.text == query
    assert found.changes == ()
    assert found.note() is None


def test_the_candidate_most_records_hold_wins() -> None:
    held = _holders("the parse step", "the parse step", "the parser")
    found = respell("parsee errors", lambda term: held[term], Analyzer())
    assert found.text == "parse errors"  # "parse" (2 records) over "parser" (1), both one slip away


async def test_search_tools_find_a_misspelt_word_and_name_the_respelling(client: Client) -> None:
    await call(client, "memory_save", content="The database uses a busy timeout of five seconds", kind="fact")
    await call(client, "memory_observe", content="Raised the busy timeout after lock errors", session_id="s1")
    await call(client, "memory_lesson_save", content="Raise the busy timeout before adding retries")
    note = "Searched for 'timeout' in place of 'tiemout', which no record holds."

    smart = await call(client, "memory_smart_search", query="busy tiemout")
    assert smart["hint"] == note
    assert {hit["kind"] for hit in smart["hits"]} == {"memory", "observation", "lesson"}

    recall = await call(client, "memory_recall", query="tiemout")
    assert recall["hint"] == note
    assert [hit["title"] for hit in recall["hits"]] == ["Raised the busy timeout after lock errors"]

    lessons = await call(client, "memory_lesson_recall", query="tiemout")
    assert lessons["hint"] == note
    assert [lesson["content"] for lesson in lessons["lessons"]] == ["Raise the busy timeout before adding retries"]

    plain = await call(client, "memory_smart_search", query="busy timeout")
    assert plain.get("hint") is None


async def test_a_word_held_only_by_another_project_is_never_suggested(client: Client) -> None:
    await call(client, "memory_save", content="Kubernetes ingress notes", kind="fact", project="other")
    await call(client, "memory_save", content="Docker compose notes", kind="fact", project="mine")
    found = await call(client, "memory_smart_search", query="kubernetis", project="mine")
    assert found["hits"] == []
    assert found["hint"] == "No searchable record holds 'kubernetis': check the spelling, or try other words for it."


async def test_a_global_lesson_word_respells_a_project_search(client: Client) -> None:
    await call(client, "memory_lesson_save", content="Pin the interpreter version in CI", scope="global")
    found = await call(client, "memory_smart_search", query="interpeter", project="mine")
    assert found["hint"] == "Searched for 'interpreter' in place of 'interpeter', which no record holds."
    assert [hit["title"] for hit in found["hits"]] == ["Pin the interpreter version in CI"]


async def test_the_note_names_the_word_as_the_records_found_write_it(client: Client) -> None:
    await call(client, "memory_observe", content="The photographer exhibited panoramas of the harbour.")
    found = await call(client, "memory_recall", query="panoramics")  # one slip from "panoramaics", a non-word
    assert found["hint"] == "Searched for 'panoramas' in place of 'panoramics', which no record holds."
    assert len(found["hits"]) == 1


async def test_an_embedding_model_reads_the_query_as_typed(settings: Settings, clock: FakeClock) -> None:
    provider = HashedNgrams()
    async with Client(build_server(settings, clock, provider=provider)) as client:
        await call(client, "memory_observe", content="Raised the busy timeout after lock errors")
        await diagnose_until(client, settled)
        provider.calls.clear()
        found = await call(client, "memory_recall", query="tiemout")
    assert provider.calls == [["tiemout"]]
    assert found["hint"] == "Searched for 'timeout' in place of 'tiemout', which no record holds."


async def test_a_misspelt_context_focus_puts_what_it_meant_first(client: Client) -> None:
    await call(
        client, "memory_save", content="Deploys go out on Tuesdays after the review", kind="fact", importance=0.9
    )
    await call(client, "memory_save", content="The busy timeout is five seconds", kind="fact", importance=0.2)
    await call(client, "memory_lesson_save", content="Ship small changes")
    await call(client, "memory_lesson_save", content="Raise the timeout before adding retries")
    for arguments, first_lesson, first_memory in (
        ({"query": "tiemout"}, "Raise the timeout", "The busy timeout"),
        ({}, "Ship small changes", "Deploys go out"),  # unfocused: as ranked without a query
    ):
        text = (await call(client, "memory_context", **arguments))["text"]
        lessons = text.split("## Lessons\n", 1)[1]
        memories = text.split("## Memories\n", 1)[1]
        assert lessons.startswith(f"- [lesson 0.50] {first_lesson}")
        assert memories.startswith(f"- [fact] {first_memory}")
