"""An edge is shown as memory_related lists it, wherever it appears: between a memory's latest
version and the other record (by memory_relate too), fetchable by its id in memory_smart_search,
titled as a node with the ids callers see, and listed between nodes of the last hop."""

from __future__ import annotations

from mcp import Client

from mcp_memory.ids import scoped_session_id
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_memories import DB_FACT, DB_FACT_V2, OTHER_FACT


async def test_relating_a_new_version_again_reports_the_edge_by_the_latest_version(
    client: Client, clock: FakeClock
) -> None:
    first = await call(client, "memory_save", content=DB_FACT)
    other = await call(client, "memory_save", content=OTHER_FACT)
    made = await call(client, "memory_relate", source_id=first["id"], target_id=other["id"], weight=0.5)
    clock.advance(minutes=1)
    revised = await call(client, "memory_save", content=DB_FACT_V2)
    again = await call(client, "memory_relate", source_id=revised["id"], target_id=other["id"], weight=0.8)
    listed = await call(client, "memory_related", id=other["id"])
    fetched = await call(client, "memory_smart_search", ids=[made["relation"]["id"], "rel_nothing"])

    assert revised["superseded_id"] == first["id"]
    assert again["created"] is False  # the edge made on the first version is this edge
    assert again["relation"]["id"] == made["relation"]["id"]
    assert (again["relation"]["source_id"], again["relation"]["weight"]) == (revised["id"], 0.8)
    assert listed["edges"] == [again["relation"]]
    assert fetched["relations"] == [again["relation"]]
    assert fetched["missing"] == ["rel_nothing"]


async def test_an_edge_as_a_node_is_titled_with_the_ids_callers_see(client: Client, clock: FakeClock) -> None:
    await call(client, "memory_observe", content="Kafka consumer switched to batches", session_id="main")
    await call(client, "memory_observe", content="Kafka lag dropped", session_id="main", project="other")
    fact = await call(client, "memory_save", content=DB_FACT, project="other")
    edge = await call(client, "memory_relate", source_id=fact["id"], target_id="main", project="other")
    clock.advance(minutes=1)
    revised = await call(client, "memory_save", content=DB_FACT_V2, project="other")
    note = await call(client, "memory_save", content=OTHER_FACT, project="other")
    await call(
        client,
        "memory_relate",
        source_id=note["id"],
        target_id=edge["relation"]["id"],
        type="mentions",
        project="other",
    )
    (node,) = (await call(client, "memory_related", id=note["id"], project="other"))["nodes"]

    assert node["title"] == f"related: {revised['id']} -> main"  # no old version, no project mark


async def test_the_edges_between_nodes_of_the_last_hop_are_listed(client: Client) -> None:
    start = await call(client, "memory_save", content="Kafka runs three brokers")
    one = await call(client, "memory_save", content="Redis caches the sessions")
    two = await call(client, "memory_save", content="Nginx terminates TLS at the edge")
    await call(client, "memory_relate", source_id=start["id"], target_id=one["id"])
    await call(client, "memory_relate", source_id=start["id"], target_id=two["id"])
    between = await call(client, "memory_relate", source_id=one["id"], target_id=two["id"])

    near = await call(client, "memory_related", id=start["id"], hops=1)
    far = await call(client, "memory_related", id=start["id"], hops=2)

    assert [n["id"] for n in near["nodes"]] == [n["id"] for n in far["nodes"]]
    assert near["edges"] == far["edges"]
    assert between["relation"]["id"] in [e["id"] for e in near["edges"]]


async def test_a_session_related_to_itself_by_its_stored_id_is_refused_as_such(client: Client) -> None:
    await call(client, "memory_observe", content="Kafka consumer switched", session_id="main")
    await call(client, "memory_observe", content="Kafka lag dropped", session_id="main", project="other")

    error = await call_error(
        client, "memory_relate", source_id="main", target_id=scoped_session_id("main", "other"), project="other"
    )

    assert "target_id: must differ from source_id" in error
