"""Lesson tools through the real server: save and reinforce, decay and fade, recall and list."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_memory.clock import epoch_us, from_iso
from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

DECAY = 0.95  # 1 - the default lesson_decay_per_week (0.05)

# Unrelated lessons so that query words are rare in the project and their BM25 idf is positive.
FILLER = [
    "Keep the changelog entry short and link the pull request.",
    "Pin Docker base images by digest so that builds are reproducible.",
    "Prefer small commits with a message that explains why.",
    "Document every public function with a one-line docstring.",
    "Check the staging dashboard after every deployment.",
    "Ask the user before deleting generated files in the workspace.",
]


def reinforce(confidence: float) -> float:
    return confidence + 0.1 * (1 - confidence)


def approx(value: float) -> Any:
    # Views round confidences to 4 decimals.
    return pytest.approx(value, abs=5e-5)


async def save(client: Client, content: str, **extra: Any) -> dict[str, Any]:
    return await call(client, "memory_lesson_save", content=content, **extra)


async def listed(client: Client, **extra: Any) -> list[dict[str, Any]]:
    return (await call(client, "memory_lessons", limit=100, **extra))["lessons"]


async def recall(client: Client, query: str | None = None, **extra: Any) -> list[dict[str, Any]]:
    args = dict(extra)
    if query is not None:
        args["query"] = query
    return (await call(client, "memory_lesson_recall", **args))["lessons"]


# -- save and reinforce ------------------------------------------------------------------------


async def test_a_new_lesson_starts_at_the_default_confidence(client: Client, clock: FakeClock) -> None:
    saved = await save(
        client,
        "Run the migrations before the integration tests.",
        context="Learned when CI failed on a fresh database.",
        tags=["CI", " database "],
        task_type="testing",
    )

    assert saved["created"] is True
    assert saved["restored"] is False
    assert saved["previous_confidence"] is None
    lesson = saved["lesson"]
    assert lesson["id"].startswith("les_")
    assert lesson["kind"] == "lesson"
    assert lesson["scope"] == "project"
    assert lesson["content"] == "Run the migrations before the integration tests."
    assert lesson["context"] == "Learned when CI failed on a fresh database."
    assert lesson["tags"] == ["ci", "database"]
    assert lesson["task_type"] == "testing"
    assert lesson["confidence"] == 0.5
    assert lesson["reinforcements"] == 0
    assert lesson["status"] == "active"
    assert lesson["last_reinforced_at"] == lesson["created_at"] == "2026-01-05T09:00:00.000000Z"


async def test_saving_the_same_lesson_again_reinforces_it(client: Client, clock: FakeClock) -> None:
    content = "Read the error message to the end before changing code."
    first = await save(client, content)
    expected = 0.5
    for n in range(1, 5):
        clock.advance(minutes=5)
        again = await save(client, content)
        assert again["created"] is False
        assert again["restored"] is False
        assert again["lesson"]["id"] == first["lesson"]["id"]
        assert again["previous_confidence"] == approx(expected * DECAY ** (5 / (60 * 24 * 7)))
        expected = reinforce(expected * DECAY ** (5 / (60 * 24 * 7)))
        assert again["lesson"]["confidence"] == approx(expected)
        assert again["lesson"]["reinforcements"] == n
        assert again["lesson"]["last_reinforced_at"] == clock.now.strftime("%Y-%m-%dT%H:%M:%S.000000Z")

    assert [lesson["id"] for lesson in await listed(client)] == [first["lesson"]["id"]]


async def test_reinforcement_follows_the_documented_arithmetic_exactly(client: Client) -> None:
    # No time passes, so no decay: 0.5 -> 0.55 -> 0.595 -> 0.6355 -> 0.67195.
    content = "Write the failing test first."
    confidences = [(await save(client, content))["lesson"]["confidence"] for _ in range(5)]
    assert confidences == [0.5, approx(0.55), approx(0.595), approx(0.6355), approx(0.67195)]


async def test_the_fingerprint_ignores_case_whitespace_and_edge_punctuation(client: Client) -> None:
    first = await save(client, "Always pin dependency versions in pyproject")
    variants = [
        "always pin dependency versions in pyproject.",
        "  ALWAYS   pin dependency\tversions in pyproject!!  ",
        "Always pin dependency versions in pyproject...",
        "- always pin dependency versions in PYPROJECT",
    ]
    for n, variant in enumerate(variants, start=1):
        again = await save(client, variant)
        assert again["created"] is False, variant
        assert again["lesson"]["id"] == first["lesson"]["id"]
        assert again["lesson"]["reinforcements"] == n
    # The first wording is kept.
    assert (await listed(client))[0]["content"] == "Always pin dependency versions in pyproject"

    different = await save(client, "Always pin dependency versions in requirements")
    assert different["created"] is True


async def test_a_lesson_cannot_be_saved_at_or_below_the_fade_line(client: Client) -> None:
    # It would be faded (hidden) the moment it was saved.
    message = await call_error(client, "memory_lesson_save", content="A weak hunch about caching.", confidence=0.1)
    assert "confidence: must be above 0.1" in message
    assert await listed(client) == []


async def test_a_given_initial_confidence_is_used_for_a_new_lesson_only(client: Client) -> None:
    first = await save(client, "Benchmark before optimising.", confidence=0.8)
    again = await save(client, "Benchmark before optimising.", confidence=0.2)
    assert first["lesson"]["confidence"] == 0.8
    assert again["lesson"]["confidence"] == approx(reinforce(0.8))


async def test_reinforcing_merges_tags_and_adds_a_new_context_to_the_old(client: Client) -> None:
    await save(client, "Use transactions for multi-row writes.", context="From the import bug.", tags=["sql"])
    again = await save(client, "Use transactions for multi-row writes.", tags=["Import"])
    assert again["lesson"]["tags"] == ["import", "sql"]
    assert again["lesson"]["context"] == "From the import bug."
    third = await save(client, "Use transactions for multi-row writes.", context="Seen again in export.")
    assert third["lesson"]["context"] == "From the import bug.\nSeen again in export."
    # an account already given is not repeated
    fourth = await save(client, "Use transactions for multi-row writes.", context="seen again in  export.")
    assert fourth["lesson"]["context"] == third["lesson"]["context"]


async def test_a_lesson_stays_findable_by_how_it_was_first_learned(client: Client) -> None:
    lesson = "Start the compose db service before running alembic or pytest."
    await save(client, lesson, context="psycopg Connection refused on port 5432 wasted ten minutes")
    await save(client, lesson, context="It happened again after a reboot")
    found = await call(client, "memory_lesson_recall", query="psycopg connection refused 5432")
    assert [hit["content"] for hit in found["lessons"]] == [lesson]


async def test_a_long_history_keeps_the_first_and_newest_accounts(client: Client) -> None:
    lesson = "Pin the toolchain in CI."
    first = "First learned when the nightly build broke. " + "x" * 900
    await save(client, lesson, context=first)
    for n in range(1, 8):
        saved = await save(client, lesson, context=f"Account {n}: " + "y" * 900)
    context = saved["lesson"]["context"]
    assert len(context) <= 4_000
    assert context.startswith("First learned when the nightly build broke.")
    assert context.endswith("Account 7: " + "y" * 900)
    assert "Account 1:" not in context


async def test_the_same_text_in_another_project_or_globally_is_a_separate_lesson(client: Client) -> None:
    here = await save(client, "Prefer composition over inheritance.")
    there = await save(client, "Prefer composition over inheritance.", project="other")
    everywhere = await save(client, "Prefer composition over inheritance.", scope="global")

    assert there["created"] is True
    assert everywhere["created"] is True
    assert everywhere["lesson"]["scope"] == "global"
    assert len({here["lesson"]["id"], there["lesson"]["id"], everywhere["lesson"]["id"]}) == 3


async def test_secrets_in_a_lesson_are_redacted_and_counted(client: Client) -> None:
    saved = await save(client, "Never paste tokens like ghp_abcdefghijklmnopqrstuvwxyz0123456789 into issues.")
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in saved["lesson"]["content"]
    assert sum(saved["redacted"].values()) == 1


async def test_bad_lesson_input_is_refused(client: Client) -> None:
    assert "content" in await call_error(client, "memory_lesson_save", content="")
    assert "confidence" in await call_error(client, "memory_lesson_save", content="x y z", confidence=1.5)
    assert "task_type" in await call_error(client, "memory_lesson_save", content="x y z", task_type="Bug Fix")
    assert "kinds" in await call_error(client, "memory_lesson_recall", query="x", kinds=["rule"])


# -- decay and fading --------------------------------------------------------------------------


async def test_confidence_decays_per_week_since_the_last_reinforcement(client: Client, clock: FakeClock) -> None:
    saved = await save(client, "Squash fixup commits before merging.")
    lesson_id = saved["lesson"]["id"]

    for step, weeks in ((1, 1), (1.5, 2.5), (7.5, 10)):
        clock.advance(weeks=step)
        (lesson,) = await listed(client)
        assert lesson["id"] == lesson_id
        assert lesson["confidence"] == approx(0.5 * DECAY**weeks)
        assert lesson["status"] == "active"

    # Reinforcing starts from the decayed value and resets the decay clock.
    again = await save(client, "Squash fixup commits before merging.")
    assert again["previous_confidence"] == approx(0.5 * DECAY**10)
    assert again["lesson"]["confidence"] == approx(reinforce(0.5 * DECAY**10))
    clock.advance(weeks=4)
    (lesson,) = await listed(client)
    assert lesson["confidence"] == approx(reinforce(0.5 * DECAY**10) * DECAY**4)


async def test_the_decay_rate_is_a_setting(settings: Settings, clock: FakeClock) -> None:
    faster = settings.model_copy(update={"lesson_decay_per_week": 0.2})
    async with Client(build_server(faster, clock)) as client:
        await save(client, "Rebase onto main before asking for review.")
        clock.advance(weeks=3)
        (lesson,) = await listed(client)
    assert lesson["confidence"] == approx(0.5 * 0.8**3)


async def test_an_unreinforced_lesson_fades_at_a_tenth_and_is_hidden(client: Client, clock: FakeClock) -> None:
    faded = (await save(client, "Restart the language server after changing the venv."))["lesson"]
    kept = (await save(client, "Restart the dev server after changing environment variables.", confidence=0.9))[
        "lesson"
    ]

    # 0.5 × 0.95^31 = 0.1020 is still above the line; 0.5 × 0.95^32 = 0.0969 is not.
    clock.advance(weeks=31)
    assert [x["id"] for x in await recall(client, "restart server")] == [kept["id"], faded["id"]]
    clock.advance(weeks=1)

    assert [x["id"] for x in await recall(client, "restart server")] == [kept["id"]]
    assert [x["id"] for x in await recall(client)] == [kept["id"]]
    assert [x["id"] for x in await listed(client)] == [kept["id"]]
    (shown,) = await listed(client, status="faded")
    assert shown["id"] == faded["id"]
    assert shown["status"] == "faded"
    assert shown["confidence"] == approx(0.5 * DECAY**32)
    assert [x["status"] for x in await listed(client, status="all")] == ["active", "faded"]


async def test_saving_a_faded_lesson_again_restores_it(client: Client, clock: FakeClock) -> None:
    content = "Restart the language server after changing the venv."
    original = (await save(client, content))["lesson"]
    clock.advance(weeks=40)
    decayed = 0.5 * DECAY**40

    restored = await save(client, content.upper())

    assert restored["created"] is False
    assert restored["restored"] is True
    assert restored["previous_confidence"] == approx(decayed)
    lesson = restored["lesson"]
    assert lesson["id"] == original["id"]
    assert lesson["status"] == "active"
    assert lesson["reinforcements"] == 1
    assert lesson["confidence"] == approx(reinforce(decayed))
    assert [x["id"] for x in await recall(client, "language server")] == [original["id"]]
    assert await listed(client, status="faded") == []


async def test_a_reinforced_lesson_does_not_fade_however_low_it_decays(client: Client, clock: FakeClock) -> None:
    content = "Check the timezone of every timestamp you parse."
    await save(client, content)
    await save(client, content)
    clock.advance(weeks=60)

    (lesson,) = await listed(client)
    assert lesson["confidence"] == approx(0.55 * DECAY**60)
    assert lesson["confidence"] < 0.1
    assert lesson["status"] == "active"
    assert [x["id"] for x in await recall(client, "timezone timestamp")] == [lesson["id"]]


# -- recall --------------------------------------------------------------------------------------


async def save_filler(client: Client, **extra: Any) -> None:
    for text in FILLER:
        await save(client, text, **extra)


async def test_recall_puts_the_projects_lessons_before_global_ones(client: Client) -> None:
    await save_filler(client)
    await save_filler(client, scope="global")
    weak_local = (await save(client, "Cache the parsed config between calls.", confidence=0.2))["lesson"]
    strong_global = (
        await save(
            client, "Cache the parsed config between calls to avoid re-reading it.", scope="global", confidence=1
        )
    )["lesson"]
    elsewhere = (await save(client, "Cache the parsed config in Redis.", project="other"))["lesson"]

    found = await recall(client, "cache parsed config")

    assert [(x["id"], x["scope"]) for x in found] == [(weak_local["id"], "project"), (strong_global["id"], "global")]
    assert elsewhere["id"] not in [x["id"] for x in found]
    assert [x["id"] for x in await recall(client, "cache parsed config", include_global=False)] == [weak_local["id"]]
    # The limit is filled by the project first.
    assert [x["id"] for x in await recall(client, "cache parsed config", limit=1)] == [weak_local["id"]]


async def test_recall_ranks_by_relevance_times_confidence(client: Client) -> None:
    await save_filler(client)
    # Same length and one "flaky" each, so the same BM25 relevance: confidence decides between them.
    low = (await save(client, "Retry flaky network calls with jitter.", confidence=0.3))["lesson"]
    high = (await save(client, "Retry flaky browser tests with backoff.", confidence=0.8))["lesson"]
    # Far more relevant ("flaky" twice and "fixtures") but not very confident.
    relevant = (await save(client, "Flaky tests hide flaky fixtures; quarantine them.", confidence=0.15))["lesson"]
    # A confident lesson that does not match the query is not a hit at all.
    await save(client, "Review database migrations twice.", confidence=1.0)

    found = await recall(client, "flaky fixtures")

    by_id = {x["id"]: x for x in found}
    relevance = {i: x["score"] / x["confidence"] for i, x in by_id.items()}
    assert relevance[low["id"]] == pytest.approx(relevance[high["id"]], rel=1e-3)
    assert relevance[relevant["id"]] > 2 * relevance[high["id"]]
    # 0.8 × r beats 0.15 × (about 4 r), which beats 0.3 × r.
    assert [x["id"] for x in found] == [high["id"], relevant["id"], low["id"]]
    scores = [x["score"] for x in found]
    assert scores == sorted(scores, reverse=True)
    assert [x["confidence"] for x in found] == [0.8, 0.15, 0.3]


async def test_recall_without_a_query_ranks_by_confidence(client: Client) -> None:
    ids = {}
    for confidence in (0.3, 0.9, 0.6):
        ids[confidence] = (await save(client, f"Lesson number {confidence} about nothing.", confidence=confidence))[
            "lesson"
        ]["id"]
    glob = (await save(client, "A global lesson with top confidence.", scope="global", confidence=1.0))["lesson"]

    found = await recall(client)

    assert [x["id"] for x in found] == [ids[0.9], ids[0.6], ids[0.3], glob["id"]]
    assert [x["score"] for x in found] == [None, None, None, None]
    assert [x["confidence"] for x in found] == [0.9, 0.6, 0.3, 1.0]


async def test_a_blank_query_ranks_by_confidence_and_one_with_no_word_says_so(client: Client) -> None:
    low = (await save(client, "Pin the stemmer version.", confidence=0.4))["lesson"]["id"]
    high = (await save(client, "Run the migrations first.", confidence=0.8))["lesson"]["id"]

    blank = await call(client, "memory_lesson_recall", query="   ")
    wordless = [await call(client, "memory_lesson_recall", query=q) for q in ("the what", "?!", "<private>x</private>")]

    assert [x["id"] for x in blank["lessons"]] == [high, low]
    for result in wordless:
        assert result["lessons"] == []
        assert result["hint"].startswith("The query has no word to search for")


async def test_recall_filters_by_task_type_and_kind(client: Client) -> None:
    await save_filler(client)
    bugfix = (await save(client, "Reproduce the crash with a test first.", task_type="bugfix"))["lesson"]
    refactor = (await save(client, "Keep the crash handler behaviour while refactoring.", task_type="refactor"))[
        "lesson"
    ]
    general = (await save(client, "Write down how to reproduce a crash.", confidence=0.4))["lesson"]
    # Two similar failures make an anti-pattern (a lesson of another kind) for bugfix tasks.
    for _ in range(2):
        await call(
            client,
            "memory_outcome_record",
            task="Fix the crash in the parser",
            task_type="bugfix",
            success=False,
            strategy="patch the crash site with a try/except",
            error="crash: IndexError in parser tokenize",
        )
    anti = (await listed(client, kinds=["anti_pattern"]))[0]

    by_type = {x["id"] for x in await recall(client, "crash", task_type="bugfix")}
    assert by_type == {bugfix["id"], general["id"], anti["id"]}  # untyped lessons apply to every task type
    assert refactor["id"] not in by_type

    only_anti = await recall(client, "crash", kinds=["anti_pattern"])
    assert [x["id"] for x in only_anti] == [anti["id"]]
    assert only_anti[0]["kind"] == "anti_pattern"
    plain = {x["id"] for x in await recall(client, "crash", kinds=["lesson"])}
    assert plain == {bugfix["id"], refactor["id"], general["id"]}
    assert [x["id"] for x in await recall(client, kinds=["anti_pattern"])] == [anti["id"]]


async def test_recall_for_a_task_type_puts_its_lessons_before_the_untyped(client: Client) -> None:
    untyped = [
        (await save(client, f"Formatting advice number {n} for every task.", confidence=0.95))["lesson"]["id"]
        for n in range(6)
    ]
    bugfix = await save(client, "Reproduce the crash before changing code.", task_type="bugfix", confidence=0.6)

    no_query = await recall(client, task_type="bugfix", limit=3)
    with_query = await recall(client, "advice before changing code", task_type="bugfix", limit=3)

    assert [x["id"] for x in no_query] == [bugfix["lesson"]["id"], *sorted(untyped)[:2]]
    assert with_query[0]["id"] == bugfix["lesson"]["id"]
    assert {x["id"] for x in with_query[1:]} <= set(untyped)


async def test_memory_lessons_lists_by_confidence_with_filters_and_paging(client: Client) -> None:
    a = (await save(client, "Alpha lesson about tests.", confidence=0.7, task_type="testing"))["lesson"]
    b = (await save(client, "Beta lesson about docs.", confidence=0.9, task_type="documentation"))["lesson"]
    c = (await save(client, "Gamma lesson everywhere.", confidence=0.8, scope="global"))["lesson"]
    d = (await save(client, "Delta lesson, untyped.", confidence=0.6))["lesson"]

    page1 = await call(client, "memory_lessons", limit=2)
    page2 = await call(client, "memory_lessons", limit=2, offset=2)
    assert page1["total"] == 4
    assert [x["id"] for x in page1["lessons"]] == [b["id"], c["id"]]
    assert page1["next_offset"] == 2
    assert [x["id"] for x in page2["lessons"]] == [a["id"], d["id"]]
    assert page2["next_offset"] is None

    assert [x["id"] for x in await listed(client, scope="project")] == [b["id"], a["id"], d["id"]]
    assert [x["id"] for x in await listed(client, scope="global")] == [c["id"]]
    # Listing by task type includes untyped lessons (they hold for every type), as recall does.
    assert [x["id"] for x in await listed(client, task_type="testing")] == [c["id"], a["id"], d["id"]]
    assert [x["id"] for x in await listed(client, kinds=["heuristic"])] == []


# -- restart -------------------------------------------------------------------------------------


async def test_lessons_and_their_confidences_survive_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        await save_filler(first)
        await save(first, "Profile before optimising the hot loop.")
        kept = (await save(first, "Profile before optimising the hot loop!"))["lesson"]
        faded = (await save(first, "Optimise the hot loop with numpy.", confidence=0.11))["lesson"]
        glob = (await save(first, "Profile with py-spy in production.", scope="global"))["lesson"]
        clock.advance(weeks=3)
        before = {x["id"]: x for x in await listed(first, status="all")}

    async with Client(build_server(settings, clock)) as second:
        after = {x["id"]: x for x in await listed(second, status="all")}
        found = await recall(second, "profile hot loop")

    assert after == before
    assert after[kept["id"]]["reinforcements"] == 1
    assert after[kept["id"]]["confidence"] == approx(0.55 * DECAY**3)
    assert after[faded["id"]]["status"] == "faded"
    assert [x["id"] for x in found] == [kept["id"], glob["id"]]


# -- recall reaches every match; a lesson saved for a second task type --------------------------------------


async def test_recall_finds_the_active_lesson_behind_many_faded_ones_that_match_better(
    client: Client, clock: FakeClock
) -> None:
    for i in range(210):
        await call(client, "memory_lesson_save", content=f"cache note {i}", confidence=0.11)
    clock.advance(weeks=3)  # every note fades
    kept = await call(
        client,
        "memory_lesson_save",
        content="When the cache misbehaves, check the eviction policy and the TTL of every layer",
        confidence=0.9,
    )

    found = await call(client, "memory_lesson_recall", query="cache")

    assert (await call(client, "memory_lessons"))["total"] == 1
    assert [lesson["id"] for lesson in found["lessons"]] == [kept["lesson"]["id"]]


async def test_recall_with_a_task_type_finds_its_lesson_behind_many_of_other_types(client: Client) -> None:
    for i in range(210):
        await call(client, "memory_lesson_save", content=f"cache docs page {i}", task_type="documentation")
    mine = await call(client, "memory_lesson_save", content="Clear the cache before bisecting", task_type="bugfix")

    found = await call(client, "memory_lesson_recall", query="cache", task_type="bugfix", limit=1)

    assert [lesson["id"] for lesson in found["lessons"]] == [mine["lesson"]["id"]]


async def test_a_lesson_saved_again_for_another_task_type_holds_for_every_type(client: Client) -> None:
    first = await call(client, "memory_lesson_save", content="Pin dependency versions", task_type="deployment")
    same = await call(client, "memory_lesson_save", content="Pin dependency versions", task_type="deployment")
    untyped_call = await call(client, "memory_lesson_save", content="Pin dependency versions")
    other = await call(client, "memory_lesson_save", content="Pin dependency versions", task_type="configuration")
    recalled = await call(client, "memory_lesson_recall", task_type="configuration")

    assert same["lesson"]["task_type"] == untyped_call["lesson"]["task_type"] == "deployment"
    assert (other["created"], other["lesson"]["task_type"]) == (False, None)
    assert [lesson["id"] for lesson in recalled["lessons"]] == [first["lesson"]["id"]]


# -- what SQL ranks lessons by follows every write ---------------------------------------------------


def _since_us_of(path: Path) -> dict[str, tuple[int | None, int]]:
    """(stored since_us, what it should be) of every lesson in the file."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT id, last_reinforced_at, decayed_at, since_us FROM lessons").fetchall()
    return {i: (us, epoch_us(from_iso(max(set_at, decayed or "")))) for i, set_at, decayed, us in rows}


async def test_the_time_lessons_decay_from_is_kept_by_every_write(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    """SQL ranks lessons by a number triggers keep from the times a confidence was set: saved,
    reinforced, decay persisted by consolidation, soft-deleted, restored, imported."""
    async with Client(build_server(settings, clock)) as client:
        await save_filler(client)
        kept = (await save(client, "Run the linter before pushing."))["lesson"]
        fading = (await save(client, "Cache the wheel builds between CI runs."))["lesson"]
        clock.advance(weeks=3, hours=5, seconds=7.25)
        await save(client, "Run the linter before pushing.")
        clock.advance(weeks=40)
        report = await call(client, "memory_consolidate")
        document = (await call(client, "memory_export"))["document"]
        after_consolidate = _since_us_of(settings.db)
        clock.advance(days=2)
        await save(client, "Cache the wheel builds between CI runs.")  # restores the faded lesson
        after_restore = _since_us_of(settings.db)
        ranked = [x["id"] for x in await listed(client)]

    copy = Settings(db=tmp_path / "copy.db", project="test", synchronous="normal", timezone="UTC")
    async with Client(build_server(copy, clock)) as other:
        await call(other, "memory_import", document=document)
    imported = _since_us_of(copy.db)

    assert report["counts"] == {"faded": 7, "decayed": 1}  # the filler and `fading` faded; `kept` decayed
    for state in (after_consolidate, after_restore, imported):
        assert len(state) == 8
        assert all(stored == expected for stored, expected in state.values()), state
    assert after_consolidate[fading["id"]] != after_restore[fading["id"]]
    assert ranked.index(fading["id"]) < ranked.index(kept["id"])  # just restored, it is the most confident
