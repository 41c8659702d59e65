"""Stored records as the services and tools see them (JSON columns already decoded)."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from mcp_memory.ids import public_id

PublicId = Annotated[str, PlainSerializer(public_id, when_used="json")]
"""A record id as callers see it (a scoped session id shows as the caller's own name)."""


class Record(BaseModel):
    """Base of every stored record: immutable once read."""

    model_config = ConfigDict(frozen=True)


class Session(Record):
    """One working session of an agent in a project."""

    id: PublicId
    project: str
    agent_id: str | None = None
    title: str | None = None
    started_at: str
    last_activity_at: str
    ended_at: str | None = None
    summary: str | None = Field(None, description="Crystallized summary of the session, when made.")
    summary_source: str | None = None
    summarized_at: str | None = None
    folded_digest: str | None = Field(
        None, description="Titles of older low-value observations folded away to respect the per-session cap."
    )
    observation_count: int = Field(0, description="Observations ever recorded, including folded ones.")
    folded_count: int = 0
    created_at: str
    updated_at: str


class Observation(Record):
    """Something that happened during a session, with its extracted compressed form."""

    id: str
    project: str
    session_id: PublicId
    agent_id: str | None = None
    seq: int
    type: str
    title: str
    content: str
    facts: list[str] = Field(default_factory=list)
    concepts: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    importance: float = 0.5
    ref: str | None = None
    occurred_at: str | None = None
    created_at: str


class Memory(Record):
    """A long-lived fact, decision or preference; one version of a chain."""

    id: str
    project: str
    agent_id: str | None = None
    session_id: PublicId | None = None
    kind: str
    title: str | None = None
    content: str
    concepts: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    importance: float = 0.5
    ref: str | None = None
    occurred_at: str | None = None
    root_id: str
    parent_id: str | None = None
    version: int = 1
    is_latest: bool = True
    superseded_by: str | None = None
    similarity: float | None = None
    created_at: str
    updated_at: str

    @property
    def text(self) -> str:
        """Everything searchable about the memory, as one text (what the index and similarity analyse)."""
        return searchable_text(self.title, self.content, self.concepts, self.files)

    def digest(self) -> MemoryDigest:
        """The memory as near-duplicate passes compare it."""
        return MemoryDigest(self.id, self.root_id, self.created_at, self.text)


def searchable_text(title: str | None, content: str, concepts: list[str], files: list[str]) -> str:
    """A memory's title, content, concepts and files as one text."""
    return "\n".join(part for part in (title, content, " ".join(concepts), " ".join(files)) if part)


class MemoryDigest(NamedTuple):
    """What a near-duplicate pass compares of a latest memory. A tuple of strings: the garbage
    collector soon stops tracking it, where 100,000 full records kept it busy for a quarter second
    at a time (and took two seconds to make)."""

    id: str
    root_id: str
    created_at: str
    text: str


class Lesson(Record):
    """Something learned, with a confidence that grows on reinforcement and decays with time."""

    id: str
    project: str
    agent_id: str | None = None
    kind: str = "lesson"
    content: str
    context: str | None = None
    tags: list[str] = Field(default_factory=list)
    task_type: str | None = None
    confidence: float
    reinforcements: int = 0
    fingerprint: str
    last_reinforced_at: str
    decayed_at: str | None = None
    deleted_at: str | None = None
    source: dict[str, Any] = Field(default_factory=dict, description="What the lesson was derived from.")
    created_at: str
    updated_at: str


class Outcome(Record):
    """One attempt at a task and how it went."""

    id: str
    project: str
    agent_id: str | None = None
    session_id: PublicId | None = None
    task: str
    task_type: str
    task_type_inferred: bool = False
    success: bool | None = None
    score: float | None = None
    steps: list[str] = Field(default_factory=list)
    strategy: str | None = None
    duration_s: float | None = None
    error: str | None = None
    feedback: str | None = None
    mistakes: list[str] = Field(default_factory=list)
    successes: list[str] = Field(default_factory=list)
    created_at: str


class MistakeCard(Record):
    """A recurring mistake: what was decided, what should have been, why; merged with a seen count."""

    id: str
    project: str
    merge_key: str
    task_type: str | None = None
    type: str
    task: str
    wrong_decision: str | None = None
    correct_decision: str
    why: str | None = None
    seen_count: int = 1
    first_seen_at: str
    last_seen_at: str
    created_at: str
    updated_at: str


class OutcomeMistakeCard(Record):
    """Link: an outcome that reported a mistake card."""

    outcome_id: str
    card_id: str


class Slot(Record):
    """A named block of text kept in front of the agent (pinned slots go into every context)."""

    id: str
    project: str
    name: str
    content: str = ""
    size_limit: int
    pinned: bool = False
    description: str | None = None
    created_at: str
    updated_at: str


class Action(Record):
    """A unit of work with status, priority, parent and dependencies."""

    id: str
    project: str
    agent_id: str | None = None
    title: str
    description: str | None = None
    status: str = "pending"
    priority: int = 0
    parent_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    due: str | None = None
    completed_at: str | None = None
    created_at: str
    updated_at: str


class ActionDependency(Record):
    """Link: `action_id` cannot start before `depends_on` is done."""

    action_id: str
    depends_on: str


class Relation(Record):
    """A typed, weighted edge between two records."""

    id: str
    project: str
    source_id: PublicId
    target_id: PublicId
    type: str
    weight: float = 1.0
    note: str | None = None
    created_at: str
    updated_at: str


class Reflection(Record):
    """What the last memory_reflect over a project found, kept on its profile."""

    project: str
    reflected_at: str
    insights: list[str] = Field(default_factory=list)


class FoldedObservation(Record):
    """An observation folded into its session's digest, by id only: its row is never stored again."""

    id: str
    project: str
    session_id: PublicId
    happened_at: str
    folded_at: str


class PrunedOutcome(Record):
    """What an outcome consolidation pruned showed (never its text): counted in score figures."""

    id: str
    project: str
    task_type: str
    success: bool | None = None
    score: float | None = None
    created_at: str
    pruned_at: str


class ForgottenRecord(Record):
    """A record memory_forget deleted, by id only, so no import brings it back unasked."""

    id: str
    project: str
    kind: str
    forgotten_at: str


class ForgottenFacts(Record):
    """The facts a project forgot, as fingerprints only, so consolidation never promotes them again."""

    project: str
    forgotten_at: str
    fingerprints: list[str] = Field(default_factory=list)
