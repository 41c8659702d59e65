"""A memory changed on two machines: importing one's export into the other joins the two chains
(every version kept, in the order they were saved) instead of refusing the import, and exchanging
exports again leaves both machines with the same chain."""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_operations import export_document, fresh_settings

PORT_8080 = "The API listens on port 8080 behind the nginx proxy."
PORT_9090 = "The API listens on port 9090 behind the nginx proxy."  # saved on machine A
PORT_7070 = "The API listens on port 7070 behind the nginx proxy."  # saved on machine B, later


async def machines(stack: AsyncExitStack, tmp_path: Path, clock: FakeClock, *names: str) -> list[Client]:
    """A server per name, each on its own database, sharing one clock."""
    return [
        await stack.enter_async_context(Client(build_server(fresh_settings(tmp_path, name), clock))) for name in names
    ]


async def _root_on_both(a: Client, b: Client) -> dict[str, Any]:
    """A memory saved on A and copied to B: where the two machines part."""
    root = await call(a, "memory_save", content=PORT_8080)
    await call(b, "memory_import", document=await export_document(a))
    return root


def _chain(detail: dict[str, Any]) -> list[tuple[str, int, bool, str | None]]:
    return [(v["id"], v["version"], v["is_latest"], v["content"]) for v in detail["versions"]]


async def test_a_memory_changed_on_two_machines_joins_in_the_order_saved_and_converges(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        root = await _root_on_both(a, b)
        clock.advance(minutes=5)
        on_a = await call(a, "memory_save", content=PORT_9090, supersedes=root["id"])
        clock.advance(minutes=5)
        on_b = await call(b, "memory_save", content=PORT_7070, supersedes=root["id"])
        from_a = await export_document(a)

        joined = await call(b, "memory_import", document=from_a)
        on_b_chain = await call(b, "memory_get", id=root["id"])
        found = await call(b, "memory_smart_search", query="API port nginx proxy", kinds=["memory"])
        health = await call(b, "memory_diagnose")
        again = await call(b, "memory_import", document=from_a)  # the same file twice: nothing more

        back = await call(a, "memory_import", document=await export_document(b))
        on_a_chain = await call(a, "memory_get", id=root["id"])
        exports = [await export_document(side) for side in (a, b)]

    assert joined["joined_chains"] == [root["id"]]
    assert joined["inserted"] == {"memories": 1}
    assert _chain(on_b_chain) == [
        (root["id"], 1, False, PORT_8080),
        (on_a["id"], 2, False, PORT_9090),
        (on_b["id"], 3, True, PORT_7070),
    ]
    assert on_b_chain["latest_id"] == on_b["id"]
    assert on_b_chain["versions"][1]["similarity"] == on_a["similarity"]  # still follows the root
    assert on_b_chain["versions"][2]["similarity"] == on_b["similarity"]  # 9090 and 7070: same words as 8080
    assert [h["id"] for h in found["hits"]] == [on_b["id"]]  # only the latest version is searchable
    assert health["index_in_sync"] is True
    assert health["index_docs"] == {"memory": 1}
    assert again["joined_chains"] == []
    assert sum(again["updated"].values()) == 0
    assert back["joined_chains"] == []
    assert _chain(on_a_chain) == _chain(on_b_chain)
    assert exports[0]["tables"]["memories"] == exports[1]["tables"]["memories"]


async def test_the_later_save_wins_whichever_side_imports(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        root = await _root_on_both(a, b)
        clock.advance(minutes=5)
        first = await call(b, "memory_save", content=PORT_7070 + " Ask the ops team first.", supersedes=root["id"])
        clock.advance(minutes=5)
        last = await call(a, "memory_save", content=PORT_9090, supersedes=root["id"])
        clock.advance(minutes=1)
        later = await call(a, "memory_save", content=PORT_9090 + " It moved in March.", supersedes=last["id"])

        result = await call(b, "memory_import", document=await export_document(a))
        chain = await call(b, "memory_get", id=later["id"])
        # what saving 9090 right after B's version measures, on a third machine
        (c,) = await machines(stack, tmp_path, clock, "c")
        there = await call(c, "memory_save", content=PORT_7070 + " Ask the ops team first.")
        expected = await call(c, "memory_save", content=PORT_9090, supersedes=there["id"])

    assert result["joined_chains"] == [root["id"]]
    assert [v["id"] for v in chain["versions"]] == [root["id"], first["id"], last["id"], later["id"]]
    assert [v["version"] for v in chain["versions"]] == [1, 2, 3, 4]
    assert chain["latest_id"] == later["id"]
    # the version that now follows another than it did is measured against its new predecessor
    assert chain["versions"][2]["similarity"] == expected["similarity"] != last["similarity"]
    assert chain["versions"][3]["similarity"] == later["similarity"]  # still follows the same one


async def test_a_document_marking_two_versions_of_one_chain_latest_is_still_refused(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path, "a"), clock)) as a:
        root = await call(a, "memory_save", content=PORT_8080)
        clock.advance(minutes=5)
        await call(a, "memory_save", content=PORT_9090, supersedes=root["id"])
        document = await export_document(a)
    for row in document["tables"]["memories"]:
        row["is_latest"], row["superseded_by"] = True, None

    async with Client(build_server(fresh_settings(tmp_path, "b"), clock)) as b:
        message = await call_error(b, "memory_import", document=document)
        left = await call(b, "memory_diagnose")

    assert f"is_latest: the document marks more than one version of memory chain {root['id']} latest" in message
    assert left["counts"]["memories"] == 0


async def test_a_consolidation_merge_of_a_longer_chain_leaves_one_line(tmp_path: Path) -> None:
    clock = FakeClock()
    deploy = "The deploy script lives in scripts/deploy.sh and runs from the main branch."
    async with Client(build_server(fresh_settings(tmp_path, "a"), clock)) as a:
        older = await call(a, "memory_save", content=deploy)
        clock.advance(minutes=1)
        other = await call(a, "memory_save", content="Release notes are written in the wiki.")
        clock.advance(minutes=1)
        # a new version of the other memory that says what the first one says: consolidation merges them
        newer = await call(a, "memory_save", content=deploy + " Always.", supersedes=other["id"])
        report = await call(a, "memory_consolidate")
        document = await export_document(a)
    async with Client(build_server(fresh_settings(tmp_path, "b"), clock)) as b:
        copied = await call(b, "memory_import", document=document)
        chain = await call(b, "memory_get", id=older["id"])

    assert ("merged", older["id"]) in {(c["action"], c["id"]) for c in report["changes"]}
    rows = {m["id"]: m for m in document["tables"]["memories"]}
    assert rows[older["id"]]["superseded_by"] == other["id"]  # the version right after it, not the latest
    assert rows[other["id"]]["parent_id"] == older["id"]
    assert copied["joined_chains"] == []  # already one line: nothing to mend
    assert [(v["id"], v["version"], v["is_latest"]) for v in chain["versions"]] == [
        (older["id"], 1, False),
        (other["id"], 2, False),
        (newer["id"], 3, True),
    ]


def _lines(memories: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each chain's version ids in version order, asserting it is one line as the tools leave it."""
    chains: dict[str, list[dict[str, Any]]] = {}
    for row in memories:
        chains.setdefault(row["root_id"], []).append(row)
    for root_id, rows in chains.items():
        rows.sort(key=lambda r: r["version"])
        ids = [r["id"] for r in rows]
        assert ids[0] == root_id
        assert [r["version"] for r in rows] == list(range(1, len(rows) + 1))
        assert [r["parent_id"] for r in rows] == [None, *ids[:-1]]
        assert [r["superseded_by"] for r in rows] == [*ids[1:], None]
        assert [r["is_latest"] for r in rows] == [False] * (len(rows) - 1) + [True]
    return {root_id: [r["id"] for r in rows] for root_id, rows in chains.items()}


async def test_three_machines_editing_and_exchanging_at_random_keep_every_chain_one_line(tmp_path: Path) -> None:
    rng = random.Random(1)
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        sides = await machines(stack, tmp_path, clock, "a", "b", "c")
        for step in range(120):
            clock.advance(seconds=rng.randint(1, 100))
            side = rng.choice(sides)
            if rng.random() < 0.5:
                live = await call(side, "memory_smart_search", query="topic", kinds=["memory"], limit=50)
                named = {"supersedes": rng.choice(live["hits"])["id"]} if live["hits"] and rng.random() < 0.8 else {}
                await call(side, "memory_save", content=f"topic {rng.randint(0, 5)} value {step}", **named)
            elif (source := rng.choice(sides)) is not side:
                await call(side, "memory_import", document=await export_document(source))
                _lines((await export_document(side))["tables"]["memories"])
        for _ in range(2):  # everyone imports everyone's export, twice round
            for source in sides:
                document = await export_document(source)
                for side in sides:
                    if side is not source:
                        await call(side, "memory_import", document=document)
        finals = [(await export_document(side))["tables"]["memories"] for side in sides]

    assert len(_lines(finals[0])) > 5
    assert finals[1] == finals[0]
    assert finals[2] == finals[0]


async def test_versions_saved_after_a_merge_elsewhere_follow_their_chain_into_it(tmp_path: Path) -> None:
    clock = FakeClock()
    deploy = "The deploy script lives in scripts/deploy.sh and runs from the main branch."
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        kept = await call(a, "memory_save", content=deploy)
        clock.advance(minutes=1)
        other = await call(a, "memory_save", content="Release notes are written in the wiki.")
        clock.advance(minutes=1)
        twin = await call(a, "memory_save", content=deploy + " Always.", supersedes=other["id"])
        await call(b, "memory_import", document=await export_document(a))
        clock.advance(minutes=1)
        on_b = await call(b, "memory_save", content="Release notes now go to the changelog.", supersedes=twin["id"])
        clock.advance(minutes=1)
        await call(a, "memory_consolidate")  # merges the twin's chain into the first memory's

        result = await call(b, "memory_import", document=await export_document(a))
        chain = await call(b, "memory_get", id=on_b["id"])
        health = await call(b, "memory_diagnose")
        memories = (await export_document(b))["tables"]["memories"]

    assert result["joined_chains"] == [kept["id"]]
    assert [(v["id"], v["version"], v["is_latest"]) for v in chain["versions"]] == [
        (kept["id"], 1, False),
        (other["id"], 2, False),
        (twin["id"], 3, False),
        (on_b["id"], 4, True),
    ]
    assert {m["root_id"] for m in memories} == {kept["id"]}
    assert health["index_docs"] == {"memory": 1}
    assert health["index_in_sync"] is True


async def test_versions_linked_to_one_record_on_two_machines_keep_one_edge_once_joined(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        proxy = await call(a, "memory_save", content="The nginx proxy config lives in deploy/nginx.conf.")
        root = await _root_on_both(a, b)
        clock.advance(minutes=5)
        on_a = await call(a, "memory_save", content=PORT_9090, supersedes=root["id"])
        await call(a, "memory_relate", source_id=on_a["id"], target_id=proxy["id"], type="depends_on", weight=0.4)
        clock.advance(minutes=5)
        on_b = await call(b, "memory_save", content=PORT_7070, supersedes=root["id"])
        await call(b, "memory_relate", source_id=on_b["id"], target_id=proxy["id"], type="depends_on", weight=0.9)

        from_a = await export_document(a)
        await call(b, "memory_import", document=from_a)
        again = await call(b, "memory_import", document=from_a)  # the folded edge is noted: it stays gone
        related = await call(b, "memory_related", id=proxy["id"])
        exported = await export_document(b)
        await call(a, "memory_import", document=exported)  # and A, told of the fold, converges
        on_a = await call(a, "memory_related", id=proxy["id"])

    assert [(e["type"], e["weight"]) for e in related["edges"]] == [("depends_on", 0.9)]  # the later one stays
    assert len(exported["tables"]["relations"]) == 1
    assert again["forgotten"] == 1
    assert [(e["type"], e["weight"]) for e in on_a["edges"]] == [("depends_on", 0.9)]
