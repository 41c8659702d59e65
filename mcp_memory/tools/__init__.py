"""Tools, one module per tool group; each tool validates its input, calls one service, returns."""

from __future__ import annotations

import functools
import re
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError

from mcp_memory.tools.actions import actions_tools
from mcp_memory.tools.episodic import episodic_tools
from mcp_memory.tools.knowledge import knowledge_tools
from mcp_memory.tools.learning import learning_tools
from mcp_memory.tools.loop import loop_tools
from mcp_memory.tools.memories import memories_tools
from mcp_memory.tools.operations import operations_tools
from mcp_memory.tools.slots import slots_tools


@functools.cache
def all_tools() -> tuple[Tool, ...]:
    """Every tool, built once per process."""
    return (
        *episodic_tools(),
        *memories_tools(),
        *learning_tools(),
        *slots_tools(),
        *actions_tools(),
        *knowledge_tools(),
        *loop_tools(),
        *operations_tools(),
    )


CORE_TOOLS = (
    "memory_context",
    "memory_observe",
    "memory_recall",
    "memory_smart_search",
    "memory_save",
    "memory_lesson_save",
    "memory_outcome_record",
    "memory_slot_append",
)
"""The `--tools core` profile: what an agent needs every day (see README, "Tool profiles")."""


def tools_for(profile: str) -> list[Tool]:
    """The tools of a profile: `core` or `all`."""
    tools = all_tools()
    return [t for t in tools if t.name in CORE_TOOLS] if profile == "core" else list(tools)


_TOOL_NAME = re.compile(r"\bmemory_[a-z_]+\b")
# A value of the caller's that an error quotes ('memory_notes', a slot or session name) is theirs, not a tool.
_QUOTED = re.compile(r"""(?<!\w)(?:'[^'\n]*'|"[^"\n]*")(?!\w)""")


@functools.cache
def _hidden_by_core() -> frozenset[str]:
    """The registered tools the core profile leaves out."""
    return frozenset(t.name for t in all_tools()) - frozenset(CORE_TOOLS)


async def note_hidden_tools(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware for the core profile: an error that points at a tool this profile hides says so.

    Errors are worded for the full tool set ("use memory_slot_replace …"); an agent under `core`
    would otherwise call a tool that does not exist. Tool errors and refused resource reads and
    prompts alike. Only real tools are named: a misspelt or made-up tool name, or a caller's own
    value quoted in the error (a slot or session named `memory_notes`), is not.
    """
    try:
        result = await call_next(ctx)
    except MCPError as exc:
        if note := _hidden_note(exc.error.message):
            raise MCPError(exc.error.code, exc.error.message + note, exc.error.data) from exc
        raise
    if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
        return result
    content = result.get("content") or []
    text = content[0].get("text") if content and isinstance(content[0], dict) else None
    if not isinstance(text, str) or not (note := _hidden_note(text)):
        return result
    return {**result, "content": [{**content[0], "text": text + note}, *content[1:]]}


def _hidden_note(text: str) -> str:
    """What to add to an error naming tools the core profile hides ("" when it names none)."""
    hidden = sorted(set(_TOOL_NAME.findall(_QUOTED.sub(" ", text))) & _hidden_by_core())
    if not hidden:
        return ""
    verb = "is" if len(hidden) == 1 else "are"
    return f" ({', '.join(hidden)} {verb} not exposed: the server runs with --tools core)"


__all__ = ["CORE_TOOLS", "all_tools", "note_hidden_tools", "tools_for"]
