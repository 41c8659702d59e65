"""Consolidation merging several near-duplicates: every chain it leaves is one line with one latest version."""

from __future__ import annotations

import sqlite3
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

WORDS = [
    "harbor",
    "lantern",
    "meadow",
    "quartz",
    "saddle",
    "timber",
    "velvet",
    "walnut",
    "anchor",
    "bramble",
    "cobalt",
    "dune",
    "ember",
    "falcon",
    "glacier",
    "hollow",
    "ivory",
    "juniper",
    "kestrel",
    "lagoon",
]


def text(*skip: int) -> str:
    """The twenty words but those at the positions `skip`, as one memory."""
    return " ".join(word for n, word in enumerate(WORDS) if n not in skip) + "."


async def import_memories(client: Client, contents: list[str]) -> list[str]:
    """Save the first content, import the rest as separate chains each a minute newer; returns the ids."""
    first = (await call(client, "memory_save", content=contents[0]))["id"]
    document = (await call(client, "memory_export"))["document"]
    template = next(row for row in document["tables"]["memories"] if row["id"] == first)
    rows = []
    for n, content in enumerate(contents[1:], start=1):
        mem_id, at = f"mem_0dup{n:019d}", f"2026-01-05T09:{n:02d}:00.000000Z"
        rows.append(
            template | {"id": mem_id, "root_id": mem_id, "content": content, "created_at": at, "updated_at": at}
        )
    imported = await call(client, "memory_import", document=document | {"tables": {"memories": rows}})
    assert imported["inserted"] == {"memories": len(rows)}
    return [first, *(row["id"] for row in rows)]


def line(versions: list[dict[str, Any]]) -> list[tuple[str, int, bool]]:
    return [(v["id"], v["version"], v["is_latest"]) for v in versions]


async def test_three_alike_memories_become_one_chain_of_three(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as client:
        a, b, c = await import_memories(client, [text(), text(0), text(1)])
        clock.advance(minutes=10)
        report = await call(client, "memory_consolidate")
        chains = [await call(client, "memory_get", id=mem_id) for mem_id in (a, b, c)]
        again = await call(client, "memory_consolidate")
        found = await call(client, "memory_smart_search", query="harbor lantern meadow")

    assert [(ch["action"], ch["id"]) for ch in report["changes"]] == [("merged", a), ("merged", b)]
    assert [ch["latest_id"] for ch in chains] == [c, c, c]
    assert line(chains[0]["versions"]) == [(a, 1, False), (b, 2, False), (c, 3, True)]
    assert all(ch["versions"] == chains[0]["versions"] for ch in chains)
    assert again["changes"] == []
    assert [hit["id"] for hit in found["hits"] if hit["kind"] == "memory"] == [c]


async def test_two_merges_into_one_newer_memory_keep_every_version_in_one_line(
    settings: Settings, clock: FakeClock
) -> None:
    # a and b are each like c (17 of c's 20 words) but not like each other (14 shared of 20):
    # a merges into c first, then b's merge must find c under a's root, not c's old one.
    async with Client(build_server(settings, clock)) as client:
        a, b, c = await import_memories(client, [text(0, 1, 2), text(3, 4, 5), text()])
        clock.advance(minutes=10)
        report = await call(client, "memory_consolidate")
        chains = [await call(client, "memory_get", id=mem_id) for mem_id in (a, b, c)]
        again = await call(client, "memory_consolidate")

    assert [(ch["action"], ch["id"]) for ch in report["changes"]] == [("merged", a), ("merged", b)]
    assert [ch["latest_id"] for ch in chains] == [c, c, c]
    assert line(chains[0]["versions"]) == [(b, 1, False), (a, 2, False), (c, 3, True)]
    assert all(ch["versions"] == chains[0]["versions"] for ch in chains)
    assert again["changes"] == []


def break_as_an_older_release_did(settings: Settings, rows: dict[str, tuple[str, int, int, str | None]]) -> None:
    """Write memory rows' (root id, version, latest flag, successor) as the old merge left them."""
    with sqlite3.connect(settings.db) as conn:
        for mem_id, (root_id, version, latest, successor) in rows.items():
            conn.execute(
                "UPDATE memories SET root_id = ?, version = ?, is_latest = ?, superseded_by = ? WHERE id = ?",
                (root_id, version, latest, successor, mem_id),
            )


async def test_consolidate_relinks_a_chain_an_older_merge_left_under_a_moved_root(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        a, b, c = await import_memories(client, [text(), text(0), text(1)])
        clock.advance(minutes=10)
        await call(client, "memory_consolidate")
    # The release before merged a into b, then b into c under b's old root: c is v1 of "chain b".
    break_as_an_older_release_did(settings, {c: (b, 1, 1, None)})

    async with Client(build_server(settings, clock)) as client:
        health = await call(client, "memory_diagnose")
        report = await call(client, "memory_consolidate")
        chain = await call(client, "memory_get", id=a)
        healed = await call(client, "memory_diagnose")
        again = await call(client, "memory_consolidate")

    assert health["chains_out_of_line"] == 2  # a's chain lacks its latest, and c's root is not a first version
    assert [(ch["action"], ch["id"]) for ch in report["changes"]] == [("relinked", a)]
    assert line(chain["versions"]) == [(a, 1, False), (b, 2, False), (c, 3, True)]
    assert (healed["chains_out_of_line"], healed["index_in_sync"]) == (0, True)
    assert again["changes"] == []


async def test_a_chain_an_older_merge_left_without_a_latest_version_is_relinked_then_merged(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        a, b, c = await import_memories(client, [text(0, 1, 2), text(3, 4, 5), text()])
    # The release before merged a into c, then b into c under c's old root: b was left with no latest.
    break_as_an_older_release_did(settings, {a: (a, 1, 0, c), c: (a, 2, 1, None), b: (b, 1, 0, c)})
    with sqlite3.connect(settings.db) as conn:
        conn.execute("UPDATE memories SET parent_id = ? WHERE id = ?", (a, c))
        conn.execute("DELETE FROM search_docs WHERE doc_id IN (?, ?)", (a, b))  # merged: no longer searched

    async with Client(build_server(settings, clock)) as client:
        lost = await call(client, "memory_smart_search", query="meadow quartz saddle")
        report = await call(client, "memory_consolidate")
        chain = await call(client, "memory_get", id=b)
        found = await call(client, "memory_smart_search", query="meadow quartz saddle")
        healed = await call(client, "memory_diagnose")

    assert [hit["id"] for hit in lost["hits"] if hit["kind"] == "memory"] == [c]
    assert [(ch["action"], ch["id"]) for ch in report["changes"]] == [("relinked", b), ("merged", b)]
    assert line(chain["versions"]) == [(b, 1, False), (a, 2, False), (c, 3, True)]
    assert [hit["id"] for hit in found["hits"] if hit["kind"] == "memory"] == [c]
    assert (healed["chains_out_of_line"], healed["index_in_sync"]) == (0, True)


async def test_a_memory_changed_after_the_plan_waits_for_the_next_pass(settings: Settings, clock: FakeClock) -> None:
    # The merges are planned before the write transaction; the progress report between the plan and
    # the transaction is where another request's write can land. A pair it changed is not merged.
    async with Client(build_server(settings, clock)) as client:
        a, c = await import_memories(client, [text(0), text()])
    clock.advance(minutes=10)
    async with open_app(settings, clock) as app:
        newest: list[str] = []

        async def write_between(progress: float, total: float | None, message: str | None) -> None:
            if message == "finding recurring facts":  # the plan is made, the transaction not begun
                saved = await app.memories.save("test", text(19) + " Also lighthouse.", supersedes=c)
                newest.append(saved.id)

        first = await app.consolidation.consolidate("test", progress=write_between)
        second = await app.consolidation.consolidate("test")
        chain = await app.memories.get("test", a)

    assert first.changes == []  # c is no longer latest: the planned merge of a into c waits
    assert [(ch.action, ch.id, ch.detail) for ch in second.changes] == [("merged", a, f"now a version of {newest[0]}")]
    assert [(v.id, v.version, v.is_latest) for v in chain.versions] == [
        (a, 1, False),
        (c, 2, False),
        (newest[0], 3, True),
    ]


async def test_a_memory_forgotten_after_the_plan_is_not_merged(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as client:
        a, c = await import_memories(client, [text(0), text()])
    async with open_app(settings, clock) as app:

        async def forget_between(progress: float, total: float | None, message: str | None) -> None:
            if message == "finding recurring facts":
                await app.forget.forget(
                    "test", ids=[c], kind=None, session_id=None, since=None, until=None, dry_run=False
                )

        report = await app.consolidation.consolidate("test", progress=forget_between)
        kept = await app.memories.get("test", a)

    assert report.changes == []
    assert [(v.id, v.version, v.is_latest) for v in kept.versions] == [(a, 1, True)]
