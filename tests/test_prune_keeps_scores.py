"""Consolidation prunes only the old outcomes a lesson stands for, and their scores outlive them:
score history, success rate and mean score per task type read the same before and after, and
travel with an export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_tools_operations import fresh_settings

TAG = "tag the release then let CI deploy"


async def deploys(client: Client, clock: FakeClock) -> dict[str, str]:
    """Three deploys that worked one way, two that failed alike another way, one odd failure."""
    ids = {}
    for n in range(3):
        ids[f"win{n}"] = (await record(client, clock, f"Deploy build {n}", success=True, score=0.9, strategy=TAG))["id"]
    for n in range(2):
        ids[f"lost{n}"] = (
            await record(
                client, clock, f"Deploy hotfix {n}", success=False, score=0.3,
                strategy="copy the wheel to the hosts by hand", error="ssh: permission denied (publickey)",
            )
        )["id"]  # fmt: skip
    ids["odd"] = (
        await record(client, clock, "Deploy docs", success=False, score=0.1, error="docs bucket quota exceeded")
    )["id"]
    return ids


async def record(client: Client, clock: FakeClock, task: str, **fields: Any) -> dict[str, Any]:
    clock.advance(minutes=5)
    return await call(client, "memory_outcome_record", task=task, task_type="deploy", **fields)


async def deploy_stats(client: Client) -> dict[str, Any]:
    [stats] = (await call(client, "memory_insights", task_type="deploy"))["task_types"]
    return stats


async def test_old_outcomes_a_lesson_counts_are_pruned_and_the_rest_kept(client: Client, clock: FakeClock) -> None:
    ids = await deploys(client, clock)
    [heuristic] = (await call(client, "memory_insights", task_type="deploy"))["heuristics"]
    [anti] = (await call(client, "memory_insights", task_type="deploy"))["anti_patterns"]
    before = await deploy_stats(client)
    clock.advance(days=200)

    report = await call(client, "memory_consolidate")

    pruned = {c["id"]: c["detail"] for c in report["changes"] if c["action"] == "pruned"}
    reason = "its task type has a heuristic that holds; counted in "
    assert pruned == {
        **{ids[f"win{n}"]: reason + heuristic["id"] for n in range(3)},
        **{ids[f"lost{n}"]: reason + anti["id"] for n in range(2)},
    }  # the odd failure is evidence no lesson keeps: it stays, whole
    exported = (await call(client, "memory_export"))["document"]["tables"]
    assert [o["id"] for o in exported["outcomes"]] == [ids["odd"]]
    assert exported["outcomes"][0]["error"] == "docs bucket quota exceeded"
    assert {p["id"] for p in exported["pruned_outcomes"]} == set(pruned)
    assert "task" not in exported["pruned_outcomes"][0]  # their text is gone with them
    # the score figures read as they did
    assert await deploy_stats(client) == before
    assert (before["outcomes"], before["successes"], before["mean_score"]) == (6, 3, 0.5667)
    assert [p["outcome_id"] for p in before["history"]] == list(ids.values())
    assert (await call(client, "memory_consolidate"))["changes"] == []


async def test_a_strategy_whose_wins_were_pruned_is_not_also_one_to_avoid(client: Client, clock: FakeClock) -> None:
    for n in range(4):
        await record(client, clock, f"Deploy build {n}", success=True, strategy=TAG)
    clock.advance(days=200)
    await call(client, "memory_consolidate")  # the four wins now live on as the heuristic's tally
    for n in range(2):
        await record(client, clock, f"Deploy hotfix {n}", success=False, strategy=TAG, error="lock wait timeout")

    insights = await call(client, "memory_insights", task_type="deploy")

    [heuristic] = insights["heuristics"]
    assert heuristic["context"].startswith("Worked in 4 of 6 attempts")
    # counted without its pruned wins, the strategy read as two failures in two: avoided and advised at once
    assert insights["anti_patterns"] == []


async def test_the_scores_of_pruned_outcomes_travel_with_an_export(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path, "a", outcome_retention_days=30), clock)) as client:
        await deploys(client, clock)
        clock.advance(days=40)
        await call(client, "memory_consolidate")
        stats = await deploy_stats(client)
        document = (await call(client, "memory_export"))["document"]
    async with Client(build_server(fresh_settings(tmp_path, "b"), clock)) as other:
        imported = await call(other, "memory_import", document=document)
        again = await call(other, "memory_import", document=document)
        copied = await deploy_stats(other)
        round_trip = (await call(other, "memory_export"))["document"]

    assert imported["inserted"]["pruned_outcomes"] == 5
    assert again["inserted"]["pruned_outcomes"] == 0
    assert copied == stats
    assert round_trip["tables"] == document["tables"]


async def test_an_outcome_brought_back_is_counted_once(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path, outcome_retention_days=30), clock)) as client:
        await deploys(client, clock)
        backup = (await call(client, "memory_export"))["document"]
        before = await deploy_stats(client)
        clock.advance(days=40)
        await call(client, "memory_consolidate")
        restored = await call(client, "memory_import", document=backup, restore_forgotten=True)
        after = await deploy_stats(client)

    assert restored["restored"] == 5
    assert after == before
