"""Outcomes: what happened when a task was attempted, and what the service learns from it.

Recording an outcome derives, in the same transaction (thresholds are settings):
- a heuristic once `heuristic_min_outcomes` outcomes of the task type used a similar strategy and
  more than `heuristic_min_success` of them succeeded (confidence = that success share);
- an anti-pattern once `anti_pattern_min_failures` failures share a similar error, with the best
  successful strategy of the task type as the better alternative when there is one;
- "works" rules from the successes of outcomes scoring >= `works_rule_score` and "avoid" rules
  from the mistakes of those scoring < `avoid_rule_score`, at most `max_rules_per_task_type` each;
- mistake cards merged by (type, task, correct decision) with a seen count.
Similar means Jaccard overlap of analysed words >= `similarity`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_memory.db import Tx
from mcp_memory.errors import InvalidInputError
from mcp_memory.ids import new_id
from mcp_memory.models.learning import DerivedLessons, OutcomeResult
from mcp_memory.models.records import Lesson, MistakeCard, Outcome
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository, OutcomeRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.services.common import Deps, Scrubber, Service
from mcp_memory.services.compress import shorten
from mcp_memory.services.lessons import LessonService

SUCCESS_SCORE = 0.5
"""A score at or above this counts as success when only a score is given."""

# Checked in order; the first task type whose words appear in the task wins.
_TASK_TYPE_WORDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("bugfix", frozenset({"fix", "bug", "error", "crash", "except", "broken", "regress", "fail", "issu"})),
    ("testing", frozenset({"test", "pytest", "coverag", "unittest", "spec"})),
    ("refactor", frozenset({"refactor", "renam", "cleanup", "restructur", "simplifi", "extract"})),
    ("documentation", frozenset({"doc", "readm", "document", "docstr", "comment", "changelog"})),
    ("deployment", frozenset({"deploy", "releas", "ci", "pipelin", "docker", "kubernet", "publish"})),
    ("performance", frozenset({"perform", "slow", "speed", "optim", "latenc", "faster", "profil"})),
    ("research", frozenset({"investig", "research", "analys", "analyz", "explor", "compar", "evalu"})),
    ("configuration", frozenset({"config", "configur", "setup", "instal", "environ", "upgrad"})),
    ("feature", frozenset({"add", "implement", "build", "creat", "support", "new", "featur"})),
)


@dataclass(frozen=True, slots=True)
class MistakeCardInput:
    """A mistake card as the caller reports it."""

    type: str
    correct_decision: str
    task: str | None = None
    wrong_decision: str | None = None
    why: str | None = None


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Overlap of two word sets (1.0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


class OutcomeService(Service):
    """Records outcomes and derives heuristics, anti-patterns, rules and mistake cards from them."""

    def __init__(self, deps: Deps, lessons: LessonService) -> None:
        super().__init__(deps)
        self.lessons = lessons

    def words(self, text: str | None) -> frozenset[str]:
        """The analysed word set similarity is measured on."""
        return frozenset(self.deps.index.analyzer.terms(text or ""))

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
        agent = agent_id or self.settings.agent_id
        cards = [_clean_card(card, scrub) for card in mistake_cards]
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
                steps=scrub.many(steps) or [],
                strategy=scrub.optional(strategy),
                duration_s=duration_s,
                error=scrub.optional(error),
                feedback=scrub.optional(feedback),
                mistakes=scrub.many(mistakes) or [],
                successes=scrub.many(successes) or [],
                created_at=now,
            )
            await OutcomeRepository(tx).add(outcome)
            tx.changed("outcome", outcome.id, "create")
            derived = DerivedLessons(
                heuristics=await self._heuristic(tx, outcome),
                anti_patterns=await self._anti_pattern(tx, outcome),
                rules=await self._rules(tx, outcome),
                mistake_cards=await self._mistake_cards(tx, outcome, cards),
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
        """The type of the most similar past task, else the first keyword family that matches."""
        words = self.words(task)
        best, best_type = 0.0, None
        for past in await OutcomeRepository(tx).recent(project, limit=200):
            if not past.task_type_inferred:
                overlap = jaccard(words, self.words(past.task))
                if overlap > best:
                    best, best_type = overlap, past.task_type
        if best_type is not None and best >= 0.6:
            return best_type
        for name, stems in _TASK_TYPE_WORDS:
            if words & stems:
                return name
        return "general"

    async def _heuristic(self, tx: Tx, outcome: Outcome) -> list[str]:
        if not outcome.strategy:
            return []
        s = self.settings
        strategy = self.words(outcome.strategy)
        peers = await OutcomeRepository(tx).recent(outcome.project, outcome.task_type)
        similar = [o for o in peers if o.strategy and jaccard(strategy, self.words(o.strategy)) >= s.similarity]
        share = sum(1 for o in similar if o.success) / len(similar)
        existing = await self._similar_lesson(tx, outcome, "heuristic", "strategy", strategy)
        source = {"strategy": outcome.strategy, "outcomes": len(similar), "successes": round(share * len(similar))}
        if existing is not None:
            await self._update_derived(tx, existing, confidence=share, source=source)
            return [existing.id]
        if len(similar) < s.heuristic_min_outcomes or share <= s.heuristic_min_success:
            return []
        lesson, *_ = await self.lessons.learn(
            tx,
            outcome.project,
            f"For {outcome.task_type} tasks: {outcome.strategy}",
            kind="heuristic",
            task_type=outcome.task_type,
            confidence=share,
            context=f"Worked in {source['successes']} of {len(similar)} attempts with a similar strategy.",
            source=source,
        )
        return [lesson.id]

    async def _anti_pattern(self, tx: Tx, outcome: Outcome) -> list[str]:
        s = self.settings
        peers = await OutcomeRepository(tx).recent(outcome.project, outcome.task_type)
        better = max(
            (o for o in peers if o.success and o.strategy), key=lambda o: (o.score or 0.0, o.created_at), default=None
        )
        if outcome.success or not outcome.error:
            # A success may give existing anti-patterns of its type the better alternative they lacked.
            return await self._offer_alternative(tx, outcome, better)
        error = self.words(outcome.error)
        failures = [
            o for o in peers if not o.success and o.error and jaccard(error, self.words(o.error)) >= s.similarity
        ]
        existing = await self._similar_lesson(tx, outcome, "anti_pattern", "error", error)
        alternative = better.strategy if better else None
        source = {"error": outcome.error, "failures": len(failures), "alternative": alternative}
        context = _why_bad(len(failures), outcome.error, alternative)
        confidence = min(0.95, 0.5 + 0.1 * (len(failures) - 1))
        if existing is not None:
            await self._update_derived(tx, existing, confidence=confidence, source=source, context=context)
            return [existing.id]
        if len(failures) < s.anti_pattern_min_failures:
            return []
        pattern = outcome.strategy or "the approach that led to: " + shorten(outcome.error, 160)
        lesson, *_ = await self.lessons.learn(
            tx,
            outcome.project,
            f"Avoid in {outcome.task_type} tasks: {pattern}",
            kind="anti_pattern",
            task_type=outcome.task_type,
            confidence=confidence,
            context=context,
            source=source,
        )
        return [lesson.id]

    async def _offer_alternative(self, tx: Tx, outcome: Outcome, better: Outcome | None) -> list[str]:
        if not outcome.success or better is None or better.id != outcome.id:
            return []
        updated = []
        for lesson in await LessonRepository(tx).find(
            [outcome.project], kinds=["anti_pattern"], task_type=outcome.task_type
        ):
            if lesson.source.get("alternative") != outcome.strategy:
                source = lesson.source | {"alternative": outcome.strategy}
                context = _why_bad(
                    int(lesson.source.get("failures", 0)), str(lesson.source.get("error", "")), outcome.strategy
                )
                await self.lessons.store(
                    tx,
                    lesson.model_copy(update={"source": source, "context": context, "updated_at": self.now_iso()}),
                    "update",
                )
                updated.append(lesson.id)
        return updated

    async def _rules(self, tx: Tx, outcome: Outcome) -> list[str]:
        s = self.settings
        score = outcome.score or 0.0
        if score >= s.works_rule_score:
            kind, items = "rule_works", outcome.successes
        elif score < s.avoid_rule_score:
            kind, items = "rule_avoid", outcome.mistakes
        else:
            return []
        ids = []
        for item in items:
            lesson, *_ = await self.lessons.learn(
                tx, outcome.project, item, kind=kind, task_type=outcome.task_type, source={"outcome": outcome.id}
            )
            ids.append(lesson.id)
        await self._bound_rules(tx, outcome.project, kind, outcome.task_type)
        return ids

    async def _bound_rules(self, tx: Tx, project: str, kind: str, task_type: str) -> None:
        """Soft-delete the weakest rules beyond `max_rules_per_task_type`."""
        rules = await LessonRepository(tx).find([project], kinds=[kind], task_type=task_type)
        if len(rules) <= self.settings.max_rules_per_task_type:
            return
        now = self.now()
        ranked = sorted(rules, key=lambda r: (self.lessons.confidence(r, now), r.last_reinforced_at), reverse=True)
        for rule in ranked[self.settings.max_rules_per_task_type :]:
            await self.lessons.store(tx, rule.model_copy(update={"deleted_at": self.now_iso()}), "soft_delete")

    async def _mistake_cards(self, tx: Tx, outcome: Outcome, cards: Sequence[MistakeCardInput]) -> list[str]:
        repo = MistakeCardRepository(tx)
        now = self.now_iso()
        ids = []
        for card in cards:
            task = card.task or outcome.task
            key = _merge_key(card.type, task, card.correct_decision)
            existing = await repo.by_key(outcome.project, key)
            if existing is not None:
                await repo.seen_again(existing.id, now, card.wrong_decision, card.why)
                tx.changed("mistake_card", existing.id, "seen")
                card_id = existing.id
            else:
                card_id = new_id("mistake_card")
                await repo.add(
                    MistakeCard(
                        id=card_id,
                        project=outcome.project,
                        merge_key=key,
                        task_type=outcome.task_type,
                        type=card.type,
                        task=task,
                        wrong_decision=card.wrong_decision,
                        correct_decision=card.correct_decision,
                        why=card.why,
                        first_seen_at=now,
                        last_seen_at=now,
                        created_at=now,
                        updated_at=now,
                    )
                )
                tx.changed("mistake_card", card_id, "create")
            await repo.link(outcome.id, card_id)
            ids.append(card_id)
        dropped = await repo.beyond(outcome.project, self.settings.max_mistake_cards)
        await repo.delete(dropped)
        for card_id in dropped:
            tx.changed("mistake_card", card_id, "delete")
        return [i for i in ids if i not in dropped]

    async def _similar_lesson(
        self, tx: Tx, outcome: Outcome, kind: str, key: str, words: frozenset[str]
    ) -> Lesson | None:
        """The derived lesson of this kind and task type whose source text is most similar, if similar enough."""
        best, best_overlap = None, self.settings.similarity
        for lesson in await LessonRepository(tx).find(
            [outcome.project], kinds=[kind], task_type=outcome.task_type, include_deleted=True
        ):
            overlap = jaccard(words, self.words(str(lesson.source.get(key, ""))))
            if overlap >= best_overlap:
                best, best_overlap = lesson, overlap
        return best

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


def _why_bad(failures: int, error: str, alternative: str | None) -> str:
    why = f"Failed {failures} times with errors like: {shorten(error, 200)}"
    return f"{why}. Better: {alternative}" if alternative else f"{why}. No successful alternative recorded yet."


def _merge_key(kind: str, task: str, correct: str) -> str:
    normal = "\x1f".join(" ".join(part.casefold().split()) for part in (kind, task, correct))
    return hashlib.sha256(normal.encode()).hexdigest()


def _clean_card(card: MistakeCardInput, scrub: Scrubber) -> MistakeCardInput:
    return MistakeCardInput(
        type=card.type,
        correct_decision=scrub.text(card.correct_decision),
        task=scrub.optional(card.task),
        wrong_decision=scrub.optional(card.wrong_decision),
        why=scrub.optional(card.why),
    )
