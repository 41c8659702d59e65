"""Knowledge tools: relations and the compiled context."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from mcp_memory.models.organising import ContextResult, RelatedResult, RelateResult
from mcp_memory.tools._common import Ctx, Limit, Project, app_of, make_tool
from mcp_memory.tools.caller import project_of

RecordId = Annotated[str, Field(min_length=1, max_length=128)]
RelationType = Annotated[
    str,
    Field(
        pattern=r"^[a-z][a-z0-9_]{0,39}$",
        description="related, supersedes, extends, contradicts, depends_on, derived_from, part_of, causes, "
        "fixes, mentions, duplicates (or your own lower_snake_case type).",
    ),
]
TaskType = Annotated[str | None, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Focus on this task type.")]


async def memory_relate(
    ctx: Ctx,
    source_id: Annotated[RecordId, Field(description="Record the edge starts at.")],
    target_id: Annotated[RecordId, Field(description="Record the edge points to.")],
    type: RelationType = "related",
    weight: Annotated[float, Field(allow_inf_nan=False, ge=0, le=1, description="Strength, 0-1.")] = 1.0,
    note: Annotated[str | None, Field(max_length=1_000, description="Why they are related.")] = None,
    project: Project = None,
) -> RelateResult:
    """Link two records with a typed, weighted edge (the same edge again updates its weight)."""
    return await app_of(ctx).relations.relate(await project_of(ctx, project), source_id, target_id, type, weight, note)


async def memory_related(
    ctx: Ctx,
    id: Annotated[RecordId, Field(description="Record to start from.")],
    hops: Annotated[int, Field(ge=1, le=4, description="How many edges away to go.")] = 1,
    types: Annotated[list[RelationType] | None, Field(max_length=11, description="Only these relation types.")] = None,
    direction: Annotated[Literal["out", "in", "both"], Field(description="Follow edges out, in, or both.")] = "both",
    limit: Limit = 20,
    project: Project = None,
) -> RelatedResult:
    """Find records linked to one record, up to N hops away, nearest and strongest first."""
    return await app_of(ctx).relations.related(
        await project_of(ctx, project), id, hops=hops, types=types, direction=direction, limit=limit
    )


async def memory_context(
    ctx: Ctx,
    query: Annotated[str | None, Field(max_length=2_000, description="What the session is about (focuses it).")] = None,
    task_type: TaskType = None,
    budget: Annotated[
        int | None, Field(ge=100, le=100_000, description="Token budget (default: the server's --context-budget).")
    ] = None,
    project: Project = None,
) -> ContextResult:
    """Compile the start-of-session context: pinned slots, profile, lessons, mistakes, sessions, memories, in budget."""
    name, default = await project_of(ctx, project), await project_of(ctx, None)
    return await app_of(ctx).context.compile(
        name, query=query, task_type=task_type, budget=budget, default_project=default
    )


def knowledge_tools() -> list[Tool]:
    """The relation and context tools."""
    return [
        # destructive: relating a pair again overwrites the edge's weight and note
        make_tool(memory_relate, title="Relate two records", read_only=False, destructive=True, idempotent=True),
        make_tool(memory_related, title="Records related to one", read_only=True),
        make_tool(memory_context, title="Compile session context", read_only=True),
    ]
