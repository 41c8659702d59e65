"""Diagnosis: readiness, and a health report (schema, counts, integrity, index, latency, embeddings)."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable
from typing import TypeVar

import anyio

from mcp_memory import __version__
from mcp_memory.errors import MCPMemoryError, StorageError
from mcp_memory.models.results import DiagnoseResult, EmbeddingReport, LatencyReport
from mcp_memory.repositories.embeddings import EmbeddingRepository
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.search.index import SearchFilter
from mcp_memory.services.common import Service

T = TypeVar("T")


class DiagnoseService(Service):
    """What memory_diagnose and the readiness probe report."""

    async def ready(self) -> bool:
        """The database answers a query and the index has been built from it."""
        try:
            async with self.db.read() as conn:
                await MetaRepository(conn).schema_version()
        except MCPMemoryError:
            return False
        return self.deps.indexer.built

    async def diagnose(self, only: str | None = None) -> DiagnoseResult:
        """Schema, counts, integrity, index consistency and a latency self-test.

        With `only` (a restricted caller's project), every figure is that project's and nothing
        tells of other projects or of the server: no path, no file size, no process counters.
        """
        async with self.db.read() as conn:
            meta = MetaRepository(conn)
            try:
                integrity = await meta.integrity_check()
            except StorageError as exc:  # damage so bad that the check itself stops at it
                integrity = [str(exc)]
            damaged = integrity != ["ok"]

            async def figure(read: Awaitable[T], unknown: T) -> T:
                """A figure read from the file, or `unknown` where damage (reported above) stops the read."""
                try:
                    return await read
                except StorageError:
                    if not damaged:
                        raise
                    return unknown

            schema = await figure(meta.schema_version(), 0)
            counts = await figure(meta.table_counts(only), {})
            pragmas = await figure(meta.pragmas(), {})
            stored = await figure(SearchDocRepository(conn).counts_by_kind(only), {})
            observations = await figure(ObservationRepository(conn).count(only), -1)
            latest_memories = await figure(MemoryRepository(conn).count(only, latest_only=True), -1)
            chains_out_of_line = len(await figure(MemoryRepository(conn).chains_out_of_line(only), []))
            stored_vectors = await figure(EmbeddingRepository(conn).counts_by_model(only), {})
        index = self.deps.index
        in_memory = index.counts_by_kind(only)
        expected_ok = stored.get("observation", 0) == observations and stored.get("memory", 0) == latest_memories
        if only is not None:
            pragmas = {k: v for k, v in pragmas.items() if k not in ("page_count", "freelist_count")}
        return DiagnoseResult(
            version=__version__,
            schema_version=schema,
            analyzer_version=ANALYZER_VERSION,
            timezone=index.zone.key,
            db_path=str(self.db.path) if only is None else None,
            db_bytes=await self._db_bytes() if only is None else None,
            sqlite=pragmas,
            integrity=integrity,
            integrity_ok=integrity == ["ok"],
            chains_out_of_line=chains_out_of_line,
            counts=counts,
            index_docs=in_memory,
            stored_docs=stored,
            index_in_sync=in_memory == stored and expected_ok,
            index_terms=index.term_count(only),
            index_postings=index.posting_count(only),
            index_source=self.deps.builder.source,
            index_cache_bytes=await self._cache_bytes() if only is None else 0,
            index_error=None if self.deps.indexer.built else self.deps.builder.failure,
            projects=index.projects() if only is None else [p for p in index.projects() if p == only],
            latency=self._latency_probe(only),
            embeddings=self._embedding_report(stored_vectors, only),
        )

    async def _db_bytes(self) -> int:
        size = 0
        for suffix in ("", "-wal"):
            path = anyio.Path(f"{self.db.path}{suffix}")
            if await path.exists():
                size += (await path.stat()).st_size
        return size

    async def _cache_bytes(self) -> int:
        cache = self.deps.builder.cache
        if cache is None:
            return 0
        try:
            return (await anyio.Path(cache.path).stat()).st_size
        except FileNotFoundError:  # none yet, or a forget deleted it
            return 0

    def _embedding_report(self, stored: dict[str, int], only: str | None) -> EmbeddingReport:
        index, embedder = self.deps.index, self.deps.embedder
        vectors = index.vector_count(only)
        report = EmbeddingReport(
            provider="none",
            vectors=vectors,
            # without a provider no record is waiting for a vector: search is BM25 alone by design
            lacking=index.doc_count(only) - vectors if embedder is not None else 0,
            queued=0,
            embedded=0,
            failures=0,
            stored_by_model=stored,
        )
        if embedder is not None:
            report.provider = embedder.model
            report.dimension = embedder.provider.dim
            if only is None:  # the embedder's counters and errors span every project
                report.queued = embedder.queued
                report.embedded = embedder.embedded
                report.failures = embedder.failures
                report.last_error = embedder.last_error
        return report

    def _latency_probe(self, only: str | None, queries: int = 40) -> LatencyReport:
        """Time searches of random two-term queries drawn from the vocabulary, per project."""
        projects = [p for p in self.deps.index.projects() if only is None or p == only]
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
