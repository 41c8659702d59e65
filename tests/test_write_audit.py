"""What another process must learn of a write: every row a call changes is named in the audit log
(links the database clears as the records they name go, too), and a write decides what it replaces
from the index as of the latest commit, not as of its caller's last look."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

BUILD = "The zanzibar build needs python 3.12"


async def _recall(client: Client, **arguments: Any) -> list[str]:
    return [hit["id"] for hit in (await call(client, "memory_recall", **arguments))["hits"]]


def _audited(settings: Settings, action: str) -> set[str]:
    """The ids every audit row of `action` names."""
    with sqlite3.connect(settings.db) as conn:
        rows = conn.execute("SELECT changes FROM audit_log WHERE action = ?", (action,)).fetchall()
    return {change["id"] for (changes,) in rows for change in json.loads(changes)}


async def test_another_process_sees_a_memory_leave_its_forgotten_session(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as a, Client(build_server(settings, clock)) as b:
        await call(a, "memory_observe", content="Set up the zanzibar build", session_id="chat-1")
        memory = await call(a, "memory_save", content=BUILD, session_id="chat-1")
        first = await _recall(b, query="zanzibar", session_id="chat-1", include_memories=True)
        await call(a, "memory_forget", ids=["chat-1"])
        clock.advance(minutes=5)
        await call(a, "memory_observe", content="Lunch order for the team", session_id="chat-1")  # the name again
        here = await _recall(a, query="zanzibar", session_id="chat-1", include_memories=True)
        there = await _recall(b, query="zanzibar", session_id="chat-1", include_memories=True)
        anywhere = await _recall(b, query="zanzibar", include_memories=True)

    assert memory["id"] in first
    assert here == there == []  # the memory stays, in no session: the new chat-1 is another one
    assert memory["id"] in anywhere


async def test_a_forget_names_every_row_whose_link_the_database_clears(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as a:
        await call(a, "memory_observe", content="Started the zanzibar build", session_id="chat-1")
        old = await call(a, "memory_save", content=BUILD, session_id="chat-1")
        new = await call(a, "memory_save", content=f"{BUILD} and make 4.4", supersedes=old["id"], session_id="chat-1")
        outcome = await call(a, "memory_outcome_record", task="build zanzibar", success=True, session_id="chat-1")
        parent = (await call(a, "memory_action_create", title="Ship the release"))["action"]["id"]
        child = (await call(a, "memory_action_create", title="Tag the commit", parent_id=parent))["action"]["id"]
        waiting = (await call(a, "memory_action_create", title="Announce it", depends_on=[parent]))["action"]["id"]
        released = (await call(a, "memory_forget", ids=[parent]))["released"]
        await call(a, "memory_forget", ids=["chat-1"])

    with sqlite3.connect(settings.db) as conn:
        links = [
            conn.execute("SELECT session_id FROM memories WHERE id IN (?, ?)", (old["id"], new["id"])).fetchall(),
            conn.execute("SELECT session_id FROM outcomes WHERE id = ?", (outcome["id"],)).fetchall(),
            conn.execute("SELECT parent_id FROM actions WHERE id = ?", (child,)).fetchall(),
        ]
    assert released == {"children": [child], "dependents": [waiting]}
    assert links == [[(None,), (None,)], [(None,)], [(None,)]]
    assert {old["id"], new["id"], outcome["id"], child, waiting} <= _audited(settings, "memory_forget")


async def test_a_save_supersedes_the_version_another_process_just_committed(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as a:
        first = await call(a, "memory_save", content="The staging deploy runs behind nginx on port 8080 with tls")
        async with open_app(settings, clock) as other:  # its index holds the first version only
            clock.advance(minutes=1)
            second = await call(
                a,
                "memory_save",
                content="The staging deploy runs behind nginx on port 8081 with tls",
                supersedes=first["id"],
            )
            clock.advance(minutes=1)
            # no call of a client synced this index since: the save itself must catch it up
            third = await other.memories.save("test", "The staging deploy runs behind nginx on port 8082 with tls")

    with sqlite3.connect(settings.db) as conn:
        live = conn.execute("SELECT id FROM memories WHERE is_latest = 1").fetchall()
    assert (third.version, third.superseded_id) == (3, second["id"])
    assert live == [(third.id,)]
