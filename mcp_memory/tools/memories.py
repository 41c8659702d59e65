"""Long-term memory tools: save, get, smart search, forget."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from mcp_memory.models.results import ForgetResult, MemoryDetail, SaveResult, SmartSearchResult
from mcp_memory.tools._common import (
    AgentId,
    Concepts,
    Ctx,
    Files,
    Ids,
    Limit,
    OccurredAt,
    Project,
    Ref,
    app_of,
    make_tool,
)
from mcp_memory.tools.caller import agent_of, project_of, restricted_to

MemoryKind = Annotated[
    str | None,
    Field(
        pattern=r"^[a-z][a-z0-9_]{0,39}$",
        description="fact, preference, decision, pattern, convention, person, project (or your own snake_case "
        "kind); default: the kind of the memory it replaces, else fact.",
    ),
]
Kinds = Annotated[
    list[Literal["observation", "memory", "session", "lesson"]] | None,
    Field(max_length=4, description="Restrict to these kinds of record; default all (lessons include global ones)."),
]


async def memory_save(
    ctx: Ctx,
    content: Annotated[str, Field(min_length=1, max_length=20_000, description="The fact, decision or preference.")],
    kind: MemoryKind = None,
    title: Annotated[str | None, Field(max_length=300, description="Short title.")] = None,
    concepts: Concepts = None,
    files: Files = None,
    importance: Annotated[
        float | None, Field(allow_inf_nan=False, ge=0.0, le=1.0, description="0 (trivia) to 1 (critical); default 0.5.")
    ] = None,
    supersedes: Annotated[
        str | None,
        Field(max_length=128, description="Id of the memory this one replaces (else found by similarity)."),
    ] = None,
    ref: Ref = None,
    occurred_at: OccurredAt = None,
    session_id: Annotated[str | None, Field(max_length=128, description="Session this was learned in.")] = None,
    agent_id: AgentId = None,
    project: Project = None,
) -> SaveResult:
    """Save a long-lived memory; a near-duplicate of a live one becomes its new version (history kept)."""
    return await app_of(ctx).memories.save(
        await project_of(ctx, project),
        content,
        kind,
        title=title,
        concepts=concepts,
        files=files,
        importance=importance,
        ref=ref,
        occurred_at=occurred_at,
        supersedes=supersedes,
        session_id=session_id,
        agent_id=agent_of(ctx, agent_id),
    )


async def memory_get(
    ctx: Ctx,
    id: Annotated[str, Field(min_length=1, max_length=128, description="Memory id (mem_…), any version.")],
    project: Project = None,
) -> MemoryDetail:
    """Get a memory in full with its version history, oldest version first."""
    return await app_of(ctx).memories.get(await project_of(ctx, project), id)


async def memory_smart_search(
    ctx: Ctx,
    query: Annotated[str | None, Field(max_length=2_000, description="What to look for, in plain words.")] = None,
    ids: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=128)]] | None,
        Field(max_length=100, description="Ids from earlier hits to fetch in full."),
    ] = None,
    kinds: Kinds = None,
    limit: Limit = 10,
    project: Project = None,
) -> SmartSearchResult:
    """Search everything: compact hits for a query first, then full records for the ids you pick."""
    return await app_of(ctx).search.smart_search(
        await project_of(ctx, project), query=query, ids=ids, kinds=kinds, limit=limit
    )


_BY = (
    " Observations and memories match by when they happened (occurred_at, else when recorded), lessons by when"
    " first saved; with kind='session', sessions by when their earliest observation happened, and with no kind a"
    " session goes whole only when all it holds happened in the window."
)


async def memory_forget(
    ctx: Ctx,
    ids: Annotated[
        Ids | None, Field(description="Records to delete, of any kind (observation, memory, …); not with a filter.")
    ] = None,
    kind: Annotated[
        Literal["observation", "memory", "session", "lesson"] | None, Field(description="Filter: only this kind.")
    ] = None,
    session_id: Annotated[str | None, Field(max_length=128, description="Filter: only this session.")] = None,
    since: Annotated[
        str | None, Field(max_length=40, description="Filter: from this ISO-8601 date or time." + _BY)
    ] = None,
    until: Annotated[
        str | None, Field(max_length=40, description="Filter: up to this ISO-8601 date (the whole day) or time." + _BY)
    ] = None,
    dry_run: Annotated[bool, Field(description="Only report what would be deleted.")] = False,
    project: Project = None,
) -> ForgetResult:
    """Delete records for good, by id or by filter, not both (memory chains, sessions and their turns, relations)."""
    return await app_of(ctx).forget.forget(
        await project_of(ctx, project),
        ids=ids,
        kind=kind,
        session_id=session_id,
        since=since,
        until=until,
        dry_run=dry_run,
        restricted=await restricted_to(ctx),
    )


def memories_tools() -> list[Tool]:
    """The long-term memory tools."""
    return [
        # idempotent: an identical save changes nothing; not destructive: a superseded version is kept
        make_tool(memory_save, title="Save a memory", read_only=False, idempotent=True),
        make_tool(memory_get, title="Get a memory with its history", read_only=True),
        make_tool(memory_smart_search, title="Search all memory", read_only=True),
        make_tool(memory_forget, title="Forget records", read_only=False, destructive=True, idempotent=True),
    ]
