"""How long do memory_export and memory_import take, and how much memory, as the store grows?

For each N, a temporary database is filled with N observations (the synthetic notes of
bench/search.py, 50 to a session). Then, each in a fresh process so that its peak memory means
something, at the service layer (no MCP framing):

- inline: export the document in memory, import it into a fresh database (validated whole,
  then one transaction: privacy filter, rows, search terms, index) and import it again (every
  row unchanged); beside it, the baseline `json.loads(json.dumps(document))` of the same
  document: the least any JSON transfer of those rows costs;
- file: export to a file (streamed page by page), then import that file into another fresh
  database (streamed row by row, one transaction) and import it again.

    python bench/transfer.py                      # N = 1k, 10k, 100k
    python bench/transfer.py --sizes 1000,10000 --markdown
    python bench/transfer.py --million            # adds N = 1M (file only: inline needs GBs)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from _common import code_version, load_note, machine, peak_rss_mib, ratio, reset_peak_rss, rss_mib, secs, table
from search import _populate, _settings

T = TypeVar("T")
INLINE_MAX_N = 200_000  # above this the in-memory document alone takes several GB


async def _timed(call: Awaitable[T]) -> tuple[T, float]:
    """The result of `call` and the seconds it took."""
    started = time.perf_counter()
    result = await call
    return result, time.perf_counter() - started


async def _import_twice(app: Any, document: dict[str, Any] | None, path: str | None) -> dict[str, Any]:
    """Import into an empty database, then the same again (every row unchanged)."""
    first, import_s = await _timed(app.operations.import_(document, path))
    peak = peak_rss_mib()  # of the first import, which builds everything
    again, reimport_s = await _timed(app.operations.import_(document, path))
    return {
        "import_s": import_s,
        "reimport_s": reimport_s,
        "inserted": sum(first.inserted.values()),
        "unchanged": sum(again.unchanged.values()),
        "redacted": sum(first.redacted.values()),
        "peak_mib": peak,
    }


async def _inline(source: Path, target: Path) -> dict[str, Any]:
    """Export in memory, JSON round trip, import into `target` twice."""
    from mcp_memory.context import open_app

    # measured at every size: the server's cap on inline exports (which spares agents' contexts) is lifted
    inline = _settings(source, "normal").model_copy(update={"export_inline_max_rows": 0})
    async with open_app(inline) as app:
        opened = rss_mib()
        reset_peak_rss()  # the figure is the export's and import's, not the start-up's
        exported, export_s = await _timed(app.operations.export(None, None, False))
    document = exported.document
    assert document is not None

    started = time.perf_counter()
    text = json.dumps(document)
    json.loads(text)
    json_s = time.perf_counter() - started

    async with open_app(_settings(target, "normal")) as app:
        imported = await _import_twice(app, document, None)
    return {
        **imported,
        "rows": sum(exported.counts.values()),
        "mib": len(text.encode()) / 2**20,
        "export_s": export_s,
        "json_s": json_s,
        "opened_mib": opened,
        "peak_mib": peak_rss_mib(),  # the export, the document and the import together
    }


async def _file_export(source: Path, file: Path) -> dict[str, Any]:
    from mcp_memory.context import open_app

    async with open_app(_settings(source, "normal")) as app:
        opened = rss_mib()
        reset_peak_rss()
        exported, export_s = await _timed(app.operations.export(None, str(file), True))
    size = (await anyio.Path(file).stat()).st_size
    return {
        "rows": sum(exported.counts.values()),
        "mib": size / 2**20,
        "export_s": export_s,
        "opened_mib": opened,
        "peak_mib": peak_rss_mib(),
    }


async def _file_import(file: Path, target: Path) -> dict[str, Any]:
    from mcp_memory.context import open_app

    async with open_app(_settings(target, "normal")) as app:
        opened = rss_mib()
        reset_peak_rss()
        return {**await _import_twice(app, None, str(file)), "opened_mib": opened}


def _worker(args: argparse.Namespace) -> None:
    a, b = Path(args.a), Path(args.b)
    if args.worker == "populate":
        result = asyncio.run(_populate(args.n, a))
    elif args.worker == "inline":
        result = asyncio.run(_inline(a, b))
    elif args.worker == "export":
        result = asyncio.run(_file_export(a, b))
    else:
        result = asyncio.run(_file_import(a, b))
    print(json.dumps(result))


def _run(kind: str, n: int, a: Path, b: Path) -> dict[str, Any]:
    """Run one step in a fresh process; its JSON result."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--n", str(n), "--a", str(a)]
    started = time.perf_counter()
    done = subprocess.run([*command, "--b", str(b)], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} worker for N={n} failed with exit code {done.returncode}")
    print(f"  {kind:8} N={n:>9,}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(n: int, folder: Path) -> dict[str, Any]:
    """Every step for N observations, each in its own process."""
    source, file = folder / "source.db", folder / "export.json"
    _run("populate", n, source, source)
    result: dict[str, Any] = {"n": n}
    if n <= INLINE_MAX_N:
        result["inline"] = _run("inline", n, source, folder / "inline.db")
    result["export"] = _run("export", n, source, file)
    result["import"] = _run("import", n, file, folder / "file.db")
    return result


def _ok(step: dict[str, Any], rows: int) -> str:
    return "yes" if step["inserted"] == step["unchanged"] == rows else "NO"


def report(results: list[dict[str, Any]], wall: float, markdown: bool) -> str:
    header = [
        "bench/transfer.py - memory_export / memory_import at the service layer vs a JSON round trip",
        f"machine: {machine()}; code: {code_version()}",
        load_note(),
        f"wall time {wall:.1f} s; every step in a fresh process",
        "",
    ]
    timing = []
    memory = []
    for r in results:
        inline, export, file = r.get("inline"), r["export"], r["import"]
        rows = export["rows"]
        timing.append(
            [
                f"{r['n']:,}",
                f"{rows:,}",
                f"{export['mib']:.1f}",
                secs(inline["export_s"]) if inline else "-",
                secs(export["export_s"]),
                secs(inline["import_s"]) if inline else "-",
                secs(file["import_s"]),
                f"{rows / file['import_s']:,.0f}",
                secs(file["reimport_s"]),
                secs(inline["json_s"]) if inline else "-",
                ratio(file["import_s"], inline["json_s"]) if inline else "-",
                "yes" if _ok(file, rows) == "yes" and (not inline or _ok(inline, rows) == "yes") else "NO",
            ]
        )
        memory.append(
            [
                f"{r['n']:,}",
                f"{inline['opened_mib']:,.0f}" if inline else "-",
                f"{inline['peak_mib']:,.0f}" if inline else "-",
                f"{export['opened_mib']:,.0f}",
                f"{export['peak_mib']:,.0f}",
                f"{file['opened_mib']:,.0f}",
                f"{file['peak_mib']:,.0f}",
            ]
        )
    out = table(
        "Export and import (seconds)",
        [
            "N",
            "rows",
            "file MiB",
            "export inline",
            "export file",
            "import inline",
            "import file",
            "rows/s (file)",
            "re-import file",
            "JSON round trip",
            "import file / JSON",
            "all rows in, then unchanged",
        ],
        timing,
        markdown=markdown,
    )
    out += "\n" + table(
        "Peak memory of each process (RSS MiB)",
        [
            "N",
            "inline: opened",
            "inline export + import: peak",
            "file export: opened",
            "file export: peak",
            "file import: opened",
            "file import: peak",
        ],
        memory,
        markdown=markdown,
    )
    notes = [
        "Notes: rows = every exported row (observations and their sessions); file MiB = the export file.",
        "import = one transaction into an empty database; re-import = the same document again (all unchanged).",
        "opened = RSS once the server is open (index built from the database); peak = the highest RSS from",
        "then until the export or first import ends (Linux: the start-up's own peak is reset first).",
        f"inline steps are skipped above N = {INLINE_MAX_N:,} (the document alone takes GBs in memory).",
        "Exact export -> import -> export round trips are asserted in tests/test_tools_operations.py.",
    ]
    return "\n".join(header) + out + "\n" + "\n".join(notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated record counts")
    parser.add_argument("--million", action="store_true", help="also run N = 1,000,000")
    parser.add_argument("--markdown", action="store_true", help="also print the tables as markdown")
    parser.add_argument("--worker", choices=["populate", "inline", "export", "import"], help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--a", help=argparse.SUPPRESS)
    parser.add_argument("--b", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    if args.million and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    started = time.perf_counter()
    results = []
    for n in sizes:
        folder = Path(tempfile.mkdtemp(prefix=f"mcp-memory-transfer-{n}-"))
        try:
            results.append(measure(n, folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    wall = time.perf_counter() - started
    print(report(results, wall, markdown=False))
    if args.markdown:
        print(report(results, wall, markdown=True))


if __name__ == "__main__":
    main()
