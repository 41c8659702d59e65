"""A strategy that does what a failing one left undone is another strategy: it is the better
alternative, and the two never count as one heuristic."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.conftest import FakeClock, call

FAILING = "run migrate without resetting the test database"
ERROR = "ProgrammingError: column currency of relation orders_order already exists"
OTHER_ERROR = "ProgrammingError: column refunded_at of relation payments_payment already exists"


async def record(client: Client, clock: FakeClock, **args: Any) -> dict[str, Any]:
    args.setdefault("task", "Apply the orders migration")
    result = await call(client, "memory_outcome_record", task_type="migration", **args)
    clock.advance(minutes=1)
    return result


async def active(client: Client, kind: str) -> list[dict[str, Any]]:
    found = await call(client, "memory_insights", task_type="migration")
    return found[{"heuristic": "heuristics", "anti_pattern": "anti_patterns"}[kind]]


@pytest.mark.parametrize(
    "fix",
    [
        "reset the test database volume, then run migrate",  # the audit's case: "without" on one side only
        "reset the test database without seeding it, then run migrate",  # both negate, but different things
        "never reuse the old volume; reset the test database and run migrate",
    ],
)
async def test_a_success_doing_what_the_failure_left_undone_is_the_better_alternative(
    client: Client, clock: FakeClock, fix: str
) -> None:
    await record(client, clock, success=False, strategy=FAILING, error=ERROR)
    await record(client, clock, score=0.95, strategy=fix)
    for error in (ERROR, OTHER_ERROR, OTHER_ERROR):
        await record(client, clock, success=False, strategy=FAILING, error=error)

    (anti,) = await active(client, "anti_pattern")
    assert anti["content"] == f"Avoid in migration tasks: {FAILING}"
    assert anti["source"]["alternative"] == fix
    assert anti["context"].endswith(f". Better: {fix}")


@pytest.mark.parametrize(
    "same",
    [
        FAILING,
        "run migrate without resetting the test database volume",
        "don't reset the test database, run migrate",
        "skip resetting the test database and run migrate",
    ],
)
async def test_a_success_of_the_failing_strategy_in_other_words_is_not_offered(
    client: Client, clock: FakeClock, same: str
) -> None:
    await record(client, clock, score=0.95, strategy=same)
    for error in (ERROR, ERROR):
        await record(client, clock, success=False, strategy=FAILING, error=error)

    (anti,) = await active(client, "anti_pattern")
    assert anti["source"]["alternative"] is None
    assert anti["context"].endswith("No successful alternative recorded yet.")


async def test_a_strategy_and_its_negation_are_never_one_heuristic(client: Client, clock: FakeClock) -> None:
    fix = "reset the test database, then run migrate"
    for _ in range(2):
        await record(client, clock, success=True, strategy=fix)
    failed = await record(client, clock, success=False, strategy=FAILING)
    succeeded = await record(client, clock, success=True, strategy=fix)

    # The failure is not a third attempt of the fix: it has no heuristic of its own (1 of 1 failed),
    # and the fix's heuristic counts only its own three successes.
    assert failed["derived"]["heuristics"] == []
    (heuristic,) = await active(client, "heuristic")
    assert succeeded["derived"]["heuristics"] == [heuristic["id"]]
    assert (heuristic["content"], heuristic["confidence"]) == (f"For migration tasks: {fix}", 1.0)
    assert heuristic["source"] == {"strategy": fix, "outcomes": 3, "successes": 3}


async def test_the_fix_reflect_saw_stays_beside_a_better_alternative(client: Client, clock: FakeClock) -> None:
    fix = "Started the database with docker compose up -d db; migrate now succeeds"
    session = None
    for _ in range(2):
        seen = await call(
            client, "memory_observe", type="error", content=f"migrate failed: {ERROR}", session_id=session
        )
        session = seen["session_id"]
        await call(client, "memory_observe", type="fix", content=fix, session_id=session)
        clock.advance(minutes=5)
    [found] = (await call(client, "memory_reflect"))["anti_patterns"]
    assert found["context"].endswith(f"Fixed by: {fix}")

    await record(client, clock, success=True, strategy="squash the orders migrations into one")
    for strategy in ("run migrate twice", FAILING):
        await record(client, clock, success=False, strategy=strategy, error=ERROR)

    [anti] = await active(client, "anti_pattern")
    assert anti["id"] == found["id"]
    # the lesson's text already quotes the error: its context does not say it again
    assert anti["context"] == (
        "Failed 2 times. Tried: run migrate twice; run migrate without resetting the test database. "
        f"Better: squash the orders migrations into one. Fixed by: {fix}"
    )
