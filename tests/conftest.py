"""Shared fixtures: real SQLite files in temporary folders and real MCP sessions through the SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession
from mcp_types import CallToolResult

from mcp_memory.config import Settings
from mcp_memory.server import build_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True, scope="session")
def checked_output_schemas() -> Iterator[None]:
    """Each client session checks a tool's output schema once, as the SDK does, but a schema already
    checked by an earlier session of this process is not checked again.

    The SDK's Client checks every output schema against the JSON Schema metaschema the first time
    it validates a result of that tool (tens of milliseconds each), and every test opens new
    sessions: that check took about a tenth of the in-process tests. Results are still validated in full.
    """
    compile_validator = getattr(ClientSession, "_output_schema_validator", None)
    if compile_validator is None:  # an SDK that checks schemas some other way: leave it be
        yield
        return
    checked: dict[str, Any] = {}

    def shared(self: ClientSession, name: str, output_schema: dict[str, Any]) -> Any:
        session_validators = getattr(self, "_tool_output_validators", None)
        if not isinstance(session_validators, dict):  # an SDK that keeps them elsewhere: its own check
            return compile_validator(self, name, output_schema)
        if name not in session_validators:
            key = json.dumps(output_schema, sort_keys=True)
            if key not in checked:
                checked[key] = compile_validator(self, name, output_schema)
            session_validators[name] = checked[key]
        return session_validators[name]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ClientSession, "_output_schema_validator", shared)
        yield


class FakeClock:
    """A clock the test moves by hand (no sleeping)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # UTC: which day a record falls on must not depend on where the tests run
    return Settings(db=tmp_path / "memory.db", project="test", synchronous="normal", timezone="UTC")


@pytest.fixture
async def client(settings: Settings, clock: FakeClock) -> AsyncIterator[Client]:
    async with Client(build_server(settings, clock)) as connected:
        yield connected


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured result."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    return result.structured_content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; returns the error text the model would read."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    return _text(result)


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


Caller = Callable[..., Any]
