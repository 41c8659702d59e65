"""Retrieval: episodic recall and smart search across kinds, hits first and full records on request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import date

import numpy as np
import numpy.typing as npt

from mcp_memory.db import Conn
from mcp_memory.errors import InvalidInputError
from mcp_memory.ids import kind_of, public_id
from mcp_memory.models.records import Observation
from mcp_memory.models.results import FixRef, Hit, RecallResult, SmartSearchResult
from mcp_memory.privacy import redacted
from mcp_memory.repositories.actions import ActionRepository
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository, OutcomeRepository
from mcp_memory.repositories.relations import RelationRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.repositories.slots import SlotRepository
from mcp_memory.search.dates import blanked
from mcp_memory.search.index import Hit as IndexHit
from mcp_memory.search.index import SearchFilter
from mcp_memory.search.spelling import Respelling, respell_query
from mcp_memory.services.common import GLOBAL_PROJECT, NO_WORDS, Deps, Service, epoch_or_none, time_window
from mcp_memory.services.compress import compact_line, shorten
from mcp_memory.services.fixes import pair_fixes
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.relations import relation_views

_Vector = npt.NDArray[np.float32]
"""A query's embedding."""

EPISODIC_KINDS = frozenset({"observation", "session"})
SEARCHABLE_KINDS = frozenset({"observation", "session", "memory", "lesson"})
FIX_WINDOW = 12
"""How many observations after an error hit a search reads to find the fix its session recorded."""
_PLURAL = {"observation": "observations", "session": "session summaries", "memory": "memories", "lesson": "lessons"}
MAX_DEPTH = 1_000
"""How far down the index ranking a search reads to fill a page when hidden (faded) records are skipped."""


class SearchService(Service):
    """Turns queries into ranked, compact hits and ids into full records."""

    def __init__(self, deps: Deps, lessons: LessonService) -> None:
        super().__init__(deps)
        self.lessons = lessons  # tells faded lessons apart (their decay is computed when read)

    async def recall(
        self,
        project: str,
        query: str,
        *,
        limit: int = 10,
        session_id: str | None = None,
        types: Sequence[str] | None = None,
        since: str | None = None,
        until: str | None = None,
        kinds: Sequence[str] | None = None,
        neighbours: int = 0,
    ) -> RecallResult:
        """Observations (and session summaries) ranked for a plain-text query.

        With `neighbours`, each observation hit carries that many turns before and after it.
        """
        wanted = frozenset(kinds) if kinds else EPISODIC_KINDS
        unknown = wanted - SEARCHABLE_KINDS
        if unknown:
            raise InvalidInputError("kinds", f"unknown kind {sorted(unknown)[0]!r}; use {sorted(SEARCHABLE_KINDS)}")
        start, end = time_window(since, until, self.zone)
        shown, searched = self.scrubber().query(query)
        respelled = respell_query(self.deps.index, _scopes(project, wanted), searched)
        if session_id is not None:
            async with self.db.read() as conn:
                session_id = (await SessionRepository(conn).get(session_id, project)).id
        typed = frozenset(types) if types else None
        # Types are observation types: they narrow the episodic records (a session summary has no
        # type), never the memories or lessons searched beside them, which have kinds of their own.
        flt = SearchFilter(
            kinds=wanted,
            subtypes=typed,
            session_id=session_id,
            since=epoch_or_none(start),
            until=epoch_or_none(end),
            subtyped_kinds=EPISODIC_KINDS,
        )
        vector = await self._query_vector(respelled.text, searched)
        async with self.db.read(snapshot=False) as conn:  # hits are rendered one by one anyway
            hits = await self._search(conn, project, respelled.text, flt, limit, neighbours, vector=vector)
            hint = None if hits else await self._recall_hint(conn, project, respelled.text, flt, vector)
        return RecallResult(project=project, query=shown, hits=hits, hint=_joined(self._named(respelled, hits), hint))

    async def smart_search(
        self,
        project: str,
        *,
        query: str | None,
        ids: Sequence[str] | None,
        kinds: Sequence[str] | None,
        limit: int,
    ) -> SmartSearchResult:
        """Compact hits across kinds for `query`, plus full records for `ids`."""
        if not query and not ids:
            raise InvalidInputError("query", "give a query, or ids of records to fetch in full")
        shown, searched = self.scrubber().query(query) if query is not None else (None, "")
        result = SmartSearchResult(project=project, query=shown)
        wanted = frozenset(kinds) if kinds else SEARCHABLE_KINDS
        if wanted - SEARCHABLE_KINDS:
            raise InvalidInputError("kinds", f"must be among {sorted(SEARCHABLE_KINDS)}")
        respelled = respell_query(self.deps.index, _scopes(project, wanted), searched)
        vector = await self._query_vector(respelled.text, searched)
        async with self.db.read(snapshot=False) as conn:  # hits are rendered one by one anyway
            if searched:
                flt, words = SearchFilter(kinds=wanted), respelled.text
                result.hits = await self._search(conn, project, words, flt, limit, vector=vector)
                if not result.hits:
                    result.hint = (
                        await self._other_kinds_hint(conn, project, words, wanted, vector)
                        or self._unknown_hint(project, words, wanted)
                        if self.searchable(words)
                        else NO_WORDS
                    )
                result.hint = _joined(self._named(respelled, result.hits), result.hint)
            elif query is not None:  # nothing was left of it to search (blank, or only secrets or private parts)
                result.hint = NO_WORDS
            if ids:
                await self._fetch(conn, project, list(dict.fromkeys(ids)), result)
        return result

    async def _search(
        self,
        conn: Conn,
        project: str,
        query: str,
        flt: SearchFilter,
        limit: int,
        neighbours: int = 0,
        *,
        vector: _Vector | None,
    ) -> list[Hit]:
        """The best `limit` hits of the project, with global lessons ranked in when lessons are searched.

        `vector` is the query's embedding (`_query_vector`), asked for once per call: the searches
        that explain an empty result reuse it rather than wait for the model again.

        Faded lessons are skipped (their decay is computed when read, after ranking), so the ranking
        is read deeper until the page is full or exhausted.
        """
        if not query:
            return []
        searches = [(project, flt)]
        if project != GLOBAL_PROJECT and (flt.kinds is None or "lesson" in flt.kinds):
            searches.append((GLOBAL_PROJECT, replace(flt, kinds=frozenset({"lesson"}))))
        now = self.now().timestamp()
        depth = limit
        index = self.deps.index
        while True:
            ranked = [
                # Global lessons are scored with the project's statistics joined to theirs: their
                # partition's own (a few lessons) would leave them on a scale of their own. Fused
                # with vectors, every score is a reciprocal rank and comparable as it is.
                index.search_among(scope, project, query, f, depth, now=now)
                if scope != project and vector is None
                else index.search(scope, query, f, depth, now=now, vector=vector)
                for scope, f in searches
            ]
            found = sorted((h for hits in ranked for h in hits), key=lambda h: -h.score)  # ties: the project first
            hits = await self._render(conn, project, found, neighbours)
            if len(hits) >= limit or depth >= MAX_DEPTH or all(len(r) < depth for r in ranked):
                return hits[:limit]
            depth = min(depth * 4, MAX_DEPTH)

    async def _query_vector(self, words: str, typed: str) -> _Vector | None:
        """The embedding of a query with words left to search: of the query as typed (`typed`), not
        as respelled (`words`), as a model has its own ways with a misspelt word."""
        return await self.query_vector(typed or words) if words else None

    def _named(self, respelled: Respelling, hits: Sequence[Hit]) -> str | None:
        """The note of a respelling, each replacement named as the records found write it."""
        return respelled.named_from((f"{h.title} {h.snippet}" for h in hits), self.deps.index.analyzer).note()

    async def _recall_hint(
        self,
        conn: Conn,
        project: str,
        query: str,
        flt: SearchFilter,
        vector: _Vector | None,
    ) -> str | None:
        """Why a recall found nothing, when something can be said: the query, its filters or its kinds."""
        if not self.searchable(query):
            return NO_WORDS
        narrowed = any(x is not None for x in (flt.subtypes, flt.session_id, flt.since, flt.until))
        if narrowed and await self._search(conn, project, query, SearchFilter(kinds=flt.kinds), 1, vector=vector):
            return "Nothing matched within session_id, types, since or until; without them some records match."
        if kinds := await self._other_kinds(conn, project, query, flt.kinds or SEARCHABLE_KINDS, vector):
            # the way to them that costs the agent least: memories are one flag away from recall;
            # the core tool profile hides memory_lesson_recall, so only tools it exposes are named
            lessons = (
                "ask memory_lesson_recall (or memory_smart_search)"
                if self.settings.tools == "all"
                else "ask memory_smart_search, which searches lessons too"
            )
            ask = {
                frozenset({"memory"}): "set include_memories to search them too, or ask memory_smart_search",
                frozenset({"lesson"}): lessons,
            }.get(kinds, "ask memory_smart_search, which searches every kind")
            return f"Nothing of the kinds recall searches matched, but {_named_kinds(kinds)} do: {ask}."
        return self._unknown_hint(project, query, flt.kinds)

    async def _other_kinds(
        self, conn: Conn, project: str, query: str, searched: frozenset[str], vector: _Vector | None
    ) -> frozenset[str]:
        """The kinds, other than those `searched`, of which some record matches `query`."""
        others = SEARCHABLE_KINDS - searched
        found = await self._search(conn, project, query, SearchFilter(kinds=others), 5, vector=vector) if others else []
        return frozenset(hit.kind for hit in found)

    async def _other_kinds_hint(
        self, conn: Conn, project: str, query: str, searched: frozenset[str], vector: _Vector | None
    ) -> str | None:
        """Why a search narrowed by kinds found nothing, when records of other kinds match."""
        kinds = await self._other_kinds(conn, project, query, searched, vector)
        return (
            f"Nothing of the kinds asked for matched, but {_named_kinds(kinds)} do: leave kinds out to search them too."
            if kinds
            else None
        )

    def _unknown_hint(self, project: str, query: str, kinds: frozenset[str] | None) -> str | None:
        """Which of the query's words no searchable record of the project holds (a typo, most often),
        and which dates it names that none is dated, with the days records of `kinds` span, if any:
        outcomes and mistake cards, which search does not reach, may still hold them."""
        index = self.deps.index
        partition, vocab = index.partition(project), index.vocab

        def held(terms: Sequence[str]) -> bool:
            return any(partition is not None and partition.df.get(vocab.get(t, -1)) for t in terms)

        phrases = index.query_dates(query, self.now().timestamp())
        undated = [query[p.start : p.end] for p in phrases if not held(p.tokens)]
        words = blanked(query, [(p.start, p.end) for p in phrases])  # "Jan 9" is no word to spell-check
        unknown = [
            word
            for word in dict.fromkeys(index.analyzer.tokens(words))
            if (terms := index.analyzer.terms(word)) and not held(terms)
        ]
        said = []
        if unknown:
            listed = ", ".join(repr(w) for w in unknown[:8])
            said.append(f"No searchable record holds {listed}: check the spelling, or try other words for it.")
        if undated:
            listed = ", ".join(repr(d) for d in dict.fromkeys(undated))
            span = index.date_span(project, SearchFilter(kinds=kinds))
            dated = "" if span is None else f" (those searched are dated {_days(*span)})"
            said.append(f"No searchable record is dated {listed}{dated}.")
        return " ".join(said) or None

    async def _fetch(self, conn: Conn, project: str, ids: list[str], into: SmartSearchResult) -> None:
        by_kind: dict[str, list[str]] = {}
        for record_id in ids:
            by_kind.setdefault(kind_of(record_id) or "session", []).append(record_id)
        into.observations = await ObservationRepository(conn).get_many(by_kind.get("observation", []), project)
        into.memories = await MemoryRepository(conn).get_many(by_kind.get("memory", []), project)
        scopes = [project, GLOBAL_PROJECT]
        into.lessons = await LessonRepository(conn).get_many(by_kind.get("lesson", []), scopes)
        into.slots = await SlotRepository(conn).get_many(by_kind.get("slot", []), scopes)
        into.actions = await ActionRepository(conn).get_many(by_kind.get("action", []), project)
        into.outcomes = await OutcomeRepository(conn).get_many(by_kind.get("outcome", []), project)
        into.mistake_cards = await MistakeCardRepository(conn).get_many(by_kind.get("mistake_card", []), project)
        sessions = SessionRepository(conn)
        into.sessions = [s for i in by_kind.get("session", []) if (s := await sessions.get_or_none(i, project))]
        edges = await RelationRepository(conn).get_many(by_kind.get("relation", []), project)
        into.relations = await relation_views(conn, project, edges)
        found = {
            public_id(r.id)  # a session asked for by its caller's name may be stored scoped
            for group in (
                into.observations, into.memories, into.sessions, into.lessons, into.slots, into.actions,
                into.outcomes, into.mistake_cards, into.relations,
            )
            for r in group
        }  # fmt: skip
        # shown as a not-found error shows an id: one that looks like a secret is not repeated
        into.missing = [redacted(i) for i in ids if public_id(i) not in found]

    def _pair_fixes(
        self,
        found: Sequence[Observation],
        windows: Sequence[tuple[Observation, str | None]],
        rendered: dict[str, Hit],
    ) -> None:
        """Name on each error hit the fix its session recorded after it: asked how something was
        fixed, a search matches the error's words, which the fix seldom repeats. `windows` are the
        observations after the error hits (the fix follows soon: not whole sessions, as a session
        of thousands would cost every query) with their stored cues, by session and position."""
        by_session: dict[str, list[Observation]] = {}
        for obs in found:
            if obs.type == "error":
                by_session.setdefault(obs.session_id, []).append(obs)
        if not by_session:
            return
        after: dict[str, list[Observation]] = {}
        cues: dict[str, str | None] = {}
        for obs, stored in windows:
            after.setdefault(obs.session_id, []).append(obs)
            cues[obs.id] = stored
        paired: dict[str, Observation] = {}
        for session_id, mine in by_session.items():
            paired |= pair_fixes(self.deps.index.analyzer, mine, after.get(session_id, []), cues)
        for error_id, fix in paired.items():
            rendered[error_id].fixed_by = FixRef(id=fix.id, text=shorten(fix.content, 200))

    async def _render(self, conn: Conn, project: str, found: Sequence[IndexHit], neighbours: int = 0) -> list[Hit]:
        """Compact hits for index results, in rank order; records deleted meanwhile are skipped."""
        ids_by_kind: dict[str, list[str]] = {}
        for hit in found:
            ids_by_kind.setdefault(hit.kind, []).append(hit.doc_id)
        rendered: dict[str, Hit] = {}
        observations = ObservationRepository(conn)
        found_obs, windows = await observations.get_many_with_windows(
            ids_by_kind.get("observation", []), project, around="error", after=FIX_WINDOW
        )
        by_session: dict[str, list[Observation]] = {}  # the turns around each hit, read in one statement
        if neighbours:
            spans = [(o.session_id, o.seq - neighbours, o.seq + neighbours) for o in found_obs]
            for other in await observations.in_spans(spans):
                by_session.setdefault(other.session_id, []).append(other)
        for obs in found_obs:
            around = [
                other
                for other in by_session.get(obs.session_id, [])
                if other.seq != obs.seq and abs(other.seq - obs.seq) <= neighbours
            ]
            rendered[obs.id] = Hit(
                id=obs.id,
                kind="observation",
                score=0.0,
                title=obs.title,
                snippet=compact_line(obs.title, obs.facts) if obs.facts else shorten(obs.content, 240),
                type=obs.type,
                session_id=obs.session_id,
                ref=obs.ref,
                occurred_at=obs.occurred_at,
                created_at=obs.created_at,
                context=[f"{other.seq - obs.seq:+d}: {shorten(other.content, 200)}" for other in around],
            )
        self._pair_fixes(found_obs, windows, rendered)
        for mem in await MemoryRepository(conn).get_many(ids_by_kind.get("memory", []), project):
            rendered[mem.id] = Hit(
                id=mem.id,
                kind="memory",
                score=0.0,
                title=mem.title or shorten(mem.content, 80),
                snippet=shorten(mem.content, 240),
                type=mem.kind,
                session_id=mem.session_id,
                ref=mem.ref,
                occurred_at=mem.occurred_at,
                created_at=mem.created_at,
            )
        lessons = await LessonRepository(conn).get_many(ids_by_kind.get("lesson", []), [project, GLOBAL_PROJECT])
        for lesson in lessons:
            if self.lessons.faded(lesson, self.lessons.confidence(lesson)):
                continue  # decayed away: hidden as memory_lesson_recall hides it, before consolidate marks it
            rendered[lesson.id] = Hit(
                id=lesson.id,
                kind="lesson",
                score=0.0,
                title=shorten(lesson.content, 80),
                snippet=shorten(f"{lesson.content} {lesson.context or ''}", 240),
                type=lesson.kind,
                created_at=lesson.created_at,
            )
        session_ids = ids_by_kind.get("session", [])  # stored ids, as the index keeps them
        for session in await SessionRepository(conn).get_many(session_ids) if session_ids else []:
            if session.project == project:
                rendered[session.id] = Hit(
                    id=session.id,
                    kind="session",
                    score=0.0,
                    title=session.title or public_id(session.id),
                    snippet=shorten(session.summary or session.folded_digest or "", 240),
                    session_id=session.id,
                    created_at=session.created_at,
                )
        return [
            rendered[h.doc_id].model_copy(update={"score": float(f"{h.score:.4g}")})  # fused scores are small
            for h in found
            if h.doc_id in rendered
        ]


def _joined(*notes: str | None) -> str | None:
    """The notes given, as one hint (None when there is none)."""
    return " ".join(n for n in notes if n) or None


def _named_kinds(kinds: frozenset[str]) -> str:
    """Kinds as a hint names them: "lessons and memories"."""
    return " and ".join(sorted(_PLURAL[kind] for kind in kinds))


def _scopes(project: str, kinds: frozenset[str]) -> list[str]:
    """The projects whose records a search of `kinds` reads: global lessons join the project's lessons."""
    return [project, GLOBAL_PROJECT] if "lesson" in kinds and project != GLOBAL_PROJECT else [project]


def _days(first: date, last: date) -> str:
    """A span of days as a hint writes it: `2026-01-05`, or `2025-12-01 to 2026-01-05`."""
    return first.isoformat() if first == last else f"{first.isoformat()} to {last.isoformat()}"
