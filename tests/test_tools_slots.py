"""Slot tools through the real server: list, get, create, append, replace, delete."""

from __future__ import annotations

from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

DEFAULT_NAMES = ["persona", "user_preferences", "project_context", "pending_items", "self_notes"]


async def get(client: Client, name: str, **extra: Any) -> dict[str, Any]:
    return await call(client, "memory_slot_get", name=name, **extra)


async def overview(client: Client, **extra: Any) -> dict[str, Any]:
    return await call(client, "memory_slot_list", **extra)


# -- create, get, list ---------------------------------------------------------------------------


async def test_a_created_slot_reads_back_in_full(client: Client) -> None:
    created = await call(
        client,
        "memory_slot_create",
        name="style_guide",
        content="Use British spelling.\nNo emojis.",
        size_limit=500,
        pinned=True,
        description="How to write.",
    )

    assert created["created"] is True
    slot = created["slot"]
    assert slot["id"].startswith("slot_")
    assert slot == {
        "id": slot["id"],
        "name": "style_guide",
        "scope": "project",
        "content": "Use British spelling.\nNo emojis.",
        "size": 32,
        "size_limit": 500,
        "pinned": True,
        "description": "How to write.",
        "updated_at": "2026-01-05T09:00:00.000000Z",
    }
    assert await get(client, "style_guide") == slot


async def test_a_custom_slot_defaults_to_unpinned_with_the_configured_limit(client: Client) -> None:
    slot = (await call(client, "memory_slot_create", name="scratch"))["slot"]
    assert (slot["content"], slot["size"], slot["size_limit"], slot["pinned"], slot["description"]) == (
        "",
        0,
        2000,
        False,
        None,
    )


async def test_a_default_name_gets_its_offered_description_and_pin(client: Client) -> None:
    persona = (await call(client, "memory_slot_create", name="persona", content="A careful reviewer."))["slot"]
    notes = (await call(client, "memory_slot_create", name="self_notes"))["slot"]
    unpinned = (await call(client, "memory_slot_create", name="pending_items", pinned=False, description="Mine."))[
        "slot"
    ]

    assert persona["pinned"] is True
    assert persona["description"] == "Who the agent is here: role, tone, what it must always or never do."
    assert notes["pinned"] is False
    assert (unpinned["pinned"], unpinned["description"]) == (False, "Mine.")


async def test_the_list_offers_default_names_until_they_are_created(client: Client) -> None:
    empty = await overview(client)
    assert empty["project"] == "test"
    assert empty["slots"] == []
    assert [s["name"] for s in empty["suggested"]] == DEFAULT_NAMES
    assert [s["pinned"] for s in empty["suggested"]] == [True, True, True, True, False]
    assert all(s["description"] for s in empty["suggested"])

    await call(client, "memory_slot_create", name="persona", content="p" * 200)
    await call(client, "memory_slot_create", name="checklist", content="- tests\n- docs", pinned=True)
    listed = await overview(client)

    assert [s["name"] for s in listed["suggested"]] == DEFAULT_NAMES[1:]
    assert [s["name"] for s in listed["slots"]] == ["checklist", "persona"]
    checklist, persona = listed["slots"]
    assert checklist == {
        "name": "checklist",
        "scope": "project",
        "pinned": True,
        "size": 14,
        "size_limit": 2000,
        "description": None,
        "preview": "- tests\n- docs",  # newlines kept
    }
    assert persona["size"] == 200
    assert len(persona["preview"]) < 200  # a list shows a preview, not the content


async def test_creating_an_existing_slot_is_a_conflict(client: Client) -> None:
    await call(client, "memory_slot_create", name="persona", content="first")
    message = await call_error(client, "memory_slot_create", name="persona", content="second")
    assert "'persona' already exists" in message
    assert "memory_slot_replace" in message
    assert (await get(client, "persona"))["content"] == "first"


async def test_an_unknown_slot_is_not_found(client: Client) -> None:
    message = await call_error(client, "memory_slot_get", name="nothing_here")
    assert "nothing_here" in message
    assert "memory_slot_create" in message
    default = await call_error(client, "memory_slot_get", name="persona")
    assert "default names are created on first append" in default


async def test_bad_slot_names_are_refused(client: Client) -> None:
    for name in ("Persona", "my slot", "1st", "x" * 65):
        assert "name" in await call_error(client, "memory_slot_create", name=name)
    assert (await overview(client))["slots"] == []


async def test_slots_of_another_project_are_not_visible(client: Client) -> None:
    await call(client, "memory_slot_create", name="persona", content="elsewhere", project="other")
    assert (await overview(client))["slots"] == []
    assert "persona" in await call_error(client, "memory_slot_get", name="persona")
    assert (await get(client, "persona", project="other"))["content"] == "elsewhere"


# -- append --------------------------------------------------------------------------------------


async def test_append_adds_text_with_a_separator(client: Client, clock: FakeClock) -> None:
    await call(client, "memory_slot_create", name="log", content="one")
    clock.advance(minutes=3)
    await call(client, "memory_slot_append", name="log", text="two")
    appended = await call(client, "memory_slot_append", name="log", text="three", separator=" | ")

    assert appended["created"] is False
    assert appended["slot"]["content"] == "one\ntwo | three"
    assert appended["slot"]["size"] == 15
    assert appended["slot"]["updated_at"] == "2026-01-05T09:03:00.000000Z"


async def test_appending_to_an_empty_slot_adds_no_separator(client: Client) -> None:
    await call(client, "memory_slot_create", name="log")
    assert (await call(client, "memory_slot_append", name="log", text="first"))["slot"]["content"] == "first"


async def test_append_creates_a_default_named_slot_on_first_use(client: Client) -> None:
    appended = await call(client, "memory_slot_append", name="pending_items", text="- finish the export")

    assert appended["created"] is True
    slot = appended["slot"]
    assert (slot["content"], slot["pinned"], slot["size_limit"], slot["scope"]) == (
        "- finish the export",
        True,
        2000,
        "project",
    )
    assert slot["description"] == "Open threads to pick up next time, with enough context to resume."
    again = await call(client, "memory_slot_append", name="pending_items", text="- then the import")
    assert again["created"] is False
    assert again["slot"]["id"] == slot["id"]
    assert "pending_items" not in [s["name"] for s in (await overview(client))["suggested"]]


async def test_append_to_an_unknown_custom_name_is_not_found(client: Client) -> None:
    message = await call_error(client, "memory_slot_append", name="todo_list", text="- something")
    assert "todo_list" in message
    assert "memory_slot_create" in message
    assert (await overview(client))["slots"] == []


# -- limits --------------------------------------------------------------------------------------


async def test_append_past_the_limit_fails_with_the_numbers_and_changes_nothing(client: Client) -> None:
    await call(client, "memory_slot_create", name="notes", content="a" * 90, size_limit=100)

    message = await call_error(client, "memory_slot_append", name="notes", text="b" * 10)

    # 90 + "\n" + 10 = 101 characters.
    assert "would hold 101 characters, over its limit of 100" in message
    assert "nothing was changed" in message
    assert "memory_slot_replace" in message
    slot = await get(client, "notes")
    assert slot["content"] == "a" * 90
    assert slot["size"] == 90

    # Exactly at the limit is fine.
    fitted = await call(client, "memory_slot_append", name="notes", text="b" * 9)
    assert fitted["slot"]["size"] == 100


async def test_replace_past_the_limit_fails_and_changes_nothing(client: Client) -> None:
    await call(client, "memory_slot_create", name="notes", content="short", size_limit=100, pinned=False)

    message = await call_error(client, "memory_slot_replace", name="notes", content="x" * 101, pinned=True)
    assert "would hold 101 characters, over its limit of 100" in message
    assert "memory_slot_replace" in message
    passage = await call_error(client, "memory_slot_replace", name="notes", old="short", content="y" * 120)
    assert "would hold 120 characters, over its limit of 100" in passage
    shrink = await call_error(client, "memory_slot_replace", name="notes", size_limit=3)
    assert "would hold 5 characters, over its limit of 3" in shrink

    slot = await get(client, "notes")
    assert (slot["content"], slot["size_limit"], slot["pinned"]) == ("short", 100, False)


async def test_a_slot_cannot_be_created_over_its_limit(client: Client) -> None:
    message = await call_error(client, "memory_slot_create", name="big", content="z" * 2001)
    assert "would hold 2001 characters, over its limit of 2000" in message
    assert (await overview(client))["slots"] == []


async def test_past_the_largest_limit_the_way_out_is_a_shorter_text_only(client: Client) -> None:
    await call(client, "memory_slot_create", name="log", content="a" * 99_995, size_limit=100_000)

    message = await call_error(client, "memory_slot_append", name="log", text="b" * 20)

    # once it advised raising size_limit to 100016, which the tool refuses
    assert "would hold 100016 characters, more than any slot holds (100000); nothing was changed." in message
    assert "size_limit" not in message
    assert "rewriting the slot shorter with memory_slot_replace" in message


async def test_the_default_limit_is_a_setting(settings: Settings, clock: FakeClock) -> None:
    small = settings.model_copy(update={"slot_size_limit": 150})
    async with Client(build_server(small, clock)) as client:
        slot = (await call(client, "memory_slot_append", name="self_notes", text="hello"))["slot"]
        message = await call_error(client, "memory_slot_append", name="self_notes", text="w" * 150)
    assert slot["size_limit"] == 150
    assert "over its limit of 150" in message


async def test_raising_the_limit_lets_a_longer_text_in(client: Client) -> None:
    await call(client, "memory_slot_create", name="notes", content="a" * 100, size_limit=100)
    raised = await call(client, "memory_slot_replace", name="notes", size_limit=300)
    assert (raised["slot"]["content"], raised["slot"]["size_limit"]) == ("a" * 100, 300)
    assert (await call(client, "memory_slot_append", name="notes", text="b" * 199))["slot"]["size"] == 300


# -- replace -------------------------------------------------------------------------------------


async def test_replace_rewrites_the_whole_content(client: Client) -> None:
    await call(client, "memory_slot_create", name="project_context", content="Old description of the project.")
    replaced = await call(client, "memory_slot_replace", name="project_context", content="A Python MCP server.")
    assert replaced["created"] is False
    assert replaced["slot"]["content"] == "A Python MCP server."
    emptied = await call(client, "memory_slot_replace", name="project_context", content="")
    assert emptied["slot"]["content"] == ""


async def test_replace_with_old_rewrites_one_passage(client: Client) -> None:
    await call(client, "memory_slot_create", name="todo", content="- write docs\n- fix bug\n- fix bug again")

    ambiguous = await call_error(client, "memory_slot_replace", name="todo", old="fix bug", content="fix parser bug")
    kept = await get(client, "todo")
    replaced = await call(client, "memory_slot_replace", name="todo", old="fix bug\n", content="fix parser bug\n")

    assert "old: text found 2 times in slot 'todo'; give more of it" in ambiguous
    assert kept["content"] == "- write docs\n- fix bug\n- fix bug again"
    assert replaced["slot"]["content"] == "- write docs\n- fix parser bug\n- fix bug again"


async def test_replace_with_an_old_passage_that_is_not_there_is_refused(client: Client) -> None:
    await call(client, "memory_slot_create", name="todo", content="- write docs")
    message = await call_error(client, "memory_slot_replace", name="todo", old="fix bug", content="x")
    assert "old" in message
    assert "memory_slot_get" in message
    assert "content" in await call_error(client, "memory_slot_replace", name="todo", old="write docs")
    assert (await get(client, "todo"))["content"] == "- write docs"


async def test_replace_changes_pin_and_description_without_touching_the_content(client: Client) -> None:
    await call(client, "memory_slot_create", name="persona", content="A careful reviewer.")
    unpinned = await call(client, "memory_slot_replace", name="persona", pinned=False)
    described = await call(client, "memory_slot_replace", name="persona", description="Tone and role.")

    assert unpinned["slot"]["pinned"] is False
    assert described["slot"]["pinned"] is False
    assert described["slot"]["description"] == "Tone and role."
    assert described["slot"]["content"] == "A careful reviewer."
    assert (await get(client, "persona")) == described["slot"]


async def test_replace_creates_a_default_named_slot_but_not_a_custom_one(client: Client) -> None:
    created = await call(client, "memory_slot_replace", name="user_preferences", content="Short answers.")
    assert created["created"] is True
    assert (created["slot"]["content"], created["slot"]["pinned"]) == ("Short answers.", True)
    assert "custom_thing" in await call_error(client, "memory_slot_replace", name="custom_thing", content="x")


# -- scopes --------------------------------------------------------------------------------------


async def test_a_project_slot_shadows_a_global_one_of_the_same_name(client: Client) -> None:
    glob = (await call(client, "memory_slot_create", name="persona", content="Global persona.", scope="global"))["slot"]
    assert glob["scope"] == "global"
    # Visible from every project while nothing shadows it.
    assert (await get(client, "persona"))["content"] == "Global persona."
    assert (await get(client, "persona", project="other"))["content"] == "Global persona."
    assert [(s["name"], s["scope"]) for s in (await overview(client))["slots"]] == [("persona", "global")]

    local = (await call(client, "memory_slot_create", name="persona", content="Project persona."))["slot"]

    assert local["scope"] == "project"
    assert (await get(client, "persona"))["id"] == local["id"]
    assert (await get(client, "persona", scope="global"))["id"] == glob["id"]
    assert (await get(client, "persona", project="other"))["id"] == glob["id"]
    listed = await overview(client)
    assert [(s["name"], s["scope"], s["preview"]) for s in listed["slots"]] == [
        ("persona", "project", "Project persona.")
    ]

    # Writes without a scope go to the visible (project) slot.
    await call(client, "memory_slot_append", name="persona", text="Terse.")
    assert (await get(client, "persona"))["content"] == "Project persona.\nTerse."
    assert (await get(client, "persona", scope="global"))["content"] == "Global persona."

    deleted = await call(client, "memory_slot_delete", name="persona")
    assert deleted == {"name": "persona", "scope": "project", "id": local["id"], "relations_deleted": []}
    assert (await get(client, "persona"))["id"] == glob["id"]


async def test_without_a_scope_a_write_goes_to_the_global_slot_when_the_project_has_none(client: Client) -> None:
    # Design: the visible slot is written, so a project's append changes the global slot for every project.
    await call(client, "memory_slot_create", name="persona", content="Global persona.", scope="global")
    appended = await call(client, "memory_slot_append", name="persona", text="Added from test.")
    assert appended["slot"]["scope"] == "global"
    assert (await get(client, "persona", project="other"))["content"] == "Global persona.\nAdded from test."


async def test_appending_to_a_missing_default_slot_with_global_scope_creates_it_globally(client: Client) -> None:
    created = await call(client, "memory_slot_append", name="user_preferences", text="Tabs.", scope="global")
    assert created["slot"]["scope"] == "global"
    assert (await get(client, "user_preferences", project="other"))["content"] == "Tabs."


# -- delete --------------------------------------------------------------------------------------


async def test_delete_removes_a_slot(client: Client) -> None:
    created = (await call(client, "memory_slot_create", name="scratch", content="temp"))["slot"]

    deleted = await call(client, "memory_slot_delete", name="scratch")

    assert deleted == {"name": "scratch", "scope": "project", "id": created["id"], "relations_deleted": []}
    assert "scratch" in await call_error(client, "memory_slot_get", name="scratch")
    assert "scratch" in await call_error(client, "memory_slot_delete", name="scratch")
    assert (await overview(client))["slots"] == []


async def test_deleting_a_default_slot_offers_its_name_again(client: Client) -> None:
    await call(client, "memory_slot_append", name="persona", text="Someone.")
    await call(client, "memory_slot_delete", name="persona")
    assert [s["name"] for s in (await overview(client))["suggested"]] == DEFAULT_NAMES


async def test_delete_with_a_scope_only_touches_that_scope(client: Client) -> None:
    await call(client, "memory_slot_create", name="persona", content="Project persona.")
    message = await call_error(client, "memory_slot_delete", name="persona", scope="global")
    assert 'scope="global" looks among the global slots only, and none has that name' in message
    assert "this project's own slot has it: leave scope out to delete that one" in message
    assert (await get(client, "persona"))["content"] == "Project persona."


# -- privacy -------------------------------------------------------------------------------------


async def test_secrets_in_slot_content_are_redacted_and_counted(client: Client) -> None:
    secret = "sk-ant-api03-" + "a" * 40
    created = await call(
        client, "memory_slot_create", name="project_context", content=f"Deploy key: {secret} <private>home</private>"
    )
    appended = await call(
        client, "memory_slot_append", name="project_context", text="Token ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    )
    replaced = await call(
        client, "memory_slot_replace", name="self_notes", content="password=hunter2hunter2 for the db"
    )

    for result in (created, appended, replaced):
        assert sum(result["redacted"].values()) >= 1, result
    content = (await get(client, "project_context"))["content"]
    assert secret not in content
    assert "home" not in content
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in content
    assert "hunter2hunter2" not in (await get(client, "self_notes"))["content"]


async def test_a_secret_in_the_passage_to_find_is_not_counted_as_redacted_by_the_replace(client: Client) -> None:
    await call(client, "memory_slot_create", name="self_notes", content="db password=hunter2hunter2 (rotate monthly)")

    replaced = await call(
        client, "memory_slot_replace", name="self_notes", old="password=hunter2hunter2", content="password in vault"
    )

    assert replaced["redacted"] == {}  # the secret was only named to find it; nothing stored was redacted
    assert (await get(client, "self_notes"))["content"] == "db password in vault (rotate monthly)"


# -- restart -------------------------------------------------------------------------------------


async def test_slots_survive_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        await call(first, "memory_slot_create", name="persona", content="Reviewer.", size_limit=300)
        await call(first, "memory_slot_append", name="persona", text="Terse.")
        await call(first, "memory_slot_create", name="persona", content="Global.", scope="global")
        await call(first, "memory_slot_append", name="self_notes", text="Check the logs.")
        before = await overview(first)
        persona = await get(first, "persona")

    async with Client(build_server(settings, clock)) as second:
        after = await overview(second)
        assert await get(second, "persona") == persona
        assert (await get(second, "persona", scope="global"))["content"] == "Global."
        message = await call_error(second, "memory_slot_append", name="persona", text="x" * 290)

    assert after == before
    assert persona["content"] == "Reviewer.\nTerse."
    assert "over its limit of 300" in message
