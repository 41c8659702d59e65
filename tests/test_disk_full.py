"""A server whose files cannot grow any more refuses writes with an error that says why, keeps
answering, and loses nothing it acknowledged.

The server is a real `mcp-memory serve` subprocess started under a file size limit
(RLIMIT_FSIZE): past it the system refuses the write, which SQLite sees as it sees a full disk.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import call, call_error

resource = pytest.importorskip("resource", reason="file size limits are POSIX")

LIMIT_BYTES = 1_500_000  # room for the schema and a few dozen saves in the write-ahead log
_LIMITED = (
    "import resource, sys; "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1]))); "
    "from mcp_memory.cli import main; "
    "raise SystemExit(main(sys.argv[2:]))"
)
_ROOM_OR_REFUSED = ("has no room left; this call changed nothing", "refused to read or write the database's files")


def _server(db: Path, limit: int | None = None) -> StdioServerParameters:
    serve = ["serve", "--db", str(db), "--project", "full", "--log-level", "CRITICAL"]
    args = ["-m", "mcp_memory", *serve] if limit is None else ["-c", _LIMITED, str(limit), *serve]
    return StdioServerParameters(command=sys.executable, args=args)


def _note(i: int) -> str:
    # distinct words, so every save is a new memory and the log keeps growing
    return f"Note {i}: " + " ".join(f"w{i}x{j}" for j in range(120))


async def test_a_full_disk_refuses_writes_clearly_and_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    acknowledged: list[str] = []
    async with Client(_server(db, LIMIT_BYTES)) as client:
        for i in range(500):
            result = await client.call_tool("memory_save", {"content": _note(i)})
            if result.is_error:
                message = " ".join(getattr(block, "text", "") for block in result.content)
                break
            acknowledged.append(result.structured_content["id"])  # type: ignore[index]
        else:
            pytest.fail("the file size limit never stopped a write")
        assert acknowledged, "the limit left no room for even one save"
        assert message.startswith("Error executing tool memory_save: storage error:")
        assert any(reason in message for reason in _ROOM_OR_REFUSED), message
        # still answering: reads work, and a refused write stays refused without harm
        found = await call(client, "memory_recall", query="w0x7", include_memories=True)
        assert [h["id"] for h in found["hits"]] == [acknowledged[0]]
        assert "storage error" in await call_error(client, "memory_save", content=_note(1000))

    async with Client(_server(db)) as client:  # room again
        health = await call(client, "memory_diagnose")
        assert health["integrity_ok"] is True
        assert health["counts"]["memories"] == len(acknowledged)
        assert health["index_in_sync"] is True
        for memory_id in acknowledged:
            assert (await call(client, "memory_get", id=memory_id))["memory"]["id"] == memory_id
        after = await call(client, "memory_save", content=_note(1000))
        assert (await call(client, "memory_diagnose"))["counts"]["memories"] == len(acknowledged) + 1
        assert after["version"] == 1
