"""Servers sharing one database keep their indexes equal to a fresh rebuild, whatever mix of writes
each of them makes: saves, supersessions, forgets, folds, summaries, consolidation, all at once."""

from __future__ import annotations

import random
from typing import Any

import anyio
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock

WORDS = [
    *("deploy", "proxy", "port", "database", "migration", "caroline", "melanie", "zanzibar", "layout"),
    *("backup", "nightly", "release", "wheel", "pystemmer", "stemmer", "ci", "flaky", "checkout", "stripe"),
    *("webhook", "cache", "redis", "sqlite", "wal", "timeout", "retry"),
]
SESSIONS = ["chat-a", "chat-b", "chat-c"]
MID_MAY = {"since": "2023-05-10T00:00:00Z", "until": "2023-05-20T00:00:00Z"}


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + "."


async def act(client: Client, rng: random.Random, made: list[str]) -> None:
    """One random write (or a failed one: an id another server forgot meanwhile is fine)."""
    roll = rng.random()
    arguments: dict[str, Any]
    if roll < 0.35:
        tool = "memory_observe"
        kind = rng.choice(["note", "error"])
        arguments = {"content": sentence(rng), "session_id": rng.choice(SESSIONS), "type": kind}
        if rng.random() < 0.3:
            arguments["occurred_at"] = f"2023-05-{rng.randint(1, 28):02d}T10:00:00Z"
    elif roll < 0.55:
        tool, arguments = "memory_save", {"content": sentence(rng)}
    elif roll < 0.65:
        tool, arguments = "memory_lesson_save", {"content": sentence(rng)}
    elif roll < 0.72:
        tool, arguments = "memory_slot_append", {"name": "notes", "text": sentence(rng)}
    elif roll < 0.82 and made:
        tool, arguments = "memory_forget", {"ids": [rng.choice(made)]}
    elif roll < 0.87:
        tool, arguments = "memory_crystallize", {"session_id": rng.choice(SESSIONS), "force": True}
    elif roll < 0.92:
        tool, arguments = "memory_forget", {"kind": "observation", "session_id": rng.choice(SESSIONS)}
    else:
        tool, arguments = "memory_consolidate", {}
    result = await client.call_tool(tool, arguments)
    if not result.is_error and result.structured_content and "id" in result.structured_content:
        made.append(str(result.structured_content["id"]))


async def answers(client: Client, queries: list[str]) -> list[list[tuple[str, float]]]:
    """Each query's hits and scores, across kinds and, by when they happened, in mid-May 2023."""
    found = []
    for query in queries:
        for tool, window in (("memory_smart_search", {}), ("memory_recall", MID_MAY)):
            result = await client.call_tool(tool, {"query": query, "limit": 20, **window})
            assert not result.is_error
            assert result.structured_content is not None
            found.append([(hit["id"], round(hit["score"], 6)) for hit in result.structured_content["hits"]])
    return found


async def test_two_servers_writing_at_once_search_like_a_fresh_rebuild(settings: Settings, clock: FakeClock) -> None:
    capped = settings.model_copy(update={"observation_cap": 10})  # so sessions fold as they grow
    rng = random.Random(7)
    queries = [" ".join(rng.sample(WORDS, 2)) for _ in range(25)]
    made: list[str] = []

    async with Client(build_server(capped, clock)) as one, Client(build_server(capped, clock)) as two:

        async def writer(client: Client, seed: int) -> None:
            mine = random.Random(seed)
            for _ in range(70):
                await act(client, mine, made)

        async with anyio.create_task_group() as group:
            group.start_soon(writer, one, 1)
            group.start_soon(writer, two, 2)
        live = [await answers(one, queries), await answers(two, queries)]
        health = (await one.call_tool("memory_diagnose", {})).structured_content

    async with Client(build_server(capped, clock)) as fresh:
        rebuilt = await answers(fresh, queries)

    assert sum(len(hits) for hits in rebuilt) > 50  # the queries find plenty
    assert live[0] == rebuilt
    assert live[1] == rebuilt
    assert health is not None
    assert health["index_in_sync"] is True
