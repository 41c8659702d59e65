"""Results of the organising tools: slots, actions, relations and the compiled context."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from mcp_memory.models.records import PublicId
from mcp_memory.models.results import REDACTED_DESC, Redacted, RelationView


class SlotView(BaseModel):
    """A slot in full."""

    id: str
    name: str
    scope: Literal["project", "global"]
    content: str
    size: int = Field(description="Characters used.")
    size_limit: int
    pinned: bool = Field(description="Pinned slots open every compiled context.")
    description: str | None
    updated_at: str


class SlotSummary(BaseModel):
    """A slot in a list: its first characters only."""

    name: str
    scope: Literal["project", "global"]
    pinned: bool
    size: int
    size_limit: int
    description: str | None
    preview: str


class SuggestedSlot(BaseModel):
    """A default slot name not created yet; appending to it (or replacing it) creates it."""

    name: str
    description: str
    pinned: bool


class SlotList(BaseModel):
    """The slots visible in a project (its own, then global ones) and unused default names."""

    project: str
    slots: list[SlotSummary]
    suggested: list[SuggestedSlot]


class SlotResult(BaseModel):
    """A slot after a change."""

    slot: SlotView
    created: bool = False
    redacted: Redacted = Field(default_factory=dict, description=REDACTED_DESC)


class SlotDeleted(BaseModel):
    """Which slot was deleted."""

    name: str
    scope: Literal["project", "global"]
    id: str
    relations_deleted: list[str] = Field(
        default_factory=list, description="Relations to or from the slot, deleted with it (their ids)."
    )


class ActionView(BaseModel):
    """An action with its dependencies and the progress of its children."""

    id: str
    title: str
    description: str | None
    status: str
    priority: int
    parent_id: str | None
    depends_on: list[str]
    blocked_by: list[str] = Field(description="Dependencies that are not done yet.")
    children: int = Field(description="Direct children.")
    children_done: int = Field(description="Direct children done or cancelled.")
    tags: list[str]
    due: str | None
    completed_at: str | None
    created_at: str
    updated_at: str


class ActionResult(BaseModel):
    """An action after a change, plus other actions the change moved (a parent reopened, say)."""

    action: ActionView
    also_changed: list[str] = Field(default_factory=list)
    redacted: Redacted = Field(default_factory=dict, description=REDACTED_DESC)


class ActionList(BaseModel):
    """A page of actions."""

    project: str
    total: int
    actions: list[ActionView]
    next_offset: int | None = None


class RelateResult(BaseModel):
    """The edge stored (or updated) by memory_relate."""

    relation: RelationView
    created: bool
    redacted: Redacted = Field(default_factory=dict, description=REDACTED_DESC)


class RelatedNode(BaseModel):
    """A record reached from the start, with how far away it is."""

    id: PublicId
    kind: str
    title: str
    hops: int
    via: str = Field(description="Relation type of the last edge on the way here.")
    weight: float = Field(description="Product of the edge weights along the path.")


class RelatedResult(BaseModel):
    """Records reachable from a start record within some hops, nearest and strongest first."""

    start: PublicId
    nodes: list[RelatedNode]
    edges: list[RelationView]


class ContextSection(BaseModel):
    """How much of one section made it into the context."""

    name: str
    included: int
    omitted: int
    tokens: int


class OmittedItem(BaseModel):
    """Something left out for lack of budget (the result's `fetch` returns it in full)."""

    section: str
    id: PublicId | None = Field(description="Record id; null for the profile.")
    title: str = Field(description="Its title, shortened.")


class ContextResult(BaseModel):
    """The compiled start-of-session context."""

    project: str
    text: str
    tokens: int = Field(description="Estimated tokens of text: ceil(characters / 4).")
    budget: int
    sections: list[ContextSection]
    omitted: list[OmittedItem] = Field(
        description="What was left out, most wanted first: at most 20, and past 5 one per 50 tokens of budget."
    )
    omitted_unlisted: int = Field(0, description="How many more were left out than listed (sections count all).")
    fetch: str | None = Field(
        description="The call(s) that return everything in omitted, in full; null when there is nothing to fetch."
    )
