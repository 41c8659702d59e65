"""One recurring problem is one anti-pattern, whichever path finds it first (failed outcomes or
memory_reflect over error observations): found again, it is reinforced, and its counts add up."""

from __future__ import annotations

from typing import Any

from mcp import Client

from tests.conftest import FakeClock, call

ERROR = (
    'django.db.utils.ProgrammingError: column "currency" of relation "orders_order" already exists '
    "when running migrate on the test database"
)
STRATEGY = "run migrate on the existing test database"


async def fail(client: Client, clock: FakeClock, error: str = ERROR, **args: Any) -> dict[str, Any]:
    args.setdefault("strategy", STRATEGY)
    result = await call(
        client, "memory_outcome_record", task="Apply orders migration", task_type="migration", success=False,
        error=error, **args,
    )  # fmt: skip
    clock.advance(minutes=1)
    return result


async def observe(client: Client, clock: FakeClock, content: str = ERROR, session_id: str = "s1") -> str:
    saved = await call(client, "memory_observe", content=content, type="error", session_id=session_id)
    clock.advance(minutes=1)
    return str(saved["id"])


async def anti_patterns(client: Client) -> list[dict[str, Any]]:
    return (await call(client, "memory_lessons", kinds=["anti_pattern"], status="all", limit=100))["lessons"]


def context_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "anti_pattern" in line]


async def test_reflect_reinforces_the_anti_pattern_failed_outcomes_already_drew(
    client: Client, clock: FakeClock
) -> None:
    observed, recorded = [], []
    for _ in range(2):
        observed.append(await observe(client, clock))
        recorded.append((await fail(client, clock, session_id="s1"))["id"])
    (drawn,) = await anti_patterns(client)

    reflected = await call(client, "memory_reflect")

    (anti,) = await anti_patterns(client)
    assert [a["id"] for a in reflected["anti_patterns"]] == [anti["id"]] == [drawn["id"]]
    assert (anti["task_type"], anti["content"]) == ("migration", f"Avoid in migration tasks: {STRATEGY}")
    assert anti["context"] == f"Failed 2 times with errors like: {ERROR}. No successful alternative recorded yet."
    assert anti["reinforcements"] == drawn["reinforcements"] + 1
    assert anti["source"]["failures"] == 2
    assert (anti["source"]["evidence"], anti["source"]["failed_outcomes"]) == (sorted(observed), sorted(recorded))
    (line,) = context_lines((await call(client, "memory_context"))["text"])
    assert anti["id"] in line
    assert (await call(client, "memory_reflect"))["anti_patterns"] == []  # the same evidence teaches nothing new


async def test_failed_outcomes_take_over_the_anti_pattern_reflect_found_first(client: Client, clock: FakeClock) -> None:
    fix = "Dropped the stale test database volume with docker compose down -v; migrate now succeeds."
    observed = [await observe(client, clock), await observe(client, clock)]
    await call(client, "memory_observe", content=fix, type="fix", session_id="s1")
    clock.advance(minutes=1)
    (found,) = (await call(client, "memory_reflect"))["anti_patterns"]
    # The error is kept whole, not cut at the observation's title length.
    assert (found["content"], found["task_type"]) == (f"Recurring error: {ERROR}", None)

    first = await fail(client, clock)
    assert first["derived"]["anti_patterns"] == []  # one failure is not yet a pattern; reflect's finding stays
    second = await fail(client, clock)

    (anti,) = await anti_patterns(client)
    assert second["derived"]["anti_patterns"] == [anti["id"]] == [found["id"]]
    assert (anti["status"], anti["task_type"]) == ("active", "migration")
    assert anti["content"] == f"Avoid in migration tasks: {STRATEGY}"
    assert anti["context"] == f"Failed 2 times with errors like: {ERROR}. Fixed by: {fix}"
    assert anti["source"]["evidence"] == sorted(observed)
    assert anti["source"]["failed_outcomes"] == sorted([first["id"], second["id"]])
    assert len(context_lines((await call(client, "memory_context", task_type="migration"))["text"])) == 1
    # Reflecting on the same errors again finds the same lesson and changes nothing.
    assert (await call(client, "memory_reflect"))["anti_patterns"] == []
    assert [a["id"] for a in await anti_patterns(client)] == [anti["id"]]


async def test_failures_of_one_problem_in_other_words_make_one_anti_pattern_counting_each_once(
    client: Client, clock: FakeClock
) -> None:
    bad = "run migrate without resetting the test database"
    fix = "reset the test database volume then run migrate"
    await fail(client, clock, "ProgrammingError: column currency of relation orders_order already exists", strategy=bad)
    await fail(
        client, clock, "ProgrammingError: column currency of relation orders_order already exists after reset",
        strategy=bad + " volume",
    )  # fmt: skip
    await call(client, "memory_outcome_record", task="Apply orders migration", task_type="migration", score=0.95,
               strategy=fix)  # fmt: skip
    third = await fail(
        client, clock, "ProgrammingError: column refunded_at of relation payments_payment already exists", strategy=bad
    )

    (anti,) = await anti_patterns(client)
    assert third["derived"]["anti_patterns"] == [anti["id"]]
    assert anti["content"] == f"Avoid in migration tasks: {bad} volume"
    assert anti["source"]["failures"] == 3
    assert anti["confidence"] == 0.7
    assert anti["context"].startswith("Failed 3 times with errors like: ProgrammingError: column refunded_at")
    assert anti["context"].endswith(f". Better: {fix}")


async def test_a_recurring_error_seen_again_in_a_later_window_is_the_same_anti_pattern(
    client: Client, clock: FakeClock
) -> None:
    early = [await observe(client, clock), await observe(client, clock, ERROR + " (again)")]
    (found,) = (await call(client, "memory_reflect"))["anti_patterns"]
    clock.advance(days=8)  # the first sightings have left the default window
    late = [await observe(client, clock, "Again: " + ERROR, "s2"), await observe(client, clock, ERROR, "s2")]

    (again,) = (await call(client, "memory_reflect"))["anti_patterns"]

    assert again["id"] == found["id"]
    assert again["reinforcements"] == 1
    assert again["context"] == "Seen 4 times."
    assert sorted(again["source"]["evidence"]) == sorted(early + late)
    assert len(await anti_patterns(client)) == 1


async def test_a_long_error_is_cut_at_a_word_and_kept_whole_in_its_evidence(client: Client, clock: FakeClock) -> None:
    long_error = ERROR + " " + " ".join(f"while applying migration number {n} of the orders app" for n in range(12))
    observed = [await observe(client, clock, long_error), await observe(client, clock, long_error)]

    (anti,) = (await call(client, "memory_reflect"))["anti_patterns"]

    shown = anti["content"].removeprefix("Recurring error: ")
    assert shown.endswith("…")
    assert long_error.startswith(shown[:-1])
    assert long_error[len(shown) - 1] == " "  # cut between words
    fetched = await call(client, "memory_smart_search", ids=anti["source"]["evidence"])
    assert sorted(o["id"] for o in fetched["observations"]) == sorted(observed)
    assert {o["content"] for o in fetched["observations"]} == {long_error}
