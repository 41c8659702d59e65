"""Tools, one module per tool group; each tool validates its input, calls one service, returns."""

from __future__ import annotations

import functools

from mcp.server.mcpserver.tools import Tool

from mcp_memory.tools.actions import actions_tools
from mcp_memory.tools.episodic import episodic_tools
from mcp_memory.tools.knowledge import knowledge_tools
from mcp_memory.tools.learning import learning_tools
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
        *operations_tools(),
    )


__all__ = ["all_tools"]
