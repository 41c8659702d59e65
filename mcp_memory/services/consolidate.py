"""Consolidate: one maintenance pass that folds history into knowledge and keeps the store lean.

Steps, in order: relink memory version chains left out of line; merge near-duplicate memories into
version chains (never two linked `contradicts`: a conflict to resolve, not a duplicate); promote
facts that recur in `promote_min_sessions` sessions into memories (never one a forgotten memory said
or a newer version of a memory replaced, nor two that say nearly the same); fold sessions down to
the cap (writing again the summaries they had); end sessions idle past `session_idle_minutes` and
crystallize ended sessions without a current summary; persist lesson decay and soft-delete faded
lessons; prune outcomes older than
`outcome_retention_days` whose task type has a heuristic that holds and which that heuristic or an
anti-pattern counts (their score, success and time stay in pruned_outcomes for score histories);
drop heuristics that no longer hold; last, delete stored search words no record uses
(services/indexing.py, sweep_terms). A heuristic holds while the success share its evidence gives
it is above `heuristic_min_success`: time alone never drops one (it only fades, like any lesson).
Outcomes are pruned only in favour of a heuristic that outlives the same pass, and what they showed
moves into its tally, so the store never loses both the evidence and the conclusion. Nothing that
a relation points to is deleted, and pinned slots and open actions are never touched.

The whole pass is one transaction, so a cancelled pass leaves nothing behind, and a dry run is the
same pass rolled back: it reports exactly what a real run would do, except the ids of records the
pass would create, which are not assigned until it does (reported as null). The two searches that
read everything run ahead of the transaction, so the write lock is not held while every memory is
compared with every other or every fact is analysed: inside it, the pass merges only the planned
pairs still as planned (services/duplicates.py) and analyses again just the observations the
search for recurring facts found. A memory changed meanwhile waits for the next pass.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import anyio.to_thread

from mcp_memory.clock import to_iso
from mcp_memory.db import Tx
from mcp_memory.models.loop import Change, ConsolidateResult
from mcp_memory.models.records import MemoryDigest
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.relations import RelationRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.search.index import SearchFilter
from mcp_memory.search.termsets import TermSets
from mcp_memory.services.common import GLOBAL_PROJECT, Breather, Deps, Progress, Service, jaccard, no_progress
from mcp_memory.services.compress import shorten
from mcp_memory.services.duplicates import ChainsInPass, Pair, contradicting, duplicate_pairs, still_as_planned
from mcp_memory.services.episodic import EpisodicService
from mcp_memory.services.forget import fact_fingerprint, fact_fingerprints
from mcp_memory.services.heuristic_upkeep import HeuristicUpkeep
from mcp_memory.services.lesson_identity import strategy_terms
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.memories import SUPERSEDE_THRESHOLD, MemoryService
from mcp_memory.services.relations import DROPPED_ENDS, fold_chain_relations
from mcp_memory.services.summaries import SummaryService

DECAY_STEP = 0.001
"""Decay is persisted once it has taken at least this much confidence (smaller drifts wait)."""

_READ_CHUNK = 500
"""Observations read back per query (SQLite caps the parameters of one statement)."""

_CREATES = frozenset({"promoted"})
"""Actions that create a record: a dry run reports them without an id, as none is assigned."""


class _MergePlan(NamedTuple):
    """Near-duplicate merges planned before the transaction, and what the plan compared."""

    pairs: list[Pair]
    others: dict[str, MemoryDigest]
    every: TermSets
    merged: set[str]
    apart: set[frozenset[str]]  # pairs of memories linked `contradicts`: never merged


class _DryRun(Exception):
    """Raised at the end of a dry run so the transaction rolls back."""


def _relations_dropped(tx: Tx, recorded: int) -> list[Change]:
    """The relations deleted since the transaction's first `recorded` changes, with the records they
    linked (no step deletes a relation but with a record it links, which the step reports)."""
    changes = []
    for kind, relation_id, op in tx.changes[recorded:]:
        if kind == "relation" and op == "delete":
            ends = tx.noted(DROPPED_ENDS, relation_id)
            detail = " -> ".join(ends) if ends else ""
            changes.append(Change(kind="relation", action="deleted", id=relation_id, detail=detail))
    return changes


class ConsolidateService(Service):
    """Runs the maintenance pass."""

    def __init__(
        self,
        deps: Deps,
        episodic: EpisodicService,
        memories: MemoryService,
        lessons: LessonService,
        summaries: SummaryService,
    ) -> None:
        super().__init__(deps)
        self.episodic = episodic
        self.memories = memories
        self.lessons = lessons
        self.summaries = summaries
        self.upkeep = HeuristicUpkeep(deps, lessons)

    async def consolidate(
        self, project: str, *, dry_run: bool = False, progress: Progress | None = None, restricted: str | None = None
    ) -> ConsolidateResult:
        """Run every step; return each change by kind and id (a dry run changes nothing). A caller
        `restricted` to one project leaves the global lessons, read-only to it, as they are."""
        report = progress or no_progress
        changes: list[Change] = []
        relinked: list[str] = []
        steps: list[tuple[str, Callable[[Tx, str], Awaitable[list[Change]]]]] = [
            ("relinking broken version chains", lambda tx, project: self._relink_chains(tx, project, relinked)),
            ("merging near-duplicate memories", lambda tx, project: self._merge(tx, project, plan, relinked)),
            ("promoting recurring facts", lambda tx, project: self._promote_facts(tx, project, candidates)),
            # Folded first, so that a summary written in this pass tells what the session keeps.
            ("folding sessions over the cap", self._fold),
            ("crystallizing ended sessions", self._crystallize),
            ("persisting lesson decay", lambda tx, project: self._decay_lessons(tx, project, restricted is None)),
            ("pruning old outcomes", self.upkeep.prune_outcomes),
            ("dropping weak heuristics", self.upkeep.drop_heuristics),
        ]
        total = len(steps) + 3  # and the two read-aheads, and the vocabulary sweep (not a change to any record)
        await report(0, total, "finding near-duplicate memories")
        plan = await self._plan_merges(project)
        await report(1, total, "finding recurring facts")
        candidates = await self._recurring_observations(project)
        words = 0
        try:
            async with self.db.transaction("memory_consolidate", project=project) as tx:
                for done, (name, step) in enumerate(steps, start=2):
                    await report(done, total, name)
                    recorded = len(tx.changes)
                    changes += await step(tx, project)
                    changes += _relations_dropped(tx, recorded)
                await report(total - 1, total, "deleting words no record uses")
                words = await self.deps.indexer.sweep_terms(tx)
                await report(total, total, "done")
                if dry_run:
                    raise _DryRun
        except _DryRun:
            # The rolled-back pass minted ids that will never exist; the real run assigns its own.
            changes = [c.model_copy(update={"id": None}) if c.action in _CREATES else c for c in changes]
        counts = Counter(c.action for c in changes)
        return ConsolidateResult(
            project=project, dry_run=dry_run, changes=changes, counts=dict(counts), words_deleted=words
        )

    async def _relink_chains(self, tx: Tx, project: str, relinked: list[str]) -> list[Change]:
        """Make every memory chain one line again (a merge of an older release could leave one with no
        latest version, or rooted at a row no longer first): every version kept, the last saved latest.
        The root ids relinked are added to `relinked`."""
        broken = await MemoryRepository(tx).chains_out_of_line(project)
        relinked += await self.memories.join_apart(tx, broken) if broken else []
        return [
            Change(kind="memory", action="relinked", id=root_id, detail="versions relinked as one line")
            for root_id in relinked
        ]

    async def _plan_merges(self, project: str) -> _MergePlan:
        """Which near-duplicate memories to merge, planned on a read connection before the write
        transaction (yielding to other requests as it goes), as the pass would merge them now."""
        async with self.db.read() as conn:
            latest = await MemoryRepository(conn).latest_digests(project)
        every = self.deps.index.term_sets(project, SearchFilter(kinds=frozenset({"memory"})))
        await anyio.to_thread.run_sync(every.prepare, SUPERSEDE_THRESHOLD)  # most of a second at 100k
        others = {m.id: m for m in latest}
        # Contradicting memories are looked for among the planned pairs only (a whole project's would
        # be a read of every memory's relations); when a planned pair is one, the plan is made again
        # without it, so each of the two may still merge with another near-copy. Rarely more than once.
        apart: set[frozenset[str]] = set()
        while True:
            merged: set[str] = set()
            pairs = await duplicate_pairs(latest, others, every, self._terms, merged, apart)
            async with self.db.read() as conn:
                found = await contradicting(conn, project, [m.id for pair in pairs for m in pair])
            planned_apart = found & {frozenset((pair.older.id, pair.newer.id)) for pair in pairs}
            apart |= found
            if not planned_apart:
                return _MergePlan(pairs, others, every, merged, apart)

    def _terms(self, memory: MemoryDigest) -> tuple[frozenset[int], int]:
        """A memory's words as the index holds them, or analysed afresh for one the index does not
        hold (yet): a memory this pass made latest again reaches the index only at commit."""
        terms = self.deps.index.terms_of(memory.id)
        return (terms, 0) if terms else self.memories.term_ids(memory.text)

    async def _merge(self, tx: Tx, project: str, plan: _MergePlan, relinked: list[str]) -> list[Change]:
        """Merge the planned pairs still as planned, then compare the memories relinked by this pass."""
        repo = MemoryRepository(tx)
        pairs = list(plan.pairs)
        if relinked:
            chains = [await repo.chain(root_id, project) for root_id in relinked]
            fresh = sorted(
                (m.digest() for chain in chains for m in chain if m.is_latest), key=lambda m: (m.created_at, m.id)
            )
            pairs += await duplicate_pairs(fresh, plan.others, plan.every, self._terms, plan.merged, plan.apart)
        # Every planned memory and the length of its chain, read at once (a trip or two per merge
        # held the write lock for most of a second at 100,000 memories); each merge then updates
        # them as it updates the rows, so the pairs after it see what it did.
        current = ChainsInPass(await repo.get_many(list(dict.fromkeys(m.id for p in pairs for m in p)), project))
        current.lengths = await repo.chain_lengths(list(current.members), project)
        # As they stand now (a relation may have come since the plan), and across chains this pass
        # joins: merging a into b and then c into b must not join a and c when they contradict.
        apart = await contradicting(tx, project, list(current.by_id))
        changes, gone = [], []
        for pair in pairs:
            older, newer = current.get(pair.older.id), current.get(pair.newer.id)
            if not (still_as_planned(older, pair.older) and still_as_planned(newer, pair.newer)):
                continue  # changed since the plan: the next pass compares it again
            if older.root_id == newer.root_id:  # an earlier merge of this pass joined them already
                continue
            if current.contradict(older, newer, apart):  # a conflict to resolve, not a duplicate
                continue
            at = self.now_iso()
            await repo.merge_chains(older, newer, current.lengths[older.root_id], at)
            current.merged(older, newer, at)
            gone.append(older.id)
            tx.changed("memory", older.id, "merge")
            changes.append(Change(kind="memory", action="merged", id=older.id, detail=f"now a version of {newer.id}"))
        await self.deps.indexer.drop(tx, gone)  # at once: a round trip or two instead of several per merge
        if gone:  # their edges are the merged memory's now: one per other end and type, none to itself
            await fold_chain_relations(tx, project, gone, self.now_iso())  # reported by _relations_dropped
        return changes

    async def _recurring_observations(self, project: str) -> list[str]:
        """Ids of the observations whose facts recur in enough sessions to be promoted, oldest first.

        Analysing every fact of a project takes seconds at scale, so this runs on a read connection
        before the write transaction (yielding to other requests as it goes); the pass then analyses
        again only these observations, as they stand inside it."""
        async with self.db.read() as conn:
            observations = await ObservationRepository(conn).facts(project)
        recurring = {obs_id for sightings in (await self._fact_groups(observations)) for _, _, obs_id in sightings}
        return [obs_id for obs_id, _, _ in observations if obs_id in recurring]

    async def _fact_groups(self, observations: list[tuple[str, str, list[str]]]) -> list[list[tuple[str, str, str]]]:
        """Sightings (fact, session, observation) grouped by the fact's analysed words, for the
        groups seen in at least `promote_min_sessions` sessions, in the order they were first seen.

        Words a fact negates are marked apart, so "… does not listen on port 5433" is not one more
        sighting of "… listens on port 5433" (stop words alone would drop the "not")."""
        analyzer = self.deps.index.analyzer
        groups: dict[frozenset[str], list[tuple[str, str, str]]] = defaultdict(list)
        breathe = Breather()
        for obs_id, session_id, facts in observations:
            await breathe()
            for fact in facts:
                words = strategy_terms(analyzer.terms, fact)
                if len(words) >= 3:  # a fact of one or two words is too thin to stand alone
                    groups[words].append((fact, session_id, obs_id))
        needed = self.settings.promote_min_sessions
        return [sightings for sightings in groups.values() if len({s for _, s, _ in sightings}) >= needed]

    async def _promote_facts(self, tx: Tx, project: str, candidates: list[str]) -> list[Change]:
        repo = ObservationRepository(tx)
        observations = [
            obs
            for start in range(0, len(candidates), _READ_CHUNK)
            for obs in await repo.facts(project, candidates[start : start + _READ_CHUNK])
        ]
        groups = await self._fact_groups(observations)
        if not groups:
            return []
        # A forgotten memory stays forgotten, and one a newer version corrected stays corrected.
        gone = await MetaRepository(tx).forgotten_facts(project) | {
            fact_fingerprint(text) for text in await MemoryRepository(tx).superseded_contents(project)
        }
        analyzer, memories = self.deps.index.analyzer, MemoryRepository(tx)
        await self.deps.indexer.catch_up(tx)  # which facts memories already say is read from the index
        promoted: list[frozenset[str]] = []  # the index learns of this pass's memories only at commit
        changes = []
        for sightings in groups:
            if any(mark in gone for fact in {fact for fact, _, _ in sightings} for mark in fact_fingerprints(fact)):
                continue
            text = Counter(fact for fact, _, _ in sightings).most_common(1)[0][0]
            words = frozenset(analyzer.terms(text))
            if await self.memories.already_says(memories, project, text) or any(
                jaccard(words, earlier) > SUPERSEDE_THRESHOLD for earlier in promoted
            ):
                continue  # already known: a memory says (nearly) the same, or exactly, whatever its title
            saved = await self.memories.save(
                project, text, "fact", importance=0.6, ref=f"promoted from {sightings[0][2]}"
            )
            promoted.append(words)
            sessions = len({session for _, session, _ in sightings})
            detail = f"seen in {sessions} sessions: {shorten(text, 80)}"
            changes.append(Change(kind="memory", action="promoted", id=saved.id, detail=detail))
        return changes

    async def _crystallize(self, tx: Tx, project: str) -> list[Change]:
        """End the sessions idle past `session_idle_minutes`, then summarise every ended session whose
        summary is missing or stale."""
        idle = f"idle past {self.settings.session_idle_minutes} minutes"
        changes = [
            Change(kind="session", action="ended", id=session_id, detail=idle)
            for session_id in await self.summaries.end_idle(tx, project)
        ]
        for session in await SessionRepository(tx).needing_summary(project):
            view = await self.summaries.summarise(tx, session)
            if view is not None and view.changed:
                changes.append(
                    Change(kind="session", action="crystallized", id=session.id, detail=shorten(view.summary, 80))
                )
        return changes

    async def _decay_lessons(self, tx: Tx, project: str, with_global: bool) -> list[Change]:
        now = self.now()
        stamp = to_iso(now)
        changes = []
        lessons = await LessonRepository(tx).find([project, GLOBAL_PROJECT] if with_global else [project])
        keep = await self._pointed_at(tx, [lesson.id for lesson in lessons])
        for lesson in lessons:
            confidence = self.lessons.confidence(lesson, now)
            update: dict[str, object] = {"confidence": confidence, "decayed_at": stamp, "updated_at": stamp}
            if self.lessons.faded(lesson, confidence) and lesson.id not in keep:
                await self.lessons.store(tx, lesson.model_copy(update=update | {"deleted_at": stamp}), "fade")
                changes.append(Change(kind="lesson", action="faded", id=lesson.id, detail=shorten(lesson.content, 80)))
            elif lesson.confidence - confidence >= DECAY_STEP:
                await self.lessons.store(tx, lesson.model_copy(update=update), "decay")
                detail = f"{lesson.confidence:.3f} -> {confidence:.3f}"
                changes.append(Change(kind="lesson", action="decayed", id=lesson.id, detail=detail))
        return changes

    async def _fold(self, tx: Tx, project: str) -> list[Change]:
        """Fold the sessions over the cap, and write again the summaries they had (those told what folded)."""
        folded = await self.episodic.fold_over_cap(tx, project)
        changes = [Change(kind="observation", action="folded", id=i) for ids in folded.values() for i in ids]
        for session_id in await self.summaries.refresh(tx, sorted(s for s, ids in folded.items() if ids)):
            changes.append(Change(kind="session", action="crystallized", id=session_id, detail="after folding"))
        return changes

    @staticmethod
    async def _pointed_at(tx: Tx, ids: list[str]) -> set[str]:
        return await RelationRepository(tx).pointed_at(ids)
