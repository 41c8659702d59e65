"""Results of the knowledge-loop tools: crystallize, consolidate, reflect."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from mcp_memory.models.learning import LessonView
from mcp_memory.models.records import PublicId
from mcp_memory.models.results import RelationView

SummarySource = Literal["extractive", "sampling"]


class SessionSummaryView(BaseModel):
    """A session's crystallized summary."""

    session_id: PublicId
    title: str | None
    summary: str
    source: SummarySource = Field(description="sampling: written by the client's model; else rule-based.")
    changed: bool = Field(description="False when the session already had an up-to-date summary.")


class CrystallizeResult(BaseModel):
    """Summaries made (or found up to date)."""

    project: str
    sessions: list[SessionSummaryView] = Field(
        description="The summaries, oldest session first; of a pass over more sessions than it lists, the "
        "latest ones (every summary is stored: memory_sessions shows each)."
    )
    total: int = Field(0, description="Sessions this call summarised or found up to date.")


class Change(BaseModel):
    """One change a consolidation pass made (or, in a dry run, would make)."""

    kind: str = Field(description="Record kind: memory, lesson, session, observation, outcome, relation.")
    action: str = Field(
        description="relinked, merged, promoted, ended (a session idle past the limit), crystallized, decayed, faded, "
        "folded, pruned, dropped; "
        "deleted: a relation from a record folded or pruned, or one a merge made a duplicate or a self-link "
        "(detail: source -> target)."
    )
    id: PublicId | None = Field(
        description="The record changed; null for a record a dry run would create (its id is assigned when it is)."
    )
    detail: str = ""


class ConsolidateResult(BaseModel):
    """Every change of one maintenance pass, by kind and id."""

    project: str
    dry_run: bool
    changes: list[Change]
    counts: dict[str, int] = Field(description="Changes per action.")
    words_deleted: int = Field(
        default=0, description="Stored search words that no record of any project used any more, deleted."
    )


class ReflectResult(BaseModel):
    """What a reflection learned from a session or a time window."""

    project: str
    session_id: PublicId | None
    since: str | None
    until: str | None
    anti_patterns: list[LessonView] = Field(
        description="Learned or reinforced now from errors that recurred (evidence already counted is not repeated)."
    )
    heuristics: list[LessonView] = Field(
        description="Learned or reinforced now from step sequences that recurred in successes."
    )
    lessons: list[LessonView] = Field(description="Rules the client's model proposed (sampling only).")
    contradictions: list[RelationView] = Field(description="Pairs of memories newly flagged as contradicting.")
    insights: list[str] = Field(
        description="Plain-language findings on all the evidence reviewed, known lessons included; a time window's "
        "are kept on the project profile (a session's are not, so they never replace the project's)."
    )
    source: SummarySource
