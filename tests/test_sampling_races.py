"""A summary the client's model wrote is stored only if the session is still as its prompt showed it,
whoever else summarised the session while the model wrote."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from mcp_memory.config import Settings
from mcp_memory.server import SharedApp, build_server
from tests.conftest import FakeClock, call

MODEL = "Refactored the zebra parser; tests green."


async def _summary_while_the_session_grows(settings: Settings, clock: FakeClock, others_summarise: bool) -> Any:
    shared = SharedApp(settings, clock)
    async with Client(build_server(settings, clock, shared=shared)) as plain:
        for i in range(3):
            await call(plain, "memory_observe", content=f"Step {i} of the zebra parser refactor.", session_id="chat-9")
            clock.advance(minutes=1)

        async def model(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
            if others_summarise:  # another caller's crystallize while the model writes
                await call(plain, "memory_crystallize", session_id="chat-9")
            clock.advance(minutes=1)
            await call(plain, "memory_observe", content="Found the late finding in the lexer.", session_id="chat-9")
            clock.advance(minutes=1)
            return CreateMessageResult(role="assistant", content=TextContent(type="text", text=MODEL), model="m")

        async with Client(build_server(settings, clock, shared=shared), sampling_callback=model, mode="legacy") as s:
            return (await call(s, "memory_crystallize", session_id="chat-9"))["sessions"][0]


@pytest.mark.parametrize("others_summarise", [False, True], ids=["alone", "another-summarise-between"])
async def test_a_model_summary_of_a_session_that_grew_meanwhile_is_not_stored(
    settings: Settings, clock: FakeClock, others_summarise: bool
) -> None:
    made = await _summary_while_the_session_grows(settings, clock, others_summarise)

    assert made["source"] == "extractive"
    assert "late finding" in made["summary"]
