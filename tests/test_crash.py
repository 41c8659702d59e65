"""A server killed outright (SIGKILL, no chance to clean up) in the middle of writing loses nothing
it acknowledged, stores nothing twice, and the next start finds the file intact and searchable."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests._servers import initialized_stdio_server
from tests.conftest import call

SENT = 180  # 90 memories and 90 observations: each fits one page of a list
KILL_AFTER = 60  # answers read before the kill; the rest are in flight or still queued


def _request(n: int) -> dict[str, Any]:
    """Request n: a memory or an observation (alternately), each with a word of its own."""
    word = f"marker{n:04d}"
    if n % 2:
        arguments = {"content": f"Observed step {word} of the migration run.", "session_id": "crash-run"}
        tool = "memory_observe"
    else:
        arguments = {"content": f"The deploy checklist item {word} was confirmed."}
        tool = "memory_save"
    return {"jsonrpc": "2.0", "id": n + 10, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


async def test_a_server_killed_mid_write_keeps_every_acknowledged_write_once(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    acknowledged: dict[str, str] = {}  # id -> marker word
    with initialized_stdio_server(db, "--synchronous", "normal") as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        stdin = proc.stdin
        requests = [_request(n) for n in range(SENT)]

        def send() -> None:
            stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
            for request in requests:
                stdin.write((json.dumps(request) + "\n").encode())
            stdin.flush()

        writer = threading.Thread(target=send, daemon=True)
        writer.start()
        while len(acknowledged) < KILL_AFTER:
            answer = json.loads(proc.stdout.readline())
            result = answer["result"]
            assert not result.get("isError"), result
            acknowledged[result["structuredContent"]["id"]] = f"marker{answer['id'] - 10:04d}"
        proc.kill()
        proc.wait()

    settings = Settings(db=db, project="default", synchronous="normal", timezone="UTC")
    async with Client(build_server(settings)) as client:
        diagnosis = await call(client, "memory_diagnose")
        memories = await call(client, "memory_smart_search", query="deploy checklist item confirmed", limit=100)
        observations = await call(client, "memory_observations", session_id="crash-run", limit=100)
        stored = [h["id"] for h in memories["hits"]] + [o["id"] for o in observations["observations"]]
        for memory_id, word in list(acknowledged.items())[:: max(1, KILL_AFTER // 10)]:
            hits = (await call(client, "memory_smart_search", query=word))["hits"]
            assert [h["id"] for h in hits][:1] == [memory_id], word

    assert diagnosis["integrity"] == ["ok"]
    assert diagnosis["index_in_sync"] is True
    assert set(acknowledged) <= set(stored)
    assert len(stored) == len(set(stored)) <= SENT
    counts = diagnosis["counts"]
    assert counts["memories"] + counts["observations"] == len(stored)
