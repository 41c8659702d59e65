"""Ranking across kinds and scopes: memories and lessons beside observations carried by their
neighbours, global lessons beside the project's records, records that match no query word, and
the numbers of a date in the query — all through the real server."""

from __future__ import annotations

from mcp import Client

from tests.conftest import FakeClock, call

STAGING_SESSION = [
    "Staging runs Redis next to Postgres on the shared host.",
    "Opened the staging firewall for the Redis and Postgres ports.",
    "Staging Postgres port is 5433.",
    "Docker compose said the port was already allocated on the staging host, so Redis moved.",
    "Redis on staging restarted after the move; the staging workers reconnected.",
]


async def _session(client: Client, contents: list[str], session_id: str | None = None) -> list[str]:
    """Observe `contents` in one session; returns their ids in order."""
    ids = []
    for content in contents:
        found = await call(client, "memory_observe", content=content, type="note", session_id=session_id)
        session_id = found["session_id"]
        ids.append(found["id"])
    return ids


async def test_a_memory_saved_in_a_session_is_not_buried_under_observations_lifted_by_neighbours(
    client: Client,
) -> None:
    await _session(client, STAGING_SESSION, "infra")
    memory = await call(
        client, "memory_save", content="Redis on staging listens on port 6380, not 6379.", session_id="infra"
    )

    found = await call(client, "memory_smart_search", query="what's the redis port on staging")
    with_memories = await call(client, "memory_recall", query="redis port on staging", include_memories=True)

    assert found["hits"][0]["id"] == memory["id"]
    assert with_memories["hits"][0]["id"] == memory["id"]


async def test_a_lesson_that_answers_the_question_ranks_first_across_kinds(client: Client) -> None:
    await _session(
        client,
        [
            "Started implementing rate limiting for the public API.",
            "Rate limiting: 100 requests per minute per key, counted in Redis.",
            "The rate limiting middleware reads the key from the header.",
            "Implementing the sliding window for rate limiting took two tries.",
            "Fixed the rate limiting decorator order on the orders route.",
        ],
    )
    lesson = await call(
        client,
        "memory_lesson_save",
        content="When implementing rate limiting, answer 429 with a Retry-After header.",
        context="implementing rate limiting",
    )

    found = await call(client, "memory_smart_search", query="implementing rate limiting")

    assert found["hits"][0]["id"] == lesson["lesson"]["id"]
    assert found["hits"][0]["kind"] == "lesson"


async def test_a_global_lesson_scores_on_the_projects_scale(client: Client) -> None:
    await _session(
        client,
        [
            "Alembic migration 0042 failed on staging: relation users already exists.",
            "Stamped the staging database at 0041 and ran the Alembic upgrade again.",
            "Added a downgrade note to the deploy checklist.",
            "The orders table got a new index in migration 0043.",
            "Reviewed the release notes for the next deploy.",
        ],
    )
    mine = await call(client, "memory_lesson_save", content="Write the Alembic downgrade path for every migration.")
    shared = await call(
        client,
        "memory_lesson_save",
        content="Always write the Alembic downgrade path for every migration.",
        scope="global",
    )

    found = await call(client, "memory_smart_search", query="alembic downgrade path for every migration")
    scores = {hit["id"]: hit["score"] for hit in found["hits"]}

    # The two lessons match alike, so they score alike: the global one is not held to its own
    # partition's statistics (two documents, where every word is common).
    ranked = [hit["id"] for hit in found["hits"]]
    assert set(ranked[:2]) == {mine["lesson"]["id"], shared["lesson"]["id"]}
    assert 0.8 < scores[shared["lesson"]["id"]] / scores[mine["lesson"]["id"]] < 1.25


async def test_a_record_matching_no_query_word_does_not_outrank_one_that_matches(
    client: Client, clock: FakeClock
) -> None:
    session = None
    for content in [
        "pytest tests/test_invoices.py failed: expected 119.00 got 118.99; VAT rounding uses float multiplication.",
        "Changed app/billing/vat.py to use Decimal with quantize, rounding=ROUND_HALF_UP; test_vat_total passes.",
        "Staging deploy credentials are in 1Password under 'invoicer staging'.",
        "Lunch break.",
    ]:
        clock.advance(minutes=5)
        observed = await call(client, "memory_observe", content=content, type="note", session_id=session)
        session = observed["session_id"]
    clock.advance(days=3)
    report = await call(
        client,
        "memory_observe",
        type="decision",
        content="Quarterly VAT report export goes to the accountant as CSV; VAT amounts are summed per rate.",
    )

    found = await call(client, "memory_smart_search", query="VAT rounding")
    titles = [hit["title"] for hit in found["hits"]]
    ids = [hit["id"] for hit in found["hits"]]

    assert ids.index(report["id"]) < titles.index("Lunch break.")


async def test_the_numbers_of_a_date_in_the_query_are_not_searched_as_words(client: Client, clock: FakeClock) -> None:
    versions = await call(
        client, "memory_observe", content="Added Makefile targets: ruff 0.1.9, gunicorn 21.2.0 and mypy 1.8.0."
    )
    clock.advance(days=35)  # 2026-02-09
    release = await call(client, "memory_observe", content="Shipped release 1.4 with the new checkout page.")

    on_the_day = await call(client, "memory_smart_search", query="what happened on Feb 9")
    other_day = await call(client, "memory_recall", query="what did we work on January 21")

    assert [hit["id"] for hit in on_the_day["hits"]] == [release["id"]]
    assert versions["id"] not in [hit["id"] for hit in other_day["hits"]]


async def test_an_error_hit_names_the_fix_its_session_recorded_after_it(client: Client) -> None:
    said = [
        ("error", "pytest failed: KeyError 'AT' in the tax registry lookup"),
        ("note", "Lunch break."),
        ("fix", "Registered the Austrian rule in the REGISTRY; test_reverse_charge passes."),
        ("error", "mypy complains the TaxRule protocol lacks rate_for"),
    ]
    ids, session_id = [], None
    for kind, content in said:
        found = await call(client, "memory_observe", type=kind, content=content, session_id=session_id)
        session_id = found["session_id"]
        ids.append(found["id"])

    for tool in ("memory_recall", "memory_smart_search"):
        hits = {h["id"]: h for h in (await call(client, tool, query="how did we fix the KeyError AT"))["hits"]}
        assert hits[ids[0]]["fixed_by"] == {
            "id": ids[2],
            "text": "Registered the Austrian rule in the REGISTRY; test_reverse_charge passes.",
        }
    unfixed = (await call(client, "memory_recall", query="TaxRule protocol rate_for"))["hits"]
    assert [(h["id"], h["fixed_by"]) for h in unfixed][:1] == [(ids[3], None)]
