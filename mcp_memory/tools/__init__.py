"""Tools, one module per tool group; each tool validates its input, calls one service, returns."""

from __future__ import annotations

import functools

from mcp.server.mcpserver.tools import Tool

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


__all__ = ["CORE_TOOLS", "all_tools", "tools_for"]
