"""memory_forget takes along what was learned from a forgotten record alone, or quotes its words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

SECRET_ERROR = "ConnectionError: cannot reach payroll host hr-db.internal for the salary export"


async def _secret_session(client: Client) -> None:
    for _ in range(2):
        await call(client, "memory_observe", session_id="private", type="error", content=SECRET_ERROR)
    for step in range(3):
        await call(
            client,
            "memory_observe",
            session_id="private",
            content=f"Talked about codename bluefalcon_merger, step {step}.",
            concepts=["bluefalcon_merger"],
        )
    await call(client, "memory_observe", session_id="public", content="Refactored the cart_service module.")


def _mentions(value: Any, word: str) -> bool:
    return word in json.dumps(value)


async def test_forgetting_a_session_takes_the_lessons_and_insights_drawn_from_it(client: Client) -> None:
    await _secret_session(client)
    reflected = await call(client, "memory_reflect")
    learned = [lesson["id"] for lesson in reflected["anti_patterns"]]
    before = await call(client, "memory_export")

    planned = await call(client, "memory_forget", ids=["private"], dry_run=True)
    after_dry_run = await call(client, "memory_export")
    forgotten = await call(client, "memory_forget", ids=["private"])
    profile = await call(client, "memory_profile")
    lessons = await call(client, "memory_lessons")
    found = await call(client, "memory_smart_search", query="payroll salary bluefalcon")
    exported = await call(client, "memory_export")

    assert len(learned) == 1
    assert _mentions(before, "bluefalcon_merger")
    assert planned["deleted"]["lesson"] == learned
    assert planned["insights_cleared"] is True
    assert after_dry_run == before
    assert forgotten["deleted"]["lesson"] == learned
    assert forgotten["insights_cleared"] is True
    assert profile.get("insights", []) == []
    assert lessons["total"] == 0
    assert found.get("hits", []) == []
    for word in ("bluefalcon", "payroll"):
        assert not _mentions(exported, word)


async def test_a_lesson_standing_on_other_records_stays(client: Client) -> None:
    await _secret_session(client)
    await call(client, "memory_reflect")

    forgotten = await call(client, "memory_forget", ids=["public"])
    lessons = await call(client, "memory_lessons")

    assert "lesson" not in forgotten["deleted"]
    assert [lesson["content"] for lesson in lessons["lessons"]] != []


async def _outcome(client: Client, **fields: Any) -> str:
    return str((await call(client, "memory_outcome_record", task_type="deploy", **fields))["id"])


async def test_forgetting_outcomes_takes_their_rules_cards_and_the_anti_pattern_quoting_them(client: Client) -> None:
    card = {"type": "config", "correct_decision": "Read the host from the vault."}
    shared_card = {"type": "process", "task": "any deploy", "correct_decision": "Announce deploys in the channel."}
    first = await _outcome(
        client, task="Deploy payroll", success=False, error=SECRET_ERROR, mistake_cards=[card, shared_card]
    )
    second = await _outcome(client, task="Deploy payroll again", success=False, error=SECRET_ERROR)
    shop = await _outcome(client, task="Deploy the shop", success=False, mistake_cards=[shared_card])
    praised = await _outcome(client, task="Deploy billing", score=0.95, successes=["Used the staging payroll mirror."])
    lessons = (await call(client, "memory_lessons"))["lessons"]
    cards = {c["type"]: c["id"] for c in (await call(client, "memory_insights", task_type="deploy"))["mistake_cards"]}

    # the first failure still says the error: the anti-pattern quoting it is not the second's alone
    one = await call(client, "memory_forget", ids=[second], dry_run=True)
    forgotten = await call(client, "memory_forget", ids=[first, second, praised])
    insights = await call(client, "memory_insights", task_type="deploy")
    exported = await call(client, "memory_export")

    assert sorted(lesson["kind"] for lesson in lessons) == ["anti_pattern", "rule_works"]
    assert "lesson" not in one["deleted"]
    assert sorted(forgotten["deleted"]["lesson"]) == sorted(lesson["id"] for lesson in lessons)
    # the card seen only with the first outcome goes; the one seen with the shop's too stays
    assert forgotten["deleted"]["mistake_card"] == [cards["config"]]
    assert [c["id"] for c in insights["mistake_cards"]] == [cards["process"]]
    for words in ("staging payroll mirror", "hr-db.internal"):
        assert not _mentions(exported, words)
    assert [row["id"] for row in exported["document"]["tables"]["outcomes"]] == [shop]


async def test_a_card_seen_only_with_forgotten_outcomes_goes_with_them(client: Client) -> None:
    card = {"type": "secrets", "correct_decision": "Rotate the leaked payroll key."}
    lone = await _outcome(client, task="Deploy payroll", success=False, mistake_cards=[card])
    await _outcome(client, task="Deploy the shop", success=True)

    forgotten = await call(client, "memory_forget", ids=[lone])
    insights = await call(client, "memory_insights", task_type="deploy")

    assert len(forgotten["deleted"]["mistake_card"]) == 1
    assert insights["mistake_cards"] == []


async def test_an_older_copy_does_not_bring_the_cleared_insights_back(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    backup = tmp_path / "backup.json"
    async with Client(build_server(settings, clock)) as client:
        await _secret_session(client)
        await call(client, "memory_reflect")
        await call(client, "memory_export", path=str(backup))
        clock.advance(minutes=5)
        await call(client, "memory_forget", ids=["private"])
        await call(client, "memory_import", path=str(backup))
        profile = await call(client, "memory_profile")

    assert not _mentions(profile, "bluefalcon")
