"""Time at its edges: a session folded down to later turns still began when its first turn
happened; a day whose last hour comes round twice (clocks going back at midnight) holds both; and
a setting meant as "never" (a very large idle limit or retention) is taken as such, not failed on."""

from __future__ import annotations

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

# Santiago left summer time at midnight starting Sunday 7 April 2024: its clocks went back to 23:00
# on Saturday, so 03:30Z is the second 23:30 of Saturday 6 April (-04:00).
SECOND_LAST_HOUR = "2024-04-07T03:30:00Z"


async def test_a_session_whose_first_turn_folded_began_when_that_turn_happened(
    settings: Settings, clock: FakeClock
) -> None:
    capped = settings.model_copy(update={"observation_cap": 10})
    async with Client(build_server(capped, clock)) as client:
        for day in range(1, 12):  # the eleventh folds the least valuable: of equals, the oldest
            await call(
                client,
                "memory_observe",
                content=f"Step {day} of the parser.",
                occurred_at=f"2025-03-{day:02d}T08:00:00Z",
                session_id="parser",
            )
        (session,) = (await call(client, "memory_sessions"))["sessions"]
        began_first = await call(
            client, "memory_forget", kind="session", since="2025-03-01", until="2025-03-01", dry_run=True
        )
        began_second = await call(
            client, "memory_forget", kind="session", since="2025-03-02", until="2025-03-02", dry_run=True
        )

    assert session["folded_count"] == 1
    assert session["first_happened_at"] == "2025-03-01T08:00:00.000000Z"
    assert began_first["deleted"].get("session") == ["parser"]
    assert began_second["deleted"].get("session", []) == []


async def test_a_day_whose_last_hour_comes_round_twice_holds_both(settings: Settings, clock: FakeClock) -> None:
    santiago = settings.model_copy(update={"timezone": "America/Santiago"})
    async with Client(build_server(santiago, clock)) as client:
        await call(client, "memory_observe", content="Rotated the signing keys.", occurred_at=SECOND_LAST_HOUR)
        saturday = await call(client, "memory_observations", since="2024-04-06", until="2024-04-06")
        sunday = await call(client, "memory_observations", since="2024-04-07", until="2024-04-07")
        recalled = await call(client, "memory_recall", query="signing keys", since="2024-04-06", until="2024-04-06")

    assert (saturday["total"], sunday["total"]) == (1, 0)
    assert len(recalled["hits"]) == 1


async def test_settings_meant_as_never_are_taken_as_never(settings: Settings, clock: FakeClock) -> None:
    never = settings.model_copy(update={"session_idle_minutes": 10**10, "outcome_retention_days": 10**10})
    async with Client(build_server(never, clock)) as client:
        first = await call(client, "memory_observe", content="Started the migration.")
        for _ in range(2):  # an anti-pattern counts them: outcomes past the retention could be pruned
            await call(client, "memory_outcome_record", task="Migrate the schema", success=False, error="lock timeout")
        clock.advance(days=3650)
        second = await call(client, "memory_observe", content="Finished the migration.")
        listed = await call(client, "memory_sessions")
        report = await call(client, "memory_consolidate")
        crystallized = await call(client, "memory_crystallize")

    assert first["session_id"] == second["session_id"]
    assert [s["status"] for s in listed["sessions"]] == ["active"]
    assert [c for c in report["changes"] if c["kind"] == "outcome"] == []
    assert crystallized["sessions"] == []  # still open: nothing to summarise


async def test_a_folded_turns_digest_line_reads_in_the_databases_zone(settings: Settings, clock: FakeClock) -> None:
    new_york = settings.model_copy(update={"timezone": "America/New_York", "observation_cap": 10})
    async with Client(build_server(new_york, clock)) as client:
        # 21:30 on 1 May in New York (01:30 on 2 May in UTC), a cheap tool run: the first to fold
        await call(
            client,
            "memory_observe",
            content="Rotated the vault keys.",
            type="tool_use",
            occurred_at="2024-05-01T21:30:00",
            session_id="evening",
        )
        for n in range(10):
            await call(
                client,
                "memory_observe",
                content=f"Decision {n}: keep shelf {n}.",
                type="decision",
                occurred_at=f"2024-05-01T21:{31 + n}:00",
                session_id="evening",
            )
        (session,) = (await call(client, "memory_smart_search", ids=["evening"]))["sessions"]
        next_day = await call(
            client, "memory_forget", kind="observation", since="2024-05-02", until="2024-05-02", dry_run=True
        )
        that_day = await call(
            client, "memory_forget", kind="observation", since="2024-05-01", until="2024-05-01", dry_run=True
        )

    (line,) = [line for line in session["folded_digest"].split("\n") if "vault keys" in line]
    assert line == "- 2024-05-01 21:30-04:00 [tool_use] Rotated the vault keys."
    # the line is of a turn made on 1 May there: a window of that day holds it, one of the next does not
    assert next_day["counts"].get("folded_observation", 0) == 0
    assert that_day["counts"]["folded_observation"] == 1
