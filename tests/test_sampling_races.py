"""Races with the knowledge loop: a summary the client's model wrote is stored only if the session is
still as its prompt showed it, whoever else summarised it meanwhile; and reflect learns nothing from
records a forget took between its read and its write."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from mcp_memory.config import Settings
from mcp_memory.server import SharedApp, build_server
from mcp_memory.services.reflect import ReflectService
from tests.conftest import FakeClock, call
from tests.test_tools_loop import ERROR_A, build_reflection_history

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


async def _reflect_while_forgetting(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, forget: Callable[[dict[str, Any]], list[str]]
) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Reflect, with another client's forget committing between reflect's read and its write; returns
    the ids forgotten, and each stored lesson's content and evidence."""
    shared = SharedApp(settings, clock)
    gone: list[str] = []
    async with (
        Client(build_server(settings, clock, shared=shared)) as a,
        Client(build_server(settings, clock, shared=shared)) as b,
    ):
        ids = await build_reflection_history(a, clock)
        between = ReflectService._close_pairs  # runs after the read, before the transaction

        async def forgetting_first(self: ReflectService, project: str, memories: Any) -> Any:
            if not gone:
                gone.extend(forget(ids))
                await call(b, "memory_forget", ids=gone)
            return await between(self, project, memories)

        monkeypatch.setattr(ReflectService, "_close_pairs", forgetting_first)
        await call(a, "memory_reflect")
    with sqlite3.connect(settings.db) as conn:
        rows = conn.execute("SELECT content, source FROM lessons").fetchall()
    return gone, [(content, json.loads(source or "{}").get("evidence", [])) for content, source in rows]


@pytest.mark.parametrize(
    ("forget", "text_gone"),
    [
        pytest.param(lambda ids: [ids["error_b"]], False, id="an-error"),
        pytest.param(lambda ids: ids["outcomes"][:2], False, id="outcomes"),
        pytest.param(lambda ids: [ids["error_a"], ids["error_b"]], True, id="every-sighting"),
    ],
)
async def test_reflect_learns_nothing_from_records_forgotten_while_it_read(
    settings: Settings,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    forget: Callable[[dict[str, Any]], list[str]],
    text_gone: bool,
) -> None:
    gone, lessons = await _reflect_while_forgetting(settings, clock, monkeypatch, forget)

    assert [content for content, evidence in lessons if set(gone) & set(evidence)] == []
    if text_gone:  # both sightings of the error went: no lesson quotes it
        assert [content for content, _ in lessons if ERROR_A in content] == []
