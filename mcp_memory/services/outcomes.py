"""Outcomes: what happened when a task was attempted, and what the service learns from it.

Recording an outcome derives, in the same transaction (thresholds are settings):
- a heuristic while at least `heuristic_min_outcomes` outcomes of the task type used a similar
  strategy and more than `heuristic_min_success` of them succeeded (confidence = that success
  share); once the evidence stops supporting it, it is soft-deleted, and it comes back only when
  the evidence holds again. It stays the heuristic of the strategy it was drawn for: a similar
  strategy counts toward it without taking its place;
- an anti-pattern once `anti_pattern_min_failures` failures share a similar error, with the best
  successful strategy of the task type that is not one of the failing ones as the better
  alternative (confidence `anti_pattern_confidence` of the failures it counts). It keeps the ids
  of the failures it counts (each counts toward one anti-pattern), and a failure with an error like
  one of theirs, or like that of reflect's anti-pattern it takes over, adds to it; so do failures
  that make the very anti-pattern it is (the strategy it names, failing with another error): one
  warning counts all of them. A strategy is never both recommended and warned against: while the
  strategy an anti-pattern names qualifies for a heuristic (its successes outweigh its failures as
  above), the anti-pattern is soft-deleted, and it comes back once the strategy no longer qualifies;
- "works" rules from the successes of successful outcomes scoring >= `works_rule_score` (a failure
  vouches for nothing), and "avoid" rules from the mistakes of outcomes scoring < `avoid_rule_score`
  (a mistake is worth avoiding even in a task that got there in the end), at most
  `max_rules_per_task_type` each;
- mistake cards merged by (type, task, correct decision) with a seen count.
Similar means Jaccard overlap of analysed words >= `similarity`; a text without any analysable
word (only stop words) is similar to nothing. Strategies are compared with what each says not to
do told apart ("without resetting" is not "reset"; services/lesson_identity.py), and two alike
in wording but opposite in record (one mostly worked, the other mostly failed) are two strategies
(services/strategies.py). An anti-pattern names a strategy only while every failure it counts
tried that one; failures of different strategies make it one about their error, listing what was
tried.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.db import Tx
from mcp_memory.errors import InvalidInputError
from mcp_memory.ids import new_id
from mcp_memory.models.learning import DerivedLessons, OutcomeResult
from mcp_memory.models.records import Lesson, Outcome
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.outcomes import OutcomeRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.services.common import Deps, Scrubber, Service, jaccard
from mcp_memory.services.compress import shorten
from mcp_memory.services.lesson_identity import (
    FROM_ERROR,
    RULE_OUTCOMES,
    anti_patterns_for,
    evidence_of,
    find_twin,
    fingerprint,
    fix_of,
    from_outcomes,
    heuristic_strategy,
    named_strategy,
    rename,
    rule_outcomes,
    same_problem,
    tried_of,
    why_bad,
)
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.mistake_cards import MistakeCardInput, clean_card, record_mistake_cards
from mcp_memory.services.strategies import Strategies, Tally
from mcp_memory.services.task_types import infer_task_type

SUCCESS_SCORE = 0.5
"""A score at or above this counts as success when only a score is given."""
FAILED = "failed_outcomes"
"""Where an anti-pattern keeps the ids of the failures it counts."""
TRIED_CHARS = 80
"""How much of each strategy its failures tried an anti-pattern about an error quotes."""


def anti_pattern_confidence(failures: int) -> float:
    """How sure an anti-pattern is, from how many failures it counts."""
    return min(0.95, 0.5 + 0.1 * (failures - 1))


def worked(tally: Tally) -> str:
    """A heuristic's context: how its strategy has gone."""
    return f"Worked in {tally.successes} of {tally.outcomes} attempts with a similar strategy."


def source_count(source: dict[str, object], key: str) -> int:
    """A count kept in a derived lesson's source (0 when absent, negative or not a whole number)."""
    value = source.get(key)
    return value if isinstance(value, int) and value > 0 else 0


class OutcomeService(Service):
    """Records outcomes and derives heuristics, anti-patterns, rules and mistake cards from them."""

    def __init__(self, deps: Deps, lessons: LessonService) -> None:
        super().__init__(deps)
        self.lessons = lessons
        self.strategies = Strategies(deps.index, deps.settings)

    async def record(
        self,
        project: str,
        task: str,
        *,
        task_type: str | None = None,
        success: bool | None = None,
        score: float | None = None,
        steps: Sequence[str] = (),
        strategy: str | None = None,
        duration_s: float | None = None,
        error: str | None = None,
        feedback: str | None = None,
        mistakes: Sequence[str] = (),
        successes: Sequence[str] = (),
        mistake_cards: Sequence[MistakeCardInput] = (),
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> OutcomeResult:
        """Store an outcome and derive what it teaches, all in one transaction."""
        if success is None and score is None:
            raise InvalidInputError("success", "give success (true/false) and/or score (0-1)")
        scrub = self.scrubber()
        task = scrub.required("task", task)
        now = self.now_iso()
        agent = scrub.optional(agent_id or self.settings.agent_id)
        cards = [clean_card(card, scrub, f"mistake_cards.{i}") for i, card in enumerate(mistake_cards)]
        async with self.db.transaction("memory_outcome_record", actor=agent, project=project) as tx:
            if session_id is not None:
                session_id = (await SessionRepository(tx).get(session_id, project)).id
            inferred = task_type is None
            kind = task_type or await self._infer_task_type(tx, project, task)
            outcome = Outcome(
                id=new_id("outcome"),
                project=project,
                agent_id=agent,
                session_id=session_id,
                task=task,
                task_type=kind,
                task_type_inferred=inferred,
                success=success if success is not None else (score or 0.0) >= SUCCESS_SCORE,
                score=score if score is not None else (1.0 if success else 0.0),
                steps=_items(scrub, "steps", steps),
                strategy=scrub.optional(strategy),
                duration_s=duration_s,
                error=scrub.optional(error),
                feedback=scrub.optional(feedback),
                mistakes=_items(scrub, "mistakes", mistakes),
                successes=_items(scrub, "successes", successes),
                created_at=now,
            )
            await OutcomeRepository(tx).add(outcome)
            tx.changed("outcome", outcome.id, "create")
            # Every outcome of the task type that can count, however many: a window of the latest would
            # retire a heuristic, or miss a recurring failure, once enough other outcomes came between.
            peers = await OutcomeRepository(tx).evidence(outcome.project, outcome.task_type)
            heuristics = await self._heuristic(tx, outcome, peers)
            restored = await self._weigh_named_strategies(tx, outcome, peers)
            derived = DerivedLessons(
                heuristics=heuristics,
                anti_patterns=list(dict.fromkeys([*restored, *await self._anti_pattern(tx, outcome, peers)])),
                rules=await self._rules(tx, outcome),
                mistake_cards=await record_mistake_cards(
                    tx, outcome, cards, self.now_iso(), self.settings.max_mistake_cards
                ),
            )
        return OutcomeResult(
            id=outcome.id,
            task_type=kind,
            task_type_inferred=inferred,
            success=bool(outcome.success),
            score=float(outcome.score or 0.0),
            derived=derived,
            redacted=scrub.summary(),
        )

    async def _infer_task_type(self, tx: Tx, project: str, task: str) -> str:
        """The task type of `task`, judged against this project's recent outcomes (services/task_types.py)."""
        return infer_task_type(self.strategies.words, task, await OutcomeRepository(tx).recent(project, limit=200))

    # -- heuristics and anti-patterns -------------------------------------------------------------

    async def _heuristic(self, tx: Tx, outcome: Outcome, peers: Sequence[Outcome]) -> list[str]:
        """Draw, refresh, restore or retire the heuristic of this outcome's strategy."""
        if not outcome.strategy or not self.strategies.words(outcome.strategy):
            return []
        existing = await self._heuristic_of(tx, outcome, outcome.strategy, peers)
        # A heuristic is of the strategy it was drawn for: a similar one counts toward it, but does not
        # become its strategy (its tally would drift to that one's record, away from what its text says).
        strategy = (heuristic_strategy(existing) if existing is not None else "") or outcome.strategy
        live = self.strategies.tally(peers, strategy)
        source = {"strategy": strategy, "outcomes": live.outcomes, "successes": live.successes}
        tally = _with_pruned(live, existing)
        context = worked(tally)
        if not self.strategies.holds(tally):
            if existing is not None:
                await self.lessons.retire(tx, existing, confidence=tally.share, source=source, context=context)
            return []
        if existing is not None:
            await self._update_derived(tx, existing, confidence=tally.share, source=source, context=context)
            return [existing.id]
        lesson, *_ = await self.lessons.learn(
            tx,
            outcome.project,
            f"For {outcome.task_type} tasks: {outcome.strategy}",
            kind="heuristic",
            task_type=outcome.task_type,
            confidence=tally.share,
            context=context,
            source=source,
        )
        return [lesson.id]

    async def _weigh_named_strategies(self, tx: Tx, outcome: Outcome, peers: Sequence[Outcome]) -> list[str]:
        """Soft-delete the anti-patterns whose strategy this outcome has just shown to mostly work, and
        restore those retired for it once it no longer does; returns the ids restored."""
        if not outcome.strategy:
            return []
        records = self.strategies.records(peers)
        restored = []
        found = await LessonRepository(tx).find(
            [outcome.project], kinds=["anti_pattern"], task_type=outcome.task_type, include_deleted=True
        )
        for lesson in found:
            named = named_strategy(lesson)
            if not named or not self.strategies.same(named, outcome.strategy, records):
                continue
            holds = self.strategies.holds(await self._strategy_tally(tx, outcome, peers, named))
            if lesson.deleted_at is None and holds:
                await self.lessons.retire(tx, lesson)
            elif lesson.deleted_at is not None and not holds and self._stands_alone(lesson):
                stamp = self.now_iso()
                await self.lessons.store(
                    tx, lesson.model_copy(update={"deleted_at": None, "updated_at": stamp}), "restore"
                )
                restored.append(lesson.id)
        return restored

    def _stands_alone(self, lesson: Lesson) -> bool:
        """Whether a soft-deleted anti-pattern holds on its own failures, its strategy's record aside:
        drawn from enough of them and not faded with time (a lesson decay retired stays retired)."""
        live = lesson.model_copy(update={"deleted_at": None})
        return (
            from_outcomes(lesson)
            and source_count(lesson.source, "failures") >= self.settings.anti_pattern_min_failures
            and not self.lessons.faded(live, self.lessons.confidence(live))
        )

    async def _anti_pattern(self, tx: Tx, outcome: Outcome, peers: Sequence[Outcome]) -> list[str]:
        """Draw, strengthen, restore or retire the anti-pattern of this failure's error."""
        if outcome.success or not outcome.error:
            # A success may give existing anti-patterns of its type a better alternative.
            return await self._offer_alternative(tx, outcome, peers)
        if not self.strategies.words(outcome.error):
            return []
        alike = [o.id for o in peers if not o.success and o.error and self.strategies.similar(outcome.error, o.error)]
        known = await anti_patterns_for(tx, outcome.project, outcome.task_type)
        existing = same_problem(known, self.strategies.words, outcome.error, alike, self.settings.similarity)
        failed, named = await self._counted(tx, outcome, peers, known, existing, alike)
        if existing is None:
            # These failures make an anti-pattern already drawn from others (the strategy it names, failing
            # with another error): one warning, counting them all (learning it again would only reinforce it).
            twin = await find_twin(tx, outcome.project, _avoid(outcome, named), "anti_pattern", outcome.task_type)
            if twin is not None and from_outcomes(twin):
                existing = twin
                failed, named = await self._counted(tx, outcome, peers, known, existing, alike)
        ours = existing is not None and from_outcomes(existing)
        failures = len(failed)
        failing = [o for o in peers if o.id in failed]
        tried = (
            []
            if named
            else list(dict.fromkeys(shorten(o.strategy, TRIED_CHARS) for o in reversed(failing) if o.strategy))[:5]
        )
        alternative = self.strategies.better(peers, failing, named)
        fix = fix_of(existing) if existing is not None else None
        source = {"error": outcome.error, "failures": failures, "alternative": alternative, FAILED: sorted(failed)}
        source |= ({"tried": tried} if tried else {}) | ({"fix": fix} if fix else {})
        confidence = anti_pattern_confidence(failures)
        # A strategy whose record qualifies it as a heuristic is not one to avoid (see the module doc).
        holds = failures >= self.settings.anti_pattern_min_failures and not (
            named and self.strategies.holds(await self._strategy_tally(tx, outcome, peers, named))
        )
        if existing is not None and not ours:
            if not holds:
                return []  # reflect's finding stands on its own sightings until the failures add up
            # Outcomes take it over: it names the failing strategy and the task type from now on.
            content = f"Avoid in {outcome.task_type} tasks: {named}" if named else None
            existing = await rename(tx, existing, content or existing.content, outcome.task_type)
        elif existing is not None and named is None and named_strategy(existing) is not None:
            # Failures of other strategies joined it: what they share is the error, not that strategy.
            pattern = FROM_ERROR + shorten(outcome.error, 160)
            existing = await rename(tx, existing, f"Avoid in {outcome.task_type} tasks: {pattern}", outcome.task_type)
        if existing is not None:
            context = why_bad(failures, outcome.error, alternative, fix, tried, existing.content)
            if holds:
                await self._update_derived(tx, existing, confidence=confidence, source=source, context=context)
                return [existing.id]
            await self.lessons.retire(tx, existing, confidence=confidence, source=source, context=context)
            return []
        if not holds:
            return []
        content = _avoid(outcome, named)
        lesson, *_ = await self.lessons.learn(
            tx,
            outcome.project,
            content,
            kind="anti_pattern",
            task_type=outcome.task_type,
            confidence=confidence,
            context=why_bad(failures, outcome.error, alternative, fix, tried, content),
            source=source,
        )
        return [lesson.id]

    async def _counted(
        self,
        tx: Tx,
        outcome: Outcome,
        peers: Sequence[Outcome],
        known: Sequence[Lesson],
        existing: Lesson | None,
        alike: Sequence[str],
    ) -> tuple[set[str], str | None]:
        """The failures the anti-pattern of this failure counts (those `existing` counts, and the `alike`
        ones no other anti-pattern does), and the strategy it names, if one."""
        # Each failure counts toward one anti-pattern only, so the counts of a task type add up.
        claimed = {i for o in known if o is not existing for i in evidence_of(o, FAILED)}
        counted = evidence_of(existing, FAILED) if existing is not None else set()
        # A failure forgotten since (on another copy, say) no longer counts.
        counted = await OutcomeRepository(tx).on_record(sorted(counted)) if counted else counted
        failed = counted | (set(alike) - claimed)
        failing = [o for o in peers if o.id in failed]
        # It names a strategy only when every failure it counts tried that one; else it is about the error.
        ours = existing is not None and from_outcomes(existing)
        named = self.strategies.shared_by(
            named_strategy(existing) if existing is not None and ours else outcome.strategy, failing
        )
        return failed, named

    async def _offer_alternative(self, tx: Tx, outcome: Outcome, peers: Sequence[Outcome]) -> list[str]:
        """Point the active anti-patterns of the task type at the best alternative now on record."""
        if not outcome.success or not outcome.strategy:
            return []
        updated = []
        for lesson in await self._anti_patterns(tx, outcome):
            if not from_outcomes(lesson):
                continue  # reflect's: no failing strategy to offer an alternative to
            error, ids = str(lesson.source.get("error", "")), evidence_of(lesson, FAILED)
            # One drawn before anti-patterns kept their evidence is known by its error alone.
            failures = [
                o
                for o in peers
                if o.id in ids or (not ids and not o.success and self.strategies.similar(error, o.error))
            ]
            alternative = self.strategies.better(peers, failures, named_strategy(lesson))
            if alternative != lesson.source.get("alternative"):
                source = lesson.source | {"alternative": alternative}
                context = why_bad(
                    source_count(lesson.source, "failures"),
                    error,
                    alternative,
                    fix_of(lesson),
                    tried_of(lesson),
                    lesson.content,
                )
                await self.lessons.store(
                    tx,
                    lesson.model_copy(update={"source": source, "context": context, "updated_at": self.now_iso()}),
                    "update",
                )
                updated.append(lesson.id)
        return updated

    async def _anti_patterns(self, tx: Tx, outcome: Outcome) -> list[Lesson]:
        """The active anti-patterns of the outcome's task type."""
        return await LessonRepository(tx).find([outcome.project], kinds=["anti_pattern"], task_type=outcome.task_type)

    # -- rules and mistake cards ------------------------------------------------------------------

    async def _rules(self, tx: Tx, outcome: Outcome) -> list[str]:
        s = self.settings
        score = outcome.score or 0.0
        if outcome.success and score >= s.works_rule_score:
            kind, items = "rule_works", outcome.successes
        elif score < s.avoid_rule_score:
            kind, items = "rule_avoid", outcome.mistakes
        else:
            return []
        ids: list[str] = []
        seen: set[str] = set()
        for item in items:
            key = fingerprint(item, kind, outcome.task_type)
            if key in seen:  # the same rule twice in one outcome is one piece of evidence
                continue
            seen.add(key)

            def evidence(twin: Lesson | None) -> dict[str, object]:
                if twin is None:
                    return {"outcome": outcome.id}
                # said again: every outcome that says it is its evidence, not the latest alone
                said = [i for i in rule_outcomes(twin.source) if i != outcome.id]
                return {"outcome": outcome.id, RULE_OUTCOMES: [*said, outcome.id]}

            lesson, *_ = await self.lessons.learn(
                tx, outcome.project, item, kind=kind, task_type=outcome.task_type, source=evidence
            )
            ids.append(lesson.id)
        dropped = await self._bound_rules(tx, outcome.project, kind, outcome.task_type)
        return [i for i in ids if i not in dropped]  # what holds: a rule bounded out at once was not learned

    async def _bound_rules(self, tx: Tx, project: str, kind: str, task_type: str) -> set[str]:
        """Soft-delete the weakest rules beyond `max_rules_per_task_type`; returns their ids."""
        rules = await LessonRepository(tx).find([project], kinds=[kind], task_type=task_type)
        if len(rules) <= self.settings.max_rules_per_task_type:
            return set()
        now = self.now()
        # Strongest first; rules alike in strength and time (one outcome's, made at once) in the order
        # they were made, so the first the caller listed is kept (a stable sort keeps ties in order).
        made = sorted(rules, key=lambda r: (r.created_at, r.id))
        ranked = sorted(made, key=lambda r: (self.lessons.confidence(r, now), r.last_reinforced_at), reverse=True)
        dropped = ranked[self.settings.max_rules_per_task_type :]
        for rule in dropped:
            await self.lessons.store(tx, rule.model_copy(update={"deleted_at": self.now_iso()}), "soft_delete")
        return {rule.id for rule in dropped}

    async def _strategy_tally(self, tx: Tx, outcome: Outcome, peers: Sequence[Outcome], strategy: str) -> Tally:
        """A strategy's record in the outcome's task type, as its heuristic counts it: the stored
        outcomes, and those consolidation pruned."""
        return _with_pruned(
            self.strategies.tally(peers, strategy), await self._heuristic_of(tx, outcome, strategy, peers)
        )

    async def _heuristic_of(self, tx: Tx, outcome: Outcome, strategy: str, peers: Sequence[Outcome]) -> Lesson | None:
        """The heuristic of the task type whose strategy is the most like this one, if the same
        strategy (soft-deleted too: evidence that holds again restores a lesson rather than repeating it)."""
        found = await LessonRepository(tx).find(
            [outcome.project], kinds=["heuristic"], task_type=outcome.task_type, include_deleted=True
        )
        mine, records = self.strategies.strategy_words(strategy), self.strategies.records(peers)
        alike = [
            (jaccard(mine, self.strategies.strategy_words(theirs)), h)
            for h in reversed(found)
            if self.strategies.same(strategy, theirs := heuristic_strategy(h), records)
        ]
        return max(alike, key=lambda pair: pair[0], default=(0.0, None))[1]

    async def _update_derived(
        self, tx: Tx, lesson: Lesson, *, confidence: float, source: dict[str, object], context: str | None = None
    ) -> None:
        """Refresh a derived lesson from the latest evidence: its confidence is the evidence, not a decay."""
        now = self.now_iso()
        await self.lessons.store(
            tx,
            lesson.model_copy(
                update={
                    "confidence": confidence,
                    "reinforcements": lesson.reinforcements + 1,
                    "last_reinforced_at": now,
                    "decayed_at": None,
                    "deleted_at": None,
                    "source": lesson.source | source,
                    "context": context or lesson.context,
                    "updated_at": now,
                }
            ),
            "reinforce",
        )


def _avoid(outcome: Outcome, named: str | None) -> str:
    """The text of the anti-pattern of a failure: the strategy it names, else the approach that led to its error."""
    return f"Avoid in {outcome.task_type} tasks: {named or FROM_ERROR + shorten(outcome.error or '', 160)}"


def _items(scrub: Scrubber, field: str, values: Sequence[str]) -> list[str]:
    """Scrubbed list items, each refused (named by its position) when nothing but blanks or private parts."""
    return [scrub.required(f"{field}.{i}", value).strip() for i, value in enumerate(values)]


def _with_pruned(live: Tally, heuristic: Lesson | None) -> Tally:
    """A strategy's tally of stored outcomes, plus those consolidation pruned: their tally lives on
    the strategy's heuristic (pruned outcomes must still count, or a strategy that worked for months
    reads as one that only failed)."""
    if heuristic is None:
        return live
    return Tally(
        live.outcomes + source_count(heuristic.source, "pruned_outcomes"),
        live.successes + source_count(heuristic.source, "pruned_successes"),
    )
