"""Re-analysis: after an analyzer upgrade, or when the database's time zone changes, every record's
stored terms are derived again from its text.

The time zone (meta `timezone`) decides which day a record's date tokens name. A database from
before zones were recorded was analysed in UTC; a new one takes the zone it is first opened with.

One process does it at a time: servers started together on an older store would otherwise clear
each other's work, and one could load its index halfway through another's pass. The claim is the
`analyzer_version` meta value, renewed with every batch; the others poll it and go on once the
version is current. A claim left unrenewed for _CLAIM_TTL_S was left by a process that died, and
the next one takes it over and starts again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid

from mcp_memory.db import Database, Tx
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.search.analyzer import ANALYZER_VERSION
from mcp_memory.services.index_sync import REANALYSED
from mcp_memory.services.indexing import Indexer

logger = logging.getLogger(__name__)

_CLAIM_PREFIX = "re-analysing: "  # the analyzer_version meta value while a process re-analyses
_CLAIM_TTL_S = 30.0  # a re-analysis claim not renewed for this long was left by a process that died
_CLAIM_POLL_S = 0.25  # how often a process waiting for another's re-analysis looks again


def stored_zone(recorded_version: str | None, recorded_zone: str | None) -> str | None:
    """The time zone a database's stored terms were analysed in (None: a new database, none yet)."""
    if recorded_zone is not None:
        return recorded_zone
    return None if recorded_version is None else "UTC"  # analysed before zones were recorded


class Reanalysis:
    """One process's re-analysis of the store in time zone `zone` (or its wait for another's)."""

    def __init__(self, indexer: Indexer, zone: str) -> None:
        self.indexer = indexer
        self.zone = zone
        self._owner = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"  # names this run's claim

    async def run(self, db: Database) -> int:
        """Re-derive every record's stored terms from its source text; returns how many records
        this process re-analysed (0 when another process did it meanwhile)."""
        while True:
            async with db.read() as conn:
                recorded = await MetaRepository(conn).get("analyzer_version")
            if not self._held_elsewhere(recorded):
                claimed = await self._claim(db)
                if claimed is None:
                    return 0
                if claimed:
                    break
            await asyncio.sleep(_CLAIM_POLL_S)
        # Unchanged text keeps its stored vector; the embedder's start-up pass finds the rest.
        indexer = self.indexer
        feed, indexer.vectors = indexer.vectors, None
        try:
            total = await self._reanalyse_claimed(db)
        finally:
            indexer.vectors = feed
        if total is None:  # taken over after this process stalled: wait for the one that took it
            logger.warning("another process took the re-analysis over: waiting for it to finish")
            return await self.run(db)
        if total:  # a new database has nothing to re-analyse, and nothing to say about it
            logger.info("search terms re-analysed: %d records", total)
        return total

    async def _reanalyse_claimed(self, db: Database) -> int | None:
        """The re-analysis itself, once claimed; None when the claim was lost on the way."""
        total = 0
        for kind, source in self.indexer.sources.items():
            async for batch in source(db):
                async with db.transaction("reindex") as tx:
                    if not await self._renew(tx):
                        return None
                    await self.indexer.put_many(tx, batch)
                total += len(batch)
            logger.debug("re-analysed %s records", kind)
        async with db.transaction("reindex") as tx:
            if not await self._renew(tx):
                return None
            await MetaRepository(tx).set("analyzer_version", str(ANALYZER_VERSION))
            if total:  # running servers reload their index from the new terms
                tx.changed("index", "*", REANALYSED)
        return total

    async def _claim(self, db: Database) -> bool | None:
        """Claim the re-analysis and clear the stored terms: True when this process claimed it,
        False when another process holds it, None when there is nothing left to re-analyse."""
        async with db.transaction("reindex") as tx:
            meta = MetaRepository(tx)
            store = SearchDocRepository(tx)
            recorded = await meta.get("analyzer_version")
            current = (
                recorded == str(ANALYZER_VERSION) and stored_zone(recorded, await meta.get("timezone")) == self.zone
            )
            if current and not await store.stale_count(ANALYZER_VERSION):
                return None
            if self._held_elsewhere(recorded):
                return False
            await store.clear()
            await meta.set("analyzer_version", self._claim_text())
            await meta.set("timezone", self.zone)  # from now on, what the stored terms are (being) analysed in
        return True

    async def _renew(self, tx: Tx) -> bool:
        """Renew this process's claim inside `tx`; False when it no longer holds it."""
        meta = MetaRepository(tx)
        claim = _parse_claim(await meta.get("analyzer_version"))
        if claim is None or claim[0] != self._owner:
            return False
        await meta.set("analyzer_version", self._claim_text())
        return True

    def _claim_text(self) -> str:
        return f"{_CLAIM_PREFIX}{self._owner} at {time.time():.3f}"

    def _held_elsewhere(self, recorded: str | None) -> bool:
        """Whether `recorded` is another process's live claim on the re-analysis."""
        claim = _parse_claim(recorded)
        return claim is not None and claim[0] != self._owner and time.time() - claim[1] < _CLAIM_TTL_S


def _parse_claim(recorded: str | None) -> tuple[str, float] | None:
    """Who holds a re-analysis claim and when they last renewed it (None: `recorded` is a
    version, or a claim from before claims were owned, which nobody renews)."""
    if recorded is None or not recorded.startswith(_CLAIM_PREFIX):
        return None
    owner, sep, renewed = recorded[len(_CLAIM_PREFIX) :].rpartition(" at ")
    try:
        return (owner, float(renewed)) if sep else None
    except ValueError:
        return None
