"""Two copies exchanging exports agree: a session one copy ended as idle ends on the other too (its
row is stamped when it ends), and a crystallized summary comes back from an export as it was
stored (its first line never reads to the privacy filter as a secret)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from tests.conftest import FakeClock, call
from tests.test_import_chains import machines
from tests.test_tools_operations import export_document


def session_row(document: dict[str, Any], session_id: str) -> dict[str, Any]:
    return next(s for s in document["tables"]["sessions"] if s["id"] == session_id)


async def test_a_session_ended_as_idle_on_one_copy_ends_on_the_other(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        first = await call(a, "memory_observe", content="Restarted the postgres proxy.")
        await call(b, "memory_import", document=await export_document(a))
        clock.advance(hours=3)  # past the idle limit: B's next observation starts a session
        later = await call(b, "memory_observe", content="Tuned the cache timeout.")
        imported = await call(a, "memory_import", document=await export_document(b))
        on_a, on_b = await export_document(a), await export_document(b)

    assert later["session_id"] != first["session_id"]
    ended = session_row(on_b, first["session_id"])
    assert ended["ended_at"] == ended["last_activity_at"]  # as of its last activity, stamped when it ended
    assert ended["updated_at"] > ended["ended_at"]
    assert imported["updated"]["sessions"] == 1
    assert session_row(on_a, first["session_id"]) == ended


async def test_a_crystallized_summary_comes_back_from_an_export_as_stored(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        await call(a, "memory_observe", content="Rotated the deploy token.", session_id="keys")
        clock.advance(minutes=5)
        (made,) = (await call(a, "memory_crystallize", session_id="keys", force=True))["sessions"]
        imported = await call(b, "memory_import", document=await export_document(a))
        kept = session_row(await export_document(b), "keys")["summary"]

    assert made["summary"].startswith("Rotated the deploy token — 1 observation, ")
    assert kept == made["summary"]
    assert imported["redacted"] == {}
