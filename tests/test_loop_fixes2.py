"""The knowledge loop tells what a session kept: the session_end prompt files outcomes under the
session, a forgotten outcome leaves no summary quoting it, a summary's span runs earliest to latest,
consolidation's summaries follow its folds, and reflect's inputs are bounded and never half applied."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error
from tests.test_context_fixes import prompt_text
from tests.test_tools_loop import ScriptedModel


async def _summary(client: Client, session_id: str) -> str | None:
    listed = await call(client, "memory_sessions", status="all")
    [summary] = [s["summary"] for s in listed["sessions"] if s["id"] == session_id]
    return summary


async def test_the_session_end_prompt_files_outcomes_under_the_session(client: Client) -> None:
    await call(client, "memory_observe", content="Set up the migrations.", session_id="conv-1")

    text = await prompt_text(client, "session_end", {"session_id": "conv-1"})

    assert 'call memory_outcome_record(session_id="conv-1") with: task' in text


async def test_the_session_end_prompt_finds_the_session_of_the_agent_it_names(client: Client) -> None:
    observed = await call(client, "memory_observe", content="Set up the migrations.", agent_id="claude-code")

    named = await prompt_text(client, "session_end", {"agent_id": "claude-code"})
    unnamed = await prompt_text(client, "session_end", {})

    assert f'call memory_outcome_record(session_id="{observed["session_id"]}") with: task' in named
    assert "call memory_outcome_record with: task" in unnamed  # the server's own agent has no session open


async def test_a_forgotten_outcome_leaves_no_summary_quoting_it(client: Client, clock: FakeClock) -> None:
    await call(
        client, "memory_observe", content="Rotated the payroll API credentials", type="decision", session_id="s1"
    )
    outcome = await call(
        client, "memory_outcome_record", task="Rotate credentials for ACME payroll", success=True, session_id="s1"
    )
    await call(client, "memory_observe", content="Done for today.", session_id="s1", end_session=True)
    await call(client, "memory_crystallize", session_id="s1")
    before = await _summary(client, "s1")

    await call(client, "memory_forget", ids=[outcome["id"]])
    dropped = await _summary(client, "s1")
    found = await call(client, "memory_recall", query="ACME")
    clock.advance(minutes=1)
    rewritten = await call(client, "memory_crystallize", session_id="s1")

    assert before is not None
    assert "ACME payroll" in before
    assert dropped is None
    assert found["hits"] == []
    assert "ACME" not in rewritten["sessions"][0]["summary"]


async def test_a_summary_spans_the_earliest_to_the_latest_turn(client: Client) -> None:
    for text, at in [
        ("Deployed the billing service.", "2025-12-01T15:00:00Z"),
        ("Started the deploy.", "2025-12-01T14:00:00Z"),
    ]:
        await call(client, "memory_observe", content=text, occurred_at=at, session_id="imp")

    made = await call(client, "memory_crystallize", session_id="imp")

    assert "2 observations, 2025-12-01 14:00 to 2025-12-01 15:00." in made["sessions"][0]["summary"]


async def test_consolidation_writes_a_folded_sessions_summary_from_what_it_keeps(
    tmp_path: Path, clock: FakeClock
) -> None:
    settings = Settings(db=tmp_path / "m.db", project="test", synchronous="normal", timezone="UTC", observation_cap=20)
    async with Client(build_server(settings, clock)) as client:
        for i in range(20):
            last = i == 19
            await call(client, "memory_observe", content=f"Migrated table t{i}.", session_id="big", end_session=last)
            clock.advance(seconds=30)
        await call(client, "memory_crystallize", session_id="big")
    async with Client(build_server(settings.model_copy(update={"observation_cap": 10}), clock)) as client:
        first = await call(client, "memory_consolidate")
        summary = await _summary(client, "big")
        second = await call(client, "memory_consolidate")

    actions = [(c["kind"], c["action"]) for c in first["changes"]]
    assert actions.count(("observation", "folded")) == 10
    assert ("session", "crystallized") in actions
    assert summary is not None
    assert summary.split(" — ", 1)[-1].startswith("10 observations,")
    assert second["changes"] == []


async def test_reflect_refuses_a_session_with_a_window_it_would_not_apply(client: Client) -> None:
    await call(client, "memory_observe", content="An error: the build failed.", type="error", session_id="s1")

    refused = await call_error(client, "memory_reflect", session_id="s1", since="2026-01-08")

    assert "since: give session_id or a window (since, until), not both" in refused


async def test_the_reflect_prompt_cuts_long_strategies(tmp_path: Path, clock: FakeClock) -> None:
    settings = Settings(db=tmp_path / "m.db", project="test", synchronous="normal", timezone="UTC")
    model = ScriptedModel("Use canary checks.")
    async with Client(build_server(settings, clock), sampling_callback=model, mode="legacy") as client:
        for i in range(5):
            strategy = f"Roll out build {i} blue-green " + "with canary checks in every region " * 50
            await call(client, "memory_outcome_record", task=f"Deploy build {i}", success=True, strategy=strategy)
        await call(client, "memory_reflect")

    prompt = model.prompt()
    assert "(strategy: Roll out build 0 blue-green with canary checks" in prompt
    assert len(prompt) < 2_500


async def test_a_fact_a_memory_already_says_is_not_promoted_over_it(client: Client, clock: FakeClock) -> None:
    fact = "The staging cluster uses three replicas behind nginx"
    mine = await call(
        client, "memory_save", content=fact, kind="decision", importance=0.9,
        title="Staging infrastructure overview for the operations team",
        concepts=["kubernetes", "infrastructure", "operations", "load-balancing", "topology"],
    )  # fmt: skip
    for name in "abc":
        await call(client, "memory_observe", content="Checked staging.", facts=[fact], session_id=f"s-{name}")
        await call(client, "memory_observe", content="Done.", session_id=f"s-{name}", end_session=True)
        clock.advance(minutes=10)

    dry = await call(client, "memory_consolidate", dry_run=True)
    done = await call(client, "memory_consolidate")
    kept = await call(client, "memory_get", id=mine["id"])

    # Promoted, the same content became a new version of the caller's decision, as a plain fact
    assert [c for c in dry["changes"] + done["changes"] if c["action"] == "promoted"] == []
    assert [v["id"] for v in kept["versions"]] == [mine["id"]]
    assert (kept["memory"]["kind"], kept["memory"]["importance"]) == ("decision", 0.9)


async def test_a_session_whose_turns_over_the_cap_are_all_kept_is_not_folded_again_and_again(
    tmp_path: Path, clock: FakeClock
) -> None:
    settings = Settings(db=tmp_path / "m.db", project="test", synchronous="normal", timezone="UTC")
    async with Client(build_server(settings.model_copy(update={"observation_cap": 20}), clock)) as client:
        memory = await call(client, "memory_save", content="The release checklist.")
        for i in range(20):
            step = await call(client, "memory_observe", content=f"Step {i} of the release is done.", session_id="big")
            await call(client, "memory_relate", source_id=memory["id"], target_id=step["id"], type="related")
    async with Client(build_server(settings.model_copy(update={"observation_cap": 10}), clock)) as client:
        first = await call(client, "memory_consolidate")
        audited = (await call(client, "memory_diagnose"))["counts"]["audit_log"]
        second = await call(client, "memory_consolidate")
        again = (await call(client, "memory_diagnose"))["counts"]["audit_log"]

    # every turn is a relation's target, so none folds: each pass once wrote a fold of nothing
    assert [c for c in first["changes"] + second["changes"] if c["action"] == "folded"] == []
    assert again == audited
