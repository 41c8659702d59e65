"""Which fix a summary pairs with each error when several compete, and a summary that says its title once."""

from __future__ import annotations

from mcp import Client

from tests.conftest import FakeClock, call

MYPY = (
    'mypy app/billing failed: Argument 1 to "compute_total" has incompatible type "FrenchRule"; '
    'expected "TaxRule" in app/billing/vat.py:41'
)
KEY_ERROR = (
    "pytest tests/test_invoices.py::test_reverse_charge failed: KeyError: 'AT' in app/billing/tax/__init__.py "
    "registry lookup"
)
REGISTERED = "Registered the Austrian rule in app/billing/tax/__init__.py REGISTRY; test_reverse_charge passes."
IMPLEMENTED = "FrenchRule now implements rate_for(); mypy is clean."
BILLING = [  # (type, content, files): two errors, then their fixes in the other order
    ("error", MYPY, ["app/billing/vat.py"]),
    ("error", KEY_ERROR, ["app/billing/tax/__init__.py"]),
    ("fix", REGISTERED, ["app/billing/tax/__init__.py"]),
    ("fix", IMPLEMENTED, ["app/billing/tax/fr.py"]),
]


async def observe(client: Client, clock: FakeClock, session: str, observed: list[tuple[str, str, list[str]]]) -> None:
    """Record (type, content, files) observations in `session`, a few minutes apart, and end it."""
    for type_, content, files in observed:
        clock.advance(minutes=6)
        await call(client, "memory_observe", type=type_, content=content, files=files, session_id=session)
    await call(client, "memory_observe", content="Refactor merged.", session_id=session, end_session=True)


async def errors_and_fixes(client: Client, session: str) -> list[str]:
    """The "Errors and fixes:" lines of the session's extractive summary."""
    summary = (await call(client, "memory_crystallize", session_id=session))["sessions"][0]["summary"]
    lines = str(summary).split("\n")
    start = lines.index("Errors and fixes:") + 1
    end = next(n for n in range(start, len(lines)) if not lines[n].startswith("- "))
    return lines[start:end]


def titled(text: str) -> str:
    """An observation's title as the summary shows it: its first 120 characters, cut at a word."""
    return text if len(text) <= 120 else text[: text.rindex(" ", 0, 120)] + "…"


async def test_each_error_gets_the_fix_that_matches_it_best_not_the_first_sharing_a_word(
    client: Client, clock: FakeClock
) -> None:
    await observe(client, clock, "billing", BILLING)

    lines = await errors_and_fixes(client, "billing")

    assert lines == [f"- {titled(MYPY)} -> fixed: {IMPLEMENTED}", f"- {titled(KEY_ERROR)} -> fixed: {REGISTERED}"]


async def test_reflect_names_the_fix_that_matches_the_recurring_error(client: Client, clock: FakeClock) -> None:
    for session in ("monday", "tuesday"):
        await observe(client, clock, session, BILLING)

    result = await call(client, "memory_reflect")

    fixed_by = {a["content"]: a["context"] for a in result["anti_patterns"]}
    [mypy] = [context for content, context in fixed_by.items() if "FrenchRule" in content]
    assert mypy == f"Seen 2 times. Fixed by: {IMPLEMENTED}"


async def test_a_fix_recorded_right_after_an_error_but_about_another_is_not_its_fix(
    client: Client, clock: FakeClock
) -> None:
    deploy = "Deploy failed: port 8080 already in use"
    stemmer = "pytest failed: ImportError cannot import name Stemmer"
    moved = "Moved the deploy port to 8081 in compose.yaml"
    await observe(client, clock, "s", [("error", deploy, []), ("error", stemmer, []), ("fix", moved, [])])

    lines = await errors_and_fixes(client, "s")

    assert lines == [f"- {deploy} -> fixed: {moved}", f"- {stemmer} -> unresolved"]


async def test_an_error_recurring_with_more_words_still_shares_its_fix(client: Client, clock: FakeClock) -> None:
    first = "Deploy failed: port 8080 already in use"
    again = "Deploy failed again after a retry with verbose logging: port 8080 already in use, see compose.yaml"
    moved = "Moved the deploy port to 8081 in compose.yaml"
    await observe(client, clock, "s", [("error", first, []), ("error", again, []), ("fix", moved, [])])

    lines = await errors_and_fixes(client, "s")

    assert lines == [f"- {first} -> fixed: {moved}", f"- {again} -> same fix as above"]


DECISION = (
    "Use WeasyPrint to render invoice PDFs from the Jinja2 template templates/invoice.html; "
    "it supports CSS paged media."
)


async def session_of(client: Client, session: str) -> dict[str, str]:
    """The session as memory_sessions lists it."""
    listed = await call(client, "memory_sessions", status="all", limit=100)
    return next(s for s in listed["sessions"] if s["id"] == session)


async def test_a_session_titled_by_its_first_decision_says_it_once_beside_the_title(
    client: Client, clock: FakeClock
) -> None:
    await call(client, "memory_observe", type="decision", content=DECISION, session_id="pdf")
    clock.advance(minutes=5)
    await call(client, "memory_observe", content="PDF export merged.", session_id="pdf", end_session=True)
    await call(client, "memory_crystallize")

    listed = await session_of(client, "pdf")
    context = (await call(client, "memory_context"))["text"]
    [hit] = [h for h in (await call(client, "memory_smart_search", query="WeasyPrint"))["hits"] if h["id"] == "pdf"]

    assert listed["title"] == DECISION
    assert listed["summary"] == (
        "2 observations, 2026-01-05 09:00 to 2026-01-05 09:05. Decisions: - " + DECISION + " Files: "
        "templates/invoice.html Concepts: weasyprint Also: - PDF export merged."
    )
    assert context.count(DECISION) == 1
    assert (hit["title"], hit["snippet"].count(DECISION[:60])) == (DECISION, 1)


async def test_a_title_ending_in_a_full_stop_opens_the_summary_without_a_stray_stop(client: Client) -> None:
    await call(client, "memory_observe", content="Wrote the README intro.", session_id="docs", end_session=True)

    [written] = (await call(client, "memory_crystallize"))["sessions"]

    assert written["title"] == "Wrote the README intro."
    assert (
        written["summary"].split("\n")[0]
        == "Wrote the README intro — 1 observation, 2026-01-05 09:00 to 2026-01-05 09:00."
    )
