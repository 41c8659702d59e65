"""What the compiled context says it left out is the true count, past what each section reads; the
context resource and the session_start prompt keep to their budget, left-out line included."""

from __future__ import annotations

import math
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import hypothesis
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from mcp import Client

from mcp_memory.clock import from_iso, to_iso, weeks_between
from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.ids import new_id
from mcp_memory.models.records import Lesson, Memory, MistakeCard, Session
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.server import build_server
from mcp_memory.services import context as context_service
from mcp_memory.services.common import GLOBAL_PROJECT
from tests.conftest import FakeClock, call
from tests.test_context_fixes import hinted_calls, prompt_text, resource_text
from tests.test_tools_context import words

LEFT_OUT = "\nLeft out for space (fetch with): "


def section(compiled: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in compiled["sections"] if s["name"] == name)


def tokens(text: str) -> int:
    """The estimator the README documents."""
    return math.ceil(len(text) / 4)


def assert_counts_add_up(compiled: dict[str, Any]) -> None:
    left = sum(s["omitted"] for s in compiled["sections"])
    assert len(compiled["omitted"]) + compiled["omitted_unlisted"] == left
    for s in compiled["sections"]:
        assert s["omitted"] >= len([o for o in compiled["omitted"] if o["section"] == s["name"]]), s


async def unlimited(client: Client, monkeypatch: pytest.MonkeyPatch, **arguments: Any) -> dict[str, int]:
    """How many records each section shows given unlimited room: every section reads all it may show."""
    with monkeypatch.context() as patch:
        patch.setattr(context_service, "_POOL", 100_000)
        compiled = await call(client, "memory_context", budget=100_000, **arguments)
    assert compiled["omitted"] == [], compiled["omitted"]
    return {s["name"]: s["included"] for s in compiled["sections"]}


# -- 1. every section counts all it left out -----------------------------------------------------------


async def test_lessons_past_what_the_section_reads_are_counted_as_left_out(client: Client) -> None:
    for i in range(60):
        await call(client, "memory_lesson_save", content=f"Lesson number {i} with token z{i}q")

    compiled = await call(client, "memory_context", budget=100)

    lessons = section(compiled, "lessons")
    assert (lessons["included"], lessons["omitted"]) == (3, 57)
    assert section(compiled, "profile")["omitted"] == 0
    assert len(compiled["omitted"]) + compiled["omitted_unlisted"] == 57
    assert (await call(client, "memory_lessons"))["total"] == 60


async def test_every_section_counts_all_it_left_out(client: Client, clock: FakeClock) -> None:
    rng = random.Random(7)
    for i in range(80):
        await call(client, "memory_lesson_save", content=f"Lesson number {i} with token z{i}q")
        await call(
            client,
            "memory_outcome_record",
            task=f"Task {i} {words(rng, 20)}",
            task_type="chore",
            score=0.5,
            mistake_cards=[{"type": "slip", "correct_decision": f"check {words(rng, 30)} first"}],
        )
        await call(client, "memory_observe", content=f"Worked on {words(rng, 40)}.", session_id=f"conv-{i}")
        await call(client, "memory_save", content=f"Memory {i}: {words(rng, 60)}.")
        clock.advance(minutes=1)
    sessions = (await call(client, "memory_sessions"))["total"]

    compiled = await call(client, "memory_context", budget=500)

    left = {s["name"]: s["omitted"] for s in compiled["sections"]}
    taken = {s["name"]: s["included"] for s in compiled["sections"]}
    assert sessions >= 80
    assert left == {
        "profile": 0,
        "lessons": 80 - taken["lessons"],
        "mistake_cards": 80 - taken["mistake_cards"],
        "sessions": sessions - taken["sessions"],
        "memories": 80 - taken["memories"],
    }
    assert min(left["lessons"], left["mistake_cards"], left["sessions"], left["memories"]) >= 60
    assert_counts_add_up(compiled)


async def test_the_counts_leave_out_what_no_room_would_show(
    client: Client, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faded lessons, superseded memories, preferences the profile shows and sessions whose every
    observation was forgotten are no more counted than shown."""
    rng = random.Random(11)
    for i in range(12):  # to fade: never reinforced
        await call(client, "memory_lesson_save", content=f"Old hunch {i}: {words(rng, 30)}")
    kept = [f"Confirmed rule {i}: {words(rng, 30)}" for i in range(4)]
    for content in kept:  # reinforced: these never fade
        await call(client, "memory_lesson_save", content=content)
        await call(client, "memory_lesson_save", content=content)
    clock.advance(weeks=40)
    for i in range(55):
        await call(client, "memory_lesson_save", content=f"Fresh lesson {i}: {words(rng, 30)}")
    for i in range(30):
        await call(client, "memory_lesson_save", content=f"Global lesson {i}: {words(rng, 30)}", scope="global")
    await call(client, "memory_lesson_save", content="Another project's lesson.", project="elsewhere")
    for i in range(60):
        saved = await call(client, "memory_save", content=f"Fact {i}: {words(rng, 50)}.")
        if i % 10 == 0:  # a new version replaces it
            await call(client, "memory_save", content=f"Fact {i} corrected: {words(rng, 50)}.", supersedes=saved["id"])
    for _ in range(7):  # the profile shows the newest five
        await call(client, "memory_save", content=f"Prefers {words(rng, 25)}.", kind="preference")
        clock.advance(seconds=1)
    for i in range(30):
        observed = await call(client, "memory_observe", content=f"Session work {words(rng, 40)}.", session_id=f"s{i}")
        if i % 6 == 0:  # its only observation forgotten: nothing to tell
            await call(client, "memory_forget", ids=[observed["id"]])
        clock.advance(minutes=1)
    active = (await call(client, "memory_lessons", scope="all"))["total"]

    compiled = await call(client, "memory_context", budget=300)
    focused = await call(client, "memory_context", budget=300, query="fact corrected", task_type="chore")

    assert active == 4 + 55 + 30
    # the profile counts the project's own active lessons, the context's line as memory_profile
    assert (await call(client, "memory_profile"))["lessons"] == 4 + 55
    for result in (compiled, focused):
        assert ", 59 lessons.\n" in result["text"]
    everything = await unlimited(client, monkeypatch)
    assert everything == {"profile": 1, "lessons": 89, "sessions": 25, "memories": 60 + 7 - 5}
    for result in (compiled, focused):
        for s in result["sections"]:
            assert s["included"] + s["omitted"] == everything[s["name"]], s
        assert_counts_add_up(result)
    assert everything == await unlimited(client, monkeypatch, query="fact corrected", task_type="chore")


async def test_a_task_type_puts_its_mistake_cards_first_and_still_counts_them_all(client: Client) -> None:
    for i in range(40):
        await call(
            client,
            "memory_outcome_record",
            task=f"Job {i}",
            task_type="deploy" if i % 4 == 0 else "chore",
            score=0.5,
            mistake_cards=[{"type": "slip", "correct_decision": f"verify widget {i} twice"}],
        )

    compiled = await call(client, "memory_context", budget=200, task_type="deploy")

    cards = section(compiled, "mistake_cards")
    assert cards["included"] + cards["omitted"] == 40


async def test_stored_records_count_as_the_sections_show_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records stored as an import can leave them (preferences the profile shows twice over, in long or
    spaced-out copies; sessions with only a summary or a digest; superseded versions) count exactly as
    the sections show them given unlimited room."""
    now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    settings = Settings(db=tmp_path / "memory.db", project="test", synchronous="normal", timezone="UTC")
    rng = random.Random(3)
    long = "Prefers " + words(rng, 300)

    def at(minutes: int) -> str:
        return to_iso(now - timedelta(minutes=minutes))

    def memory(kind: str, content: str, minutes: int, *, latest: bool = True, project: str = "test") -> Memory:
        made = new_id("memory")
        return Memory(
            id=made, project=project, kind=kind, content=content, root_id=made, is_latest=latest,
            created_at=at(minutes), updated_at=at(minutes),
        )  # fmt: skip

    def session(minutes: int, count: int, folded: int, summary: str | None, digest: str | None) -> Session:
        return Session(
            id=new_id("session"), project="test", started_at=at(minutes), last_activity_at=at(minutes),
            observation_count=count, folded_count=folded, summary=summary, folded_digest=digest,
            created_at=at(minutes), updated_at=at(minutes),
        )  # fmt: skip

    records: list[Memory] = [
        memory("preference", long + " and tabs", 1),  # the profile shows the five newest preferences
        # shown the same there, cut to the first 240 characters: both are listed among the memories too
        memory("preference", long + " and spaces", 900),
        memory("preference", "Prefers   small\n commits.", 2),
        memory("preference", "Prefers small commits.", 901),  # the same once spaces are folded
        memory("preference", "Prefers small commits, mostly.", 902),
        memory("preference", "Prefers dark mode.", 3),
        memory("preference", "Prefers dark mode.", 903, latest=False),
        memory("preference", "Prefers the CLI.", 4),
        memory("preference", "Prefers YAML.", 5),
        memory("preference", "Prefers JSON.", 6),  # the sixth newest: listed among the memories
        memory("preference", long + " and tabs", 7, project="elsewhere"),
    ]
    records += [memory("fact", f"Fact {i}: {words(rng, 80)}.", 10 + i, latest=i % 7 != 0) for i in range(70)]
    sessions = [
        session(i, count, folded, summary, digest)
        for i, (count, folded, summary, digest) in enumerate(
            [(3, 0, None, None), (3, 3, None, None), (3, 3, None, "Folded: a, b"), (0, 0, "Summary.", None),
             (0, 0, "", ""), (2, 3, None, None), (5, 5, "", None)] * 6
        )
    ]  # fmt: skip
    async with open_app(settings, lambda: now) as app:
        async with app.deps.db.transaction("test", project="test") as tx:
            for record in records:
                await MemoryRepository(tx).add(record)
            for made in sessions:
                await SessionRepository(tx).add(made)
            for i in range(40):
                card = MistakeCard(
                    id=new_id("mistake_card"), project="test" if i % 5 else "elsewhere", merge_key=f"k{i}",
                    task_type="chore" if i % 3 else None, type="slip", task=f"task {i}",
                    correct_decision=f"do {words(rng, 20)}", seen_count=1 + i % 4, first_seen_at=at(i),
                    last_seen_at=at(i), created_at=at(i), updated_at=at(i),
                )  # fmt: skip
                await MistakeCardRepository(tx).add(card)
        small = [await app.context.compile("test", budget=100, task_type=t) for t in (None, "chore")]
        with monkeypatch.context() as patch:
            patch.setattr(context_service, "_POOL", 100_000)
            whole = await app.context.compile("test", budget=100_000)

    assert whole.omitted == []
    shown = {s.name: s.included for s in whole.sections}
    assert shown == {"profile": 1, "mistake_cards": 32, "sessions": 6 * 4, "memories": 60 + 9 - 5}
    for compiled in small:
        assert {s.name: s.included + s.omitted for s in compiled.sections} == shown
        assert len(compiled.omitted) + compiled.omitted_unlisted == sum(s.omitted for s in compiled.sections)


# -- 2. the fading of never-reinforced lessons is counted exactly -------------------------------------


@pytest.mark.parametrize(
    ("decay", "fade_at"),
    [(0.05, 0.1), (0.0, 0.1), (1e-17, 0.3), (1e-9, 0.2), (0.5, 0.3), (0.999, 0.5), (0.05, 0.0), (0.2, 0.95)],
)
async def test_the_active_lessons_counted_are_those_the_lesson_service_calls_active(
    tmp_path: Path, decay: float, fade_at: float
) -> None:
    """Lessons at every edge of fading (confidences a few units in the last place either side of the
    fading one, ages at many fractions of the fading span, times ahead of now or centuries back, decays
    on record, times stored without microseconds) count and rank as LessonService judges them."""
    now = datetime(2026, 1, 5, 9, 0, 0, 123456, tzinfo=UTC)
    settings = Settings(
        db=tmp_path / "memory.db",
        project="test",
        synchronous="normal",
        timezone="UTC",
        lesson_decay_per_week=decay,
        lesson_fade_at=fade_at,
        lesson_confidence=1.0,  # above every fade line tried (a new lesson must be born visible)
    )
    rng = random.Random(f"{decay}/{fade_at}")
    keep = 1.0 - decay
    # The weeks in which a confidence of 1 decays to the threshold, in 64 steps.
    span = -math.log(max(fade_at, 5e-324)) / -math.log(keep) if keep < 1.0 else 1.0
    band_weeks = span / 64
    span = min(span, 20_000.0)
    ages = [rng.uniform(-1.0, span * 1.5) for _ in range(300)]
    ages += [band * band_weeks + nudge for band in range(70) for nudge in (0.0, -1e-9, 1e-9, -1e-6, 2e-6)]
    ages = [age for age in ages if age < 25_000]

    def lesson(project: str, age: float) -> Lesson:
        since = to_iso(now - timedelta(weeks=age))
        weeks = weeks_between(from_iso(since), now)
        confidence = rng.choice([rng.uniform(0.0, 1.0), fade_at, 0.0, 5e-324, 1e-310])
        if rng.random() < 0.7 and keep < 1.0 and fade_at > 0:
            try:
                edge = fade_at / keep**weeks
            except (OverflowError, ZeroDivisionError):
                edge = math.inf
            if math.isfinite(edge):
                confidence = edge
                for _ in range(abs(step := rng.randint(-3, 3))):
                    confidence = math.nextafter(confidence, math.inf if step > 0 else 0.0)
        earlier = to_iso(now - timedelta(weeks=age + rng.uniform(0, 5)))
        if rng.random() < 0.05:  # a time as a hand edit or an older release may have stored it
            since = from_iso(since).isoformat(timespec="seconds")
        decayed = rng.random() < 0.25
        return Lesson(
            id=new_id("lesson"),
            project=project,
            content=f"lesson {rng.random()}",
            confidence=confidence,
            reinforcements=0 if rng.random() < 0.8 else rng.randint(1, 3),
            fingerprint=uuid.uuid4().hex,
            last_reinforced_at=earlier if decayed else since,
            decayed_at=since if decayed else (earlier if rng.random() < 0.1 else None),
            deleted_at=to_iso(now) if rng.random() < 0.1 else None,
            created_at=earlier,
            updated_at=since,
        )

    stored = {}
    async with open_app(settings, lambda: now) as app:
        async with app.deps.db.transaction("test", project="test") as tx:
            for age in ages:
                project = rng.choice(["test", "test", GLOBAL_PROJECT, "elsewhere"])
                made = lesson(project, age)
                stored[made.id] = made
                await LessonRepository(tx).add(made)
        listed = await app.lessons.lessons(
            "test", kinds=None, task_type=None, status="active", scope="all", limit=1, offset=0
        )
        everything = await app.lessons.lessons(
            "test", kinds=None, task_type=None, status="all", scope="all", limit=len(ages), offset=0
        )
        compiled = await app.context.compile("test", budget=100)
        exact = {i: app.lessons.confidence(made) for i, made in stored.items() if made.project != "elsewhere"}

    # Listed highest confidence first (as judged exactly, not as shown rounded), then by id.
    assert [view.id for view in everything.lessons] == sorted(exact, key=lambda i: (-exact[i], i))
    counted = [s.included + s.omitted for s in compiled.sections if s.name == "lessons"]
    assert counted == ([listed.total] if listed.total else [])
    # Listings rank lessons by a narrow read of their standing; each shown whole judges itself the same.
    assert listed.total == sum(view.status == "active" for view in everything.lessons)
    assert len(everything.lessons) == everything.total
    assert 0 < listed.total < len(ages)  # some are active, some faded or deleted


# -- 3. the resource and the prompt keep to their budget -----------------------------------------------


async def fill(client: Client, project: str | None = None, *, extra: int = 0) -> None:
    """30 lessons, memories and mistake cards, each with `extra` characters of pseudo-words at its end."""
    named = {"project": project} if project else {}
    rng = random.Random(extra)

    def more() -> str:
        return " " + words(rng, extra) if extra else ""

    for i in range(30):
        await call(client, "memory_lesson_save", content=f"Lesson number {i} with token z{i}q{more()}", **named)
        await call(client, "memory_save", content=f"Memory {i} about widget w{i}x and gadget g{i}k.{more()}", **named)
        await call(
            client,
            "memory_outcome_record",
            task=f"Task {i}",
            task_type="chore",
            score=0.5,
            mistake_cards=[{"type": "slip", "correct_decision": f"check thing t{i}y{more()}"}],
            **named,
        )


async def assert_left_out_line_fetches(client: Client, text: str, project: str | None = None) -> list[str]:
    """The ids the text's left-out line names (the profile's call names none): each fetched by the call it
    gives, none in the text above it."""
    body, line, hint = text.rpartition(LEFT_OUT)
    assert line, text
    calls = hinted_calls(hint)
    assert {tool for tool, _ in calls} <= {"memory_smart_search", "memory_profile"}
    ids: list[str] = []
    for tool, arguments in calls:
        assert arguments.get("project") == project
        fetched = await call(client, tool, **arguments)
        if tool == "memory_smart_search":
            assert fetched["missing"] == []
            ids += arguments["ids"]
        else:
            assert "## Project profile" not in body
    assert calls
    assert not [listed for listed in ids if listed in body]
    return ids


async def test_the_context_resource_keeps_its_left_out_line_within_the_budget(client: Client) -> None:
    await fill(client)

    resource = await resource_text(client, "memory://context?budget=100")
    bigger = await resource_text(client, "memory://context?budget=300")

    assert tokens(resource) <= 100
    assert tokens(bigger) <= 300
    assert resource.startswith("# Memory for project test\n")
    assert len(await assert_left_out_line_fetches(client, resource)) == 5  # as many as memory_context lists
    assert len(await assert_left_out_line_fetches(client, bigger)) == 6
    assert "## Lessons" in bigger


async def test_the_session_start_prompt_keeps_its_left_out_line_within_the_budget(client: Client) -> None:
    await fill(client, extra=80)

    prompt = await prompt_text(client, "session_start")
    focused = await prompt_text(client, "session_start", {"query": "widget", "task_type": "chore"})

    for text in (prompt, focused):
        assert tokens(text) <= 2000
        assert text.startswith("Here is what you remember about this project.")
        assert "- when a task ends, record how it went with memory_outcome_record." in text
        assert len(await assert_left_out_line_fetches(client, text)) == 20


async def test_a_small_budget_gives_the_prompt_short_words_and_a_long_name_none(
    settings: Settings, clock: FakeClock
) -> None:
    small = settings.model_copy(update={"context_budget": 100})
    long_name = "p" * 128
    async with Client(build_server(small, clock)) as client:
        await fill(client)
        await fill(client, long_name)
        short = await prompt_text(client, "session_start")
        bare = await prompt_text(client, "session_start", {"project": long_name})
        resource = await resource_text(client, f"memory://context?project={long_name}&budget=100")

        assert tokens(short) <= 100
        assert short.startswith("# Memory for project test\n")
        assert "\n\nWhile you work: record with memory_observe, save facts with memory_save" in short
        assert len(await assert_left_out_line_fetches(client, short)) == 2
        assert "\n## Mistakes to avoid\n" in short  # the line lists fewer, so that the context holds something
        for text in (bare, resource):  # the name leaves room for no words, and for the profile's call alone
            assert tokens(text) <= 100
            assert text.startswith(f"# Memory for project {long_name}\n")
            assert "While you work" not in text
            assert await assert_left_out_line_fetches(client, text, long_name) == []


_PROJECTS = ["test", "billing", "q" * 128, 'quoted "name" with {context} and {project_hint}']


@hypothesis.settings(
    max_examples=12,  # about 0.3 s each; a run of 300 found nothing more
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    budget=st.integers(100, 1500),
    prompt_budget=st.integers(100, 1500),
    project=st.sampled_from(_PROJECTS),
    tools=st.sampled_from(["all", "core"]),
    query=st.sampled_from([None, "alpha", "widget gadget"]),
    slot_sizes=st.lists(st.integers(1, 2000), max_size=3),
    lesson_sizes=st.lists(st.integers(5, 600), max_size=8),
    memory_sizes=st.lists(st.integers(5, 800), max_size=8),
    card_sizes=st.lists(st.integers(5, 300), max_size=3),
    session_sizes=st.lists(st.integers(5, 400), max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
async def test_the_context_resource_and_the_session_start_prompt_never_exceed_their_budget(
    tmp_path: Path,
    budget: int,
    prompt_budget: int,
    project: str,
    tools: str,
    query: str | None,
    slot_sizes: list[int],
    lesson_sizes: list[int],
    memory_sizes: list[int],
    card_sizes: list[int],
    session_sizes: list[int],
    seed: int,
) -> None:
    rng = random.Random(seed)
    settings = Settings(db=tmp_path / f"{uuid.uuid4().hex}.db", project="test", synchronous="normal")
    named = {"project": project}
    async with Client(build_server(settings, FakeClock())) as client:
        for i, size in enumerate(slot_sizes):
            await call(client, "memory_slot_create", name=f"slot_{i}", content=words(rng, size), pinned=True, **named)
        for i, size in enumerate(session_sizes):
            await call(client, "memory_observe", content=words(rng, size), session_id=f"conv-{i}", **named)
        for i, size in enumerate(lesson_sizes):
            await call(client, "memory_lesson_save", content=f"L{i} {words(rng, size)}", **named)
        for i, size in enumerate(card_sizes):
            await call(
                client,
                "memory_outcome_record",
                task=f"task {i}",
                task_type="chore",
                score=0.9,
                mistake_cards=[{"type": "slip", "correct_decision": words(rng, size)}],
                **named,
            )
        for i, size in enumerate(memory_sizes):
            await call(client, "memory_save", content=f"M{i} {words(rng, size)}", importance=rng.random(), **named)
    reader = settings.model_copy(update={"context_budget": prompt_budget, "tools": tools})
    async with Client(build_server(reader, FakeClock())) as client:
        asked = {"query": query} if query else {}
        uri = f"memory://context?project={quote(project, safe='')}&budget={budget}"
        resource = await resource_text(client, uri + (f"&query={quote(query)}" if query else ""))
        prompt = await prompt_text(client, "session_start", {**named, **asked})
        compiled = await call(client, "memory_context", budget=budget, **named, **asked)

    assert tokens(resource) <= budget
    assert tokens(prompt) <= prompt_budget
    assert resource.startswith(f"# Memory for project {project}\n")
    if not compiled["omitted"]:  # nothing left out: the resource is the tool's text
        assert resource == compiled["text"]
    for text in (resource, prompt):
        body, line, hint = text.rpartition(LEFT_OUT)
        if line:
            for _, arguments in hinted_calls(hint):
                assert not any(listed in body for listed in arguments.get("ids", []))
