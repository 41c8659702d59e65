"""Episodic tools: observe, recall, sessions, observations, timeline."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from mcp_memory.models.results import (
    ObservationList,
    ObserveResult,
    RecallResult,
    SessionList,
    TimelineResult,
)
from mcp_memory.tools._common import (
    AgentId,
    Concepts,
    Ctx,
    Files,
    Limit,
    OccurredAt,
    Offset,
    Project,
    Query,
    Ref,
    SessionId,
    Title,
    When,
    app_of,
    make_tool,
)
from mcp_memory.tools.caller import agent_of, project_of

TYPE_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
ObservationType = Annotated[
    str,
    Field(
        pattern=TYPE_PATTERN,
        description="Kind of event: decision, error, fix, file_change, tool_use, discovery, preference, "
        "conversation, note (or your own lower_snake_case type).",
    ),
]
Types = Annotated[
    list[Annotated[str, Field(pattern=TYPE_PATTERN)]] | None,
    Field(max_length=20, description="Only these observation types (lower_snake_case, as memory_observe takes)."),
]


async def memory_observe(
    ctx: Ctx,
    content: Annotated[str, Field(min_length=1, max_length=100_000, description="What happened, in full.")],
    type: ObservationType = "note",
    title: Title = None,
    facts: Annotated[
        list[Annotated[str, Field(max_length=2_000)]] | None,
        Field(max_length=50, description="Key facts; extracted from the content if omitted."),
    ] = None,
    concepts: Concepts = None,
    files: Files = None,
    session_id: SessionId = None,
    ref: Ref = None,
    occurred_at: OccurredAt = None,
    importance: Annotated[
        float | None, Field(allow_inf_nan=False, ge=0, le=1, description="0-1; default by type.")
    ] = None,
    end_session: Annotated[bool, Field(description="Close the session after recording this.")] = False,
    agent_id: AgentId = None,
    project: Project = None,
) -> ObserveResult:
    """Record something that happened in this session (a decision, error, change, note); secrets are redacted."""
    return await app_of(ctx).episodic.observe(
        await project_of(ctx, project),
        content,
        type,
        title=title,
        facts=facts,
        concepts=concepts,
        files=files,
        session_id=session_id,
        agent_id=agent_of(ctx, agent_id),
        ref=ref,
        occurred_at=occurred_at,
        importance=importance,
        end_session=end_session,
    )


async def memory_recall(
    ctx: Ctx,
    query: Query,
    limit: Limit = 10,
    session_id: Annotated[str | None, Field(max_length=128, description="Only this session.")] = None,
    types: Types = None,
    since: When = None,
    until: When = None,
    include_memories: Annotated[bool, Field(description="Also search long-term memories.")] = False,
    neighbours: Annotated[
        int,
        Field(
            ge=0,
            le=3,
            description="Attach this many turns before and after each observation hit (its session's context).",
        ),
    ] = 0,
    project: Project = None,
) -> RecallResult:
    """Find past observations and session summaries relevant to a question, best first (compact hits)."""
    kinds = ["observation", "session", "memory"] if include_memories else None
    return await app_of(ctx).search.recall(
        await project_of(ctx, project),
        query,
        limit=limit,
        session_id=session_id,
        types=types,
        since=since,
        until=until,
        kinds=kinds,
        neighbours=neighbours,
    )


async def memory_sessions(
    ctx: Ctx,
    status: Annotated[
        Literal["active", "idle", "open", "ended", "all"],
        Field(description="active (recently used), idle (open but unused), open (both), ended, or all."),
    ] = "all",
    limit: Limit = 20,
    offset: Offset = 0,
    project: Project = None,
) -> SessionList:
    """List sessions, most recently active first, with status, counts and summaries."""
    return await app_of(ctx).episodic.sessions(await project_of(ctx, project), status, limit, offset)


async def memory_observations(
    ctx: Ctx,
    session_id: Annotated[str | None, Field(max_length=128, description="Only this session.")] = None,
    types: Types = None,
    since: When = None,
    until: When = None,
    order: Annotated[Literal["newest", "oldest"], Field(description="Time order of the page.")] = "newest",
    full: Annotated[bool, Field(description="Include the full content (costs tokens).")] = False,
    limit: Limit = 20,
    offset: Offset = 0,
    project: Project = None,
) -> ObservationList:
    """List observations (compressed: title, facts, concepts, files) by session, type and time."""
    return await app_of(ctx).episodic.observations(
        await project_of(ctx, project),
        session_id=session_id,
        types=types,
        since=since,
        until=until,
        limit=limit,
        offset=offset,
        newest_first=order == "newest",
        full=full,
    )


async def memory_timeline(
    ctx: Ctx,
    anchor: Annotated[str | None, Field(max_length=128, description="Observation id to centre on.")] = None,
    at: Annotated[
        str | None, Field(max_length=40, description="Or a moment (ISO-8601) to centre on; not with anchor.")
    ] = None,
    session_id: Annotated[str | None, Field(max_length=128, description="Only this session.")] = None,
    before: Annotated[int, Field(ge=0, le=100, description="Observations before the anchor.")] = 10,
    after: Annotated[int, Field(ge=0, le=100, description="Observations after the anchor.")] = 10,
    project: Project = None,
) -> TimelineResult:
    """Show observations in time order around an observation, a moment, or (by default) now."""
    return await app_of(ctx).episodic.timeline(
        await project_of(ctx, project), anchor=anchor, at=at, session_id=session_id, before=before, after=after
    )


def episodic_tools() -> list[Tool]:
    """The episodic tools."""
    return [
        # destructive: past --observation-cap the least valuable observations of the session are
        # folded into its digest (their rows deleted, their text kept as one line each)
        make_tool(memory_observe, title="Record an observation", read_only=False, destructive=True),
        make_tool(memory_recall, title="Recall past observations", read_only=True),
        make_tool(memory_sessions, title="List sessions", read_only=True),
        make_tool(memory_observations, title="List observations", read_only=True),
        make_tool(memory_timeline, title="Timeline around a moment", read_only=True),
    ]
