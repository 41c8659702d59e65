"""A merged import keeps the roll-up rule: a parent is done (or cancelled) only when no child of it is
open. Two copies may each be sound and still disagree, one closing a parent while the other added
open work under it; merged, the parent is reopened, as the tools reopen one for a new open child,
and the import says which it reopened."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.conftest import FakeClock, call
from tests.test_action_fixes2 import actions
from tests.test_import_chains import machines
from tests.test_tools_actions import create, update
from tests.test_tools_operations import export_document


@pytest.mark.parametrize("into", ["b", "a"])
@pytest.mark.parametrize("closed", ["done", "cancelled"])
async def test_a_parent_closed_on_one_copy_over_open_work_added_on_the_other_is_reopened(
    tmp_path: Path, into: str, closed: str
) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        top = await create(a, "Release 2.0", clock)
        parent = await create(a, "Ship the exporter", clock, parent_id=top["id"])
        first = await create(a, "Write the exporter", clock, parent_id=parent["id"])
        await call(b, "memory_import", document=await export_document(a))
        await update(a, first["id"], status="done")
        await update(a, parent["id"], status=closed)  # sound on A: its one child is done
        clock.advance(minutes=5)
        added = await create(b, "Test the exporter", clock, parent_id=parent["id"], status="active")
        clock.advance(minutes=5)
        await update(a, parent["id"], priority=3)  # A's parent row is the newer one
        source, target = (a, b) if into == "b" else (b, a)
        clock.advance(minutes=5)

        imported = await call(target, "memory_import", document=await export_document(source))
        merged = await actions(target)
        again = await call(target, "memory_import", document=await export_document(source))
        # the copy that sent its parent closed learns it was reopened, from the reopened row's stamp
        back = await call(source, "memory_import", document=await export_document(target))
        other = await actions(source)

    assert merged[added["id"]]["status"] == "active"
    # done reopens active, its open child being worked on; cancelled reopens pending, as the tools do
    assert merged[parent["id"]]["status"] == ("active" if closed == "done" else "pending")
    assert merged[parent["id"]]["completed_at"] is None
    assert merged[parent["id"]]["priority"] == 3  # A's newer row, reopened
    assert merged[top["id"]]["status"] == "pending"  # never closed
    assert imported["reopened_actions"] == [parent["id"]]
    assert again["reopened_actions"] == []
    assert again["updated"] == {"actions": 0}
    assert back["reopened_actions"] == []
    assert {i: row["status"] for i, row in other.items()} == {i: row["status"] for i, row in merged.items()}


async def test_closed_ancestors_over_an_imported_open_child_reopen_up_the_line(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        a, b = await machines(stack, tmp_path, clock, "a", "b")
        top = await create(a, "Release 2.0", clock)
        parent = await create(a, "Ship the exporter", clock, parent_id=top["id"])
        await call(b, "memory_import", document=await export_document(a))
        await update(a, parent["id"], status="done")
        await update(a, top["id"], status="done")
        clock.advance(minutes=5)
        added = await create(b, "Write the exporter", clock, parent_id=parent["id"])  # pending
        clock.advance(minutes=5)

        imported = await call(b, "memory_import", document=await export_document(a))
        merged = await actions(b)

    assert merged[added["id"]]["status"] == "pending"
    assert (merged[parent["id"]]["status"], merged[top["id"]]["status"]) == ("pending", "pending")
    assert imported["reopened_actions"] == [parent["id"], top["id"]]
    assert imported["updated"] == {"actions": 2}  # the document's rows were written, then reopened
