"""Observations: a URL is no file of the project, and a session is idle once unused for exactly its limit."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call


async def test_a_url_is_not_taken_for_a_file(client: Client) -> None:
    made = await call(
        client,
        "memory_observe",
        content="Read https://docs.python.org/3/library/sqlite3.html before changing src/db/connection.py.",
    )

    assert made["files"] == ["src/db/connection.py"]


async def test_a_session_unused_for_exactly_the_idle_limit_is_idle(
    client: Client, clock: FakeClock, settings: Settings
) -> None:
    first = await call(client, "memory_observe", content="Started the migration.")
    clock.advance(minutes=settings.session_idle_minutes)

    idle = await call(client, "memory_sessions", status="idle")
    second = await call(client, "memory_observe", content="Back after lunch.")

    assert [s["id"] for s in idle["sessions"]] == [first["session_id"]]
    assert second["session_id"] != first["session_id"]
    assert second["session_created"] is True


async def test_a_sessions_first_turn_stays_its_start_once_folded(tmp_path: Path, clock: FakeClock) -> None:
    settings = Settings(db=tmp_path / "m.db", project="test", synchronous="normal", timezone="UTC", observation_cap=10)
    async with Client(build_server(settings, clock)) as client:
        for i in range(11):  # the eleventh folds the least valuable: the oldest of equals, the first
            at = f"2025-03-{i + 1:02d}T08:00:00Z"
            await call(client, "memory_observe", content=f"Step {i} of the parser.", occurred_at=at, session_id="c1")
        [session] = (await call(client, "memory_sessions"))["sessions"]

    assert session["folded_count"] >= 1
    assert (session["first_happened_at"], session["last_happened_at"]) == (
        "2025-03-01T08:00:00.000000Z",
        "2025-03-11T08:00:00.000000Z",
    )
