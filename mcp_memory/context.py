"""The application context: database, index and services, opened once and shared by every call."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from mcp_memory.clock import Clock, system_clock
from mcp_memory.config import Settings
from mcp_memory.db import Database
from mcp_memory.privacy import PrivacyFilter
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.search.bm25 import BM25Params
from mcp_memory.search.cache import cache_path
from mcp_memory.search.embeddings import EmbeddingProvider, provider_from_settings
from mcp_memory.search.index import SearchIndex
from mcp_memory.search.ranking import RankParams
from mcp_memory.services.actions import ActionService
from mcp_memory.services.common import Deps
from mcp_memory.services.consolidate import ConsolidateService
from mcp_memory.services.context import ContextService
from mcp_memory.services.diagnose import DiagnoseService
from mcp_memory.services.embedding import Embedder
from mcp_memory.services.episodic import EpisodicService
from mcp_memory.services.forget import ForgetService
from mcp_memory.services.index_build import CachePlan, IndexBuilder
from mcp_memory.services.indexing import Indexer
from mcp_memory.services.insights import InsightsService
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.memories import MemoryService
from mcp_memory.services.operations import OperationsService
from mcp_memory.services.outcomes import OutcomeService
from mcp_memory.services.reflect import ReflectService
from mcp_memory.services.relations import RelationService
from mcp_memory.services.search import SearchService
from mcp_memory.services.slots import SlotService
from mcp_memory.services.summaries import SummaryService

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppContext:
    """What the server's lifespan yields: settings, storage, index and the services."""

    deps: Deps
    episodic: EpisodicService
    memories: MemoryService
    search: SearchService
    forget: ForgetService
    operations: OperationsService
    diagnosis: DiagnoseService
    lessons: LessonService
    outcomes: OutcomeService
    insights: InsightsService
    slots: SlotService
    actions: ActionService
    relations: RelationService
    context: ContextService
    summaries: SummaryService
    consolidation: ConsolidateService
    reflection: ReflectService

    @property
    def settings(self) -> Settings:
        return self.deps.settings


@asynccontextmanager
async def open_app(
    settings: Settings,
    clock: Clock = system_clock,
    provider: EmbeddingProvider | None = None,
    *,
    build_in_background: bool = False,
) -> AsyncIterator[AppContext]:
    """Open the database, rebuild the index from it, wire the services; close everything at exit.

    `provider` overrides the embedding provider the settings name (tests pass their own). With
    `build_in_background` the index is built after this yields, and whatever needs it calls
    `deps.builder.ensure_built` first (the server does, so a large store does not hold up the
    MCP handshake).
    """
    if provider is None:
        key = settings.embedding_api_key
        provider = provider_from_settings(
            settings.embeddings,
            settings.embedding_model,
            settings.embedding_url,
            key.get_secret_value() if key is not None else None,
            settings.embedding_timeout_s,
        )
    db = await Database.open(settings.db, busy_timeout_ms=settings.busy_timeout_ms, synchronous=settings.synchronous)
    embedder: Embedder | None = None
    try:
        rank = RankParams(
            before=settings.context_before,
            after=settings.context_after,
            window=settings.context_window,
            session=settings.session_boost,
            importance=settings.importance_boost,
            recency=settings.recency_boost,
            half_life_days=settings.recency_half_life_days,
            vector_weight=settings.embedding_weight,
        )
        index = SearchIndex(Analyzer(), BM25Params(settings.bm25_k1, settings.bm25_b, settings.bm25_epsilon), rank)
        indexer = Indexer(index)
        builder = IndexBuilder(
            indexer,
            CachePlan(cache_path(settings.db), settings.index_cache, settings.index_cache_min_records),
            settings.timezone,
        )
        if provider is not None:
            embedder = Embedder(provider, db, index, builder, clock, settings.embedding_timeout_s)
            indexer.vectors = embedder  # so the rebuild loads the stored vectors
        deps = Deps(
            settings=settings,
            db=db,
            index=index,
            indexer=indexer,
            builder=builder,
            privacy=PrivacyFilter(),
            clock=clock,
            embedder=embedder,
        )
        episodic = EpisodicService(deps)
        memories = MemoryService(deps)
        lessons = LessonService(deps)
        insights = InsightsService(deps, lessons)
        slots = SlotService(deps)
        summaries = SummaryService(deps)
        forget = ForgetService(deps, lessons)

        app = AppContext(
            deps=deps,
            episodic=episodic,
            memories=memories,
            search=SearchService(deps, lessons),
            forget=forget,
            operations=OperationsService(
                deps,
                {
                    "observations": episodic.reindex_observations,
                    "memories": memories.reindex,
                    "sessions": episodic.reindex_sessions,
                    "lessons": lessons.reindex,
                },
                memories.join_apart,
                forget.forget_again,
                episodic.fold,
                summaries.refresh,
            ),
            diagnosis=DiagnoseService(deps),
            lessons=lessons,
            outcomes=OutcomeService(deps, lessons),
            insights=insights,
            slots=slots,
            actions=ActionService(deps),
            relations=RelationService(deps),
            context=ContextService(deps, lessons, slots, insights),
            summaries=summaries,
            consolidation=ConsolidateService(deps, episodic, memories, lessons, summaries),
            reflection=ReflectService(deps, lessons),
        )
        if build_in_background:
            builder.start_build(db)
        else:
            await builder.ensure_built(db)
        if embedder is not None:
            embedder.start()  # it waits for the index before its first pass
        logger.info("mcp-memory open: %s%s", settings.db, "" if indexer.built else " (building the search index)")
        yield app
    finally:
        await builder.stop_build()
        if embedder is not None:
            await embedder.stop()
        await db.close()
