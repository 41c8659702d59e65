"""The knowledge loop's edges: promotion never silently replaces a memory someone saved and never counts
a fact's negation as a sighting of it; and a summary of a session whose outcome came from a machine
with a clock ahead is current, so a second pass is a no-op."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

FACT = "The staging database listens on port 5433"


async def _seen_in_sessions(client: Client, clock: FakeClock, facts: list[str]) -> None:
    for n, fact in enumerate(facts):
        await call(
            client, "memory_observe", content=f"Checked the staging config, run {n}", type="note",
            facts=[fact], session_id=f"s{n}", end_session=True,
        )  # fmt: skip
        clock.advance(minutes=5)


async def test_promotion_never_replaces_a_memory_that_says_the_fact_under_its_own_title(
    client: Client, clock: FakeClock
) -> None:
    # Its words alone overlap the fact's by 5 of 11; saved over it, with its title and concepts
    # inherited, by 0.9: a promotion would have made the fact its new version, reported as new.
    saved = await call(
        client, "memory_save", content="staging database listens port 5433 now", title="Ops note",
        concepts=["ops", "infra", "network"],
    )  # fmt: skip
    await _seen_in_sessions(client, clock, [FACT, FACT, FACT])

    dry = await call(client, "memory_consolidate", dry_run=True)
    report = await call(client, "memory_consolidate")
    got = await call(client, "memory_get", id=saved["id"])

    assert [c for c in dry["changes"] if c["kind"] == "memory"] == []
    assert [c for c in report["changes"] if c["kind"] == "memory"] == []
    assert got["memory"]["is_latest"] is True


async def test_a_facts_negation_is_not_a_sighting_of_it(client: Client, clock: FakeClock) -> None:
    await _seen_in_sessions(client, clock, [FACT, FACT, "The staging database does not listen on port 5433"])

    report = await call(client, "memory_consolidate")

    assert [c for c in report["changes"] if c["action"] == "promoted"] == []


async def test_a_fact_seen_in_three_sessions_is_still_promoted(client: Client, clock: FakeClock) -> None:
    await _seen_in_sessions(client, clock, [FACT, FACT, FACT])

    report = await call(client, "memory_consolidate")

    assert [c["detail"] for c in report["changes"] if c["action"] == "promoted"] == [f"seen in 3 sessions: {FACT}"]


async def test_a_second_pass_is_a_no_op_after_importing_an_outcome_stamped_ahead_of_this_clock(
    client: Client, clock: FakeClock, settings: Settings, tmp_path: Path
) -> None:
    await call(client, "memory_observe", content="Decided to use SQLite", type="decision", session_id="s1",
               end_session=True)  # fmt: skip
    clock.advance(hours=1)
    await call(client, "memory_outcome_record", task="Pick a store", success=True, session_id="s1")
    document = (await call(client, "memory_export"))["document"]
    behind = FakeClock(clock.now - timedelta(minutes=50))
    async with Client(build_server(settings.model_copy(update={"db": tmp_path / "b.db"}), behind)) as other:
        await call(other, "memory_import", document=document)
        behind.advance(minutes=1)
        first = await call(other, "memory_consolidate")
        second = await call(other, "memory_consolidate")
        again = await call(other, "memory_crystallize", session_id="s1")

    assert [c["action"] for c in first["changes"]] == ["crystallized"]
    assert second["changes"] == []
    assert again["sessions"][0]["changed"] is False
