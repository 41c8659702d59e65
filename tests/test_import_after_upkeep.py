"""What upkeep removed stays removed when an import brings a copy made before it: a folded
observation is not stored again beside the digest line that stands for it (and copies that folded
different turns agree), nor does an outcome consolidation pruned or a mistake card trimmed come back."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_tools_operations import export_document, fresh_settings

CAP = 10


async def observe(client: Client, clock: FakeClock, first: int, last: int, who: str = "we") -> None:
    for n in range(first, last):
        await call(client, "memory_observe", content=f"{who} noted turn {n} about widget{n}", session_id="work")
        clock.advance(minutes=1)


async def two_machines(stack: AsyncExitStack, tmp_path: Path, clock: FakeClock) -> tuple[Client, Client]:
    """Clients of two servers with databases of their own (as on two machines), sharing a clock."""
    a, b = [
        await stack.enter_async_context(
            Client(build_server(fresh_settings(tmp_path, name, observation_cap=CAP), clock))
        )
        for name in ("a", "b")
    ]
    return a, b


def session_of(document: dict[str, Any]) -> dict[str, Any]:
    [session] = document["tables"]["sessions"]
    return session


def held_once(document: dict[str, Any]) -> None:
    """Every folded observation is a digest line and not a row; the count covers each turn once."""
    session = session_of(document)
    rows = {o["id"] for o in document["tables"]["observations"]}
    folded = {n["id"] for n in document["tables"]["folded_observations"]}
    lines = [line for line in session["folded_digest"].split("\n") if line.startswith("- ")]
    assert rows.isdisjoint(folded)
    assert len(lines) == session["folded_count"] == len(folded)
    assert session["observation_count"] == len(rows) + len(folded)


async def test_an_old_backup_does_not_store_folded_observations_again(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path, observation_cap=CAP), clock)) as client:
        await observe(client, clock, 0, 8)
        backup = await export_document(client)
        await observe(client, clock, 8, 14)  # past the cap: the four least valuable turns fold
        before = await export_document(client)
        restored = await call(client, "memory_import", document=backup)
        after = await export_document(client)
        again = await call(client, "memory_import", document=backup)
        listed = await call(client, "memory_observations", session_id="work", limit=50)

    assert session_of(before)["folded_count"] == 4
    assert restored["folded"] == again["folded"] == 4
    assert after["tables"] == before["tables"]
    held_once(after)
    assert listed["total"] == 10


async def test_two_machines_that_folded_different_turns_end_up_alike(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await two_machines(stack, tmp_path, clock)
        await observe(a, clock, 0, 8, "a")
        await call(b, "memory_import", document=await export_document(a))
        await observe(b, clock, 8, 12, "b")  # b folds two of the shared turns
        await observe(a, clock, 12, 17, "a")  # a folds three (its session row is the newer)
        first = await call(b, "memory_import", document=await export_document(a))
        second = await call(a, "memory_import", document=await export_document(b))
        await call(b, "memory_import", document=await export_document(a))
        on_a, on_b = await export_document(a), await export_document(b)
        found = await call(b, "memory_recall", query="widget0 widget1 widget2 widget3", limit=20)

    assert on_a["tables"] == on_b["tables"]
    held_once(on_a)
    assert session_of(on_a)["observation_count"] == 17
    assert first["folded"] + second["folded"] > 0
    # a turn folded on either machine is found through the session's digest, not as a row
    folded = {n["id"] for n in on_a["tables"]["folded_observations"]}
    assert folded.isdisjoint(hit["id"] for hit in found["hits"])


def numbered_in_order(document: dict[str, Any]) -> bool:
    """Whether the session's kept turns hold positions folded_count + 1 to its count, in time order."""
    session = session_of(document)
    kept = sorted(document["tables"]["observations"], key=lambda o: (o["created_at"], o["id"]))
    return [o["seq"] for o in kept] == list(range(session["folded_count"] + 1, session["observation_count"] + 1))


async def test_positions_agree_when_one_copy_forgot_a_turn_the_other_folded(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await two_machines(stack, tmp_path, clock)
        await observe(a, clock, 0, CAP, "a")
        await call(b, "memory_import", document=await export_document(a))
        await observe(a, clock, CAP, CAP + 1, "a")  # past a's cap: a folds a turn
        [folded] = (await export_document(a))["tables"]["folded_observations"]
        await call(b, "memory_forget", ids=[folded["id"]])  # b numbers the other nine 1 to 9
        documents = []
        for to, source in ((b, a), (a, b), (b, a)):
            await call(to, "memory_import", document=await export_document(source))
            documents.append(await export_document(to))
        on_a, on_b = await export_document(a), await export_document(b)

    assert all(numbered_in_order(document) for document in documents)
    assert on_a["tables"] == on_b["tables"]


async def test_a_forgotten_turn_coming_back_leaves_the_positions_in_order(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await two_machines(stack, tmp_path, clock)
        await observe(a, clock, 0, CAP, "a")
        await call(b, "memory_import", document=await export_document(a))
        first = (await export_document(b))["tables"]["observations"][0]["id"]
        await call(b, "memory_forget", ids=[first])
        await observe(b, clock, CAP, CAP + 2, "b")  # past b's cap: b folds a turn
        before = await export_document(b)
        # a's copy still holds the forgotten turn, at position 1: written and deleted again
        imported = await call(b, "memory_import", document=await export_document(a))
        after = await export_document(b)
        await call(a, "memory_import", document=await export_document(b))
        on_a = await export_document(a)

    assert imported["forgotten"] == 1
    assert session_of(before)["folded_count"] == session_of(after)["folded_count"] == 1
    assert numbered_in_order(before)
    assert numbered_in_order(after)
    assert after["tables"]["observations"] == before["tables"]["observations"]
    assert on_a["tables"] == after["tables"]


async def test_folded_turns_forgotten_by_time_stay_gone_when_an_old_copy_comes_in(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path, observation_cap=CAP), clock)) as client:
        await observe(client, clock, 0, 8)
        backup = await export_document(client)
        await observe(client, clock, 8, 14)
        folded = (await export_document(client))["tables"]["folded_observations"]
        start = min(n["happened_at"] for n in folded)
        end = max(n["happened_at"] for n in folded)
        forgot = await call(client, "memory_forget", kind="observation", since=start, until=end)
        before = await export_document(client)
        imported = await call(client, "memory_import", document=backup)
        after = await export_document(client)

    assert forgot["counts"].get("folded_observation") == 4
    assert before["tables"]["folded_observations"] == []
    assert {n["id"] for n in folded} <= {n["id"] for n in before["tables"]["forgotten"]}
    assert imported["folded"] == 0
    assert after["tables"]["observations"] == before["tables"]["observations"]
    assert session_of(after)["folded_digest"] == session_of(before)["folded_digest"] == ""


# -- what the forgetting policy deleted stays deleted -----------------------------------------------


async def test_outcomes_consolidation_pruned_do_not_come_back_to_be_counted_twice(tmp_path: Path) -> None:
    clock = FakeClock()
    settings = fresh_settings(tmp_path, outcome_retention_days=30)
    async with Client(build_server(settings, clock)) as client:
        for n in range(4):
            await call(
                client,
                "memory_outcome_record",
                task=f"Deploy service {n}",
                task_type="deploy",
                success=True,
                strategy="run the canary first, then roll out",
            )
            clock.advance(hours=1)
        backup = await export_document(client)
        clock.advance(days=40)
        pruned = await call(client, "memory_consolidate")
        before = await export_document(client)
        imported = await call(client, "memory_import", document=backup)
        again = await call(client, "memory_consolidate")
        after = await export_document(client)

    assert [c["action"] for c in pruned["changes"] if c["kind"] == "outcome"] == ["pruned"] * 4
    assert imported["forgotten"] == 4
    assert [c for c in again["changes"] if c["kind"] == "outcome"] == []
    assert after["tables"]["outcomes"] == before["tables"]["outcomes"] == []
    [heuristic] = after["tables"]["lessons"]
    assert heuristic["source"]["pruned_outcomes"] == 4  # not 8


async def test_mistake_cards_trimmed_past_their_bound_do_not_come_back(tmp_path: Path) -> None:
    clock = FakeClock()
    async with Client(build_server(fresh_settings(tmp_path, max_mistake_cards=1), clock)) as client:
        card = {"type": "process", "correct_decision": "Run the migrations before the deploy"}
        await call(client, "memory_outcome_record", task="Deploy", success=False, mistake_cards=[card])
        backup = await export_document(client)
        clock.advance(minutes=5)
        card = {"type": "process", "correct_decision": "Pin the base image"}
        await call(client, "memory_outcome_record", task="Deploy", success=False, mistake_cards=[card])
        before = await export_document(client)
        imported = await call(client, "memory_import", document=backup)
        after = await export_document(client)

    assert [c["correct_decision"] for c in before["tables"]["mistake_cards"]] == ["Pin the base image"]
    assert imported["forgotten"] == 1
    assert after["tables"]["mistake_cards"] == before["tables"]["mistake_cards"]


async def test_a_session_folded_in_the_middle_round_trips_with_its_positions(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await two_machines(stack, tmp_path, clock)
        for n in range(25):  # past the cap the least important fold, wherever they are in the session
            content = f"we noted turn {n} about widget{n}"
            await call(a, "memory_observe", content=content, session_id="work", importance=(n % 5) / 5)
            clock.advance(minutes=1)
        exported = await export_document(a)
        await call(b, "memory_import", document=exported)
        copied = await export_document(b)
        back = await call(a, "memory_import", document=copied)
        found_on = [await call(client, "memory_recall", query="widget3", neighbours=1, limit=1) for client in (a, b)]

    positions = [o["seq"] for o in exported["tables"]["observations"]]
    assert positions != list(range(16, 26))  # a fold kept the turns where they were: 4, 5, 9, 10, …
    assert copied["tables"] == exported["tables"]
    assert sum(back["updated"].values()) == 0
    assert found_on[0]["hits"] == found_on[1]["hits"]
    held_once(copied)
