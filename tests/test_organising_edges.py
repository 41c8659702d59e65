"""Slots and actions at their edges: symbols appended, overlapping passages, secrets in limits and
passages, changes that change nothing, and cancelled actions with open work under or after them."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.conftest import call, call_error

SECRET = "sk-ant-api03-" + "A1b2" * 10


# -- slots ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["---", "✓", "🚀", "- [ ]"])
async def test_a_slot_takes_appended_symbols_as_create_and_replace_take_them(client: Client, text: str) -> None:
    await call(client, "memory_slot_create", name="todo", content="- fix login")

    appended = await call(client, "memory_slot_append", name="todo", text=text)

    assert appended["slot"]["content"] == f"- fix login\n{text}"


async def test_appending_blank_text_is_refused(client: Client) -> None:
    await call(client, "memory_slot_create", name="todo", content="- fix login")

    assert "text: must not be blank" in await call_error(client, "memory_slot_append", name="todo", text="  \n ")


@pytest.mark.parametrize(("content", "old"), [("version aaa", "aa"), ("step 1\n\n\nstep 2", "\n\n")])
async def test_a_passage_found_twice_overlapping_is_refused_as_ambiguous(
    client: Client, content: str, old: str
) -> None:
    await call(client, "memory_slot_create", name="notes", content=content)

    message = await call_error(client, "memory_slot_replace", name="notes", old=old, content="x")

    assert "old: text found 2 times in slot 'notes'" in message
    assert (await call(client, "memory_slot_get", name="notes"))["content"] == content


async def test_a_passage_holding_a_secret_is_found_as_it_was_stored(client: Client) -> None:
    await call(client, "memory_slot_create", name="keys", content=f"key: {SECRET}\nrotate monthly")

    replaced = await call(client, "memory_slot_replace", name="keys", old=f"key: {SECRET}", content="key: (rotated)")

    assert replaced["slot"]["content"] == "key: (rotated)\nrotate monthly"


async def test_a_limit_error_says_secrets_count_as_their_placeholders(client: Client) -> None:
    text = "db at postgres://u:hunter2@h"  # the password's placeholder is longer than the password
    message = await call_error(client, "memory_slot_create", name="pw", content=text, size_limit=30)

    assert "(secrets counted as the placeholders they are stored as), over its limit of" in message


async def test_a_replace_that_changes_nothing_is_refused_and_creates_nothing(client: Client) -> None:
    message = await call_error(client, "memory_slot_replace", name="persona")

    assert "content: nothing to change" in message
    assert (await call(client, "memory_slot_list"))["slots"] == []


async def test_a_global_slot_missing_is_said_to_be_missing_among_the_global_ones(client: Client) -> None:
    await call(client, "memory_slot_create", name="notes", content="Ours.")

    message = await call_error(client, "memory_slot_get", name="notes", scope="global")

    assert 'scope="global" looks among the global slots only, and none has that name' in message


# -- actions -------------------------------------------------------------------------------------------


async def create(client: Client, title: str, **fields: object) -> str:
    return str((await call(client, "memory_action_create", title=title, **fields))["action"]["id"])


async def test_a_parent_with_open_children_cannot_be_cancelled(client: Client) -> None:
    release = await create(client, "Release 2.0")
    docs = await create(client, "Write docs", parent_id=release)
    page = await create(client, "Docs: API page", parent_id=docs)

    message = await call_error(client, "memory_action_update", id=docs, status="cancelled")
    await call(client, "memory_action_update", id=page, status="cancelled")
    cancelled = await call(client, "memory_action_update", id=docs, status="cancelled")
    done = await call(client, "memory_action_update", id=release, status="done")

    assert f"status: {docs} still has open children: {page}; finish or cancel them first" in message
    assert (cancelled["action"]["status"], done["action"]["status"]) == ("cancelled", "done")


async def test_no_open_action_goes_under_a_cancelled_parent(client: Client) -> None:
    epic = await create(client, "Epic")
    child = await create(client, "Sub task", parent_id=epic)
    await call(client, "memory_action_update", id=child, status="cancelled")
    await call(client, "memory_action_update", id=epic, status="cancelled")
    other = await create(client, "Other")

    added = await call_error(client, "memory_action_create", title="New sub task", parent_id=epic)
    reopened = await call_error(client, "memory_action_update", id=child, status="pending")
    moved = await call_error(client, "memory_action_update", id=other, parent_id=epic)
    await call(client, "memory_action_update", id=epic, status="pending")
    again = await call(client, "memory_action_update", id=child, status="pending")

    assert "parent_id: the new action would be open under" in added
    assert f"would be open under {epic}, which is cancelled; reopen {epic} (status pending) first" in added
    assert reopened.startswith(f"Error executing tool memory_action_update: status: {child} would be open under")
    assert f"parent_id: {other} would be open under {epic}" in moved
    assert again["action"]["status"] == "pending"


async def test_a_cancelled_dependency_is_named_with_its_status_and_the_way_out(client: Client) -> None:
    old = await create(client, "Old approach")
    ship = await create(client, "Ship", depends_on=[old])
    await call(client, "memory_action_update", id=old, status="cancelled")

    message = await call_error(client, "memory_action_update", id=ship, status="active")
    await call(client, "memory_action_update", id=ship, remove_depends_on=[old])
    active = await call(client, "memory_action_update", id=ship, status="active")

    assert f"status: {ship} is blocked by unfinished dependencies: {old} (cancelled); finish them first, or drop" in (
        message
    )
    assert active["action"]["status"] == "active"


async def test_forgetting_an_action_names_those_that_lose_their_link_to_it(client: Client) -> None:
    sign_off = await create(client, "Get security sign-off")
    deploy = await create(client, "Deploy to prod", depends_on=[sign_off])
    epic = await create(client, "Epic")
    sub = await create(client, "Sub task", parent_id=epic)

    dry = await call(client, "memory_forget", ids=[sign_off, epic], dry_run=True)
    done = await call(client, "memory_forget", ids=[sign_off, epic])
    frontier = await call(client, "memory_frontier")

    assert dry["released"] == done["released"] == {"dependents": [deploy], "children": [sub]}
    assert done["deleted"]["action"] == sorted([sign_off, epic])
    assert {a["id"]: (a["depends_on"], a["parent_id"]) for a in frontier["actions"]} == {
        deploy: ([], None),
        sub: ([], None),
    }
