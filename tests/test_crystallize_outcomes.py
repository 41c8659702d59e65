"""What a session summary says of its outcomes and of the facts its observations recorded."""

from __future__ import annotations

from typing import Any

from mcp import Client

from tests.conftest import FakeClock, call

SESSION = "ci-work"


async def summary_lines(
    client: Client, clock: FakeClock, outcomes: list[tuple[str, bool]], **observed: Any
) -> list[str]:
    """The extractive summary of a session of one observation and then `outcomes` (task, success)."""
    observed.setdefault("content", "Looked at the CI config.")
    await call(client, "memory_observe", session_id=SESSION, **observed)
    for task, success in outcomes:
        clock.advance(minutes=1)
        score = 0.9 if success else 0.1
        await call(
            client,
            "memory_outcome_record",
            task=task,
            task_type="bugfix",
            success=success,
            score=score,
            session_id=SESSION,
        )
    await call(client, "memory_observe", content="Done for today.", session_id=SESSION, end_session=True)
    result = await call(client, "memory_crystallize", session_id=SESSION)
    return str(result["sessions"][0]["summary"]).split("\n")


def section(lines: list[str], heading: str) -> list[str]:
    """The lines from `heading` up to the next line that is not a list item."""
    start = next(n for n, line in enumerate(lines) if line.startswith(heading))
    end = next((n for n in range(start + 1, len(lines)) if not lines[n].startswith("- ")), len(lines))
    return lines[start:end]


async def test_failed_outcomes_come_first_and_the_rest_are_counted(client: Client, clock: FakeClock) -> None:
    outcomes = [(f"task number {n}", n < 5) for n in range(7)]

    lines = await summary_lines(client, clock, outcomes)

    assert section(lines, "Outcome") == [
        "Outcomes: 5 of 7 succeeded",
        "- task number 5 failed (score 0.10)",
        "- task number 6 failed (score 0.10)",
        "- task number 0 succeeded (score 0.90)",
        "- task number 1 succeeded (score 0.90)",
        "- task number 2 succeeded (score 0.90)",
        "- … and 2 more (all succeeded)",
    ]


async def test_failures_beyond_the_listed_ones_are_counted_as_failures(client: Client, clock: FakeClock) -> None:
    outcomes = [("Ship the release", True)] + [(f"Fix flaky test {n}", False) for n in range(7)]

    lines = await summary_lines(client, clock, outcomes)

    assert section(lines, "Outcome") == [
        "Outcomes: 1 of 8 succeeded",
        *[f"- Fix flaky test {n} failed (score 0.10)" for n in range(5)],
        "- … and 3 more (2 failed)",
    ]


async def test_a_few_outcomes_are_all_listed_and_a_single_one_keeps_its_line(client: Client, clock: FakeClock) -> None:
    lines = await summary_lines(client, clock, [("Ship the release", True), ("Rotate the keys", False)])

    assert section(lines, "Outcome") == [
        "Outcomes: 1 of 2 succeeded",
        "- Rotate the keys failed (score 0.10)",
        "- Ship the release succeeded (score 0.90)",
    ]


async def test_a_discoverys_facts_follow_its_title_under_also(client: Client, clock: FakeClock) -> None:
    facts = ["CI runs on GitHub Actions with ubuntu-latest runners", "the deploy job needs the PROD_ENV secret"]

    lines = await summary_lines(client, clock, [("Fix the deploy job", True)], type="discovery", facts=facts)

    assert section(lines, "Also:")[1:] == [
        "- Looked at the CI config. — CI runs on GitHub Actions with ubuntu-latest runners; the deploy job needs "
        "the PROD_ENV secret",
        "- Done for today.",
    ]


async def test_facts_that_repeat_the_title_or_do_not_fit_are_left_out(client: Client, clock: FakeClock) -> None:
    long = "The nightly build reads its matrix from ci/matrix.yaml " + "and then some more detail " * 12
    facts = ["Looked at the CI config", long, "the deploy job needs the PROD_ENV secret"]

    lines = await summary_lines(client, clock, [], type="discovery", title="Looked at the CI config", facts=facts)

    [line, _] = section(lines, "Also:")[1:]
    assert line.startswith("- Looked at the CI config — The nightly build reads its matrix from ci/matrix.yaml and")
    assert line.endswith("…; the deploy job needs the PROD_ENV secret")
    assert len(line) <= 2 + 240


async def test_a_long_summary_is_cut_to_its_cap_before_the_outcomes(client: Client, clock: FakeClock) -> None:
    for n in range(8):  # eight long decisions take most of the summary's 2,000 characters
        chose = f"Chose option {n} " + "for reasons " * 14
        await call(client, "memory_observe", content=chose, title=chose, type="decision", session_id=SESSION)
    outcomes = [(f"Long task {n} " + "with many words " * 8, n % 3 == 0) for n in range(9)]

    lines = await summary_lines(client, clock, outcomes)

    assert len("\n".join(lines)) <= 2_000
    # how the session went is always said: the decisions that do not fit are left out instead
    task = f"{'with many words ' * 6}with many…"
    assert section(lines, "Outcomes:") == [
        "Outcomes: 3 of 9 succeeded",
        *(f"- Long task {n} {task} failed (score 0.10)" for n in (1, 2, 4, 5, 7)),
        "- … and 4 more (1 failed)",
    ]
    assert lines[lines.index("Outcomes: 3 of 9 succeeded") - 1] == "…"
    assert sum(line.startswith("- Chose option") for line in lines) < 8
