"""Learning tools: lessons, outcomes, insights and the project profile."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.tools import Tool
from pydantic import BaseModel, ConfigDict, Field

from mcp_memory.config import Settings
from mcp_memory.models.learning import (
    InsightsResult,
    LessonKind,
    LessonList,
    LessonRecallResult,
    LessonSaveResult,
    OutcomeResult,
    ProfileResult,
)
from mcp_memory.services.common import TAG_CHARS
from mcp_memory.services.mistake_cards import MistakeCardInput
from mcp_memory.tools._common import AgentId, Ctx, Limit, Offset, Project, app_of, make_tool
from mcp_memory.tools.caller import agent_of, project_of, restricted_to

TaskType = Annotated[
    str | None,
    Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Kind of task, lower_snake_case (bugfix, refactor, …)."),
]
Tags = Annotated[list[Annotated[str, Field(max_length=TAG_CHARS)]] | None, Field(max_length=20, description="Tags.")]
Items = Annotated[list[Annotated[str, Field(max_length=2_000)]] | None, Field(max_length=50)]
# Tools are built once per process, before any server's settings: their schemas can name only the defaults.
_FADE_AT = Settings.model_fields["lesson_fade_at"].default
_CONFIDENCE = Settings.model_fields["lesson_confidence"].default
Scope = Annotated[Literal["project", "global"], Field(description="project: this project only; global: every project.")]


class MistakeCardArg(BaseModel):
    """A mistake worth remembering: what was decided, what should have been, and why."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key is refused, as unknown arguments are

    type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Kind of mistake, lower_snake_case.")]
    correct_decision: Annotated[str, Field(min_length=1, max_length=1_000, description="What to do instead.")]
    task: Annotated[
        str | None, Field(max_length=1_000, description="Where it happened; default the outcome's task.")
    ] = None
    wrong_decision: Annotated[str | None, Field(max_length=1_000, description="What was done.")] = None
    why: Annotated[str | None, Field(max_length=1_000, description="Why it was wrong.")] = None


async def memory_lesson_save(
    ctx: Ctx,
    content: Annotated[str, Field(min_length=1, max_length=4_000, description="The lesson, as advice to yourself.")],
    context: Annotated[
        str | None, Field(max_length=4_000, description="When it applies, or how it was learned.")
    ] = None,
    tags: Tags = None,
    task_type: TaskType = None,
    confidence: Annotated[
        float | None,
        Field(
            allow_inf_nan=False,
            gt=0,
            le=1,
            description="Initial confidence of a new lesson, up to 1 and above the server's --lesson-fade-at "
            f"({_FADE_AT} unless set; a lesson at or below it is faded); default the server's "
            f"--lesson-confidence ({_CONFIDENCE} unless set).",
        ),
    ] = None,
    scope: Scope = "project",
    agent_id: AgentId = None,
    project: Project = None,
) -> LessonSaveResult:
    """Save a lesson; saving the same lesson again reinforces it (and restores it if it had faded)."""
    return await app_of(ctx).lessons.save(
        await project_of(ctx, project), content, context=context, tags=tags, task_type=task_type, confidence=confidence,
        scope=scope, agent_id=agent_of(ctx, agent_id), restricted=await restricted_to(ctx),
    )  # fmt: skip


async def memory_lesson_recall(
    ctx: Ctx,
    query: Annotated[
        str | None, Field(max_length=2_000, description="What you are about to do; omit to rank by confidence.")
    ] = None,
    task_type: TaskType = None,
    kinds: Annotated[list[LessonKind] | None, Field(max_length=5, description="Only these kinds.")] = None,
    include_global: Annotated[bool, Field(description="Add global lessons after the project's.")] = True,
    limit: Limit = 10,
    project: Project = None,
) -> LessonRecallResult:
    """Recall lessons, heuristics, anti-patterns and rules by relevance × confidence (project's first)."""
    return await app_of(ctx).lessons.recall(
        await project_of(ctx, project),
        query,
        task_type=task_type,
        kinds=kinds,
        limit=limit,
        include_global=include_global,
    )


async def memory_lessons(
    ctx: Ctx,
    kinds: Annotated[list[LessonKind] | None, Field(max_length=5, description="Only these kinds.")] = None,
    task_type: TaskType = None,
    status: Annotated[Literal["active", "faded", "all"], Field(description="faded: soft-deleted lessons.")] = "active",
    scope: Annotated[Literal["project", "global", "all"], Field(description="Whose lessons to list.")] = "all",
    limit: Limit = 20,
    offset: Offset = 0,
    project: Project = None,
) -> LessonList:
    """List lessons by current confidence, highest first; faded (soft-deleted) ones on request."""
    return await app_of(ctx).lessons.lessons(
        await project_of(ctx, project), kinds=kinds, task_type=task_type, status=status, scope=scope, limit=limit,
        offset=offset,
    )  # fmt: skip


async def memory_outcome_record(
    ctx: Ctx,
    task: Annotated[str, Field(min_length=1, max_length=2_000, description="What was attempted.")],
    success: Annotated[bool | None, Field(description="Did it work? Give this and/or score.")] = None,
    score: Annotated[float | None, Field(allow_inf_nan=False, ge=0, le=1, description="How well it went, 0-1.")] = None,
    task_type: TaskType = None,
    strategy: Annotated[str | None, Field(max_length=2_000, description="The approach taken.")] = None,
    steps: Annotated[Items, Field(description="The steps taken, in order.")] = None,
    error: Annotated[str | None, Field(max_length=4_000, description="The error, if it failed.")] = None,
    feedback: Annotated[str | None, Field(max_length=4_000, description="What the user or a reviewer said.")] = None,
    mistakes: Annotated[Items, Field(description="What went wrong (become avoid rules when score < 0.5).")] = None,
    successes: Annotated[
        Items, Field(description="What went right (become works rules when it succeeded with score >= 0.85).")
    ] = None,
    mistake_cards: Annotated[
        list[MistakeCardArg] | None, Field(max_length=20, description="Structured mistakes, merged with earlier ones.")
    ] = None,
    duration_s: Annotated[
        float | None, Field(allow_inf_nan=False, ge=0, le=31_536_000, description="How long it took, in seconds.")
    ] = None,
    session_id: Annotated[str | None, Field(max_length=128, description="Session it happened in.")] = None,
    agent_id: AgentId = None,
    project: Project = None,
) -> OutcomeResult:
    """Record how a task went; heuristics, anti-patterns, rules and mistake cards are derived from it."""
    cards = [MistakeCardInput(**card.model_dump()) for card in mistake_cards or []]
    return await app_of(ctx).outcomes.record(
        await project_of(ctx, project), task, task_type=task_type, success=success, score=score, steps=steps or [],
        strategy=strategy, duration_s=duration_s, error=error, feedback=feedback, mistakes=mistakes or [],
        successes=successes or [], mistake_cards=cards, session_id=session_id, agent_id=agent_of(ctx, agent_id),
    )  # fmt: skip


async def memory_insights(
    ctx: Ctx, task_type: TaskType = None, limit: Limit = 10, project: Project = None
) -> InsightsResult:
    """Show score history, heuristics, anti-patterns, rules and top mistake cards (for one task type or all)."""
    return await app_of(ctx).insights.insights(await project_of(ctx, project), task_type, limit)


async def memory_profile(ctx: Ctx, project: Project = None) -> ProfileResult:
    """Show what a project is about: top concepts and files, preferences, activity, scores by task type."""
    return await app_of(ctx).insights.profile(await project_of(ctx, project))


def learning_tools() -> list[Tool]:
    """The learning tools."""
    return [
        # destructive: saved again for another task type, a lesson loses its type (it becomes untyped)
        make_tool(memory_lesson_save, title="Save or reinforce a lesson", read_only=False, destructive=True),
        make_tool(memory_lesson_recall, title="Recall lessons", read_only=True),
        make_tool(memory_lessons, title="List lessons", read_only=True),
        # destructive: past --max-mistake-cards the least seen cards are deleted, and past
        # --max-rules-per-task-type the weakest rules are soft-deleted
        make_tool(memory_outcome_record, title="Record a task outcome", read_only=False, destructive=True),
        make_tool(memory_insights, title="Insights for a task type", read_only=True),
        make_tool(memory_profile, title="Project profile", read_only=True),
    ]
