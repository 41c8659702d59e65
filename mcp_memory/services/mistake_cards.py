"""Mistake cards: a wrong decision, the right one and why, merged across outcomes by (type, task,
correct decision) with a count of how often it was seen; the least seen go beyond the bound.

The three are compared normalised as a lesson's text is (Unicode, case, whitespace, the punctuation
that frames a sentence), so "Run the tests first." and "run the tests first" are one card. A card
stored under the older key (case and whitespace only) is found by what its key is made of and
re-keyed when it is next seen, so no migration is needed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_memory.db import Tx
from mcp_memory.ids import new_id
from mcp_memory.models.records import MistakeCard, Outcome
from mcp_memory.privacy import says_something
from mcp_memory.repositories.forgotten import ForgottenRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository
from mcp_memory.services.common import Scrubber
from mcp_memory.services.lesson_identity import normalised
from mcp_memory.services.relations import drop_relations


@dataclass(frozen=True, slots=True)
class MistakeCardInput:
    """A mistake card as the caller reports it."""

    type: str
    correct_decision: str
    task: str | None = None
    wrong_decision: str | None = None
    why: str | None = None


async def record_mistake_cards(
    tx: Tx, outcome: Outcome, cards: Sequence[MistakeCardInput], now: str, keep: int
) -> list[str]:
    """Merge an outcome's cards into the project's by (type, task, correct decision), counting each
    sighting; keep the `keep` most seen. Returns the ids of this outcome's cards still kept."""
    repo = MistakeCardRepository(tx)
    # The same card twice in one outcome is one sighting, its details merged as across outcomes.
    merged: dict[str, MistakeCardInput] = {}
    for card in cards:
        key = _merge_key(card.type, card.task or outcome.task, card.correct_decision)
        prior = merged.get(key)
        merged[key] = card if prior is None else _later(prior, card)
    ids = []
    for key, card in merged.items():
        task = card.task or outcome.task
        existing = await repo.by_key(outcome.project, key) or await _under_older_key(
            tx, outcome.project, card.type, key
        )
        if existing is not None:
            wrong = _both_wrong(existing.wrong_decision, card.wrong_decision)
            await repo.seen_again(existing.id, now, wrong, card.why)
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
    dropped = await repo.beyond(outcome.project, keep)
    await ForgottenRepository(tx).remember("mistake_card", dropped, now)  # no older copy brings them back
    await repo.delete(dropped)
    await drop_relations(tx, dropped)
    for card_id in dropped:
        tx.changed("mistake_card", card_id, "delete")
    return [i for i in ids if i not in dropped]


def clean_card(card: MistakeCardInput, scrub: Scrubber, field: str) -> MistakeCardInput:
    """The card through the privacy filter; a correct decision left empty is refused, named by `field`.

    A task, wrong decision or why that is blank, or nothing but private or secret parts, is not
    given: a card takes its outcome's task, and one seen again keeps what it said before, rather
    than a blank or a "[private]" marker (as a task, one that would merge unrelated cards).
    """
    return MistakeCardInput(
        type=card.type,
        correct_decision=scrub.required(f"{field}.correct_decision", card.correct_decision).strip(),
        task=_given(scrub, card.task),
        wrong_decision=_given(scrub, card.wrong_decision),
        why=_given(scrub, card.why),
    )


def _given(scrub: Scrubber, value: str | None) -> str | None:
    """An optional text scrubbed and trimmed; None when no letter or digit is left outside what was removed."""
    text = scrub.optional(value)
    return text.strip() if text is not None and says_something(text) else None


WRONG_CHARS = 1_000
"""A card's wrong decisions together are at most this long (the newest are kept)."""


def _both_wrong(stored: str | None, new: str | None) -> str | None:
    """The wrong decisions of a card seen again: each different one kept, in the order seen, since
    one right decision often answers several wrong turns ("sleep", then "busy timeout", ...)."""
    if not new or not stored:
        return new or stored
    # whole entries compared, as normalised: "try the write" is not already said by "retry the write"
    said = {normalised(part) for part in stored.split("; ")}
    if all(normalised(part) in said for part in new.split("; ")):
        return stored
    parts = [*stored.split("; "), new]
    while len(parts) > 1 and len("; ".join(parts)) > WRONG_CHARS:
        parts.pop(0)
    return "; ".join(parts)


def _merge_key(kind: str, task: str, correct: str) -> str:
    return hashlib.sha256("\x1f".join(normalised(part) for part in (kind, task, correct)).encode()).hexdigest()


async def _under_older_key(tx: Tx, project: str, type_: str, key: str) -> MistakeCard | None:
    """The stored card that is this one though its key came from an older rule (the most seen, if
    several), re-keyed to `key`; None when there is none.

    Cards are bounded per project (`max_mistake_cards`), so reading those of its type on a miss stays cheap.
    """
    repo = MistakeCardRepository(tx)
    for stored in await repo.of_type(project, type_):
        if stored.merge_key != key and _merge_key(stored.type, stored.task, stored.correct_decision) == key:
            await repo.set_key(stored.id, key)
            tx.changed("mistake_card", stored.id, "rekey")
            return stored.model_copy(update={"merge_key": key})
    return None


def _later(prior: MistakeCardInput, card: MistakeCardInput) -> MistakeCardInput:
    """One card from two sightings in the same outcome, merged as across outcomes: each different wrong
    decision kept, in the order given; a why given later replaces an earlier one."""
    return MistakeCardInput(
        type=prior.type,
        correct_decision=prior.correct_decision,
        task=prior.task,
        wrong_decision=_both_wrong(prior.wrong_decision, card.wrong_decision),
        why=card.why or prior.why,
    )
