"""Slots keep secrets out however they arrive, imports keep what was forgotten out of a slot made
again under its name, and a global slot's change reaches every context's listeners."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.subscriptions import ResourceUpdated

from tests.conftest import FakeClock, call, call_error
from tests.test_context_resource_fixes import events_until
from tests.test_import_chains import machines
from tests.test_tools_operations import export_document

PASSWORD = "Xk9vT2qL7zR4"


@pytest.mark.parametrize("how", ["append", "replace"])
async def test_a_secret_completed_by_an_append_or_a_passage_is_redacted(client: Client, how: str) -> None:
    if how == "append":
        await call(client, "memory_slot_create", name="creds", content="staging DB password:")
        written = await call(client, "memory_slot_append", name="creds", text=PASSWORD, separator=" ")
    else:
        await call(client, "memory_slot_create", name="creds", content="staging DB password: TBD")
        written = await call(client, "memory_slot_replace", name="creds", old="TBD", content=PASSWORD)
    stored = await call(client, "memory_slot_get", name="creds")

    assert stored["content"] == "staging DB password: [REDACTED:password_assignment]"
    assert written["redacted"] == {"password_assignment": 1}
    assert PASSWORD not in str(await export_document(client))


async def test_an_imported_slot_over_its_limit_once_redacted_is_refused(client: Client) -> None:
    await call(client, "memory_slot_create", name="creds", content="x", size_limit=40)
    document = await export_document(client)
    document["tables"]["slots"][0]["content"] = f"staging DB password: {PASSWORD}"  # 33 characters

    refused = await call_error(client, "memory_import", document=document)

    assert "slots[0].content: 51 characters once its secrets are redacted, over the slot's size_limit of 40" in refused
    assert (await call(client, "memory_slot_get", name="creds"))["content"] == "x"


async def test_a_forgotten_slot_never_overwrites_the_one_made_again_under_its_name(tmp_path: Path) -> None:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        one, two = await machines(stack, tmp_path, clock, "one", "two")
        await call(one, "memory_slot_create", name="notes", content="A: original")
        await call(two, "memory_import", document=await export_document(one))
        await call(one, "memory_slot_delete", name="notes")
        made = await call(one, "memory_slot_create", name="notes", content="B: made again on machine one")
        clock.advance(minutes=5)
        await call(two, "memory_slot_append", name="notes", text="A edited on machine two")

        imported = await call(one, "memory_import", document=await export_document(two))
        notes = await call(one, "memory_slot_get", name="notes")

    assert imported["forgotten"] == 1
    assert imported["matched_by_name"] == {}
    assert (notes["id"], notes["content"]) == (made["slot"]["id"], "B: made again on machine one")


async def test_a_global_slot_changed_from_another_project_updates_every_context(client: Client) -> None:
    await call(client, "memory_slot_create", name="persona", content="Terse.", scope="global", pinned=True)
    watched = ["memory://context", "memory://slots/persona"]

    async with client.listen(resources_list_changed=True, resource_subscriptions=watched) as subscription:
        await call(client, "memory_slot_append", name="persona", text="Kind.", scope="global", project="other")
        seen = await events_until(subscription, {ResourceUpdated(uri) for uri in watched})

    assert set(seen) == {ResourceUpdated(uri) for uri in watched}


async def test_replacing_a_passage_of_a_default_slot_not_made_yet_says_so(client: Client) -> None:
    refused = await call_error(client, "memory_slot_replace", name="self_notes", old="abc", content="d")
    slots = await call(client, "memory_slot_list")

    assert "old: slot 'self_notes' does not exist yet; give content without old to create it" in refused
    assert "self_notes" not in [s["name"] for s in slots["slots"]]
