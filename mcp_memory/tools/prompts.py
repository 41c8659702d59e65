"""MCP prompts (session start) and resources (each slot, the compiled context)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer, UserMessage
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import Field

from mcp_memory.context import AppContext
from mcp_memory.errors import MCPMemoryError, NotFoundError
from mcp_memory.tools._common import Ctx, app_of
from mcp_memory.tools.caller import project_of

SESSION_START = """\
Here is what you remember about this project. Use it; do not repeat work it says is done.

{context}

While you work:
- record decisions, errors and their fixes, and file changes with memory_observe;
- save durable facts, decisions and preferences with memory_save;
- look things up with memory_recall / memory_smart_search before re-deriving them;
- when a task ends, record how it went with memory_outcome_record.
Items listed as left out can be fetched by id with memory_smart_search(ids=[...])."""


async def session_start(
    ctx: Ctx,
    query: Annotated[str | None, Field(description="What this session is about.")] = None,
    task_type: Annotated[str | None, Field(description="Kind of task, e.g. bugfix.")] = None,
    project: Annotated[str | None, Field(description="Project; default the server's.")] = None,
) -> list[UserMessage]:
    """Start a session with the compiled memory context of the project."""
    try:
        compiled = await app_of(ctx).context.compile(await project_of(ctx, project), query=query, task_type=task_type)
    except (MCPMemoryError, ToolError) as exc:
        # An MCPError passes through the SDK with its message; anything else becomes "internal error".
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc
    text = SESSION_START.format(context=compiled.text)
    if compiled.omitted:
        text += "\nLeft out for space (fetch with): " + "; ".join(o.fetch for o in compiled.omitted)
    return [UserMessage(text)]


SESSION_END = """\
Before this session ends, record what it taught, so the next session starts smarter:

1. For each task you attempted{task_hint}, call memory_outcome_record with: task, task_type
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
    session_id: Annotated[str | None, Field(description="The session to close (default: the current one).")] = None,
    task: Annotated[str | None, Field(description="The main task of the session, if known.")] = None,
) -> list[UserMessage]:
    """End a session: record outcomes, reflect, crystallize, and save what should outlive it."""
    session_arg = f'(session_id="{session_id}")' if session_id else ""
    task_hint = f' (at least: "{task}")' if task else ""
    return [UserMessage(SESSION_END.format(session_arg=session_arg, task_hint=task_hint))]


async def context_resource(
    ctx: Ctx, project: str | None = None, query: str | None = None, task_type: str | None = None
) -> str:
    """The compiled context as markdown."""
    try:
        compiled = await app_of(ctx).context.compile(await project_of(ctx, project), query=query, task_type=task_type)
    except (MCPMemoryError, ToolError) as exc:
        raise ResourceError(str(exc)) from exc
    return compiled.text


async def slot_resource(ctx: Ctx, name: str, project: str | None = None) -> str:
    """The content of one slot."""
    try:
        slot = await app_of(ctx).slots.get(await project_of(ctx, project), name)
    except NotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except (MCPMemoryError, ToolError) as exc:
        raise ResourceError(str(exc)) from exc
    return slot.content


def register_prompts_and_resources(server: MCPServer[AppContext], profile: str = "all") -> None:
    """Add the prompts and the context and slot resources (session_end needs the full tool profile)."""
    server.prompt(name="session_start", title="Start a session with memory")(session_start)
    if profile == "all":
        server.prompt(name="session_end", title="End a session: record, reflect, summarise")(session_end)
    server.resource(
        "memory://context{?project,query,task_type}",
        name="context",
        title="Compiled memory context",
        description="Pinned slots, profile, lessons, mistakes, recent sessions and memories, within the budget.",
        mime_type="text/markdown",
    )(context_resource)
    server.resource(
        "memory://slots/{name}{?project}",
        name="slot",
        title="Memory slot",
        description="The content of one slot (the project's, else the global one).",
        mime_type="text/plain",
    )(slot_resource)
