"""The profile's top concepts and files, and its count of observations, come from running counts the
database keeps: after any mix of observing, saving, superseding, forgetting, importing, folding and
consolidating, in any project, they equal a count made afresh from the records themselves (read back
through an export), whichever server wrote them."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_tools_operations import export_document, fresh_settings

CONCEPTS = ["parser", "router", "cache_layer", "auth", "billing", "search_index"]
FILES = ["src/app.py", "src/db.py", "lib/util.ts", "docs/guide.md"]
PROJECTS = ["test", "other"]
TOP = 10  # memory_profile lists this many of each


def counted_afresh(document: dict[str, Any], project: str, field: str) -> list[tuple[str, int]]:
    """The top entries of `field` over a project's observations and latest memories, as a profile orders them."""
    counts: Counter[str] = Counter()
    for row in document["tables"]["observations"]:
        if row["project"] == project:
            counts.update(row[field])
    for row in document["tables"]["memories"]:
        if row["project"] == project and row["is_latest"]:
            counts.update(row[field])
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP]


async def profile_counts(client: Client, project: str) -> dict[str, list[tuple[str, int]]]:
    profile = await call(client, "memory_profile", project=project)
    return {
        field: [(entry["name"], entry["count"]) for entry in profile[f"top_{field}"]] for field in ("concepts", "files")
    }


async def assert_counts_true(client: Client) -> None:
    document = await export_document(client, all_projects=True)
    for project in PROJECTS:
        expected = {field: counted_afresh(document, project, field) for field in ("concepts", "files")}
        assert await profile_counts(client, project) == expected, project
        # the observation count comes from the sessions' own counts: it must hold every one kept
        kept = sum(row["project"] == project for row in document["tables"]["observations"])
        assert (await call(client, "memory_profile", project=project))["observations"] == kept, project


def _lists(rng: random.Random) -> dict[str, Any]:
    return {"concepts": rng.sample(CONCEPTS, rng.randint(0, 3)), "files": rng.sample(FILES, rng.randint(0, 2))}


async def _step(rng: random.Random, client: Client, other: Client, n: int) -> None:
    """One random write of any kind that changes which lists count."""
    project = rng.choice(PROJECTS)
    roll = rng.random()
    stored = (await export_document(client, project=project))["tables"]
    if roll < 0.35:
        session = f"{project}-s{rng.randint(1, 3)}"
        await call(client, "memory_observe", content=f"Note {n}", project=project, session_id=session, **_lists(rng))
    elif roll < 0.55:
        arguments: dict[str, Any] = {"content": f"Decision {n}: keep {rng.choice(CONCEPTS)}", "project": project}
        latest = [m["id"] for m in stored["memories"] if m["is_latest"]]
        if latest and rng.random() < 0.5:
            arguments["supersedes"] = rng.choice(latest)
        await call(client, "memory_save", **arguments, **_lists(rng))
    elif roll < 0.8 and stored["observations"] + stored["memories"]:
        gone = rng.choice(stored["observations"] + stored["memories"])["id"]
        await call(client, "memory_forget", ids=[gone], project=project)
    elif roll < 0.9:
        await call(other, "memory_observe", content=f"Remote note {n}", project=project, **_lists(rng))
        await call(other, "memory_save", content=f"Remote fact {n} about billing", project=project, **_lists(rng))
        await call(client, "memory_import", document=await export_document(other, all_projects=True))
    elif stored["sessions"]:
        await call(client, "memory_forget", session_id=rng.choice(stored["sessions"])["id"], project=project)


async def test_the_running_count_equals_a_fresh_count_after_random_writes(tmp_path: Path) -> None:
    clock = FakeClock()
    rng = random.Random(7)
    async with AsyncExitStack() as stack:
        client, other = [
            await stack.enter_async_context(Client(build_server(fresh_settings(tmp_path, name), clock)))
            for name in ("here", "there")
        ]
        for n in range(120):
            await _step(rng, client, other, n)
            clock.advance(minutes=rng.randint(1, 200))
            if n % 20 == 19:
                await assert_counts_true(client)
        await call(client, "memory_consolidate")
        await assert_counts_true(client)
        final = await profile_counts(client, "test")
    assert len(final["concepts"]) >= 3  # the walk left something to count
    assert len(final["files"]) >= 2


async def test_a_second_server_on_the_same_file_keeps_the_same_count(tmp_path: Path) -> None:
    clock = FakeClock()
    settings = fresh_settings(tmp_path)
    async with Client(build_server(settings, clock)) as first, Client(build_server(settings, clock)) as second:
        await call(first, "memory_observe", content="Parser rewrite", concepts=["parser"], files=["src/app.py"])
        await call(second, "memory_observe", content="Parser tests", concepts=["parser", "auth"])
        seen_by_first = await profile_counts(first, "test")

    assert seen_by_first == {"concepts": [("parser", 2), ("auth", 1)], "files": [("src/app.py", 1)]}


async def test_the_observation_count_follows_folds_forgets_and_imports(tmp_path: Path) -> None:
    clock = FakeClock()
    async with (
        Client(build_server(fresh_settings(tmp_path, "here", observation_cap=10), clock)) as client,
        Client(build_server(fresh_settings(tmp_path, "there"), clock)) as other,
    ):
        for n in range(25):  # past the cap: the session folds as it grows
            await call(client, "memory_observe", content=f"Long note {n}", session_id="long")
            clock.advance(minutes=1)
        short = [
            (await call(client, "memory_observe", content=f"Short {n}", session_id="short"))["id"] for n in range(3)
        ]
        for n in range(6):  # the same session on another machine, merged in by an import
            await call(other, "memory_observe", content=f"Remote note {n}", session_id="long")
        await call(client, "memory_import", document=await export_document(other, all_projects=True))
        await call(client, "memory_forget", ids=short[:1])
        await call(client, "memory_consolidate")
        document = await export_document(client)
        profile = await call(client, "memory_profile")
        listed = await call(client, "memory_observations", limit=1)

    kept = len(document["tables"]["observations"])
    assert sum(s["folded_count"] for s in document["tables"]["sessions"]) > 0  # the cap folded some
    assert profile["observations"] == listed["total"] == kept
    assert kept <= 10 + 2  # the long session within its cap, the short one less its forgotten turn


def _steps_to_delete(path: Path, obs_id: str) -> int:
    """SQLite's virtual machine steps (in hundreds) to delete one observation, its triggers included."""
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    with sqlite3.connect(path) as conn:
        conn.set_progress_handler(tick, 100)
        conn.execute("DELETE FROM observations WHERE id = ?", (obs_id,))
        conn.set_progress_handler(None, 0)
    return steps


async def test_taking_a_record_away_reads_only_the_counts_of_its_own_values(client: Client, settings: Settings) -> None:
    ids = []
    for i in range(2):
        saved = await call(client, "memory_observe", content=f"Note {i}", concepts=["a", f"b{i}"], files=["a.py"])
        ids.append(saved["id"])
    small = _steps_to_delete(settings.db, ids[0])
    with sqlite3.connect(settings.db) as conn:  # a project that has said 20,000 other things
        conn.executemany(
            "INSERT INTO profile_tally (project, field, value, n) VALUES (?, ?, ?, 3)",
            [(settings.project, field, f"other{i}") for field in ("concepts", "files") for i in range(10_000)],
        )
    large = _steps_to_delete(settings.db, ids[1])

    # Reading every count of the project to find those left at 0 took over a hundred times as many.
    assert large <= small + 5, (small, large)
    with sqlite3.connect(settings.db) as conn:
        left = dict(conn.execute("SELECT value, n FROM profile_tally WHERE value NOT LIKE 'other%'").fetchall())
    assert left == {}  # both notes gone: every count of their own values went with them
