"""How long do the reads that rank every lesson take as lessons pile up?

memory_context, memory_lessons, memory_profile and memory_lesson_recall without a query rank all of a
project's lessons by their confidence as of now (decayed for the weeks since it was last set, so no
stored order can answer). For each N a temporary database gets N lessons of the project (synthetic
text from bench/search.py, a mix of kinds and task types, reinforced over the past year, one in ten
deleted) and N/10 global ones; then the service layer is timed. The baselines, in the same run, are
how those reads ranked before: every lesson read whole (text, tags, source) and judged as a record;
then each one's standing alone read and judged in Python. Now SQL judges the standings, from an index
that holds them, and hands over only the page shown.

    python bench/lessons.py                  # N = 1k, 10k, 100k
    python bench/lessons.py --sizes 1000 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import code_version, load_note, machine, ms, pct, ratio, table
from search import PROJECT, Corpus, _settings

BATCH = 5_000
CALLS = 7
TASK_TYPES = ("deploy", "testing", "refactor", "debugging", "review", "docs", "migration", "release")
KINDS = ("lesson", "lesson", "heuristic", "anti_pattern", "rule_works", "rule_avoid")
NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


async def _populate(app: Any, n: int) -> None:
    """Store n lessons of the project and n/10 global ones, as the services would, in large transactions."""
    from mcp_memory.clock import to_iso
    from mcp_memory.ids import new_id
    from mcp_memory.models.records import Lesson
    from mcp_memory.repositories.lessons import LessonRepository
    from mcp_memory.services.common import GLOBAL_PROJECT
    from mcp_memory.services.lessons import lesson_doc

    rng = random.Random(n)
    corpus = Corpus()
    for project, count, stream in ((PROJECT, n, 3), (GLOBAL_PROJECT, max(n // 10, 1), 4)):
        for _, texts in corpus.chunks(count, BATCH, stream):
            async with app.deps.db.transaction("bench_populate", project=project) as tx:
                repo, docs = LessonRepository(tx), []
                for text in texts:
                    set_at = to_iso(NOW - timedelta(days=rng.uniform(0, 365)))
                    lesson = Lesson(
                        id=new_id("lesson"),
                        project=project,
                        kind=rng.choice(KINDS),
                        content=text[:300],
                        tags=[rng.choice(TASK_TYPES)],
                        task_type=rng.choice((None, *TASK_TYPES)),
                        confidence=rng.uniform(0.2, 1.0),
                        reinforcements=rng.choice((0, 0, 1, 2, 5)),
                        fingerprint=uuid.uuid4().hex,
                        last_reinforced_at=set_at,
                        deleted_at=set_at if rng.random() < 0.1 else None,
                        source={"bench": True},
                        created_at=set_at,
                        updated_at=set_at,
                    )
                    await repo.add(lesson)
                    if lesson.deleted_at is None:
                        docs.append(lesson_doc(lesson))
                await app.deps.indexer.put_many(tx, docs)


async def _whole_ranked(app: Any, limit: int) -> int:
    """The baseline: rank the project's lessons by reading every one whole; how many are active."""
    from mcp_memory.repositories.lessons import LessonRepository

    now = app.lessons.now()
    async with app.deps.db.read() as conn:
        lessons = await LessonRepository(conn).find([PROJECT])
    scored = []
    for lesson in lessons:
        confidence = app.lessons.confidence(lesson, now)
        if not app.lessons.faded(lesson, confidence):
            scored.append((-confidence, lesson.id, lesson))
    scored.sort(key=lambda entry: entry[:2])
    _ = [app.lessons.view(lesson, None, now) for _, _, lesson in scored[:limit]]
    return len(scored)


async def _standings_ranked(app: Any, limit: int) -> int:
    """The second baseline: every lesson's standing read (no text) and judged in Python, as before SQL
    judged them; the page shown read whole. How many are active."""
    from mcp_memory.repositories.lessons import LessonRepository, LessonStanding

    now = app.lessons.now()
    async with app.deps.db.read() as conn:
        rows = await conn.fetchall(
            "SELECT id, task_type, confidence, reinforcements, max(last_reinforced_at, coalesce(decayed_at, '')), "
            "deleted_at IS NOT NULL FROM lessons WHERE project = ? AND deleted_at IS NULL",
            (PROJECT,),
        )
        standings = [LessonStanding(*row) for row in rows]
        scored = sorted(
            (-confidence, standing.id)
            for standing, confidence, faded in app.lessons.standing_confidences(standings, now)
            if not faded
        )
        shown = await LessonRepository(conn).get_many([i for _, i in scored[:limit]], [PROJECT])
    _ = [app.lessons.view(lesson, None, now) for lesson in shown]
    return len(scored)


async def _times(call: Callable[[], Awaitable[Any]]) -> list[float]:
    out = []
    for _ in range(CALLS):
        started = time.perf_counter()
        await call()
        out.append(time.perf_counter() - started)
    return out


async def measure(n: int, folder: Path) -> dict[str, Any]:
    """Populate a fresh database with n lessons, reopen it, and time each read."""
    from mcp_memory.context import open_app

    settings = _settings(folder / "lessons.db", "normal")
    async with open_app(settings, lambda: NOW) as app:
        started = time.perf_counter()
        await _populate(app, n)
        populate_s = time.perf_counter() - started
    async with open_app(settings, lambda: NOW) as app:
        lessons = app.lessons
        query = Corpus().queries(1)[0]
        whole_active = await _whole_ranked(app, 50)

        def rank_all() -> Any:
            return lessons.rankings(PROJECT, None, task_types=[None], limit=50)

        [(_, ours_active)] = await rank_all()
        assert whole_active == ours_active == await _standings_ranked(app, 50), (whole_active, ours_active)
        rows = {
            "rank all (read whole: before)": await _times(lambda: _whole_ranked(app, 50)),
            "rank all (standings judged in Python: before)": await _times(lambda: _standings_ranked(app, 50)),
            "rank all (judged by SQL: now)": await _times(rank_all),
            "memory_context": await _times(lambda: app.context.compile(PROJECT)),
            "memory_context task_type": await _times(lambda: app.context.compile(PROJECT, task_type="deploy")),
            "memory_lessons page 1": await _times(
                lambda: lessons.lessons(
                    PROJECT, kinds=None, task_type=None, status="active", scope="all", limit=20, offset=0
                )
            ),
            "memory_profile": await _times(lambda: app.insights.profile(PROJECT)),
            "lesson_recall, no query": await _times(lambda: lessons.recall(PROJECT, None, limit=10)),
            "lesson_recall, query": await _times(lambda: lessons.recall(PROJECT, query, limit=10)),
        }
    return {"n": n, "active": ours_active, "populate_s": populate_s, "rows": rows}


def report(results: list[dict[str, Any]], wall: float, markdown: bool) -> str:
    header = [
        "bench/lessons.py - reads that rank every lesson, at the service layer",
        f"machine: {machine()}; code: {code_version()}",
        load_note(),
        f"wall time {wall:.1f} s; {CALLS} calls each, ms p50 / p95",
        "",
    ]
    names = list(results[0]["rows"])
    body = []
    for name in names:
        line = [name]
        for r in results:
            values = r["rows"][name]
            line.append(f"{ms(pct(values, 50))} / {ms(pct(values, 95))}")
        body.append(line)
    for before in names[:2]:
        speedup = [f"{before.split('(')[1].split(':')[0]} / SQL (p50)"]
        for r in results:
            rows = r["rows"]
            speedup.append(ratio(pct(rows[before], 50), pct(rows[names[2]], 50)))
        body.append(speedup)
    heads = ["read"] + [f"N={r['n']:,} ({r['active']:,} active)" for r in results]
    out = table("Lesson reads (ms)", heads, body, markdown=markdown)
    notes = [
        "Notes: N lessons of the project plus N/10 global ones; 'rank all' ranks the project's lessons and",
        "reads the 50 shown; memory_context also ranks the global scope (its profile line takes the project's",
        "count of active lessons from that ranking).",
        "populate (s): " + ", ".join(f"N={r['n']:,} {r['populate_s']:.1f}" for r in results),
    ]
    return "\n".join(header) + out + "\n" + "\n".join(notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated lesson counts")
    parser.add_argument("--markdown", action="store_true", help="also print the table as markdown")
    args = parser.parse_args()
    sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    started = time.perf_counter()
    results = []
    for n in sizes:
        folder = Path(tempfile.mkdtemp(prefix=f"mcp-memory-lessons-{n}-"))
        try:
            results.append(asyncio.run(measure(n, folder)))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"  N={n:>9,}: done", flush=True)
    wall = time.perf_counter() - started
    print(report(results, wall, markdown=False))
    if args.markdown:
        print(report(results, wall, markdown=True))


if __name__ == "__main__":
    main()
