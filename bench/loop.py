"""How long do memory_consolidate and memory_reflect take as memories grow, and how long does a
writer beside them wait?

For each N, a temporary database is filled with N memories (the synthetic notes of
bench/search.py, cut to 400 characters), one in fifty a near-duplicate of an earlier one (a
word changed), so a consolidation has merges to make. Then, at the service layer: a baseline
of saves alone; a consolidation pass, with a memory saved every 50 ms beside it; a reflect over
the whole history, likewise. A save beside a pass waits while the pass holds the write lock
(or keeps the event loop), so its longest wait shows what another client of a busy server feels;
the longest loop stall is the longest the event loop served nobody, felt or not by a save.

    python bench/loop.py                       # N = 5k, 20k, 100k
    python bench/loop.py --sizes 5000 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from _common import code_version, load_note, machine, ms, pct, ratio, secs, table
from search import PROJECT, Corpus, _settings, _times

T = TypeVar("T")
DUPLICATE_EVERY = 50
BATCH = 5_000
SAVE_EVERY_S = 0.05
STALL_TICK_S = 0.005


async def _populate(app: Any, n: int) -> int:
    """Store n memories (every DUPLICATE_EVERY-th a near-copy of an earlier one); returns the copies."""
    from mcp_memory.ids import new_id
    from mcp_memory.models.records import Memory
    from mcp_memory.repositories.memories import MemoryRepository
    from mcp_memory.services.memories import memory_doc

    corpus, copies = Corpus(), 0
    for start in range(0, n, BATCH):
        count = min(BATCH, n - start)
        texts = [t[:400] for t in corpus.texts(start, count, stream=7)]
        when = _times(start, count)
        async with app.deps.db.transaction("bench_populate", project=PROJECT) as tx:
            memories = []
            for i, text in enumerate(texts):
                if (start + i) % DUPLICATE_EVERY == DUPLICATE_EVERY - 1 and i > 0:
                    words = texts[i - 1].split()
                    text = " ".join([*words[:-1], "changed"])  # the previous memory, one word changed
                    copies += 1
                mem_id = new_id("memory")
                stamp = {"created_at": when[i], "updated_at": when[i]}
                memories.append(Memory(id=mem_id, project=PROJECT, kind="fact", content=text, root_id=mem_id, **stamp))
            repo = MemoryRepository(tx)
            for mem in memories:
                await repo.add(mem)
            await app.deps.indexer.put_many(tx, [memory_doc(m) for m in memories])
    return copies


async def _beside(app: Any, work: Awaitable[T]) -> tuple[T, float, list[float], float]:
    """Run `work` while saving a memory every SAVE_EVERY_S; returns its result, its seconds, how
    long each save beside it took, and the longest the event loop went without serving anyone
    (a save that happens to be asleep then does not feel it, the next request does)."""
    waits: list[float] = []
    stalls = [0.0]
    done = anyio.Event()

    async def saver() -> None:
        n = 0
        while not done.is_set():
            started = time.perf_counter()
            await app.memories.save(PROJECT, f"A note saved beside the pass, number {n} of the run.", "fact")
            waits.append(time.perf_counter() - started)
            n += 1
            with anyio.move_on_after(SAVE_EVERY_S):
                await done.wait()

    async def watch() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await anyio.sleep(STALL_TICK_S)
            stalls[0] = max(stalls[0], time.perf_counter() - started - STALL_TICK_S)

    result: Any = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(saver)
        tg.start_soon(watch)
        started = time.perf_counter()
        result = await work
        seconds = time.perf_counter() - started
        done.set()
    return result, seconds, waits, stalls[0]


async def _measure(n: int, folder: Path) -> dict[str, Any]:
    from mcp_memory.context import open_app

    db = folder / f"loop-{n}.db"
    async with open_app(_settings(db, "normal")) as app:
        copies = await _populate(app, n)
    async with open_app(_settings(db, "normal")) as app:
        _, _, alone, _ = await _beside(app, anyio.sleep(2))
        report, consolidate_s, beside_consolidate, consolidate_stall = await _beside(
            app, app.consolidation.consolidate(PROJECT)
        )
        _, reflect_s, beside_reflect, reflect_stall = await _beside(
            app, app.reflection.reflect(PROJECT, since="2000-01-01")
        )
    return {
        "n": n,
        "copies": copies,
        "merged": report.counts.get("merged", 0),
        "alone": alone,
        "passes": [
            ("consolidate", consolidate_s, beside_consolidate, consolidate_stall),
            ("reflect (whole history)", reflect_s, beside_reflect, reflect_stall),
        ],
    }


def _rows(results: list[dict[str, Any]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for r in results:
        base = pct(r["alone"], 50)
        for name, seconds, waits, stall in r["passes"]:
            rows.append(
                [
                    f"{r['n']:,} memories: {name}",
                    secs(seconds),
                    len(waits),
                    f"{ms(base)} / {ms(pct(waits, 50))}",
                    ms(max(waits, default=float("nan"))),
                    ratio(max(waits, default=float("nan")), base),
                    ms(stall),
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="5000,20000,100000", help="comma-separated numbers of memories")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        results = [asyncio.run(_measure(n, Path(folder))) for n in sizes]
    print(f"{machine()}; {code_version()}")
    for r in results:
        print(f"N = {r['n']:,}: {r['copies']:,} near-copies stored, {r['merged']:,} merged by the pass")
    print(
        table(
            "Knowledge-loop passes, and a memory saved every 50 ms beside each",
            [
                "pass",
                "seconds",
                "saves beside",
                "save ms p50: alone / beside",
                "longest save ms",
                "longest / alone",
                "longest loop stall ms",
            ],
            _rows(results),
            markdown=args.markdown,
        )
    )
    print(load_note())


if __name__ == "__main__":
    main()
