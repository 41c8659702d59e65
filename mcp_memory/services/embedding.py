"""Keeps every indexed record's embedding current, off the write path, and embeds queries.

Only active when an embedding provider is configured. A write commits its record and terms
without waiting for a model: the indexer hands the record's text to this queue after commit,
and a background task embeds it in batches (in a worker thread, retried with back-off) and
stores the vector in its own small transaction. Until then the record is found by BM25 alone.
At start-up (and a while after giving up on a batch) a catch-up pass queues every record that
lacks a current vector (a new model, failed attempts, a crash); records another process indexed
without a vector are queued as soon as this process sees them. A batch the model keeps failing is
split until the records it fails on alone are found; those wait, longer each time, before another try.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import NamedTuple

import anyio
import numpy as np
import numpy.typing as npt

from mcp_memory.clock import Clock, to_iso
from mcp_memory.db import Database
from mcp_memory.repositories.embeddings import EmbeddingRepository, StoredVector
from mcp_memory.search.embeddings import EmbeddingError, EmbeddingProvider
from mcp_memory.search.index import SearchIndex
from mcp_memory.services.index_build import IndexBuilder, in_daemon_thread
from mcp_memory.services.index_docs import EmbedJob, spec_text, text_digest

logger = logging.getLogger(__name__)

BATCH = 32
ATTEMPTS = 5
FIRST_RETRY_S = 0.2
LONGEST_RETRY_S = 30.0
RETRY_LATER_S = 60.0  # after giving up on a batch, look for unembedded records again this much later
LONGEST_SKIP_S = 3_600.0  # a record the model keeps failing on alone is tried again at least this often
CATCH_UP_PAGE = 1_000


class _Rejected(NamedTuple):
    """A record the model failed to embed on its own: for which text, and when it is tried again."""

    digest: str
    wait_s: float  # how long it waited last: doubled after each further failure
    retry_at: float  # time.monotonic()


class Embedder:
    """The provider, a queue of records to embed, the task that drains it, and query embeddings."""

    def __init__(
        self,
        provider: EmbeddingProvider,
        db: Database,
        index: SearchIndex,
        builder: IndexBuilder,
        clock: Clock,
        query_timeout_s: float,
    ) -> None:
        self.provider = provider
        self.model = provider.name
        self.db = db
        self.index = index
        self.builder = builder
        self.indexer = builder.indexer
        self.clock = clock
        self.query_timeout_s = query_timeout_s
        self._queue: dict[str, EmbedJob] = {}  # insertion-ordered; a newer job for a record replaces the older
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._elsewhere: set[str] = set()
        self._rejected: dict[str, _Rejected] = {}
        self._catch_up_due = True  # at start-up, and after giving up on a batch
        # The length the model's vectors have now, when it may differ from those stored: checked
        # by the worker (at start-up, when the provider says up front; else once a query tells).
        self._new_length = provider.dim or 0
        self._next_catch_up = 0.0
        self.embedded = 0
        self.failures = 0
        self.last_error: str | None = None

    # -- the indexer's feed ---------------------------------------------------------------------------

    def wanted(self, jobs: Sequence[EmbedJob]) -> None:
        """Queue records that were (re-)indexed without a current vector."""
        for job in jobs:
            self._queue.pop(job.doc_id, None)
            self._queue[job.doc_id] = job
        self._idle.clear()
        self._wake.set()

    def lacking_elsewhere(self, doc_ids: Sequence[str]) -> None:
        """Another process indexed these records without vectors: fetch their text and queue them."""
        self._elsewhere.update(doc_ids)
        self._idle.clear()
        self._wake.set()

    # -- life-cycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start draining the queue (after the index is built)."""
        self.indexer.vectors = self
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mcp-memory-embedder")

    async def stop(self) -> None:
        """Stop the background task; whatever is left is found again at the next start."""
        self.indexer.vectors = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_idle(self) -> None:
        """Return once nothing is queued, in flight or due (tests and benchmarks use it)."""
        await self._idle.wait()

    @property
    def queued(self) -> int:
        return len(self._queue)

    # -- queries ----------------------------------------------------------------------------------------

    async def query_vector(self, text: str) -> npt.NDArray[np.float32] | None:
        """The query's embedding, or None (search goes on with BM25 alone) on failure or timeout."""
        if not text.strip():
            return None
        try:
            with anyio.fail_after(self.query_timeout_s):
                vectors = await in_daemon_thread(self.provider.embed, [text], "mcp-memory-embed-query")
        except TimeoutError:
            self._failed(f"query embedding took longer than {self.query_timeout_s:g} s")
            return None
        except EmbeddingError as exc:
            self._failed(str(exc))
            return None
        if not len(vectors):
            return None
        vector: npt.NDArray[np.float32] = vectors[0]
        if self.index.vector_dims() - {len(vector)}:
            self._new_length = len(vector)  # the worker replaces the stored vectors (a write)
            self._wake.set()
        return vector

    # -- the worker -----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self.builder.ensure_built(self.db)
                if self._catch_up_due and time.monotonic() >= self._next_catch_up:
                    await self._catch_up()
                    self._catch_up_due = False  # only now: a pass that failed is tried again after the pause below
                    self._next_catch_up = time.monotonic() + RETRY_LATER_S
                if self._new_length:
                    await self._match_length(self._new_length)
                if self._elsewhere:
                    ids = sorted(self._elsewhere)
                    await self._queue_current(ids)
                    self._elsewhere.difference_update(ids)
                if self._queue:
                    await self._drain_one_batch()
                    continue
            except Exception as exc:  # the worker must outlive any one bad batch or database hiccup
                logger.exception("embedding worker: %s", exc)
                self._failed(f"embedding worker: {exc}")
                await anyio.sleep(FIRST_RETRY_S)
                continue
            if not self._catch_up_due and not self._elsewhere:
                self._idle.set()
            self._wake.clear()
            wait = None if not self._catch_up_due else max(0.0, self._next_catch_up - time.monotonic())
            with anyio.move_on_after(wait):
                await self._wake.wait()

    async def _drain_one_batch(self) -> None:
        """Embed and store up to BATCH queued records that still lack a vector."""
        batch: list[EmbedJob] = []
        while self._queue and len(batch) < BATCH:
            doc_id = next(iter(self._queue))
            job = self._queue.pop(doc_id)
            if doc_id in self.index and not self.index.has_vector(doc_id) and not self._rejected_lately(job):
                batch.append(job)
        if not batch:
            return
        # A record the model failed on alone before likely fails again: its batch gets no back-off rounds.
        attempts = 1 if any(job.doc_id in self._rejected for job in batch) else ATTEMPTS
        try:
            rejected = await self._embed_in_parts(batch, attempts)
        except Exception:
            # Storing failed (another writer held the lock too long, say): the worker tries them again
            # after its pause. Those stored meanwhile have their vector and are skipped then.
            for job in batch:
                self._queue.setdefault(job.doc_id, job)  # a newer job for the record, queued meanwhile, stays
            raise
        if rejected:
            logger.warning(
                "embedding %d of %d records failed, tried again later: %s", rejected, len(batch), self.last_error
            )

    async def _embed_in_parts(self, batch: list[EmbedJob], attempts: int) -> int:
        """Embed and store `batch`; should the model fail it, its halves (one try each), down to single
        records, so that a record it rejects (too long, say) costs no other its vector. Returns how many
        records it failed on alone. A model that cannot be reached fails every part alike: the batch
        then waits whole for a later round, and no record is blamed."""
        vectors = await self._embed_with_retries([job.text for job in batch], attempts)
        if isinstance(vectors, EmbeddingError):
            self._catch_up_due = True  # given up for now: a later catch-up pass finds these records again
            if vectors.unreachable:
                logger.warning("embedding %d records failed, left for later: %s", len(batch), vectors)
                return 0
            if len(batch) == 1:
                self._reject(batch[0])
                return 1
            half = len(batch) // 2
            return await self._embed_in_parts(batch[:half], 1) + await self._embed_in_parts(batch[half:], 1)
        await self._store(batch, vectors)
        return 0

    async def _store(self, batch: list[EmbedJob], vectors: npt.NDArray[np.float32]) -> None:
        """Store a batch's vectors and hand them to the index once committed."""
        await self._match_length(vectors.shape[1])
        rows = [
            StoredVector(job.doc_id, job.digest, vector.tobytes()) for job, vector in zip(batch, vectors, strict=True)
        ]
        async with self.db.transaction("embed") as tx:
            await EmbeddingRepository(tx).put_current(self.model, vectors.shape[1], rows, to_iso(self.clock()))
            for job in batch:
                tx.changed("embedding", job.doc_id, "embed")

            def attach() -> None:
                for job, vector in zip(batch, vectors, strict=True):
                    self.index.set_vector(job.doc_id, job.digest, vector)  # no-op if re-indexed meanwhile

            tx.on_commit(attach)
        self.embedded += len(batch)
        for job in batch:
            self._rejected.pop(job.doc_id, None)

    def _reject(self, job: EmbedJob) -> None:
        """Remember a record the model failed on alone: it waits before its next try, twice as long
        after each failure (up to LONGEST_SKIP_S), unless its text changes. It still lacks a vector."""
        known = self._rejected.get(job.doc_id)
        wait = RETRY_LATER_S if known is None or known.digest != job.digest else min(known.wait_s * 2, LONGEST_SKIP_S)
        self._rejected[job.doc_id] = _Rejected(job.digest, wait, time.monotonic() + wait)

    def _rejected_lately(self, job: EmbedJob) -> bool:
        """Whether the model failed on this record's text alone and its next try is not due yet."""
        known = self._rejected.get(job.doc_id)
        if known is None:
            return False
        if known.digest != job.digest:
            del self._rejected[job.doc_id]  # its text changed: the new one may embed
            return False
        if time.monotonic() < known.retry_at:
            self._catch_up_due = True  # a later catch-up pass queues it again
            return True
        return False

    async def _embed_with_retries(self, texts: list[str], attempts: int) -> npt.NDArray[np.float32] | EmbeddingError:
        """Embed `texts` in a daemon thread (so a hung model never holds up the process's exit), up to
        `attempts` times with back-off; the last error when every attempt failed."""
        delay = FIRST_RETRY_S
        for attempt in range(1, attempts + 1):
            try:
                return await in_daemon_thread(self.provider.embed, texts, "mcp-memory-embed")
            except EmbeddingError as exc:
                self._failed(str(exc))
                if attempt == attempts:
                    logger.info("embedding %d records failed %d times: %s", len(texts), attempt, exc)
                    return exc
                logger.info(
                    "embedding failed (attempt %d of %d), retrying in %.1f s: %s", attempt, attempts, delay, exc
                )
                await anyio.sleep(delay)
                delay = min(delay * 3, LONGEST_RETRY_S)
        raise ValueError(f"attempts must be at least 1, not {attempts}")

    async def _match_length(self, dim: int) -> None:
        """When the model gives vectors of another length than those stored, it changed behind its
        name: drop the old ones (here and in the database) and embed every record again."""
        stale = self.index.vector_dims() - {dim}
        if not stale:
            if self._new_length == dim:
                self._new_length = 0
            return
        self._new_length = dim  # until the old vectors are gone: a drop that failed is tried again
        async with self.db.transaction("embed") as tx:
            dropped = await EmbeddingRepository(tx).delete_other_lengths(self.model, dim)
            tx.on_commit(lambda: self.index.drop_vectors(keep_dim=dim))
        logger.warning(
            "%s now gives vectors of %d dimensions, not %s: %d stored vectors dropped, every record is embedded again",
            self.model, dim, " or ".join(map(str, sorted(stale))), dropped,
        )  # fmt: skip
        if self._new_length == dim:
            self._new_length = 0
        self._catch_up_due = True
        self._next_catch_up = 0.0
        self._wake.set()

    async def _catch_up(self) -> None:
        """Queue every indexed record that lacks a current vector of this model."""
        async with self.db.read() as conn:
            lacking = [doc_id for doc_id, _ in await EmbeddingRepository(conn).lacking(self.model)]
        missing = [doc_id for doc_id in lacking if doc_id not in self._queue]
        for start in range(0, len(missing), CATCH_UP_PAGE):
            await self._queue_current(missing[start : start + CATCH_UP_PAGE])
        if missing:
            logger.info("%d records had no current %s vector", len(missing), self.model)

    async def _queue_current(self, doc_ids: Sequence[str]) -> None:
        """Queue records by id, with their text as their services describe it now."""
        jobs = []
        for spec in await self.indexer.specs_of(self.db, doc_ids):
            text = spec_text(spec)
            if text:
                jobs.append(EmbedJob(spec.doc_id, text_digest(text), text))
        if jobs:
            self.wanted(jobs)

    def _failed(self, message: str) -> None:
        self.failures += 1
        self.last_error = message
