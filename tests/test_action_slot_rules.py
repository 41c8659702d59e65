"""Action rules at the edges of the tree and of dependencies, errors of a refused new action, and
slot limit errors whose advice fits the call that broke the limit."""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import Client

from tests.conftest import call, call_error

ALL = ["pending", "active", "blocked", "done", "cancelled"]


async def create(client: Client, title: str, **extra: Any) -> str:
    """Create an action and return its id."""
    return str((await call(client, "memory_action_create", title=title, **extra))["action"]["id"])


async def update(client: Client, action_id: str, **extra: Any) -> dict[str, Any]:
    return await call(client, "memory_action_update", id=action_id, **extra)


async def states(client: Client) -> dict[str, tuple[str, str | None]]:
    """Every action's (status, parent_id), by id."""
    listed = await call(client, "memory_action_list", status=ALL)
    return {a["id"]: (a["status"], a["parent_id"]) for a in listed["actions"]}


async def done_chain_under_cancelled(client: Client, depth: int = 1) -> tuple[str, list[str], str]:
    """A cancelled root over `depth` done actions, each the parent of the next, over a done leaf."""
    root = await create(client, "Root")
    chain, parent = [], root
    for i in range(depth):
        parent = await create(client, f"Middle {i}", parent_id=parent)
        chain.append(parent)
    leaf = await create(client, "Leaf", parent_id=parent)
    for action_id in [leaf, *reversed(chain)]:
        await update(client, action_id, status="done")
    await update(client, root, status="cancelled")
    return root, chain, leaf


# -- no open work under a cancelled action, even through done parents ------------------------------


async def test_reopening_a_done_child_whose_done_parent_sits_under_a_cancelled_action_is_refused(
    client: Client,
) -> None:
    root, (parent,), leaf = await done_chain_under_cancelled(client)
    before = await states(client)

    message = await call_error(client, "memory_action_update", id=leaf, status="active")

    assert message == (
        f"Error executing tool memory_action_update: status: {leaf} would reopen its done parent {parent} "
        f"under {root}, which is cancelled; reopen {root} (status pending) first, or give {leaf} another parent"
    )
    assert await states(client) == before


async def test_the_refusal_names_every_done_ancestor_that_would_reopen(client: Client) -> None:
    root, chain, leaf = await done_chain_under_cancelled(client, depth=2)

    message = await call_error(client, "memory_action_update", id=leaf, status="pending")

    nearest_first = f"{chain[1]}, {chain[0]}"
    assert f"status: {leaf} would reopen its done ancestors {nearest_first} under {root}, which is cancelled" in message


async def test_adding_a_child_under_a_done_parent_of_a_cancelled_action_is_refused(client: Client) -> None:
    root, (parent,), _ = await done_chain_under_cancelled(client)
    before = await states(client)

    message = await call_error(client, "memory_action_create", title="New work", parent_id=parent)

    assert message == (
        f"Error executing tool memory_action_create: parent_id: the new action would reopen its done parent "
        f"{parent} under {root}, which is cancelled; reopen {root} (status pending) first, or give the new "
        "action another parent"
    )
    assert await states(client) == before


async def test_moving_open_work_under_a_done_parent_of_a_cancelled_action_is_refused(client: Client) -> None:
    root, (parent,), _ = await done_chain_under_cancelled(client)
    loose = await create(client, "Loose", status="active")
    before = await states(client)

    message = await call_error(client, "memory_action_update", id=loose, parent_id=parent, title="Renamed")

    assert f"parent_id: {loose} would reopen its done parent {parent} under {root}, which is cancelled" in message
    assert await states(client) == before
    listed = await call(client, "memory_action_list", status=ALL)
    assert [a["title"] for a in listed["actions"] if a["id"] == loose] == ["Loose"]


async def test_either_way_out_of_the_refusal_works(client: Client) -> None:
    root, (parent,), leaf = await done_chain_under_cancelled(client)
    elsewhere = await create(client, "Elsewhere")

    # Another parent in the same call: the old done parent stays done.
    moved = await update(client, leaf, status="pending", parent_id=elsewhere)
    assert (moved["action"]["status"], moved["also_changed"]) == ("pending", [])
    assert (await states(client))[parent] == ("done", root)

    # Reopening the cancelled action first: adding a child then reopens the done parent under it.
    await update(client, root, status="pending")
    added = await call(client, "memory_action_create", title="New work", parent_id=parent, status="active")
    assert added["also_changed"] == [parent]
    assert (await states(client))[parent] == ("active", root)
    assert (await states(client))[root] == ("pending", None)


# -- an active action takes on no unfinished dependency ------------------------------------------------


async def test_an_active_action_cannot_take_on_an_unfinished_dependency(client: Client) -> None:
    dep = await create(client, "Dependency")
    action = await create(client, "Working", status="active")

    message = await call_error(client, "memory_action_update", id=action, add_depends_on=[dep], priority=3)

    assert message == (
        f"Error executing tool memory_action_update: add_depends_on: {action} is active and would be blocked by "
        f"unfinished dependencies: {dep} (pending); finish them first, or set its status to pending in the same call"
    )
    listed = {a["id"]: a for a in (await call(client, "memory_action_list"))["actions"]}
    assert (listed[action]["status"], listed[action]["depends_on"], listed[action]["priority"]) == ("active", [], 0)


@pytest.mark.parametrize("status", ["pending", "blocked"])
async def test_an_active_action_takes_an_unfinished_dependency_when_it_stops_in_the_same_call(
    client: Client, status: str
) -> None:
    dep = await create(client, "Dependency")
    action = await create(client, "Working", status="active")

    updated = (await update(client, action, status=status, add_depends_on=[dep]))["action"]

    assert (updated["status"], updated["depends_on"], updated["blocked_by"]) == (status, [dep], [dep])


async def test_an_active_action_still_takes_on_a_done_dependency(client: Client) -> None:
    dep = await create(client, "Dependency")
    await update(client, dep, status="done")
    action = await create(client, "Working", status="active")

    updated = (await update(client, action, add_depends_on=[dep]))["action"]

    assert (updated["status"], updated["depends_on"], updated["blocked_by"]) == ("active", [dep], [])


# -- a refused new action is "the new action", with create's own ways out ----------------------------


async def test_a_new_active_action_blocked_by_a_dependency_is_not_named_by_an_id(client: Client) -> None:
    dep = await create(client, "Dependency")

    message = await call_error(client, "memory_action_create", title="Eager", status="active", depends_on=[dep])

    assert message == (
        f"Error executing tool memory_action_create: status: the new action would be blocked by unfinished "
        f"dependencies: {dep} (pending); finish them first, leave them out of depends_on, or create it pending"
    )
    assert set(re.findall(r"act_[0-9a-z]+", message)) == {dep}
    assert list(await states(client)) == [dep]
    # The advice works: created pending, it waits for the dependency.
    eager = (await call(client, "memory_action_create", title="Eager", depends_on=[dep]))["action"]
    assert (eager["status"], eager["blocked_by"]) == ("pending", [dep])


async def test_a_new_action_under_a_cancelled_parent_is_not_named_by_an_id(client: Client) -> None:
    parent = await create(client, "Dropped")
    await update(client, parent, status="cancelled")

    message = await call_error(client, "memory_action_create", title="Orphan", parent_id=parent)

    assert message == (
        f"Error executing tool memory_action_create: parent_id: the new action would be open under {parent}, "
        f"which is cancelled; reopen {parent} (status pending) first, or give the new action another parent"
    )
    assert list(await states(client)) == [parent]


# -- slot limits: advice that fits the call ----------------------------------------------------------


async def test_lowering_a_limit_below_the_content_says_how_low_it_can_go(client: Client) -> None:
    await call(client, "memory_slot_create", name="notes", content="0123456789")

    message = await call_error(client, "memory_slot_replace", name="notes", size_limit=5)

    assert message == (
        "Error executing tool memory_slot_replace: size_limit: slot 'notes' would hold 10 characters, over its "
        "limit of 5; nothing was changed. The content is 10 characters, so size_limit must be at least 10, or "
        "replace the content with shorter text in the same call."
    )
    assert "raise its size_limit" not in message
    slot = await call(client, "memory_slot_get", name="notes")
    assert (slot["content"], slot["size_limit"]) == ("0123456789", 2000)
    # Both ways out work.
    assert (await call(client, "memory_slot_replace", name="notes", size_limit=10))["slot"]["size_limit"] == 10
    shorter = (await call(client, "memory_slot_replace", name="notes", content="01234", size_limit=5))["slot"]
    assert (shorter["content"], shorter["size_limit"]) == ("01234", 5)


async def test_content_too_long_for_a_replace_says_the_limit_it_needs(client: Client) -> None:
    await call(client, "memory_slot_create", name="notes", content="short", size_limit=10)

    message = await call_error(client, "memory_slot_replace", name="notes", content="x" * 11)

    assert message.endswith(
        "content: slot 'notes' would hold 11 characters, over its limit of 10; nothing was changed. Give shorter "
        "content, or a size_limit of at least 11, in the same memory_slot_replace call."
    )
    replaced = (await call(client, "memory_slot_replace", name="notes", content="x" * 11, size_limit=11))["slot"]
    assert (replaced["size"], replaced["size_limit"]) == (11, 11)


async def test_appending_past_the_limit_of_an_existing_slot_says_how_to_make_room(client: Client) -> None:
    await call(client, "memory_slot_create", name="notes", content="x" * 10, size_limit=10)

    message = await call_error(client, "memory_slot_append", name="notes", text="y")

    assert message.endswith(
        "text: slot 'notes' would hold 12 characters, over its limit of 10; nothing was changed. Append shorter "
        "text, or make room first with memory_slot_replace: rewrite the slot shorter, or raise its size_limit to "
        "at least 12."
    )
    await call(client, "memory_slot_replace", name="notes", size_limit=12)
    assert (await call(client, "memory_slot_append", name="notes", text="y"))["slot"]["content"] == "x" * 10 + "\ny"


@pytest.mark.parametrize("tool", ["memory_slot_create", "memory_slot_replace"])
async def test_appending_too_much_to_a_slot_not_made_yet_says_how_to_create_it(client: Client, tool: str) -> None:
    text = "p" * 2001

    message = await call_error(client, "memory_slot_append", name="persona", text=text)

    assert message == (
        "Error executing tool memory_slot_append: text: slot 'persona' would hold 2001 characters, over its limit "
        "of 2000; nothing was created. Append shorter text, or create the slot holding this text with "
        "memory_slot_create or memory_slot_replace (content and a size_limit of at least 2001)."
    )
    assert (await call(client, "memory_slot_list"))["slots"] == []
    # The advice works with either tool.
    made = await call(client, tool, name="persona", content=text, size_limit=2001)
    assert (made["created"], made["slot"]["content"], made["slot"]["size_limit"]) == (True, text, 2001)
