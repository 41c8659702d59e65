"""Relations, the compiled context, the profile, the session-start prompt and the resources."""

from __future__ import annotations

import json
import math
import random
import uuid
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

HEADINGS = [
    "## Pinned",
    "## Project profile",
    "## Lessons",
    "## Mistakes to avoid",
    "## Recent sessions",
    "## Memories",
]
SECTION_NAMES = ["pinned_slots", "profile", "lessons", "mistake_cards", "sessions", "memories"]


async def context(client: Client, **args: Any) -> dict[str, Any]:
    return await call(client, "memory_context", **args)


async def save_memory(client: Client, content: str, **extra: Any) -> str:
    return (await call(client, "memory_save", content=content, **extra))["id"]


async def save_lesson(client: Client, content: str, **extra: Any) -> str:
    return (await call(client, "memory_lesson_save", content=content, **extra))["lesson"]["id"]


# -- relations -----------------------------------------------------------------------------------


async def test_relating_records_of_different_kinds(client: Client, clock: FakeClock) -> None:
    memory = await save_memory(client, "The export writes JSON with sorted keys.")
    action = (await call(client, "memory_action_create", title="Write the exporter"))["action"]["id"]

    related = await call(
        client, "memory_relate", source_id=action, target_id=memory, type="depends_on", weight=0.7, note="spec"
    )

    assert related["created"] is True
    relation = related["relation"]
    assert relation["id"].startswith("rel_")
    assert relation == {
        "id": relation["id"],
        "source_id": action,
        "target_id": memory,
        "type": "depends_on",
        "weight": 0.7,
        "note": "spec",
        "created_at": "2026-01-05T09:00:00.000000Z",
    }


async def test_the_same_edge_again_updates_its_weight(client: Client) -> None:
    a = await save_memory(client, "Alpha uses SQLite.")
    b = await save_lesson(client, "Always open SQLite in WAL mode.")
    first = await call(client, "memory_relate", source_id=a, target_id=b, type="mentions", weight=0.9, note="why")

    again = await call(client, "memory_relate", source_id=a, target_id=b, type="mentions", weight=0.2)
    other_type = await call(client, "memory_relate", source_id=a, target_id=b, type="causes")
    reverse = await call(client, "memory_relate", source_id=b, target_id=a, type="mentions")

    assert again["created"] is False
    assert again["relation"]["id"] == first["relation"]["id"]
    assert again["relation"]["weight"] == 0.2
    assert again["relation"]["note"] == "why"  # kept when no new note is given
    assert other_type["created"] is True
    assert reverse["created"] is True
    walked = await call(client, "memory_related", id=a)
    assert sorted(e["id"] for e in walked["edges"]) == sorted(
        [first["relation"]["id"], other_type["relation"]["id"], reverse["relation"]["id"]]
    )


async def test_relating_unknown_or_foreign_records_is_refused(client: Client) -> None:
    mine = await save_memory(client, "Mine.")
    theirs = await save_memory(client, "Theirs.", project="other")

    message = await call_error(client, "memory_relate", source_id=mine, target_id="mem_nope")
    assert "No record 'mem_nope' in this project" in message
    assert "target_id" in message
    message = await call_error(client, "memory_relate", source_id="junk", target_id=mine)
    assert "'junk'" in message
    assert "source_id" in message
    assert theirs in await call_error(client, "memory_relate", source_id=mine, target_id=theirs)
    assert "target_id" in await call_error(client, "memory_relate", source_id=mine, target_id=mine)
    assert "weight" in await call_error(client, "memory_relate", source_id=mine, target_id=mine, weight=2)
    assert "type" in await call_error(client, "memory_relate", source_id=mine, target_id=mine, type="Bad Type")
    assert "mem_nope" in await call_error(client, "memory_related", id="mem_nope")


async def test_a_global_lesson_can_be_related(client: Client) -> None:
    memory = await save_memory(client, "We deploy on Fridays.")
    lesson = await save_lesson(client, "Never deploy on Fridays.", scope="global")
    related = await call(client, "memory_relate", source_id=lesson, target_id=memory, type="contradicts")
    assert related["created"] is True
    (node,) = (await call(client, "memory_related", id=memory))["nodes"]
    assert (node["id"], node["kind"], node["title"]) == (lesson, "lesson", "Never deploy on Fridays.")


async def build_graph(client: Client) -> dict[str, str]:
    """m1 -causes(0.8)-> a1 -part_of(0.5)-> a2;  m1 -mentions(0.4)-> l1;  m2 -fixes(1.0)-> m1."""
    ids = {
        "m1": await save_memory(client, "The pool runs out under load."),
        "m2": await save_memory(client, "Closing sessions fixed the pool."),
        "l1": await save_lesson(client, "Close database sessions."),
        "a1": (await call(client, "memory_action_create", title="Size the pool"))["action"]["id"],
        "a2": (await call(client, "memory_action_create", title="Performance epic"))["action"]["id"],
    }
    for source, target, type_, weight in (
        ("m1", "a1", "causes", 0.8),
        ("a1", "a2", "part_of", 0.5),
        ("m1", "l1", "mentions", 0.4),
        ("m2", "m1", "fixes", 1.0),
    ):
        await call(client, "memory_relate", source_id=ids[source], target_id=ids[target], type=type_, weight=weight)
    return ids


def nodes(result: dict[str, Any], ids: dict[str, str]) -> list[tuple[str, int, str, float]]:
    names = {v: k for k, v in ids.items()}
    return [(names[n["id"]], n["hops"], n["via"], n["weight"]) for n in result["nodes"]]


async def test_related_walks_one_and_two_hops(client: Client) -> None:
    ids = await build_graph(client)

    one = await call(client, "memory_related", id=ids["m1"])
    two = await call(client, "memory_related", id=ids["m1"], hops=2)

    assert one["start"] == ids["m1"]
    # Nearest first, then strongest.
    assert nodes(one, ids) == [("m2", 1, "fixes", 1.0), ("a1", 1, "causes", 0.8), ("l1", 1, "mentions", 0.4)]
    assert len(one["edges"]) == 3
    assert nodes(two, ids) == [
        ("m2", 1, "fixes", 1.0),
        ("a1", 1, "causes", 0.8),
        ("l1", 1, "mentions", 0.4),
        ("a2", 2, "part_of", pytest.approx(0.4)),  # 0.8 × 0.5
    ]
    assert len(two["edges"]) == 4
    kinds = {n["id"]: (n["kind"], n["title"]) for n in two["nodes"]}
    assert kinds[ids["a2"]] == ("action", "Performance epic")
    assert kinds[ids["m2"]][0] == "memory"
    assert kinds[ids["l1"]] == ("lesson", "Close database sessions.")


async def test_a_paths_weight_is_shown_to_four_places(client: Client) -> None:
    texts = ("The cache lives in Redis.", "Deploys run on Fridays.", "Tests use SQLite files.")
    x, y, z = [(await call(client, "memory_save", content=text))["id"] for text in texts]
    await call(client, "memory_relate", source_id=x, target_id=y, weight=0.6)
    await call(client, "memory_relate", source_id=y, target_id=z, weight=0.3)

    walked = await call(client, "memory_related", id=x, hops=2)

    assert [(n["id"], n["weight"]) for n in walked["nodes"]] == [(y, 0.6), (z, 0.18)]  # not 0.18000000000000002


async def test_related_filters_by_type_direction_and_limit(client: Client) -> None:
    ids = await build_graph(client)

    typed = await call(client, "memory_related", id=ids["m1"], hops=2, types=["causes", "part_of"])
    outgoing = await call(client, "memory_related", id=ids["m1"], direction="out")
    incoming = await call(client, "memory_related", id=ids["m1"], direction="in")
    from_a1_in = await call(client, "memory_related", id=ids["a1"], direction="in", hops=2)
    limited = await call(client, "memory_related", id=ids["m1"], hops=2, limit=2)

    assert nodes(typed, ids) == [("a1", 1, "causes", 0.8), ("a2", 2, "part_of", pytest.approx(0.4))]
    assert nodes(outgoing, ids) == [("a1", 1, "causes", 0.8), ("l1", 1, "mentions", 0.4)]
    assert nodes(incoming, ids) == [("m2", 1, "fixes", 1.0)]
    assert nodes(from_a1_in, ids) == [("m1", 1, "causes", 0.8), ("m2", 2, "fixes", 0.8)]
    assert nodes(limited, ids) == [("m2", 1, "fixes", 1.0), ("a1", 1, "causes", 0.8)]
    # Only edges between the start and the nodes shown.
    kept = {ids["m1"], ids["m2"], ids["a1"]}
    assert len(limited["edges"]) == 2
    assert all(e["source_id"] in kept and e["target_id"] in kept for e in limited["edges"])


async def test_relations_survive_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        ids = await build_graph(first)
        before = await call(first, "memory_related", id=ids["m1"], hops=3)
    async with Client(build_server(settings, clock)) as second:
        after = await call(second, "memory_related", id=ids["m1"], hops=3)
        again = await call(second, "memory_relate", source_id=ids["m1"], target_id=ids["a1"], type="causes")
    assert after == before
    assert len(after["nodes"]) == 4
    assert again["created"] is False


# -- profile -------------------------------------------------------------------------------------


async def test_the_profile_summarises_the_project(client: Client) -> None:
    await call(client, "memory_observe", content="Edited the parser.", concepts=["parser", "tokens"], files=["a.py"])
    await call(client, "memory_observe", content="Edited the lexer.", concepts=["parser"], files=["a.py", "b.py"])
    await save_memory(client, "The user prefers tabs over spaces.", kind="preference", concepts=["style"])
    await save_memory(client, "The parser is hand written.", concepts=["parser"])
    await save_lesson(client, "Test the parser on empty input.")
    await save_lesson(client, "A global lesson.", scope="global")
    await call(client, "memory_outcome_record", task="Fix the parser crash", success=True)
    await save_memory(client, "Elsewhere.", project="other")

    profile = await call(client, "memory_profile")

    assert profile["project"] == "test"
    assert (profile["sessions"], profile["observations"], profile["memories"], profile["lessons"]) == (1, 2, 2, 1)
    assert profile["top_concepts"][0] == {"name": "parser", "count": 3}
    assert {"name": "style", "count": 1} in profile["top_concepts"]
    assert profile["top_files"] == [{"name": "a.py", "count": 2}, {"name": "b.py", "count": 1}]
    assert profile["preferences"] == ["The user prefers tabs over spaces."]
    assert [(s["task_type"], s["outcomes"], s["mean_score"]) for s in profile["task_types"]] == [("bugfix", 1, 1.0)]


async def test_an_empty_project_has_an_empty_profile(client: Client) -> None:
    profile = await call(client, "memory_profile")
    assert profile == {
        "project": "test",
        "sessions": 0,
        "observations": 0,
        "memories": 0,
        "lessons": 0,
        "top_concepts": [],
        "top_files": [],
        "preferences": [],
        "task_types": [],
        "reflected_at": None,
        "insights": [],
    }


async def test_the_profile_does_not_count_faded_lessons(client: Client, clock: FakeClock) -> None:
    await save_lesson(client, "A hunch never confirmed.")
    await save_lesson(client, "Confirmed twice.")
    await save_lesson(client, "Confirmed twice!")
    clock.advance(weeks=40)
    assert (await call(client, "memory_lessons"))["total"] == 1

    assert (await call(client, "memory_profile"))["lessons"] == 1


# -- context -------------------------------------------------------------------------------------


async def fill_every_section(client: Client, clock: FakeClock) -> dict[str, str]:
    ids = {}
    ids["slot"] = (await call(client, "memory_slot_append", name="persona", text="You are a meticulous reviewer."))[
        "slot"
    ]["id"]
    await call(client, "memory_slot_append", name="self_notes", text="Unpinned scratch text.")
    ids["session"] = (await call(client, "memory_observe", content="Investigated the flaky export test."))["session_id"]
    clock.advance(minutes=5)
    ids["lesson"] = await save_lesson(client, "Run the export test three times before calling it fixed.")
    outcome = await call(
        client,
        "memory_outcome_record",
        task="Fix the flaky export test",
        success=False,
        mistake_cards=[{"type": "premature_fix", "correct_decision": "reproduce the flake first"}],
    )
    ids["card"] = outcome["derived"]["mistake_cards"][0]
    ids["memory"] = await save_memory(client, "Exports are written atomically via a temp file.", importance=0.9)
    return ids


async def test_the_context_has_every_section_in_order(client: Client, clock: FakeClock) -> None:
    ids = await fill_every_section(client, clock)

    result = await context(client)

    text = result["text"]
    assert text.startswith("# Memory for project test\n")
    positions = [text.index(h) for h in HEADINGS]
    assert positions == sorted(positions)
    assert [s["name"] for s in result["sections"]] == SECTION_NAMES
    assert all(s["included"] == 1 and s["omitted"] == 0 for s in result["sections"])
    assert result["omitted"] == []
    assert result["budget"] == 2000
    assert result["tokens"] == math.ceil(len(text) / 4)

    assert "### persona\nYou are a meticulous reviewer." in text
    assert "Unpinned scratch text." not in text
    assert "1 session, 1 observation, 1 memory, 1 lesson." in text
    assert "bugfix: 0/1 succeeded, mean score 0.00" in text
    assert f"- [lesson 0.50] Run the export test three times before calling it fixed. ({ids['lesson']})" in text
    assert "- Seen 1x, premature_fix in 'Fix the flaky export test': do reproduce the flake first" in text
    assert "Investigated the flaky export test." in text
    assert f"- [fact] Exports are written atomically via a temp file. ({ids['memory']})" in text


async def test_an_empty_project_compiles_to_just_the_header(client: Client) -> None:
    result = await context(client)
    assert result["text"] == "# Memory for project test\n"
    assert result["tokens"] == 7
    assert result["sections"] == []
    assert result["omitted"] == []


async def test_a_small_budget_cuts_sections_at_item_boundaries_and_lists_what_was_left_out(
    client: Client,
) -> None:
    memories = [
        await save_memory(client, f"Memory {i}: " + "lorem ipsum dolor " * 20, importance=1 - i / 10) for i in range(5)
    ]

    result = await context(client, budget=300)

    text = result["text"]
    assert result["tokens"] == math.ceil(len(text) / 4) <= 300
    shown = [m for m in memories if m in text]
    left = [o["id"] for o in result["omitted"] if o["section"] == "memories"]
    assert shown + left == memories  # most important first, cut once, the rest listed in order
    assert shown
    assert left
    assert all(o["title"] for o in result["omitted"])
    (section,) = [s for s in result["sections"] if s["name"] == "memories"]
    assert (section["included"], section["omitted"]) == (len(shown), len(left))
    # Every included memory is a whole line (long contents are shortened to 300 characters with "…").
    for memory_id in shown:
        (line,) = [x for x in text.splitlines() if memory_id in x]
        assert line.startswith(f"- [fact] Memory {memories.index(memory_id)}: lorem ipsum")
        assert line.endswith(f"… ({memory_id})")


async def test_an_item_too_big_for_the_budget_is_left_out_and_later_sections_still_fill(client: Client) -> None:
    slot = (await call(client, "memory_slot_create", name="persona", content="p " * 900))["slot"]
    memory = await save_memory(client, "A short memory that fits.")

    result = await context(client, budget=200)

    assert result["tokens"] <= 200
    assert [(o["section"], o["id"], o["title"]) for o in result["omitted"]] == [("pinned_slots", slot["id"], "persona")]
    assert "## Pinned" not in result["text"]
    assert memory in result["text"]


async def test_a_query_focuses_memories_and_lessons(client: Client) -> None:
    docker = await save_memory(client, "Docker images are pinned by digest.", importance=0.2)
    sqlite = await save_memory(client, "SQLite runs in WAL mode.", importance=0.9)
    react = await save_memory(client, "React components live in src/ui.", importance=0.6)
    docker_lesson = await save_lesson(client, "Rebuild Docker images without cache after a base bump.", confidence=0.3)
    sqlite_lesson = await save_lesson(client, "Vacuum SQLite after big deletes.", confidence=0.9)

    plain = (await context(client))["text"]
    focused = (await context(client, query="docker images digest"))["text"]

    # Without a query: memories by importance, lessons by confidence.
    assert plain.index(sqlite) < plain.index(react) < plain.index(docker)
    assert plain.index(sqlite_lesson) < plain.index(docker_lesson)
    # With a query: the matching ones come first, the best of the rest still follow.
    assert focused.index(docker) < focused.index(sqlite) < focused.index(react)
    assert focused.index(docker_lesson) < focused.index(sqlite_lesson)


async def test_a_task_type_focuses_lessons_and_memories(client: Client) -> None:
    deploy_lesson = await save_lesson(
        client, "Tag the release before building.", task_type="deployment", confidence=0.3
    )
    test_lesson = await save_lesson(client, "Run the slow tests nightly.", task_type="testing", confidence=0.9)
    general_lesson = await save_lesson(client, "Read the whole error message.", confidence=0.95)
    deploy_memory = await save_memory(client, "The deployment runs from GitHub Actions.", importance=0.1)
    other_memory = await save_memory(client, "The docs are built with mkdocs.", importance=0.9)

    plain = (await context(client))["text"]
    focused = (await context(client, task_type="deployment"))["text"]

    assert plain.index(general_lesson) < plain.index(test_lesson) < plain.index(deploy_lesson)
    assert plain.index(other_memory) < plain.index(deploy_memory)
    assert focused.index(general_lesson) < focused.index(test_lesson)  # another task type comes after the rest
    # The task type focuses: what mentions it comes first, untyped lessons and other memories follow.
    assert focused.index(deploy_lesson) < focused.index(general_lesson)
    assert focused.index(deploy_memory) < focused.index(other_memory)


async def test_faded_lessons_are_not_in_the_context(client: Client, clock: FakeClock) -> None:
    lesson = await save_lesson(client, "An old hunch that was never confirmed.")
    assert lesson in (await context(client))["text"]
    clock.advance(weeks=40)
    assert lesson not in (await context(client))["text"]


async def test_global_lessons_follow_the_projects_in_the_context(client: Client) -> None:
    glob = await save_lesson(client, "Global: write small commits.", scope="global", confidence=1.0)
    local = await save_lesson(client, "Local: run make check.", confidence=0.2)
    text = (await context(client))["text"]
    assert text.index(local) < text.index(glob)


async def test_the_default_budget_is_a_setting(settings: Settings, clock: FakeClock) -> None:
    small = settings.model_copy(update={"context_budget": 150})
    async with Client(build_server(small, clock)) as client:
        for i in range(6):
            await save_memory(client, f"Fact {i}: " + "alpha beta gamma " * 10)
        result = await context(client)
    assert result["budget"] == 150
    assert result["tokens"] <= 150
    assert result["omitted"]


# -- context budget property ---------------------------------------------------------------------

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def words(rng: random.Random, length: int) -> str:
    """Pseudo-words (no secrets, no stop words) of exactly `length` characters."""
    out = ""
    while len(out) < length:
        out += "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) + " "
    return out[:length].strip() or "x"


@hypothesis.settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    budget=st.integers(100, 3000),
    slot_sizes=st.lists(st.integers(1, 2000), max_size=3),
    lesson_sizes=st.lists(st.integers(5, 600), max_size=6),
    memory_sizes=st.lists(st.integers(5, 800), max_size=6),
    session_sizes=st.lists(st.integers(5, 400), max_size=3),
    card_sizes=st.lists(st.integers(5, 300), max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
async def test_the_context_never_exceeds_its_budget(
    tmp_path: Path,
    budget: int,
    slot_sizes: list[int],
    lesson_sizes: list[int],
    memory_sizes: list[int],
    session_sizes: list[int],
    card_sizes: list[int],
    seed: int,
) -> None:
    rng = random.Random(seed)
    settings = Settings(db=tmp_path / f"{uuid.uuid4().hex}.db", project="test", synchronous="normal")
    clock = FakeClock()
    async with Client(build_server(settings, clock)) as client:
        slots: dict[str, str] = {}
        for i, size in enumerate(slot_sizes):
            created = await call(client, "memory_slot_create", name=f"slot_{i}", content=words(rng, size), pinned=True)
            slots[created["slot"]["id"]] = f"slot_{i}"
        await call(client, "memory_slot_create", name="unpinned", content="hidden " * 10, pinned=False)
        sessions = set()
        for i, size in enumerate(session_sizes):
            observed = await call(client, "memory_observe", content=words(rng, size), session_id=f"conv-{i}")
            sessions.add(observed["session_id"])
            clock.advance(minutes=1)
        lessons = set()
        for i, size in enumerate(lesson_sizes):
            lessons.add(await save_lesson(client, f"L{i} {words(rng, size)}", confidence=rng.uniform(0.2, 1.0)))
        cards = set()
        for i, size in enumerate(card_sizes):
            outcome = await call(
                client,
                "memory_outcome_record",
                task=f"task {i}",
                task_type="chore",
                score=0.9,
                mistake_cards=[{"type": "slip", "correct_decision": words(rng, size)}],
            )
            cards.update(outcome["derived"]["mistake_cards"])
        memories = set()
        for i, size in enumerate(memory_sizes):
            memories.add(await save_memory(client, f"M{i} {words(rng, size)}", importance=rng.random()))

        result = await context(client, budget=budget)

    text = result["text"]
    assert result["tokens"] == math.ceil(len(text) / 4) <= budget
    assert result["budget"] == budget

    real_ids = set(slots) | sessions | lessons | cards | memories | {None}  # None: the profile
    omitted = {o["id"]: o for o in result["omitted"]}
    assert len(omitted) == len(result["omitted"])
    for item_id, item in omitted.items():
        assert item_id in real_ids, item
        assert item_id is None or item_id not in text, item
    # One fetch hint returns everything left out (the profile through its own tool).
    left_ids = [o["id"] for o in result["omitted"] if o["id"]]
    calls = [f"memory_smart_search(ids={json.dumps(left_ids)})"] if left_ids else []
    calls += ["memory_profile()"] if None in omitted else []
    assert result["fetch"] == ("; ".join(calls) or None)
    # Everything that competes for the context is either in the text or left out: listed (as many
    # as the budget allows), else counted.
    left = sum(section["omitted"] for section in result["sections"])
    assert len(omitted) == min(left, 20, max(5, budget // 50))
    assert len(omitted) + result["omitted_unlisted"] == left
    for lesson_id in lessons | memories:
        assert not (lesson_id in text and lesson_id in omitted), lesson_id
        assert lesson_id in text or lesson_id in omitted or result["omitted_unlisted"], lesson_id
    for slot_id, name in slots.items():
        assert not (f"### {name}\n" in text and slot_id in omitted), name
        assert f"### {name}\n" in text or slot_id in omitted or result["omitted_unlisted"], name
    assert "hidden" not in text
    for section in result["sections"]:
        listed = [o for o in result["omitted"] if o["section"] == section["name"]]
        assert section["omitted"] >= len(listed), section
        assert section["omitted"] == len(listed) or result["omitted_unlisted"], section
    counts = {s["name"]: s["included"] + s["omitted"] for s in result["sections"]}
    assert counts.get("mistake_cards", 0) == len(cards)
    assert counts.get("sessions", 0) == len(sessions)
    # Headings present are in the documented order.
    positions = [text.index(h) for h in HEADINGS if h in text]
    assert positions == sorted(positions)


# -- prompt and resources ------------------------------------------------------------------------


async def test_the_session_start_prompt_carries_the_compiled_context(client: Client, clock: FakeClock) -> None:
    await fill_every_section(client, clock)

    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    prompt = await client.get_prompt("session_start", {"query": "flaky export test"})
    compiled = await context(client, query="flaky export test")

    assert "session_start" in prompts
    (message,) = prompt.messages
    assert message.role == "user"
    assert message.content.type == "text"
    assert compiled["text"] in message.content.text
    assert "memory_outcome_record" in message.content.text
    assert "Left out for space" not in message.content.text


async def test_the_session_start_prompt_lists_what_was_left_out(client: Client) -> None:
    for i in range(5):
        await call(client, "memory_slot_create", name=f"block_{i}", content=f"{i} " * 900, pinned=True)
    compiled = await context(client)
    assert compiled["omitted"]

    prompt = await client.get_prompt("session_start", {})

    text = prompt.messages[0].content.text
    assert compiled["text"] in text
    expected = f"memory_smart_search(ids={json.dumps([o['id'] for o in compiled['omitted']])})"
    assert compiled["fetch"] == expected
    assert text.endswith("\nLeft out for space (fetch with): " + expected)


async def test_left_out_items_can_be_fetched_the_way_the_prompt_says(client: Client) -> None:
    slot = (await call(client, "memory_slot_create", name="persona", content="p " * 900, pinned=True))["slot"]
    outcome = await call(
        client,
        "memory_outcome_record",
        task="Fix it",
        success=False,
        mistake_cards=[{"type": "slip", "correct_decision": "c " * 400}],
    )
    await save_lesson(client, "Lessons come before mistake cards and take some of the budget " + "l " * 20)
    compiled = await context(client, budget=100)
    left = [o["id"] for o in compiled["omitted"]]
    assert slot["id"] in left
    assert outcome["derived"]["mistake_cards"][0] in left

    fetched = await call(client, "memory_smart_search", ids=left)

    assert fetched["missing"] == []


async def test_the_slot_resource_returns_the_slot_content(client: Client) -> None:
    await call(client, "memory_slot_append", name="persona", text="A careful reviewer.")
    await call(client, "memory_slot_create", name="persona", content="Someone else.", project="other")

    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    here = await client.read_resource("memory://slots/persona")
    there = await client.read_resource("memory://slots/persona?project=other")

    assert templates == {"memory://context{?project,query,task_type,budget}", "memory://slots/{name}{?project}"}
    (content,) = here.contents
    assert content.text == "A careful reviewer."
    assert content.mime_type == "text/plain"
    assert there.contents[0].text == "Someone else."


async def test_resources_list_names_the_context_and_every_visible_slot(client: Client) -> None:
    await call(client, "memory_slot_create", name="persona", content="A careful reviewer.", description="Who I am")
    await call(client, "memory_slot_create", name="house_rules", content="No force pushes.", scope="global")
    await call(client, "memory_slot_create", name="elsewhere", content="Not ours.", project="other")

    listed = {str(r.uri): r for r in (await client.list_resources()).resources}
    readable = {uri: (await client.read_resource(uri)).contents[0].text for uri in listed}

    assert sorted(listed) == ["memory://context", "memory://slots/house_rules", "memory://slots/persona"]
    assert listed["memory://slots/persona"].description == "Who I am"
    assert listed["memory://slots/house_rules"].title == "Slot house_rules (global)"
    assert readable["memory://slots/persona"] == "A careful reviewer."
    assert readable["memory://slots/house_rules"] == "No force pushes."
    assert readable["memory://context"] == (await context(client))["text"]


async def test_an_unknown_slot_resource_is_an_error(client: Client) -> None:
    with pytest.raises(MCPError, match="No slot 'nothing' in this project"):
        await client.read_resource("memory://slots/nothing")


async def test_the_context_resource_matches_memory_context(client: Client, clock: FakeClock) -> None:
    ids = await fill_every_section(client, clock)
    sqlite = await save_memory(client, "SQLite runs in WAL mode.")
    await save_memory(client, "Elsewhere things.", project="other")

    plain = await client.read_resource("memory://context")
    focused = await client.read_resource("memory://context?query=flaky%20export&task_type=bugfix")
    other = await client.read_resource("memory://context?project=other")

    assert plain.contents[0].text == (await context(client))["text"]
    assert plain.contents[0].mime_type == "text/markdown"
    assert focused.contents[0].text == (await context(client, query="flaky export", task_type="bugfix"))["text"]
    assert other.contents[0].text == (await context(client, project="other"))["text"]
    # The query in the URI is decoded and does focus the context: its memory comes first.
    focused_text = focused.contents[0].text
    assert sqlite in plain.contents[0].text
    assert focused_text.index(ids["memory"]) < focused_text.index(sqlite)
    assert "Elsewhere things." in other.contents[0].text


# -- restart -------------------------------------------------------------------------------------


async def test_the_context_is_the_same_after_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        await fill_every_section(first, clock)
        before = await context(first, query="flaky export")
    async with Client(build_server(settings, clock)) as second:
        after = await context(second, query="flaky export")
        resource = await second.read_resource("memory://slots/persona")
    assert after == before
    assert resource.contents[0].text == "You are a meticulous reviewer."
