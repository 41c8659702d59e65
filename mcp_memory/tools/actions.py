"""Action tools: create, update, list, frontier."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from mcp_memory.models.organising import ActionList, ActionResult
from mcp_memory.services.common import TAG_CHARS
from mcp_memory.tools._common import Ctx, Limit, Offset, Project, When, app_of, make_tool
from mcp_memory.tools.caller import project_of

Status = Literal["pending", "active", "blocked", "done", "cancelled"]
ActionId = Annotated[str, Field(min_length=1, max_length=128, description="Action id (act_…).")]
ActionIds = Annotated[list[Annotated[str, Field(max_length=128)]] | None, Field(max_length=50)]
Tags = Annotated[
    list[Annotated[str, Field(max_length=TAG_CHARS)]] | None,
    Field(max_length=20, description="Tags; one per spelling ignoring case."),
]
Priority = Annotated[int | None, Field(ge=-100, le=100, description="Higher is more urgent (default 0).")]
Tag = Annotated[
    str | None, Field(max_length=TAG_CHARS, description="Only actions with this tag (ignoring case and Unicode form).")
]


async def memory_action_create(
    ctx: Ctx,
    title: Annotated[str, Field(min_length=1, max_length=300, description="What needs doing.")],
    description: Annotated[str | None, Field(max_length=10_000, description="Details.")] = None,
    priority: Priority = None,
    parent_id: Annotated[str | None, Field(max_length=128, description="Parent action this is part of.")] = None,
    depends_on: Annotated[ActionIds, Field(description="Actions that must be done first.")] = None,
    tags: Tags = None,
    due: When = None,
    status: Annotated[Literal["pending", "active", "blocked"], Field(description="Starting status.")] = "pending",
    project: Project = None,
) -> ActionResult:
    """Create an action, optionally under a parent and after other actions."""
    return await app_of(ctx).actions.create(
        await project_of(ctx, project), title, description=description, status=status, priority=priority or 0,
        parent_id=parent_id, depends_on=depends_on or [], tags=tags or [], due=due,
    )  # fmt: skip


async def memory_action_update(
    ctx: Ctx,
    id: ActionId,
    status: Annotated[Status | None, Field(description="New status (transitions are checked).")] = None,
    title: Annotated[str | None, Field(min_length=1, max_length=300, description="New title.")] = None,
    description: Annotated[str | None, Field(max_length=10_000, description="New description.")] = None,
    priority: Priority = None,
    parent_id: Annotated[str | None, Field(max_length=128, description="New parent.")] = None,
    clear_parent: Annotated[bool, Field(description="Detach from its parent (not with parent_id).")] = False,
    add_depends_on: Annotated[ActionIds, Field(description="Dependencies to add (cycles are refused).")] = None,
    remove_depends_on: Annotated[ActionIds, Field(description="Dependencies to remove.")] = None,
    tags: Tags = None,
    due: When = None,
    clear_due: Annotated[bool, Field(description="Remove the due date (not with due).")] = False,
    project: Project = None,
) -> ActionResult:
    """Change an action's status, fields, parent or dependencies; rules are checked before any write."""
    return await app_of(ctx).actions.update(
        await project_of(ctx, project), id, title=title, description=description, status=status, priority=priority,
        parent_id=parent_id, clear_parent=clear_parent, add_depends_on=add_depends_on or [],
        remove_depends_on=remove_depends_on or [], tags=tags, due=due, clear_due=clear_due,
    )  # fmt: skip


async def memory_action_list(
    ctx: Ctx,
    status: Annotated[list[Status] | None, Field(max_length=5, description="Statuses; default the open ones.")] = None,
    tag: Tag = None,
    parent_id: Annotated[str | None, Field(max_length=128, description="Only children of this action.")] = None,
    limit: Limit = 20,
    offset: Offset = 0,
    project: Project = None,
) -> ActionList:
    """List actions by status, highest priority then oldest first, with dependencies and child progress."""
    return await app_of(ctx).actions.page(
        await project_of(ctx, project), statuses=status, tag=tag, parent_id=parent_id, limit=limit, offset=offset
    )


async def memory_frontier(
    ctx: Ctx, tag: Tag = None, limit: Limit = 10, offset: Offset = 0, project: Project = None
) -> ActionList:
    """What can be worked on now: open actions whose dependencies are all done, by priority then age."""
    return await app_of(ctx).actions.frontier(await project_of(ctx, project), tag=tag, limit=limit, offset=offset)


def actions_tools() -> list[Tool]:
    """The action tools."""
    return [
        # destructive: a child made under a done parent reopens it (its status and completion are overwritten)
        make_tool(memory_action_create, title="Create an action", read_only=False, destructive=True),
        make_tool(memory_action_update, title="Update an action", read_only=False, destructive=True),
        make_tool(memory_action_list, title="List actions", read_only=True),
        make_tool(memory_frontier, title="What to do next", read_only=True),
    ]
