"""A search that finds nothing says why, when it can: a query without words, its filters, other kinds."""

from __future__ import annotations

from mcp import Client

from tests.conftest import FakeClock, call

NO_WORDS = "The query has no word to search for"


async def test_a_query_of_stop_words_and_punctuation_is_told_so(client: Client) -> None:
    await call(client, "memory_observe", content="The proxy listens on port 8080.")

    for tool in ("memory_recall", "memory_smart_search"):
        for query in ("what was it?", "???", "the and of"):
            result = await call(client, tool, query=query)
            assert result["hits"] == []
            assert result["hint"].startswith(NO_WORDS), (tool, query)


async def test_recall_points_to_smart_search_when_only_memories_or_lessons_match(client: Client) -> None:
    await call(client, "memory_observe", content="Reviewed the release checklist.")
    await call(client, "memory_save", content="The proxy listens on port 8080.")
    await call(client, "memory_lesson_save", content="Check the proxy port before deploying.")

    result = await call(client, "memory_recall", query="proxy port")

    assert result["hits"] == []
    assert result["hint"] == (
        "Nothing of the kinds recall searches matched, but lessons and memories do: "
        "ask memory_smart_search, which searches every kind."
    )
    assert len((await call(client, "memory_smart_search", query="proxy port"))["hits"]) == 2
    with_memories = await call(client, "memory_recall", query="proxy port", include_memories=True)
    assert len(with_memories["hits"]) == 1
    # each kind alone gets the way to it that costs least
    assert (await call(client, "memory_recall", query="listens"))["hint"] == (
        "Nothing of the kinds recall searches matched, but memories do: "
        "set include_memories to search them too, or ask memory_smart_search."
    )
    only_lessons = await call(client, "memory_recall", query="deploying", include_memories=True)
    assert only_lessons["hint"] == (
        "Nothing of the kinds recall searches matched, but lessons do: "
        "ask memory_lesson_recall (or memory_smart_search)."
    )


async def test_recall_says_when_its_filters_left_out_what_matches(client: Client, clock: FakeClock) -> None:
    await call(client, "memory_observe", content="The proxy listens on port 8080.", session_id="s1")
    clock.advance(days=10)

    by_time = await call(client, "memory_recall", query="proxy", since="2026-01-10")
    by_type = await call(client, "memory_recall", query="proxy", types=["decision"])
    # memories searched beside: the index is not given the types, which still left the note out
    by_type_too = await call(client, "memory_recall", query="proxy", types=["decision"], include_memories=True)

    for result in (by_time, by_type, by_type_too):
        assert result["hits"] == []
        assert result["hint"] == (
            "Nothing matched within session_id, types, since or until; without them some records match."
        )


async def test_a_search_with_hits_gives_no_hint_and_one_with_unknown_words_names_them(client: Client) -> None:
    await call(client, "memory_observe", content="The proxy listens on port 8080 behind elasticsearch.")

    found = await call(client, "memory_recall", query="proxy")
    assert len(found["hits"]) == 1
    assert found.get("hint") is None
    for tool in ("memory_recall", "memory_smart_search"):
        nothing = await call(client, tool, query="what about opensearch decomission?")
        assert nothing["hits"] == []
        assert nothing["hint"] == (
            "No searchable record holds 'opensearch', 'decomission': check the spelling, or try other words for it."
        )


async def test_a_date_no_record_falls_on_is_named_as_a_date_not_as_a_misspelt_word(
    client: Client, clock: FakeClock
) -> None:
    await call(client, "memory_observe", content="The proxy listens on port 8080.")  # dated 2026-01-05
    clock.advance(days=3)
    await call(client, "memory_save", content="The proxy is nginx.")  # 2026-01-08: a kind recall leaves out

    on_another_day = await call(client, "memory_recall", query="Jan 9")
    unknown_on_another_day = await call(client, "memory_smart_search", query="opensearch on 2025-03-02")
    weeks_ago = await call(client, "memory_recall", query="standup two weeks ago")  # late December
    on_its_day = await call(client, "memory_recall", query="Jan 5")

    # the days the records searched span tell where to look instead
    assert on_another_day["hits"] == []
    assert on_another_day["hint"] == "No searchable record is dated 'Jan 9' (those searched are dated 2026-01-05)."
    assert unknown_on_another_day["hint"] == (
        "No searchable record holds 'opensearch': check the spelling, or try other words for it. "
        "No searchable record is dated '2025-03-02' (those searched are dated 2026-01-05 to 2026-01-08)."
    )
    assert weeks_ago["hint"] == (
        "No searchable record holds 'standup': check the spelling, or try other words for it. "
        "No searchable record is dated 'two weeks ago' (those searched are dated 2026-01-05)."
    )
    assert [hit["snippet"] for hit in on_its_day["hits"]] == ["The proxy listens on port 8080."]
