"""Outcome tools through the real server: what memory_outcome_record derives, and memory_insights."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.repositories.outcomes import MistakeCardRepository
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

STRATEGY = "extract small functions and add tests first"
SIMILAR_STRATEGY = "extract small helper functions and add tests first"  # Jaccard 6/7 with STRATEGY
OTHER_STRATEGY = "rewrite the whole module from scratch"

ERROR = "TimeoutError: database connection pool exhausted"
SIMILAR_ERROR = "TimeoutError: database connection pool exhausted after 30 seconds"
OTHER_ERROR = "KeyError: missing column email in the CSV header"

WEEK_MINUTES = 7 * 24 * 60


async def record(client: Client, clock: FakeClock | None = None, **args: Any) -> dict[str, Any]:
    args.setdefault("task", "Tidy the module layout")
    result = await call(client, "memory_outcome_record", **args)
    if clock is not None:
        clock.advance(minutes=10)
    return result


async def insights(client: Client, **args: Any) -> dict[str, Any]:
    return await call(client, "memory_insights", **args)


async def lessons_of(client: Client, kind: str, status: str = "active") -> list[dict[str, Any]]:
    return (await call(client, "memory_lessons", kinds=[kind], status=status, limit=100))["lessons"]


# -- recording -----------------------------------------------------------------------------------


async def test_an_outcome_is_recorded_with_what_was_given(client: Client) -> None:
    result = await record(
        client,
        task="Refactor the exporter into smaller functions",
        task_type="refactor",
        success=True,
        score=0.8,
        strategy=STRATEGY,
        steps=["read the code", "extract functions", "run the tests"],
        duration_s=1800,
        feedback="Much easier to read now.",
    )

    assert result["id"].startswith("out_")
    assert result["task_type"] == "refactor"
    assert result["task_type_inferred"] is False
    assert result["success"] is True
    assert result["score"] == 0.8
    assert result["derived"] == {"heuristics": [], "anti_patterns": [], "rules": [], "mistake_cards": []}
    assert result["redacted"] == {}


async def test_success_and_score_default_from_each_other(client: Client) -> None:
    only_success = await record(client, task_type="chore", success=True)
    only_failure = await record(client, task_type="chore", success=False)
    good_score = await record(client, task_type="chore", score=0.5)
    bad_score = await record(client, task_type="chore", score=0.49)
    both = await record(client, task_type="chore", success=True, score=0.2)

    assert (only_success["success"], only_success["score"]) == (True, 1.0)
    assert (only_failure["success"], only_failure["score"]) == (False, 0.0)
    assert (good_score["success"], good_score["score"]) == (True, 0.5)
    assert (bad_score["success"], bad_score["score"]) == (False, 0.49)
    assert (both["success"], both["score"]) == (True, 0.2)


async def test_an_outcome_needs_success_or_score(client: Client) -> None:
    message = await call_error(client, "memory_outcome_record", task="Did something")
    assert "success" in message
    assert "score" in message
    assert (await insights(client))["task_types"] == []


async def test_bad_outcome_input_is_refused(client: Client) -> None:
    assert "score" in await call_error(client, "memory_outcome_record", task="x", score=1.5)
    assert "task_type" in await call_error(client, "memory_outcome_record", task="x", success=True, task_type="Bug")
    message = await call_error(
        client, "memory_outcome_record", task="x", success=True, mistake_cards=[{"type": "t", "correct_decision": ""}]
    )
    assert "correct_decision" in message
    message = await call_error(client, "memory_outcome_record", task="x", success=True, mistake_cards=["forgot tests"])
    assert message.endswith("mistake_cards.0: must be an object of named fields")
    card = {"type": "t", "correct_decision": "Run them.", "wrong": "Skipped them."}
    message = await call_error(client, "memory_outcome_record", task="x", success=True, mistake_cards=[card])
    assert message.endswith("mistake_cards.0.wrong: unknown field")
    message = await call_error(client, "memory_outcome_record", task="x", success=True, session_id="ses_nope")
    assert "No session 'ses_nope' in this project" in message


async def test_secrets_in_an_outcome_are_redacted_and_counted(client: Client) -> None:
    result = await record(
        client,
        task_type="deployment",
        success=False,
        error="auth failed for postgres://admin:hunter2secret@db.internal/app",
        mistakes=["pasted ghp_abcdefghijklmnopqrstuvwxyz0123456789 into the log"],
    )
    assert sum(result["redacted"].values()) == 2
    (rule,) = await lessons_of(client, "rule_avoid")
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in rule["content"]


# -- task types ----------------------------------------------------------------------------------


KEYWORD_FAMILIES = [
    ("Fix the crash in the login handler", "bugfix"),
    ("Write unit tests for the exporter", "testing"),
    ("Rename the config loader module", "refactor"),
    ("Update the README", "documentation"),
    ("Deploy the release to production", "deployment"),
    ("Speed up the slow search query", "performance"),
    ("Add CSV export to the reports page", "feature"),
    ("Tidy the office plants", "general"),
]


async def test_the_task_type_is_inferred_from_keyword_families(client: Client) -> None:
    # Each in its own project, so no earlier task can lend its type.
    for n, (task, expected) in enumerate(KEYWORD_FAMILIES):
        result = await record(client, task=task, success=True, project=f"p{n}")
        assert (result["task_type"], result["task_type_inferred"]) == (expected, True), task


async def test_a_given_task_type_wins_over_the_keywords(client: Client) -> None:
    result = await record(client, task="Fix the crash in the login handler", task_type="security", success=True)
    assert (result["task_type"], result["task_type_inferred"]) == ("security", False)


async def test_a_task_nearly_identical_to_a_past_typed_one_inherits_its_type(client: Client, clock: FakeClock) -> None:
    await record(
        client, clock, task="Migrate the billing tables to the new schema", task_type="migration", success=True
    )

    twin = await record(client, clock, task="Migrate the billing tables to the new schema v2", success=True)
    unrelated = await record(client, clock, task="Create the new onboarding page", success=True)

    assert (twin["task_type"], twin["task_type_inferred"]) == ("migration", True)
    # Without a close twin the keyword families apply ("new" -> feature).
    assert (unrelated["task_type"], unrelated["task_type_inferred"]) == ("feature", True)


async def test_an_inferred_past_type_is_not_inherited(client: Client, clock: FakeClock) -> None:
    # "Tidy …" is inferred as general; a near twin is still classified by its own keywords.
    await record(client, clock, task="Tidy the parser module", success=True)
    twin = await record(client, clock, task="Tidy the parser module and fix the bug", success=True)
    assert twin["task_type"] == "bugfix"


# -- score history -------------------------------------------------------------------------------


async def test_insights_show_score_history_and_mean_per_task_type(client: Client, clock: FakeClock) -> None:
    first = await record(client, clock, task_type="bugfix", success=True)
    second = await record(client, clock, task_type="bugfix", score=0.4)
    third = await record(client, clock, task_type="bugfix", score=0.7)
    await record(client, clock, task_type="docs", score=0.9)

    result = await insights(client)

    assert [s["task_type"] for s in result["task_types"]] == ["bugfix", "docs"]  # most outcomes first
    bugfix = result["task_types"][0]
    assert bugfix["outcomes"] == 3
    assert bugfix["successes"] == 2
    assert bugfix["success_rate"] == pytest.approx(0.6667, abs=1e-4)
    assert bugfix["mean_score"] == pytest.approx(0.7, abs=1e-4)
    assert bugfix["history"] == [
        {"outcome_id": first["id"], "at": "2026-01-05T09:00:00.000000Z", "score": 1.0, "success": True},
        {"outcome_id": second["id"], "at": "2026-01-05T09:10:00.000000Z", "score": 0.4, "success": False},
        {"outcome_id": third["id"], "at": "2026-01-05T09:20:00.000000Z", "score": 0.7, "success": True},
    ]
    docs = result["task_types"][1]
    assert (docs["outcomes"], docs["successes"], docs["mean_score"]) == (1, 1, 0.9)

    only = await insights(client, task_type="docs")
    assert only["task_type"] == "docs"
    assert [s["task_type"] for s in only["task_types"]] == ["docs"]


async def test_score_history_shows_the_ten_most_recent_oldest_first(client: Client, clock: FakeClock) -> None:
    ids = [(await record(client, clock, task_type="chore", score=i / 20))["id"] for i in range(12)]
    (stats,) = (await insights(client, task_type="chore"))["task_types"]
    assert stats["outcomes"] == 12
    assert stats["mean_score"] == pytest.approx(sum(i / 20 for i in range(12)) / 12, abs=1e-4)
    assert [p["outcome_id"] for p in stats["history"]] == ids[2:]


async def test_insights_limit_bounds_the_task_types_and_their_histories(client: Client, clock: FakeClock) -> None:
    ids = [(await record(client, clock, task_type="chore", score=0.5))["id"] for _ in range(4)]
    await record(client, clock, task_type="docs", score=0.9)

    chore, docs = (await insights(client, limit=2))["task_types"]
    (only,) = (await insights(client, limit=1))["task_types"]

    assert (chore["task_type"], chore["outcomes"]) == ("chore", 4)  # counts stay whole
    assert [p["outcome_id"] for p in chore["history"]] == ids[2:]
    assert docs["task_type"] == "docs"
    assert (only["task_type"], [p["outcome_id"] for p in only["history"]]) == ("chore", ids[3:])


async def test_the_profile_shows_scores_per_task_type(client: Client, clock: FakeClock) -> None:
    await record(client, clock, task_type="bugfix", score=0.6)
    await record(client, clock, task_type="bugfix", score=0.9)
    await record(client, clock, task_type="refactor", success=False)

    profile = await call(client, "memory_profile")

    assert profile["project"] == "test"
    stats = {s["task_type"]: s for s in profile["task_types"]}
    assert set(stats) == {"bugfix", "refactor"}
    assert stats["bugfix"]["mean_score"] == pytest.approx(0.75, abs=1e-4)
    assert (stats["bugfix"]["outcomes"], stats["bugfix"]["successes"]) == (2, 2)
    assert (stats["refactor"]["outcomes"], stats["refactor"]["successes"], stats["refactor"]["mean_score"]) == (1, 0, 0)
    assert profile["task_types"] == (await insights(client))["task_types"]


async def test_outcomes_of_another_project_are_kept_apart(client: Client) -> None:
    await record(client, task_type="bugfix", success=True, project="other")
    assert (await insights(client))["task_types"] == []
    assert [s["task_type"] for s in (await insights(client, project="other"))["task_types"]] == ["bugfix"]


# -- heuristics ----------------------------------------------------------------------------------


async def test_a_heuristic_appears_on_the_third_similar_outcome(client: Client, clock: FakeClock) -> None:
    first = await record(client, clock, task_type="refactor", success=True, strategy=STRATEGY)
    second = await record(client, clock, task_type="refactor", success=False, strategy=SIMILAR_STRATEGY)
    assert first["derived"]["heuristics"] == []
    assert second["derived"]["heuristics"] == []
    assert await lessons_of(client, "heuristic") == []

    third = await record(client, clock, task_type="refactor", success=True, strategy=STRATEGY)

    (heuristic_id,) = third["derived"]["heuristics"]
    (heuristic,) = (await insights(client, task_type="refactor"))["heuristics"]
    assert heuristic["id"] == heuristic_id
    assert heuristic["kind"] == "heuristic"
    assert heuristic["task_type"] == "refactor"
    assert heuristic["content"] == f"For refactor tasks: {STRATEGY}"
    assert heuristic["confidence"] == pytest.approx(2 / 3, abs=1e-4)  # the success share
    assert heuristic["source"] == {"strategy": STRATEGY, "outcomes": 3, "successes": 2}


async def test_a_heuristic_tracks_the_success_share_of_later_outcomes(client: Client, clock: FakeClock) -> None:
    for success in (True, True, True):
        await record(client, clock, task_type="refactor", success=success, strategy=STRATEGY)
    (heuristic,) = await lessons_of(client, "heuristic")
    assert heuristic["confidence"] == pytest.approx(0.95 ** (10 / WEEK_MINUTES), abs=5e-5)  # 1.0, 10 minutes ago

    fourth = await record(client, clock, task_type="refactor", success=False, strategy=SIMILAR_STRATEGY)

    assert fourth["derived"]["heuristics"] == [heuristic["id"]]
    (updated,) = await lessons_of(client, "heuristic")
    assert updated["confidence"] == pytest.approx(0.75 * 0.95 ** (10 / WEEK_MINUTES), abs=5e-5)
    assert updated["source"]["outcomes"] == 4
    assert updated["source"]["successes"] == 3


async def test_no_heuristic_without_a_success_majority(client: Client, clock: FakeClock) -> None:
    for success in (True, False, False, True):  # 1 of 3, then 2 of 4: never more than half
        result = await record(client, clock, task_type="refactor", success=success, strategy=STRATEGY)
        assert result["derived"]["heuristics"] == []
    assert await lessons_of(client, "heuristic") == []


async def test_a_dissimilar_strategy_does_not_count_towards_a_heuristic(client: Client, clock: FakeClock) -> None:
    await record(client, clock, task_type="refactor", success=True, strategy=STRATEGY)
    await record(client, clock, task_type="refactor", success=True, strategy=SIMILAR_STRATEGY)
    dissimilar = await record(client, clock, task_type="refactor", success=True, strategy=OTHER_STRATEGY)
    no_strategy = await record(client, clock, task_type="refactor", success=True)
    other_type = await record(client, clock, task_type="bugfix", success=True, strategy=STRATEGY)
    assert dissimilar["derived"]["heuristics"] == []
    assert no_strategy["derived"]["heuristics"] == []
    assert other_type["derived"]["heuristics"] == []
    assert await lessons_of(client, "heuristic") == []

    third_similar = await record(client, clock, task_type="refactor", success=True, strategy=STRATEGY)
    (heuristic_id,) = third_similar["derived"]["heuristics"]
    (heuristic,) = await lessons_of(client, "heuristic")
    assert heuristic["id"] == heuristic_id
    assert heuristic["confidence"] == pytest.approx(0.95 ** (10 / WEEK_MINUTES), abs=5e-5)
    assert heuristic["source"]["outcomes"] == 3


async def test_heuristic_thresholds_are_settings(settings: Settings, clock: FakeClock) -> None:
    eager = settings.model_copy(update={"heuristic_min_outcomes": 2})
    async with Client(build_server(eager, clock)) as client:
        await record(client, clock, task_type="refactor", success=True, strategy=STRATEGY)
        second = await record(client, clock, task_type="refactor", success=True, strategy=STRATEGY)
    assert len(second["derived"]["heuristics"]) == 1


# -- anti-patterns -------------------------------------------------------------------------------


async def test_an_anti_pattern_appears_on_the_second_similar_failure(client: Client, clock: FakeClock) -> None:
    first = await record(client, clock, task_type="bugfix", success=False, strategy="raise the timeout", error=ERROR)
    assert first["derived"]["anti_patterns"] == []
    assert await lessons_of(client, "anti_pattern") == []

    second = await record(
        client, clock, task_type="bugfix", success=False, strategy="raise the timeout again", error=SIMILAR_ERROR
    )

    (anti_id,) = second["derived"]["anti_patterns"]
    (anti,) = (await insights(client, task_type="bugfix"))["anti_patterns"]
    assert anti["id"] == anti_id
    assert anti["kind"] == "anti_pattern"
    assert anti["task_type"] == "bugfix"
    assert anti["content"] == "Avoid in bugfix tasks: raise the timeout again"
    assert anti["confidence"] == 0.6
    assert anti["context"] == (
        f"Failed 2 times with errors like: {SIMILAR_ERROR}. No successful alternative recorded yet."
    )
    counted = sorted([first["id"], second["id"]])  # the failures it counts, so none is counted twice
    assert anti["source"] == {"error": SIMILAR_ERROR, "failures": 2, "alternative": None, "failed_outcomes": counted}


async def test_a_third_similar_failure_strengthens_the_same_anti_pattern(client: Client, clock: FakeClock) -> None:
    for error in (ERROR, SIMILAR_ERROR):
        await record(client, clock, task_type="bugfix", success=False, error=error)
    (anti,) = await lessons_of(client, "anti_pattern")
    assert anti["content"] == f"Avoid in bugfix tasks: the approach that led to: {SIMILAR_ERROR}"

    third = await record(client, clock, task_type="bugfix", success=False, error=ERROR)

    assert third["derived"]["anti_patterns"] == [anti["id"]]
    (again,) = await lessons_of(client, "anti_pattern")
    assert again["confidence"] == 0.7
    assert again["source"]["failures"] == 3


async def test_dissimilar_errors_make_no_anti_pattern(client: Client, clock: FakeClock) -> None:
    await record(client, clock, task_type="bugfix", success=False, error=ERROR)
    other = await record(client, clock, task_type="bugfix", success=False, error=OTHER_ERROR)
    other_type = await record(client, clock, task_type="deployment", success=False, error=SIMILAR_ERROR)
    no_error = await record(client, clock, task_type="bugfix", success=False)
    assert other["derived"]["anti_patterns"] == []
    assert other_type["derived"]["anti_patterns"] == []
    assert no_error["derived"]["anti_patterns"] == []
    assert await lessons_of(client, "anti_pattern") == []


async def test_an_anti_pattern_names_the_best_successful_strategy(client: Client, clock: FakeClock) -> None:
    await record(client, clock, task_type="bugfix", score=0.7, strategy="retry the query once")
    await record(client, clock, task_type="bugfix", score=0.95, strategy="close sessions and size the pool")
    await record(client, clock, task_type="bugfix", score=0.8, strategy="add an index")
    await record(client, clock, task_type="bugfix", success=True)  # no strategy: cannot be the alternative
    await record(client, clock, task_type="deployment", score=1.0, strategy="another task type's strategy")
    for error in (ERROR, SIMILAR_ERROR):
        await record(client, clock, task_type="bugfix", success=False, strategy="raise the timeout", error=error)

    (anti,) = await lessons_of(client, "anti_pattern")
    assert anti["source"]["alternative"] == "close sessions and size the pool"
    assert anti["context"].endswith(". Better: close sessions and size the pool")


async def test_a_success_recorded_later_gives_the_anti_pattern_its_alternative(
    client: Client, clock: FakeClock
) -> None:
    for error in (ERROR, SIMILAR_ERROR):
        await record(client, clock, task_type="bugfix", success=False, strategy="raise the timeout", error=error)
    (anti,) = await lessons_of(client, "anti_pattern")
    assert anti["source"]["alternative"] is None

    fixed = await record(client, clock, task_type="bugfix", score=0.8, strategy="close sessions after each request")

    assert fixed["derived"]["anti_patterns"] == [anti["id"]]
    (updated,) = await lessons_of(client, "anti_pattern")
    assert updated["source"]["alternative"] == "close sessions after each request"
    assert updated["context"] == (
        f"Failed 2 times with errors like: {SIMILAR_ERROR}. Better: close sessions after each request"
    )

    # A weaker success does not replace the alternative; a stronger one does.
    weaker = await record(client, clock, task_type="bugfix", score=0.6, strategy="restart the worker")
    assert weaker["derived"]["anti_patterns"] == []
    assert (await lessons_of(client, "anti_pattern"))[0]["source"]["alternative"] == "close sessions after each request"
    stronger = await record(client, clock, task_type="bugfix", score=1.0, strategy="use a pooled session factory")
    assert stronger["derived"]["anti_patterns"] == [anti["id"]]
    assert (await lessons_of(client, "anti_pattern"))[0]["source"]["alternative"] == "use a pooled session factory"


# -- rules ---------------------------------------------------------------------------------------


async def test_high_scores_make_works_rules_and_low_scores_avoid_rules(client: Client, clock: FakeClock) -> None:
    good = await record(
        client,
        clock,
        task_type="testing",
        score=0.85,
        successes=["Run the linter before committing.", "Write the failing test first."],
        mistakes=["Forgot the changelog."],
    )
    middling = await record(
        client, clock, task_type="testing", score=0.84, successes=["Middling success."], mistakes=["Middling mistake."]
    )
    passable = await record(
        client, clock, task_type="testing", score=0.5, successes=["Passable success."], mistakes=["Passable mistake."]
    )
    bad = await record(
        client,
        clock,
        task_type="testing",
        score=0.49,
        successes=["Kept the diff small."],
        mistakes=["Edited generated files by hand."],
    )

    assert len(good["derived"]["rules"]) == 2
    assert middling["derived"]["rules"] == []
    assert passable["derived"]["rules"] == []
    assert len(bad["derived"]["rules"]) == 1

    result = await insights(client, task_type="testing")
    assert {r["content"] for r in result["works"]} == {
        "Run the linter before committing.",
        "Write the failing test first.",
    }
    assert {r["id"] for r in result["works"]} == set(good["derived"]["rules"])
    assert [r["content"] for r in result["avoid"]] == ["Edited generated files by hand."]
    assert [r["id"] for r in result["avoid"]] == bad["derived"]["rules"]
    # New rules start at the lesson default (0.5), decayed since: 40 minutes for works, 10 for avoid.
    for rule in result["works"]:
        assert (rule["task_type"], rule["source"]) == ("testing", {"outcome": good["id"]})
        assert rule["confidence"] == pytest.approx(0.5 * 0.95 ** (40 / WEEK_MINUTES), abs=5e-5)
    (avoid,) = result["avoid"]
    assert (avoid["task_type"], avoid["source"]) == ("testing", {"outcome": bad["id"]})
    assert avoid["confidence"] == pytest.approx(0.5 * 0.95 ** (10 / WEEK_MINUTES), abs=5e-5)
    assert [r["kind"] for r in result["works"]] == ["rule_works", "rule_works"]
    assert [r["kind"] for r in result["avoid"]] == ["rule_avoid"]


async def test_success_or_failure_alone_counts_as_a_full_or_zero_score_for_rules(client: Client) -> None:
    worked = await record(client, task_type="testing", success=True, successes=["Mocked the clock."])
    failed = await record(client, task_type="testing", success=False, mistakes=["Slept in the test."])
    assert len(worked["derived"]["rules"]) == 1
    assert len(failed["derived"]["rules"]) == 1


async def test_the_same_rule_again_reinforces_it(client: Client) -> None:
    first = await record(client, task_type="testing", score=0.9, successes=["Write the failing test first."])
    second = await record(client, task_type="testing", score=1.0, successes=["write the failing test first"])
    assert first["derived"]["rules"] == second["derived"]["rules"]
    (rule,) = await lessons_of(client, "rule_works")
    assert rule["reinforcements"] == 1
    assert rule["confidence"] == pytest.approx(0.55, abs=5e-5)


async def test_a_rule_with_the_text_of_a_saved_lesson_is_a_rule_of_its_own(client: Client) -> None:
    # A derived lesson is identified by kind and task type too, so the saved lesson is left alone.
    lesson = (await call(client, "memory_lesson_save", content="Run the tests before committing."))["lesson"]
    result = await record(client, task_type="testing", score=0.9, successes=["run the tests before committing"])
    (rule_id,) = result["derived"]["rules"]
    assert rule_id != lesson["id"]
    kept = {item["id"]: item for item in (await call(client, "memory_lessons"))["lessons"]}
    assert (kept[lesson["id"]]["kind"], kept[lesson["id"]]["reinforcements"]) == ("lesson", 0)
    assert [w["id"] for w in (await insights(client, task_type="testing"))["works"]] == [rule_id]


async def test_the_same_works_rule_learned_in_two_task_types_stays_visible_for_both(client: Client) -> None:
    await record(client, task="a", task_type="refactor", score=0.9, successes=["Run the tests before committing."])
    await record(client, task="b", task_type="testing", score=0.9, successes=["Run the tests before committing."])

    refactor = await insights(client, task_type="refactor")
    testing = await insights(client, task_type="testing")

    assert [r["content"] for r in testing["works"]] == ["Run the tests before committing."]
    assert [r["content"] for r in refactor["works"]] == ["Run the tests before committing."]


async def test_rules_are_bounded_per_task_type(settings: Settings, clock: FakeClock) -> None:
    bounded = settings.model_copy(update={"max_rules_per_task_type": 3})
    async with Client(build_server(bounded, clock)) as client:
        await record(client, clock, task_type="testing", score=0.9, successes=["Rule A."])
        await record(client, clock, task_type="testing", score=0.9, successes=["Rule A!"])  # reinforced: 0.55
        for name in "BCDE":
            await record(client, clock, task_type="testing", score=0.9, successes=[f"Rule {name}."])
        await record(client, clock, task_type="refactor", score=0.9, successes=["Rule F.", "Rule G."])
        await record(client, clock, task_type="testing", score=0.1, mistakes=["Avoid X.", "Avoid Y."])

        active = await lessons_of(client, "rule_works")
        faded = await lessons_of(client, "rule_works", status="faded")
        avoid = await lessons_of(client, "rule_avoid")
        testing = await insights(client, task_type="testing", limit=100)

    # The strongest stay: the reinforced one, then the most recent (they have decayed least).
    assert sorted(r["content"] for r in active if r["task_type"] == "testing") == ["Rule A.", "Rule D.", "Rule E."]
    assert sorted(r["content"] for r in faded) == ["Rule B.", "Rule C."]
    assert [r["status"] for r in faded] == ["faded", "faded"]
    assert sorted(r["content"] for r in active if r["task_type"] == "refactor") == ["Rule F.", "Rule G."]
    assert sorted(r["content"] for r in avoid) == ["Avoid X.", "Avoid Y."]  # bounded per kind
    assert [r["content"] for r in testing["works"]] == ["Rule A.", "Rule E.", "Rule D."]


# -- mistake cards -------------------------------------------------------------------------------


def card(kind: str, correct: str, task: str | None = None, **extra: Any) -> dict[str, Any]:
    result = {"type": kind, "correct_decision": correct, **extra}
    if task is not None:
        result["task"] = task
    return result


async def test_mistake_cards_merge_by_type_task_and_correct_decision(client: Client, clock: FakeClock) -> None:
    first = await record(
        client,
        clock,
        task="Parse the CSV export",
        task_type="bugfix",
        success=False,
        mistake_cards=[card("wrong_tool", "Use the csv module", wrong_decision="split on commas", why="quotes")],
    )
    again = await record(
        client,
        clock,
        task="parse   the csv EXPORT",
        task_type="bugfix",
        success=False,
        mistake_cards=[card("wrong_tool", "use the CSV module", why="quoted fields with commas")],
    )
    (card_id,) = first["derived"]["mistake_cards"]
    assert again["derived"]["mistake_cards"] == [card_id]

    different = await record(
        client,
        clock,
        task="Parse the CSV export",
        task_type="bugfix",
        success=False,
        mistake_cards=[
            card("wrong_tool", "Use pandas.read_csv"),  # another correct decision
            card("skipped_check", "Use the csv module"),  # another type
            card("wrong_tool", "Use the csv module", task="Parse the TSV export"),  # another task
        ],
    )
    assert len(set(different["derived"]["mistake_cards"])) == 3
    assert card_id not in different["derived"]["mistake_cards"]

    cards = (await insights(client))["mistake_cards"]
    merged = cards[0]
    assert merged["id"] == card_id
    assert merged["seen_count"] == 2
    assert merged["type"] == "wrong_tool"
    assert merged["task"] == "Parse the CSV export"  # the task defaults to the outcome's
    assert merged["correct_decision"] == "Use the csv module"
    assert merged["wrong_decision"] == "split on commas"  # kept when the newer sighting gives none
    assert merged["why"] == "quoted fields with commas"  # newer details replace older ones
    assert merged["task_type"] == "bugfix"
    assert merged["last_seen_at"] == "2026-01-05T09:10:00.000000Z"
    assert [c["seen_count"] for c in cards] == [2, 1, 1, 1]


async def test_the_most_seen_mistake_cards_come_first(client: Client, clock: FakeClock) -> None:
    seen = {"rarely": 1, "often": 3, "sometimes": 2}
    for correct, times in seen.items():
        for _ in range(times):
            await record(client, clock, task_type="bugfix", success=False, mistake_cards=[card("habit", correct)])

    cards = (await insights(client))["mistake_cards"]

    assert [(c["correct_decision"], c["seen_count"]) for c in cards] == [("often", 3), ("sometimes", 2), ("rarely", 1)]
    assert [c["correct_decision"] for c in (await insights(client, limit=2))["mistake_cards"]] == ["often", "sometimes"]
    assert (await insights(client, task_type="refactor"))["mistake_cards"] == []


async def test_mistake_cards_are_bounded_dropping_the_least_seen(settings: Settings, clock: FakeClock) -> None:
    bounded = settings.model_copy(update={"max_mistake_cards": 2})
    async with Client(build_server(bounded, clock)) as client:
        for correct in ("first", "first", "second", "third"):
            result = await record(client, clock, task_type="bugfix", success=False, mistake_cards=[card("t", correct)])
        cards = (await insights(client, limit=100))["mistake_cards"]

    # "second" and "third" were each seen once; the more recently seen one stays.
    assert [(c["correct_decision"], c["seen_count"]) for c in cards] == [("first", 2), ("third", 1)]
    assert result["derived"]["mistake_cards"] == [cards[1]["id"]]


async def test_the_rules_and_cards_one_outcome_gives_past_the_bound_keep_the_first_listed(
    settings: Settings, clock: FakeClock
) -> None:
    bounded = settings.model_copy(update={"max_rules_per_task_type": 2, "max_mistake_cards": 2})
    async with Client(build_server(bounded, clock)) as client:
        await record(
            client, clock, task_type="feature", success=True, score=0.9,
            successes=["Use small commits.", "Write the docs early.", "Pair on the tricky parts."],
            mistake_cards=[card("a", "Read the spec."), card("b", "Ask the owner."), card("c", "Pin the version.")],
        )  # fmt: skip
        found = await insights(client, task_type="feature", limit=100)

    # alike in strength and time, they once sorted by the random part of ids made in one millisecond
    assert sorted(r["content"] for r in found["works"]) == ["Use small commits.", "Write the docs early."]
    assert [c["type"] for c in found["mistake_cards"]] == ["a", "b"]


async def test_mistake_cards_merge_past_framing_punctuation_quotes_and_unicode_forms(
    client: Client, clock: FakeClock
) -> None:
    first = await record(
        client, clock, task="Ship the café release.", success=False, mistake_cards=[card("t", "Run the tests first.")]
    )
    variants = [
        ("ship the cafe\u0301 release", '"run the tests first"'),  # decomposed é, quotes, no full stop
        ("Ship  the café release!", "- Run the tests first;"),  # a list bullet, other closing marks
    ]
    for task, correct in variants:
        again = await record(client, clock, task=task, success=False, mistake_cards=[card("t", correct)])
        assert again["derived"]["mistake_cards"] == first["derived"]["mistake_cards"]
    other = await record(
        client, clock, task="Ship the café release", success=False, mistake_cards=[card("t", "Run the tests first?!x")]
    )

    cards = (await insights(client, limit=10))["mistake_cards"]
    assert [(c["correct_decision"], c["seen_count"]) for c in cards] == [
        ("Run the tests first.", 3),
        ("Run the tests first?!x", 1),  # a word, not punctuation, differs
    ]
    assert other["derived"]["mistake_cards"] == [cards[1]["id"]]


async def test_a_card_stored_under_the_older_key_is_found_and_re_keyed(settings: Settings, clock: FakeClock) -> None:
    """Cards keyed by case and whitespace alone (before punctuation was trimmed) are seen again as the
    same card, whichever variant comes first, and keep their id."""
    async with Client(build_server(settings, clock)) as client:
        first = await record(
            client, clock, task="Tidy up", success=False, mistake_cards=[card("t", "Pin the version.")]
        )
        (card_id,) = first["derived"]["mistake_cards"]
    older = hashlib.sha256("\x1f".join(("t", "tidy up", "pin the version.")).encode()).hexdigest()
    async with open_app(settings, clock) as app, app.deps.db.transaction("test", project="test") as tx:
        await MistakeCardRepository(tx).set_key(card_id, older)

    async with Client(build_server(settings, clock)) as client:
        again = await record(client, clock, task="tidy up", success=False, mistake_cards=[card("t", "pin the version")])
        third = await record(
            client, clock, task="Tidy up", success=False, mistake_cards=[card("t", "Pin the version.")]
        )
        cards = (await insights(client, limit=10))["mistake_cards"]

    assert again["derived"]["mistake_cards"] == third["derived"]["mistake_cards"] == [card_id]
    assert [(c["id"], c["seen_count"]) for c in cards] == [(card_id, 3)]


# -- restart -------------------------------------------------------------------------------------


async def test_outcomes_and_what_they_taught_survive_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        for success in (True, True, False):
            await record(first, clock, task_type="refactor", success=success, strategy=STRATEGY)
        pool = {"task": "Fix the pool timeout", "task_type": "bugfix"}
        for error in (ERROR, SIMILAR_ERROR):
            await record(first, clock, **pool, success=False, error=error, mistake_cards=[card("t", "x")])
        await record(first, clock, **pool, score=0.9, strategy="size the pool", successes=["Close it."])
        before = await insights(first)

    async with Client(build_server(settings, clock)) as second:
        after = await insights(second)
        inferred = await record(second, task="Tidy the module layout today", success=True)

    assert after == before
    assert len(after["heuristics"]) == 1
    assert len(after["anti_patterns"]) == 1
    assert after["anti_patterns"][0]["source"]["alternative"] == "size the pool"
    assert [r["content"] for r in after["works"]] == ["Close it."]
    assert [c["seen_count"] for c in after["mistake_cards"]] == [2]
    assert {s["task_type"]: s["outcomes"] for s in after["task_types"]} == {"refactor": 3, "bugfix": 3}
    # A near twin of the typed "Tidy the module layout" outcomes (keywords alone would say general).
    assert (inferred["task_type"], inferred["task_type_inferred"]) == ("refactor", True)


async def test_a_rule_bounded_out_in_the_call_that_made_it_is_not_reported_as_derived(
    settings: Settings, clock: FakeClock
) -> None:
    bounded = settings.model_copy(update={"max_rules_per_task_type": 2})
    async with Client(build_server(bounded, clock)) as client:
        for _ in range(2):
            successes = ["Use blue green deploys", "Run smoke tests after deploy"]
            await record(client, clock, task_type="deployment", success=True, score=0.9, successes=successes)
        third = await record(
            client, clock, task_type="deployment", success=True, score=0.95, successes=["Tag the release commit"]
        )
        rules = await call(client, "memory_lessons", kinds=["rule_works"], status="all")

    status = {rule["content"]: rule["status"] for rule in rules["lessons"]}
    assert status == {"Use blue green deploys": "active", "Run smoke tests after deploy": "active",
                      "Tag the release commit": "faded"}  # fmt: skip
    assert third["derived"]["rules"] == []


@pytest.mark.parametrize("task", ["Handle upload failure gracefully", "Debug the login timeout"])
async def test_failures_and_debugging_are_bugfix_tasks(client: Client, task: str) -> None:
    recorded = await record(client, task=task, success=True)

    assert (recorded["task_type"], recorded["task_type_inferred"]) == ("bugfix", True)


# -- a long history: every outcome that can count is counted --------------------------------------------


async def test_a_heuristic_counts_its_strategy_however_many_outcomes_came_between(
    client: Client, clock: FakeClock
) -> None:
    strategy = "bisect the commit history to find the regression"
    for i in range(3):
        await record(client, clock, task=f"bug {i}", task_type="bugfix", success=True, strategy=strategy)
    for i in range(210):  # outcomes of the type naming another strategy, or none
        other = "read the logs" if i % 2 else None
        await record(client, clock, task=f"bug x{i}", task_type="bugfix", success=True, strategy=other)
    await record(client, clock, task="bug y", task_type="bugfix", success=False, strategy=strategy)

    [heuristic] = [h for h in await lessons_of(client, "heuristic", "all") if "bisect" in h["content"]]

    assert (heuristic["status"], heuristic["confidence"]) == ("active", 0.75)
    assert heuristic["context"] == "Worked in 3 of 4 attempts with a similar strategy."


async def test_a_failure_recurring_after_many_others_makes_an_anti_pattern(client: Client, clock: FakeClock) -> None:
    await record(client, clock, task_type="deployment", success=False, error=ERROR)
    for i in range(210):
        await record(client, clock, task=f"deploy {i}", task_type="deployment", success=True, strategy="blue green")
    second = await record(client, clock, task_type="deployment", success=False, error=ERROR)

    assert len(second["derived"]["anti_patterns"]) == 1
    [anti] = await lessons_of(client, "anti_pattern")
    assert anti["source"]["failures"] == 2


async def test_a_rule_said_by_several_outcomes_goes_only_with_the_last_of_them(
    client: Client, clock: FakeClock
) -> None:
    said = "Run the smoke suite before switching traffic"
    ids = [
        (await record(client, clock, task_type="deployment", success=True, score=0.95, successes=[said]))["id"]
        for _ in range(3)
    ]
    [rule] = await lessons_of(client, "rule_works")

    newest = await call(client, "memory_forget", ids=[ids[2]])
    kept = [r["id"] for r in await lessons_of(client, "rule_works")]
    rest = await call(client, "memory_forget", ids=ids[:2])

    assert "lesson" not in newest["deleted"]
    assert kept == [rule["id"]]
    assert rest["deleted"]["lesson"] == [rule["id"]]
    assert await lessons_of(client, "rule_works", "all") == []
