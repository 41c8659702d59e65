"""Recall's types narrow observations before ranking even with memories searched beside them, and the
hint for an empty result names each unknown word whole, as the analyser reads it."""

from __future__ import annotations

import unicodedata

from mcp import Client

from tests.conftest import call


async def test_types_narrow_before_ranking_with_memories_searched_too(client: Client) -> None:
    # 1,100 notes outrank the one decision: filtered after ranking, it lay below the depth read.
    for i in range(1100):
        await call(client, "memory_observe", content=f"walrus walrus walrus note {i}", session_id=f"s{i // 100}")
    decision = await call(
        client, "memory_observe", type="decision", session_id="dec",
        content="we picked the walrus vendor after a long comparison of many alternatives and prices",
    )  # fmt: skip
    memory = await call(client, "memory_save", content="The walrus vendor bills yearly")

    plain = await call(client, "memory_recall", query="walrus", types=["decision"])
    mixed = await call(client, "memory_recall", query="walrus", types=["decision"], include_memories=True)

    assert [h["id"] for h in plain["hits"]] == [decision["id"]]
    assert sorted(h["id"] for h in mixed["hits"]) == sorted([decision["id"], memory["id"]])


async def test_types_no_record_has_leave_the_memories_searched_beside(client: Client) -> None:
    await call(client, "memory_observe", content="walrus sighting at the pier")
    memory = await call(client, "memory_save", content="The walrus vendor bills yearly")

    mixed = await call(client, "memory_recall", query="walrus", types=["bugfix"], include_memories=True)
    alone = await call(client, "memory_recall", query="walrus", types=["bugfix"])

    assert [h["id"] for h in mixed["hits"]] == [memory["id"]]
    assert alone["hits"] == []
    assert alone["hint"] == "Nothing matched within session_id, types, since or until; without them some records match."


async def test_the_unknown_word_hint_names_words_with_combining_marks_whole(client: Client) -> None:
    await call(client, "memory_observe", content="deploy then rollback after timeout on the cafe server")
    for query, word in [("தமிழ்", "தமிழ்"), ("हिन्दी", "हिन्दी"), ("e\u0301te\u0301", "été"), ("nai\u0308ve", "naïve")]:
        found = await call(client, "memory_smart_search", query=query)
        recalled = await call(client, "memory_recall", query=query)

        assert found["hits"] == recalled["hits"] == []
        assert f"'{word}'" in unicodedata.normalize("NFC", found["hint"]), (query, found["hint"])
        assert f"'{word}'" in unicodedata.normalize("NFC", recalled["hint"]), (query, recalled["hint"])


async def test_the_unknown_word_hint_names_language_names_with_symbols(client: Client) -> None:
    await call(client, "memory_observe", content="deploy then rollback after timeout on the cafe server")
    for query in ["C#", "F#", "C++"]:
        found = await call(client, "memory_smart_search", query=query)

        assert found["hits"] == []
        assert found["hint"].startswith(f"No searchable record holds '{query}'"), found["hint"]
