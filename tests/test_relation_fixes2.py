"""An edge that goes takes the edges naming it along, and merged memories keep one edge per pair and type."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_tools_operations import export_document, fresh_settings

NEAR = "Deploy uses blue green switch behind nginx proxy"
"""Two memories saying this (the second with one word more) are near-duplicates consolidation merges."""
TWIN = "rel_01m8zzzzzzzzzzzzzzzzzzzz"
"""An edge stored as a second copy of one made through the tools."""


async def relate(client: Client, source: str, target: str, **args: Any) -> dict[str, Any]:
    return dict((await call(client, "memory_relate", source_id=source, target_id=target, **args))["relation"])


async def action(client: Client, title: str) -> str:
    return str((await call(client, "memory_action_create", title=title))["action"]["id"])


async def save(client: Client, content: str, **args: Any) -> str:
    return str((await call(client, "memory_save", content=content, kind="fact", **args))["id"])


async def walk(client: Client, start: str) -> list[tuple[str, str, str, float]]:
    related = await call(client, "memory_related", id=start)
    return [(e["source_id"], e["target_id"], e["type"], e["weight"]) for e in related["edges"]]


async def stored_relations(client: Client) -> list[dict[str, Any]]:
    return list((await export_document(client))["tables"]["relations"])


async def imported_relations(client: Client, tmp_path: Path) -> int:
    """Import this client's export into a fresh database (it must succeed); returns the relations it holds."""
    document = await export_document(client)
    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        await call(fresh, "memory_import", document=document)
        return len(await stored_relations(fresh))


def relation_changes(report: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((c["id"], c["detail"]) for c in report["changes"] if c["kind"] == "relation")


# -- 1. an edge naming an edge that goes goes too, all the way down ------------------------------------------


async def test_forgetting_a_record_drops_the_edges_naming_its_edges_all_the_way_down(
    client: Client, tmp_path: Path
) -> None:
    a, b, c, d = [await action(client, title) for title in "ABCD"]
    inner = (await relate(client, a, b, type="depends_on"))["id"]
    middle = (await relate(client, c, inner, type="mentions"))["id"]
    outer = (await relate(client, d, middle, type="mentions"))["id"]
    kept = (await relate(client, c, d))["id"]

    dry = await call(client, "memory_forget", ids=[a], dry_run=True)
    real = await call(client, "memory_forget", ids=[a])

    assert dry["deleted"] == real["deleted"] == {
        "observation": [], "memory": [], "session": [], "action": [a], "relation": sorted([inner, middle, outer]),
    }  # fmt: skip
    assert real["counts"]["relation"] == 3
    assert [r["id"] for r in await stored_relations(client)] == [kept]
    assert await imported_relations(client, tmp_path) == 1


async def test_deleting_a_slot_drops_the_edges_naming_its_edges(client: Client, tmp_path: Path) -> None:
    memory = await save(client, "The deploy runs from the release branch.")
    slot = (await call(client, "memory_slot_create", name="release_notes", content="Ship on Fridays."))["slot"]["id"]
    inner = (await relate(client, memory, slot))["id"]
    outer = (await relate(client, memory, inner, type="mentions"))["id"]

    deleted = await call(client, "memory_slot_delete", name="release_notes")

    assert sorted(deleted["relations_deleted"]) == sorted([inner, outer])
    assert await stored_relations(client) == []
    assert await imported_relations(client, tmp_path) == 0


# -- 2. merged memories: one edge per other end and type, none to themselves ---------------------------------


async def merged_pair(client: Client) -> tuple[str, str]:
    """Memory `a`, and `b`, unlike it: once `b` has a version that nearly repeats `a` (`near_version`),
    consolidation merges their chains."""
    a = await save(client, NEAR)
    b = await save(client, "Coffee machine descaling happens every friday afternoon")
    return a, b


async def near_version(client: Client, b: str) -> str:
    return await save(client, f"{NEAR} servers", supersedes=b)


async def test_merged_memories_keep_one_edge_to_a_record_they_both_linked(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    async with Client(build_server(settings, clock)) as client:
        target = await action(client, "Ship the release")
        a, b = await merged_pair(client)
        older = await relate(client, a, target, weight=0.9)
        clock.advance(seconds=1)
        newer = await relate(client, b, target, weight=0.2, note="the newer one")
        clock.advance(seconds=1)
        b2 = await near_version(client, b)

        dry = await call(client, "memory_consolidate", dry_run=True)
        real = await call(client, "memory_consolidate")
        again = await call(client, "memory_consolidate")

        # the newest edge stays, with its weight and note; the other is reported deleted
        assert relation_changes(dry) == relation_changes(real) == [(older["id"], f"{a} -> {target}")]
        assert real["counts"] == {"merged": 1, "deleted": 1}
        assert (again["changes"], again["counts"]) == ([], {})
        assert await walk(client, target) == [(b2, target, "related", 0.2)]
        assert [(r["id"], r["note"]) for r in await stored_relations(client)] == [(newer["id"], "the newer one")]
        # relating any version again updates that one edge, and the walk shows it
        again_related = await call(client, "memory_relate", source_id=a, target_id=target, weight=0.1)
        assert (again_related["created"], again_related["relation"]["id"]) == (False, newer["id"])
        assert await walk(client, target) == [(b2, target, "related", 0.1)]
        assert await imported_relations(client, tmp_path) == 1


async def test_an_edge_between_two_merged_memories_is_deleted_not_kept_as_a_self_edge(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    async with Client(build_server(settings, clock)) as client:
        a, b = await merged_pair(client)
        inner = (await relate(client, a, b))["id"]
        outer = (await relate(client, a, inner, type="mentions"))["id"]
        clock.advance(seconds=1)
        b2 = await near_version(client, b)

        dry = await call(client, "memory_consolidate", dry_run=True)
        real = await call(client, "memory_consolidate")
        again = await call(client, "memory_consolidate")

        assert (
            relation_changes(dry)
            == relation_changes(real)
            == sorted([(inner, f"{a} -> {b}"), (outer, f"{a} -> {inner}")])
        )
        assert (again["changes"], again["counts"]) == ([], {})
        assert (await call(client, "memory_related", id=b2))["edges"] == []
        assert await stored_relations(client) == []
        assert await imported_relations(client, tmp_path) == 0


async def test_relating_again_folds_an_edge_stored_twice(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as client:
        target = await action(client, "Ship the release")
        first = await save(client, "The staging database is refreshed nightly.")
        clock.advance(seconds=1)
        second = await save(client, "The staging database is refreshed nightly at two.", supersedes=first)
        made = await relate(client, first, target, weight=0.9)
    with sqlite3.connect(settings.db) as conn:  # the same edge once more, on the other version (as an import may leave)
        conn.execute(
            "INSERT INTO relations VALUES (?, 'test', ?, ?, 'related', 0.2, 'twin', ?, ?)",
            (TWIN, second, target, "2026-03-01T00:00:00.000000Z", "2026-03-01T00:00:00.000000Z"),
        )
    async with Client(build_server(settings, clock)) as client:
        related = await call(client, "memory_relate", source_id=first, target_id=target, weight=0.1)

        assert (related["created"], related["relation"]["id"], related["relation"]["note"]) == (False, TWIN, "twin")
        assert await walk(client, target) == [(second, target, "related", 0.1)]
        assert [r["id"] for r in await stored_relations(client)] == [TWIN] != [made["id"]]
