"""Reflect: learn from a session or a time window, without a model (and better with one).

Rule-based findings: errors that recur (similar words, at least `anti_pattern_min_failures`
times) become anti-pattern candidates, with the fix that followed when there was one; step
sequences that recur in successful outcomes of a task type become heuristics; pairs of memories
on the same topic where one negates the other, or each gives a number the other lacks for
something both speak of, are linked `contradicts`.
Evidence ids are kept on each derived lesson, so reflecting twice on the same window changes
nothing. When the client lends its model, the rules it proposes are saved as lessons too.

The insights describe all the evidence reviewed, lessons it had already taught included. Those of
a time window are kept on the project profile, rewritten only when they differ; a session's are
returned but never replace the project's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import NamedTuple

import anyio.to_thread

from mcp_memory.clock import to_iso
from mcp_memory.db import Conn, Tx
from mcp_memory.errors import InvalidInputError
from mcp_memory.ids import new_id
from mcp_memory.models.learning import LessonView
from mcp_memory.models.loop import ReflectResult, SummarySource
from mcp_memory.models.records import Lesson, Observation, Outcome, Relation
from mcp_memory.models.results import RelationView
from mcp_memory.privacy import says_something
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.outcomes import OutcomeRepository
from mcp_memory.repositories.relations import RelationRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.search.index import SearchFilter
from mcp_memory.services.common import Breather, Deps, Service, compared_terms, time_window
from mcp_memory.services.compress import shorten
from mcp_memory.services.index_build import FORGET_ACTION
from mcp_memory.services.lesson_identity import (
    anti_patterns_for,
    error_of,
    evidence_of,
    find_twin,
    fix_of,
    from_outcomes,
    same_problem,
    seen_context,
    tried_of,
    why_bad,
)
from mcp_memory.services.lessons import LessonService, reinforced
from mcp_memory.services.outcomes import source_count
from mcp_memory.services.reflect_findings import (
    Finding,
    Tally,
    conflict,
    insights_of,
    recurring_errors,
    recurring_sequences,
)
from mcp_memory.services.relations import MemoryNodes, relation_view

REFLECT_DAYS = 7
"""Window of a reflection given neither a session nor times."""

SHOWN_OBSERVATIONS = 60
SHOWN_OUTCOMES = 20
"""The latest observations and outcomes the sampling prompt shows the client's model: the rules it
proposes are learned from those, so they are the rules' evidence."""


class _Evidence(NamedTuple):
    """What a reflection reviews. Every observation of the scope is counted (`tally`), but only
    those of sessions with an error in it are read whole: recurring errors and their fixes are
    found there, and a window of 100,000 made into records would cost seconds."""

    session_id: str | None  # as stored
    observations: list[Observation]
    cues: dict[str, str | None]
    tally: Tally
    outcomes: list[Outcome]
    memories: list[str]


_ON_ONE_TOPIC = 0.3
"""Word overlap (Jaccard) from which two memories are taken to be on one topic, so one may
contradict the other; above 0.85 they are near-copies rather than rival claims."""

SAMPLING_PROMPT = """\
From this record of recent work on a project, write up to 5 rules the agent should follow next
time: one per line, each a short imperative sentence, only rules the record supports. No preamble.

{record}"""

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])(?=\s)\s*")
_EMPHASIS = re.compile(r"^(\*\*|__|\*|_|`)(.+)\1$")


def _rule_lines(reply: str) -> list[str]:
    """The rules of a model's reply, one per line: its bulleted or numbered lines when it has any,
    and never a heading, a code fence or a line introducing the list ("Here are the rules:")."""
    lines, fenced = [], False
    for line in (line.strip() for line in reply.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif line and not fenced:
            lines.append(line)
    if any(_BULLET.match(line) for line in lines):
        lines = [line for line in lines if _BULLET.match(line)]
    rules = []
    for line in lines:
        rule = _BULLET.sub("", line).strip()
        if rule.startswith("#"):
            continue
        rule = _EMPHASIS.sub(r"\2", rule).strip()
        if not rule.endswith(":"):
            rules.append(rule)
    return rules


class ReflectService(Service):
    """Derives lessons, heuristics and flagged contradictions from recent history."""

    def __init__(self, deps: Deps, lessons: LessonService) -> None:
        super().__init__(deps)
        self.lessons = lessons

    async def reflect(
        self,
        project: str,
        *,
        session_id: str | None = None,
        since: str | None = None,
        until: str | None = None,
        model_rules: str | None = None,
    ) -> ReflectResult:
        """Reflect on one session, or on a time window (default: the last week)."""
        start, end = self._window(session_id, since, until)
        proposed: list[LessonView] = []
        # The evidence is read and analysed before the write transaction, so other writers wait only
        # for what it learns; learning is idempotent, so a record written in between is simply next time's.
        async with self.db.read() as conn:
            read_at = await MetaRepository(conn).last_audit_seq()
            evidence = await self._evidence(conn, project, session_id, start, end)
            shown = await self._shown(conn, project, evidence.session_id, start, end) if model_rules else []
        errors, sequences, close = await self._findings(project, evidence)
        async with self.db.transaction("memory_reflect", project=project) as tx:
            if await MetaRepository(tx).action_since(read_at, FORGET_ACTION):
                # A forget came in between: nothing it took may be learned from, nor its text kept.
                evidence = await self._evidence(tx, project, session_id, start, end)
                shown = await self._shown(tx, project, evidence.session_id, start, end) if model_rules else []
                errors, sequences, close = await self._findings(project, evidence)
            outcomes = evidence.outcomes
            anti_found = [await self._learn_anti_pattern(tx, project, f) for f in errors]
            heuristics_found = []
            for finding in sequences:
                if finding.retire:
                    await self._retire_sequence(tx, project, finding)
                else:
                    heuristics_found.append(await self._learn_finding(tx, project, finding))
            contradictions, conflicting = await self._contradictions(tx, project, close)
            source: SummarySource = "extractive"
            if model_rules:
                seen = [o.id for o in shown] + [o.id for o in outcomes[-SHOWN_OUTCOMES:]]
                proposed = self._learned(await self._model_rules(tx, project, model_rules, seen))
                if proposed:  # a reply with no usable rule taught nothing: the result is the rule-based one
                    source = "sampling"
            # Findings that land on one lesson (the same error seen in two wordings) count it once.
            anti, heuristics = ({lesson.id for lesson, _ in found} for found in (anti_found, heuristics_found))
            insights = insights_of(evidence.tally, outcomes, len(anti), len(heuristics), conflicting)
            if session_id is None and (evidence.tally.observations or outcomes or evidence.memories):
                await self._keep_on_profile(tx, project, insights)
        return ReflectResult(
            project=project,
            session_id=session_id,
            since=start,
            until=end,
            anti_patterns=self._learned(anti_found),
            heuristics=self._learned(heuristics_found),
            lessons=proposed,
            contradictions=contradictions,
            insights=insights,
            source=source,
        )

    async def _findings(
        self, project: str, evidence: _Evidence
    ) -> tuple[list[Finding], list[Finding], dict[tuple[str, str], float]]:
        """What the evidence shows: recurring errors, recurring strategies, and pairs of memories on one topic."""
        errors = recurring_errors(
            evidence.observations, self.deps.index.analyzer, self.settings, evidence.outcomes, evidence.cues
        )
        return (
            errors,
            recurring_sequences(evidence.outcomes, self.settings),
            await self._close_pairs(project, evidence.memories),
        )

    async def sampling_prompt(
        self, project: str, session_id: str | None, since: str | None, until: str | None
    ) -> str | None:
        """The prompt asking the client's model for rules, or None when there is nothing to reflect on."""
        start, end = self._window(session_id, since, until)
        async with self.db.read() as conn:
            if session_id is not None:
                session_id = (await SessionRepository(conn).get(session_id, project)).id
            observations = await self._shown(conn, project, session_id, start, end)
            outcomes = await self._outcomes(conn, project, session_id, start, end)
        if not observations and not outcomes:
            return None
        lines = [f"- [{o.type}] {shorten(o.title, 160)}" for o in observations]
        for outcome in outcomes[-SHOWN_OUTCOMES:]:
            verdict = "succeeded" if outcome.success else f"failed: {shorten(outcome.error or '', 100)}"
            strategy = shorten(outcome.strategy, 100) if outcome.strategy else "?"
            lines.append(f"- outcome: {shorten(outcome.task, 100)} {verdict} (strategy: {strategy})")
        return SAMPLING_PROMPT.format(record="\n".join(lines))

    def _learned(self, found: Sequence[tuple[Lesson, bool]]) -> list[LessonView]:
        """The lessons this call learned or reinforced (not those the same evidence already taught)."""
        learned = {lesson.id: lesson for lesson, changed in found if changed}  # the last state of each
        return [self.lessons.view(lesson) for lesson in learned.values()]

    async def _keep_on_profile(self, tx: Tx, project: str, insights: list[str]) -> None:
        """Keep a project-wide reflection's insights on the profile, unless they are what it already says."""
        meta = MetaRepository(tx)
        if (await meta.reflection(project)).get("insights") == insights:
            return  # the same evidence again: nothing changes, not even the time
        await meta.keep_reflection(project, self.now_iso(), insights)
        tx.changed("profile", project, "reflect")

    def _window(self, session_id: str | None, since: str | None, until: str | None) -> tuple[str | None, str | None]:
        if session_id is not None and (since is not None or until is not None):
            # A session is reviewed whole: a window beside it would be reported but not applied.
            raise InvalidInputError(
                "since" if since is not None else "until", "give session_id or a window (since, until), not both"
            )
        start, end = time_window(since, until, self.zone)
        if session_id is None and start is None and end is None:
            start = to_iso(self.now() - timedelta(days=REFLECT_DAYS))
        return start, end

    async def _evidence(
        self, conn: Conn, project: str, session_id: str | None, start: str | None, end: str | None
    ) -> _Evidence:
        """What the scope holds (see _Evidence), and the ids of the latest memories saved or changed
        in it (ids only: a whole history's memories as records cost seconds to make)."""
        observations, memories = ObservationRepository(conn), MemoryRepository(conn)
        if session_id is not None:
            session_id = (await SessionRepository(conn).get(session_id, project)).id
            found, cues = await observations.in_session_with_cues(session_id)
            tally = Tally.of(found)
            latest = [m.id for m in await memories.latest_in_sessions([session_id], project)]
        else:
            tally, with_errors = Tally(), set()
            for session, kind, concepts in await observations.kinds_between(project, start, end):
                tally.add(kind, concepts)
                if kind == "error":
                    with_errors.add(session)
            found, cues = await observations.in_sessions_between_with_cues(project, sorted(with_errors), start, end)
            latest = await memories.latest_ids_updated_between(project, start, end)
        outcomes = await self._outcomes(conn, project, session_id, start, end)
        return _Evidence(session_id, found, cues, tally, outcomes, latest)

    @staticmethod
    async def _outcomes(
        conn: Conn, project: str, session_id: str | None, start: str | None, end: str | None
    ) -> list[Outcome]:
        """The outcomes of the session (a stored id), or of the window."""
        outcomes = OutcomeRepository(conn)
        return await (outcomes.in_session(session_id) if session_id else outcomes.between(project, start, end))

    @staticmethod
    async def _shown(
        conn: Conn, project: str, session_id: str | None, start: str | None, end: str | None
    ) -> list[Observation]:
        """The latest observations of the scope, oldest first: what the sampling prompt shows."""
        observations = ObservationRepository(conn)
        if session_id is not None:
            return (await observations.in_session(session_id))[-SHOWN_OBSERVATIONS:]
        latest, _ = await observations.page(project, since=start, until=end, limit=SHOWN_OBSERVATIONS)
        return latest[::-1]

    async def _retire_sequence(self, tx: Tx, project: str, finding: Finding) -> None:
        """Soft-delete a heuristic learned from these steps, now that they mostly fail."""
        existing = await find_twin(tx, project, finding.content, "heuristic", finding.task_type)
        if existing is not None and existing.deleted_at is None and finding.share is not None:
            share = finding.share
            await self.lessons.retire(tx, existing, confidence=share, source={"share": round(share, 4)})

    async def _close_pairs(self, project: str, memories: Sequence[str]) -> dict[tuple[str, str], float]:
        """Pairs of latest memories on one topic, one of them among `memories` (ids), by their word overlap."""
        index = self.deps.index
        close: dict[tuple[str, str], float] = {}  # pairs on one topic (first seen first), by their overlap
        if not memories:
            return close
        every = index.term_sets(project, SearchFilter(kinds=frozenset({"memory"})))
        await anyio.to_thread.run_sync(every.prepare, _ON_ONE_TOPIC)  # most of a second at 100k
        breathe = Breather()
        for memory_id in memories:
            await breathe()
            for other_id, overlap in sorted(every.similar(index.terms_of(memory_id), _ON_ONE_TOPIC).items()):
                if other_id != memory_id and overlap <= 0.85:
                    close.setdefault((min(memory_id, other_id), max(memory_id, other_id)), overlap)
        return close

    async def _contradictions(
        self, tx: Tx, project: str, close: dict[tuple[str, str], float]
    ) -> tuple[list[RelationView], int]:
        """The pairs newly flagged, and how many pairs the evidence shows in all (flagged before included);
        each pair as it stands now: both still latest, one negating or changing the other."""
        ids = sorted({i for pair in close for i in pair})
        latest = {m.id: m for m in await MemoryRepository(tx).get_many(ids, project) if m.is_latest}
        relations = RelationRepository(tx)
        nodes = MemoryNodes(MemoryRepository(tx), project)
        await nodes.learn(ids)
        analyse = self.deps.index.analyzer.terms
        found, pairs = [], 0
        for (source, target), overlap in close.items():
            first, second = latest.get(source), latest.get(target)
            if first is None or second is None or not conflict(first.content, second.content, analyse):
                continue
            pairs += 1
            # Flagged before, perhaps between older versions of the two (either way round): one edge is enough.
            ends = (nodes.ids(nodes.node(source)), nodes.ids(nodes.node(target)))
            if any([await relations.between(project, *pair, "contradicts") for pair in (ends, ends[::-1])]):
                continue
            now = self.now_iso()
            relation = Relation(
                id=new_id("relation"),
                project=project,
                source_id=source,
                target_id=target,
                type="contradicts",
                weight=round(overlap, 4),
                note="flagged by memory_reflect: same topic, one negates or changes the other",
                created_at=now,
                updated_at=now,
            )
            await relations.upsert(relation)
            tx.changed("relation", relation.id, "create")
            found.append(relation_view(relation))
        return found, pairs

    async def _model_rules(self, tx: Tx, project: str, text: str, evidence: list[str]) -> list[tuple[Lesson, bool]]:
        scrub = self.scrubber()
        rules = _rule_lines(scrub.text(text))
        return [
            await self._learn_once(
                tx, project, shorten(rule, 400), kind="lesson", context=None, evidence=evidence, via="sampling"
            )
            for rule in [r for r in rules if len(r) >= 8 and says_something(r)][:5]
        ]

    async def _learn_anti_pattern(self, tx: Tx, project: str, finding: Finding) -> tuple[Lesson, bool]:
        """Learn a recurring error, or count it toward the anti-pattern it is another case of, whichever
        path (this one, or failed outcomes) drew that; returns it and whether it changed."""
        known = await anti_patterns_for(tx, project, finding.task_type)
        analyzer = self.deps.index.analyzer
        existing = same_problem(
            known,
            lambda text: compared_terms(analyzer.terms, text),
            finding.error or finding.content,
            [*finding.evidence, *finding.outcomes],
            self.settings.similarity,
        )
        if existing is None:
            return await self._learn_finding(tx, project, finding)
        seen = evidence_of(existing)
        if set(finding.evidence) <= seen:
            return existing, False
        evidence = sorted(seen | set(finding.evidence))
        fix = fix_of(existing) or finding.fix
        if not from_outcomes(existing):
            lesson, *_ = await self.lessons.learn(
                tx,
                project,
                existing.content,
                kind="anti_pattern",
                task_type=existing.task_type,
                context=seen_context(len(evidence), fix),
                source={"evidence": evidence, "via": "memory_reflect"},
            )
            return lesson, True
        # Outcomes count its failures and decide whether it holds: a sighting reinforces it, but
        # does not undo a retirement (its strategy mostly works) nor change its counts.
        source = existing.source | {"evidence": evidence} | ({"fix": fix} if fix else {})
        alternative = source.get("alternative")
        now = self.now_iso()
        lesson = existing.model_copy(
            update={
                "confidence": reinforced(self.lessons.confidence(existing)),
                "reinforcements": existing.reinforcements + 1,
                "last_reinforced_at": now,
                "decayed_at": None,
                "source": source,
                "context": why_bad(
                    source_count(source, "failures"),
                    error_of(existing),
                    alternative if isinstance(alternative, str) else None,
                    fix,
                    tried_of(existing),
                    existing.content,
                ),
                "updated_at": now,
            }
        )
        await self.lessons.store(tx, lesson, "reinforce")
        return lesson, lesson.deleted_at is None

    async def _learn_finding(self, tx: Tx, project: str, finding: Finding) -> tuple[Lesson, bool]:
        return await self._learn_once(
            tx,
            project,
            finding.content,
            kind=finding.kind,
            context=finding.context,
            evidence=finding.evidence,
            confidence=finding.confidence,
            task_type=finding.task_type,
            share=finding.share,
        )

    async def _learn_once(
        self,
        tx: Tx,
        project: str,
        content: str,
        *,
        kind: str,
        context: str | None,
        evidence: list[str],
        confidence: float | None = None,
        task_type: str | None = None,
        share: float | None = None,
        via: str = "memory_reflect",
    ) -> tuple[Lesson, bool]:
        """Learn a derived lesson unless this very evidence was already counted; returns it and whether it changed.

        `share` is a heuristic's success share by its evidence, kept so that consolidation can tell
        whether it still holds once time has decayed its confidence.
        """
        existing = await find_twin(tx, project, content, kind, task_type)
        known = set(existing.source.get("evidence", [])) if existing is not None else set()
        if existing is not None and set(evidence) <= known:
            return existing, False
        source: dict[str, object] = {"evidence": sorted(known | set(evidence)), "via": via}
        if share is not None:
            source["share"] = round(share, 4)
        lesson, *_ = await self.lessons.learn(
            tx,
            project,
            content,
            kind=kind,
            task_type=task_type,
            context=context,
            confidence=confidence,
            source=source,
        )
        return lesson, True
