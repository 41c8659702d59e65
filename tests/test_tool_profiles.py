"""Tool profiles (`--tools core|all`) and the end-of-session prompt."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from mcp_memory.tools import CORE_TOOLS
from tests.conftest import FakeClock, call, call_error

SPEC_TOOLS = {
    # episodic
    "memory_observe", "memory_recall", "memory_sessions", "memory_observations", "memory_timeline",
    "memory_crystallize",
    # long-term
    "memory_save", "memory_get", "memory_smart_search", "memory_forget", "memory_relate", "memory_related",
    # learning
    "memory_lesson_save", "memory_lesson_recall", "memory_lessons", "memory_outcome_record", "memory_insights",
    # slots
    "memory_slot_list", "memory_slot_get", "memory_slot_create", "memory_slot_append", "memory_slot_replace",
    "memory_slot_delete",
    # actions
    "memory_action_create", "memory_action_update", "memory_action_list", "memory_frontier",
    # knowledge
    "memory_consolidate", "memory_reflect", "memory_context", "memory_profile",
    # operations
    "memory_diagnose", "memory_export", "memory_import",
}  # fmt: skip
"""Every tool of SPEC §8."""


async def tool_names(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


async def test_the_core_profile_lists_exactly_the_core_tools(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings.model_copy(update={"tools": "core"}), clock)) as client:
        names = await tool_names(client)
        saved = await call(client, "memory_save", content="The core profile still saves memories.")
        refused = await call_error(client, "memory_consolidate")

    assert sorted(names) == sorted(CORE_TOOLS)
    assert len(CORE_TOOLS) == 8
    assert saved["id"].startswith("mem_")
    assert "memory_consolidate" in refused


async def test_core_errors_that_name_a_hidden_tool_say_it_is_hidden(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings.model_copy(update={"tools": "core"}), clock)) as client:
        unknown_slot = await call_error(client, "memory_slot_append", name="team_notes", text="hello")
        too_long = await call_error(client, "memory_slot_append", name="self_notes", text="x" * 2_001)
        unknown_session = await call_error(client, "memory_recall", query="x", session_id="nowhere")
        bad_query = await call_error(client, "memory_recall", query="")

    assert unknown_slot.endswith("(memory_slot_create is not exposed: the server runs with --tools core)")
    assert "memory_slot_replace" in too_long
    assert "not exposed: the server runs with --tools core" in too_long
    assert unknown_session.endswith("(memory_sessions is not exposed: the server runs with --tools core)")
    assert "not exposed" not in bad_query  # names no tool the profile hides


async def test_the_default_profile_lists_every_tool(client: Client) -> None:
    names = await tool_names(client)

    assert len(names) == len(set(names))
    assert set(names) == SPEC_TOOLS
    assert set(CORE_TOOLS) < set(names)


async def test_mcp_memory_serve_tools_core_over_stdio_lists_the_core_tools(tmp_path: Path) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_memory", "serve", "--tools", "core", "--db", str(tmp_path / "memory.db")],
    )
    async with Client(server) as client:
        names = await tool_names(client)
        observed = await call(client, "memory_observe", content="Started the stdio check.")

    assert sorted(names) == sorted(CORE_TOOLS)
    assert observed["session_created"] is True


# -- the session_end prompt ----------------------------------------------------------------------------------


async def prompt_text(client: Client, name: str, arguments: dict[str, str] | None = None) -> str:
    result = await client.get_prompt(name, arguments)
    [message] = result.messages
    assert message.role == "user"
    text = getattr(message.content, "text", None)
    assert isinstance(text, str)
    return text


async def test_the_session_end_prompt_walks_through_record_reflect_crystallize(client: Client) -> None:
    await call(client, "memory_observe", content="Working on the export.", session_id="conv-42")
    listed = {p.name: p for p in (await client.list_prompts()).prompts}
    text = await prompt_text(client, "session_end", {"session_id": "conv-42", "task": "Fix the flaky export test"})

    assert {"session_start", "session_end"} <= set(listed)
    assert {a.name for a in listed["session_end"].arguments or []} == {"session_id", "task", "project", "agent_id"}
    assert all(not a.required for a in listed["session_end"].arguments or [])
    # in this order: record outcomes, reflect, crystallize
    positions = [text.index(tool) for tool in ("memory_outcome_record", "memory_reflect", "memory_crystallize")]
    assert positions == sorted(positions)
    assert 'memory_reflect(session_id="conv-42")' in text
    assert 'memory_crystallize(session_id="conv-42")' in text
    assert '(at least: "Fix the flaky export test")' in text


async def test_the_session_end_prompt_without_arguments_names_no_session(client: Client) -> None:
    text = await prompt_text(client, "session_end")

    assert "memory_outcome_record" in text
    assert "Call memory_reflect to turn" in text
    assert "Call memory_crystallize so the session" in text
    assert "session_id" not in text
    assert "{" not in text  # every placeholder filled


async def test_prompts_of_the_core_profile_only_name_tools_it_exposes(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings.model_copy(update={"tools": "core"}), clock)) as client:
        names = set(await tool_names(client))
        mentioned: set[str] = set()
        for prompt in (await client.list_prompts()).prompts:
            mentioned |= set(re.findall(r"\bmemory_[a-z_]+[a-z]", await prompt_text(client, prompt.name)))

    assert mentioned - names == set()
