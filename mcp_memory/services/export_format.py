"""What a valid export document is: its header, its tables and rows, checked and cleaned for import."""

from __future__ import annotations

import codecs
import os
import pickle
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from datetime import tzinfo
from typing import Any, BinaryIO, Protocol

import anyio
import anyio.to_thread
from pydantic import BaseModel, ValidationError

from mcp_memory.errors import ImportFormatError, InvalidInputError
from mcp_memory.migrations import MIGRATIONS
from mcp_memory.projects import check_project
from mcp_memory.repositories.archive_tables import TABLES, TABLES_BY_NAME, TableSpec
from mcp_memory.services.common import GLOBAL_PROJECT, Scrubber, moment
from mcp_memory.services.export_text import DocumentReader, DocumentSyntaxError, Header, TableStart
from mcp_memory.services.import_rows import REQUIRED_TEXT, ROW_MODELS, id_problem

EXPORT_FORMAT = "mcp-memory-export"
EXPORT_VERSION = 1
SCHEMA_VERSION = MIGRATIONS[-1][0]
"""The newest database schema whose exports this version reads (every older one too)."""
READ_CHUNK = 2**20  # bytes of an import file read at a time
# A key beyond these is refused rather than skipped: its data would vanish from an import that says it worked.
_DOCUMENT_KEYS = ("format", "format_version", "schema_version", "projects", "tables")

RowParser = Callable[[TableSpec, int, Any], BaseModel]
"""Validates and cleans one raw row of a table, given its position there."""

# Only these tables have a global scope ("*"); anything else there would be out of every tool's reach.
GLOBAL_TABLES = frozenset(spec.name for spec in TABLES if spec.shared)

# Columns that hold identifiers, times or enumerations rather than free text: never scrubbed. An
# agent id is free text the caller chose, so it is scrubbed as the tools scrub it.
_NOT_TEXT = {
    "id",
    "project",
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
    unknown = sorted(set(values) - set(_DOCUMENT_KEYS))
    if unknown:
        raise ImportFormatError(f"document.{unknown[0]}: unknown field; a document holds {', '.join(_DOCUMENT_KEYS)}")
    version = values.get("format_version")
    if version != EXPORT_VERSION or isinstance(version, bool):
        raise ImportFormatError(
            f"document: format_version {_shown(version)} is not supported; this mcp-memory reads {EXPORT_VERSION}"
        )
    schema = values.get("schema_version", SCHEMA_VERSION)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise ImportFormatError(f"document: schema_version must be a whole number from 1 to {SCHEMA_VERSION}")
    if schema > SCHEMA_VERSION:
        raise ImportFormatError(
            f"document: schema_version {_shown(schema)} is newer than this mcp-memory knows ({SCHEMA_VERSION}); "
            "upgrade mcp-memory to import it"
        )


def _shown(value: object) -> str:
    """A header value as an error quotes it: a number past Python's digit limit for text cannot be
    written out (repr raises), and a long value would flood the message."""
    if isinstance(value, int) and value.bit_length() > 64:
        return "(a number of more than 19 digits)"
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


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


def row_parser(scrub: Scrubber, only_project: str | None, zone: tzinfo) -> RowParser:
    """A RowParser that scrubs free text with `scrub`, reads a time without an offset in `zone`
    and, if given, admits only `only_project`."""

    def parse(spec: TableSpec, index: int, row: Any) -> BaseModel:
        return _parse_row(spec, index, row, scrub, only_project, zone)

    return parse


async def read_batches(
    source: ByteSource, parse: RowParser, batch: int
) -> AsyncGenerator[tuple[TableSpec, list[BaseModel], int], None]:
    """Parsed rows of an export file, up to `batch` of one table at a time, with the bytes read so far.

    Tables come in import order (TABLES), whatever their order in the file, as an inline document's
    do: a file memory_export wrote streams straight through, while a table read before its turn
    (in a document dumped with sorted keys, or by hand) waits, parsed, in a temporary file. A header
    value is checked as soon as it is read and the header's presence at the end, so a file that
    turns out not to be an export fails the import.
    """
    reader = DocumentReader(TABLES_BY_NAME)
    decoder = codecs.getincrementaldecoder("utf-8-sig")()  # a byte order mark is tolerated
    seen: dict[str, Any] = {}
    held = _HeldRows()
    done: set[str] = set()  # tables read whole in their turn
    spec: TableSpec | None = None
    in_turn = True
    rows: list[BaseModel] = []
    read = 0
    try:
        while True:
            try:
                data = await source.read(READ_CHUNK)
                text = decoder.decode(data, final=not data)
                items = reader.feed(text) + (reader.close() if not data else [])
            except OSError as exc:
                raise InvalidInputError("path", f"cannot read the file: {exc.strerror or exc}") from None
            except UnicodeDecodeError as exc:
                # The failed bytes end with this read's, but may begin with some the decoder held back.
                at = read + len(data) - len(exc.object) + exc.start
                raise InvalidInputError("path", f"not UTF-8 text (byte {at})") from None
            except DocumentSyntaxError as exc:
                raise InvalidInputError("path", f"not a JSON export document: {exc}") from None
            read += len(data)
            for item in items:
                if isinstance(item, Header):
                    seen[item.key] = item.value
                    if item.key in ("format", "format_version", "schema_version"):  # now; a missing one at the end
                        check_header({"format": EXPORT_FORMAT, "format_version": EXPORT_VERSION, **seen})
                    continue
                if isinstance(item, TableStart) or len(rows) >= batch:
                    if rows and spec is not None:
                        if in_turn:
                            yield spec, rows, read
                        else:
                            await held.add(spec.name, rows)
                    rows = []
                if isinstance(item, TableStart):
                    if spec is not None and in_turn:
                        done.add(spec.name)
                    spec = TABLES_BY_NAME[item.table]
                    in_turn = all(earlier.name in done for earlier in TABLES[: TABLES.index(spec)])
                    continue
                assert spec is not None
                rows.append(parse(spec, item.index, item.value))
            if not data:
                break
        check_header(seen)
        if not reader.saw_tables:
            raise ImportFormatError("document.tables: must be an object of table name to rows")
        if rows and spec is not None:
            if in_turn:
                yield spec, rows, read
            else:
                await held.add(spec.name, rows)
        for table in TABLES:
            async for rows in held.rows(table.name):
                yield table, rows, read
    finally:
        await held.close()


class _HeldRows:
    """Parsed rows of tables read before their turn, kept in an anonymous temporary file till then.

    Only this process reads the file (it has no name and is private to its owner), so its rows are
    pickled: read back as they were parsed, already checked and scrubbed.
    """

    def __init__(self) -> None:
        self._file: BinaryIO | None = None
        self._pieces: dict[str, list[tuple[int, int]]] = {}  # table -> (offset, length) of its pickled batches

    async def add(self, table: str, rows: list[BaseModel]) -> None:
        data = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
        if self._file is None:
            self._file = await anyio.to_thread.run_sync(tempfile.TemporaryFile)
        file = self._file

        def append() -> int:
            offset = file.seek(0, os.SEEK_END)
            file.write(data)
            return offset

        offset = await anyio.to_thread.run_sync(append)
        self._pieces.setdefault(table, []).append((offset, len(data)))

    async def rows(self, table: str) -> AsyncIterator[list[BaseModel]]:
        file = self._file
        for offset, length in self._pieces.pop(table, []):
            assert file is not None

            def load(offset: int = offset, length: int = length) -> list[BaseModel]:
                file.seek(offset)
                rows: list[BaseModel] = pickle.loads(file.read(length))
                return rows

            yield await anyio.to_thread.run_sync(load)

    async def close(self) -> None:
        if self._file is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._file.close)
            self._file = None


def _parse_row(
    spec: TableSpec, index: int, row: Any, scrub: Scrubber, only_project: str | None, zone: tzinfo
) -> BaseModel:
    """Validate one imported row by the rules the tools keep, and scrub its free-text fields."""
    where = f"document.tables.{spec.name}[{index}]"
    if not isinstance(row, dict):
        raise ImportFormatError(f"{where}: must be an object")
    unknown = set(row) - set(spec.columns)
    if unknown:
        raise ImportFormatError(f"{where}.{sorted(unknown)[0]}: unknown field")
    try:
        record = ROW_MODELS[spec.name].model_validate(row)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ImportFormatError(f"{where}.{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    except InvalidInputError as exc:  # a rule across fields, raised by the row's model
        raise ImportFormatError(f"{where}.{exc.field}: {exc.rule}") from None
    project = getattr(record, "project", None)
    is_global = project == GLOBAL_PROJECT and spec.name in GLOBAL_TABLES
    if project is not None and not is_global:
        try:
            project = check_project(project)  # a name in another spelling joins the project it names
        except InvalidInputError as exc:
            raise ImportFormatError(f"{where}.project: {exc.rule}") from None
    # A global row comes with the project's relations to it: the import admits it if it is stored already.
    if only_project is not None and project is not None and project != only_project and not is_global:
        raise ImportFormatError(f"{where}.project: this connection may only import into {only_project!r}")
    own: tuple[tuple[str, str | None], ...] = (
        (("id", None if spec.names_any else spec.name),) if spec.key == ("id",) else ()
    )
    for column, table in own + spec.refs:
        value = getattr(record, column)
        problem = None if value is None else id_problem(value, table, project)
        if problem:
            raise ImportFormatError(f"{where}.{column}: {problem}")
    required = REQUIRED_TEXT.get(spec.name, ())
    cleaned: dict[str, Any] = {}
    for name, value in record.model_dump().items():
        try:
            if (name.endswith("_at") or name == "due") and value is not None:
                cleaned[name] = moment(name, value, zone)  # stored times are always UTC "…Z" text
            elif name == "project":
                cleaned[name] = project
            elif name in _NOT_TEXT:
                cleaned[name] = value
            elif name in required:
                cleaned[name] = scrub.required(name, value)  # as the tool refuses one with nothing but secrets
            else:
                cleaned[name] = _scrubbed(scrub, value)
        except InvalidInputError as exc:
            raise ImportFormatError(f"{where}.{name}: {exc.rule}") from None
    # Markers are longer than most secrets: a slot is checked against its limit as it will be stored.
    if spec.name == "slots" and len(cleaned["content"]) > cleaned["size_limit"]:
        raise ImportFormatError(
            f"{where}.content: {len(cleaned['content'])} characters once its secrets are redacted, over the "
            f"slot's size_limit of {cleaned['size_limit']}"
        )
    return spec.model.model_validate(cleaned)


def _scrubbed(scrub: Scrubber, value: Any) -> Any:
    """`value` with every text in it scrubbed, however deep in lists and objects (a lesson's source)."""
    if isinstance(value, str):
        return scrub.text(value)
    if isinstance(value, list):
        return [_scrubbed(scrub, v) for v in value]
    if isinstance(value, dict):
        return {k: _scrubbed(scrub, v) for k, v in value.items()}
    return value
