"""What the tools accept, row by row: the model each table's imported rows are validated by.

The limits below are those of the tools' arguments (mcp_memory/tools); fields that derivations
also write (lessons, session titles and digests) get the largest limit any tool argument has.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Self

from pydantic import AfterValidator, BaseModel, Field, model_validator
from pydantic_core import PydanticCustomError

from mcp_memory.errors import InvalidInputError
from mcp_memory.ids import PREFIXES, SCOPE_MARK, kind_of, scoped_session_id
from mcp_memory.models import records as r
from mcp_memory.models.loop import SummarySource
from mcp_memory.privacy import without_markers
from mcp_memory.repositories.archive_tables import TABLES_BY_NAME
from mcp_memory.services.actions import STATUSES
from mcp_memory.services.common import TAG_CHARS, check_session_id
from mcp_memory.services.compress import CONCEPT_CHARS, FILE_CHARS
from mcp_memory.services.episodic_docs import DIGEST_LINE_CHARS
from mcp_memory.services.lessons import LESSON_KINDS
from mcp_memory.services.slots import SLOT_LIMIT_MAX
from mcp_memory.services.summaries import SUMMARY_CHARS

_ID_CHARS = 128
_SCOPE = re.compile(r"[0-9a-z]{12}")
_LONGEST = 100_000  # the longest text any tool takes (an observation, a slot)


def _at_most(limit: int) -> AfterValidator:
    """A text of at most `limit` characters, not counting the markers that stand for redacted parts."""

    def check(value: str | None) -> str | None:
        if value is not None and len(value) > limit and len(without_markers(value)) > limit:
            raise PydanticCustomError("too_long", "must be at most {limit} characters", {"limit": limit})
        return value

    return AfterValidator(check)


def _one_of(allowed: Sequence[str]) -> AfterValidator:
    """A text that is one of `allowed`: a value the tools know (an action status, a lesson kind)."""

    def check(value: str) -> str:
        if value not in allowed:
            raise PydanticCustomError("one_of", "must be one of {allowed}", {"allowed": ", ".join(allowed)})
        return value

    return AfterValidator(check)


Agent = Annotated[str | None, Field(max_length=128)]
Snake = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]  # every type, kind and task type
Unit = Annotated[float, Field(ge=0, le=1)]
# Counts stay where SQLite's integers (and a JSON reader's exact doubles) hold them, with room to count on.
Count = Annotated[int, Field(ge=0, le=2**53)]
Ordinal = Annotated[int, Field(ge=1, le=2**53)]
Title = Annotated[str | None, _at_most(300)]
Ref = Annotated[str | None, _at_most(500)]
Concepts = Annotated[list[Annotated[str, _at_most(CONCEPT_CHARS)]], Field(max_length=50)]
Files = Annotated[list[Annotated[str, _at_most(FILE_CHARS)]], Field(max_length=200)]
Items = Annotated[list[Annotated[str, _at_most(2_000)]], Field(max_length=50)]


class _Session(r.Session):
    agent_id: Agent = None
    title: Title = None
    summary: Annotated[str | None, _at_most(SUMMARY_CHARS)] = None
    summary_source: SummarySource | None = None
    folded_digest: str | None = None
    observation_count: Count = 0
    folded_count: Count = 0

    @model_validator(mode="after")
    def _digest_of_its_folds(self) -> Self:
        # a line per folded observation, each under DIGEST_LINE_CHARS, however many the session folded
        longest = max(_LONGEST, DIGEST_LINE_CHARS * (self.folded_count + 1))
        if self.folded_digest is not None and len(self.folded_digest) > longest:
            raise InvalidInputError(
                "folded_digest", f"must be at most {longest} characters for {self.folded_count} folded observations"
            )
        return self


class _Observation(r.Observation):
    agent_id: Agent = None
    seq: Ordinal
    type: Snake
    title: Annotated[str, _at_most(300)]
    content: Annotated[str, Field(min_length=1), _at_most(100_000)]
    facts: Items = Field(default_factory=list)
    concepts: Concepts = Field(default_factory=list)
    files: Files = Field(default_factory=list)
    importance: Unit = 0.5
    ref: Ref = None


class _Memory(r.Memory):
    agent_id: Agent = None
    kind: Snake
    title: Title = None
    content: Annotated[str, Field(min_length=1), _at_most(20_000)]
    concepts: Concepts = Field(default_factory=list)
    files: Files = Field(default_factory=list)
    importance: Unit = 0.5
    ref: Ref = None
    version: Ordinal = 1
    similarity: Unit | None = None

    @model_validator(mode="after")
    def _not_its_own_version(self) -> Self:
        for column in ("parent_id", "superseded_by"):
            if getattr(self, column) == self.id:
                raise InvalidInputError(column, "must name another version, not the memory itself")
        return self


class _Lesson(r.Lesson):
    agent_id: Agent = None
    kind: Annotated[str, _one_of(LESSON_KINDS)] = "lesson"
    content: Annotated[str, Field(min_length=1), _at_most(_LONGEST)]
    context: Annotated[str | None, _at_most(_LONGEST)] = None
    tags: list[Annotated[str, _at_most(TAG_CHARS)]] = Field(default_factory=list)  # reinforcing adds tags: no count
    task_type: Snake | None = None
    confidence: Unit
    reinforcements: Count = 0


class _Outcome(r.Outcome):
    agent_id: Agent = None
    task: Annotated[str, Field(min_length=1), _at_most(2_000)]
    task_type: Snake
    score: Unit | None = None
    steps: Items = Field(default_factory=list)
    strategy: Annotated[str | None, _at_most(2_000)] = None
    duration_s: Annotated[float | None, Field(ge=0, le=31_536_000)] = None
    error: Annotated[str | None, _at_most(4_000)] = None
    feedback: Annotated[str | None, _at_most(4_000)] = None
    mistakes: Items = Field(default_factory=list)
    successes: Items = Field(default_factory=list)


class _PrunedOutcome(r.PrunedOutcome):
    task_type: Snake
    score: Unit | None = None


class _MistakeCard(r.MistakeCard):
    task_type: Snake | None = None
    type: Snake
    task: Annotated[str, Field(min_length=1), _at_most(2_000)]  # the outcome's task when the card names none
    wrong_decision: Annotated[str | None, _at_most(1_000)] = None
    correct_decision: Annotated[str, Field(min_length=1), _at_most(1_000)]
    why: Annotated[str | None, _at_most(1_000)] = None
    seen_count: Ordinal = 1


class _Slot(r.Slot):
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
    size_limit: Annotated[int, Field(ge=1, le=SLOT_LIMIT_MAX)]
    description: Annotated[str | None, _at_most(500)] = None

    @model_validator(mode="after")
    def _fits(self) -> Self:
        if len(self.content) > self.size_limit:
            raise InvalidInputError(
                "content", f"{len(self.content)} characters, over the slot's size_limit of {self.size_limit}"
            )
        return self


class _Action(r.Action):
    agent_id: Agent = None
    title: Annotated[str, Field(min_length=1), _at_most(300)]
    description: Annotated[str | None, _at_most(10_000)] = None
    status: Annotated[str, _one_of(STATUSES)] = "pending"
    priority: Annotated[int, Field(ge=-100, le=100)] = 0
    tags: Annotated[list[Annotated[str, _at_most(TAG_CHARS)]], Field(max_length=20)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_its_own_parent(self) -> Self:
        if self.parent_id == self.id:
            raise InvalidInputError("parent_id", "must name another action, not the action itself")
        # the tools stamp the completion time when an action becomes done and clear it on any other status
        if (self.status == "done") != (self.completed_at is not None):
            said = (
                "is required when status is done"
                if self.status == "done"
                else f"must be null when status is {self.status}"
            )
            raise InvalidInputError("completed_at", said)
        return self


class _ActionDependency(r.ActionDependency):
    @model_validator(mode="after")
    def _not_on_itself(self) -> Self:
        if self.depends_on == self.action_id:
            raise InvalidInputError("depends_on", "must differ from action_id: an action cannot wait for itself")
        return self


class _Relation(r.Relation):
    type: Snake
    weight: Unit = 1.0
    note: Annotated[str | None, _at_most(1_000)] = None

    @model_validator(mode="after")
    def _between_two(self) -> Self:
        if self.target_id == self.source_id:
            raise InvalidInputError("target_id", "must differ from source_id")
        return self


class _Reflection(r.Reflection):
    insights: list[Annotated[str, _at_most(_LONGEST)]] = Field(default_factory=list)


class _Forgotten(r.ForgottenRecord):
    kind: Annotated[str, _one_of(sorted(PREFIXES))]

    @model_validator(mode="after")
    def _of_its_kind(self) -> Self:
        if (kind_of(self.id) or "session") != self.kind:
            raise InvalidInputError("kind", f"must be the kind its id names ({kind_of(self.id) or 'session'!r})")
        return self


class _ForgottenFacts(r.ForgottenFacts):
    fingerprints: list[Annotated[str, Field(pattern="^[0-9a-f]{64}$")]] = Field(default_factory=list)


# The model each table's imported rows must satisfy, before their free text is scrubbed.
ROW_MODELS: dict[str, type[BaseModel]] = {
    "forgotten": _Forgotten,
    "sessions": _Session,
    "folded_observations": r.FoldedObservation,
    "observations": _Observation,
    "memories": _Memory,
    "lessons": _Lesson,
    "outcomes": _Outcome,
    "pruned_outcomes": _PrunedOutcome,
    "mistake_cards": _MistakeCard,
    "outcome_mistake_cards": r.OutcomeMistakeCard,
    "slots": _Slot,
    "actions": _Action,
    "action_dependencies": _ActionDependency,
    "relations": _Relation,
    "reflections": _Reflection,
    "forgotten_facts": _ForgottenFacts,
}

# Texts the services refuse when nothing but private or secret parts is in them (Scrubber.required).
REQUIRED_TEXT = {"observations": ("content",), "memories": ("content",), "outcomes": ("task",), "actions": ("title",)}


def id_problem(value: str, table: str | None, project: str | None) -> str | None:
    """Why `value` cannot be the id of a record of `table` (of any table when None) named by a row
    of `project`, or None."""
    kind = None if table is None else TABLES_BY_NAME[table].kind
    if kind is not None:
        return None if kind_of(value) == kind and len(value) <= _ID_CHARS else f"must be a {PREFIXES[kind]}_… id"
    if table is None and kind_of(value) is not None:
        return None if len(value) <= _ID_CHARS else f"must be at most {_ID_CHARS} characters"
    name, mark, scope = value.partition(SCOPE_MARK)  # a session: its caller's name, maybe marked with its project
    try:
        check_session_id(name)
    except InvalidInputError as exc:
        return exc.rule if table else "must be a record id (mem_…, obs_…, …) or a session id"
    if mark and not _SCOPE.fullmatch(scope):
        return f"must be a session id ({SCOPE_MARK!r} may only be followed by its project's 12-character mark)"
    if mark and project is not None and value != scoped_session_id(name, project):
        # Another project's mark would take the very id that project's session of this name is stored under.
        return (
            f"must be {name!r} or {scoped_session_id(name, project)!r} in a row of project {project!r}: "
            f"the mark after {SCOPE_MARK!r} is the session's project's"
        )
    return None
