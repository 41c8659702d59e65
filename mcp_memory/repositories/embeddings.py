"""SQL for embedding vectors: one float32 blob per indexed record, tied to the text it was made from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from mcp_memory.repositories.base import Repository, chunked, placeholders


class StoredVector(NamedTuple):
    """A vector as stored: whose, made from which text (digest), the float32 bytes."""

    doc_id: str
    digest: str
    vector: bytes


class EmbeddingRepository(Repository):
    """Vectors are derived data: written after their record, deleted with it or when its text changes."""

    async def delete_stale(self, current: Sequence[tuple[str, str]]) -> None:
        """Drop the vectors of these (doc_id, digest) records that were made from other text."""
        await self.conn.executemany("DELETE FROM embeddings WHERE doc_id = ? AND digest <> ?", current)

    async def delete(self, doc_ids: Sequence[str]) -> None:
        for chunk in chunked(doc_ids):
            await self.conn.execute(f"DELETE FROM embeddings WHERE doc_id IN ({placeholders(len(chunk))})", chunk)

    async def delete_other_lengths(self, model: str, dim: int) -> int:
        """Drop the vectors of `model` that are not `dim` long (made before it changed); returns how many."""
        rows = await self.conn.fetchall(
            "DELETE FROM embeddings WHERE model = ? AND dim <> ? RETURNING doc_id", (model, dim)
        )
        return len(rows)

    async def put_current(self, model: str, dim: int, rows: Sequence[StoredVector], now: str) -> None:
        """Store vectors, each only while its record is still indexed from the same text."""
        await self.conn.executemany(
            "INSERT INTO embeddings (doc_id, model, dim, digest, vector, created_at) "
            "SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM search_docs WHERE doc_id = ? AND digest = ?) "
            "ON CONFLICT (doc_id) DO UPDATE SET model = excluded.model, dim = excluded.dim, "
            "digest = excluded.digest, vector = excluded.vector, created_at = excluded.created_at",
            [(r.doc_id, model, dim, r.digest, r.vector, now, r.doc_id, r.digest) for r in rows],
        )

    async def current(self, model: str, doc_ids: Sequence[str] | None = None) -> list[StoredVector]:
        """Vectors of `model` that match their record's indexed text (all of them, or of `doc_ids`)."""
        query = (
            "SELECT e.doc_id, e.digest, e.vector FROM embeddings e "
            "JOIN search_docs d ON d.doc_id = e.doc_id AND d.digest = e.digest WHERE e.model = ?"
        )
        if doc_ids is None:
            return [StoredVector._make(r) for r in await self.conn.fetchall(query, (model,))]
        rows = await self.fetch_in(f"{query} AND e.doc_id IN ({{ids}})", doc_ids, (model,))
        return [StoredVector._make(r) for r in rows]

    async def lacking(self, model: str) -> list[tuple[str, str]]:
        """(doc_id, digest) of every indexed record without a current vector of `model`."""
        rows = await self.conn.fetchall(
            "SELECT d.doc_id, d.digest FROM search_docs d LEFT JOIN embeddings e "
            "ON e.doc_id = d.doc_id AND e.digest = d.digest AND e.model = ? WHERE e.doc_id IS NULL",
            (model,),
        )
        return [(r[0], r[1]) for r in rows]

    async def counts_by_model(self, project: str | None = None) -> dict[str, int]:
        """Stored vectors per model, of one project's records or all."""
        if project is None:
            rows = await self.conn.fetchall("SELECT model, count(*) FROM embeddings GROUP BY model")
        else:
            rows = await self.conn.fetchall(
                "SELECT e.model, count(*) FROM embeddings e JOIN search_docs d ON d.doc_id = e.doc_id"
                " WHERE d.project = ? GROUP BY e.model",
                (project,),
            )
        return {r[0]: r[1] for r in rows}
