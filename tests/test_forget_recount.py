"""memory_forget recounts the heuristics and anti-patterns that counted a forgotten outcome among others."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

from tests.conftest import call

ERROR = "timeout waiting for the health check on port 8080"


async def _fail(client: Client, n: int, strategy: str = "push straight to production") -> str:
    result = await call(
        client, "memory_outcome_record", task=f"deploy build {n}", task_type="deploy", success=False,
        strategy=strategy, error=ERROR,
    )  # fmt: skip
    return str(result["id"])


async def _lessons(client: Client, kind: str, status: str = "active") -> list[dict[str, Any]]:
    return list((await call(client, "memory_lessons", kinds=[kind], status=status))["lessons"])


async def test_an_anti_pattern_counts_its_failures_without_a_forgotten_one(client: Client) -> None:
    failures = [await _fail(client, n) for n in range(3)]
    [before] = await _lessons(client, "anti_pattern")
    assert before["source"]["failures"] == 3

    await call(client, "memory_forget", ids=[failures[0]])

    [after] = await _lessons(client, "anti_pattern")
    assert after["id"] == before["id"]
    assert after["source"]["failures"] == 2
    assert after["source"]["failed_outcomes"] == sorted(failures[1:])
    assert after["context"].startswith("Failed 2 times")
    assert after["confidence"] < before["confidence"]
    # the next failure counts three, not four: the forgotten one stays forgotten
    await _fail(client, 3)
    [again] = await _lessons(client, "anti_pattern")
    assert again["source"]["failures"] == 3
    assert failures[0] not in again["source"]["failed_outcomes"]


async def test_an_anti_pattern_left_with_one_failure_is_retired(client: Client) -> None:
    failures = [await _fail(client, n) for n in range(2)]
    [learned] = await _lessons(client, "anti_pattern")

    await call(client, "memory_forget", ids=[failures[1]])

    assert await _lessons(client, "anti_pattern") == []
    [faded] = await _lessons(client, "anti_pattern", status="faded")
    assert faded["id"] == learned["id"]
    assert faded["source"]["failed_outcomes"] == [failures[0]]
    # a second failure brings the same lesson back
    await _fail(client, 2)
    [back] = await _lessons(client, "anti_pattern")
    assert back["id"] == learned["id"]
    assert back["source"]["failures"] == 2


async def test_a_forgotten_success_is_no_longer_the_better_alternative(client: Client) -> None:
    for n in range(2):
        await _fail(client, n)
    ok = await call(
        client, "memory_outcome_record", task="deploy build 9", task_type="deploy", success=True,
        strategy="canary rollout behind the flag_gate switch",
    )  # fmt: skip
    [pattern] = await _lessons(client, "anti_pattern")
    assert pattern["source"]["alternative"] == "canary rollout behind the flag_gate switch"

    await call(client, "memory_forget", ids=[ok["id"]])

    [pattern] = await _lessons(client, "anti_pattern")
    assert pattern["source"]["alternative"] is None
    assert pattern["context"].endswith("No successful alternative recorded yet.")
    assert "flag_gate" not in json.dumps(await call(client, "memory_export"))


async def test_a_strategy_only_a_forgotten_failure_tried_is_not_quoted(client: Client) -> None:
    kept = [await _fail(client, 0, "retry the rollout by hand"), await _fail(client, 1, "bump the pod memory limit")]
    secret = await _fail(client, 2, "disable the readiness probe on cluster orion_7")
    [pattern] = await _lessons(client, "anti_pattern")
    assert "orion_7" in pattern["context"]

    await call(client, "memory_forget", ids=[secret])

    [pattern] = await _lessons(client, "anti_pattern")
    assert pattern["source"]["failed_outcomes"] == sorted(kept)
    assert "Tried: retry the rollout by hand; bump the pod memory limit." in pattern["context"]
    assert "orion_7" not in json.dumps(await call(client, "memory_export"))


async def test_a_heuristic_counts_its_outcomes_without_a_forgotten_one(client: Client) -> None:
    ids = []
    for n in range(4):
        result = await call(
            client, "memory_outcome_record", task=f"release {n}", task_type="release", success=n != 3,
            strategy="tag the release then let CI publish the wheel",
        )  # fmt: skip
        ids.append(result["id"])
    [heuristic] = await _lessons(client, "heuristic")
    assert heuristic["context"] == "Worked in 3 of 4 attempts with a similar strategy."

    await call(client, "memory_forget", ids=[ids[3]])  # the failure goes
    [heuristic] = await _lessons(client, "heuristic")
    assert heuristic["context"] == "Worked in 3 of 3 attempts with a similar strategy."
    assert heuristic["confidence"] == 1.0

    await call(client, "memory_forget", ids=[ids[0]])  # two outcomes are too few to hold
    assert await _lessons(client, "heuristic") == []
    [faded] = await _lessons(client, "heuristic", status="faded")
    assert faded["context"] == "Worked in 2 of 2 attempts with a similar strategy."


async def test_a_dry_run_recounts_nothing(client: Client) -> None:
    failures = [await _fail(client, n) for n in range(3)]
    before = await _lessons(client, "anti_pattern")
    await call(client, "memory_forget", ids=[failures[0]], dry_run=True)
    assert await _lessons(client, "anti_pattern") == before
