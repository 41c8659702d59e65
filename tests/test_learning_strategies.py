"""What outcomes teach when strategies share words: alike wording with opposite records is two
strategies; an anti-pattern names a strategy only when its failures all tried it; a mistake card
keeps every wrong turn it was seen for."""

from __future__ import annotations

from typing import Any

from mcp import Client

from tests.conftest import call

GOOD = "replace the Query API with select() one module at a time"
BAD = "replace the Query API with select() in one big change"
LOCKED = "sqlite3.OperationalError: database is locked"


async def outcome(client: Client, task_type: str, **fields: Any) -> dict[str, Any]:
    return await call(client, "memory_outcome_record", task_type=task_type, **fields)


async def insights(client: Client, task_type: str) -> dict[str, Any]:
    return await call(client, "memory_insights", task_type=task_type)


async def test_alike_strategies_with_opposite_records_are_learned_apart(client: Client) -> None:
    await outcome(client, "refactor", task="Refactor cart", success=True, strategy=GOOD)
    for n, attribute in enumerate(("all", "first")):
        await outcome(
            client, "refactor", task=f"Refactor orders {n}", success=False, strategy=BAD,
            error=f"AttributeError: 'Select' object has no attribute '{attribute}'",
        )  # fmt: skip

    [anti] = (await insights(client, "refactor"))["anti_patterns"]
    assert anti["content"] == f"Avoid in refactor tasks: {BAD}"
    assert anti["context"].endswith(f"Better: {GOOD}")  # the other one worked: it is the alternative

    for n in range(2):
        await outcome(client, "refactor", task=f"Refactor payments {n}", success=True, strategy=GOOD)

    learned = await insights(client, "refactor")
    [heuristic] = learned["heuristics"]
    assert heuristic["content"] == f"For refactor tasks: {GOOD}"
    assert heuristic["context"] == "Worked in 3 of 3 attempts with a similar strategy."  # not the big-bang failures
    assert [a["id"] for a in learned["anti_patterns"]] == [anti["id"]]  # still warned against


async def test_a_rewording_stays_one_strategy_whatever_its_record(client: Client) -> None:
    bisect = "reproduce the failure locally then bisect the failing commit"
    for n in range(3):
        await outcome(client, "bugfix", task=f"Fix test {n}", success=True, strategy=bisect)
    await outcome(
        client,
        "bugfix",
        task="Fix test 9",
        success=False,
        strategy="reproduce the failure locally, bisect failing commits",
    )

    [heuristic] = (await insights(client, "bugfix"))["heuristics"]
    assert heuristic["context"] == "Worked in 3 of 4 attempts with a similar strategy."


async def test_failures_of_different_strategies_make_an_anti_pattern_about_their_error(client: Client) -> None:
    tried = ["retry the test with a sleep", "increase the sqlite busy timeout", "mark the test xfail"]
    for strategy in tried:
        await outcome(client, "bugfix", task="Fix the flaky db test", success=False, error=LOCKED, strategy=strategy)

    [anti] = (await insights(client, "bugfix"))["anti_patterns"]

    assert anti["content"] == f"Avoid in bugfix tasks: the approach that led to: {LOCKED}"
    assert anti["context"] == (f"Failed 3 times. Tried: {'; '.join(tried)}. No successful alternative recorded yet.")
    assert anti["source"]["tried"] == tried


async def test_an_anti_pattern_named_for_one_strategy_turns_to_the_error_when_another_fails_alike(
    client: Client,
) -> None:
    for n in range(2):
        await outcome(
            client, "bugfix", task=f"Fix db test {n}", success=False, error=LOCKED, strategy="sleep and retry"
        )
    [named] = (await insights(client, "bugfix"))["anti_patterns"]
    assert named["content"] == "Avoid in bugfix tasks: sleep and retry"

    await outcome(client, "bugfix", task="Fix db test 3", success=False, error=LOCKED, strategy="mark the test xfail")

    [anti] = (await insights(client, "bugfix"))["anti_patterns"]
    assert anti["id"] == named["id"]
    assert anti["content"] == f"Avoid in bugfix tasks: the approach that led to: {LOCKED}"
    assert "Tried: sleep and retry; mark the test xfail." in anti["context"]
    assert anti["source"]["failures"] == 3


async def test_a_mistake_card_keeps_each_wrong_decision_it_was_seen_for(client: Client) -> None:
    for wrong in ("retry with a sleep", "raise the busy timeout", "retry with a sleep", "mark it xfail"):
        card = {"type": "wrong_fix", "wrong_decision": wrong, "correct_decision": "isolate the db per worker"}
        await outcome(client, "bugfix", task="Fix the flaky db test", success=False, mistake_cards=[card])

    [card] = (await insights(client, "bugfix"))["mistake_cards"]

    assert card["seen_count"] == 4
    assert card["wrong_decision"] == "retry with a sleep; raise the busy timeout; mark it xfail"
