"""MCP prompts (session start and end), resources (each slot, the compiled context) and their change events."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import parse_qs

import anyio.lowlevel
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity, UserMessage
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp.shared.uri_template import UriTemplate
from mcp_types import INVALID_PARAMS, Resource
from pydantic import Field

from mcp_memory.context import AppContext
from mcp_memory.errors import MCPMemoryError, NotFoundError
from mcp_memory.services.common import GLOBAL_PROJECT, caller_project
from mcp_memory.services.operations import written_projects
from mcp_memory.services.slots import written_slots
from mcp_memory.tools._common import Ctx, Project, _argument_problem, app_of, text_safe
from mcp_memory.tools.caller import agent_of, claims_of, project_of
from mcp_memory.tools.knowledge import memory_context
from mcp_memory.tools.learning import TaskType

if TYPE_CHECKING:
    from mcp_memory.db import Tx

logger = logging.getLogger(__name__)

SESSION_START = """\
Here is what you remember about this project. Use it; do not repeat work it says is done.

{context}

While you work{project_hint}:
- record decisions, errors and their fixes, and file changes with memory_observe;
- save durable facts, decisions and preferences with memory_save;
- look things up with memory_recall / memory_smart_search before re-deriving them;
- when a task ends, record how it went with memory_outcome_record."""

SESSION_START_SHORT = """\
{context}

While you work{project_hint}: record with memory_observe, save facts with memory_save, look up with memory_recall."""
"""The words of session_start when a small budget leaves no room for the full ones."""
_SESSION_START_TEMPLATES = (SESSION_START, SESSION_START_SHORT, "{context}")


async def rendered_context(
    ctx: Ctx,
    project: str | None,
    query: str | None,
    task_type: str | None,
    budget: int | None = None,
    templates: Sequence[str] = ("{context}",),
) -> str:
    """The compiled context of the caller's project within the budget, in the first of `templates` that fits
    (each holds {context}, and may hold {project_hint}), ending with what was left out and how to fetch it."""
    name, default = await project_of(ctx, project), await project_of(ctx, None)
    hint = project_hint(name, default)
    frames = []
    for template in templates:
        before, _, after = template.partition("{context}")
        frames.append((before.replace("{project_hint}", hint), after.replace("{project_hint}", hint)))
    return await app_of(ctx).context.render(
        name, query=query, task_type=task_type, budget=budget, default_project=default, frames=frames
    )


def project_hint(name: str, default: str) -> str:
    """What tells the agent to name the project in its calls, when calls without one would reach another."""
    return "" if name == default else f" (pass project={json.dumps(name, ensure_ascii=False)} to every call)"


async def session_start(
    ctx: Ctx,
    query: Annotated[str | None, Field(max_length=2_000, description="What this session is about.")] = None,
    task_type: TaskType = None,
    project: Project = None,
) -> list[UserMessage]:
    """Start a session with the compiled memory context of the project."""
    try:
        # The whole prompt keeps to the server's context budget: a small one gets the short words, or none.
        text = await rendered_context(ctx, project, query, task_type, templates=_SESSION_START_TEMPLATES)
    except (MCPMemoryError, ToolError) as exc:
        # An MCPError passes through the SDK with its message; anything else becomes "internal error".
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
    return [UserMessage(text)]


SESSION_END = """\
Before this session ends, record what it taught, so the next session starts smarter{project_hint}:

1. For each task you attempted{task_hint}, call memory_outcome_record{session_arg} with: task, task_type
   (e.g. bugfix, refactor, feature), success and/or score (0-1), strategy (the approach), steps,
   error (if it failed), mistakes and successes (short sentences), and mistake_cards for any wrong
   decision worth remembering (type, wrong_decision, correct_decision, why).
2. Call memory_reflect{session_arg} to turn recurring errors, successful step sequences and
   contradicting memories into lessons and flags; read what it returns.
3. Call memory_crystallize{session_arg} so the session is summarised for next time.
4. Save anything durable you learned about the user or the project with memory_save (kind
   preference / decision / fact), and leave open threads in the pending_items slot with
   memory_slot_append.
Keep each call short and factual; do not invent outcomes you did not observe."""


async def session_end(
    ctx: Ctx,
    session_id: Annotated[
        str | None, Field(max_length=128, description="The session to close (default: the current one).")
    ] = None,
    task: Annotated[str | None, Field(max_length=2_000, description="The main task of the session, if known.")] = None,
    project: Project = None,
    agent_id: Annotated[
        str | None,
        Field(max_length=128, description="The agent id your writes name, if any: its current session is the one."),
    ] = None,
) -> list[UserMessage]:
    """End a session: record outcomes, reflect, crystallize, and save what should outlive it."""
    app = app_of(ctx)
    try:
        name, default = await project_of(ctx, project), await project_of(ctx, None)
        if session_id is not None:
            session_id = await app.context.session_id(name, session_id)
        else:
            # The walk-through must summarise this session, which crystallize without an id would not.
            session_id = await app.summaries.current_session(name, agent_of(ctx, agent_id))
    except (MCPMemoryError, ToolError) as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
    # Quoted as string literals, so names and the task read as data whatever quotes or line breaks they hold.
    given = {"session_id": session_id, "project": None if name == default else name}
    arguments = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in given.items() if value)
    session_arg = f"({arguments})" if arguments else ""
    task_hint = f" (at least: {json.dumps(task.strip(), ensure_ascii=False)})" if task and task.strip() else ""
    hint = project_hint(name, default)
    return [UserMessage(SESSION_END.format(session_arg=session_arg, task_hint=task_hint, project_hint=hint))]


_CONTEXT_ARGUMENTS = text_safe(func_metadata(memory_context, skip_names=["ctx"], structured_output=False))
"""The memory_context tool's arguments: the resource takes the same, with the same limits."""


async def context_resource(
    ctx: Ctx,
    project: str | None = None,
    query: str | None = None,
    task_type: str | None = None,
    budget: str | None = None,
) -> str:
    """The compiled context as markdown, with what was left out for space and how to fetch it."""
    given = {"project": project, "query": query, "task_type": task_type, "budget": budget}
    arguments = {key: value for key, value in given.items() if not _blank(value)}  # "?task_type=" gives none
    problem = _argument_problem(_CONTEXT_ARGUMENTS, arguments)
    if problem:
        raise MCPError(code=INVALID_PARAMS, message=problem)
    tokens = _CONTEXT_ARGUMENTS.arg_model.model_validate(arguments).model_dump()["budget"]  # "500" -> 500
    try:
        return await rendered_context(
            ctx, arguments.get("project"), arguments.get("query"), arguments.get("task_type"), tokens
        )
    except (MCPMemoryError, ToolError) as exc:
        # The caller's arguments (a ResourceError would reach it as the server's own internal error).
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc


async def slot_resource(ctx: Ctx, name: str, project: str | None = None) -> str:
    """The content of one slot."""
    try:
        slot = await app_of(ctx).slots.get(await project_of(ctx, None if _blank(project) else project), name)
    except NotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except (MCPMemoryError, ToolError) as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
    return slot.content


def _blank(value: object) -> bool:
    """Whether a prompt or resource argument was left empty (None, or text of only spaces)."""
    return value is None or (isinstance(value, str) and not value.strip())


def check_prompt_arguments(prompts: Mapping[str, Callable[..., Awaitable[Any]]]) -> ServerMiddleware[Any]:
    """Server middleware: refuse an unknown prompt, or unknown or invalid arguments, naming what is wrong.

    The SDK raises a plain error for both, which reaches the client as "Internal server error".
    A blank argument counts as not given: prompt arguments are text, and a client's form sends ""
    for a field left empty.
    """
    arguments_of: dict[str, FuncMetadata] = {
        name: text_safe(func_metadata(fn, skip_names=["ctx"], structured_output=False)) for name, fn in prompts.items()
    }

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "prompts/get" and ctx.params and isinstance(name := ctx.params.get("name"), str):
            meta = arguments_of.get(name)
            if meta is None:
                known = ", ".join(sorted(arguments_of))
                raise MCPError(code=INVALID_PARAMS, message=f"name: unknown prompt {name!r}; prompts are {known}")
            arguments = ctx.params.get("arguments") or {}
            if isinstance(arguments, dict):
                given = {key: value for key, value in arguments.items() if not _blank(value)}
                if len(given) < len(arguments):
                    ctx = dataclasses.replace(ctx, params={**ctx.params, "arguments": given})
                if problem := _argument_problem(meta, given):
                    raise MCPError(code=INVALID_PARAMS, message=problem)
        return await call_next(ctx)

    return check


_CONTEXT_URI, _SLOT_URI = "memory://context", "memory://slots/"
_RESOURCE_ARGUMENTS = {_CONTEXT_URI: ("project", "query", "task_type", "budget"), _SLOT_URI: ("project",)}
"""The query arguments each resource takes, by the start of its URI (its template names them)."""
_OUR_RULES = ResourceSecurity(exempt_params=frozenset({"name", *_RESOURCE_ARGUMENTS[_CONTEXT_URI]}))
"""No argument of ours is a path, and each is checked by the rule the tools apply (check_project, the slot
name rule, the tool's own limits), which names the field: the SDK's path checks would refuse valid project
names such as "x:web", "C:" or ".." as an unknown resource."""


def check_resource_arguments() -> ServerMiddleware[Any]:
    """Server middleware: refuse a resource read with a query argument the resource does not take.

    The SDK's template match drops what it does not know, so "?budjet=100" would be read at the
    default budget without a word; the tools refuse unknown arguments, and so do the resources.
    """

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "resources/read" and ctx.params and isinstance(uri := ctx.params.get("uri"), str):
            base, _, query = uri.partition("?")
            taken = next((names for start, names in _RESOURCE_ARGUMENTS.items() if base.startswith(start)), None)
            if taken is not None and query:
                for key, values in parse_qs(query, keep_blank_values=True).items():
                    if key not in taken:
                        raise MCPError(
                            code=INVALID_PARAMS,
                            message=f"{key}: unknown argument; this resource takes {', '.join(taken)}",
                        )
                    if len(values) > 1:  # the template would read the first and drop the rest unsaid
                        raise MCPError(code=INVALID_PARAMS, message=f"{key}: given {len(values)} times; give it once")
        return await call_next(ctx)

    return check


CONTEXT_TITLE = "Compiled memory context"
CONTEXT_DESCRIPTION = "Pinned slots, profile, lessons, mistakes, recent sessions and memories, within the budget."


def list_live_resources(server: MCPServer[AppContext]) -> ServerMiddleware[Any]:
    """Server middleware: resources/list names the compiled context and each slot the caller's project sees.

    Both are template resources, which the SDK lists only as templates; clients that offer what
    resources/list returns would otherwise offer nothing.
    """

    async def listing(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "resources/list" or not isinstance(result, dict):  # the SDK hands back the wire form
            return result
        live = [
            Resource(
                uri="memory://context", name="context", title=CONTEXT_TITLE, description=CONTEXT_DESCRIPTION,
                mime_type="text/markdown",
            )
        ]  # fmt: skip
        try:
            request = Context(request_context=ctx, mcp_server=server)
            slots = await app_of(request).slots.overview(await project_of(request, None))
        except (MCPMemoryError, ToolError):
            slots = None  # a caller without a usable project still learns of the context resource
        for slot in slots.slots if slots else []:
            live.append(
                Resource(
                    uri=f"memory://slots/{slot.name}",  # the project's slot, else the global one it lists
                    name=f"slot:{slot.name}",
                    title=f"Slot {slot.name}" + (" (global)" if slot.scope == "global" else ""),
                    description=slot.description,
                    mime_type="text/plain",
                )
            )
        wire = [r.model_dump(by_alias=True, mode="json", exclude_none=True) for r in live]
        return {**result, "resources": [*result.get("resources", []), *wire]}

    return listing


_CONTEXT_TEMPLATE = f"{_CONTEXT_URI}{{?{','.join(_RESOURCE_ARGUMENTS[_CONTEXT_URI])}}}"
_SLOT_TEMPLATE = f"{_SLOT_URI}{{name}}{{?{','.join(_RESOURCE_ARGUMENTS[_SLOT_URI])}}}"
_UNSHOWN = frozenset({"index", "embedding"})
"""Kinds of change that are upkeep of the search index, which no resource shows."""


@dataclass(frozen=True)
class Audience:
    """Whose events a listen stream hears: its caller's project (what a resource without `?project=`
    reads), and whether the caller may name no other (a bound token, or `--isolated`)."""

    own: str
    restricted: bool

    def hears_of(self, project: str) -> bool:
        """Whether this stream may hear of writes to `project`'s resources by name."""
        return not self.restricted or project == self.own


_BOUND: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_memory_listen_bound", default=None)
"""The project a listen request's bearer token is bound to, while the SDK subscribes its stream."""


class ResourceEvents:
    """The server's subscription bus (subscriptions/listen, protocol 2026-07-28), told of every commit.

    It fans events out as the SDK's in-process bus does, and `committed`, which the database calls
    after each transaction that committed (never after a rollback), publishes to each stream what that
    write changed of the resources its caller reads: ResourcesListChanged when a slot the caller lists
    was made, deleted or described anew, and ResourceUpdated for the URIs that may read differently
    now. A listen stream matches URIs exactly, so each is published as clients spell them: as
    resources/list gives it (no project: the caller's own), and with the project the template's way
    ("?project=x%3Aweb"). A restricted caller hears nothing of another project's writes, not even
    that they happened. Other spellings (a budget, a query) and writes by other processes are not
    announced.
    """

    def __init__(self, project: str, isolated: bool) -> None:
        self._project = project
        self._isolated = isolated
        self._listeners: dict[object, tuple[Callable[[ServerEvent], None], Audience]] = {}

    async def publish(self, event: ServerEvent) -> None:
        self._deliver([(listener, [event]) for listener, _ in self._listeners.values()])
        await anyio.lowlevel.checkpoint()  # as the SDK's bus: a burst lets the streams drain between events

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """Add a stream; the SDK calls this while serving its listen request (see `scope_listen`)."""
        bound = _BOUND.get()
        audience = Audience(bound or self._project, bool(bound) or self._isolated)
        token = object()
        self._listeners[token] = (listener, audience)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def committed(self, tx: Tx) -> None:
        """Publish what the committed transaction `tx` changed (a database commit listener)."""
        if not self._listeners or all(kind in _UNSHOWN for kind, _, _ in tx.changes):
            return
        by_audience: dict[Audience, list[ServerEvent]] = {}
        for _, audience in self._listeners.values():
            if audience not in by_audience:
                by_audience[audience] = changed_resources(tx, audience)
        self._deliver([(listener, by_audience[audience]) for listener, audience in self._listeners.values()])

    @staticmethod
    def _deliver(batches: Sequence[tuple[Callable[[ServerEvent], None], Sequence[ServerEvent]]]) -> None:
        for listener, events in batches:
            for event in events:
                try:
                    listener(event)
                except Exception:  # one stream's failure must not starve the others, nor fail the write
                    logger.exception("a subscription listener failed")


async def scope_listen(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: a listen stream is subscribed knowing its caller's bearer token binding."""
    if ctx.method != "subscriptions/listen":
        return await call_next(ctx)
    bound = claims_of(ctx.request).get("project")
    token = _BOUND.set(str(bound) if bound else None)
    try:
        return await call_next(ctx)
    finally:
        _BOUND.reset(token)


def changed_resources(tx: Tx, audience: Audience) -> list[ServerEvent]:
    """The events of the resources a committed transaction may have changed that `audience` reads, each once."""
    write = tx.project  # None: a write of records of any project (an import, a sweep of every project)
    imported = written_projects(tx)
    # the projects whose records it wrote (None: not known)
    writes: list[str | None] = [write] if write is not None or imported is None else [*imported]
    events: dict[ServerEvent, None] = {}  # ordered, without repeats
    slots = written_slots(tx)
    for slot in slots:
        where = slot.scope or write
        if where is None:  # which project's slot is not known: only an unrestricted caller may hear of it
            if slot.listing and not audience.restricted:
                events[ResourcesListChanged()] = None
            continue
        listed = where in (audience.own, GLOBAL_PROJECT)  # resources/list and bare URIs read these
        if slot.listing and listed:
            events[ResourcesListChanged()] = None
        if slot.name is None:
            continue
        named = [audience.own] if where == GLOBAL_PROJECT else [where]
        if where == GLOBAL_PROJECT and write not in (None, GLOBAL_PROJECT):
            named.append(write)
        for scope in [None] * listed + [p for p in named if audience.hears_of(p)]:
            events[ResourceUpdated(uri=resource_uri(_SLOT_TEMPLATE, scope, name=slot.name))] = None
    # A global record (a pinned global slot opens every context) changes every project's context,
    # whoever wrote it; a write of unknown projects only an unrestricted caller hears of.
    shared = GLOBAL_PROJECT in writes or any(slot.scope == GLOBAL_PROJECT for slot in slots)
    unknown = None in writes and not audience.restricted
    scopes: list[str | None] = [None, audience.own] if shared or unknown else []
    caller = caller_project(tx)
    if shared and caller is not None and audience.hears_of(caller):
        scopes.append(caller)  # a global record saved from a project: that project's context too, by name
    for project in writes:
        if project not in (None, GLOBAL_PROJECT):
            scopes += ([None] if project == audience.own else []) + ([project] if audience.hears_of(project) else [])
    for scope in dict.fromkeys(scopes):
        events[ResourceUpdated(uri=resource_uri(_CONTEXT_TEMPLATE, scope))] = None
    return list(events)


def resource_uri(template: str, project: str | None, **variables: str) -> str:
    """A resource's URI as its template spells it, naming `project` when given."""
    return _parsed(template).expand({**variables, **({"project": project} if project else {})})


@functools.cache
def _parsed(template: str) -> UriTemplate:
    """A resource template parsed once (events expand it after every committed write)."""
    return UriTemplate.parse(template)


def register_prompts_and_resources(server: MCPServer[AppContext], profile: str = "all") -> None:
    """Add the prompts and the context and slot resources (session_end needs the full tool profile)."""
    prompts: dict[str, Callable[..., Awaitable[Any]]] = {"session_start": session_start}
    server.prompt(name="session_start", title="Start a session with memory")(session_start)
    if profile == "all":
        server.prompt(name="session_end", title="End a session: record, reflect, summarise")(session_end)
        prompts["session_end"] = session_end
    server.middleware.append(check_prompt_arguments(prompts))
    server.middleware.append(list_live_resources(server))
    server.middleware.append(check_resource_arguments())
    server.middleware.append(scope_listen)
    server.resource(
        _CONTEXT_TEMPLATE,
        name="context",
        title=CONTEXT_TITLE,
        description=CONTEXT_DESCRIPTION,
        mime_type="text/markdown",
        security=_OUR_RULES,
    )(context_resource)
    server.resource(
        _SLOT_TEMPLATE,
        name="slot",
        title="Memory slot",
        description="The content of one slot (the project's, else the global one).",
        mime_type="text/plain",
        security=_OUR_RULES,
    )(slot_resource)
