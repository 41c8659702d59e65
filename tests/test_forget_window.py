"""Forgetting by a time window takes what happened in it: a session goes whole only when all of it
happened there, and `kind="session"` still takes the sessions that began there."""

from __future__ import annotations

from mcp import Client

from tests.conftest import FakeClock, call


async def _three_days(client: Client, session_id: str) -> dict[str, str]:
    """A session with a note on 1, 3 and 5 May 2024; its observation ids by day."""
    ids = {}
    for day in ("2024-05-01", "2024-05-03", "2024-05-05"):
        made = await call(client, "memory_observe", content=f"standup notes for {day}", occurred_at=f"{day}T12:00:00Z",
                          session_id=session_id)  # fmt: skip
        ids[day] = made["id"]
    return ids


async def _titles(client: Client) -> list[str]:
    listed = await call(client, "memory_observations", limit=100)
    return sorted(o["title"] for o in listed["observations"])


async def test_a_window_over_the_start_of_a_session_leaves_what_came_after_it(client: Client) -> None:
    ids = await _three_days(client, "sprint-12")
    planned = await call(client, "memory_forget", since="2024-05-01", until="2024-05-01", dry_run=True)
    done = await call(client, "memory_forget", since="2024-05-01", until="2024-05-01")
    assert planned["deleted"] == done["deleted"]
    assert done["deleted"]["observation"] == [ids["2024-05-01"]]
    assert done["deleted"]["session"] == []
    assert await _titles(client) == ["standup notes for 2024-05-03", "standup notes for 2024-05-05"]
    listed = await call(client, "memory_sessions", status="all")
    assert [(s["id"], s["observation_count"]) for s in listed["sessions"]] == [("sprint-12", 2)]


async def test_a_window_holding_a_whole_session_takes_the_session(client: Client, clock: FakeClock) -> None:
    await _three_days(client, "sprint-12")
    other = await call(client, "memory_observe", content="retro notes", occurred_at="2024-06-10T09:00:00Z",
                       session_id="retro")  # fmt: skip
    done = await call(client, "memory_forget", since="2024-04-30", until="2024-05-31")
    assert done["deleted"]["session"] == ["sprint-12"]
    assert done["counts"]["observation"] == 3
    assert await _titles(client) == ["retro notes"]
    assert (await call(client, "memory_sessions", status="all"))["sessions"][0]["id"] == other["session_id"]


async def test_kind_session_still_takes_the_sessions_that_began_in_the_window(client: Client) -> None:
    await _three_days(client, "sprint-12")
    done = await call(client, "memory_forget", kind="session", since="2024-05-01", until="2024-05-01")
    assert done["deleted"]["session"] == ["sprint-12"]
    assert done["counts"]["observation"] == 3
    assert await _titles(client) == []
