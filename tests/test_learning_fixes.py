"""What outcomes teach stays true to the evidence; lesson fingerprints keep meaningful symbols."""

from __future__ import annotations

import hashlib
import sqlite3
import unicodedata
from typing import Any

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

STRATEGY = "profile first then optimise the hot loop"
UPGRADE = "bump the dependency and rerun the test suite"
IMPORT_ERRORS = [
    "ImportError: cannot import name 'x' from 'lib.core'",
    "ImportError: cannot import name 'y' from 'lib.core'",
]


async def record(client: Client, clock: FakeClock, **args: Any) -> dict[str, Any]:
    args.setdefault("task", "Speed up the export")
    result = await call(client, "memory_outcome_record", **args)
    clock.advance(minutes=1)
    return result


async def lessons_of(client: Client, kind: str, status: str = "all") -> list[dict[str, Any]]:
    return (await call(client, "memory_lessons", kinds=[kind], status=status, limit=100))["lessons"]


async def active(client: Client, kind: str, task_type: str) -> list[dict[str, Any]]:
    found = await call(client, "memory_insights", task_type=task_type)
    return found[{"heuristic": "heuristics", "anti_pattern": "anti_patterns"}[kind]]


# -- heuristics follow their evidence ------------------------------------------------------------


async def test_a_heuristic_is_retired_when_its_strategy_stops_winning_and_restored_when_it_wins_again(
    client: Client, clock: FakeClock
) -> None:
    for success in (True, True, False):
        third = await record(client, clock, task_type="performance", success=success, strategy=STRATEGY)
    (heuristic_id,) = third["derived"]["heuristics"]

    fourth = await record(client, clock, task_type="performance", success=False, strategy=STRATEGY)

    # 2 of 4 is not more than half: no longer reported, listed as faded with the current figures.
    assert fourth["derived"]["heuristics"] == []
    assert await active(client, "heuristic", "performance") == []
    (retired,) = await lessons_of(client, "heuristic")
    assert (retired["id"], retired["status"], retired["confidence"]) == (heuristic_id, "faded", 0.5)
    assert retired["context"] == "Worked in 2 of 4 attempts with a similar strategy."
    assert retired["source"] == {"strategy": STRATEGY, "outcomes": 4, "successes": 2}

    # A failure must not bring it back (it used to, at 0.4, and memory_context recommended it).
    fifth = await record(client, clock, task_type="performance", success=False, strategy=STRATEGY)
    assert fifth["derived"]["heuristics"] == []
    (still,) = await lessons_of(client, "heuristic")
    assert (still["status"], still["confidence"]) == ("faded", 0.4)
    assert still["context"] == "Worked in 2 of 5 attempts with a similar strategy."
    assert (await call(client, "memory_consolidate"))["changes"] == []
    context = (await call(client, "memory_context", task_type="performance"))["text"]
    assert heuristic_id not in context

    # Three successes later 5 of 8 succeeded: the same heuristic is back, with the new figures.
    for _ in range(3):
        back = await record(client, clock, task_type="performance", success=True, strategy=STRATEGY)
    assert back["derived"]["heuristics"] == [heuristic_id]
    (restored,) = await active(client, "heuristic", "performance")
    assert restored["id"] == heuristic_id
    assert restored["confidence"] == pytest.approx(5 / 8, abs=1e-4)
    assert restored["context"] == "Worked in 5 of 8 attempts with a similar strategy."
    assert restored["source"]["outcomes"] == 8
    assert heuristic_id in (await call(client, "memory_context", task_type="performance"))["text"]


async def test_strategies_of_stop_words_only_are_similar_to_nothing(client: Client, clock: FakeClock) -> None:
    for strategy in ("just do it", "do it again", "all of it"):
        result = await record(client, clock, task="Ship it", task_type="deployment", success=True, strategy=strategy)
        assert result["derived"]["heuristics"] == []
    for error in ("it is not there", "it was not here"):
        result = await record(client, clock, task="Ship it", task_type="deployment", success=False, error=error)
        assert result["derived"]["anti_patterns"] == []
    assert await lessons_of(client, "heuristic") == []
    assert await lessons_of(client, "anti_pattern") == []


# -- anti-patterns never contradict the evidence -------------------------------------------------


async def test_an_anti_pattern_never_offers_the_failing_strategy_as_the_better_one(
    client: Client, clock: FakeClock
) -> None:
    for error in IMPORT_ERRORS:
        await record(client, clock, task_type="configuration", success=False, strategy=UPGRADE, error=error)
    same = await record(client, clock, task_type="configuration", success=True, strategy=UPGRADE)

    assert same["derived"]["anti_patterns"] == []
    (anti,) = await active(client, "anti_pattern", "configuration")
    assert anti["content"] == f"Avoid in configuration tasks: {UPGRADE}"
    assert anti["source"]["alternative"] is None
    assert anti["context"].endswith("No successful alternative recorded yet.")

    other = await record(client, clock, task_type="configuration", score=0.7, strategy="pin the old version")
    assert other["derived"]["anti_patterns"] == [anti["id"]]
    (anti,) = await active(client, "anti_pattern", "configuration")
    assert anti["source"]["alternative"] == "pin the old version"
    assert anti["context"].endswith(". Better: pin the old version")


async def test_a_new_anti_pattern_skips_a_better_scored_success_of_the_failing_strategy(
    client: Client, clock: FakeClock
) -> None:
    await record(client, clock, task_type="configuration", score=1.0, strategy=UPGRADE)
    await record(client, clock, task_type="configuration", score=0.7, strategy="pin the old version")
    for error in IMPORT_ERRORS:
        await record(client, clock, task_type="configuration", success=False, strategy=UPGRADE, error=error)
    (anti,) = await active(client, "anti_pattern", "configuration")
    assert anti["source"]["alternative"] == "pin the old version"


async def test_a_strategy_is_never_both_recommended_and_avoided(client: Client, clock: FakeClock) -> None:
    async def both() -> tuple[list[str], list[str]]:
        heuristics = [h["content"] for h in await active(client, "heuristic", "configuration")]
        anti_patterns = [a["content"] for a in await active(client, "anti_pattern", "configuration")]
        return heuristics, anti_patterns

    recommended, avoided = f"For configuration tasks: {UPGRADE}", f"Avoid in configuration tasks: {UPGRADE}"
    for _ in range(3):
        await record(client, clock, task_type="configuration", success=True, strategy=UPGRADE)
    for error in IMPORT_ERRORS:  # 3 of 5 still succeeded: the strategy mostly works
        failed = await record(client, clock, task_type="configuration", success=False, strategy=UPGRADE, error=error)
    assert failed["derived"]["anti_patterns"] == []
    assert await both() == ([recommended], [])

    # 3 of 6: no longer a heuristic, and three similar failures make it one to avoid.
    failed = await record(
        client, clock, task_type="configuration", success=False, strategy=UPGRADE, error=IMPORT_ERRORS[0]
    )
    assert len(failed["derived"]["anti_patterns"]) == 1
    assert await both() == ([], [avoided])

    # 4 of 7: it works more often than not again, so the warning is retired.
    await record(client, clock, task_type="configuration", success=True, strategy=UPGRADE)
    assert await both() == ([recommended], [])
    (retired,) = await lessons_of(client, "anti_pattern", status="faded")
    assert retired["content"] == avoided


# -- rules and mistake cards ---------------------------------------------------------------------


async def test_blank_or_private_only_list_items_are_refused_naming_the_item(client: Client) -> None:
    message = await call_error(
        client, "memory_outcome_record", task="Fix flaky login", task_type="bugfix", score=0.2, mistakes=["ok", "  "]
    )
    assert "mistakes.1" in message
    message = await call_error(
        client, "memory_outcome_record", task="Ship", success=True, successes=["<private>the vault key</private>"]
    )
    assert "successes.0" in message
    assert "private" in message
    message = await call_error(client, "memory_outcome_record", task="Ship", success=True, steps=[""])
    assert "steps.0" in message
    assert await lessons_of(client, "rule_avoid") == []
    assert (await call(client, "memory_insights"))["task_types"] == []


async def test_blank_private_only_or_unknown_mistake_card_fields_are_refused(client: Client) -> None:
    blank = await call_error(
        client,
        "memory_outcome_record",
        task="Deploy",
        success=False,
        mistake_cards=[{"type": "x", "correct_decision": "   "}],
    )
    assert "mistake_cards.0.correct_decision" in blank
    private = await call_error(
        client,
        "memory_outcome_record",
        task="Deploy",
        success=False,
        mistake_cards=[
            {"type": "x", "correct_decision": "use the vault"},
            {"type": "y", "correct_decision": "<private>use the vault</private>"},
        ],
    )
    assert "mistake_cards.1.correct_decision" in private
    extra = await call_error(
        client,
        "memory_outcome_record",
        task="Deploy",
        success=False,
        mistake_cards=[{"type": "x", "correct_decision": "use the vault", "extra": 1}],
    )
    assert "mistake_cards.0.extra" in extra
    assert (await call(client, "memory_insights"))["mistake_cards"] == []


async def test_the_same_rule_or_card_twice_in_one_outcome_counts_once(client: Client, clock: FakeClock) -> None:
    card = {"type": "wrong_tool", "correct_decision": "Use the csv module"}
    result = await record(
        client,
        clock,
        task_type="bugfix",
        score=0.2,
        mistakes=["Split on commas.", "split on commas"],
        mistake_cards=[card | {"why": "quotes"}, card | {"correct_decision": "use the CSV module", "why": "commas"}],
    )

    (rule_id,) = result["derived"]["rules"]
    (card_id,) = result["derived"]["mistake_cards"]
    (rule,) = await lessons_of(client, "rule_avoid")
    assert (rule["id"], rule["reinforcements"]) == (rule_id, 0)
    (seen,) = (await call(client, "memory_insights"))["mistake_cards"]
    assert (seen["id"], seen["seen_count"], seen["why"]) == (card_id, 1, "commas")


async def test_only_a_successful_outcome_makes_works_rules(client: Client, clock: FakeClock) -> None:
    failed = await record(
        client, clock, task_type="refactor", success=False, score=0.9, successes=["Small commits"], error="it broke"
    )
    worked = await record(client, clock, task_type="refactor", success=True, score=0.9, successes=["Small commits"])
    assert failed["derived"]["rules"] == []
    (rule_id,) = worked["derived"]["rules"]
    (rule,) = await lessons_of(client, "rule_works")
    assert (rule["id"], rule["source"]) == (rule_id, {"outcome": worked["id"]})
    # A mistake is still worth avoiding in a task that got there in the end.
    rough = await record(client, clock, task_type="refactor", success=True, score=0.3, mistakes=["Skipped review"])
    assert len(rough["derived"]["rules"]) == 1


async def test_a_mistake_card_shows_for_every_task_type_it_was_seen_in(client: Client, clock: FakeClock) -> None:
    card = {"type": "skipped_source", "correct_decision": "Read the primary source", "task": "Check a claim"}
    first = await record(client, clock, task_type="bugfix", success=False, mistake_cards=[card])
    later = await record(client, clock, task_type="research", success=False, mistake_cards=[card])
    (card_id,) = first["derived"]["mistake_cards"]
    assert later["derived"]["mistake_cards"] == [card_id]

    research = (await call(client, "memory_insights", task_type="research"))["mistake_cards"]
    assert [(c["id"], c["seen_count"]) for c in research] == [(card_id, 2)]
    assert [c["id"] for c in (await call(client, "memory_insights", task_type="bugfix"))["mistake_cards"]] == [card_id]
    assert (await call(client, "memory_insights", task_type="testing"))["mistake_cards"] == []
    context = (await call(client, "memory_context", task_type="research"))["text"]
    assert "Seen 2x, skipped_source in 'Check a claim': do Read the primary source" in context


# -- task type inference -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("Optimise bundle size", "performance"),
        ("Optimize bundle size", "performance"),
        ("Bundle size optimisation", "performance"),
        ("Analyse the churn numbers", "research"),
    ],
)
async def test_british_and_american_spellings_infer_the_same_task_type(
    client: Client, task: str, expected: str
) -> None:
    result = await call(client, "memory_outcome_record", task=task, success=True)
    assert (result["task_type"], result["task_type_inferred"]) == (expected, True)


# -- fingerprints --------------------------------------------------------------------------------


async def save(client: Client, content: str, **args: Any) -> dict[str, Any]:
    return await call(client, "memory_lesson_save", content=content, **args)


async def test_symbols_at_the_edge_that_carry_meaning_keep_lessons_apart(client: Client) -> None:
    cpp, csharp = await save(client, "Prefer C++"), await save(client, "Use C#")
    c, plain = await save(client, "Prefer C"), await save(client, "Use C")
    assert (c["created"], plain["created"]) == (True, True)
    assert len({cpp["lesson"]["id"], csharp["lesson"]["id"], c["lesson"]["id"], plain["lesson"]["id"]}) == 4

    # Sentence punctuation, quotes and a list bullet still do not make a new lesson.
    for variant, original in (('"Prefer C++."', cpp), ("- use c#!", csharp), ("“Prefer C”…", c)):
        again = await save(client, variant)
        assert (again["created"], again["lesson"]["id"]) == (False, original["lesson"]["id"]), variant


async def test_composed_and_decomposed_accents_are_one_lesson(client: Client) -> None:
    text = "Ask José before touching the café schema"
    first = await save(client, unicodedata.normalize("NFC", text))
    second = await save(client, unicodedata.normalize("NFD", text))
    assert (second["created"], second["lesson"]["id"]) == (False, first["lesson"]["id"])
    assert (await call(client, "memory_lessons"))["total"] == 1


def _old_fingerprint(normal: str) -> str:
    """The fingerprint an older release stored: case-folded, every edge symbol dropped, no Unicode form."""
    return hashlib.sha256(normal.encode()).hexdigest()


def _set_fingerprints(settings: Settings, by_id: dict[str, str]) -> None:
    with sqlite3.connect(settings.db) as conn:
        conn.executemany("UPDATE lessons SET fingerprint = ? WHERE id = ?", [(fp, i) for i, fp in by_id.items()])


async def test_lessons_stored_under_the_old_fingerprint_are_still_found(settings: Settings, clock: FakeClock) -> None:
    decomposed = unicodedata.normalize("NFD", "Ask José first")
    async with Client(build_server(settings, clock)) as client:
        cpp = (await save(client, "Prefer C++"))["lesson"]
        other = (await save(client, "Prefer C++", project="other"))["lesson"]
        jose = (await save(client, decomposed))["lesson"]
        rule = await call(
            client, "memory_outcome_record", task="t", task_type="testing", success=True, successes=["Use C#."]
        )
    _set_fingerprints(
        settings,
        {
            cpp["id"]: _old_fingerprint("prefer c"),
            other["id"]: _old_fingerprint("prefer c"),
            jose["id"]: _old_fingerprint(decomposed.casefold()),
            rule["derived"]["rules"][0]: _old_fingerprint("rule_works\x1ftesting\x1fuse c"),
        },
    )

    async with Client(build_server(settings, clock)) as client:
        # The same text finds its lesson (and re-keys it); a text the old rule confused does not.
        again = await save(client, "Prefer C++")
        plain = await save(client, "Prefer C")
        # In the other project the confused text comes first: the old row moves out of its way.
        other_plain = await save(client, "Prefer C", project="other")
        other_again = await save(client, "prefer c++!", project="other")
        composed = await save(client, unicodedata.normalize("NFC", "Ask José first"))
        rule_again = await call(
            client, "memory_outcome_record", task="t", task_type="testing", success=True, successes=["use c#"]
        )
        plain_again = await save(client, "Prefer C")

    assert (again["created"], again["lesson"]["id"], again["lesson"]["reinforcements"]) == (False, cpp["id"], 1)
    assert plain["created"] is True
    assert plain_again["lesson"]["id"] == plain["lesson"]["id"]
    assert other_plain["created"] is True
    assert (other_again["created"], other_again["lesson"]["id"]) == (False, other["id"])
    assert (composed["created"], composed["lesson"]["id"]) == (False, jose["id"])
    assert rule_again["derived"]["rules"] == rule["derived"]["rules"]
