"""Lessons: saved, reinforced, decayed over time, recalled by relevance × confidence.

Confidence is stored as of the last reinforcement (or the last persisted decay) and decays by
`lesson_decay_per_week` for every week since, computed when read. Reinforcing applies
`confidence += 0.1 × (1 − confidence)` to the decayed value. A lesson never reinforced whose
confidence has fallen to `lesson_fade_at` counts as soft-deleted (faded): hidden from recall and
context, listed with status "faded", and restored by saving it again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import datetime

from mcp_memory.clock import epoch_us, from_iso, weeks_between
from mcp_memory.db import Conn, Database, Tx, fold_tag
from mcp_memory.errors import InvalidInputError, NotFoundError
from mcp_memory.ids import new_id
from mcp_memory.models.learning import LessonList, LessonRecallResult, LessonSaveResult, LessonView
from mcp_memory.models.records import Lesson
from mcp_memory.repositories.lessons import Decay, LessonRepository, LessonStanding
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.search.index import Hit, SearchFilter
from mcp_memory.search.spelling import respell_query
from mcp_memory.services.common import GLOBAL_PROJECT, NO_WORDS, TAG_CHARS, Deps, Service, normal_forms, note_caller
from mcp_memory.services.index_docs import DocSpec
from mcp_memory.services.lesson_identity import find_twin, fingerprint

LESSON_KINDS = ("lesson", "heuristic", "anti_pattern", "rule_works", "rule_avoid")
REINFORCE_STEP = 0.1
WEAK_MATCH = 1e-3
"""Relevance of a weak match (BM25 score not positive, as in a tiny corpus) holding every query term;
one holding fewer of them gets its share."""
CONTEXT_CHARS = 4_000
"""The longest context a lesson keeps (what memory_lesson_save accepts at once)."""


def reinforced(confidence: float) -> float:
    """Confidence after one reinforcement."""
    return confidence + REINFORCE_STEP * (1.0 - confidence)


def merged_context(old: str | None, new: str | None, limit: int = CONTEXT_CHARS) -> str | None:
    """A saved lesson's context once it is saved again: how it was first learned, then each new
    account (one already said is not repeated); past `limit` the middle accounts give way."""
    if not new or not old:
        return new or old
    said = [part for part in old.split("\n") if part.strip()]
    if " ".join(new.split()).casefold() in " ".join(old.split()).casefold():
        return old
    if " ".join(old.split()).casefold() in " ".join(new.split()).casefold():
        return new
    parts = [*said, new]
    while len("\n".join(parts)) > limit and len(parts) > 2:
        del parts[1]
    return "\n".join(parts)[:limit]


def lesson_doc(lesson: Lesson) -> DocSpec:
    """The index document of a lesson (soft-deleted lessons are not indexed)."""
    return DocSpec(
        doc_id=lesson.id,
        kind="lesson",
        subtype=lesson.kind,
        project=lesson.project,
        at=lesson.created_at,
        fields=(
            (lesson.content, 1),
            (lesson.context or "", 1),
            (" ".join(lesson.tags), 1),
            ((lesson.task_type or "").replace("_", " "), 1),
        ),
    )


class LessonService(Service):
    """Saves, reinforces, decays and recalls lessons of every kind."""

    def __init__(self, deps: Deps) -> None:
        super().__init__(deps)
        deps.indexer.register_source("lesson", self._lesson_docs, self._lesson_lookup)

    # -- confidence -------------------------------------------------------------------------------

    def confidence(self, lesson: Lesson, now: datetime | None = None) -> float:
        """Confidence as of `now`: the stored value decayed for the weeks since it was last set."""
        since = max(lesson.last_reinforced_at, lesson.decayed_at or "")
        return self._decayed(lesson.confidence, weeks_between(from_iso(since), now or self.now()))

    def standing_confidences(
        self, standings: Sequence[LessonStanding], now: datetime
    ) -> Iterator[tuple[LessonStanding, float, bool]]:
        """Each standing with the lesson's `confidence` and whether it has `faded`, computed from the standing alone."""
        for standing in standings:
            confidence = self._decayed(standing.confidence, weeks_between(from_iso(standing.since), now))
            yield standing, confidence, standing.deleted or self._fades(standing.reinforcements, confidence)

    def decay(self, now: datetime) -> Decay:
        """How confidence fades as of `now`, for the repository to judge lessons by."""
        return Decay(1.0 - self.settings.lesson_decay_per_week, self.settings.lesson_fade_at, epoch_us(now))

    def _decayed(self, confidence: float, weeks: float) -> float:
        keep: float = (1.0 - self.settings.lesson_decay_per_week) ** weeks
        return confidence * keep

    def faded(self, lesson: Lesson, confidence: float) -> bool:
        """Soft-deleted: marked so, or never reinforced and decayed to the fade threshold."""
        return lesson.deleted_at is not None or self._fades(lesson.reinforcements, confidence)

    def _fades(self, reinforcements: int, confidence: float) -> bool:
        return reinforcements == 0 and confidence <= self.settings.lesson_fade_at

    def view(self, lesson: Lesson, score: float | None = None, now: datetime | None = None) -> LessonView:
        """A lesson as tools show it, with its current confidence and status."""
        confidence = self.confidence(lesson, now)
        return LessonView(
            id=lesson.id,
            kind=lesson.kind,
            scope="global" if lesson.project == GLOBAL_PROJECT else "project",
            content=lesson.content,
            context=lesson.context,
            tags=lesson.tags,
            task_type=lesson.task_type,
            confidence=round(confidence, 4),
            reinforcements=lesson.reinforcements,
            last_reinforced_at=lesson.last_reinforced_at,
            status="faded" if self.faded(lesson, confidence) else "active",
            source=lesson.source,
            created_at=lesson.created_at,
            score=None if score is None else round(score, 4),
        )

    # -- writes -----------------------------------------------------------------------------------

    async def save(
        self,
        project: str,
        content: str,
        *,
        context: str | None = None,
        tags: Sequence[str] | None = None,
        task_type: str | None = None,
        confidence: float | None = None,
        scope: str = "project",
        agent_id: str | None = None,
        restricted: str | None = None,
    ) -> LessonSaveResult:
        """Save a lesson, or reinforce (and if faded, restore) the one with the same fingerprint.

        Global lessons reach every project, so a caller `restricted` to one project may not write them.
        """
        if scope == "global" and restricted is not None:
            raise InvalidInputError(
                "scope", f"global lessons are read-only for a connection restricted to project {restricted!r}"
            )
        if confidence is not None and confidence <= self.settings.lesson_fade_at:
            raise InvalidInputError(
                "confidence", f"must be above {self.settings.lesson_fade_at} (a lesson at or below it is faded)"
            )
        scrub = self.scrubber()
        content = scrub.required("content", content).strip()
        target = GLOBAL_PROJECT if scope == "global" else project
        agent = scrub.optional(agent_id or self.settings.agent_id)
        async with self.db.transaction("memory_lesson_save", actor=agent, project=target) as tx:
            note_caller(tx, project)  # a global lesson changes the caller's context too: it is told of it
            lesson, created, restored, before = await self.learn(
                tx,
                target,
                content,
                kind="lesson",
                context=scrub.optional(context),
                tags=normal_forms("tags", scrub.many(tags) or [], fold_tag, TAG_CHARS),
                task_type=task_type,
                confidence=confidence,
                agent_id=agent,
            )
        return LessonSaveResult(
            lesson=self.view(lesson),
            created=created,
            restored=restored,
            previous_confidence=None if before is None else round(before, 4),
            redacted=scrub.summary(),
        )

    async def learn(
        self,
        tx: Tx,
        project: str,
        content: str,
        *,
        kind: str,
        context: str | None = None,
        tags: Sequence[str] = (),
        task_type: str | None = None,
        confidence: float | None = None,
        agent_id: str | None = None,
        source: Mapping[str, object] | Callable[[Lesson | None], Mapping[str, object]] | None = None,
    ) -> tuple[Lesson, bool, bool, float | None]:
        """Create a lesson or reinforce its twin; returns (lesson, created, restored, prior confidence).

        `source` may be made from the twin found (None for a new lesson), for evidence that adds to its own.
        """
        repo = LessonRepository(tx)
        now = self.now_iso()
        key = fingerprint(content, kind, task_type)
        existing = await find_twin(tx, project, content, kind, task_type)
        if callable(source):
            source = source(existing)
        if existing is None:
            lesson = Lesson(
                id=new_id("lesson"),
                project=project,
                agent_id=agent_id,
                kind=kind,
                content=content,
                context=context,
                tags=sorted({fold_tag(t) for t in tags if t.strip()}),
                task_type=task_type,
                confidence=self.settings.lesson_confidence if confidence is None else confidence,
                fingerprint=key,
                last_reinforced_at=now,
                source=dict(source or {}),
                created_at=now,
                updated_at=now,
            )
            await repo.add(lesson)
            tx.changed("lesson", lesson.id, "create")
            await self.deps.indexer.put(tx, lesson_doc(lesson))
            return lesson, True, False, None
        before = self.confidence(existing)
        restored = self.faded(existing, before)
        lesson = existing.model_copy(
            update={
                "confidence": reinforced(before),
                "reinforcements": existing.reinforcements + 1,
                "last_reinforced_at": now,
                "decayed_at": None,
                "deleted_at": None,
                # Derived lessons restate their evidence; a saved one adds each new account to the old.
                "context": merged_context(existing.context, context)
                if kind == "lesson"
                else context or existing.context,
                "tags": sorted({fold_tag(t) for t in existing.tags} | {fold_tag(t) for t in tags if t.strip()}),
                # A saved lesson is one lesson whatever task type it is saved for (derived ones are
                # keyed by theirs): saved for a second type, it holds for every type.
                "task_type": existing.task_type if task_type in (None, existing.task_type) else None,
                "source": existing.source | dict(source or {}),
                "updated_at": now,
            }
        )
        await self.store(tx, lesson, "reinforce")
        return lesson, False, restored, before

    async def store(self, tx: Tx, lesson: Lesson, op: str) -> None:
        """Write back a changed lesson and keep the index in step (soft-deleted ones leave it)."""
        await LessonRepository(tx).update(lesson)
        tx.changed("lesson", lesson.id, op)
        if lesson.deleted_at is None:
            await self.deps.indexer.put(tx, lesson_doc(lesson))
        else:
            await self.deps.indexer.drop(tx, [lesson.id])

    async def retire(
        self,
        tx: Tx,
        lesson: Lesson,
        *,
        confidence: float | None = None,
        source: dict[str, object] | None = None,
        context: str | None = None,
    ) -> None:
        """Soft-delete a derived lesson the evidence no longer supports, keeping the figures that say why.

        One already soft-deleted stays so, with its figures brought up to date.
        """
        now = self.now_iso()
        update: dict[str, object] = {"deleted_at": lesson.deleted_at or now, "updated_at": now}
        if confidence is not None:
            # Stored as of now (a persisted value, like a decay) so a listing of faded lessons shows it.
            update |= {"confidence": confidence, "decayed_at": now}
        if source is not None:
            update["source"] = lesson.source | source
        if context is not None:
            update["context"] = context
        await self.store(tx, lesson.model_copy(update=update), "update" if lesson.deleted_at else "soft_delete")

    # -- reads ------------------------------------------------------------------------------------

    async def recall(
        self,
        project: str,
        query: str | None,
        *,
        task_type: str | None = None,
        kinds: Sequence[str] | None = None,
        limit: int = 10,
        include_global: bool = True,
    ) -> LessonRecallResult:
        """Lessons ranked by BM25 relevance × confidence: the project's first, then global ones.

        The query is scrubbed first: what it echoes shows secrets and private parts as removed, and
        only the rest is searched (a query with nothing else left finds nothing).
        """
        _check_kinds(kinds)
        searching = query is not None and bool(query.strip())  # a blank one: ranked as if left out
        shown, searched = self.scrubber().query(query) if query is not None and searching else (query, None)
        found: list[LessonView] = []
        if searching and not (searched and self.searchable(searched)):  # only secrets, stop words or punctuation
            return LessonRecallResult(project=project, query=shown, lessons=found, hint=NO_WORDS)
        scopes = [project] + ([GLOBAL_PROJECT] if include_global and project != GLOBAL_PROJECT else [])
        respelled = respell_query(self.deps.index, scopes, searched or "")
        for scope in scopes:
            words = searched and respelled.text
            ranked = await self.ranked(scope, words, task_type=task_type, kinds=kinds, limit=limit - len(found))
            found += ranked
            if len(found) >= limit:
                break
        hint = respelled.named_from((lesson.content for lesson in found), self.deps.index.analyzer).note()
        return LessonRecallResult(project=project, query=shown, lessons=found, hint=hint)

    async def ranked(
        self,
        scope: str,
        query: str | None,
        *,
        task_type: str | None = None,
        kinds: Sequence[str] | None = None,
        limit: int = 10,
    ) -> list[LessonView]:
        """Active lessons of one scope, best first: relevance × confidence, or confidence without a query.
        With a `task_type`, that type's lessons come before the untyped ones, and other types' are left out."""
        if limit <= 0:
            return []
        [(views, _)] = await self.rankings(scope, query, task_types=[task_type], kinds=kinds, limit=limit)
        return views

    async def rankings(
        self,
        scope: str,
        query: str | None,
        *,
        task_types: Sequence[str | None],
        kinds: Sequence[str] | None = None,
        limit: int = 10,
    ) -> list[tuple[list[LessonView], int]]:
        """`ranked` for each of `task_types` (None: every type), from one snapshot of the lessons, each
        with how many active lessons it ranked in all, `limit` aside."""
        subtypes = frozenset(kinds) if kinds else None
        now = self.now()
        scored: list[tuple[float, str, str | None]] = []  # score, id, task type of each active candidate
        async with self.db.read() as conn:
            repo = LessonRepository(conn)
            # Every candidate is ranked by its standing, and only those shown are read whole: with a query,
            # every lesson that matches it (a cut by relevance alone could leave out the only active one,
            # behind faded ones or other task types').
            if query:
                index = self.deps.index
                flt = SearchFilter(kinds=frozenset({"lesson"}), subtypes=subtypes)
                hits = index.search(scope, query, flt, index.doc_count(scope), now=None)  # age: in confidence
                relevance = self._relevance(query, hits)
                for standing, confidence, faded in self.standing_confidences(
                    await repo.standings_of(list(relevance), [scope]), now
                ):
                    if not faded:
                        scored.append((relevance[standing.id] * confidence, standing.id, standing.task_type))
                orders = [_by_task_type(scored, task_type) for task_type in task_types]
                scores = {i: score for score, i, _ in scored}
                ranked = [[i for _, i, _ in order[:limit]] for order in orders]
                totals = [len(order) for order in orders]
            else:
                ranked, counts = await self._by_standing(
                    repo, [scope], now, orders=task_types, kinds=kinds, limit=limit
                )
                totals = [
                    sum(counts.values()) if task_type is None else counts.get(task_type, 0) + counts.get(None, 0)
                    for task_type in task_types
                ]
                scores = {}
            # The same snapshot, so every one shown is still there.
            shown = list(dict.fromkeys(i for ids in ranked for i in ids))
            whole = {lesson.id: lesson for lesson in await repo.get_many(shown, [scope])}
        return [
            ([self.view(whole[i], scores.get(i), now) for i in ids], total)
            for ids, total in zip(ranked, totals, strict=True)
        ]

    def _relevance(self, query: str, hits: Sequence[Hit]) -> dict[str, float]:
        """Each hit's relevance: its BM25 score, or for a weak match a small value by its share of the query's terms.

        In a tiny corpus every idf can be negative, so matching lessons score <= 0 and the index
        only orders them. Equal shares weigh the same, so confidence decides between lessons that
        match the query equally, as it does between lessons with equal scores.
        """
        terms = set(self.deps.index.query_terms(query))
        relevance: dict[str, float] = {}
        for hit in hits:
            if hit.score > 0:
                relevance[hit.doc_id] = hit.score
            else:
                held = len(terms & self.deps.index.terms_of(hit.doc_id))
                relevance[hit.doc_id] = WEAK_MATCH * held / max(len(terms), 1)
        return relevance

    async def lessons(
        self,
        project: str,
        *,
        kinds: Sequence[str] | None,
        task_type: str | None,
        status: str,
        scope: str,
        limit: int,
        offset: int,
    ) -> LessonList:
        """A page of lessons by confidence (highest first), with faded ones only when asked for.

        Of a task type: its lessons and the untyped ones, which hold for every type (as recall has them).
        """
        _check_kinds(kinds)
        scopes = {"project": [project], "global": [GLOBAL_PROJECT], "all": [project, GLOBAL_PROJECT]}[scope]
        now = self.now()
        async with self.db.read() as conn:
            repo = LessonRepository(conn)
            [ranked], counts = await self._by_standing(
                repo, scopes, now, kinds=kinds, task_type=task_type, untyped=True, status=status, limit=offset + limit
            )
            page = await repo.get_many(ranked[offset:], scopes)
            total = sum(counts.values())
        more = offset + len(page) < total
        return LessonList(
            project=project,
            total=total,
            lessons=[self.view(lesson, now=now) for lesson in page],
            next_offset=offset + len(page) if more else None,
        )

    async def active_count(self, scope: str) -> int:
        """How many lessons of one scope are active (whether one has faded is decided when read, not stored)."""
        async with self.db.read() as conn:
            _, counts = await self._by_standing(LessonRepository(conn), [scope], self.now(), orders=[], limit=0)
        return sum(counts.values())

    async def _by_standing(
        self,
        repo: LessonRepository,
        scopes: Sequence[str],
        now: datetime,
        *,
        orders: Sequence[str | None] = (None,),
        kinds: Sequence[str] | None = None,
        task_type: str | None = None,
        untyped: bool = False,
        status: str = "active",
        limit: int,
    ) -> tuple[list[list[str]], dict[str | None, int]]:
        """Lessons ranked by their standing alone (no query): for each of `orders` (a task type, whose
        lessons lead the untyped ones, others' left out; None: every type), the ids of the best `limit`
        with `status`; and how many of each task type have it. `task_type` keeps only that type's
        lessons, and with `untyped` the untyped ones too.

        SQL judges every lesson it can (a scan of one index); the few it cannot are judged here.
        """
        decay = self.decay(now)
        counts = await repo.counts_by_task_type(
            scopes, decay, kinds=kinds, task_type=task_type, status=status, untyped=untyped
        )
        odd = []
        unjudged = await repo.unjudged(
            scopes, decay, kinds=kinds, task_type=task_type, include_deleted=status != "active", untyped=untyped
        )
        for standing, confidence, faded in self.standing_confidences(unjudged, now):
            if status == "all" or faded == (status == "faded"):
                odd.append((confidence, standing.id, standing.task_type))
                counts[standing.task_type] = counts.get(standing.task_type, 0) + 1
        ranked = []
        for applies_to in orders:
            best = await repo.ranked(
                scopes, decay, kinds=kinds, task_type=task_type, applies_to=applies_to, status=status,
                untyped=untyped, limit=limit,
            )  # fmt: skip
            ranked.append([i for _, i, _ in _by_task_type([*best, *odd], applies_to)[:limit]])
        return ranked, counts

    async def get(self, project: str, lesson_id: str) -> Lesson:
        """A lesson of the project or the global scope."""
        async with self.db.read() as conn:
            found = await LessonRepository(conn).get_or_none(lesson_id, [project, GLOBAL_PROJECT])
        if found is None:
            raise NotFoundError("lesson", lesson_id, "call memory_lessons to list lessons")
        return found

    async def reindex(self, tx: Tx, lessons: Sequence[Lesson]) -> None:
        """Index stored lessons (after an import); soft-deleted ones are dropped."""
        await self.deps.indexer.drop(tx, [lesson.id for lesson in lessons if lesson.deleted_at is not None])
        await self.deps.indexer.put_many(tx, [lesson_doc(lesson) for lesson in lessons if lesson.deleted_at is None])

    @staticmethod
    async def _lesson_lookup(conn: Conn, project: str, ids: Sequence[str]) -> list[DocSpec]:
        return [lesson_doc(lesson) for lesson in await LessonRepository(conn).get_many(ids, [project])]

    async def _lesson_docs(self, db: Database) -> AsyncIterator[list[DocSpec]]:
        async with db.read() as conn:
            projects = await MetaRepository(conn).projects_of("lessons")
        for project in projects:
            async with db.read() as conn:
                found = await LessonRepository(conn).find([project])
            for batch in self.deps.indexer.batches([lesson_doc(lesson) for lesson in found]):
                yield batch


def _check_kinds(kinds: Sequence[str] | None) -> None:
    for kind in kinds or ():
        if kind not in LESSON_KINDS:
            raise InvalidInputError("kinds", f"unknown kind {kind!r}; use {', '.join(LESSON_KINDS)}")


def _by_task_type(
    scored: Sequence[tuple[float, str, str | None]], task_type: str | None
) -> list[tuple[float, str, str | None]]:
    """Scored lessons best first; with a task type, its own before the untyped ones and other types' left out."""
    kept = [entry for entry in scored if task_type is None or entry[2] in (None, task_type)]
    return sorted(kept, key=lambda entry: (task_type is not None and entry[2] != task_type, -entry[0], entry[1]))
