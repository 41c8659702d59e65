"""A real `mcp-memory serve` subprocess over stdio: data and ranking survive a restart, and a
line the SDK's parser refuses is still answered."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from tests._servers import initialized_stdio_server
from tests.conftest import call

NOTES = [
    ("decision", "We chose SQLite in WAL mode so readers never wait for the writer."),
    ("error", "The deploy failed: migration 0042 timed out on the orders table."),
    ("fix", "Raised the statement timeout for migrations; the deploy of the orders table went through."),
    ("note", "Caroline prefers short pull requests with one topic each."),
    ("file_change", "Renamed getUserName to get_user_name in src/app/user_service.py."),
]


def _server(db: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_memory", "serve", "--db", str(db), "--project", "stdio-test"]
    )


async def _ranking(client: Client, query: str) -> list[tuple[str, float]]:
    result = await call(client, "memory_recall", query=query, limit=5, include_memories=True)
    return [(h["id"], h["score"]) for h in result["hits"]]


async def test_data_and_ranking_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with Client(_server(db)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"memory_observe", "memory_recall", "memory_save", "memory_export"} <= tools
        ids = [(await call(client, "memory_observe", content=text, type=kind))["id"] for kind, text in NOTES]
        saved = await call(client, "memory_save", content="The orders table migration needs a long timeout.")
        first = await _ranking(client, "orders table migration timeout")
        renamed = await _ranking(client, "get_user_name")

    async with Client(_server(db)) as client:
        assert await _ranking(client, "orders table migration timeout") == first
        assert await _ranking(client, "get_user_name") == renamed
        listed = await call(client, "memory_observations", order="oldest", limit=10)
        assert [o["id"] for o in listed["observations"]] == ids
        assert (await call(client, "memory_get", id=saved["id"]))["memory"]["content"].startswith("The orders")
        health = await call(client, "memory_diagnose")
        assert health["index_in_sync"] is True
        assert health["counts"]["observations"] == len(NOTES)

    assert first[0][0] in {ids[1], ids[2], saved["id"]}
    assert renamed[0][0] == ids[4]


def _answers(proc: subprocess.Popen[bytes], count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The next `count` messages the server writes, failing if they do not come in time; once per
    process, as the thread it starts keeps reading the pipe."""
    stdout = proc.stdout
    assert stdout is not None
    # A thread reads the lines: select() on the pipe misses a line already in the reader's buffer
    # (two answers that arrived in one read), and a blocking readline could not time out.
    lines: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        for line in iter(stdout.readline, b""):
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    answers: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(answers) < count:
        try:
            answers.append(json.loads(lines.get(timeout=max(0.0, deadline - time.monotonic()))))
        except queue.Empty:
            raise AssertionError(f"no answer in {timeout} s; got {answers}") from None
    return answers


def _call(request_id: int, tool: str, **arguments: Any) -> str:
    request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
    return json.dumps(request | {"params": {"name": tool, "arguments": arguments}})


def test_a_line_the_sdk_cannot_parse_is_served_or_answered_never_dropped(tmp_path: Path) -> None:
    nested: dict[str, Any] = {"leaf": 1}
    for _ in range(300):
        nested = {"inner": nested}
    lines = [
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        # a lone surrogate escape, as JavaScript's JSON.stringify writes half of a broken emoji
        _call(2, "memory_observe", content="Deploy note \\udc00 with a broken emoji").replace("\\\\udc00", "\\udc00"),
        "this line is not JSON",
        _call(4, "memory_import", document=nested),
        '{"jsonrpc": "2.0", "id": 5, "method": "ping"}',
        _call(6, "memory_save", content="Half a number", importance=float("nan")),  # the bare NaN token
    ]
    with initialized_stdio_server(tmp_path / "lines.db") as proc:
        assert proc.stdin is not None
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        answers = {a.get("id"): a for a in _answers(proc, 5)}

    observed = answers[2]["result"]
    assert not observed.get("isError"), observed
    assert observed["structuredContent"]["title"] == "Deploy note \ufffd with a broken emoji"
    assert answers[None]["error"]["code"] == -32700
    assert answers[None]["error"]["message"].startswith("could not read: ")
    assert answers[4]["result"]["isError"]
    assert "document" in answers[4]["result"]["content"][0]["text"]
    assert answers[5]["result"] == {}
    assert answers[6]["result"]["isError"]
    assert "importance" in answers[6]["result"]["content"][0]["text"]
    assert "finite number" in answers[6]["result"]["content"][0]["text"]
