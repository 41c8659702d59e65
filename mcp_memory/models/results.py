"""Structured tool results: what each tool returns to the agent (and its output schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_memory.models.records import (
    Action,
    Lesson,
    Memory,
    MistakeCard,
    Observation,
    Outcome,
    PublicId,
    Session,
    Slot,
)

Redacted = dict[str, int]
REDACTED_DESC = "How many secrets or private blocks were removed, by kind (never the text itself)."


class RelationView(BaseModel):
    """A typed, weighted edge."""

    id: str
    source_id: PublicId
    target_id: PublicId
    type: str
    weight: float
    note: str | None
    created_at: str


class ObserveResult(BaseModel):
    """What memory_observe stored."""

    id: str
    session_id: PublicId
    session_created: bool = Field(description="True when this observation started a new session.")
    session_ended: bool = Field(False, description="True when end_session closed the session.")
    title: str
    facts: list[str]
    concepts: list[str]
    files: list[str]
    importance: float
    folded: int = Field(0, description="Older low-value observations folded into the session digest.")
    redacted: Redacted = Field(default_factory=dict, description=REDACTED_DESC)


class ObservationView(BaseModel):
    """An observation in its compressed form (content only when asked for)."""

    id: str
    session_id: PublicId
    type: str
    title: str
    facts: list[str]
    concepts: list[str]
    files: list[str]
    importance: float
    ref: str | None
    occurred_at: str | None
    created_at: str
    content: str | None = None

    @classmethod
    def of(cls, obs: Observation, full: bool = False) -> ObservationView:
        return cls(
            **obs.model_dump(exclude={"content", "project", "agent_id", "seq"}),
            content=obs.content if full else None,
        )


class ObservationList(BaseModel):
    """A page of observations."""

    project: str
    total: int
    observations: list[ObservationView]
    next_offset: int | None = Field(None, description="Pass as offset to get the next page; null at the end.")


class SessionView(BaseModel):
    """A session with its status and counts."""

    id: PublicId
    title: str | None
    status: Literal["active", "idle", "ended"] = Field(
        description="active: open and recently used; idle: open but unused for session_idle_minutes; ended."
    )
    agent_id: str | None
    started_at: str = Field(description="When the server started the session (its first observation was recorded).")
    last_activity_at: str
    ended_at: str | None
    first_happened_at: str | None = Field(
        description="When its earliest kept observation happened (occurred_at, else when recorded): "
        "for imported history, when the conversation began."
    )
    last_happened_at: str | None = Field(description="When its latest kept observation happened.")
    observation_count: int = Field(description="Observations kept in the session.")
    recorded_count: int = Field(description="Observations ever recorded, including those folded away.")
    folded_count: int = Field(description="Observations folded into the session digest to respect the cap.")
    summary: str | None


class SessionList(BaseModel):
    """A page of sessions, most recently active first."""

    project: str
    total: int
    sessions: list[SessionView]
    next_offset: int | None = None


class TimelineEntry(BaseModel):
    """One observation on the timeline."""

    id: str
    session_id: PublicId
    type: str
    title: str
    when: str = Field(description="occurred_at when given, else created_at.")
    ref: str | None
    anchor: bool = False


class TimelineResult(BaseModel):
    """Observations in time order around an anchor."""

    project: str
    anchor_id: str | None
    entries: list[TimelineEntry]


class FixRef(BaseModel):
    """The fix recorded after an error in its session."""

    id: PublicId
    text: str


class Hit(BaseModel):
    """A compact search hit: enough to decide whether to fetch the full record."""

    id: PublicId
    kind: str
    score: float
    title: str
    snippet: str
    type: str | None = Field(None, description="Observation type, memory kind or lesson kind.")
    session_id: PublicId | None = None
    ref: str | None = None
    occurred_at: str | None = None
    created_at: str | None = None
    context: list[str] = Field(
        default_factory=list, description="Neighbouring turns of the same session, when asked for."
    )
    fixed_by: FixRef | None = Field(
        None, description="For an error: the fix recorded after it in its session (as its summary pairs them)."
    )


QUERY_DESC = "The query, with private parts and secrets shown as removed (they are not searched for)."


RESPELLED_DESC = "Which words of the query, held by no record, were searched respelled ('timeout' for 'tiemout')."
HINT_DESC = f"{RESPELLED_DESC} When a query found nothing: why, and what to try instead."


class RecallResult(BaseModel):
    """Ranked episodic hits for a query."""

    project: str
    query: str = Field(description=QUERY_DESC)
    hits: list[Hit]
    hint: str | None = Field(None, description=HINT_DESC)


class Resemblance(BaseModel):
    """A live memory a new one resembles without replacing it."""

    id: str
    title: str | None
    similarity: float = Field(description="Jaccard similarity of the two memories' words.")


class SaveResult(BaseModel):
    """What memory_save stored and which version it replaced."""

    id: str
    kind: str
    version: int
    root_id: str
    superseded_id: str | None = Field(None, description="The previous version this one replaced, if any.")
    similarity: float | None = Field(None, description="Jaccard similarity to the replaced version.")
    unchanged: bool = Field(False, description="True when an identical memory already existed (nothing written).")
    resembles: Resemblance | None = Field(
        None,
        description="A live memory this one resembles but did not replace (similarity 0.5-0.7). If both say "
        "the same thing, forget one; to replace a memory outright, name it in supersedes.",
    )
    redacted: Redacted = Field(default_factory=dict, description=REDACTED_DESC)


class MemoryVersion(BaseModel):
    """One version in a memory's chain."""

    id: str
    version: int
    kind: str
    title: str | None
    content: str
    similarity: float | None
    is_latest: bool
    ref: str | None
    occurred_at: str | None
    created_at: str


class MemoryDetail(BaseModel):
    """A memory with its whole version chain, oldest first."""

    memory: Memory
    latest_id: str
    versions: list[MemoryVersion]


class SmartSearchResult(BaseModel):
    """Compact hits for a query, and/or full records for the ids asked for."""

    project: str
    query: str | None = Field(description=QUERY_DESC)
    hits: list[Hit] = Field(default_factory=list)
    hint: str | None = Field(None, description=HINT_DESC)
    observations: list[Observation] = Field(default_factory=list)
    memories: list[Memory] = Field(default_factory=list)
    sessions: list[Session] = Field(default_factory=list)
    lessons: list[Lesson] = Field(default_factory=list)
    slots: list[Slot] = Field(default_factory=list)
    actions: list[Action] = Field(default_factory=list)
    outcomes: list[Outcome] = Field(default_factory=list)
    mistake_cards: list[MistakeCard] = Field(default_factory=list)
    relations: list[RelationView] = Field(
        default_factory=list, description="Edges asked for by id: their two ends, type, weight and note."
    )
    missing: list[str] = Field(default_factory=list, description="Requested ids that do not exist here.")


class ForgetResult(BaseModel):
    """What was (or, in a dry run, would be) deleted, by kind."""

    dry_run: bool
    deleted: dict[str, list[PublicId]] = Field(
        description="Ids by kind: every one, up to 1,000 of a kind (counts has how many there are)."
    )
    counts: dict[str, int] = Field(default_factory=dict, description="How many of each kind.")
    total: int
    insights_cleared: bool = Field(
        False, description="The profile's reflection insights were emptied: they may quote what went."
    )
    released: dict[str, list[PublicId]] = Field(
        default_factory=dict,
        description="Actions that stay but lose a link to a forgotten one: 'dependents' no longer wait for it "
        "(as if it were done), 'children' are top-level now.",
    )


class LatencyReport(BaseModel):
    """Timing of sample searches run against the live index."""

    queries: int
    p50_ms: float
    p95_ms: float
    max_ms: float


class EmbeddingReport(BaseModel):
    """Which embedding provider is active and how far its vectors have got."""

    provider: str = Field(
        description="Active provider and model (e.g. sentence-transformers:all-MiniLM-L6-v2), or none."
    )
    dimension: int | None = Field(None, description="Vector dimension, once known.")
    vectors: int = Field(description="Indexed records with a current vector.")
    lacking: int = Field(
        description="Indexed records without a current vector, found by BM25 alone until embedded "
        "(0 with provider none: nothing is ever embedded)."
    )
    queued: int = Field(description="Records waiting to be embedded by this process (0 for a restricted caller).")
    embedded: int = Field(description="Records embedded by this process since it started (0 for a restricted caller).")
    failures: int = Field(
        description="Failed embedding attempts since start-up, each retried (0 for a restricted caller)."
    )
    last_error: str | None = None
    stored_by_model: dict[str, int] = Field(
        default_factory=dict, description="Stored vectors per model (another model's are replaced as records re-embed)."
    )


class DiagnoseResult(BaseModel):
    """Health of the database and the index (a restricted caller's: its own project's figures only)."""

    version: str
    schema_version: int
    analyzer_version: int
    timezone: str = Field(description="The IANA time zone in which searches read dates (the database's own).")
    db_path: str | None = Field(description="The database file; null for a restricted caller (not theirs to see).")
    db_bytes: int | None = Field(description="Size of the database and its WAL; null for a restricted caller.")
    sqlite: dict[str, Any]
    integrity: list[str]
    integrity_ok: bool
    chains_out_of_line: int = Field(
        description="Memory version chains that are not one line (no latest version, or a version under a root "
        "that is no longer first); memory_consolidate relinks them."
    )
    counts: dict[str, int]
    index_docs: dict[str, int] = Field(description="Documents in the in-memory index, by kind.")
    stored_docs: dict[str, int] = Field(description="Documents in the stored index, by kind.")
    index_in_sync: bool
    index_terms: int
    index_postings: int
    index_source: str = Field(
        description="How the index was loaded at start-up: 'cache' (the index cache plus the writes made since it) "
        "or 'rebuild' (from every record's stored terms)."
    )
    index_cache_bytes: int = Field(description="Size of the index cache file (0: none, or not yours to see).")
    index_error: str | None = Field(
        None, description="Why the search index could not be built (a damaged file: see integrity), if it could not."
    )
    projects: list[str]
    latency: LatencyReport
    embeddings: EmbeddingReport


class ExportResult(BaseModel):
    """An export document (inline) or where it was written."""

    counts: dict[str, int]
    path: str | None = Field(None, description="The absolute path of the file written, when a path was given.")
    document: dict[str, Any] | None = Field(None, description="The export itself, when no path was given.")


class ImportResult(BaseModel):
    """What an import changed, by table."""

    inserted: dict[str, int]
    updated: dict[str, int]
    unchanged: dict[str, int]
    reindexed: int
    matched_by_name: dict[str, int] = Field(
        default_factory=dict,
        description="Rows, by table, taken as the stored record with the same name under another id (a slot "
        "name, a lesson's text, a mistake card, a relation's ends and type, made alike on two machines); newer "
        "replaced older as for any row, and rows naming them were pointed at the stored record.",
    )
    joined_chains: list[str] = Field(
        default_factory=list,
        description="Root ids of memory chains the import relinked as one line: grown apart (a new version "
        "saved on each of two machines) or mixed from copies joined differently. Every version is kept, in the "
        "order they were saved, the last one latest.",
    )
    forgotten: int = Field(
        0,
        description="Records not kept because a copy forgot them (this database, or the one the document "
        "came from; that copy's forgets are applied here too): by memory_forget or memory_slot_delete, or as "
        "outcomes consolidation pruned and mistake cards trimmed past their bound. restore_forgotten brings them back.",
    )
    restored: int = Field(0, description="Forgotten records brought back by restore_forgotten.")
    projects: list[str] = Field(
        default_factory=list,
        description="Projects the import added or changed records of (each record keeps the project it was "
        'exported from; "*" is global).',
    )
    folded: int = Field(
        0,
        description="Observation rows not kept because a copy had folded them into their session's digest "
        "(a line stands for each there; one is added where the kept session lacked it).",
    )
    reopened_actions: list[str] = Field(
        default_factory=list,
        description="Actions the import reopened: done or cancelled in one copy while the other added open "
        "work under them (a parent is closed only when none of its children is open), nearest first.",
    )
    redacted: Redacted = Field(default_factory=dict, description=REDACTED_DESC)
