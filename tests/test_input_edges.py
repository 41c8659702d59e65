"""Edge values of caller input: far-off years, offsets past the calendar, odd session names, empty text."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

import pytest
from mcp import Client

from mcp_memory.clock import from_iso, to_iso
from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error


def test_stored_times_keep_four_digit_years_and_read_back_for_every_year() -> None:
    moments = [datetime(year, 5, 1, 3, 4, 5, 6, tzinfo=UTC) for year in range(1, 10_000)]
    texts = [to_iso(m) for m in moments]
    assert texts[0] == "0001-05-01T03:04:05.000006Z"
    assert texts[223] == "0224-05-01T03:04:05.000006Z"
    assert [from_iso(t) for t in texts] == moments
    assert sorted(texts) == texts  # text order is time order, which every SQL range filter relies on
    assert to_iso(datetime(9999, 12, 31, 23, 59, 59, 999999)) == "9999-12-31T23:59:59.999999Z"


@pytest.mark.parametrize("until", ["2026-01-05", "20260105", "2026-W02-1", " 2026-01-05 "])
async def test_every_iso_form_of_a_date_ends_a_window_with_its_whole_day(client: Client, until: str) -> None:
    for when in ("2026-01-04T23:00:00Z", "2026-01-05T00:00:00Z", "2026-01-05T18:30:00Z", "2026-01-06T00:00:00Z"):
        await call(client, "memory_observe", content=f"deploy note at {when}", occurred_at=when)

    listed = await call(client, "memory_observations", until=until)
    planned = await call(client, "memory_forget", kind="observation", until=until, dry_run=True)

    assert listed["total"] == 3
    assert planned["counts"]["observation"] == 3


@pytest.mark.parametrize("day", ["0001-01-01", "0224-05-01", "0999-12-31"])
async def test_a_time_before_year_1000_is_stored_padded_and_found_by_range(client: Client, day: str) -> None:
    await call(client, "memory_observe", content="release checklist reviewed")  # dated 2026 by the clock
    ancient = await call(client, "memory_observe", content="ancient harbour records", occurred_at=day)

    listed = await call(client, "memory_observations", until=day)
    assert [(o["id"], o["occurred_at"]) for o in listed["observations"]] == [(ancient["id"], f"{day}T00:00:00.000000Z")]
    later = await call(client, "memory_observations", since="1000-01-01")
    assert [o["title"] for o in later["observations"]] == ["release checklist reviewed"]
    recalled = await call(client, "memory_recall", query="harbour records", since=day)
    assert [h["id"] for h in recalled["hits"]] == [ancient["id"]]


async def test_forget_until_an_ancient_typo_date_deletes_nothing_newer(client: Client) -> None:
    observed = await call(client, "memory_observe", content="release checklist reviewed")
    saved = await call(client, "memory_save", content="The release process needs two approvals")

    forgotten = await call(client, "memory_forget", until="0224-05-01")  # meant 2024-05-01

    assert forgotten["total"] == 0
    fetched = await call(client, "memory_smart_search", ids=[observed["id"], saved["id"]])
    assert fetched["missing"] == []
    assert (await call(client, "memory_sessions"))["total"] == 1


@pytest.mark.parametrize(
    ("tool", "field", "args"),
    [
        ("memory_action_create", "due", {"title": "Renew", "due": "9999-12-31T23:59:59-05:00"}),
        ("memory_observe", "occurred_at", {"content": "x", "occurred_at": "9999-12-31T23:00:00-05:00"}),
        ("memory_recall", "since", {"query": "x", "since": "0001-01-01T00:00:00+01:00"}),
        ("memory_observations", "until", {"until": "0001-01-01T00:00:00+05:00"}),
    ],
)
async def test_a_time_past_the_calendar_in_utc_is_refused_naming_the_field(
    client: Client, tool: str, field: str, args: dict[str, str]
) -> None:
    message = await call_error(client, tool, **args)

    assert f"{field}: must fall within the years 0001-9999 once converted to UTC" in message
    assert (await call(client, "memory_diagnose"))["counts"]["observations"] == 0


async def test_an_action_due_moved_past_year_one_is_refused_and_the_action_kept(client: Client) -> None:
    action = (await call(client, "memory_action_create", title="Renew", due="2026-02-01"))["action"]

    message = await call_error(client, "memory_action_update", id=action["id"], due="0001-01-01T00:00:00+05:00")

    assert "due: must fall within the years 0001-9999" in message
    listed = await call(client, "memory_action_list")
    assert [a["due"] for a in listed["actions"]] == ["2026-02-01T00:00:00.000000Z"]


async def test_year_zero_is_refused_as_outside_the_calendar(client: Client) -> None:
    message = await call_error(client, "memory_observe", content="x", occurred_at="0000-06-01")
    assert "occurred_at: must be an ISO-8601 date or date-time in the years 0001-9999" in message


@pytest.mark.parametrize("name", ["mem_chat", "obs_x", "act_y", "les_1", "out_a", "mc_b", "slot_c", "rel_d"])
async def test_a_session_named_like_a_record_id_is_refused(client: Client, name: str) -> None:
    message = await call_error(client, "memory_observe", content="hello", session_id=name)

    prefix = name.partition("_")[0]
    assert f"session_id: must not start with {prefix}_" in message
    assert "pick another name" in message
    assert (await call(client, "memory_diagnose"))["counts"]["observations"] == 0


async def test_a_session_stored_before_the_name_rule_still_takes_observations(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        await call(client, "memory_observe", content="first turn", session_id="chat")
    with sqlite3.connect(settings.db) as raw:  # as an older release could have named it
        raw.execute("PRAGMA foreign_keys = OFF")
        for table in ("sessions", "observations", "search_docs"):
            column = "id" if table == "sessions" else "session_id"
            raw.execute(f"UPDATE {table} SET {column} = 'mem_chat' WHERE {column} = 'chat'")

    async with Client(build_server(settings, clock)) as client:
        observed = await call(client, "memory_observe", content="second turn", session_id="mem_chat")
        listed = await call(client, "memory_observations", session_id="mem_chat")

    assert observed["session_id"] == "mem_chat"
    assert sorted(o["title"] for o in listed["observations"]) == ["first turn", "second turn"]


@pytest.mark.parametrize("name", ["ses_chat", "conv-1", "MEM_chat", "memo_x"])
async def test_a_session_name_without_a_record_prefix_is_addressable_by_id(client: Client, name: str) -> None:
    observed = await call(client, "memory_observe", content="hello there", session_id=name)

    fetched = await call(client, "memory_smart_search", ids=[name])
    assert fetched["missing"] == []
    assert [s["id"] for s in fetched["sessions"]] == [observed["session_id"]] == [name]
    dry = await call(client, "memory_forget", ids=[name], dry_run=True)
    assert dry["deleted"]["session"] == [name]


@pytest.mark.parametrize("content", ["!!!", "   ", "... -- ?"])
async def test_text_without_letters_or_digits_is_refused_for_what_it_is(client: Client, content: str) -> None:
    message = await call_error(client, "memory_observe", content=content)

    assert "content: must contain text (letters or digits)" in message
    assert "private" not in message


@pytest.mark.parametrize("content", ["<private>my address</private>", "ghp" + "_" + "A1b2" * 9 + " !!"])
async def test_text_that_was_all_private_or_secret_says_so(client: Client, content: str) -> None:
    message = await call_error(client, "memory_observe", content=content)
    assert "content: must contain text other than private or secret parts" in message


async def test_a_date_only_until_on_the_last_day_of_the_calendar_covers_everything(client: Client) -> None:
    observed = await call(client, "memory_observe", content="release checklist reviewed")
    listed = await call(client, "memory_observations", since="0001-01-01", until="9999-12-31")
    assert [o["id"] for o in listed["observations"]] == [observed["id"]]


# -- text that looks like JSON ---------------------------------------------------------------------


async def test_text_arguments_that_look_like_json_stay_text(client: Client) -> None:
    saved = await call(client, "memory_save", content="The null project keeps its own facts.", project="null")
    in_null = await call(client, "memory_smart_search", query="null project facts", project="null")
    in_default = await call(client, "memory_smart_search", query="null project facts")
    observed = await call(client, "memory_observe", content="A turn in a session called null.", session_id="null")
    searched = await call(client, "memory_smart_search", query='{"error": "timeout"} [8080]')
    # a list sent as JSON text (some clients do) is still read as a list
    tagged = await call(client, "memory_observe", content="Tagged turn.", concepts='["alpha", "beta"]')

    assert [h["id"] for h in in_null["hits"]] == [saved["id"]]
    assert in_default["hits"] == []
    assert observed["session_id"] == "null"
    assert searched["query"] == '{"error": "timeout"} [8080]'
    assert tagged["concepts"] == ["alpha", "beta"]


@pytest.mark.parametrize(
    ("zone", "occurred_at"),
    [
        ("America/New_York", "0001-01-01T03:00:00Z"),
        ("Asia/Tokyo", "9999-12-31T20:00:00Z"),
        ("UTC", "0001-01-01"),
        ("America/New_York", "9999-12-31T23:59:59.999999Z"),  # as epoch seconds it rounds up to 10000
    ],
)
async def test_a_record_on_the_calendars_first_or_last_day_is_stored_in_any_time_zone(
    settings: Settings, clock: FakeClock, zone: str, occurred_at: str
) -> None:
    # New York's 1 January of the year 1 began in the year 0, Tokyo's 31 December 9999 ends in 10000
    zoned = settings.model_copy(update={"timezone": zone})
    async with Client(build_server(zoned, clock)) as client:
        text = "harbour records, as noted yesterday and a year ago"
        stored = await call(client, "memory_observe", content=text, occurred_at=occurred_at)

        found = await call(client, "memory_recall", query="harbour records")
        assert [h["id"] for h in found["hits"]] == [stored["id"]]


@pytest.mark.parametrize(
    ("path", "says"),
    [("out\x00.json", "NUL"), ("x" * 300 + ".json", "too long"), ("~no-such-user-here/out.json", "no-such-user-here")],
)
async def test_an_unusable_file_path_is_refused_naming_path(client: Client, path: str, says: str) -> None:
    await call(client, "memory_save", content="Something to export.")

    for tool in ("memory_export", "memory_import"):
        message = await call_error(client, tool, path=path)
        assert "path" in message
        assert says in message


@pytest.mark.parametrize("blank", ["   ", "\u00a0", "\u3000", "\u2028"])
async def test_a_blank_title_is_no_title(client: Client, blank: str) -> None:
    observed = await call(
        client, "memory_observe", content="Rotated the staging keys. Nothing else changed.", title=blank
    )
    saved = await call(client, "memory_save", content="Staging keys rotate every quarter.", title=blank)
    memory = (await call(client, "memory_get", id=saved["id"]))["memory"]

    assert observed["title"] == "Rotated the staging keys."
    assert memory["title"] is None


async def test_a_nul_in_text_is_stored_as_a_replacement_character(client: Client) -> None:
    observed = await call(
        client, "memory_observe", content="Build log line\x00 with a stray NUL", title="Log\x00", agent_id="ci\x00"
    )
    listed = (await call(client, "memory_observations", session_id=observed["session_id"], full=True))["observations"]
    exported = json.dumps(await call(client, "memory_export"))

    assert observed["title"] == "Log\ufffd"
    assert [o["content"] for o in listed] == ["Build log line\ufffd with a stray NUL"]
    assert "\\u0000" not in exported
