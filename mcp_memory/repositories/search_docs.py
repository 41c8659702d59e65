"""SQL for the search index's stored form: the term vocabulary and each record's packed terms."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.repositories.base import Repository, chunked, placeholders
from mcp_memory.search.index import IndexDoc

_PAGE = 10_000
_COLUMNS = ", ".join(IndexDoc._fields)  # the table's columns carry the tuple's field names


class SearchDocRepository(Repository):
    """Stored terms, written in the same transaction as the record they index."""

    async def term_ids(self, terms: Sequence[str]) -> dict[str, int]:
        """Ids of `terms`, creating the missing ones."""
        ids: dict[str, int] = {}
        for chunk in chunked(terms):
            await self.conn.executemany(
                "INSERT INTO search_terms (term) VALUES (?) ON CONFLICT (term) DO NOTHING",
                [(t,) for t in chunk],
            )
            rows = await self.conn.fetchall(
                f"SELECT term, id FROM search_terms WHERE term IN ({placeholders(len(chunk))})", tuple(chunk)
            )
            ids.update((r[0], r[1]) for r in rows)
        return ids

    async def existing_term_ids(self, ids: Sequence[int]) -> set[int]:
        """Those of the term `ids` that are still stored."""
        return {r[0] for r in await self.fetch_in("SELECT id FROM search_terms WHERE id IN ({ids})", ids)}

    async def all_term_ids(self) -> set[int]:
        """The id of every stored term."""
        return {r[0] for r in await self.conn.fetchall("SELECT id FROM search_terms")}

    async def delete_terms(self, ids: Sequence[int]) -> dict[str, int]:
        """Delete terms by id; returns the (term -> id) pairs deleted."""
        rows = await self.fetch_in("DELETE FROM search_terms WHERE id IN ({ids}) RETURNING term, id", ids)
        return {r[0]: r[1] for r in rows}

    async def vocabulary(self, after_id: int = 0) -> dict[str, int]:
        """Every term with its id (or only those newer than `after_id`)."""
        rows = await self.conn.fetchall("SELECT term, id FROM search_terms WHERE id > ?", (after_id,))
        return {r[0]: r[1] for r in rows}

    async def put(self, doc: IndexDoc, analyzer: int) -> None:
        await self.conn.execute(
            f"INSERT INTO search_docs ({_COLUMNS}, analyzer) VALUES ({placeholders(len(IndexDoc._fields) + 1)}) "
            "ON CONFLICT (doc_id) DO UPDATE SET kind = excluded.kind, subtype = excluded.subtype, "
            "project = excluded.project, session_id = excluded.session_id, at = excluded.at, "
            "length = excluded.length, terms = excluded.terms, seq = excluded.seq, weight = excluded.weight, "
            "digest = excluded.digest, analyzer = excluded.analyzer",
            (*doc, analyzer),
        )

    async def delete(self, doc_ids: Sequence[str]) -> None:
        for chunk in chunked(doc_ids):
            await self.conn.execute(f"DELETE FROM search_docs WHERE doc_id IN ({placeholders(len(chunk))})", chunk)

    async def clear(self) -> None:
        """Forget every stored document (before a full re-analysis)."""
        await self.conn.execute("DELETE FROM search_docs")

    async def all_docs(self) -> list[IndexDoc]:
        """Every stored document, read a page at a time: the event loop serves others in between."""
        docs: list[IndexDoc] = []
        async for page in self.conn.pages(f"SELECT {_COLUMNS} FROM search_docs ORDER BY rowid", size=_PAGE):
            docs.extend(IndexDoc._make(r) for r in page)
        return docs

    async def get_many(self, doc_ids: Sequence[str]) -> list[IndexDoc]:
        rows = await self.fetch_in(f"SELECT {_COLUMNS} FROM search_docs WHERE doc_id IN ({{ids}})", doc_ids)
        return [IndexDoc._make(r) for r in rows]

    async def term_blobs(self, doc_ids: Sequence[str]) -> list[bytes]:
        """The packed terms of those of `doc_ids` that are stored."""
        return [r[0] for r in await self.fetch_in("SELECT terms FROM search_docs WHERE doc_id IN ({ids})", doc_ids)]

    async def stale_count(self, analyzer: int) -> int:
        """Stored documents analysed by another analyzer version."""
        # `<>` cannot use an index; two ranges can, so this stays cheap at a million records.
        return int(
            await self.conn.fetchval(
                "SELECT count(*) FROM search_docs WHERE analyzer < ? OR analyzer > ?", (analyzer, analyzer)
            )
        )

    async def counts_by_kind(self, project: str | None = None) -> dict[str, int]:
        """Stored documents per kind, in one project or all."""
        where, params = ("WHERE project = ?", (project,)) if project is not None else ("", ())
        rows = await self.conn.fetchall(f"SELECT kind, count(*) FROM search_docs {where} GROUP BY kind", params)
        return {r[0]: r[1] for r in rows}

    async def term_count(self) -> int:
        return int(await self.conn.fetchval("SELECT count(*) FROM search_terms"))
