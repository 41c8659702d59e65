"""What a valid export document is: its header, its tables and rows, checked and cleaned for import."""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Annotated, Any, Protocol, Self

from pydantic import AfterValidator, BaseModel, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from mcp_memory.errors import ImportFormatError, InvalidInputError
from mcp_memory.ids import PREFIXES, SCOPE_MARK, kind_of, scoped_session_id
from mcp_memory.migrations import MIGRATIONS
from mcp_memory.models import records as r
from mcp_memory.models.loop import SummarySource
from mcp_memory.privacy import without_markers
from mcp_memory.repositories.archive import TABLES, TABLES_BY_NAME, TableSpec
from mcp_memory.services.actions import STATUSES
from mcp_memory.services.common import GLOBAL_PROJECT, Scrubber, check_project, check_session_id, moment
from mcp_memory.services.export_text import DocumentReader, DocumentSyntaxError, Header
from mcp_memory.services.lessons import LESSON_KINDS
from mcp_memory.services.summaries import SUMMARY_CHARS

EXPORT_FORMAT = "mcp-memory-export"
EXPORT_VERSION = 1
SCHEMA_VERSION = MIGRATIONS[-1][0]
"""The newest database schema whose exports this version reads (every older one too)."""
READ_CHUNK = 2**20  # bytes of an import file read at a time

RowParser = Callable[[TableSpec, int, Any], BaseModel]
"""Validates and cleans one raw row of a table, given its position there."""

# Only these tables have a global scope ("*"); anything else there would be out of every tool's reach.
GLOBAL_TABLES = frozenset(spec.name for spec in TABLES if spec.shared)

# Columns that hold identifiers, times or enumerations rather than free text: never scrubbed.
_NOT_TEXT = {
    "id",
    "project",
    "agent_id",
    "session_id",
    "root_id",
    "parent_id",
    "superseded_by",
    "fingerprint",
    "fingerprints",
    "merge_key",
    "source_id",
    "target_id",
    "outcome_id",
    "card_id",
    "action_id",
    "depends_on",
    "status",
    "due",
    "kind",
    "type",
    "source",
    "task_type",
    "name",
}


class ByteSource(Protocol):
    """An open binary file as anyio gives it."""

    async def read(self, size: int = -1) -> bytes: ...


def header(schema_version: int, projects: Sequence[str] | None) -> dict[str, Any]:
    """Every top-level value of an export document but its tables."""
    return {
        "format": EXPORT_FORMAT,
        "format_version": EXPORT_VERSION,
        "schema_version": schema_version,
        "projects": sorted(projects) if projects is not None else "*",
    }


def check_header(values: Mapping[str, Any]) -> None:
    """Refuse a document that is not an export this version can read.

    Every release wrote schema_version; a document without it (written by hand) is read as the
    current format_version says, since the rows' shape is what that version fixes.
    """
    if values.get("format") != EXPORT_FORMAT:
        raise ImportFormatError(f"document: format must be {EXPORT_FORMAT!r}")
    version = values.get("format_version")
    if version != EXPORT_VERSION or isinstance(version, bool):
        raise ImportFormatError(
            f"document: format_version {version!r} is not supported; this mcp-memory reads {EXPORT_VERSION}"
        )
    schema = values.get("schema_version", SCHEMA_VERSION)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise ImportFormatError(f"document: schema_version must be a whole number from 1 to {SCHEMA_VERSION}")
    if schema > SCHEMA_VERSION:
        raise ImportFormatError(
            f"document: schema_version {schema} is newer than this mcp-memory knows ({SCHEMA_VERSION}); "
            "upgrade mcp-memory to import it"
        )


def check_document(document: dict[str, Any]) -> dict[str, list[Any]]:
    """The tables of a whole (in-memory) document, once its header and shape are right."""
    check_header(document)
    tables = document.get("tables")
    if not isinstance(tables, dict):
        raise ImportFormatError("document.tables: must be an object of table name to rows")
    unknown = set(tables) - {spec.name for spec in TABLES}
    if unknown:
        raise ImportFormatError(f"document.tables: unknown table {sorted(unknown)[0]!r}")
    for name, rows in tables.items():
        if not isinstance(rows, list):
            raise ImportFormatError(f"document.tables.{name}: must be a list of rows")
    return tables


def row_parser(scrub: Scrubber, only_project: str | None) -> RowParser:
    """A RowParser that scrubs free text with `scrub` and, if given, admits only `only_project`."""

    def parse(spec: TableSpec, index: int, row: Any) -> BaseModel:
        return _parse_row(spec, index, row, scrub, only_project)

    return parse


async def read_batches(
    source: ByteSource, parse: RowParser, batch: int
) -> AsyncGenerator[tuple[TableSpec, list[BaseModel], int], None]:
    """Parsed rows of an export file, up to `batch` of one table at a time, with the bytes read so far.

    Rows come in the file's order. A header value is checked as soon as it is read and the
    header's presence at the end, so a file that turns out not to be an export fails the import.
    """
    reader = DocumentReader(TABLES_BY_NAME)
    decoder = codecs.getincrementaldecoder("utf-8-sig")()  # a byte order mark is tolerated
    seen: dict[str, Any] = {}
    spec: TableSpec | None = None
    rows: list[BaseModel] = []
    read = 0
    while True:
        try:
            data = await source.read(READ_CHUNK)
            read += len(data)
            text = decoder.decode(data, final=not data)
            items = reader.feed(text) + (reader.close() if not data else [])
        except OSError as exc:
            raise InvalidInputError("path", f"cannot read the file: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise InvalidInputError("path", f"not UTF-8 text (byte {read - len(data) + exc.start})") from None
        except DocumentSyntaxError as exc:
            raise InvalidInputError("path", f"not a JSON export document: {exc}") from None
        for item in items:
            if isinstance(item, Header):
                seen[item.key] = item.value
                if item.key in ("format", "format_version", "schema_version"):  # checked now; a missing one at the end
                    check_header({"format": EXPORT_FORMAT, "format_version": EXPORT_VERSION, **seen})
                continue
            table = TABLES_BY_NAME[item.table]
            if rows and (table is not spec or len(rows) >= batch):
                assert spec is not None
                yield spec, rows, read
                rows = []
            spec = table
            rows.append(parse(table, item.index, item.value))
        if not data:
            break
    check_header(seen)
    if not reader.saw_tables:
        raise ImportFormatError("document.tables: must be an object of table name to rows")
    if rows:
        assert spec is not None
        yield spec, rows, read


def _parse_row(spec: TableSpec, index: int, row: Any, scrub: Scrubber, only_project: str | None) -> BaseModel:
    """Validate one imported row by the rules the tools keep, and scrub its free-text fields."""
    where = f"document.tables.{spec.name}[{index}]"
    if not isinstance(row, dict):
        raise ImportFormatError(f"{where}: must be an object")
    unknown = set(row) - set(spec.columns)
    if unknown:
        raise ImportFormatError(f"{where}.{sorted(unknown)[0]}: unknown field")
    try:
        record = _RULES[spec.name].model_validate(row)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ImportFormatError(f"{where}.{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    except InvalidInputError as exc:  # a rule across fields, raised by the row's model
        raise ImportFormatError(f"{where}.{exc.field}: {exc.rule}") from None
    project = getattr(record, "project", None)
    is_global = project == GLOBAL_PROJECT and spec.name in GLOBAL_TABLES
    # A global row comes with the project's relations to it: the import admits it if it is stored already.
    if only_project is not None and project is not None and project != only_project and not is_global:
        raise ImportFormatError(f"{where}.project: this connection may only import into {only_project!r}")
    if project is not None and not is_global:
        try:
            check_project(project)
        except InvalidInputError as exc:
            raise ImportFormatError(f"{where}.project: {exc.rule}") from None
    own: tuple[tuple[str, str | None], ...] = (("id", spec.name),) if spec.key == ("id",) else ()
    for column, table in own + spec.refs:
        value = getattr(record, column)
        problem = None if value is None else _id_problem(value, table, project)
        if problem:
            raise ImportFormatError(f"{where}.{column}: {problem}")
    required = _REQUIRED.get(spec.name, ())
    cleaned: dict[str, Any] = {}
    for name, value in record.model_dump().items():
        try:
            if (name.endswith("_at") or name == "due") and value is not None:
                cleaned[name] = moment(name, value)  # stored times are always UTC "…Z" text
            elif name in _NOT_TEXT:
                cleaned[name] = value
            elif name in required:
                cleaned[name] = scrub.required(name, value)  # as the tool refuses one with nothing but secrets
            elif isinstance(value, str):
                cleaned[name] = scrub.text(value)
            elif isinstance(value, list):
                cleaned[name] = [scrub.text(v) if isinstance(v, str) else v for v in value]
            else:
                cleaned[name] = value
        except InvalidInputError as exc:
            raise ImportFormatError(f"{where}.{name}: {exc.rule}") from None
    return spec.model.model_validate(cleaned)


def _id_problem(value: str, table: str | None, project: str | None) -> str | None:
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
    if mark and not _SCOPE.match(scope):
        return f"must be a session id ({SCOPE_MARK!r} may only be followed by its project's 12-character mark)"
    if mark and project is not None and value != scoped_session_id(name, project):
        # Another project's mark would take the very id that project's session of this name is stored under.
        return (
            f"must be {name!r} or {scoped_session_id(name, project)!r} in a row of project {project!r}: "
            f"the mark after {SCOPE_MARK!r} is the session's project's"
        )
    return None


# -- what the tools accept, row by row --------------------------------------------------------------
# The limits below are those of the tools' arguments (mcp_memory/tools); fields that derivations
# also write (lessons, session titles and digests) get the largest limit any tool argument has.

_ID_CHARS = 128
_SCOPE = re.compile(r"^[0-9a-z]{12}$")
_LONGEST = 100_000  # the longest text any tool takes (an observation, a slot)


def _at_most(limit: int) -> AfterValidator:
    """A text of at most `limit` characters, not counting the markers that stand for redacted parts."""

    def check(value: str | None) -> str | None:
        if value is not None and len(value) > limit and len(without_markers(value)) > limit:
            raise PydanticCustomError("too_long", "must be at most {limit} characters", {"limit": limit})
        return value

    return AfterValidator(check)


def _one_of(allowed: Sequence[str]) -> AfterValidator:
    def check(value: str) -> str:
        if value not in allowed:
            raise PydanticCustomError("one_of", "must be one of {allowed}", {"allowed": ", ".join(allowed)})
        return value

    return AfterValidator(check)


Agent = Annotated[str | None, Field(max_length=128)]
Snake = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]  # every type, kind and task type
Unit = Annotated[float, Field(ge=0, le=1)]
Count = Annotated[int, Field(ge=0)]
Ordinal = Annotated[int, Field(ge=1)]
Title = Annotated[str | None, _at_most(300)]
Ref = Annotated[str | None, _at_most(500)]
Concepts = Annotated[list[Annotated[str, _at_most(100)]], Field(max_length=50)]
Files = Annotated[list[Annotated[str, _at_most(1_000)]], Field(max_length=200)]
Items = Annotated[list[Annotated[str, _at_most(2_000)]], Field(max_length=50)]


class _Session(r.Session):
    agent_id: Agent = None
    title: Title = None
    summary: Annotated[str | None, _at_most(SUMMARY_CHARS)] = None
    summary_source: SummarySource | None = None
    folded_digest: Annotated[str | None, _at_most(_LONGEST)] = None
    observation_count: Count = 0
    folded_count: Count = 0


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
    tags: list[Annotated[str, _at_most(60)]] = Field(default_factory=list)  # reinforcing adds tags: no count
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
    size_limit: Annotated[int, Field(ge=1, le=100_000)]
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
    tags: Annotated[list[Annotated[str, _at_most(60)]], Field(max_length=20)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_its_own_parent(self) -> Self:
        if self.parent_id == self.id:
            raise InvalidInputError("parent_id", "must name another action, not the action itself")
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


class _ForgottenFacts(r.ForgottenFacts):
    fingerprints: list[Annotated[str, Field(pattern="^[0-9a-f]{64}$")]] = Field(default_factory=list)


_RULES: dict[str, type[BaseModel]] = {
    "sessions": _Session,
    "observations": _Observation,
    "memories": _Memory,
    "lessons": _Lesson,
    "outcomes": _Outcome,
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
_REQUIRED = {"observations": ("content",), "memories": ("content",), "outcomes": ("task",), "actions": ("title",)}
