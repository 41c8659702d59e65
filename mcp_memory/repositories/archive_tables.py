"""The tables export and import carry: each one's record model, key, and how its rows are scoped.

Kept apart from the SQL that reads and writes them (repositories/archive.py), in export order:
a table comes after the other tables its rows name.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from mcp_memory.models import records as r


@dataclass(frozen=True, slots=True)
class TableSpec:
    """How one table is exported: its record model, key, and how rows are scoped to projects."""

    name: str
    model: type[BaseModel]
    key: tuple[str, ...]
    json_columns: tuple[str, ...] = ()
    bool_columns: tuple[str, ...] = ()
    scope: str = "t.project"
    join: str = ""
    refs: tuple[tuple[str, str | None], ...] = ()
    """Columns naming another record: (column, its table, or None when the id's prefix says)."""
    kind: str | None = None
    """The record kind its ids name by their prefix (mcp_memory.ids); None: ids chosen by callers."""
    unique: tuple[str, ...] = ()
    """Columns no two records of the table may share the values of (a UNIQUE rule besides the key)."""
    stamp: str = "updated_at"
    """The time that makes an imported row replace the stored one when it is later."""
    meta_prefix: str | None = None
    """Rows kept in the meta table instead, one per project under this key prefix, the other columns
    as the value's JSON object."""
    shared: bool = False
    """Rows may be global (project "*"); those a project's relations name are exported with the project."""
    union: str | None = None
    """A list column an imported row adds to the stored one's (a meta entry), rather than replacing it."""
    names_any: bool = False
    """Its ids are those of records of any kind (the records it notes as forgotten)."""

    @property
    def columns(self) -> list[str]:
        return list(self.model.model_fields)

    @property
    def source(self) -> str:
        """What its rows are selected from: the table, or a query of the meta entries standing for it."""
        if self.meta_prefix is None:
            return self.name
        values = ", ".join(f"json_extract(value, '$.{c}') AS {c}" for c in self.columns if c != "project")
        start = len(self.meta_prefix) + 1
        return f"(SELECT substr(key, {start}) AS project, {values} FROM meta WHERE key GLOB '{self.meta_prefix}*')"


TABLES: tuple[TableSpec, ...] = (
    # First, so an import knows what was forgotten before the rows that would bring it back.
    TableSpec("forgotten", r.ForgottenRecord, ("id",), stamp="forgotten_at", shared=True, names_any=True),
    TableSpec("sessions", r.Session, ("id",)),
    # Before the observations: an import knows which of their rows its sessions' digests stand for.
    TableSpec(
        "folded_observations",
        r.FoldedObservation,
        ("id",),
        refs=(("session_id", "sessions"),),
        kind="observation",
        stamp="folded_at",
    ),
    TableSpec(
        "observations",
        r.Observation,
        ("id",),
        ("facts", "concepts", "files"),
        refs=(("session_id", "sessions"),),
        kind="observation",
    ),
    TableSpec(
        "memories",
        r.Memory,
        ("id",),
        ("concepts", "files"),
        ("is_latest",),
        refs=(
            ("session_id", "sessions"),
            ("root_id", "memories"),
            ("parent_id", "memories"),
            ("superseded_by", "memories"),
        ),
        kind="memory",
    ),
    TableSpec(
        "lessons",
        r.Lesson,
        ("id",),
        ("tags", "source"),
        unique=("project", "fingerprint"),
        kind="lesson",
        shared=True,
    ),
    TableSpec(
        "outcomes",
        r.Outcome,
        ("id",),
        ("steps", "mistakes", "successes"),
        ("success", "task_type_inferred"),
        refs=(("session_id", "sessions"),),
        kind="outcome",
    ),
    TableSpec(
        "pruned_outcomes", r.PrunedOutcome, ("id",), bool_columns=("success",), kind="outcome", stamp="pruned_at"
    ),
    TableSpec("mistake_cards", r.MistakeCard, ("id",), unique=("project", "merge_key"), kind="mistake_card"),
    TableSpec(
        "outcome_mistake_cards",
        r.OutcomeMistakeCard,
        ("outcome_id", "card_id"),
        scope="o.project",
        join="JOIN outcomes o ON o.id = t.outcome_id",
        refs=(("outcome_id", "outcomes"), ("card_id", "mistake_cards")),
    ),
    TableSpec("slots", r.Slot, ("id",), bool_columns=("pinned",), unique=("project", "name"), kind="slot", shared=True),
    TableSpec("actions", r.Action, ("id",), ("tags",), refs=(("parent_id", "actions"),), kind="action"),
    TableSpec(
        "action_dependencies",
        r.ActionDependency,
        ("action_id", "depends_on"),
        scope="a.project",
        join="JOIN actions a ON a.id = t.action_id",
        refs=(("action_id", "actions"), ("depends_on", "actions")),
    ),
    TableSpec(
        "relations",
        r.Relation,
        ("id",),
        refs=(("source_id", None), ("target_id", None)),
        unique=("project", "source_id", "target_id", "type"),
        kind="relation",
    ),
    # What memory_reflect keeps on a project's profile (services/reflect.py writes the same JSON).
    TableSpec(
        "reflections", r.Reflection, ("project",), ("insights",), stamp="reflected_at", meta_prefix="reflection:"
    ),
    # What either copy forgot stays forgotten: the fingerprints of both are kept.
    TableSpec(
        "forgotten_facts",
        r.ForgottenFacts,
        ("project",),
        ("fingerprints",),
        stamp="forgotten_at",
        meta_prefix="forgotten_facts:",
        union="fingerprints",
    ),
)
TABLES_BY_NAME = {spec.name: spec for spec in TABLES}
