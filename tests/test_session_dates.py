"""A session is dated by when its conversation happened, not when it was stored: in search, lists, context, forget."""

from __future__ import annotations

from mcp import Client

from mcp_memory.clock import to_iso
from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_tools_operations import export_document

SESSION = "chat-may"
MAY = {"since": "2023-05-01T00:00:00Z", "until": "2023-06-01T00:00:00Z"}


async def import_may_chat(client: Client) -> None:
    """A conversation from May 2023 recorded today (the clock says 2026), ended and summarised."""
    turns = [
        ("Caroline: we picked the zanzibar layout for the shelter's website", "2023-05-07T18:00:00Z"),
        ("Melanie: the zanzibar layout loads fast on phones too", "2023-05-08T09:30:00Z"),
    ]
    for content, at in turns:
        await call(client, "memory_observe", content=content, session_id=SESSION, occurred_at=at, type="conversation")
    bye = {"occurred_at": "2023-05-08T09:31:00Z", "end_session": True}
    await call(client, "memory_observe", content="Caroline: bye!", session_id=SESSION, **bye)
    await call(client, "memory_crystallize", session_id=SESSION)


async def sessions_found(client: Client, **window: str) -> list[str]:
    """The sessions memory_recall finds for the conversation's words within `window` (since / until)."""
    found = await call(client, "memory_recall", query="zanzibar layout", **window)
    return [hit["id"] for hit in found["hits"] if hit["kind"] == "session"]


async def test_a_summarised_session_is_found_in_the_month_its_turns_happened(client: Client) -> None:
    await import_may_chat(client)

    assert await sessions_found(client, **MAY) == [SESSION]
    # stored today, but nothing of it happened this year
    assert await sessions_found(client, since="2026-01-01T00:00:00Z") == []


async def test_a_session_with_undated_turns_is_dated_by_its_latest_one(client: Client, clock: FakeClock) -> None:
    await call(client, "memory_observe", content="Picked the zanzibar layout.", session_id="live")
    clock.advance(days=3)
    await call(client, "memory_observe", content="The zanzibar layout shipped.", session_id="live", end_session=True)
    await call(client, "memory_crystallize", session_id="live")

    assert await sessions_found(client, since="2026-01-07T00:00:00Z") == ["live"]
    assert await sessions_found(client, until="2026-01-07T00:00:00Z") == []


async def test_an_imported_session_keeps_its_date(client: Client, settings: Settings, clock: FakeClock) -> None:
    await import_may_chat(client)
    document = await export_document(client)

    other = settings.model_copy(update={"db": settings.db.with_name("other.db")})
    async with Client(build_server(other, clock)) as imported:
        await call(imported, "memory_import", document=document)
        assert await sessions_found(imported, **MAY) == [SESSION]


async def test_a_folded_session_is_dated_by_its_folded_turns_too(settings: Settings, clock: FakeClock) -> None:
    capped = settings.model_copy(update={"observation_cap": 2})
    async with Client(build_server(capped, clock)) as client:
        for day in range(1, 6):  # the low-importance notes of 1-3 May fold into the digest
            content = f"zanzibar layout note {day}"
            at = f"2023-05-0{day}T12:00:00Z"
            await call(client, "memory_observe", content=content, session_id="notes", occurred_at=at)
        assert await sessions_found(client, **MAY) == ["notes"]
        assert await sessions_found(client, since="2023-05-06T00:00:00Z") == []


async def test_a_summarised_session_continued_later_is_found_then_too(client: Client) -> None:
    await import_may_chat(client)
    june = {"since": "2023-06-01T00:00:00Z", "until": "2023-07-01T00:00:00Z"}
    assert await sessions_found(client, **june) == []

    # the conversation picks up again in June: its summary now reaches into June
    later = {"session_id": SESSION, "occurred_at": "2023-06-12T10:00:00Z"}
    await call(client, "memory_observe", content="Caroline: back from holiday", **later)

    assert await sessions_found(client, **june) == [SESSION]
    assert await sessions_found(client, **MAY) == []  # one date per document: its latest turn's


async def test_an_earlier_turn_added_later_leaves_the_session_date(client: Client) -> None:
    await import_may_chat(client)
    earlier = {"session_id": SESSION, "occurred_at": "2023-05-02T10:00:00Z"}
    await call(client, "memory_observe", content="Melanie: a turn remembered late", **earlier)

    assert await sessions_found(client, **MAY) == [SESSION]
    assert await sessions_found(client, until="2023-05-07T00:00:00Z") == []


async def test_sessions_list_when_their_conversation_happened(client: Client, clock: FakeClock) -> None:
    await import_may_chat(client)
    await call(client, "memory_observe", content="Live note.", session_id="live")

    listed = {s["id"]: s for s in (await call(client, "memory_sessions"))["sessions"]}

    may = listed[SESSION]
    assert (may["first_happened_at"], may["last_happened_at"]) == (
        "2023-05-07T18:00:00.000000Z",
        "2023-05-08T09:31:00.000000Z",
    )
    assert may["started_at"] == to_iso(clock.now)  # recorded today
    assert listed["live"]["first_happened_at"] == listed["live"]["last_happened_at"] == to_iso(clock.now)


async def test_forgetting_a_window_takes_the_sessions_that_began_in_it(client: Client, clock: FakeClock) -> None:
    await import_may_chat(client)
    await call(client, "memory_observe", content="Live note.", session_id="live")

    today = await call(client, "memory_forget", kind="session", since=to_iso(clock.now), dry_run=True)
    may = await call(client, "memory_forget", kind="session", **MAY)

    assert today["deleted"]["session"] == ["live"]  # the imported conversation is not today's
    assert may["deleted"]["session"] == [SESSION]
    assert len(may["deleted"]["observation"]) == 3
    assert [s["id"] for s in (await call(client, "memory_sessions"))["sessions"]] == ["live"]


async def test_the_context_dates_a_recent_session_by_when_it_happened(client: Client) -> None:
    await import_may_chat(client)

    context = await call(client, "memory_context")

    [line] = [line for line in context["text"].split("\n") if line.startswith("- 2023-05-08 ")]
    assert "3 observations" in line


async def test_another_server_and_a_restart_see_a_continued_session_re_dated(
    settings: Settings, clock: FakeClock
) -> None:
    june = {"since": "2023-06-01T00:00:00Z", "until": "2023-07-01T00:00:00Z"}
    async with Client(build_server(settings, clock)) as one, Client(build_server(settings, clock)) as two:
        for day in ("07", "08"):  # still open when summarised: continuing it reopens nothing
            turn = {"session_id": "open-chat", "occurred_at": f"2023-05-{day}T18:00:00Z"}
            await call(one, "memory_observe", content=f"Caroline: zanzibar layout, day {day}", **turn)
        await call(one, "memory_crystallize", session_id="open-chat", force=True)
        assert await sessions_found(two, **june) == []

        later = {"session_id": "open-chat", "occurred_at": "2023-06-12T10:00:00Z"}
        await call(one, "memory_observe", content="Caroline: back from holiday", **later)

        assert await sessions_found(two, **june) == ["open-chat"]
    async with Client(build_server(settings, clock)) as restarted:  # from the index cache one wrote
        assert await sessions_found(restarted, **june) == ["open-chat"]


async def test_a_later_turn_the_same_day_moves_the_session_in_every_server(
    settings: Settings, clock: FakeClock
) -> None:
    # Re-dated without analysing its text again (same words, same day): the time still moves in this
    # server's index, in another's and in the stored form a restart reads.
    evening = {"since": "2023-05-08T19:00:00Z", "until": "2023-05-09T00:00:00Z"}
    async with Client(build_server(settings, clock)) as one, Client(build_server(settings, clock)) as two:
        await import_may_chat(one)  # its last turn: 2023-05-08 09:31
        assert await sessions_found(two, **evening) == []

        later = {"session_id": SESSION, "occurred_at": "2023-05-08T20:00:00Z"}
        await call(one, "memory_observe", content="Melanie: one more thing before bed", **later)

        assert await sessions_found(one, **evening) == [SESSION]
        assert await sessions_found(two, **evening) == [SESSION]
        named = await call(two, "memory_recall", query="zanzibar layout on 8 May 2023")
        assert [hit["id"] for hit in named["hits"] if hit["kind"] == "session"] == [SESSION]  # words and day kept
    async with Client(build_server(settings, clock)) as restarted:
        assert await sessions_found(restarted, **evening) == [SESSION]
