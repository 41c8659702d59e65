"""Operations: health diagnosis, and export / import of a versioned JSON document."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError

from mcp_memory import __version__
from mcp_memory.db import Tx
from mcp_memory.errors import ConflictError, ImportFormatError, InvalidInputError, MCPMemoryError
from mcp_memory.models.results import DiagnoseResult, EmbeddingReport, ExportResult, ImportResult, LatencyReport
from mcp_memory.repositories.archive import TABLES, ArchiveRepository, TableSpec
from mcp_memory.repositories.embeddings import EmbeddingRepository
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.search.index import SearchFilter
from mcp_memory.services.common import (
    GLOBAL_PROJECT,
    Deps,
    Progress,
    Scrubber,
    Service,
    check_project,
    moment,
    no_progress,
)

EXPORT_FORMAT = "mcp-memory-export"
EXPORT_VERSION = 1
IMPORT_CHUNK = 1_000  # rows upserted, indexed and reported as progress at a time

Reindexer = Callable[[Tx, Sequence[Any]], Awaitable[None]]
"""Brings the index in line with freshly imported records of one table."""

# Only these tables have a global scope ("*"); anything else there would be out of every tool's reach.
_GLOBAL_TABLES = {"lessons", "slots"}

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


class OperationsService(Service):
    """Diagnose, export and import."""

    def __init__(self, deps: Deps, reindexers: dict[str, Reindexer]) -> None:
        super().__init__(deps)
        self._reindexers = reindexers

    async def ready(self) -> bool:
        """The database answers a query and the index has been built from it."""
        try:
            async with self.db.read() as conn:
                await MetaRepository(conn).schema_version()
        except MCPMemoryError:
            return False
        return self.deps.indexer.built

    async def diagnose(self) -> DiagnoseResult:
        """Schema, counts, integrity, index consistency and a latency self-test."""
        async with self.db.read() as conn:
            meta = MetaRepository(conn)
            schema = await meta.schema_version()
            counts = await meta.table_counts()
            integrity = await meta.integrity_check()
            pragmas = await meta.pragmas()
            stored = await SearchDocRepository(conn).counts_by_kind()
            observations = await ObservationRepository(conn).count()
            latest_memories = await MemoryRepository(conn).count(latest_only=True)
            stored_vectors = await EmbeddingRepository(conn).counts_by_model()
        in_memory = self.deps.index.counts_by_kind()
        expected_ok = stored.get("observation", 0) == observations and stored.get("memory", 0) == latest_memories
        size = 0
        for suffix in ("", "-wal"):
            path = anyio.Path(f"{self.db.path}{suffix}")
            if await path.exists():
                size += (await path.stat()).st_size
        return DiagnoseResult(
            version=__version__,
            schema_version=schema,
            analyzer_version=ANALYZER_VERSION,
            db_path=str(self.db.path),
            db_bytes=size,
            sqlite=pragmas,
            integrity=integrity,
            integrity_ok=integrity == ["ok"],
            counts=counts,
            index_docs=in_memory,
            stored_docs=stored,
            index_in_sync=in_memory == stored and expected_ok,
            index_terms=len(self.deps.index.vocab),
            index_postings=self.deps.index.posting_count(),
            projects=self.deps.index.projects(),
            latency=self._latency_probe(),
            embeddings=self._embedding_report(stored_vectors),
        )

    def _embedding_report(self, stored: dict[str, int]) -> EmbeddingReport:
        index, embedder = self.deps.index, self.deps.embedder
        vectors = index.vector_count()
        report = EmbeddingReport(
            provider="none",
            vectors=vectors,
            lacking=index.doc_count() - vectors,
            queued=0,
            embedded=0,
            failures=0,
            stored_by_model=stored,
        )
        if embedder is not None:
            report.provider = embedder.model
            report.dimension = embedder.provider.dim
            report.queued = embedder.queued
            report.embedded = embedder.embedded
            report.failures = embedder.failures
            report.last_error = embedder.last_error
        return report

    def _latency_probe(self, queries: int = 40) -> LatencyReport:
        """Time searches of random two-term queries drawn from the vocabulary, per project."""
        projects = self.deps.index.projects()
        vocab = list(self.deps.index.vocab.values())
        if not projects or not vocab:
            return LatencyReport(queries=0, p50_ms=0.0, p95_ms=0.0, max_ms=0.0)
        rng = random.Random(0)
        timings = []
        for i in range(queries):
            terms = rng.sample(vocab, min(2, len(vocab)))
            start = time.perf_counter()
            self.deps.index.search(projects[i % len(projects)], terms, SearchFilter(), 10)
            timings.append((time.perf_counter() - start) * 1000)
        timings.sort()
        return LatencyReport(
            queries=len(timings),
            p50_ms=round(timings[len(timings) // 2], 3),
            p95_ms=round(timings[min(len(timings) - 1, int(len(timings) * 0.95))], 3),
            max_ms=round(timings[-1], 3),
        )

    async def export(self, projects: Sequence[str] | None, path: str | None, overwrite: bool) -> ExportResult:
        """The export document for some projects (or all): inline, or written to `path`."""
        async with self.db.read() as conn:
            archive = ArchiveRepository(conn)
            tables = {spec.name: await archive.dump(spec, projects) for spec in TABLES}
            schema = await MetaRepository(conn).schema_version()
        document: dict[str, Any] = {
            "format": EXPORT_FORMAT,
            "format_version": EXPORT_VERSION,
            "schema_version": schema,
            "projects": sorted(projects) if projects is not None else "*",
            "tables": tables,
        }
        counts = {name: len(rows) for name, rows in tables.items()}
        if path is None:
            return ExportResult(counts=counts, document=document)
        target = await self._file_path("path", path)
        if await target.exists() and not overwrite:
            raise InvalidInputError("path", f"{target} exists; pass overwrite=true to replace it")
        temporary = target.with_name(target.name + ".tmp")
        try:
            await temporary.write_text(json.dumps(document, ensure_ascii=False, indent=1, sort_keys=True))
            await temporary.replace(target)  # atomic: a crash never leaves half an export behind
        except OSError as exc:
            raise InvalidInputError("path", f"cannot write {target}: {exc.strerror or exc}") from None
        return ExportResult(counts=counts, path=str(target))

    async def import_(
        self,
        document: dict[str, Any] | None,
        path: str | None,
        only_project: str | None = None,
        progress: Progress = no_progress,
    ) -> ImportResult:
        """Merge an export document: new rows are added, newer rows replace older, the rest is left.

        With `only_project`, every row must belong to that project (a restricted caller's import).
        `progress` hears how many rows are done after each chunk (a large import takes a while).
        """
        if (document is None) == (path is None):
            raise InvalidInputError("document", "give exactly one of document or path")
        if path is not None:
            source = await self._file_path("path", path)
            try:
                document = json.loads(await source.read_text())
            except (OSError, ValueError) as exc:
                raise InvalidInputError("path", f"cannot read a JSON document: {exc}") from None
        assert document is not None
        tables = _check_document(document)
        scrub = self.scrubber()
        parsed = {
            spec.name: [
                _parse_row(spec, i, row, scrub, only_project) for i, row in enumerate(tables.get(spec.name, []))
            ]
            for spec in TABLES
        }
        inserted: dict[str, int] = {}
        updated: dict[str, int] = {}
        unchanged: dict[str, int] = {}
        reindexed = done = 0
        total = sum(len(rows) for rows in parsed.values())
        try:
            async with self.db.transaction("memory_import") as tx:
                archive = ArchiveRepository(tx)
                await archive.defer_foreign_keys()
                for spec, chunk in _chunks(parsed):
                    touched = []
                    for record, outcome in zip(chunk, await archive.upsert_many(spec, chunk), strict=True):
                        if outcome.inserted or outcome.updated:
                            touched.append(record)
                            key = ":".join(str(getattr(record, k)) for k in spec.key)
                            tx.changed(spec.name, key, "import")
                        inserted[spec.name] = inserted.get(spec.name, 0) + outcome.inserted
                        updated[spec.name] = updated.get(spec.name, 0) + outcome.updated
                        unchanged[spec.name] = unchanged.get(spec.name, 0) + (
                            not outcome.inserted and not outcome.updated
                        )
                    reindex = self._reindexers.get(spec.name)
                    if reindex is not None and touched:
                        await reindex(tx, touched)
                        reindexed += len(touched)
                    done += len(chunk)
                    await progress(done, total, f"imported {done} of {total} rows ({spec.name})")
        except ConflictError as exc:
            raise ImportFormatError(
                f"document: rows refer to records that are neither in the document nor stored ({exc})"
            ) from None
        return ImportResult(
            inserted=inserted,
            updated=updated,
            unchanged=unchanged,
            reindexed=reindexed,
            redacted=scrub.summary(),
        )

    async def _file_path(self, field: str, path: str) -> anyio.Path:
        if not self.settings.file_paths_allowed:
            raise InvalidInputError(field, "file paths are disabled on this server; pass the document inline")
        return await (await anyio.Path(path).expanduser()).absolute()


def _chunks(parsed: dict[str, list[BaseModel]]) -> Iterator[tuple[TableSpec, list[BaseModel]]]:
    """Each table's rows, IMPORT_CHUNK at a time, tables in import order."""
    for spec in TABLES:
        rows = parsed[spec.name]
        for start in range(0, len(rows), IMPORT_CHUNK):
            yield spec, rows[start : start + IMPORT_CHUNK]


def _check_document(document: dict[str, Any]) -> dict[str, list[Any]]:
    if document.get("format") != EXPORT_FORMAT:
        raise ImportFormatError(f"document: format must be {EXPORT_FORMAT!r}")
    if document.get("format_version") != EXPORT_VERSION:
        raise ImportFormatError(f"document: format_version {document.get('format_version')!r} is not supported")
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


def _parse_row(spec: TableSpec, index: int, row: Any, scrub: Scrubber, only_project: str | None) -> BaseModel:
    """Validate one imported row against its record model and scrub its free-text fields."""
    where = f"document.tables.{spec.name}[{index}]"
    if not isinstance(row, dict):
        raise ImportFormatError(f"{where}: must be an object")
    unknown = set(row) - set(spec.columns)
    if unknown:
        raise ImportFormatError(f"{where}.{sorted(unknown)[0]}: unknown field")
    try:
        record = spec.model.model_validate(row)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ImportFormatError(f"{where}.{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    project = getattr(record, "project", None)
    if only_project is not None and project is not None and project != only_project:
        raise ImportFormatError(f"{where}.project: this connection may only import into {only_project!r}")
    if project is not None and not (project == GLOBAL_PROJECT and spec.name in _GLOBAL_TABLES):
        try:
            check_project(project)
        except InvalidInputError as exc:
            raise ImportFormatError(f"{where}.project: {exc.rule}") from None
    cleaned: dict[str, Any] = {}
    for name, value in record.model_dump().items():
        if (name.endswith("_at") or name == "due") and value is not None:
            try:
                cleaned[name] = moment(name, value)  # stored times are always UTC "…Z" text
            except InvalidInputError as exc:
                raise ImportFormatError(f"{where}.{name}: {exc.rule}") from None
        elif name in _NOT_TEXT:
            cleaned[name] = value
        elif isinstance(value, str):
            cleaned[name] = scrub.text(value)
        elif isinstance(value, list):
            cleaned[name] = [scrub.text(v) if isinstance(v, str) else v for v in value]
        else:
            cleaned[name] = value
    return spec.model.model_validate(cleaned)
