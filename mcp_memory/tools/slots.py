"""Slot tools: list, get, create, append, replace, delete."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from mcp_memory.models.organising import SlotDeleted, SlotList, SlotResult, SlotView
from mcp_memory.services.slots import SLOT_LIMIT_MAX
from mcp_memory.tools._common import Ctx, Project, app_of, make_tool
from mcp_memory.tools.caller import project_of, restricted_to

Name = Annotated[
    str,
    Field(
        pattern=r"^[a-z][a-z0-9_]{0,63}$",
        description="Slot name, lower_snake_case (defaults: persona, user_preferences, project_context, "
        "pending_items, self_notes).",
    ),
]
Scope = Annotated[
    Literal["project", "global"] | None,
    Field(description="project or global; omit to use the project's slot, else the global one."),
]
DeleteScope = Annotated[
    Literal["project", "global"],
    Field(description="Which slot to delete: the project's, or the global one (never one in place of the other)."),
]
Text = Annotated[str, Field(max_length=100_000)]


async def memory_slot_list(ctx: Ctx, project: Project = None) -> SlotList:
    """List the slots visible here (project's, then global) and default names not created yet."""
    return await app_of(ctx).slots.overview(await project_of(ctx, project))


async def memory_slot_get(ctx: Ctx, name: Name, scope: Scope = None, project: Project = None) -> SlotView:
    """Read one slot in full."""
    return await app_of(ctx).slots.get(await project_of(ctx, project), name, scope)


async def memory_slot_create(
    ctx: Ctx,
    name: Name,
    content: Annotated[str, Field(max_length=100_000, description="Initial content (must fit the limit).")] = "",
    size_limit: Annotated[int | None, Field(ge=1, le=SLOT_LIMIT_MAX, description="Maximum characters.")] = None,
    pinned: Annotated[bool | None, Field(description="Include in every compiled context.")] = None,
    description: Annotated[str | None, Field(max_length=500, description="What the slot is for.")] = None,
    scope: Annotated[Literal["project", "global"], Field(description="Where the slot lives.")] = "project",
    project: Project = None,
) -> SlotResult:
    """Create a named slot with a size limit; pinned slots open every context."""
    return await app_of(ctx).slots.create(
        await project_of(ctx, project), name, content=content, size_limit=size_limit, pinned=pinned,
        description=description, scope=scope, restricted=await restricted_to(ctx),
    )  # fmt: skip


async def memory_slot_append(
    ctx: Ctx,
    name: Name,
    text: Annotated[str, Field(min_length=1, max_length=100_000, description="Text to add at the end.")],
    separator: Annotated[str, Field(max_length=10, description="Put between the old content and the new text.")] = "\n",
    scope: Scope = None,
    project: Project = None,
) -> SlotResult:
    """Append to a slot; refused (nothing changed) if it would pass the size limit."""
    return await app_of(ctx).slots.append(
        await project_of(ctx, project), name, text, separator=separator, scope=scope,
        restricted=await restricted_to(ctx),
    )  # fmt: skip


async def memory_slot_replace(
    ctx: Ctx,
    name: Name,
    content: Annotated[
        str | None, Field(max_length=100_000, description="New content (or the text that replaces old).")
    ] = None,
    old: Annotated[
        str | None,
        Field(min_length=1, max_length=100_000, description="Replace only this passage (it must occur once)."),
    ] = None,
    size_limit: Annotated[int | None, Field(ge=1, le=SLOT_LIMIT_MAX, description="New size limit.")] = None,
    pinned: Annotated[bool | None, Field(description="Pin or unpin.")] = None,
    description: Annotated[str | None, Field(max_length=500, description="New description.")] = None,
    scope: Scope = None,
    project: Project = None,
) -> SlotResult:
    """Rewrite a slot's content (or one passage of it) and/or its limit, pin, description; creates a default name."""
    return await app_of(ctx).slots.replace(
        await project_of(ctx, project), name, content=content, old=old, size_limit=size_limit, pinned=pinned,
        description=description, scope=scope, restricted=await restricted_to(ctx),
    )  # fmt: skip


async def memory_slot_delete(
    ctx: Ctx, name: Name, scope: DeleteScope = "project", project: Project = None
) -> SlotDeleted:
    """Delete a slot, its content, and every relation to or from it; a global slot only with scope="global"."""
    return await app_of(ctx).slots.delete(
        await project_of(ctx, project), name, scope, restricted=await restricted_to(ctx)
    )


def slots_tools() -> list[Tool]:
    """The slot tools.

    MCP hints: destructive = may overwrite or remove what is there (not only add); idempotent = a
    repeat of the same call changes nothing more. Creating refuses an existing name and deleting
    finds nothing the second time, so both are idempotent; replacing a passage is not ("a" → "aa"
    grows on every call), and replacing overwrites content.
    """
    return [
        make_tool(memory_slot_list, title="List slots", read_only=True),
        make_tool(memory_slot_get, title="Read a slot", read_only=True),
        make_tool(memory_slot_create, title="Create a slot", read_only=False, idempotent=True),
        make_tool(memory_slot_append, title="Append to a slot", read_only=False),
        make_tool(memory_slot_replace, title="Rewrite a slot", read_only=False, destructive=True),
        make_tool(memory_slot_delete, title="Delete a slot", read_only=False, destructive=True, idempotent=True),
    ]
