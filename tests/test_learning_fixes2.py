"""What outcomes teach keeps its evidence: one anti-pattern per strategy counts every failure, a
heuristic stays the one of its own strategy, a warning comes back once its strategy stops working;
mistake cards keep what they said; task types are read from every form of their words; a lesson
of every type is listed under each."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.conftest import FakeClock, call

RESTART = "restart the worker service"
LOCKED = "database locked timeout while writing rows"
DENIED = "permission denied opening logfile /var/log/app.log"
ONE_AT_A_TIME = "replace the legacy api one module at a time"
BIG_BANG = "replace the legacy api in one big change"


async def record(client: Client, clock: FakeClock, **args: Any) -> dict[str, Any]:
    args.setdefault("task", "Fix the nightly job")
    result = await call(client, "memory_outcome_record", **args)
    clock.advance(minutes=1)
    return result


async def lessons_of(client: Client, kind: str) -> list[dict[str, Any]]:
    return (await call(client, "memory_lessons", kinds=[kind], status="all", limit=100))["lessons"]


# -- anti-patterns -------------------------------------------------------------------------------


async def test_one_failing_strategy_with_two_errors_is_one_anti_pattern_counting_every_failure(
    client: Client, clock: FakeClock
) -> None:
    ids = []
    for error in (LOCKED, LOCKED, DENIED, DENIED):
        result = await record(client, clock, task_type="bugfix", success=False, strategy=RESTART, error=error)
        ids.append(result["id"])

    (anti,) = await lessons_of(client, "anti_pattern")
    assert result["derived"]["anti_patterns"] == [anti["id"]]
    assert (anti["content"], anti["status"]) == (f"Avoid in bugfix tasks: {RESTART}", "active")
    # anti_pattern_confidence(4), not one reinforcement step over the first two failures' 0.6
    assert anti["confidence"] == pytest.approx(0.8, abs=1e-3)
    assert anti["source"]["failures"] == 4
    assert anti["source"]["failed_outcomes"] == sorted(ids)
    assert anti["context"] == f"Failed 4 times with errors like: {DENIED}. No successful alternative recorded yet."

    fifth = await record(client, clock, task_type="bugfix", success=False, strategy=RESTART, error=LOCKED)

    (anti,) = await lessons_of(client, "anti_pattern")
    assert fifth["derived"]["anti_patterns"] == [anti["id"]]
    assert anti["confidence"] == pytest.approx(0.9, abs=1e-3)
    assert anti["source"]["failed_outcomes"] == sorted([*ids, fifth["id"]])


async def test_an_anti_pattern_retired_for_a_heuristic_comes_back_when_the_heuristic_is_retired(
    client: Client, clock: FakeClock
) -> None:
    for _ in range(2):
        drawn = await record(client, clock, task_type="bugfix", success=False, strategy=RESTART, error=LOCKED)
    (anti_id,) = drawn["derived"]["anti_patterns"]
    for _ in range(3):
        worked = await record(client, clock, task_type="bugfix", success=True, strategy=RESTART)
    (heuristic_id,) = worked["derived"]["heuristics"]
    (anti,) = await lessons_of(client, "anti_pattern")
    assert anti["status"] == "faded"  # 3 of 5 worked: not warned against while recommended

    # 3 of 6: the heuristic no longer holds, so its strategy is one to avoid again.
    failed = await record(client, clock, task_type="bugfix", success=False, strategy=RESTART)

    assert failed["derived"] == {"heuristics": [], "anti_patterns": [anti_id], "rules": [], "mistake_cards": []}
    (heuristic,) = await lessons_of(client, "heuristic")
    assert (heuristic["id"], heuristic["status"]) == (heuristic_id, "faded")
    insights = await call(client, "memory_insights", task_type="bugfix")
    (anti,) = insights["anti_patterns"]
    assert (anti["id"], anti["status"], anti["source"]["failures"]) == (anti_id, "active", 2)
    assert anti["confidence"] == pytest.approx(0.6, abs=1e-3)


# -- heuristics ----------------------------------------------------------------------------------


async def test_a_heuristic_keeps_its_own_strategy_and_its_confidence_is_the_tally_it_reports(
    client: Client, clock: FakeClock
) -> None:
    steps = [(True, ONE_AT_A_TIME)] * 3 + [
        (True, BIG_BANG),
        (False, BIG_BANG),
        (False, BIG_BANG),
        (True, ONE_AT_A_TIME),
    ]
    for success, strategy in steps:
        await record(
            client, clock, task="Modernise the client", task_type="refactor", success=success, strategy=strategy
        )
        for heuristic in await lessons_of(client, "heuristic"):
            source = heuristic["source"]
            assert source["strategy"] == ONE_AT_A_TIME  # a similar strategy counts toward it, never replaces it
            assert heuristic["confidence"] == pytest.approx(source["successes"] / source["outcomes"], abs=1e-3)
            assert heuristic["context"] == (
                f"Worked in {source['successes']} of {source['outcomes']} attempts with a similar strategy."
            )

    (heuristic,) = await lessons_of(client, "heuristic")
    assert heuristic["content"] == f"For refactor tasks: {ONE_AT_A_TIME}"
    assert heuristic["status"] == "active"
    assert heuristic["context"] == "Worked in 4 of 4 attempts with a similar strategy."
    assert heuristic["confidence"] == pytest.approx(1.0, abs=1e-3)


# -- mistake cards -------------------------------------------------------------------------------


async def test_a_card_seen_again_without_a_why_keeps_the_one_it_had(client: Client, clock: FakeClock) -> None:
    card = {"type": "wrong_tool", "correct_decision": "Use the debugger"}
    await record(
        client, clock, task_type="bugfix", success=False, mistake_cards=[card | {"why": "prints hid the race"}]
    )

    for seen, why in enumerate(["", "   ", "<private>internal ticket 4411</private>"], start=2):
        await record(client, clock, task_type="bugfix", success=False, mistake_cards=[card | {"why": why}])
        (stored,) = (await call(client, "memory_insights"))["mistake_cards"]
        assert (stored["seen_count"], stored["why"]) == (seen, "prints hid the race")

    await record(client, clock, task_type="bugfix", success=False, mistake_cards=[card | {"why": "  races  "}])
    (stored,) = (await call(client, "memory_insights"))["mistake_cards"]
    assert (stored["seen_count"], stored["why"]) == (5, "races")


async def test_a_card_whose_task_is_only_private_takes_its_outcomes_task(client: Client, clock: FakeClock) -> None:
    card = {"type": "ordering", "correct_decision": "Take a backup first"}
    for task, hidden in (("Migrate the billing db", "acme billing"), ("Rotate the search cluster", "globex search")):
        card_task = card | {"task": f"<private>{hidden}</private>"}
        await record(client, clock, task=task, task_type="deployment", success=False, mistake_cards=[card_task])

    cards = (await call(client, "memory_insights"))["mistake_cards"]

    # as "[private]", both cards had one task and merged: two unrelated mistakes counted as one seen twice
    assert sorted((c["task"], c["seen_count"]) for c in cards) == [
        ("Migrate the billing db", 1),
        ("Rotate the search cluster", 1),
    ]


async def test_two_wrong_decisions_answered_by_one_right_one_in_one_outcome_are_both_kept(
    client: Client, clock: FakeClock
) -> None:
    card = {"type": "wrong_tool", "correct_decision": "Use the debugger", "why": "it shows the state"}
    cards = [card | {"wrong_decision": "print statements"}, card | {"wrong_decision": "guessing from the stack trace"}]

    result = await record(client, clock, task_type="bugfix", success=False, mistake_cards=cards)

    (stored,) = (await call(client, "memory_insights"))["mistake_cards"]
    assert result["derived"]["mistake_cards"] == [stored["id"]]
    assert stored["seen_count"] == 1
    assert stored["wrong_decision"] == "print statements; guessing from the stack trace"


# -- task types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("Root-cause analysis of the outage logs", "research"),
        ("A comparison of the two caching libraries", "research"),
        ("Clean up the old modules", "refactor"),
        ("Cleaned up the old modules", "refactor"),
        ("Set up the mail server", "configuration"),
    ],
)
async def test_task_types_are_read_from_nouns_and_phrasal_verbs(client: Client, task: str, expected: str) -> None:
    result = await call(client, "memory_outcome_record", task=task, success=True)
    assert (result["task_type"], result["task_type_inferred"]) == (expected, True)


# -- listing by task type ------------------------------------------------------------------------


async def test_a_lesson_of_every_type_is_listed_under_each_as_recall_has_it(client: Client) -> None:
    both = "Reproduce the failure before changing code."
    await call(client, "memory_lesson_save", content=both, task_type="bugfix")
    shared = (await call(client, "memory_lesson_save", content=both, task_type="testing"))["lesson"]
    assert shared["task_type"] is None
    mine = (await call(client, "memory_lesson_save", content="Bisect the regression", task_type="bugfix"))["lesson"]
    other = await call(client, "memory_lesson_save", content="Keep the docs short", task_type="documentation")

    for task_type, typed in (("bugfix", mine["id"]), ("documentation", other["lesson"]["id"])):
        listed = await call(client, "memory_lessons", task_type=task_type)
        recalled = await call(client, "memory_lesson_recall", task_type=task_type)
        assert {x["id"] for x in listed["lessons"]} == {typed, shared["id"]} == {x["id"] for x in recalled["lessons"]}
        assert listed["total"] == 2
        page = await call(client, "memory_lessons", task_type=task_type, limit=1)
        assert (page["total"], page["next_offset"], len(page["lessons"])) == (2, 1, 1)
    testing = await call(client, "memory_lessons", task_type="testing")
    assert ([x["id"] for x in testing["lessons"]], testing["total"]) == ([shared["id"]], 1)


async def test_a_lessons_tags_are_one_per_spelling_whatever_their_unicode_form(client: Client) -> None:
    first = await call(client, "memory_lesson_save", content="Pin the espresso grinder.", tags=["Cafe\u0301", "CAFÉ"])
    again = await call(client, "memory_lesson_save", content="Pin the espresso grinder.", tags=["caf\u00e9", "Bar"])

    assert first["lesson"]["tags"] == ["caf\u00e9"]
    assert again["lesson"]["tags"] == ["bar", "caf\u00e9"]
