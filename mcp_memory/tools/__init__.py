"""Tool registration, one module per tool group; each tool validates, calls one service, returns."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from mcp_memory.context import AppContext
from mcp_memory.tools.episodic import register_episodic
from mcp_memory.tools.memories import register_memories
from mcp_memory.tools.operations import register_operations


def register_all(server: MCPServer[AppContext]) -> None:
    """Add every tool to the server."""
    register_episodic(server)
    register_memories(server)
    register_operations(server)


__all__ = ["register_all"]
