"""The database's time zone: the day a record falls on and the "yesterday" of a query are its own."""

from __future__ import annotations

import logging
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import tzlocal
from mcp import Client

from mcp_memory.clock import local_zone_name
from mcp_memory.config import Settings
from mcp_memory.search.cache import cache_path
from mcp_memory.search.dates import record_tokens
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

REANALYSED = "search terms re-analysed"
NEW_YORK = "America/New_York"
LATE_EVENING = "2023-05-08T02:00:00Z"  # 22:00 on 7 May in New York
AFTERNOON = "2023-05-08T15:00:00Z"  # 11:00 on 8 May in New York


def stored_zone(path: Path) -> str | None:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'timezone'").fetchone()
    return None if row is None else str(row[0])


async def checklist_days(client: Client) -> dict[str, str]:
    """Two identical notes, made on the evening of 7 May and the next afternoon in New York; their ids."""
    ids = {}
    for label, at in (("evening", LATE_EVENING), ("afternoon", AFTERNOON)):
        saved = await call(client, "memory_observe", content="Reviewed the deploy checklist.", occurred_at=at)
        ids[label] = saved["id"]
    return ids


async def first_hit(client: Client, query: str) -> str:
    return str((await call(client, "memory_recall", query=query))["hits"][0]["id"])


def test_a_records_day_is_the_one_it_fell_on_in_the_zone() -> None:
    at = datetime.fromisoformat(LATE_EVENING).timestamp()
    assert record_tokens("Reviewed it.", at)[:3] == ["@2023-05-08", "@2023-05", "@2023"]
    tokens = record_tokens("Reviewed it yesterday.", at, ZoneInfo(NEW_YORK))
    assert tokens[:3] == ["@2023-05-07", "@2023-05", "@2023"]
    assert "@2023-05-06" in tokens  # "yesterday" counts back from the New York day
    assert "@--05-07" in tokens


async def test_recall_finds_a_record_on_its_day_in_the_databases_zone(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings.model_copy(update={"timezone": NEW_YORK}), clock)) as client:
        ids = await checklist_days(client)

        assert await first_hit(client, "deploy checklist on 7 May 2023") == ids["evening"]
        assert await first_hit(client, "deploy checklist on 8 May 2023") == ids["afternoon"]
        assert (await call(client, "memory_diagnose"))["timezone"] == NEW_YORK


async def test_the_context_and_a_summary_name_the_day_and_time_in_the_databases_zone(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings.model_copy(update={"timezone": NEW_YORK}), clock)) as client:
        await call(client, "memory_observe", content="Reviewed the deploy checklist.", occurred_at=LATE_EVENING,
                   session_id="evening", end_session=True)  # fmt: skip
        [summary] = (await call(client, "memory_crystallize", session_id="evening"))["sessions"]
        context = (await call(client, "memory_context"))["text"]
        found = await call(client, "memory_observations", since="2023-05-07", until="2023-05-07")

    # 02:00 UTC on 8 May is 22:00 on 7 May in New York: the day a search by date finds it on
    assert "2023-05-07 22:00 to 2023-05-07 22:00" in summary["summary"]
    assert "\n- 2023-05-07 Reviewed the deploy checklist." in context
    assert found["total"] == 1


async def test_a_day_or_a_time_without_an_offset_is_read_in_the_databases_zone(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings.model_copy(update={"timezone": NEW_YORK}), clock)) as client:
        dated = await call(client, "memory_observe", content="Breakfast with the mango team.", occurred_at="2023-05-07")
        naive = await call(
            client, "memory_observe", content="Lunch with the lime team.", occurred_at="2023-05-07T12:00"
        )
        ids = await checklist_days(client)
        saved = await call(client, "memory_save", content="The mango team meets on Sundays.", occurred_at="2023-05-07")
        action = await call(client, "memory_action_create", title="Send the notes", due="2023-05-07")

        listed = (await call(client, "memory_observations"))["observations"]
        when = {o["id"]: o["occurred_at"] for o in listed}
        midnight = "2023-05-07T04:00:00.000000Z"  # in New York (EDT)
        assert (when[dated["id"]], when[naive["id"]]) == (midnight, "2023-05-07T16:00:00.000000Z")
        assert (await call(client, "memory_get", id=saved["id"]))["memory"]["occurred_at"] == midnight
        assert action["action"]["due"] == midnight
        on_the_7th = await call(client, "memory_observations", since="2023-05-07", until="2023-05-07")
        assert {o["id"] for o in on_the_7th["observations"]} == {dated["id"], naive["id"], ids["evening"]}
        found = await call(client, "memory_recall", query="team", since="2023-05-07", until="2023-05-07T12:00")
        assert {h["id"] for h in found["hits"]} == {dated["id"], naive["id"]}
        assert await first_hit(client, "breakfast on 7 May 2023") == dated["id"]


@pytest.mark.parametrize("zone", [NEW_YORK, "Asia/Tokyo"])
async def test_the_calendars_first_and_last_days_bound_everything_in_any_zone(
    settings: Settings, clock: FakeClock, zone: str
) -> None:
    # New York's last day ends in the year 10000 in UTC, Tokyo's first began in the year 0
    async with Client(build_server(settings.model_copy(update={"timezone": zone}), clock)) as client:
        observed = await call(client, "memory_observe", content="Release checklist reviewed.")
        listed = await call(client, "memory_observations", since="0001-01-01", until="9999-12-31")
        assert [o["id"] for o in listed["observations"]] == [observed["id"]]


async def test_yesterday_is_yesterday_in_the_databases_zone(settings: Settings, clock: FakeClock) -> None:
    clock.now = datetime(2026, 3, 11, 3, 0, tzinfo=UTC)  # 20:00 on 10 March in Los Angeles (PDT)
    async with Client(build_server(settings.model_copy(update={"timezone": "America/Los_Angeles"}), clock)) as client:
        note = "Deploy checklist reviewed."
        ninth = await call(client, "memory_observe", content=note, occurred_at="2026-03-09T20:00:00Z")
        await call(client, "memory_observe", content=note, occurred_at="2026-03-10T20:00:00Z")

        assert await first_hit(client, "deploy checklist yesterday") == ninth["id"]


async def test_a_new_database_takes_the_machines_zone_and_keeps_it(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    unset = settings.model_copy(update={"timezone": None})
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: NEW_YORK)
    async with Client(build_server(unset, clock)) as client:
        ids = await checklist_days(client)
        assert (await call(client, "memory_diagnose"))["timezone"] == NEW_YORK
    assert stored_zone(settings.db) == NEW_YORK

    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: "Asia/Tokyo")  # the machine moved
    async with Client(build_server(unset, clock)) as client:
        assert (await call(client, "memory_diagnose"))["timezone"] == NEW_YORK
        assert await first_hit(client, "deploy checklist on 7 May 2023") == ids["evening"]


async def test_a_machine_zone_the_zone_data_lacks_means_utc(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: "Mars/Olympus_Mons")
    async with Client(build_server(settings.model_copy(update={"timezone": None}), clock)) as client:
        assert (await call(client, "memory_diagnose"))["timezone"] == "UTC"


async def test_a_database_from_before_zones_keeps_utc_without_a_re_analysis(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(build_server(settings, clock)) as client:
        ids = await checklist_days(client)
    with sqlite3.connect(settings.db) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'timezone'")
    monkeypatch.setattr(tzlocal, "get_localzone_name", lambda: NEW_YORK)
    caplog.set_level(logging.INFO, logger="mcp_memory.services.reanalysis")

    async with Client(build_server(settings.model_copy(update={"timezone": None}), clock)) as client:
        assert (await call(client, "memory_diagnose"))["timezone"] == "UTC"
        # In UTC neither note is of 7 May, so the later one leads (in New York the evening one would)
        assert await first_hit(client, "deploy checklist on 7 May 2023") == ids["afternoon"]
    assert REANALYSED not in caplog.text


async def test_another_zone_re_analyses_the_dates_and_becomes_the_databases(
    settings: Settings, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(build_server(settings, clock)) as client:
        ids = await checklist_days(client)
    assert stored_zone(settings.db) == "UTC"
    caplog.set_level(logging.INFO, logger="mcp_memory.services.reanalysis")

    async with Client(build_server(settings.model_copy(update={"timezone": NEW_YORK}), clock)) as client:
        assert await first_hit(client, "deploy checklist on 7 May 2023") == ids["evening"]
        assert (await call(client, "memory_diagnose"))["index_in_sync"]
    assert f"{REANALYSED}: 2 records" in caplog.text
    assert stored_zone(settings.db) == NEW_YORK

    caplog.clear()
    async with Client(build_server(settings.model_copy(update={"timezone": None}), clock)) as client:
        assert (await call(client, "memory_diagnose"))["timezone"] == NEW_YORK
        assert await first_hit(client, "deploy checklist on 8 May 2023") == ids["afternoon"]
    assert REANALYSED not in caplog.text


async def test_an_index_cache_of_another_zone_is_not_loaded(settings: Settings, clock: FakeClock) -> None:
    cached = settings.model_copy(update={"index_cache_min_records": 0})
    async with Client(build_server(cached, clock)) as client:
        ids = await checklist_days(client)
    async with Client(build_server(cached, clock)) as client:  # a start that rebuilds writes the cache
        await call(client, "memory_diagnose")
    assert cache_path(settings.db).exists()
    # Another server moves the database to New York without touching this one's cache file.
    moved = settings.model_copy(update={"timezone": NEW_YORK, "index_cache": False})
    async with Client(build_server(moved, clock)) as client:
        await call(client, "memory_diagnose")

    async with Client(build_server(cached.model_copy(update={"timezone": None}), clock)) as client:
        report = await call(client, "memory_diagnose")
        assert (report["timezone"], report["index_source"]) == (NEW_YORK, "rebuild")
        assert await first_hit(client, "deploy checklist on 7 May 2023") == ids["evening"]


def test_an_unknown_zone_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="--timezone: unknown time zone 'Mars/Olympus'"):
        Settings.resolve({"timezone": "Mars/Olympus"}, {})
    with pytest.raises(ValueError, match="MCP_MEMORY_TIMEZONE: unknown time zone"):
        Settings.resolve({}, {"MCP_MEMORY_TIMEZONE": "../../etc/passwd"})
    assert Settings.resolve({}, {"MCP_MEMORY_TIMEZONE": NEW_YORK}).timezone == NEW_YORK


def test_localtime_is_taken_as_this_machines_zone_by_its_name() -> None:
    # "localtime" names another zone on every machine: the database must record the zone itself
    assert Settings.resolve({"timezone": "localtime"}, {}).timezone == local_zone_name()
    assert local_zone_name() != "localtime"


async def test_a_running_server_follows_the_zone_another_server_re_analysed_in(
    settings: Settings, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(build_server(settings, clock)) as first:
        await call(first, "memory_observe", content="Warm-up note before the second server starts.")
        async with Client(build_server(settings.model_copy(update={"timezone": NEW_YORK}), clock)) as second:
            await call(second, "memory_recall", query="warm-up")  # a search waits for the re-analysis
            assert stored_zone(settings.db) == NEW_YORK
            # written by the first server, after the second re-analysed every date in New York's days
            evening = await call(first, "memory_observe", content="deploy checklist", occurred_at=LATE_EVENING)
            afternoon = await call(second, "memory_observe", content="deploy checklist", occurred_at=AFTERNOON)
            for client in (first, second):
                assert (await call(client, "memory_diagnose"))["timezone"] == NEW_YORK
                assert await first_hit(client, "deploy checklist on 7 May 2023") == evening["id"]
                assert await first_hit(client, "deploy checklist on 8 May 2023") == afternoon["id"]
    assert "another server re-analysed the dates in time zone America/New_York; following it (was UTC)" in caplog.text


async def test_a_running_server_reloads_what_another_server_re_analysed_before_it_writes(
    settings: Settings, clock: FakeClock
) -> None:
    def stored_terms(*terms: str) -> set[str]:
        with sqlite3.connect(settings.db) as conn:
            marks = ",".join("?" * len(terms))
            return {r[0] for r in conn.execute(f"SELECT term FROM search_terms WHERE term IN ({marks})", terms)}

    async with Client(build_server(settings, clock)) as first:
        ids = await checklist_days(first)  # in UTC both fall on 8 May
        await call(first, "memory_observe", content="Harbour crane serviced.", occurred_at="2023-05-10T02:00:00Z")
        async with Client(build_server(settings.model_copy(update={"timezone": NEW_YORK}), clock)) as second:
            await call(second, "memory_recall", query="warm-up")  # waits for the re-analysis
            # in New York the evening fell on 7 May, and nothing on 10 May: that day's word went
            assert stored_terms("@2023-05-07", "@2023-05-10") == {"@2023-05-07"}
            assert await first_hit(first, "deploy checklist on 7 May 2023") == ids["evening"]
            inspected = await call(
                first, "memory_observe", content="Harbour crane inspected.", occurred_at="2023-05-10T15:00:00Z"
            )
            assert stored_terms("@2023-05-10") == {"@2023-05-10"}  # stored again, not the deleted id reused
            assert await first_hit(second, "harbour crane on 10 May 2023") == inspected["id"]
