"""Dates as search terms: a record's own date, the dates its words point at, the dates a query names."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
from mcp import Client
from rank_bm25 import BM25Okapi

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.search.dates import query_tokens, record_tokens
from mcp_memory.search.postings import decode_terms
from tests.conftest import FakeClock, call

# Monday 8 May 2023, mid-afternoon
MAY_8 = datetime(2023, 5, 8, 15, 30, tzinfo=UTC)


def test_a_record_carries_its_day_month_and_year() -> None:
    assert record_tokens("Went for a run.", MAY_8.timestamp()) == [
        "@2023-05-08",
        "@2023-05",
        "@2023",
        "@--05-08",
        "@--05",
    ]
    assert record_tokens("Went for a run.", None) == []


def test_a_year_before_1000_is_padded_like_the_query_pads_it() -> None:
    early = datetime(224, 5, 1, tzinfo=UTC).timestamp()

    assert record_tokens("Went for a run.", early)[:3] == ["@0224-05-01", "@0224-05", "@0224"]
    assert "@0224-05" in query_tokens("what happened in May 0224?", MAY_8)


@pytest.mark.parametrize(
    ("phrase", "day"),
    [
        ("yesterday", "@2023-05-07"),
        ("last night", "@2023-05-07"),
        ("the day before yesterday", "@2023-05-06"),
        ("today", "@2023-05-08"),
        ("two days ago", "@2023-05-06"),
        ("3 days ago", "@2023-05-05"),
        ("a week ago", "@2023-05-01"),
        ("last week", "@2023-05-01"),
        ("last Friday", "@2023-05-05"),
        ("last Monday", "@2023-05-01"),  # on a Monday, "last Monday" is a week back
    ],
)
def test_relative_phrases_resolve_against_the_records_own_date(phrase: str, day: str) -> None:
    tokens = record_tokens(f"I went to the support group {phrase}.", MAY_8.timestamp())
    assert day in tokens
    assert tokens[:3] == ["@2023-05-08", "@2023-05", "@2023"]


def test_months_and_years_back_resolve_to_a_month_or_a_year() -> None:
    assert "@2023-04" in record_tokens("We moved last month.", MAY_8.timestamp())
    assert "@2023-03" in record_tokens("We moved two months ago.", MAY_8.timestamp())
    assert "@2022" in record_tokens("We moved last year.", MAY_8.timestamp())
    assert "@2021" in record_tokens("We moved two years ago.", MAY_8.timestamp())
    assert "@2022-12" in record_tokens("Back then.", datetime(2023, 1, 10, tzinfo=UTC).timestamp()) + record_tokens(
        "Last month was busy.", datetime(2023, 1, 10, tzinfo=UTC).timestamp()
    )


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what happened on 7 May 2023?", ["@2023-05-07", "@2023-05", "@2023"]),
        ("what happened on the 7th of May, 2023?", ["@2023-05-07", "@2023-05", "@2023"]),
        ("what happened on May 7, 2023?", ["@2023-05-07", "@2023-05", "@2023"]),
        ("what happened on 2023-05-07?", ["@2023-05-07", "@2023-05", "@2023"]),
        ("what did she paint in May 2023?", ["@2023-05", "@2023"]),
        ("what did she paint in Sept 2022?", ["@2022-09", "@2022"]),
        ("what did she do in 2022?", ["@2022"]),
        ("anything from 2023-02?", ["@2023-02", "@2023"]),
        ("the 2023-02-30 entry", ["@2023-02", "@2023"]),  # no such day: the month still counts
        ("how many runs did she do", []),
        ("she ran 2023 metres", []),  # a bare number is not a year
    ],
)
def test_a_query_names_absolute_dates(query: str, expected: list[str]) -> None:
    assert query_tokens(query, MAY_8) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what did we do on May 7?", ["@--05-07"]),
        ("what did we do on may 7th", ["@--05-07"]),
        ("notes from the 3rd of March", ["@--03-03"]),
        ("we met 2 Feb", ["@--02-02"]),
        ("anything on Feb 29", ["@--02-29"]),  # a day of leap years
        ("anything on Feb 30", []),  # a day of no year
        ("what did she paint in June?", ["@--06"]),
        ("since mid-March", ["@--03"]),
        ("they may 2x the budget", []),  # the verb, not the month
        ("it may 10 times", []),
        ("ran 3 miles in May 5 days running", ["@--05-05"]),
    ],
)
def test_a_query_names_a_day_or_month_without_a_year(query: str, expected: list[str]) -> None:
    assert query_tokens(query, MAY_8) == expected


def test_a_record_carries_the_days_its_words_point_at_without_their_year_too() -> None:
    tokens = record_tokens("I went to the support group yesterday.", MAY_8.timestamp())
    assert {"@2023-05-07", "@--05-07", "@--05-08", "@--05"} <= set(tokens)


def test_a_record_carries_the_dates_its_text_writes_out() -> None:
    tokens = record_tokens("Deadline 2024-03-03; offsite on March 9 2024, kickoff on Feb 9.", MAY_8.timestamp())
    assert {"@2024-03-03", "@2024-03-09", "@2024-03", "@2024", "@--03-03", "@--03-09", "@--02-09"} <= set(tokens)
    assert "@--09" not in tokens  # a yearless day is not taken for a month


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        ("We decided to separate the market data.", set()),  # "dec", "sep", "mar" inside words name no month
        ("Moved it in Sept. without a number anywhere.", {"@--09"}),
        ("Build 2024-05 names no month.", {"@2024-05", "@2024"}),
        ("Decided: ship by dec. 2024", {"@2024-12", "@2024", "@--12"}),
    ],
)
def test_a_record_reads_month_names_only_as_words_and_needs_no_digit_for_one(text: str, dates: set[str]) -> None:
    own = set(record_tokens("Nothing dated here.", MAY_8.timestamp()))
    assert set(record_tokens(text, MAY_8.timestamp())) - own == dates


@pytest.mark.parametrize(
    ("text", "dates"),
    [
        ("Restored snapshot_2024-03-15.sql to staging.", {"@2024-03-15", "@2024-03", "@2024", "@--03-15", "@--03"}),
        ("Log 2024-03-15T10:22:01Z worker died.", {"@2024-03-15", "@2024-03", "@2024", "@--03-15", "@--03"}),
        ("Tag release-2024-03 pushed.", {"@2024-03", "@2024", "@--03"}),
        ("Build v2024-03-15 and 12024-03-15 name no date.", set()),  # inside a longer word or number
    ],
)
def test_an_iso_date_in_a_name_or_timestamp_is_a_date_of_its_day(text: str, dates: set[str]) -> None:
    own = set(record_tokens("Nothing dated here.", MAY_8.timestamp()))
    assert set(record_tokens(text, MAY_8.timestamp())) - own == dates


def test_dates_are_read_whatever_case_the_text_writes_them_in() -> None:
    tokens = record_tokens("İZMİR TRIP: flew out MAY 7, 2023; back in JUNE. They may 2x the budget.", MAY_8.timestamp())
    # a letter whose lower case is longer ("İ") before a date leaves where the date stands unchanged
    assert {"@2023-05-07", "@--05-07", "@--06"} <= set(tokens)
    assert "@--05-02" not in tokens  # "may" in lower case is still the verb
    # a long s is no "s": no month is read in "ſep", and no error either (it once was a KeyError)
    assert "@2020-09" not in record_tokens("Moved out ſep 2020.", MAY_8.timestamp())


@pytest.mark.parametrize(
    "query", ["2024-03-03", "March 3 2024", "3 March 2024", "March 3", "what is due on 2024-03-03?"]
)
async def test_recall_finds_a_date_a_record_writes_out_by_that_date(client: Client, query: str) -> None:
    said = await call(client, "memory_observe", content="The contract deadline is 2024-03-03 per legal.")
    await call(client, "memory_observe", content="The contract was signed by legal in spring.")

    hits = (await call(client, "memory_recall", query=query))["hits"]

    assert [h["id"] for h in hits] == [said["id"]]


async def test_recall_by_a_date_finds_the_file_and_the_log_line_of_that_day(client: Client) -> None:
    backup = await call(client, "memory_observe", content="Nightly backup written to snapshot_2024-03-15.sql.")
    crash = await call(client, "memory_observe", content="Worker crashed: log line 2024-03-15T10:22:01Z shows OOM.")
    other = await call(client, "memory_observe", content="Quarterly report deadline is 2024-03-29 for finance.")

    hits = (await call(client, "memory_recall", query="what happened on 2024-03-15?"))["hits"]

    assert {h["id"] for h in hits[:2]} == {backup["id"], crash["id"]}
    assert [h["id"] for h in hits[2:]] in ([], [other["id"]])  # another day of the month, if at all, after


def test_a_query_names_relative_dates_from_now() -> None:
    assert query_tokens("what did I do yesterday?", MAY_8) == ["@2023-05-07", "@2023-05", "@2023"]
    assert query_tokens("decisions from last month", MAY_8) == ["@2023-04", "@2023"]
    assert query_tokens("on 7 May 2023 and yesterday", MAY_8) == ["@2023-05-07", "@2023-05", "@2023"]


async def test_recall_finds_a_note_by_the_date_its_words_point_at(client: Client, clock: FakeClock) -> None:
    said = await call(
        client,
        "memory_observe",
        content="Caroline: I went to the LGBTQ support group yesterday and it was powerful.",
        type="conversation",
        occurred_at="2023-05-08T13:56:00Z",
    )
    other = await call(
        client,
        "memory_observe",
        content="Caroline: the support group meets every week at the community centre.",
        type="conversation",
        occurred_at="2023-06-20T10:00:00Z",
    )

    hits = (await call(client, "memory_recall", query="When did Caroline go to the support group? 7 May 2023"))["hits"]

    assert [h["id"] for h in hits[:2]] == [said["id"], other["id"]]


async def test_recall_resolves_relative_dates_in_the_query_against_the_clock(client: Client, clock: FakeClock) -> None:
    clock.now = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
    early = await call(
        client, "memory_observe", content="Deploy checklist reviewed.", occurred_at="2026-03-02T10:00:00Z"
    )
    late = await call(
        client, "memory_observe", content="Deploy checklist reviewed.", occurred_at="2026-03-09T10:00:00Z"
    )

    hits = (await call(client, "memory_recall", query="deploy checklist yesterday"))["hits"]
    assert hits[0]["id"] == late["id"]
    hits = (await call(client, "memory_recall", query="deploy checklist last week"))["hits"]
    assert hits[0]["id"] == early["id"]


def test_a_query_about_a_past_week_names_each_of_its_days() -> None:
    tuesday = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
    days = [t for t in query_tokens("what did we do last week", tuesday) if len(t) == 11]
    assert days == [f"@2026-03-0{d}" for d in range(2, 9)]
    days = [t for t in query_tokens("two weeks ago", tuesday) if len(t) == 11]
    assert days == [
        "@2026-02-23",
        "@2026-02-24",
        "@2026-02-25",
        "@2026-02-26",
        "@2026-02-27",
        "@2026-02-28",
        "@2026-03-01",
    ]
    assert query_tokens("last weekend", tuesday) == ["@2026-03-07", "@2026-03", "@2026", "@2026-03-08"]


async def test_recall_finds_a_day_named_without_its_year_in_any_year(client: Client, clock: FakeClock) -> None:
    clock.now = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
    ids = {}
    for label, day in (("2024", "2024-05-07"), ("2025", "2025-05-07"), ("other", "2025-06-07")):
        saved = await call(client, "memory_observe", content="Walked the coastal path.", occurred_at=f"{day}T10:00:00Z")
        ids[label] = saved["id"]

    hits = (await call(client, "memory_recall", query="where did I walk on May 7?"))["hits"]

    assert {h["id"] for h in hits[:2]} == {ids["2024"], ids["2025"]}
    assert hits[2]["id"] == ids["other"]


async def test_date_tokens_do_not_lengthen_a_record(client: Client, settings: Settings) -> None:
    saved = await call(
        client, "memory_observe", content="Walked the coastal path yesterday.", occurred_at="2025-05-07T10:00:00Z"
    )
    with sqlite3.connect(settings.db) as conn:
        (length,) = conn.execute("SELECT length FROM search_docs WHERE doc_id = ?", (saved["id"],)).fetchone()

    # BM25 normalises by the words a record holds: walk, coastal, path, yesterday (not its 8 date tokens)
    assert length == 4


async def test_okapi_scores_of_dated_records_equal_rank_bm25s_with_lengths_of_words(settings: Settings) -> None:
    """Dated records score as rank-bm25 scores their stored terms (dates included, in queries too)
    once its record lengths are, like ours, their words alone."""
    turns = [
        ("Walked the coastal path yesterday with Melanie.", "2023-05-08T10:00:00Z"),
        ("The support group met again; Caroline spoke.", "2023-05-08T19:00:00Z"),
        ("Painted the lake at sunrise last week.", "2023-05-20T08:00:00Z"),
        ("Walked to the support group in the rain.", "2023-06-02T18:00:00Z"),
        ("Booked the camping trip for June.", "2023-06-02T21:00:00Z"),
    ]
    async with open_app(settings) as app:
        await app.deps.builder.ensure_built(app.deps.db)
        for text, at in turns:
            await app.episodic.observe("test", text, occurred_at=at)
        index, partition = app.deps.index, app.deps.index.partition("test")
        assert partition is not None
        names = {term_id: term for term, term_id in index.vocab.items()}
        with sqlite3.connect(settings.db) as conn:
            rows = [(key, decode_terms(blob)) for key, blob in conn.execute("SELECT doc_id, terms FROM search_docs")]
        corpus = [
            [names[t] for t, f in zip(pairs["t"].tolist(), pairs["f"].tolist(), strict=True) for _ in range(f)]
            for _, pairs in rows
        ]
        naive = BM25Okapi(corpus, k1=settings.bm25_k1, b=settings.bm25_b)
        naive.doc_len = [sum(not term.startswith("@") for term in doc) for doc in corpus]
        naive.avgdl = sum(naive.doc_len) / len(corpus)
        for query in ("walked the support group on 8 May 2023", "what happened in June 2023", "coastal path"):
            terms = index.query_terms(query, MAY_8.timestamp() + 86_400 * 60)
            assert any(names[t].startswith("@") for t in terms) or query == "coastal path"
            docs, scores = partition.scores(terms)
            ours = {partition.keys[d]: s for d, s in zip(docs.tolist(), scores.tolist(), strict=True) if s > 0}
            expected = naive.get_scores([names[t] for t in terms])
            assert ours == pytest.approx(
                {key: s for (key, _), s in zip(rows, expected, strict=True) if s > 0}, rel=1e-12
            )
