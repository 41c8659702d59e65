"""How long do memory_export and memory_import take as the store grows, next to a plain JSON round trip?

For each N, a temporary database is filled with N observations (the synthetic notes of
bench/search.py, 50 to a session), then measured at the service layer (no MCP framing):
export (one document of every project), import of that document into a fresh database (one
transaction: validation, privacy filter, rows, search terms, index) and importing it again
(every row unchanged). The baseline,
measured in the same run on the same document, is `json.loads(json.dumps(document))`: the least
any JSON transfer of those rows costs.

    python bench/transfer.py                      # N = 1k, 10k, 100k
    python bench/transfer.py --sizes 1000,10000 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import code_version, load_note, machine, peak_rss_mib, ratio, secs, table
from search import _populate, _settings


async def measure(n: int, folder: Path) -> dict[str, Any]:
    """Export, import, re-import and re-export N observations; the JSON round trip beside them."""
    from mcp_memory.context import open_app

    source, target = folder / "source.db", folder / "target.db"
    await _populate(n, source)
    async with open_app(_settings(source, "normal")) as app:
        started = time.perf_counter()
        exported = await app.operations.export(None, None, False)
        export_s = time.perf_counter() - started
    document = exported.document
    assert document is not None
    rows = sum(exported.counts.values())

    started = time.perf_counter()
    text = json.dumps(document)
    json.loads(text)
    json_s = time.perf_counter() - started

    async with open_app(_settings(target, "normal")) as app:
        started = time.perf_counter()
        first = await app.operations.import_(document, None)
        import_s = time.perf_counter() - started
        started = time.perf_counter()
        again = await app.operations.import_(document, None)
        reimport_s = time.perf_counter() - started
    return {
        "n": n,
        "rows": rows,
        "mib": len(text.encode()) / 2**20,
        "export_s": export_s,
        "json_s": json_s,
        "import_s": import_s,
        "reimport_s": reimport_s,
        "inserted": sum(first.inserted.values()),
        "unchanged": sum(again.unchanged.values()),
        "redacted": sum(first.redacted.values()),
        "peak_mib": peak_rss_mib(),
    }


def report(results: list[dict[str, Any]], wall: float, markdown: bool) -> str:
    header = [
        "bench/transfer.py - memory_export / memory_import at the service layer vs a JSON round trip",
        f"machine: {machine()}; code: {code_version()}",
        load_note(),
        f"wall time {wall:.1f} s; peak RSS {max(r['peak_mib'] for r in results):.0f} MiB",
        "",
    ]
    rows = [
        [
            f"{r['n']:,}",
            f"{r['rows']:,}",
            f"{r['mib']:.1f}",
            secs(r["export_s"]),
            secs(r["import_s"]),
            f"{r['rows'] / r['import_s']:,.0f}",
            secs(r["reimport_s"]),
            secs(r["json_s"]),
            ratio(r["import_s"], r["json_s"]),
            r["redacted"],
            "yes" if r["inserted"] == r["unchanged"] == r["rows"] else "NO",
        ]
        for r in results
    ]
    out = table(
        "Export and import (seconds)",
        [
            "N",
            "rows",
            "MiB",
            "export",
            "import",
            "rows/s",
            "re-import",
            "JSON round trip",
            "import / JSON",
            "redacted",
            "all rows in, then unchanged",
        ],
        rows,
        markdown=markdown,
    )
    notes = [
        "Notes: rows = every exported row (observations and their sessions); MiB = the document as JSON text.",
        "import = one transaction into an empty database; re-import = the same document again (all unchanged).",
        "redacted: secrets the privacy filter took out on import (the synthetic notes are stored without it and "
        "a few say 'token is X').",
        "Exact export -> import -> export round trips are asserted in tests/test_tools_operations.py.",
    ]
    return "\n".join(header) + out + "\n" + "\n".join(notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated record counts")
    parser.add_argument("--markdown", action="store_true", help="also print the table as markdown")
    args = parser.parse_args()
    started = time.perf_counter()
    results = []
    for n in sorted(int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()):
        folder = Path(tempfile.mkdtemp(prefix=f"mcp-memory-transfer-{n}-"))
        try:
            results.append(asyncio.run(measure(n, folder)))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    wall = time.perf_counter() - started
    print(report(results, wall, markdown=False))
    if args.markdown:
        print(report(results, wall, markdown=True))


if __name__ == "__main__":
    main()
