"""Outcomes whose strategies or errors are wholly private teach nothing by looking alike; a mistake card
keeps each different wrong decision whole; and forgetting an outcome takes its sighting off a card."""

from __future__ import annotations

from typing import Any

from mcp import Client

from tests.conftest import FakeClock, call


async def record(client: Client, clock: FakeClock, **args: Any) -> dict[str, Any]:
    args.setdefault("task", "Tidy the module layout")
    args.setdefault("task_type", "refactor")
    result = await call(client, "memory_outcome_record", **args)
    clock.advance(minutes=10)
    return result


async def test_unrelated_wholly_private_strategies_make_no_heuristic(client: Client, clock: FakeClock) -> None:
    # The `[private]` marker left of each is the same word: it must not make the strategies alike.
    results = [
        await record(client, clock, success=True, strategy=f"<private>{plan}</private>")
        for plan in ("bisect the release history", "rewrite the parser in rust", "ask the vendor for a patch")
    ]
    heuristics = (await call(client, "memory_lessons", kinds=["heuristic"], status="all"))["lessons"]

    assert [r["derived"]["heuristics"] for r in results] == [[], [], []]
    assert heuristics == []


async def test_a_strategy_private_in_part_still_counts_by_the_words_it_shows(client: Client, clock: FakeClock) -> None:
    for host in ("alpha", "beta", "gamma"):
        await record(client, clock, success=True, strategy=f"bisect the release history on <private>{host}</private>")

    [heuristic] = (await call(client, "memory_lessons", kinds=["heuristic"]))["lessons"]

    assert heuristic["content"].startswith("For refactor tasks: bisect the release history on [private]")


async def test_unrelated_wholly_private_errors_make_no_anti_pattern(client: Client, clock: FakeClock) -> None:
    first = await record(client, clock, success=False, error="<private>disk quota exceeded on host A</private>")
    second = await record(client, clock, success=False, error="<private>customer 4411 refused the invoice</private>")
    anti_patterns = (await call(client, "memory_lessons", kinds=["anti_pattern"], status="all"))["lessons"]

    assert (first["derived"]["anti_patterns"], second["derived"]["anti_patterns"]) == ([], [])
    assert anti_patterns == []


async def test_a_wrong_decision_inside_another_one_is_still_kept(client: Client, clock: FakeClock) -> None:
    # "try the write" is a different wrong turn from "retry the write", though its text lies inside it;
    # the same decision spaced or cased otherwise is the one already said.
    card = {"type": "wrong_fix", "correct_decision": "raise the busy timeout"}
    for wrong in ("retry the write", "try the write", "Retry  the   WRITE", "try the write; retry the write"):
        await record(client, clock, success=False, mistake_cards=[card | {"wrong_decision": wrong}])

    [stored] = (await call(client, "memory_insights"))["mistake_cards"]

    assert stored["seen_count"] == 4
    assert stored["wrong_decision"] == "retry the write; try the write"


async def test_forgetting_one_of_the_outcomes_a_card_was_seen_in_takes_its_sighting_off(
    client: Client, clock: FakeClock
) -> None:
    card = {"type": "wrong_fix", "correct_decision": "raise the busy timeout", "wrong_decision": "retry"}
    kept = await record(client, clock, success=False, mistake_cards=[card])
    [first] = (await call(client, "memory_insights"))["mistake_cards"]
    gone = await record(client, clock, success=False, mistake_cards=[card])
    [seen_twice] = (await call(client, "memory_insights"))["mistake_cards"]

    await call(client, "memory_forget", ids=[gone["id"]])
    [stored] = (await call(client, "memory_insights"))["mistake_cards"]

    assert kept["derived"]["mistake_cards"] == [stored["id"]]
    assert seen_twice["seen_count"] == 2
    assert seen_twice["last_seen_at"] != first["last_seen_at"]
    assert (stored["seen_count"], stored["last_seen_at"]) == (1, first["last_seen_at"])
