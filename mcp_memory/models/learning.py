"""Results of the learning tools: lessons, outcomes, insights and the project profile."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_memory.models.results import REDACTED_DESC, RESPELLED_DESC, Redacted

LessonKind = Literal["lesson", "heuristic", "anti_pattern", "rule_works", "rule_avoid"]


class LessonView(BaseModel):
    """A lesson with its confidence as of now (decay applied)."""

    id: str
    kind: str = Field(description="lesson, heuristic, anti_pattern, rule_works or rule_avoid.")
    scope: Literal["project", "global"]
    content: str
    context: str | None
    tags: list[str]
    task_type: str | None
    confidence: float = Field(description="Current confidence, 0-1, after time decay.")
    reinforcements: int
    last_reinforced_at: str
    status: Literal["active", "faded"] = Field(description="faded: soft-deleted; saving it again restores it.")
    source: dict[str, Any] = Field(default_factory=dict, description="What a derived lesson was drawn from.")
    created_at: str
    score: float | None = Field(None, description="Relevance × confidence, in recall results.")


class LessonSaveResult(BaseModel):
    """What memory_lesson_save did."""

    lesson: LessonView
    created: bool = Field(description="True for a new lesson; false when an existing one was reinforced.")
    restored: bool = Field(False, description="True when a faded (soft-deleted) lesson came back.")
    previous_confidence: float | None = Field(None, description="Confidence before this reinforcement.")
    redacted: Redacted = Field(default_factory=dict, description=REDACTED_DESC)


class LessonList(BaseModel):
    """A page of lessons."""

    project: str
    total: int
    lessons: list[LessonView]
    next_offset: int | None = None


class LessonRecallResult(BaseModel):
    """Lessons relevant to a query: the project's first, then global ones."""

    project: str
    query: str | None
    lessons: list[LessonView]
    hint: str | None = Field(None, description=RESPELLED_DESC)


class DerivedLessons(BaseModel):
    """Ids of what an outcome created or updated and that holds.

    A heuristic or anti-pattern the outcome showed no longer holds is soft-deleted and not listed;
    it is listed among the faded lessons with the figures that retired it.
    """

    heuristics: list[str] = Field(default_factory=list)
    anti_patterns: list[str] = Field(default_factory=list)
    rules: list[str] = Field(default_factory=list)
    mistake_cards: list[str] = Field(default_factory=list)


class OutcomeResult(BaseModel):
    """What memory_outcome_record stored and derived."""

    id: str
    task_type: str
    task_type_inferred: bool
    success: bool
    score: float
    derived: DerivedLessons
    redacted: Redacted = Field(default_factory=dict, description=REDACTED_DESC)


class ScorePoint(BaseModel):
    """One outcome on a task type's score history."""

    outcome_id: str
    at: str
    score: float
    success: bool


class TaskTypeStats(BaseModel):
    """How a task type has gone so far."""

    task_type: str
    outcomes: int
    successes: int
    success_rate: float
    mean_score: float
    history: list[ScorePoint] = Field(description="Most recent outcomes, oldest first.")


class MistakeCardView(BaseModel):
    """A recurring mistake and what to do instead."""

    id: str
    type: str
    task: str
    task_type: str | None = Field(description="The task type it was first seen in (it may recur in others).")
    wrong_decision: str | None
    correct_decision: str
    why: str | None
    seen_count: int
    last_seen_at: str


class InsightsResult(BaseModel):
    """Score history, heuristics, anti-patterns, rules and mistake cards (for one task type or all)."""

    project: str
    task_type: str | None
    task_types: list[TaskTypeStats]
    heuristics: list[LessonView]
    anti_patterns: list[LessonView]
    works: list[LessonView]
    avoid: list[LessonView]
    mistake_cards: list[MistakeCardView]


class CountedName(BaseModel):
    """A concept or file with how often it appears."""

    name: str
    count: int


class ProfileResult(BaseModel):
    """What a project is about: its concepts, files, preferences, activity and scores."""

    project: str
    sessions: int
    observations: int
    memories: int
    lessons: int
    top_concepts: list[CountedName]
    top_files: list[CountedName]
    preferences: list[str] = Field(description="Latest memories of kind preference.")
    task_types: list[TaskTypeStats]
    reflected_at: str | None = Field(None, description="When memory_reflect last updated this profile.")
    insights: list[str] = Field(default_factory=list, description="What the last reflection found.")
