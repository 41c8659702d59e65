"""Two machines that each made the same named record (a default slot, the same lesson, the same
mistake card, the same relation) can exchange exports: the imported row is taken as the stored
record with that name, newer replacing older as for any row, and rows naming it follow."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client

from tests.conftest import FakeClock, call
from tests.test_import_chains import machines
from tests.test_tools_operations import export_document

LESSON = "Run the database migrations before the test suite."
CARD = {"type": "process", "correct_decision": "Refresh the credentials before deploying"}


async def _work(client: Client, item: str) -> dict[str, Any]:
    """What each machine does on its own: the same named records, each under its own ids."""
    slot = await call(client, "memory_slot_append", name="pending_items", text=item)
    lesson = await call(client, "memory_lesson_save", content=LESSON)
    fact = await call(client, "memory_save", content=f"The deploy needs fresh credentials ({item}).")
    await call(client, "memory_relate", source_id=fact["id"], target_id=lesson["lesson"]["id"], type="extends")
    await call(
        client, "memory_outcome_record", task="Deploy the API", success=False, error="expired", mistake_cards=[CARD]
    )
    return {"slot": slot["slot"]["id"], "lesson": lesson["lesson"]["id"], "fact": fact["id"]}


async def test_records_made_alike_on_two_machines_are_matched_by_name_and_converge(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        on_a = await _work(a, "ship the invoices fix")
        clock.advance(minutes=5)
        on_b = await _work(b, "rotate the API keys")

        into_a = await call(a, "memory_import", document=await export_document(b))
        again = await call(a, "memory_import", document=await export_document(b))
        into_b = await call(b, "memory_import", document=await export_document(a))
        slot = await call(a, "memory_slot_get", name="pending_items")
        lessons = await call(a, "memory_lessons")
        related = await call(a, "memory_related", id=on_b["fact"])
        insights = await call(a, "memory_insights", task_type="deployment")
        health = await call(a, "memory_diagnose")
        tables = [(await export_document(side))["tables"] for side in (a, b)]

    matched = {"slots": 1, "lessons": 1, "mistake_cards": 1, "relations": 0}
    assert {t: into_a["matched_by_name"].get(t, 0) for t in matched} == matched  # relations: ends differ
    assert into_a["updated"]["slots"] == 1  # B's is newer: it replaced A's, which keeps its id
    assert slot["id"] == on_a["slot"]
    assert slot["content"] == "rotate the API keys"
    assert [lesson["id"] for lesson in lessons["lessons"]] == [on_a["lesson"]]
    # B's relation now points at A's copy of the lesson
    assert on_a["lesson"] in {node["id"] for node in related["nodes"]}
    assert [card["seen_count"] for card in insights["mistake_cards"]] == [2]  # seen on both machines
    assert health["index_in_sync"] is True
    assert sum(again["inserted"].values()) == sum(again["updated"].values()) == 0  # a repeat changes nothing
    assert into_b["matched_by_name"]["slots"] == 1
    # A holds no row newer than B's; only B's card changed, now counting A's outcome as seen
    assert {t: n for t, n in into_b["updated"].items() if n} == {"mistake_cards": 1}
    for table in ("slots", "lessons", "mistake_cards"):  # the same content under each machine's own id
        assert [{k: v for k, v in row.items() if k != "id"} for row in tables[0][table]] == [
            {k: v for k, v in row.items() if k != "id"} for row in tables[1][table]
        ]
