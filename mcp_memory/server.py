"""Builds the MCP server: tools registered on an MCPServer whose lifespan opens the application."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

from mcp_memory import __version__
from mcp_memory.auth import Grant, StaticTokenVerifier
from mcp_memory.clock import Clock, system_clock
from mcp_memory.config import Settings, url_host
from mcp_memory.context import AppContext, open_app
from mcp_memory.errors import MCPMemoryError
from mcp_memory.search.embeddings import EmbeddingProvider
from mcp_memory.tools import note_hidden_tools, tools_for
from mcp_memory.tools._common import check_arguments, tool_error
from mcp_memory.tools.caller import forget_roots
from mcp_memory.tools.prompts import ResourceEvents, register_prompts_and_resources

logger = logging.getLogger(__name__)

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
    per client; sharing keeps one database writer and one index per process, and one subscription bus
    that hears of every write to them (`events`).
    """

    def __init__(
        self, settings: Settings, clock: Clock = system_clock, provider: EmbeddingProvider | None = None
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._provider = provider
        self._lock = anyio.Lock()
        self._users = 0
        self._app: AppContext | None = None
        self._stack: AsyncExitStack | None = None
        self.events = ResourceEvents(settings.project, settings.isolated)

    async def ready(self) -> bool:
        """Whether the application is open, its database answers and its index is built."""
        app = self._app
        return app is not None and await app.diagnosis.ready()

    @asynccontextmanager
    async def use(self) -> AsyncIterator[AppContext]:
        """Hold the shared application open for the duration of the block."""
        async with self._lock:
            if self._app is None:
                stack = AsyncExitStack()
                self._app = await stack.enter_async_context(
                    open_app(self._settings, self._clock, self._provider, build_in_background=True)
                )
                self._app.deps.db.after_every_commit(self.events.committed)
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


_READS_INDEX = ("tools/call", "resources/read", "prompts/get")


async def sync_index(ctx: ServerRequestContext[AppContext, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: before a call, wait for the index to be built (the server builds it after
    the handshake), then bring it up to date with other processes' writes."""
    if ctx.method in _READS_INDEX and isinstance(ctx.lifespan_context, AppContext):
        app = ctx.lifespan_context
        try:
            await app.deps.builder.ensure_built(app.deps.db)
        except MCPMemoryError as exc:
            name = str(ctx.params.get("name")) if ctx.method == "tools/call" and ctx.params else None
            if name == "memory_diagnose":  # the one tool that must work on a damaged file: it reports the damage
                return await call_next(ctx)
            if name is not None:
                return tool_error(name, f"the search index could not be built: {exc}")
            raise
        try:
            await app.deps.indexer.sync(app.deps.db)
        except MCPMemoryError as exc:  # a busy or broken database shows up in the call itself
            logger.warning("could not sync the index with other writers: %s", exc)
    return await call_next(ctx)


def build_server(
    settings: Settings,
    clock: Clock = system_clock,
    *,
    shared: SharedApp | None = None,
    middleware: Sequence[ServerMiddleware[Any]] = (),
    grants: Sequence[Grant] = (),
    provider: EmbeddingProvider | None = None,
) -> MCPServer[AppContext]:
    """The MCP server for `settings`: its tools, prompts and resources, and bearer auth when tokens exist.

    `provider` replaces the embedding provider the settings name (tests bring a small one).
    """
    shared = shared or SharedApp(settings, clock, provider)
    auth = None
    if grants:
        # The SDK's bearer-token hook needs OAuth resource-server settings; the issuer here is
        # nominal (tokens are static), and no metadata routes are published. An IPv6 zone (fe80::1%eth0)
        # is dropped: pydantic's URLs refuse one, and nothing ever fetches this address.
        issuer = f"http://{url_host(settings.host.partition('%')[0])}:{settings.port}"
        auth = AuthSettings(issuer_url=AnyHttpUrl(issuer), resource_server_url=None)

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
        middleware=[
            *middleware,
            forget_roots,
            check_arguments,
            sync_index,
            *([note_hidden_tools] if settings.tools == "core" else []),  # errors may name tools it hides
        ],
        auth=auth,
        token_verifier=StaticTokenVerifier(list(grants)) if grants else None,
        tools=tools_for(settings.tools),
        subscriptions=shared.events,  # told of every commit: resource events follow the writes
    )
    register_prompts_and_resources(server, settings.tools)
    return server
