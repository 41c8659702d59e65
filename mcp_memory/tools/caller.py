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
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types.version import is_version_at_least

from mcp_memory.errors import MCPMemoryError
from mcp_memory.projects import check_project
from mcp_memory.tools._common import Ctx, app_of

PROJECT_MARKER = ".mcp-memory-project"
_MODERN = "2026-07-28"
_ROOTS_TIMEOUT_S = 5.0
_UNSAFE = re.compile(r"[\x00-\x1f*/\\]+")
_roots_cache: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()


def grant_of(ctx: Ctx) -> dict[str, Any]:
    """The claims of the bearer token of this request ({} without one)."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    token = getattr(user, "access_token", None)
    claims = getattr(token, "claims", None)
    return dict(claims) if isinstance(claims, dict) else {}


def agent_of(ctx: Ctx, agent_id: str | None) -> str | None:
    """The agent id of a write: the argument, else the token's agent id, else the setting's."""
    return agent_id or grant_of(ctx).get("agent_id") or app_of(ctx).settings.agent_id


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
    """The project named by the client's roots (asked once per connection), if the client has roots."""
    capabilities = ctx.client_capabilities
    version = ctx.protocol_version
    if capabilities is None or capabilities.roots is None or version is None or is_version_at_least(version, _MODERN):
        # Roots are deprecated on the 2026-07-28 protocol, which has no mid-call requests for them.
        return None
    session = ctx.request_context.session
    try:
        return _roots_cache[session]
    except (KeyError, TypeError):
        pass
    name = None
    try:
        with anyio.fail_after(_ROOTS_TIMEOUT_S), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = await session.list_roots()
        # A remote client's folders are on its own disk: only a stdio client shares ours.
        local = app_of(ctx).settings.transport == "stdio"
        name = project_from_roots([str(root.uri) for root in result.roots], read_marker=local)
    except Exception:  # a client that cannot list roots simply does not name a project this way
        name = None
    with contextlib.suppress(TypeError):  # a session object that cannot be weakly referenced is not cached
        _roots_cache[session] = name
    return name


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
