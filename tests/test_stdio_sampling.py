"""A real `mcp-memory serve` subprocess over stdio asks the client's model to crystallize a session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from tests.conftest import call

SECRET = "ghp_" + "Z9y8X7w6V5" * 3 + "u4T3s2"
MODEL_SUMMARY = f"Chose SQLite in WAL mode; fixed the orders migration timeout. Deploy key {SECRET} was rotated."
NOTES = [
    ("decision", "Chose SQLite in WAL mode so readers never wait for the writer."),
    ("error", "The deploy failed: migration 0042 timed out on the orders table."),
    ("fix", "Raised the statement timeout for migrations; the orders deploy went through."),
]


def _server(db: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_memory", "serve", "--db", str(db), "--project", "stdio-test"]
    )


async def _observe(client: Client, session_id: str) -> None:
    for n, (kind, text) in enumerate(NOTES):
        await call(
            client, "memory_observe", content=text, type=kind, session_id=session_id, end_session=n == len(NOTES) - 1
        )


@pytest.mark.parametrize("mode", [pytest.param("auto", id="modern"), pytest.param("legacy", id="legacy")])
async def test_crystallize_over_stdio_uses_the_clients_model_then_falls_back_without_it(
    tmp_path: Path, mode: str
) -> None:
    asked: list[CreateMessageRequestParams] = []

    async def model(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=MODEL_SUMMARY), model="fake")

    db = tmp_path / "memory.db"
    async with Client(_server(db), sampling_callback=model, mode=mode) as client:
        protocol = client.protocol_version
        await _observe(client, "with-model")
        await _observe(client, "without-model")
        sampled = (await call(client, "memory_crystallize", session_id="with-model"))["sessions"][0]

    async with Client(_server(db), mode=mode) as client:
        extractive = (await call(client, "memory_crystallize", session_id="without-model"))["sessions"][0]
        listed = {s["id"]: s for s in (await call(client, "memory_sessions"))["sessions"]}

    assert (protocol == "2026-07-28") == (mode == "auto")  # Sample request vs direct create_message
    assert len(asked) == 1
    assert asked[0].max_tokens == 600
    redacted = MODEL_SUMMARY.replace(SECRET, "[REDACTED:github_token]")
    assert (sampled["summary"], sampled["source"], sampled["changed"]) == (redacted, "sampling", True)
    assert extractive["source"] == "extractive"
    assert extractive["summary"].splitlines()[1:] == [
        "Decisions:",
        "- Chose SQLite in WAL mode so readers never wait for the writer.",
        "Errors and fixes:",
        "- The deploy failed: migration 0042 timed out on the orders table. -> fixed: Raised the statement "
        "timeout for migrations; the orders deploy went through.",
        "Concepts: sqlite",
    ]
    assert listed["with-model"]["summary"] == redacted
    assert SECRET not in str(listed)
