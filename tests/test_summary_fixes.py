"""Errors and their fixes, whatever type the agent gave the fix: in session summaries and in reflection."""

from __future__ import annotations

from mcp import Client

from tests.conftest import call


async def summary_of(client: Client, observed: list[tuple[str, str]]) -> list[str]:
    """The lines of the extractive summary of a session of (type, content) observations."""
    for type_, content in observed:
        await call(client, "memory_observe", content=content, type=type_, session_id="s")
    await call(client, "memory_observe", content="Done for today.", session_id="s", end_session=True)
    result = await call(client, "memory_crystallize", session_id="s")
    return str(result["sessions"][0]["summary"]).split("\n")


async def test_a_note_that_says_it_fixed_an_error_is_its_fix(client: Client) -> None:
    lines = await summary_of(
        client,
        [
            ("error", "pytest failed: ImportError cannot import name Stemmer from PyStemmer"),
            ("decision", "Keep SQLite in WAL mode for concurrent readers"),
            ("error", "Deploy failed: port 8080 already in use"),
            ("note", "Pinned PyStemmer below 3 in pyproject; the tests pass again"),
            ("file_change", "Changed the deploy port to 8081 in compose.yaml; the deploy worked"),
            ("note", "The port of the metrics server is configurable"),  # says nothing was fixed
        ],
    )

    assert lines[lines.index("Errors and fixes:") + 1 :][:2] == [
        "- pytest failed: ImportError cannot import name Stemmer from PyStemmer -> fixed: Pinned PyStemmer below 3 "
        "in pyproject; the tests pass again",
        "- Deploy failed: port 8080 already in use -> fixed: Changed the deploy port to 8081 in compose.yaml; the "
        "deploy worked",
    ]
    also = lines[lines.index("Also:") + 1 :]
    assert "- The port of the metrics server is configurable" in also
    assert not [line for line in also if "PyStemmer" in line or "8081" in line]  # each said once


async def test_a_note_about_something_else_leaves_the_error_unresolved(client: Client) -> None:
    lines = await summary_of(
        client,
        [
            ("error", "Deploy failed: port 8080 already in use"),
            ("note", "Fixed a typo in the README"),  # says fixed, shares no word with the error
            ("note", "The deploy port is read from compose.yaml"),  # shares words, says nothing was fixed
        ],
    )

    assert "- Deploy failed: port 8080 already in use -> unresolved" in lines


async def test_reflect_names_the_fix_of_a_recurring_error_the_way_the_summary_pairs_them(client: Client) -> None:
    error = "Deploy failed: port 8080 already in use"
    await call(client, "memory_observe", content=error, type="error", session_id="one")
    await call(client, "memory_observe", content="Lunch break", session_id="one")
    await call(client, "memory_observe", content="Fixed a typo in the README", type="fix", session_id="one")
    await call(client, "memory_observe", content=error, type="error", session_id="two")
    await call(client, "memory_observe", content="Moved the deploy port to 8081; it worked", session_id="two")

    result = await call(client, "memory_reflect")

    # the README fix of session one is about something else (nor right after it); session two's note fixed it
    [anti] = result["anti_patterns"]
    assert anti["context"] == "Seen 2 times. Fixed by: Moved the deploy port to 8081; it worked"


async def test_errors_that_share_a_fix_are_listed_together_and_the_fix_said_once(client: Client) -> None:
    lines = await summary_of(
        client,
        [
            ("error", "Deploy failed: port 8080 already in use"),
            ("error", "pytest failed: ImportError cannot import name Stemmer"),
            ("error", "Deploy failed again: port 8080 already in use"),
            ("fix", "Moved the deploy port to 8081 in compose.yaml"),
        ],
    )

    start = lines.index("Errors and fixes:") + 1
    assert lines[start : start + 3] == [
        "- Deploy failed: port 8080 already in use -> fixed: Moved the deploy port to 8081 in compose.yaml",
        "- Deploy failed again: port 8080 already in use -> same fix as above",
        "- pytest failed: ImportError cannot import name Stemmer -> unresolved",
    ]


async def test_a_long_sessions_summary_still_says_how_it_went(client: Client) -> None:
    for i in range(8):
        await call(
            client, "memory_observe", type="decision", session_id="long",
            content=f"Decision {i}: moved reconciliation job {i} from the legacy cron host to a Kubernetes CronJob "
            "with retries, idempotency keys and alerting on failure",
        )  # fmt: skip
    for i in range(6):
        await call(
            client, "memory_observe", type="error", session_id="long",
            content=f"Job{i} crashed: psycopg OperationalError server closed the connection unexpectedly "
            f"while reconciling batch {i} of the ledger export for merchant accounts",
        )  # fmt: skip
        await call(
            client, "memory_observe", type="fix", session_id="long",
            content=f"Job{i}: added pool_pre_ping and a reconnect loop around ledger export batch {i} so the "
            "reconciliation survives server restarts",
        )  # fmt: skip
    await call(
        client, "memory_outcome_record", task="Migrate reconciliation to Kubernetes", success=False, session_id="long"
    )
    await call(client, "memory_observe", content="Stopping here.", session_id="long", end_session=True)

    summary = (await call(client, "memory_crystallize", session_id="long"))["sessions"][0]["summary"]

    # cut at the limit, the decisions and errors once pushed the failed outcome out
    assert len(summary) <= 2_000
    assert summary.splitlines()[-1] == "Outcome: Migrate reconciliation to Kubernetes failed (score 0.00)"
    assert summary.splitlines()[-2] == "…"  # what did not fit is said to be left out
    assert "- Decision 0: moved reconciliation job 0" in summary
