"""Episodic filters that combine: forgetting a named session by when it began, a timeline anchored in
another session than the one asked for, caller-named sessions that look like the server's, lower-case ISO
times, and ISO weeks without a day."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.conftest import FakeClock, call, call_error


async def session_ids(client: Client) -> list[str]:
    return [s["id"] for s in (await call(client, "memory_sessions", status="all"))["sessions"]]


async def test_forgetting_a_named_session_within_a_window_deletes_it_only_if_it_began_there(
    client: Client, clock: FakeClock
) -> None:
    await call(client, "memory_observe", content="Talk about llamas.", session_id="chat-1")  # 2026-01-05

    outside = await call(client, "memory_forget", kind="session", session_id="chat-1", until="2026-01-04")
    assert (outside["total"], await session_ids(client)) == (0, ["chat-1"])

    dry = await call(client, "memory_forget", kind="session", session_id="chat-1", since="2026-01-01", dry_run=True)
    done = await call(client, "memory_forget", kind="session", session_id="chat-1", since="2026-01-01")

    assert dry["deleted"]["session"] == done["deleted"]["session"] == ["chat-1"]
    assert dry["total"] == done["total"] == 2  # the session and its observation
    assert await session_ids(client) == []


async def test_forgetting_lessons_of_a_session_is_refused_as_lessons_have_none(client: Client) -> None:
    await call(client, "memory_observe", content="Talk about llamas.", session_id="chat-1")
    await call(client, "memory_lesson_save", content="Llamas spit when annoyed.")

    error = await call_error(client, "memory_forget", kind="lesson", session_id="chat-1")

    assert "session_id: lessons belong to no session" in error
    assert len((await call(client, "memory_lessons"))["lessons"]) == 1


async def test_a_timeline_anchored_in_another_session_than_session_id_is_refused(
    client: Client, clock: FakeClock
) -> None:
    anchor = (await call(client, "memory_observe", content="A turn of chat a.", session_id="sa"))["id"]
    clock.advance(minutes=1)
    await call(client, "memory_observe", content="B turn of chat b.", session_id="sb")

    error = await call_error(client, "memory_timeline", anchor=anchor, session_id="sb")
    within = await call(client, "memory_timeline", anchor=anchor, session_id="sa")

    assert f"anchor: {anchor} is in session sa, not in session_id" in error
    assert [(e["id"], e["anchor"]) for e in within["entries"]] == [(anchor, True)]


async def test_a_session_the_caller_named_ses_something_is_its_own_conversation(
    client: Client, clock: FakeClock
) -> None:
    """Unnamed observations join the server's own sessions only: a caller's "ses_mychat" is neither
    joined nor ended by them; a new name shaped like a server id is refused."""
    named = await call(client, "memory_observe", content="A private turn.", session_id="ses_mychat")
    clock.advance(minutes=1)
    first = await call(client, "memory_observe", content="An automatic note.")
    clock.advance(minutes=500)
    later = await call(client, "memory_observe", content="A later automatic note.")
    minted = "ses_" + "0" * 22
    error = await call_error(client, "memory_observe", content="Another turn.", session_id=minted)

    assert named["session_id"] == "ses_mychat"
    assert first["session_created"] is True
    assert first["session_id"] != "ses_mychat"
    assert later["session_id"] not in {"ses_mychat", first["session_id"]}
    sessions = {s["id"]: s for s in (await call(client, "memory_sessions", status="all"))["sessions"]}
    assert sessions["ses_mychat"]["ended_at"] is None
    assert sessions["ses_mychat"]["observation_count"] == 1
    assert f"session_id: No session '{minted}' in this project" in error
    assert "names a session the server started" in error


async def test_lower_case_t_and_z_are_read_as_rfc_3339_allows(client: Client) -> None:
    saved = await call(client, "memory_observe", content="Deployed the gateway.", occurred_at="2024-05-01t14:30:00z")
    listed = await call(client, "memory_observations", since="2024-05-01t14:00:00z", until="2024-05-01t15:00:00z")

    assert [(o["id"], o["occurred_at"]) for o in listed["observations"]] == [
        (saved["id"], "2024-05-01T14:30:00.000000Z")
    ]


@pytest.mark.parametrize(("field", "value"), [("since", "2024-W18"), ("until", "2024w18"), ("occurred_at", "2024W18")])
async def test_a_week_without_its_day_is_refused_not_read_as_its_monday(client: Client, field: str, value: str) -> None:
    tool = "memory_observe" if field == "occurred_at" else "memory_observations"
    extra = {"content": "Deployed the gateway."} if field == "occurred_at" else {}
    error = await call_error(client, tool, **extra, **{field: value})
    assert f"{field}: must be an ISO-8601 date" in error
    await call(client, "memory_observe", content="Deployed the gateway.", occurred_at="2024-05-05T10:00:00Z")
    week = await call(client, "memory_observations", since="2024-W18-1", until="2024-W18-7")
    assert week["total"] == 1  # a week day is a day: Monday 29 April to Sunday 5 May 2024


# -- smart search explains an empty answer as recall does ------------------------------------------------


@pytest.mark.parametrize("query", ["   ", "<private>kubernetes</private>", "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"])
async def test_smart_search_says_when_nothing_was_left_of_the_query_to_search(client: Client, query: str) -> None:
    await call(client, "memory_save", content="Kubernetes namespace is prod-east.")

    found = await call(client, "memory_smart_search", query=query)

    assert found["hits"] == []
    assert found["hint"].startswith("The query has no word to search for")


async def test_smart_search_narrowed_by_kinds_names_the_kinds_that_match(client: Client) -> None:
    await call(client, "memory_save", content="Kubernetes namespace is prod-east.")

    found = await call(client, "memory_smart_search", query="kubernetes", kinds=["observation"])

    assert found["hits"] == []
    assert (
        found["hint"] == "Nothing of the kinds asked for matched, but memories do: leave kinds out to search them too."
    )
