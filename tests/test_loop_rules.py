"""The knowledge loop's rules at their edges: reflect reviews a whole window, a summary is stale once an
outcome joins its session, and memories flagged as contradicting are never merged as duplicates."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_merge_chains import import_memories, text
from tests.test_tools_operations import export_document, fresh_settings

MISSING_YAML = "ModuleNotFoundError: No module named 'yaml' when running pytest"


# -- reflect over a time window ----------------------------------------------------------------------


async def test_reflect_reviews_every_observation_of_a_window_however_many(client: Client, clock: FakeClock) -> None:
    # 5,010 notes of a busy session, then the error recurring in another: a reflection that read a
    # window's first 5,000 observations only never saw it.
    await call(client, "memory_observe", content="Routine note on the widget pipeline", session_id="busy")
    document = (await call(client, "memory_export"))["document"]
    [note] = document["tables"]["observations"]
    rows = [note | {"id": f"obs_{n:022d}", "seq": n, "title": f"Routine note {n}", "content": f"Routine note {n}"}
            for n in range(2, 5_011)]  # fmt: skip
    document["tables"]["observations"] += rows
    await call(client, "memory_import", document=document)
    clock.advance(minutes=5)
    for _ in range(3):
        await call(client, "memory_observe", content=MISSING_YAML, type="error", session_id="long")
        clock.advance(seconds=1)

    found = await call(client, "memory_reflect")

    [anti] = found["anti_patterns"]
    assert anti["content"] == f"Recurring error: {MISSING_YAML}"
    assert found["insights"][:2] == [
        "5013 observations and 0 outcomes reviewed.",
        "3 errors recorded; 1 recurring one became an anti-pattern.",
    ]


# -- session summaries and outcomes --------------------------------------------------------------------


async def test_a_summary_written_before_an_outcome_of_its_session_is_written_again(
    client: Client, clock: FakeClock
) -> None:
    await call(client, "memory_observe", content="Decided to move the session store to SQLite.", type="decision",
               session_id="s1", end_session=True)  # fmt: skip
    clock.advance(minutes=1)
    first = await call(client, "memory_consolidate")
    clock.advance(minutes=1)
    await call(client, "memory_outcome_record", task="Move the session store to SQLite", success=False,
               error="database is locked", session_id="s1")  # fmt: skip
    clock.advance(minutes=1)

    dry = await call(client, "memory_consolidate", dry_run=True)
    real = await call(client, "memory_consolidate")
    [view] = (await call(client, "memory_crystallize", session_id="s1"))["sessions"]

    crystallized = [("session", "crystallized", "s1")]
    assert [(c["kind"], c["action"], c["id"]) for c in first["changes"]] == crystallized
    assert [(c["kind"], c["action"], c["id"]) for c in dry["changes"]] == crystallized
    assert [(c["kind"], c["action"], c["id"]) for c in real["changes"]] == crystallized
    assert view["changed"] is False  # the pass wrote it with the outcome: current now
    assert view["summary"].splitlines()[-1] == "Outcome: Move the session store to SQLite failed (score 0.00)"


async def test_crystallizing_one_session_again_takes_in_an_outcome_recorded_since(
    client: Client, clock: FakeClock
) -> None:
    await call(client, "memory_observe", content="Decided to use SQLite WAL.", type="decision", session_id="s1")
    clock.advance(minutes=1)
    [before] = (await call(client, "memory_crystallize", session_id="s1"))["sessions"]
    clock.advance(minutes=1)
    await call(client, "memory_outcome_record", task="Move storage to SQLite", success=True, session_id="s1")
    clock.advance(minutes=1)

    [after] = (await call(client, "memory_crystallize", session_id="s1"))["sessions"]
    [again] = (await call(client, "memory_crystallize", session_id="s1"))["sessions"]

    assert "Outcome" not in before["summary"]
    assert after["changed"] is True
    assert after["summary"].splitlines()[-1] == "Outcome: Move storage to SQLite succeeded (score 1.00)"
    assert (again["changed"], again["summary"]) == (False, after["summary"])


async def test_a_summary_is_written_again_when_an_import_adds_to_its_session(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    decide = "Decided to shard the queue by tenant."
    await call(client, "memory_observe", content=decide, type="decision", session_id="conv")
    async with Client(build_server(fresh_settings(tmp_path, "other"), clock)) as other:
        await call(other, "memory_import", document=await export_document(client))
        clock.advance(minutes=1)  # the other machine goes on in the same conversation
        await call(other, "memory_observe", content="Decided to drop the legacy cron runner.", type="decision",
                   session_id="conv")  # fmt: skip
        theirs = await export_document(other)
    clock.advance(minutes=1)
    await call(client, "memory_observe", content="Wrapping up.", session_id="conv", end_session=True)
    clock.advance(minutes=1)
    [before] = (await call(client, "memory_crystallize", session_id="conv"))["sessions"]
    clock.advance(minutes=1)

    await call(client, "memory_import", document=theirs)  # its turn was made before this summary
    [after] = (await call(client, "memory_crystallize", session_id="conv"))["sessions"]
    again = await call(client, "memory_import", document=theirs)

    assert "legacy cron runner" not in before["summary"]
    assert after["changed"] is False  # already written again by the import
    assert after["summary"].startswith("3 observations,")
    assert "- Decided to drop the legacy cron runner." in after["summary"]
    assert again["inserted"] == {} or not any(again["inserted"].values())
    [still] = (await call(client, "memory_crystallize", session_id="conv"))["sessions"]
    assert still["summary"] == after["summary"]


# -- near-duplicates that contradict each other -------------------------------------------------------


async def latest_of(client: Client, memory_id: str) -> str:
    return str((await call(client, "memory_get", id=memory_id))["latest_id"])


async def test_consolidate_does_not_merge_two_alike_memories_linked_as_contradicting(
    client: Client, clock: FakeClock
) -> None:
    older, newer = await import_memories(client, [text(), text(0)])
    # Either way round: this one from the newer to the older, the way reflect never links them.
    await call(client, "memory_relate", source_id=newer, target_id=older, type="contradicts")
    clock.advance(minutes=10)

    dry = await call(client, "memory_consolidate", dry_run=True)
    real = await call(client, "memory_consolidate")

    assert dry["changes"] == real["changes"] == []
    assert [await latest_of(client, m) for m in (older, newer)] == [older, newer]
    related = await call(client, "memory_related", id=older)
    assert [(n["id"], n["via"]) for n in related["nodes"]] == [(newer, "contradicts")]


async def test_a_third_alike_memory_merges_with_one_of_two_contradicting_ones_never_joining_them(
    client: Client, clock: FakeClock
) -> None:
    # Alone, a merges into b and b into c: one chain of three (tests/test_merge_chains.py).
    a, b, c = await import_memories(client, [text(), text(0), text(1)])
    await call(client, "memory_relate", source_id=a, target_id=c, type="contradicts")
    clock.advance(minutes=10)

    report = await call(client, "memory_consolidate")
    again = await call(client, "memory_consolidate")

    assert [(ch["action"], ch["id"]) for ch in report["changes"]] == [("merged", a)]
    assert [await latest_of(client, m) for m in (a, b, c)] == [b, b, c]
    assert again["changes"] == []


# -- what consolidate reports -----------------------------------------------------------------------------


async def test_consolidate_reports_the_idle_sessions_it_ends_in_a_dry_run_too(client: Client, clock: FakeClock) -> None:
    await call(client, "memory_observe", content="Decided to shard the queue by tenant.", type="decision",
               session_id="conv")  # fmt: skip
    await call(client, "memory_crystallize", session_id="conv")
    clock.advance(hours=3)

    dry = await call(client, "memory_consolidate", dry_run=True)
    before = (await call(client, "memory_sessions", status="all"))["sessions"]
    real = await call(client, "memory_consolidate")
    after = (await call(client, "memory_sessions", status="all"))["sessions"]

    ended = [{"kind": "session", "action": "ended", "id": "conv", "detail": "idle past 120 minutes"}]
    assert dry["changes"] == real["changes"] == ended
    assert real["counts"] == {"ended": 1}
    assert [(s["id"], s["status"]) for s in before] == [("conv", "idle")]
    assert [(s["id"], s["status"]) for s in after] == [("conv", "ended")]


# -- what a summary leaves out -------------------------------------------------------------------------

THINGS = ["redis", "postgres", "kafka", "nginx", "celery", "webpack", "docker", "terraform", "grafana"]


async def test_a_summary_counts_the_errors_it_leaves_out_and_lists_no_fix_of_theirs(
    client: Client, clock: FakeClock
) -> None:
    for thing in THINGS:
        await call(client, "memory_observe", content=f"The {thing} container failed to start: {thing} config invalid",
                   type="error", session_id="s")  # fmt: skip
        clock.advance(minutes=1)
        await call(client, "memory_observe", content=f"Fixed the {thing} config; {thing} starts again", type="fix",
                   session_id="s")  # fmt: skip
        clock.advance(minutes=1)
    await call(client, "memory_observe", content="The grafana container failed to start again: port taken",
               type="error", session_id="s")  # fmt: skip

    [view] = (await call(client, "memory_crystallize", session_id="s"))["sessions"]

    lines = view["summary"].splitlines()
    errors = lines[
        lines.index("Errors and fixes:") + 1 : next(n for n, ln in enumerate(lines) if ln.startswith("Concepts:"))
    ]
    assert errors[:6] == [
        f"- The {t} container failed to start: {t} config invalid -> fixed: Fixed the {t} config; {t} starts again"
        for t in THINGS[:6]
    ]
    assert errors[6:] == ["- … and 4 more errors (3 fixed)"]


async def test_a_summary_counts_the_decisions_it_leaves_out(client: Client) -> None:
    for n in range(10):
        await call(client, "memory_observe", content=f"Decided on option {n} for shard {n}.", type="decision",
                   session_id="s")  # fmt: skip

    [view] = (await call(client, "memory_crystallize", session_id="s"))["sessions"]

    lines = view["summary"].splitlines()
    start = lines.index("Decisions:") + 1
    assert lines[start : start + 9] == [f"- Decided on option {n} for shard {n}." for n in range(8)] + [
        "- … and 2 more decisions"
    ]
