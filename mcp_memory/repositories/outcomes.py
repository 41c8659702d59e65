"""SQL for outcomes and mistake cards."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from mcp_memory.db import Row
from mcp_memory.models.records import MistakeCard, Outcome
from mcp_memory.repositories.base import ID_CHUNK, Repository, chunked, dump_json, placeholders, row_dict

_OUTCOME_COLUMNS = (
    "id, project, agent_id, session_id, task, task_type, task_type_inferred, success, score, steps, strategy, "
    "duration_s, error, feedback, mistakes, successes, created_at"
)
_EVIDENCE_COLUMNS = (
    "id, project, agent_id, session_id, task, task_type, task_type_inferred, success, score, strategy, "
    "duration_s, error, created_at"
)
_CARD_COLUMNS = (
    "id, project, merge_key, task_type, type, task, wrong_decision, correct_decision, why, seen_count, "
    "first_seen_at, last_seen_at, created_at, updated_at"
)


def _outcome(row: Row) -> Outcome:
    return Outcome(**row_dict(row, ("steps", "mistakes", "successes"), ("success", "task_type_inferred")))


def _card(row: Row) -> MistakeCard:
    return MistakeCard(**row_dict(row))


class OutcomeRepository(Repository):
    """Outcomes (episodes) and the score figures derived from them."""

    async def add(self, o: Outcome) -> None:
        await self.conn.execute(
            f"INSERT INTO outcomes ({_OUTCOME_COLUMNS}) VALUES ({placeholders(17)})",
            (
                o.id,
                o.project,
                o.agent_id,
                o.session_id,
                o.task,
                o.task_type,
                int(o.task_type_inferred),
                None if o.success is None else int(o.success),
                o.score,
                dump_json(o.steps),
                o.strategy,
                o.duration_s,
                o.error,
                o.feedback,
                dump_json(o.mistakes),
                dump_json(o.successes),
                o.created_at,
            ),
        )

    async def get_many(self, ids: Sequence[str], project: str) -> list[Outcome]:
        rows = await self.fetch_in(
            f"SELECT {_OUTCOME_COLUMNS} FROM outcomes WHERE +project = ? AND id IN ({{ids}})", ids, (project,)
        )
        by_id = {r["id"]: _outcome(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def recent(self, project: str, task_type: str | None = None, limit: int = 200) -> list[Outcome]:
        """Most recent outcomes of a project (of one task type when given), newest first."""
        where, params = "project = ?", [project]
        if task_type is not None:
            where += " AND task_type = ?"
            params.append(task_type)
        rows = await self.conn.fetchall(
            f"SELECT {_OUTCOME_COLUMNS} FROM outcomes WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [_outcome(r) for r in rows]

    async def evidence(self, project: str, task_type: str) -> list[Outcome]:
        """Every outcome of a task type that names a strategy or an error (what heuristics and
        anti-patterns are drawn from), newest first; read without their lists (steps, mistakes,
        successes, left empty), which nothing drawn from a history compares, so a long one reads fast."""
        rows = await self.conn.fetchall(
            f"SELECT {_EVIDENCE_COLUMNS} FROM outcomes WHERE project = ? AND task_type = ? "
            "AND (coalesce(strategy, '') != '' OR coalesce(error, '') != '') ORDER BY created_at DESC, id DESC",
            (project, task_type),
        )
        return [Outcome(**row_dict(r, (), ("success", "task_type_inferred"))) for r in rows]

    async def in_session(self, session_id: str) -> list[Outcome]:
        rows = await self.conn.fetchall(
            f"SELECT {_OUTCOME_COLUMNS} FROM outcomes WHERE session_id = ? ORDER BY created_at, id", (session_id,)
        )
        return [_outcome(r) for r in rows]

    async def ids_in_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """Ids of the outcomes recorded in any of these sessions."""
        rows = await self.fetch_in("SELECT id FROM outcomes WHERE session_id IN ({ids}) ORDER BY id", session_ids)
        return [str(r[0]) for r in rows]

    async def between(self, project: str, since: str | None, until: str | None) -> list[Outcome]:
        rows = await self.conn.fetchall(
            f"SELECT {_OUTCOME_COLUMNS} FROM outcomes WHERE project = ? AND created_at >= coalesce(?, '') "
            "AND created_at <= coalesce(?, '9999') ORDER BY created_at, id",
            (project, since, until),
        )
        return [_outcome(r) for r in rows]

    async def older_than(self, project: str, before: str) -> list[Outcome]:
        rows = await self.conn.fetchall(
            f"SELECT {_OUTCOME_COLUMNS} FROM outcomes WHERE project = ? AND created_at < ? ORDER BY created_at, id",
            (project, before),
        )
        return [_outcome(r) for r in rows]

    async def delete(self, ids: Sequence[str]) -> None:
        await self.delete_in("outcomes", ids)

    async def prune(self, ids: Sequence[str], at: str) -> None:
        """Delete outcomes, keeping what each scored (task type, success, score, time) for score figures."""
        for chunk in chunked(ids):
            await self.conn.execute(
                "INSERT INTO pruned_outcomes (id, project, task_type, success, score, created_at, pruned_at) "
                f"SELECT id, project, task_type, success, score, created_at, ? FROM outcomes "
                f"WHERE id IN ({placeholders(len(chunk))}) "
                "ON CONFLICT (id) DO UPDATE SET pruned_at = excluded.pruned_at",
                (at, *chunk),
            )
        await self.delete(ids)

    @staticmethod
    def _scored(project: str, task_type: str | None) -> tuple[str, list[str]]:
        """Every outcome's score figures, stored or pruned (a pruned one brought back counts once)."""
        where, params = "project = ?", [project]
        if task_type is not None:
            where += " AND task_type = ?"
            params.append(task_type)
        sql = (
            f"SELECT id, task_type, success, score, created_at FROM outcomes WHERE {where} UNION ALL "
            f"SELECT id, task_type, success, score, created_at FROM pruned_outcomes p WHERE {where} "
            "AND NOT EXISTS (SELECT 1 FROM outcomes o WHERE o.id = p.id)"
        )
        return sql, params * 2

    async def task_type_stats(self, project: str, task_type: str | None = None) -> list[tuple[str, int, int, float]]:
        """(task type, outcomes, successes, mean score) per task type, most outcomes first; pruned
        outcomes count."""
        scored, params = self._scored(project, task_type)
        rows = await self.conn.fetchall(
            f"SELECT task_type, count(*), sum(success), avg(score) FROM ({scored}) "
            "GROUP BY task_type ORDER BY count(*) DESC, task_type",
            params,
        )
        return [(r[0], int(r[1]), int(r[2] or 0), float(r[3] or 0.0)) for r in rows]

    async def score_history(self, project: str, task_type: str, limit: int) -> list[tuple[str, str, float, bool]]:
        """(id, created_at, score, success) of a task type's last `limit` outcomes, pruned ones
        included, oldest first."""
        scored, params = self._scored(project, task_type)
        rows = await self.conn.fetchall(
            f"SELECT id, created_at, score, success FROM ({scored}) ORDER BY created_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [(str(r[0]), str(r[1]), float(r[2] or 0.0), bool(r[3])) for r in reversed(rows)]

    async def count(self, project: str) -> int:
        return int(await self.conn.fetchval("SELECT count(*) FROM outcomes WHERE project = ?", (project,)))

    async def on_record(self, ids: Sequence[str]) -> set[str]:
        """Those of `ids` still stored, or pruned (their scores kept): not forgotten."""
        found: set[str] = set()
        for chunk in chunked(ids, ID_CHUNK // 2):  # each id is bound twice
            marks = placeholders(len(chunk))
            rows = await self.conn.fetchall(
                f"SELECT id FROM outcomes WHERE id IN ({marks}) "
                f"UNION SELECT id FROM pruned_outcomes WHERE id IN ({marks})",
                (*chunk, *chunk),
            )
            found.update(str(r[0]) for r in rows)
        return found

    async def said_elsewhere(self, project: str, column: str, text: str, besides: AbstractSet[str]) -> bool:
        """Whether an outcome of the project other than those `besides` has `text` as its strategy or error."""
        if column not in ("strategy", "error"):
            raise ValueError(f"not a quoted outcome column: {column}")
        rows = await self.conn.fetchall(
            f"SELECT id FROM outcomes WHERE project = ? AND {column} = ? LIMIT ?", (project, text, len(besides) + 1)
        )
        return any(row[0] not in besides for row in rows)


class MistakeCardRepository(Repository):
    """Mistake cards, merged by (type, task, correct decision) into one row with a seen count."""

    async def get_many(self, ids: Sequence[str], project: str) -> list[MistakeCard]:
        rows = await self.fetch_in(
            f"SELECT {_CARD_COLUMNS} FROM mistake_cards WHERE +project = ? AND id IN ({{ids}})", ids, (project,)
        )
        by_id = {r["id"]: _card(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def by_key(self, project: str, merge_key: str) -> MistakeCard | None:
        row = await self.conn.fetchone(
            f"SELECT {_CARD_COLUMNS} FROM mistake_cards WHERE project = ? AND merge_key = ?", (project, merge_key)
        )
        return None if row is None else _card(row)

    async def of_type(self, project: str, type_: str) -> list[MistakeCard]:
        """The project's cards of one type, most seen first (then the oldest)."""
        rows = await self.conn.fetchall(
            f"SELECT {_CARD_COLUMNS} FROM mistake_cards WHERE project = ? AND type = ? "
            "ORDER BY seen_count DESC, first_seen_at, id",
            (project, type_),
        )
        return [_card(r) for r in rows]

    async def set_key(self, card_id: str, merge_key: str) -> None:
        """Re-key a card whose stored key came from an older normalisation."""
        await self.conn.execute("UPDATE mistake_cards SET merge_key = ? WHERE id = ?", (merge_key, card_id))

    async def add(self, card: MistakeCard) -> None:
        await self.conn.execute(
            f"INSERT INTO mistake_cards ({_CARD_COLUMNS}) VALUES ({placeholders(14)})",
            (
                card.id,
                card.project,
                card.merge_key,
                card.task_type,
                card.type,
                card.task,
                card.wrong_decision,
                card.correct_decision,
                card.why,
                card.seen_count,
                card.first_seen_at,
                card.last_seen_at,
                card.created_at,
                card.updated_at,
            ),
        )

    async def seen_again(self, card_id: str, at: str, wrong: str | None, why: str | None) -> None:
        """Count one more sighting; the wrong decision(s) and why given replace the stored ones (none
        given, or blank, keeps them)."""
        await self.conn.execute(
            "UPDATE mistake_cards SET seen_count = seen_count + 1, last_seen_at = ?, updated_at = ?, "
            "wrong_decision = coalesce(nullif(trim(?), ''), wrong_decision), "
            "why = coalesce(nullif(trim(?), ''), why) WHERE id = ?",
            (at, at, wrong, why, card_id),
        )

    async def count_links(self, card_ids: Sequence[str], at: str) -> list[str]:
        """Raise each card's seen count to the outcomes linked to it where it is lower (two copies
        of a card met in an import, each with its own outcomes); returns the cards raised."""
        raised: list[str] = []
        for chunk in chunked(card_ids):
            rows = await self.conn.fetchall(
                f"SELECT id FROM mistake_cards c WHERE id IN ({placeholders(len(chunk))}) "
                "AND seen_count < (SELECT count(*) FROM outcome_mistake_cards l WHERE l.card_id = c.id) ORDER BY id",
                tuple(chunk),
            )
            found = [row[0] for row in rows]
            if found:
                await self.conn.execute(
                    "UPDATE mistake_cards SET updated_at = ?, seen_count = "
                    "(SELECT count(*) FROM outcome_mistake_cards l WHERE l.card_id = mistake_cards.id) "
                    f"WHERE id IN ({placeholders(len(found))})",
                    (at, *found),
                )
            raised += found
        return raised

    async def sightings_in(self, outcome_ids: Sequence[str]) -> Counter[str]:
        """How many of these outcomes saw each card, by card id."""
        rows = await self.fetch_in("SELECT card_id FROM outcome_mistake_cards WHERE outcome_id IN ({ids})", outcome_ids)
        return Counter(row[0] for row in rows)

    async def seen_fewer(self, sightings: Mapping[str, int], at: str) -> list[str]:
        """Take sightings of forgotten outcomes off each card that stays (never below one), its last
        sighting then the newest outcome still linked to it; returns the cards changed."""
        changed: list[str] = []
        for card_id, times in sorted(sightings.items()):
            rows = await self.conn.fetchall(
                "UPDATE mistake_cards SET seen_count = max(1, seen_count - ?), updated_at = ?, last_seen_at = coalesce("
                "(SELECT max(o.created_at) FROM outcome_mistake_cards l JOIN outcomes o ON o.id = l.outcome_id"
                " WHERE l.card_id = mistake_cards.id), last_seen_at) WHERE id = ? RETURNING id",
                (times, at, card_id),
            )
            changed += [row[0] for row in rows]
        return changed

    async def only_from(self, outcome_ids: Sequence[str]) -> list[str]:
        """Ids of the cards every stored link of which is to one of these outcomes (their only source)."""
        within = set(outcome_ids)
        linked = await self.fetch_in(
            "SELECT DISTINCT card_id FROM outcome_mistake_cards WHERE outcome_id IN ({ids})", sorted(within)
        )
        cards = sorted(row[0] for row in linked)
        links = await self.fetch_in(
            "SELECT card_id, outcome_id FROM outcome_mistake_cards WHERE card_id IN ({ids})", cards
        )
        elsewhere = {row[0] for row in links if row[1] not in within}
        return [card for card in cards if card not in elsewhere]

    async def link(self, outcome_id: str, card_id: str) -> None:
        await self.conn.execute(
            "INSERT INTO outcome_mistake_cards (outcome_id, card_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (outcome_id, card_id),
        )

    async def top(self, project: str, task_type: str | None = None, limit: int = 10) -> list[MistakeCard]:
        """Most seen first, then most recently seen; of one task type: first seen in it, or seen since."""
        where, params = "project = ?", [project]
        if task_type is not None:
            # A card keeps the task type it was first seen in; its links say where else it recurred.
            where += (
                " AND (task_type = ? OR task_type IS NULL OR id IN (SELECT l.card_id FROM outcome_mistake_cards l"
                " JOIN outcomes o ON o.id = l.outcome_id WHERE o.project = ? AND o.task_type = ?))"
            )
            params += [task_type, project, task_type]
        rows = await self.conn.fetchall(
            f"SELECT {_CARD_COLUMNS} FROM mistake_cards WHERE {where} "
            "ORDER BY seen_count DESC, last_seen_at DESC, id LIMIT ?",
            (*params, limit),
        )
        return [_card(r) for r in rows]

    async def beyond(self, project: str, keep: int) -> list[str]:
        """Ids of the cards past the `keep` most seen (the ones a bounded list drops)."""
        rows = await self.conn.fetchall(
            "SELECT id FROM mistake_cards WHERE project = ? ORDER BY seen_count DESC, last_seen_at DESC, id "
            "LIMIT -1 OFFSET ?",
            (project, keep),
        )
        return [r[0] for r in rows]

    async def delete(self, ids: Sequence[str]) -> None:
        await self.delete_in("mistake_cards", ids)

    async def count(self, project: str) -> int:
        """How many mistake cards the project has."""
        return int(await self.conn.fetchval("SELECT count(*) FROM mistake_cards WHERE project = ?", (project,)))
