"""Calls that reach more records than SQLite binds parameters in one statement (32,766 in stock
builds; every connection is held to a limit, whatever this machine's SQLite allows).

The connections here are held to a lower limit, as a stricter SQLite build would hold them, so the
same overflow shows with a tenth of the records and the tests take seconds, not half a minute."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.models.records import Observation, Session
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.server import build_server
from mcp_memory.services.episodic_docs import observation_doc
from tests.conftest import FakeClock, call

LIMIT = 2_000  # parameters one statement may bind here; each repository binds at most ~800 at once
MANY = LIMIT + 1_000  # more than one statement may bind, even at one parameter per record


@pytest.fixture(autouse=True)
def strict_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every connection opened by these tests binds at most LIMIT parameters per statement."""
    monkeypatch.setattr("mcp_memory.db.MAX_VARIABLES", LIMIT)


async def store_history(settings: Settings, clock: FakeClock, sessions: int) -> list[str]:
    """Store MANY observations spread over `sessions` sessions, one transaction; returns the session ids."""
    at = clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    ids = [f"long-{n}" for n in range(sessions)]
    async with open_app(settings, clock) as app, app.deps.db.transaction("test_history", project="test") as tx:
        per = MANY // sessions
        for session_id in ids:
            await SessionRepository(tx).add(
                Session(
                    id=session_id,
                    project="test",
                    started_at=at,
                    last_activity_at=at,
                    ended_at=at,
                    observation_count=per,
                    created_at=at,
                    updated_at=at,
                )
            )
            observations = [
                Observation(
                    id=f"obs_{session_id.replace('-', '')}{seq:020d}",
                    project="test",
                    session_id=session_id,
                    seq=seq,
                    type="note",
                    title=f"Step {seq}",
                    content=f"Step {seq} of the long import.",
                    created_at=at,
                )
                for seq in range(1, per + 1)
            ]
            for obs in observations:
                await ObservationRepository(tx).add(obs)
            await app.deps.indexer.put_many(tx, [observation_doc(o) for o in observations])
    return ids


async def test_forgetting_more_records_than_a_statement_binds(settings: Settings, clock: FakeClock) -> None:
    await store_history(settings, clock, sessions=1)
    async with Client(build_server(settings, clock)) as client:
        anchor = (await call(client, "memory_save", content="The long import ran overnight."))["id"]
        step = (await call(client, "memory_observations", session_id="long-0", limit=1))["observations"][0]["id"]
        await call(client, "memory_relate", source_id=anchor, target_id=step)

        planned = await call(client, "memory_forget", session_id="long-0", dry_run=True)
        forgotten = await call(client, "memory_forget", session_id="long-0")
        health = await call(client, "memory_diagnose")
        related = await call(client, "memory_related", id=anchor)

    assert planned["counts"] == forgotten["counts"] == {"observation": MANY, "memory": 0, "session": 1, "relation": 1}
    assert health["counts"]["observations"] == 0
    assert health["index_in_sync"] is True
    assert [n["id"] for n in related["nodes"] if n["id"] != anchor] == []  # its relation went with the step
    assert related["edges"] == []


async def test_consolidating_more_records_than_a_statement_binds(settings: Settings, clock: FakeClock) -> None:
    await store_history(settings, clock, sessions=1)
    clock.advance(days=1)
    async with Client(build_server(settings.model_copy(update={"observation_cap": 1_000}), clock)) as client:
        report = await call(client, "memory_consolidate")
        kept = await call(client, "memory_observations", session_id="long-0", limit=1)

    assert report["counts"]["folded"] == MANY - 1_000 + 1_000 // 50
    assert kept["total"] == 1_000 - 1_000 // 50
