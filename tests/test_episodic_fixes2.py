"""Observations: a URL is no file of the project, and a session is idle once unused for exactly its limit."""

from __future__ import annotations

from mcp import Client

from mcp_memory.config import Settings
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
