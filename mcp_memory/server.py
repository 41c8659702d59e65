"""Builds the MCP server: tools registered on an MCPServer whose lifespan opens the application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_memory import __version__
from mcp_memory.clock import Clock, system_clock
from mcp_memory.config import Settings
from mcp_memory.context import AppContext, open_app
from mcp_memory.tools import tools_for
from mcp_memory.tools._common import check_arguments
from mcp_memory.tools.prompts import register_prompts_and_resources

INSTRUCTIONS = """\
mcp-memory keeps durable memory across sessions for this project.
- Record what happens with memory_observe (decisions, errors and fixes, file changes, notes).
- Keep long-lived facts, decisions and preferences with memory_save; similar saves become new versions.
- Before answering from scratch, look things up: memory_recall for past sessions, memory_smart_search
  for everything (compact hits first; then fetch full records by id).
- Secrets and <private>…</private> text are removed before anything is stored.
"""


class SharedApp:
    """One AppContext shared by every connection of this process, opened on first use.

    The SSE transport enters the server lifespan once per connection and in-process clients once
    per client; sharing keeps one database writer and one index per process.
    """

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._lock = anyio.Lock()
        self._users = 0
        self._app: AppContext | None = None
        self._stack: AsyncExitStack | None = None

    @asynccontextmanager
    async def use(self) -> AsyncIterator[AppContext]:
        """Hold the shared application open for the duration of the block."""
        async with self._lock:
            if self._app is None:
                stack = AsyncExitStack()
                self._app = await stack.enter_async_context(open_app(self._settings, self._clock))
                self._stack = stack
            self._users += 1
            app = self._app
        try:
            yield app
        finally:
            with anyio.CancelScope(shield=True):
                async with self._lock:
                    self._users -= 1
                    if self._users == 0 and self._stack is not None:
                        stack, self._stack, self._app = self._stack, None, None
                        await stack.aclose()


def build_server(settings: Settings, clock: Clock = system_clock) -> MCPServer[AppContext]:
    """The MCP server for `settings`, with every tool registered."""
    shared = SharedApp(settings, clock)

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppContext]) -> AsyncIterator[AppContext]:
        async with shared.use() as app:
            yield app

    server: MCPServer[AppContext] = MCPServer(
        "mcp-memory",
        title="mcp-memory",
        description="Durable memory for AI agents: observations, memories, lessons, slots, actions.",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=lifespan,
        log_level=settings.log_level,
        middleware=[check_arguments],
        tools=tools_for(settings.tools),
    )
    register_prompts_and_resources(server, settings.tools)
    return server
