"""Records that go away take their relations with them, so no walk or export meets a dangling edge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_tools_operations import export_document, fresh_settings


async def relate(client: Client, source: str, target: str) -> str:
    return str(
        (await call(client, "memory_relate", source_id=source, target_id=target, type="related"))["relation"]["id"]
    )


async def reachable(client: Client, start: str) -> list[str]:
    return [node["id"] for node in (await call(client, "memory_related", id=start, hops=2))["nodes"]]


async def round_trips(client: Client, tmp_path: Path) -> int:
    """Import this client's export into a fresh database; returns the relations it holds."""
    document = await export_document(client)
    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        await call(fresh, "memory_import", document=document)
        return len((await export_document(fresh))["tables"]["relations"])


async def test_deleting_a_slot_drops_its_relations(client: Client, tmp_path: Path) -> None:
    memory = (await call(client, "memory_save", content="The deploy runs from the release branch."))["id"]
    slot = (await call(client, "memory_slot_create", name="release_notes", content="Ship on Fridays."))["slot"]["id"]
    edges = [await relate(client, memory, slot), await relate(client, slot, memory)]
    assert await reachable(client, memory) == [slot]

    deleted = await call(client, "memory_slot_delete", name="release_notes")

    assert sorted(deleted["relations_deleted"]) == sorted(edges)
    assert await reachable(client, memory) == []
    assert await round_trips(client, tmp_path) == 0


async def test_a_trimmed_mistake_card_drops_its_relations(settings: Settings, clock: FakeClock, tmp_path: Path) -> None:
    def card(correct: str) -> dict[str, Any]:
        return {"type": "process", "correct_decision": correct}

    bounded = settings.model_copy(update={"max_mistake_cards": 1})
    async with Client(build_server(bounded, clock)) as client:
        memory = (await call(client, "memory_save", content="Deploys need fresh credentials."))["id"]
        first = await call(client, "memory_outcome_record", task="Deploy", success=False, mistake_cards=[card("a")])
        doomed = first["derived"]["mistake_cards"][0]
        await relate(client, memory, doomed)
        clock.advance(minutes=5)
        second = await call(client, "memory_outcome_record", task="Deploy", success=False, mistake_cards=[card("b")])
        kept = (await call(client, "memory_insights", limit=10))["mistake_cards"]

        assert [c["id"] for c in kept] == second["derived"]["mistake_cards"] != [doomed]
        assert await reachable(client, memory) == []
        assert await round_trips(client, tmp_path) == 0


async def test_a_forget_lists_the_relations_it_takes_and_its_dry_run_lists_the_same(client: Client) -> None:
    memory = (await call(client, "memory_save", content="The staging database lives on port 5433."))["id"]
    note = (await call(client, "memory_observe", content="Checked the staging port.", session_id="s1"))["id"]
    other = (await call(client, "memory_save", content="Backups run nightly at two."))["id"]
    await relate(client, memory, note)
    await relate(client, other, memory)
    await relate(client, other, note)
    listed = (await call(client, "memory_related", id=memory))["edges"]  # with the one between its neighbours
    edges = {e["id"] for e in listed if memory in (e["source_id"], e["target_id"])}

    planned = await call(client, "memory_forget", ids=[memory], dry_run=True)
    done = await call(client, "memory_forget", ids=[memory])

    assert len(edges) == 2
    assert planned["deleted"] == {"observation": [], "memory": [memory], "session": [], "relation": sorted(edges)}
    assert planned["counts"]["relation"] == 2
    assert planned["total"] == 3
    assert done["deleted"] == planned["deleted"]
    assert done["dry_run"] is False
    # the edge between two records that stay is untouched
    assert await reachable(client, other) == [note]
