"""Each context item says its record in one bounded line, with what an agent must know of it: an
anti-pattern's better strategy is cut like any other field, a contradiction stays flagged after a
new version of either side, and a preference the profile cannot show whole is listed with its id."""

from __future__ import annotations

from mcp import Client

from tests.conftest import FakeClock, call


def section_lines(text: str, heading: str) -> list[str]:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n\n", 1)[0].splitlines()


async def test_an_anti_patterns_better_strategy_is_one_bounded_line(client: Client) -> None:
    strategy = "Use the staged rollout.\n## Heading inside\n- a step\n" + " ".join(
        f"step{i} verify canary{i}" for i in range(80)
    )
    await call(
        client, "memory_outcome_record", task="Deploy the API", task_type="deploy", score=0.95, strategy=strategy
    )
    for i in range(2):
        await call(
            client,
            "memory_outcome_record",
            task=f"Deploy the API {i}",
            task_type="deploy",
            success=False,
            strategy="push straight to prod",
            error="connection pool exhausted during deploy",
        )

    text = (await call(client, "memory_context", budget=3000))["text"]

    (line,) = [line for line in section_lines(text, "Lessons") if line.startswith("- [anti_pattern")]
    assert "Better: Use the staged rollout. ## Heading inside - a step step0" in line
    assert len(line) < 800
    assert "\n## Heading inside" not in text


async def test_a_contradiction_stays_flagged_after_either_side_gets_a_new_version(
    client: Client, clock: FakeClock
) -> None:
    old = await call(client, "memory_save", kind="decision", content="Invoice PDFs are rendered with WeasyPrint.")
    clock.advance(days=2)
    new = await call(client, "memory_save", kind="decision", content="Invoices now use ReportLab for the PDF output.")
    await call(client, "memory_relate", source_id=new["id"], target_id=old["id"], type="contradicts")
    before = (await call(client, "memory_context"))["text"]
    clock.advance(days=1)
    revised = await call(
        client, "memory_save", supersedes=old["id"], content="Invoice PDFs are rendered with WeasyPrint 60."
    )
    clock.advance(days=1)
    again = await call(client, "memory_save", supersedes=new["id"], content="Invoices now use ReportLab 4 for PDFs.")
    after = (await call(client, "memory_context"))["text"]

    assert f"({new['id']}; contradicts older {old['id']})" in before
    # the revision is the newer side now: an agent reads which of the two came last
    assert f"({revised['id']}; contradicted by newer {again['id']})" in after
    assert f"({again['id']}; contradicts older {revised['id']})" in after


async def test_a_preference_the_profile_cannot_show_whole_is_listed_with_its_id(client: Client) -> None:
    rules = ", ".join(f"rule {i} does thing {i}" for i in range(20))
    long = f"When writing Python for this user: {rules}. Above all: never use tabs."
    cut = await call(client, "memory_save", content=long, kind="preference")
    short = await call(client, "memory_save", content="Prefers small commits.", kind="preference")

    result = await call(client, "memory_context", budget=5000)

    profile, memories = section_lines(result["text"], "Project profile"), section_lines(result["text"], "Memories")
    assert "Preference: Prefers small commits." in profile
    assert [line for line in memories if cut["id"] in line] == [
        f"- [preference] {long[:299].rsplit(' ', 1)[0]}… ({cut['id']})"
    ]
    assert not [line for line in memories if short["id"] in line]  # the profile shows all of it
    assert result["omitted"] == []
