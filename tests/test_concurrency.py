"""Concurrent writers through real servers: many HTTP clients on one server, two stdio servers on one file."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests._servers import HttpServer, mcp_client, running, stdio_params
from tests.conftest import call

CLIENTS = 16
SAVES_PER_CLIENT = 200
MEMORIES_PER_CLIENT = 10


def word(n: int, prefix: str) -> str:
    """A made-up word only record `n` contains: letters (kept whole) ending in x (no English suffix to stem)."""
    letters = ""
    n += 26 * 26  # at least three letters
    while n:
        n, r = divmod(n, 26)
        letters = "abcdefghijklmnopqrstuvwxyz"[r] + letters
    return prefix + letters + "x"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with running(tmp_path_factory.mktemp("concurrency"), transport="streamable-http") as started:
        yield started


async def test_many_http_clients_saving_at_once_lose_nothing_and_duplicate_nothing(
    server: HttpServer, record_property: Callable[[str, object], None]
) -> None:
    acked: dict[str, str] = {}  # observation id -> content
    saved: dict[str, str] = {}  # memory id -> content
    errors: list[str] = []

    async def worker(n: int) -> None:
        async with mcp_client(server, token=None) as client:
            for i in range(SAVES_PER_CLIENT):
                content = f"Client {n} step {i}: touched {word(n * 1000 + i, 'zq')} in the build."
                result = await client.call_tool(
                    "memory_observe", {"content": content, "session_id": f"worker-{n}", "project": "load"}
                )
                if result.is_error or result.structured_content is None:
                    errors.append(str(result.content))
                    continue
                acked[result.structured_content["id"]] = content
                if i % (SAVES_PER_CLIENT // MEMORIES_PER_CLIENT) == 0:
                    text = f"{word(n * 1000 + i, 'mx')} {word(n * 1000 + i, 'my')} {word(n * 1000 + i, 'mz')}"
                    result = await client.call_tool("memory_save", {"content": text, "project": "load"})
                    if result.is_error or result.structured_content is None:
                        errors.append(str(result.content))
                        continue
                    saved[result.structured_content["id"]] = text

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        for n in range(CLIENTS):
            tg.start_soon(worker, n)
    took = time.monotonic() - started

    assert errors == []
    assert len(acked) == CLIENTS * SAVES_PER_CLIENT
    assert len(saved) == CLIENTS * MEMORIES_PER_CLIENT
    async with mcp_client(server, token=None) as client:
        document = (await call(client, "memory_export", project="load"))["document"]
        sessions = await call(client, "memory_sessions", project="load", limit=100)
        health = await call(client, "memory_diagnose")
        found = await call(client, "memory_recall", query=word(7 * 1000 + 123, "zq"), project="load")

    observations = document["tables"]["observations"]
    by_id = Counter(o["id"] for o in observations)
    assert [i for i, c in by_id.items() if c > 1] == []
    assert {o["id"]: o["content"] for o in observations} == acked
    memories = document["tables"]["memories"]
    assert {m["id"]: m["content"] for m in memories} == saved
    assert all(m["is_latest"] for m in memories)
    assert {s["id"]: (s["observation_count"], s["folded_count"]) for s in sessions["sessions"]} == {
        f"worker-{n}": (SAVES_PER_CLIENT, 0) for n in range(CLIENTS)
    }
    for n in range(CLIENTS):  # each session's sequence numbers are 1..200 with no gap or repeat
        seqs = sorted(o["seq"] for o in observations if o["session_id"] == f"worker-{n}")
        assert seqs == list(range(1, SAVES_PER_CLIENT + 1))
    assert health["index_in_sync"] is True
    assert health["integrity_ok"] is True
    assert acked[found["hits"][0]["id"]].startswith("Client 7 step 123:")
    record_property("seconds", round(took, 1))  # about 20 s for 3,360 calls on a 2-CPU machine


async def test_two_stdio_servers_on_one_file_see_each_others_writes_and_never_fail(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    per_process = 150
    acked: dict[str, dict[str, str]] = {"a": {}, "b": {}}  # observation id -> its unique word
    memories: dict[str, dict[str, str]] = {"a": {}, "b": {}}
    errors: list[str] = []

    async def check(client: Client, tool: str, **arguments: Any) -> dict[str, Any] | None:
        result = await client.call_tool(tool, arguments)
        if result.is_error or result.structured_content is None:
            errors.append(f"{tool}: {result.content}")
            return None
        return result.structured_content

    async def writer(client: Client, name: str) -> None:
        for i in range(per_process):
            unique = word(i, f"{name}q")
            if done := await check(client, "memory_observe", content=f"Process {name} noted {unique} at step {i}."):
                acked[name][done["id"]] = unique
            if i % 10 == 0:
                text = f"Process {name} decided {word(i, f'{name}m')} for the {word(i, f'{name}k')} module."
                if done := await check(client, "memory_save", content=text):
                    memories[name][done["id"]] = word(i, f"{name}m")

    async with (
        Client(stdio_params(db, "--project", "shared")) as a,
        Client(stdio_params(db, "--project", "shared")) as b,
    ):
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, a, "a")
            tg.start_soon(writer, b, "b")
        assert errors == []

        for reader, other in ((a, "b"), (b, "a")):
            for obs_id, unique in list(acked[other].items())[::15]:
                hits = (await call(reader, "memory_recall", query=unique))["hits"]
                assert [h["id"] for h in hits][:1] == [obs_id], unique
            for mem_id, unique in list(memories[other].items())[::3]:
                hits = (await call(reader, "memory_recall", query=unique, include_memories=True))["hits"]
                assert mem_id in [h["id"] for h in hits], unique
                hits = (await call(reader, "memory_smart_search", query=unique))["hits"]
                assert [h["id"] for h in hits][:1] == [mem_id], unique
            health = await call(reader, "memory_diagnose")
            assert health["index_in_sync"] is True
            assert health["counts"]["observations"] == 2 * per_process

        document = (await call(a, "memory_export"))["document"]

    ids = [o["id"] for o in document["tables"]["observations"]]
    assert len(ids) == len(set(ids)) == 2 * per_process
    when = {o["id"]: o["created_at"] for o in document["tables"]["observations"]}
    a_times, b_times = (sorted(when[i] for i in acked[name]) for name in ("a", "b"))
    assert a_times[0] < b_times[-1], "the two processes did not write at the same time"
    assert b_times[0] < a_times[-1], "the two processes did not write at the same time"
    assert set(ids) == set(acked["a"]) | set(acked["b"])
    assert {m["id"] for m in document["tables"]["memories"]} == set(memories["a"]) | set(memories["b"])
