"""Running the server: stdio for local clients, SSE and streamable HTTP for remote ones.

HTTP: bearer-token auth through the SDK's token-verifier hook, Host/Origin validation (DNS
rebinding protection) with allow-lists derived from the bind address, a request body limit,
`/healthz` (liveness, no auth) and `/readyz` (database reachable, index built). The caller
checks the settings first with `auth.http_grants`, which refuses a non-loopback address without a
token unless `--insecure`. SIGTERM/SIGINT let in-flight calls
finish and close the database; a stdio server also exits when stdin closes or its parent dies.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import FrameType
from typing import Any

import anyio
import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import ListenHandler
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, CallToolResult, TextContent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memory import PARENT_PID, __version__
from mcp_memory.auth import WILDCARD, Grant
from mcp_memory.config import Settings, url_host
from mcp_memory.context import AppContext
from mcp_memory.launch import stop_noted
from mcp_memory.server import SharedApp, build_server
from mcp_memory.stdio_lines import AnsweredMessages, StdinLines

logger = logging.getLogger(__name__)

GRACE_S = 10.0
PARENT_POLL_S = 1.0
RESPONSE_DRAIN_S = 0.5
LISTEN = "subscriptions/listen"


class ListenError(Exception):
    """The server cannot listen where it was told: the HTTP server on its address (in use, not this
    machine's, an unknown name), the stdio server without an open stdin and stdout."""


class CallTracker:
    """Counts calls in flight, so a shutdown can wait for them; middleware for the MCP server."""

    def __init__(self) -> None:
        self.active = 0
        self.started = 0
        self.closing = False
        self._idle = anyio.Event()
        self._idle.set()
        self._end_streams: list[Callable[[], None]] = []

    def ends_listen_streams_of(self, server: MCPServer[Any]) -> None:
        """Have `close` end the server's `subscriptions/listen` streams."""
        entry = server._lowlevel_server.get_request_handler(LISTEN)  # the SDK keeps its handler there only
        if entry is not None and isinstance(entry.handler, ListenHandler):
            self._end_streams.append(entry.handler.close)

    def close(self, refuse_new: bool = True) -> None:
        """Begin a shutdown: end every listen stream (each sends its client its final result, so the
        client knows it ended on purpose) and, if told, refuse calls from now on."""
        self.closing = refuse_new
        for end in self._end_streams:
            end()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:  # a notification, not a call
            return await call_next(ctx)
        if ctx.method == LISTEN:
            # A stream open until the client or a shutdown ends it, not a call to wait for: counted,
            # an idle one held every shutdown for the whole grace period.
            if self.closing:
                raise MCPError(INTERNAL_ERROR, "the server is shutting down; listen again in a moment")
            return await call_next(ctx)
        if self.closing and ctx.method == "tools/call":
            text = "Error: the server is shutting down; retry in a moment"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        self.active += 1
        self.started += 1
        if self._idle.is_set():
            self._idle = anyio.Event()
        try:
            return await call_next(ctx)
        finally:
            self.active -= 1
            if self.active == 0:
                self._idle.set()

    async def idle(self) -> None:
        """Return once no call is in flight."""
        await self._idle.wait()

    async def settled(self, quiet_s: float) -> None:
        """Return once no call is in flight and none has started for `quiet_s` (calls read from a
        pipe a moment ago reach the tracker only when their task first runs)."""
        while True:
            started = self.started
            await self.idle()
            await anyio.sleep(quiet_s)
            if self.started == started and self.active == 0:
                return


class _CancelledAtShutdown(logging.Filter):
    """Drops the traceback uvicorn logs for each call it cancels when a shutdown's grace runs out: the
    cancel is the shutdown's own, and uvicorn's line before it says how many calls it cancelled."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


class _DrainingServer(uvicorn.Server):
    """uvicorn, but SIGTERM/SIGINT first let the calls in flight finish (up to a grace period)."""

    def __init__(self, config: uvicorn.Config, tracker: CallTracker, announce: Callable[[], None]) -> None:
        super().__init__(config)
        self._tracker = tracker
        self._announce = announce
        self._draining = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._announce()
        # uvicorn listens for signals from here on; one that came while starting was only noted
        if (noted := stop_noted()) is not None:
            self.handle_exit(noted, None)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._tracker.close()  # else uvicorn waits out its grace for each open listen response
        if self._draining:  # a second signal: stop now, not after what is left of the first one's grace
            logger.warning("received %s again; stopping without waiting", signal.Signals(sig).name)
            self.config.timeout_graceful_shutdown = 0
        if self._draining or self._tracker.active == 0:
            self._stop(sig, frame)
            return
        self._draining = True
        logger.info("received %s; finishing %d call(s) in flight", signal.Signals(sig).name, self._tracker.active)
        asyncio.get_running_loop().create_task(self._drain(sig, frame))

    async def _drain(self, sig: int, frame: FrameType | None) -> None:
        began = time.monotonic()
        with anyio.move_on_after(GRACE_S):
            await self._tracker.idle()
        # uvicorn's own graceful shutdown comes after: only what is left of the grace (a second at
        # least, to write the last responses), so a stuck call holds the server GRACE_S, not twice that.
        self.config.timeout_graceful_shutdown = max(1, math.ceil(GRACE_S - (time.monotonic() - began)))
        self._stop(sig, frame)

    def _stop(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signal after shutting down, which would end the process with
        # -15 instead of 0; a clean, finished shutdown is a success.
        self._captured_signals.clear()


def serve(settings: Settings, grants: Sequence[Grant], announce: Callable[[int], None] = lambda port: None) -> int:
    """Run the server the settings describe until it is stopped; returns the exit status.

    `grants` are what `http_grants` accepted for these settings (it refuses an unsafe HTTP
    configuration); stdio takes none. `announce` runs once an HTTP server is listening, with the
    port it listens on. Raises ListenError for an address it cannot listen on (or no stdio) and MCPMemoryError
    for a database that cannot be opened.
    """
    if stop_noted() is not None:  # Ctrl-C or SIGTERM while starting: nothing opened yet
        return 0
    if settings.transport == "stdio" and (sys.stdin is None or sys.stdout is None):
        # started with either one closed (`<&-`, `>&-`): nothing to speak the protocol on
        raise ListenError(
            "the stdio transport needs an open stdin and stdout; --transport streamable-http serves a URL"
        )
    shared = SharedApp(settings)
    tracker = CallTracker()
    if settings.transport == "stdio":
        server = build_server(settings, shared=shared, middleware=[tracker])
        tracker.ends_listen_streams_of(server)
        anyio.run(_run_stdio, server, shared, tracker)
        return 0
    server = build_server(settings, shared=shared, middleware=[tracker], grants=grants)
    tracker.ends_listen_streams_of(server)
    app = http_app(server, settings, shared, tracker)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        # No config of uvicorn's own: its loggers (access log included) reach ours, on stderr.
        log_config=None,
        timeout_graceful_shutdown=int(GRACE_S),
        lifespan="on",
    )
    # Bound here rather than by uvicorn, which only logs a failure and exits 3, and never says
    # which port the OS chose for --port 0.
    sockets = listen(settings.host, settings.port)
    port = int(sockets[0].getsockname()[1])
    http = _DrainingServer(config, tracker, lambda: announce(port))
    logging.getLogger("uvicorn.error").addFilter(_CancelledAtShutdown())

    async def run() -> None:
        # Open the database before uvicorn starts, so a bad one fails start-up plainly.
        async with shared.use():
            await http.serve(sockets)

    try:
        anyio.run(run)
    finally:
        for sock in sockets:
            sock.close()
    return 0 if http.started else 1


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address of `host` (as asyncio binds them), all on one port; raises
    ListenError with the reason in one line."""
    where = f"{url_host(host)}:{port}"
    try:
        # An empty host is every interface, as for uvicorn.
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {where}: {str(exc.strerror).lower()}") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # else `::` would also claim the IPv4 port bound beside it
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if len(sockets) > 1:  # with --port 0, every address on the port the OS chose for the first
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ListenError(f"cannot listen on {where}: {(exc.strerror or str(exc)).lower()}") from None
    for sock in sockets:
        bound = sock.getsockname()
        logger.info("listening on %s:%d", url_host(bound[0]), bound[1])
    return sockets


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """Host/Origin allow-lists: loopback names always, the bind address, and what was configured.

    A host given bare or as `host:*` is accepted with any port and without one (a reverse proxy
    sends `Host: memory.example.com`); `host:port` only with that port. Each allowed host also
    allows its http and https Origins. Everything is lower case: `_LowerCaseHostOrigin` folds
    the request's headers to match, since host names are case-insensitive. A wildcard bind
    without `--allowed-hosts` never gets here: `auth.http_grants` refuses it.
    """
    entries = ["127.0.0.1", "localhost", "[::1]"]
    if settings.host not in ("127.0.0.1", "localhost", "::1") and settings.host not in WILDCARD:
        entries.append(f"[{settings.host}]" if ":" in settings.host else settings.host)
    entries += settings.allowed_hosts
    hosts: list[str] = []
    for entry in entries:
        base, port = _split_host(entry.strip().lower())
        hosts += [f"{base}:{port}"] if port not in (None, "*") else [base, f"{base}:*"]
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    for origin in (o.lower() for o in settings.allowed_origins):
        # `:*` is any port, the scheme's default too, which browsers leave out of the Origin they send
        origins += [origin, origin.removesuffix(":*")] if origin.endswith(":*") else [origin]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


def _split_host(entry: str) -> tuple[str, str | None]:
    """`host[:port]` (IPv6 in brackets) as (host, port or None); port may be `*`."""
    if entry.startswith("["):
        base, _, rest = entry.partition("]")
        return base + "]", rest[1:] if rest.startswith(":") else None
    if entry.count(":") == 1:
        base, _, port = entry.partition(":")
        return base, port
    return (f"[{entry}]" if ":" in entry else entry), None


class _LowerCaseHostOrigin:
    """ASGI middleware: Host and Origin headers in lower case, so the SDK's exact-match checks
    treat `Memory.Example.com` as the allowed `memory.example.com`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = [
                (name, value.lower() if name in (b"host", b"origin") else value) for name, value in scope["headers"]
            ]
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


def http_app(
    server: MCPServer[AppContext], settings: Settings, shared: SharedApp, tracker: CallTracker | None = None
) -> Starlette:
    """The ASGI app of an HTTP transport, holding the application open for its whole life; with the
    `tracker` of its calls, `/readyz` says "stopping" (503) once a shutdown refuses new calls."""
    security = transport_security(settings)

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__})

    async def readyz(_: Request) -> Response:
        if tracker is not None and tracker.closing:  # a load balancer sends new clients elsewhere
            return JSONResponse({"status": "stopping"}, status_code=503)
        ready = await shared.ready()
        return JSONResponse({"status": "ready" if ready else "starting"}, status_code=200 if ready else 503)

    if settings.transport == "sse":
        app = server.sse_app(
            transport_security=security, host=settings.host, max_request_body_size=settings.max_request_bytes
        )
    else:
        app = server.streamable_http_app(
            transport_security=security, host=settings.host, max_request_body_size=settings.max_request_bytes
        )
    # Health routes carry no auth and skip Host/Origin checks: they reveal only liveness and version.
    app.router.routes[:0] = [
        Route("/healthz", healthz, methods=["GET"], include_in_schema=False),
        Route("/readyz", readyz, methods=["GET"], include_in_schema=False),
    ]
    inner: Callable[[Starlette], AbstractAsyncContextManager[Any]] = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(asgi: Starlette) -> AsyncIterator[None]:
        # Open the database and build the index at start-up, not on the first connection
        # (SSE enters the server lifespan per connection), and close them last at shutdown.
        async with shared.use(), inner(asgi):
            yield

    app.router.lifespan_context = lifespan
    app.add_middleware(_LowerCaseHostOrigin)
    return app


async def _run_stdio(server: MCPServer[AppContext], shared: SharedApp, tracker: CallTracker) -> None:
    lowlevel = server._lowlevel_server  # the SDK's run_stdio_async offers no way to pass our stdin
    # Open the database before speaking the protocol, so a bad one fails start-up plainly.
    async with shared.use(), anyio.create_task_group() as tg:
        tg.start_soon(_watch_parent, tg.cancel_scope.cancel)
        tg.start_soon(_watch_signals, tracker, tg.cancel_scope.cancel)
        lines = StdinLines()
        async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
            messages = AnsweredMessages(
                read_stream, lines, write_stream, lambda: _finish_calls(tracker, "stdin closed", refuse_new=False)
            )
            await lowlevel.run(messages, write_stream, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()  # stdin closed


async def _watch_parent(stop: Callable[[], None]) -> None:
    """Stop when the process that spawned us is gone (we were re-parented), at start-up or later."""
    parent = PARENT_PID
    while os.getppid() == parent:  # noqa: ASYNC110 - nothing signals a parent's death; polling is the way
        await anyio.sleep(PARENT_POLL_S)
    logger.info("parent process %d is gone; shutting down", parent)
    stop()


async def _watch_signals(tracker: CallTracker, stop: Callable[[], None]) -> None:
    """On SIGTERM/SIGINT let the calls in flight finish (up to a grace period), then stop; a second
    signal stops at once (as over HTTP), for whoever will not wait out a stuck call."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        # listening now: one that came while starting was only noted (launch.py)
        noted = stop_noted()
        received = noted if noted is not None else await anext(aiter(signals))
        async with anyio.create_task_group() as draining:

            async def again() -> None:
                second = await anext(aiter(signals))
                logger.warning("received %s again; stopping without waiting", signal.Signals(second).name)
                draining.cancel_scope.cancel()

            draining.start_soon(again)
            await _finish_calls(tracker, f"received {signal.Signals(received).name}")
            draining.cancel_scope.cancel()
        stop()


async def _finish_calls(tracker: CallTracker, why: str, *, refuse_new: bool = True) -> None:
    """Wait (up to a grace period) for the calls in flight to be answered, refusing new ones if told."""
    tracker.close(refuse_new)
    logger.info("%s; finishing %d call(s) in flight", why, tracker.active)
    busy, started = tracker.active, tracker.started
    with anyio.move_on_after(GRACE_S) as waited:
        await tracker.settled(RESPONSE_DRAIN_S / 5)
    if waited.cancelled_caught:
        logger.warning("calls still running after %.0f s; stopping anyway", GRACE_S)
    elif busy or tracker.started != started:
        # A call is finished before the SDK writes its response to stdout; give that a moment.
        await anyio.sleep(RESPONSE_DRAIN_S)
