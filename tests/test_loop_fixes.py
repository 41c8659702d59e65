"""Consolidation keeps a conclusion for the evidence it prunes; reflection and the context describe what is there."""

from __future__ import annotations

from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

BISECT = "reproduce locally then bisect the failing commit"


async def bugfix_wins(client: Client, n: int = 3) -> list[str]:
    return [
        (
            await call(
                client,
                "memory_outcome_record",
                task=f"Fix flaky test {k}",
                task_type="bugfix",
                success=True,
                strategy=BISECT,
            )
        )["id"]
        for k in range(n)
    ]


def actions(report: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return sorted((c["kind"], c["action"], c["id"]) for c in report["changes"])


# -- consolidation: pruning and dropping ---------------------------------------------------------------


async def test_a_pass_that_prunes_outcomes_keeps_the_heuristic_that_stands_for_them(
    client: Client, clock: FakeClock
) -> None:
    old = await bugfix_wins(client)
    [heuristic] = (await call(client, "memory_insights", task_type="bugfix"))["heuristics"]
    assert heuristic["confidence"] == 1.0
    clock.advance(days=200)

    dry = await call(client, "memory_consolidate", dry_run=True)
    real = await call(client, "memory_consolidate")

    # Time decayed it, but its evidence (3 of 3 succeeded) still holds: it is not dropped, so it may stand in.
    expected = sorted([("lesson", "decayed", heuristic["id"])] + [("outcome", "pruned", i) for i in old])
    assert actions(dry) == actions(real) == expected
    assert real["counts"] == {"decayed": 1, "pruned": 3}
    assert {c["detail"] for c in real["changes"] if c["action"] == "pruned"} == {
        f"its task type has a heuristic that holds; counted in {heuristic['id']}"
    }
    [kept] = (await call(client, "memory_insights", task_type="bugfix"))["heuristics"]
    assert (kept["id"], kept["status"], kept["confidence"]) == (heuristic["id"], "active", 0.231)
    # What the pruned outcomes showed lives on in the heuristic's tally.
    assert kept["source"] == {
        "strategy": BISECT, "outcomes": 0, "successes": 0, "pruned_outcomes": 3, "pruned_successes": 3
    }  # fmt: skip
    assert (await call(client, "memory_consolidate"))["changes"] == []


async def test_a_failure_after_a_prune_is_weighed_against_the_pruned_evidence(client: Client, clock: FakeClock) -> None:
    await bugfix_wins(client)
    clock.advance(days=200)
    await call(client, "memory_consolidate")

    failed = await call(
        client, "memory_outcome_record", task="Fix flaky test 9", task_type="bugfix", success=False, strategy=BISECT
    )

    assert failed["derived"]["heuristics"]  # 3 pruned wins and 1 new loss: it still holds
    [kept] = (await call(client, "memory_insights", task_type="bugfix"))["heuristics"]
    assert (kept["status"], kept["confidence"]) == ("active", 0.75)
    assert "Worked in 3 of 4 attempts" in kept["context"]


async def test_outcomes_are_kept_when_their_heuristic_is_dropped_in_the_same_pass(
    settings: Settings, clock: FakeClock
) -> None:
    # Reflection draws a heuristic from steps that succeeded in 2 of the 3 outcomes that took them;
    # the pass runs with a success bar it no longer clears (0.667 <= 0.7).
    async with Client(build_server(settings.model_copy(update={"outcome_retention_days": 30}), clock)) as client:
        runs = [(["bump", "test", "tag"], True), (["bump", "test", "tag"], True), (["bump", "test", "tag"], False)]
        released = [
            (await call(client, "memory_outcome_record", task="Ship it", task_type="release", success=ok, steps=steps))[
                "id"
            ]
            for steps, ok in runs
        ]
        [heuristic] = (await call(client, "memory_reflect"))["heuristics"]
        assert heuristic["confidence"] == 0.6667
        clock.advance(days=40)
    stricter = settings.model_copy(update={"outcome_retention_days": 30, "heuristic_min_success": 0.7})
    async with Client(build_server(stricter, clock)) as client:
        report = await call(client, "memory_consolidate")

        assert actions(report) == [("lesson", "decayed", heuristic["id"]), ("lesson", "dropped", heuristic["id"])]
        [stats] = (await call(client, "memory_insights", task_type="release"))["task_types"]
        assert [p["outcome_id"] for p in stats["history"]] == released  # the evidence is all still there


async def test_a_reflected_heuristic_that_holds_survives_its_decay(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings.model_copy(update={"outcome_retention_days": 30}), clock)) as client:
        for _ in range(2):
            await call(
                client, "memory_outcome_record", task="Ship", task_type="release", success=True, steps=["bump", "tag"]
            )
        [heuristic] = (await call(client, "memory_reflect"))["heuristics"]
        assert heuristic["confidence"] == 1.0
        clock.advance(days=120)  # 1.0 decays to 0.48, below the 0.5 a new heuristic needs

        report = await call(client, "memory_consolidate")

        assert ("lesson", "dropped", heuristic["id"]) not in actions(report)
        assert [c["action"] for c in report["changes"]].count("pruned") == 2
        [kept] = (await call(client, "memory_insights", task_type="release"))["heuristics"]
        assert kept["id"] == heuristic["id"]


async def test_a_dry_run_does_not_name_a_memory_it_would_promote(client: Client) -> None:
    fact = "The staging database listens on port 6432"
    for n in range(3):
        await call(client, "memory_observe", content=f"Checked staging {n}", facts=[fact], session_id=f"s{n}")

    dry = await call(client, "memory_consolidate", dry_run=True)
    real = await call(client, "memory_consolidate")

    [would] = [c for c in dry["changes"] if c["action"] == "promoted"]
    [did] = [c for c in real["changes"] if c["action"] == "promoted"]
    assert would["id"] is None  # never assigned: the rolled-back pass's id would name nothing
    assert would["detail"] == did["detail"] == f"seen in 3 sessions: {fact}"
    assert (await call(client, "memory_get", id=did["id"]))["memory"]["content"] == fact


# -- reflection and the profile ------------------------------------------------------------------------


async def reflection_evidence(client: Client) -> None:
    for session in ("conv-1", "conv-2"):
        await call(
            client, "memory_observe", content="pytest failed: numpy ABI mismatch", type="error", session_id=session
        )
    await call(client, "memory_save", content="Caching is enabled for the product catalog endpoint")
    await call(client, "memory_save", content="Caching is disabled for the product catalog endpoint in staging")


async def test_reflecting_again_on_the_same_evidence_leaves_the_profile_as_it_was(
    client: Client, clock: FakeClock
) -> None:
    await reflection_evidence(client)
    first = await call(client, "memory_reflect")
    profile = await call(client, "memory_profile")
    clock.advance(minutes=30)

    again = await call(client, "memory_reflect")

    insights = [
        "2 observations and 0 outcomes reviewed.",
        "2 errors recorded; 1 recurring one became an anti-pattern.",
        "1 pair of memories looks contradictory; check them with memory_related.",
    ]
    assert (len(first["anti_patterns"]), len(first["contradictions"])) == (1, 1)
    assert (again["anti_patterns"], again["contradictions"]) == ([], [])  # nothing new was learned
    assert first["insights"] == again["insights"] == insights  # but the evidence still shows the same
    assert await call(client, "memory_profile") == profile  # not even reflected_at moved
    assert profile["insights"] == insights

    clock.advance(days=8)  # the evidence has left the default window: nothing to review
    assert (await call(client, "memory_reflect"))["insights"] == ["0 observations and 0 outcomes reviewed."]
    assert await call(client, "memory_profile") == profile  # an empty reflection does not blank the profile


async def test_reflecting_on_one_session_keeps_the_projects_insights(client: Client, clock: FakeClock) -> None:
    await reflection_evidence(client)
    project_wide = await call(client, "memory_reflect")
    clock.advance(minutes=5)

    session = await call(client, "memory_reflect", session_id="conv-1")

    assert session["insights"][0] == "1 observation and 0 outcomes reviewed."
    profile = await call(client, "memory_profile")
    assert profile["insights"] == project_wide["insights"]
    assert profile["reflected_at"] == "2026-01-05T09:00:00.000000Z"


# -- the context ---------------------------------------------------------------------------------------


async def lesson(client: Client, content: str, **extra: Any) -> str:
    return (await call(client, "memory_lesson_save", content=content, **extra))["lesson"]["id"]


async def test_a_task_type_ranks_lessons_first_without_hiding_the_rest(client: Client) -> None:
    deploy = await lesson(client, "Tag the release before building.", task_type="deployment", confidence=0.3)
    general = await lesson(client, "Read the whole error message.", confidence=0.5)
    testing = await lesson(client, "Run the slow tests nightly.", task_type="testing", confidence=0.9)
    bugfix = await lesson(client, "Bisect before guessing.", task_type="bugfix", confidence=0.95)

    focused = (await call(client, "memory_context", task_type="deployment"))["text"]
    unknown = (await call(client, "memory_context", task_type="no_such_type"))["text"]

    # Its own first, then what applies to any task, then the best of the other task types.
    assert focused.index(deploy) < focused.index(general) < focused.index(bugfix) < focused.index(testing)
    assert unknown.index(general) < unknown.index(bugfix) < unknown.index(testing) < unknown.index(deploy)


async def test_a_task_type_ranks_mistake_cards_first_without_hiding_the_rest(client: Client) -> None:
    card = {"type": "process", "correct_decision": "refresh the AWS credentials first"}
    for _ in range(2):
        await call(
            client, "memory_outcome_record", task="Deploy", task_type="deployment", success=False, mistake_cards=[card]
        )
    await call(
        client,
        "memory_outcome_record",
        task="Fix the import",
        task_type="bugfix",
        success=False,
        mistake_cards=[{"type": "slip", "correct_decision": "read the traceback to the end"}],
    )

    def cards(result: dict[str, Any]) -> list[str]:
        text = result["text"]
        section = text[text.index("## Mistakes to avoid") :].split("\n\n")[0]
        return [line.split(": do ")[1] for line in section.splitlines()[1:]]

    plain = await call(client, "memory_context")
    bugfix = await call(client, "memory_context", task_type="bugfix")
    unknown = await call(client, "memory_context", task_type="no_such_type")

    assert cards(plain) == cards(unknown) == ["refresh the AWS credentials first", "read the traceback to the end"]
    assert cards(bugfix) == ["read the traceback to the end", "refresh the AWS credentials first"]


async def test_a_left_out_session_is_fetched_by_the_name_its_caller_knows(client: Client) -> None:
    await call(client, "memory_observe", content="alpha work on main", session_id="main", project="alpha")
    await call(client, "memory_observe", content="beta work on the main branch", session_id="main", project="beta")
    await call(client, "memory_slot_create", name="notes", content="n " * 700, pinned=True, project="beta")

    whole = await call(client, "memory_context", project="beta", budget=100_000)
    assert whole["sections"][-1]["name"] == "sessions"

    compiled = await call(client, "memory_context", project="beta", budget=whole["tokens"] - 1)

    [left] = [o for o in compiled["omitted"] if o["section"] == "sessions"]
    assert left["id"] == "main"
    assert compiled["fetch"] is not None
    assert '"main"' in compiled["fetch"]
    assert 'project="beta"' in compiled["fetch"]
    fetched = await call(client, "memory_smart_search", ids=["main"], project="beta")
    assert [s["id"] for s in fetched["sessions"]] == ["main"]
    assert fetched["sessions"][0]["title"] == "beta work on the main branch"


async def test_the_budget_description_names_the_setting_not_a_number(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    budget = tools["memory_context"].input_schema["properties"]["budget"]
    assert budget["description"] == "Token budget (default: the server's --context-budget)."


# -- consolidation: the read-ahead for recurring facts ---------------------------------------------------

STAGING = "The staging database runs on host db-staging-02."


async def test_a_fact_found_recurring_before_the_pass_is_checked_again_inside_it(
    settings: Settings, clock: FakeClock
) -> None:
    async with open_app(settings, clock) as app:
        seen = [
            (await app.episodic.observe("test", f"Deploy notes {n}.", facts=[STAGING], session_id=f"s{n}")).id
            for n in range(3)
        ]
        await app.episodic.observe("test", "Unrelated.", facts=["The linter runs before every commit."])
        found = await app.consolidation._recurring_observations("test")
        # a sighting forgotten between the read-ahead and the pass: two sessions are not enough
        await app.forget.forget(
            "test", ids=[seen[0]], kind=None, session_id=None, since=None, until=None, dry_run=False
        )
        async with app.deps.db.transaction("check") as tx:
            after_forgetting = await app.consolidation._promote_facts(tx, "test", found)
        await app.episodic.observe("test", "Deploy notes again.", facts=[STAGING.lower()], session_id="s9")
        report = await app.consolidation.consolidate("test")

    assert found == seen
    assert after_forgetting == []
    assert [(c.action, c.detail) for c in report.changes] == [("promoted", f"seen in 3 sessions: {STAGING}")]


async def test_two_nearly_equal_recurring_facts_are_promoted_once_and_the_next_pass_is_a_no_op(
    client: Client,
) -> None:
    short = "The api server listens on port 8080 behind nginx."
    longer = "The api server listens on port 8080 behind the nginx proxy."
    for n in range(6):
        fact = short if n < 3 else longer
        await call(client, "memory_observe", content=f"Session {n} notes.", facts=[fact], session_id=f"s{n}")
    first = await call(client, "memory_consolidate")
    second = await call(client, "memory_consolidate")

    promoted = [c for c in first["changes"] if c["action"] == "promoted"]
    assert [c["detail"] for c in promoted] == [f"seen in 3 sessions: {short}"]
    assert second["changes"] == []


async def test_a_promoted_fact_a_newer_version_corrected_is_not_promoted_again(client: Client) -> None:
    fact = "The worker queue uses rabbitmq with three replicas."
    for n in range(3):
        await call(client, "memory_observe", content=f"Queue notes {n}.", facts=[fact], session_id=f"q{n}")
    promoted = [c["id"] for c in (await call(client, "memory_consolidate"))["changes"] if c["action"] == "promoted"]
    correction = "We migrated the job system to kafka; rabbitmq is gone."
    await call(client, "memory_save", content=correction, supersedes=promoted[0])

    again = await call(client, "memory_consolidate")
    found = await call(client, "memory_smart_search", query="rabbitmq", kinds=["memory"])

    assert [c for c in again["changes"] if c["action"] == "promoted"] == []
    assert [h["snippet"] for h in found["hits"]] == [correction]


async def test_a_restricted_callers_pass_leaves_the_read_only_global_lessons_alone(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        shared = await call(client, "memory_lesson_save", content="Pin dependency versions.", scope="global")
        own = await call(client, "memory_lesson_save", content="Run the linter before pushing.")
    clock.advance(days=400)  # both fade unless reinforced

    async with Client(build_server(settings.model_copy(update={"isolated": True}), clock)) as client:
        restricted = await call(client, "memory_consolidate")
    async with Client(build_server(settings, clock)) as client:
        unrestricted = await call(client, "memory_consolidate")

    assert [(c["action"], c["id"]) for c in restricted["changes"]] == [("faded", own["lesson"]["id"])]
    assert [(c["action"], c["id"]) for c in unrestricted["changes"]] == [("faded", shared["lesson"]["id"])]
