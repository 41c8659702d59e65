"""Who is calling, and in which project: the token's grant, the client's roots, the settings.

The project of a call comes from, in order: the tool's `project` argument, the token's project,
the client's MCP roots (over stdio a `.mcp-memory-project` file in the first root folder, else that
folder's name), `--project`, `default`. A token bound to a project can never name another; with
`--isolated`, no call may name a project other than the token's or the roots'. Such a restricted
connection may read global lessons and slots but not write them: they reach every project.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.session import ServerSession
from mcp_types.version import is_version_at_least

from mcp_memory.errors import MCPMemoryError
from mcp_memory.projects import check_agent_id, check_project
from mcp_memory.tools._common import Ctx, app_of

PROJECT_MARKER = ".mcp-memory-project"
_MODERN = "2026-07-28"
_ROOTS_TIMEOUT_S = 5.0
_UNSAFE = re.compile(r"[\x00-\x1f*/\\]+")
_ROOTS_STATE = "mcp_memory.roots"
ROOTS_CHANGED = "notifications/roots/list_changed"


@dataclass
class _Roots:
    """One connection's answer to roots/list: asked once, kept until the client says its roots changed."""

    lock: anyio.Lock = field(default_factory=anyio.Lock)
    known: bool = False
    name: str | None = None
    changes: int = 0  # roots/list_changed notifications seen; an answer asked before the last one is stale


def grant_of(ctx: Ctx) -> dict[str, Any]:
    """The claims of the bearer token of this request ({} without one)."""
    return claims_of(ctx.request_context.request)


def claims_of(request: object) -> dict[str, Any]:
    """The claims of the bearer token of an HTTP request ({} without one, or over stdio)."""
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    token = getattr(user, "access_token", None)
    claims = getattr(token, "claims", None)
    return dict(claims) if isinstance(claims, dict) else {}


def agent_of(ctx: Ctx, agent_id: str | None) -> str | None:
    """The agent id of a write: the argument, else the token's agent id, else the setting's."""
    return check_agent_id(agent_id) or grant_of(ctx).get("agent_id") or app_of(ctx).settings.agent_id


async def restricted_to(ctx: Ctx) -> str | None:
    """The only project this connection may touch (a bound token's, or under --isolated), else None."""
    settings = app_of(ctx).settings
    bound = grant_of(ctx).get("project")
    if bound:
        return str(bound)
    if settings.isolated:
        return await roots_project(ctx) or settings.project
    return None


async def project_of(ctx: Ctx, project: str | None) -> str:
    """The project a call acts on, enforcing the token's binding and `--isolated`."""
    settings = app_of(ctx).settings
    bound = grant_of(ctx).get("project")
    roots = None if bound else await roots_project(ctx)
    if project is None:
        return bound or roots or settings.project  # each checked where it was read
    try:
        name = check_project(project)
    except MCPMemoryError as exc:
        raise ToolError(str(exc)) from exc
    allowed = bound or (roots or settings.project if settings.isolated else None)
    if allowed is not None and name != allowed:
        raise ToolError(f"project: this connection may only use project {allowed!r}; omit project to use it")
    return name


async def roots_project(ctx: Ctx) -> str | None:
    """The project named by the client's roots, if the client has roots.

    Asked once per connection (and again after the client's roots/list_changed); a client that cannot
    answer in time names none for the connection, so its calls never split between two projects.
    """
    capabilities = ctx.client_capabilities
    version = ctx.protocol_version
    if capabilities is None or capabilities.roots is None or version is None or is_version_at_least(version, _MODERN):
        # Roots are deprecated on the 2026-07-28 protocol, which has no mid-call requests for them.
        return None
    session = ctx.request_context.session
    memo = _roots_of(session)
    if memo is None:
        return await _ask_roots(ctx, session)
    # One call asks while the others wait for its answer: one connection, one project, one question.
    async with memo.lock:
        if not memo.known:
            changes = memo.changes
            name = await _ask_roots(ctx, session)
            if memo.changes != changes:
                return name  # the roots changed while we asked: this answer serves this call only
            memo.name, memo.known = name, True
        return memo.name


async def forget_roots(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: a client's roots/list_changed makes the next call ask for its roots again."""
    if ctx.method == ROOTS_CHANGED and (memo := _roots_of(ctx.session)) is not None:
        memo.known, memo.name = False, None
        memo.changes += 1
    return await call_next(ctx)


def _roots_of(session: ServerSession) -> _Roots | None:
    """The roots memo of the connection `session` serves, made on first use (None if it cannot be found)."""
    # The SDK builds a new ServerSession for every request, so the memo lives on the Connection they
    # share (its `state` is the SDK's per-connection scratch space, gone with the connection). The
    # session does not expose its connection publicly; without one, every call asks again.
    connection = getattr(session, "_connection", None)
    if not isinstance(connection, Connection):
        return None
    memo = connection.state.get(_ROOTS_STATE)
    if not isinstance(memo, _Roots):
        memo = connection.state[_ROOTS_STATE] = _Roots()
    return memo


async def _ask_roots(ctx: Ctx, session: ServerSession) -> str | None:
    """Ask the client for its roots and name their project; None when it cannot say (in time)."""
    try:
        with anyio.fail_after(_ROOTS_TIMEOUT_S), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = await session.list_roots()
        # A remote client's folders are on its own disk: only a stdio client shares ours.
        local = app_of(ctx).settings.transport == "stdio"
        return project_from_roots([str(root.uri) for root in result.roots], read_marker=local)
    except Exception:  # a client that cannot list roots simply does not name a project this way
        return None


def project_from_roots(uris: list[str], *, read_marker: bool) -> str | None:
    """The project of the first root: its marker file's first line (if `read_marker`), else its folder name."""
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            continue
        folder = Path(unquote(parsed.path))
        name = folder.name
        if read_marker:
            try:
                marker = (folder / PROJECT_MARKER).read_text().strip().splitlines()
                name = marker[0].strip() if marker and marker[0].strip() else name
            except OSError:
                pass  # no marker (or an unreadable one): the folder name stands
        with contextlib.suppress(MCPMemoryError):  # a folder name no project may have names none
            return check_project(_UNSAFE.sub("-", name).strip("-")[:128])
    return None
