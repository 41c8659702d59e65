"""Action tools through the real server: create, update, list, frontier."""

from __future__ import annotations

from typing import Any

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error


async def create(client: Client, title: str, clock: FakeClock | None = None, **extra: Any) -> dict[str, Any]:
    """Create an action and return its view; with a clock, the next one is a minute younger."""
    result = await call(client, "memory_action_create", title=title, **extra)
    if clock is not None:
        clock.advance(minutes=1)
    return result["action"]


async def update(client: Client, action_id: str, **extra: Any) -> dict[str, Any]:
    return await call(client, "memory_action_update", id=action_id, **extra)


async def status_of(client: Client, action_id: str) -> str:
    listed = await call(client, "memory_action_list", status=["pending", "active", "blocked", "done", "cancelled"])
    return {a["id"]: a["status"] for a in listed["actions"]}[action_id]


async def frontier(client: Client, **extra: Any) -> list[str]:
    return [a["title"] for a in (await call(client, "memory_frontier", **extra))["actions"]]


async def titles(client: Client, **extra: Any) -> list[str]:
    return [a["title"] for a in (await call(client, "memory_action_list", **extra))["actions"]]


# -- create --------------------------------------------------------------------------------------


async def test_a_created_action_reads_back(client: Client) -> None:
    dep = await create(client, "Write the schema")
    parent = await create(client, "Ship the export feature")

    action = await create(
        client,
        "Write the exporter",
        description="JSON with sorted keys.",
        priority=5,
        parent_id=parent["id"],
        depends_on=[dep["id"], dep["id"]],
        tags=["export", " backend ", "export"],
        due="2026-02-01",
    )

    assert action["id"].startswith("act_")
    assert action == {
        "id": action["id"],
        "title": "Write the exporter",
        "description": "JSON with sorted keys.",
        "status": "pending",
        "priority": 5,
        "parent_id": parent["id"],
        "depends_on": [dep["id"]],
        "blocked_by": [dep["id"]],
        "children": 0,
        "children_done": 0,
        "tags": ["backend", "export"],
        "due": "2026-02-01T00:00:00.000000Z",
        "completed_at": None,
        "created_at": "2026-01-05T09:00:00.000000Z",
        "updated_at": "2026-01-05T09:00:00.000000Z",
    }
    (listed_parent,) = [a for a in (await call(client, "memory_action_list"))["actions"] if a["id"] == parent["id"]]
    assert (listed_parent["children"], listed_parent["children_done"]) == (1, 0)


async def test_a_dependency_must_exist(client: Client) -> None:
    real = await create(client, "Real")
    message = await call_error(
        client, "memory_action_create", title="Needs a ghost", depends_on=[real["id"], "act_ghost"]
    )
    assert "act_ghost" in message
    assert "depends_on" in message
    assert "memory_action_list" in message
    assert await titles(client) == ["Real"]

    message = await call_error(client, "memory_action_update", id=real["id"], add_depends_on=["act_ghost"])
    assert "act_ghost" in message
    assert "add_depends_on" in message


async def test_a_parent_must_exist_and_unknown_ids_are_not_found(client: Client) -> None:
    message = await call_error(client, "memory_action_create", title="Orphan", parent_id="act_nobody")
    assert "act_nobody" in message
    assert "parent_id" in message
    assert "act_missing" in await call_error(client, "memory_action_update", id="act_missing", status="done")
    other = await create(client, "Elsewhere", project="other")
    assert other["id"] in await call_error(client, "memory_action_update", id=other["id"], status="done")
    memory = await call(client, "memory_save", content="Deploys run on Fridays")
    # an id of another kind says so (its prefix tells; nothing about whether it exists)
    assert f"id: No action {memory['id']!r} in this project (that is a memory id, not an action's)" in (
        await call_error(client, "memory_action_update", id=memory["id"], status="done")
    )


async def test_a_new_action_cannot_start_done_or_active_before_its_dependencies(client: Client) -> None:
    dep = await create(client, "First")
    assert "status" in await call_error(client, "memory_action_create", title="Done already", status="done")
    message = await call_error(client, "memory_action_create", title="Eager", status="active", depends_on=[dep["id"]])
    assert f"blocked by unfinished dependencies: {dep['id']}" in message
    assert await titles(client) == ["First"]


# -- dependency cycles ---------------------------------------------------------------------------


async def test_a_two_action_cycle_is_refused_naming_the_cycle(client: Client) -> None:
    a = await create(client, "A")
    b = await create(client, "B", depends_on=[a["id"]])  # B -> A

    message = await call_error(client, "memory_action_update", id=a["id"], add_depends_on=[b["id"]])

    assert f"{b['id']} would make a dependency cycle: {a['id']} -> {b['id']} -> {a['id']}" in message
    assert "add_depends_on" in message
    listed = {x["id"]: x for x in (await call(client, "memory_action_list"))["actions"]}
    assert listed[a["id"]]["depends_on"] == []
    assert listed[b["id"]]["depends_on"] == [a["id"]]


async def test_a_three_action_cycle_is_refused_naming_the_whole_path(client: Client) -> None:
    a = await create(client, "A")
    b = await create(client, "B")
    c = await create(client, "C")
    await update(client, a["id"], add_depends_on=[b["id"]])  # A -> B
    await update(client, b["id"], add_depends_on=[c["id"]])  # B -> C

    message = await call_error(client, "memory_action_update", id=c["id"], add_depends_on=[a["id"]], title="C2")

    assert f"dependency cycle: {c['id']} -> {a['id']} -> {b['id']} -> {c['id']}" in message
    listed = {x["id"]: x for x in (await call(client, "memory_action_list"))["actions"]}
    assert listed[c["id"]]["depends_on"] == []
    assert listed[c["id"]]["title"] == "C"  # nothing of the refused update was written


async def test_an_action_cannot_depend_on_itself(client: Client) -> None:
    a = await create(client, "A")
    message = await call_error(client, "memory_action_update", id=a["id"], add_depends_on=[a["id"]])
    assert f"dependency cycle: {a['id']} -> {a['id']}" in message


async def test_a_diamond_is_not_a_cycle_and_removing_a_dependency_unblocks(client: Client) -> None:
    base = await create(client, "Base")
    left = await create(client, "Left", depends_on=[base["id"]])
    right = await create(client, "Right", depends_on=[base["id"]])
    top = await create(client, "Top", depends_on=[left["id"], right["id"]])
    assert sorted(top["depends_on"]) == sorted([left["id"], right["id"]])

    updated = (await update(client, top["id"], remove_depends_on=[left["id"], right["id"]]))["action"]
    assert updated["depends_on"] == []
    assert "Top" in await frontier(client)


async def test_a_parent_cannot_become_its_own_descendant(client: Client) -> None:
    root = await create(client, "Root")
    child = await create(client, "Child", parent_id=root["id"])
    grandchild = await create(client, "Grandchild", parent_id=child["id"])
    message = await call_error(client, "memory_action_update", id=root["id"], parent_id=grandchild["id"])
    assert "parent_id" in message
    assert "descendants" in message
    assert "parent_id" in await call_error(client, "memory_action_update", id=root["id"], parent_id=root["id"])


# -- status transitions --------------------------------------------------------------------------


async def test_status_transitions_are_validated(client: Client, clock: FakeClock) -> None:
    a = await create(client, "A")
    active = (await update(client, a["id"], status="active"))["action"]
    assert active["status"] == "active"
    clock.advance(hours=1)
    done = (await update(client, a["id"], status="done"))["action"]
    assert done["status"] == "done"
    assert done["completed_at"] == "2026-01-05T10:00:00.000000Z"

    message = await call_error(client, "memory_action_update", id=a["id"], status="cancelled")
    assert "cannot go from done to cancelled" in message
    assert "from done an action can become active, pending" in message
    assert "cannot go from done to blocked" in await call_error(
        client, "memory_action_update", id=a["id"], status="blocked"
    )

    reopened = (await update(client, a["id"], status="pending"))["action"]
    assert (reopened["status"], reopened["completed_at"]) == ("pending", None)
    cancelled = (await update(client, a["id"], status="cancelled"))["action"]
    assert cancelled["status"] == "cancelled"
    message = await call_error(client, "memory_action_update", id=a["id"], status="done")
    assert "cannot go from cancelled to done; from cancelled an action can become pending" in message
    assert "cannot go from cancelled to active" in await call_error(
        client, "memory_action_update", id=a["id"], status="active"
    )
    assert await status_of(client, a["id"]) == "cancelled"
    assert (await update(client, a["id"], status="pending"))["action"]["status"] == "pending"


async def test_an_unknown_status_is_refused(client: Client) -> None:
    a = await create(client, "A")
    assert "status" in await call_error(client, "memory_action_update", id=a["id"], status="finished")
    assert "status" in await call_error(client, "memory_action_list", status=["finished"])


async def test_done_or_active_is_refused_while_a_dependency_is_not_done(client: Client) -> None:
    dep = await create(client, "Dependency")
    other = await create(client, "Other dependency")
    action = await create(client, "Action", depends_on=[dep["id"], other["id"]])

    message = await call_error(client, "memory_action_update", id=action["id"], status="done")
    assert f"{action['id']} is blocked by unfinished dependencies: " in message
    assert dep["id"] in message
    assert other["id"] in message
    assert "blocked by unfinished" in await call_error(client, "memory_action_update", id=action["id"], status="active")

    await update(client, dep["id"], status="done")
    await update(client, other["id"], status="cancelled")
    message = await call_error(client, "memory_action_update", id=action["id"], status="done")
    assert f"unfinished dependencies: {other['id']}" in message  # cancelled is not done

    await update(client, action["id"], remove_depends_on=[other["id"]])
    assert (await update(client, action["id"], status="done"))["action"]["status"] == "done"
    # A done action cannot take on an unfinished dependency.
    fresh = await create(client, "Fresh")
    assert "blocked by unfinished" in await call_error(
        client, "memory_action_update", id=action["id"], add_depends_on=[fresh["id"]]
    )


async def test_a_blocked_status_can_be_set_and_left(client: Client) -> None:
    a = await create(client, "Waiting on review", status="blocked")
    assert a["status"] == "blocked"
    assert (await update(client, a["id"], status="active"))["action"]["status"] == "active"


# -- parents and children ------------------------------------------------------------------------


async def test_a_parent_is_done_only_when_its_children_are(client: Client) -> None:
    parent = await create(client, "Release 1.0")
    first = await create(client, "Changelog", parent_id=parent["id"])
    second = await create(client, "Tag", parent_id=parent["id"])
    third = await create(client, "Announce", parent_id=parent["id"])

    message = await call_error(client, "memory_action_update", id=parent["id"], status="done")
    assert f"{parent['id']} still has open children: " in message
    for child in (first, second, third):
        assert child["id"] in message

    await update(client, first["id"], status="done")
    await update(client, second["id"], status="done")
    message = await call_error(client, "memory_action_update", id=parent["id"], status="done")
    assert f"still has open children: {third['id']}" in message

    await update(client, third["id"], status="cancelled")  # a cancelled child no longer holds it open
    done = (await update(client, parent["id"], status="done"))["action"]
    assert done["status"] == "done"
    assert (done["children"], done["children_done"]) == (3, 3)


async def test_reopening_a_child_reopens_its_done_ancestors(client: Client) -> None:
    root = await create(client, "Epic")
    parent = await create(client, "Story", parent_id=root["id"])
    child = await create(client, "Task", parent_id=parent["id"])
    for action in (child, parent, root):
        await update(client, action["id"], status="done")

    reopened = await update(client, child["id"], status="pending")

    assert reopened["action"]["status"] == "pending"
    assert reopened["also_changed"] == [parent["id"], root["id"]]
    # Nobody is working under them: they wait again, as pending.
    assert await status_of(client, parent["id"]) == "pending"
    assert await status_of(client, root["id"]) == "pending"
    listed = {a["id"]: a for a in (await call(client, "memory_action_list"))["actions"]}
    assert listed[root["id"]]["completed_at"] is None


async def test_reopening_stops_at_the_first_ancestor_that_is_not_done(client: Client) -> None:
    root = await create(client, "Epic")
    parent = await create(client, "Story", parent_id=root["id"])
    child = await create(client, "Task", parent_id=parent["id"])
    sibling = await create(client, "Other story", parent_id=root["id"])
    await update(client, child["id"], status="done")
    await update(client, parent["id"], status="done")

    reopened = await update(client, child["id"], status="active")

    assert reopened["also_changed"] == [parent["id"]]
    assert await status_of(client, parent["id"]) == "active"  # its child is being worked on
    assert await status_of(client, root["id"]) == "pending"
    assert await status_of(client, sibling["id"]) == "pending"


async def test_a_reopened_parent_waiting_for_a_dependency_is_pending_not_active(client: Client) -> None:
    dep = await create(client, "Design review")
    parent = await create(client, "Ship feature", depends_on=[dep["id"]])
    child = await create(client, "Write code", parent_id=parent["id"])
    for action in (dep, child, parent):
        await update(client, action["id"], status="done")
    await update(client, dep["id"], status="pending")

    reopened = await update(client, child["id"], status="active")

    assert reopened["also_changed"] == [parent["id"]]
    assert await status_of(client, parent["id"]) == "pending"
    # Saying "active" again is checked like any change to active.
    refused = await client.call_tool("memory_action_update", {"id": parent["id"], "status": "active"})
    assert refused.is_error
    assert "blocked by unfinished dependencies: " + dep["id"] in refused.content[0].text


async def test_restating_active_for_a_blocked_action_is_refused(client: Client) -> None:
    dep = await create(client, "Get access")
    task = await create(client, "Deploy", depends_on=[dep["id"]])
    await update(client, dep["id"], status="done")
    await update(client, task["id"], status="active")
    await update(client, dep["id"], status="pending")  # reopened: the active task now waits for it

    refused = await client.call_tool("memory_action_update", {"id": task["id"], "status": "active"})

    assert refused.is_error
    assert dep["id"] in refused.content[0].text
    assert await status_of(client, task["id"]) == "active"


async def test_adding_a_child_to_a_done_parent_reopens_it(client: Client) -> None:
    parent = await create(client, "Docs")
    await update(client, parent["id"], status="done")

    created = await call(client, "memory_action_create", title="One more page", parent_id=parent["id"])

    assert created["also_changed"] == [parent["id"]]
    assert await status_of(client, parent["id"]) == "pending"  # nobody has started the new page


async def test_moving_and_detaching_children(client: Client) -> None:
    a = await create(client, "A")
    b = await create(client, "B")
    child = await create(client, "Child", parent_id=a["id"])
    moved = (await update(client, child["id"], parent_id=b["id"]))["action"]
    assert moved["parent_id"] == b["id"]
    assert await titles(client, parent_id=a["id"]) == []
    assert await titles(client, parent_id=b["id"]) == ["Child"]
    detached = (await update(client, child["id"], clear_parent=True))["action"]
    assert detached["parent_id"] is None


# -- frontier ------------------------------------------------------------------------------------


async def test_the_frontier_is_open_unblocked_leaf_work_by_priority_then_age(client: Client, clock: FakeClock) -> None:
    old_low = await create(client, "old low", clock, priority=1)
    await create(client, "old high", clock, priority=5)
    await create(client, "young high", clock, priority=5)
    await create(client, "default priority", clock)
    await create(client, "negative priority", clock, priority=-3)
    await create(client, "active one", clock, priority=2, status="active")
    await create(client, "blocked status", clock, priority=9, status="blocked")
    waiting = await create(client, "waits for old low", clock, priority=10, depends_on=[old_low["id"]])
    parent = await create(client, "parent", clock, priority=8)
    await create(client, "child", clock, priority=0, parent_id=parent["id"])
    finished = await create(client, "finished", clock, priority=7)
    await update(client, finished["id"], status="done")
    dropped = await create(client, "dropped", clock, priority=7)
    await update(client, dropped["id"], status="cancelled")
    await create(client, "another project", clock, priority=50, project="other")

    assert await frontier(client) == [
        "old high",
        "young high",
        "active one",
        "old low",
        "default priority",
        "child",
        "negative priority",
    ]
    assert await frontier(client, limit=2) == ["old high", "young high"]

    await update(client, old_low["id"], status="done")
    assert (await frontier(client))[0] == "waits for old low"
    assert waiting["blocked_by"] == [old_low["id"]]


async def test_a_parent_enters_the_frontier_when_its_children_are_closed(client: Client, clock: FakeClock) -> None:
    parent = await create(client, "parent", clock)
    child = await create(client, "child", clock, parent_id=parent["id"])
    assert await frontier(client) == ["child"]
    await update(client, child["id"], status="done")
    assert await frontier(client) == ["parent"]


async def test_the_frontier_filters_by_tag(client: Client, clock: FakeClock) -> None:
    await create(client, "backend work", clock, tags=["backend"])
    await create(client, "frontend work", clock, tags=["frontend"], priority=3)
    await create(client, "both", clock, tags=["backend", "frontend"])
    assert await frontier(client, tag="backend") == ["backend work", "both"]
    assert await frontier(client, tag="nothing") == []


async def test_a_tag_filter_ignores_case_beyond_ascii(client: Client, clock: FakeClock) -> None:
    summer = await create(client, "summer release", clock, tags=["Été", "Straße"])
    await create(client, "other work", clock, tags=["ete", "hiver"])

    for tag in ("été", "ÉTÉ", " Été ", "STRASSE"):
        assert await titles(client, tag=tag) == ["summer release"], tag
        assert await frontier(client, tag=tag) == ["summer release"], tag
    assert await titles(client, tag="HIVER") == ["other work"]
    assert await titles(client, tag="automne") == await frontier(client, tag="automne") == []
    assert summer["tags"] == ["Straße", "Été"]  # stored as first given; only the comparison folds


async def test_a_blank_tag_is_refused_and_the_stored_tags_are_kept(client: Client, clock: FakeClock) -> None:
    action = await create(client, "Ship the exporter", clock, tags=["backend", "urgent"])

    errors = [
        await call_error(client, "memory_action_update", id=action["id"], tags=["ops", " "]),
        await call_error(client, "memory_action_create", title="Another", tags=[""]),
        await call_error(client, "memory_action_list", tag=""),
        await call_error(client, "memory_frontier", tag="  "),
    ]
    listed = await call(client, "memory_action_list", tag=" urgent ")

    assert "tags.1: must contain text" in errors[0]
    assert "tags.0: must contain text" in errors[1]
    assert all("tag: must contain text" in e for e in errors[2:])
    assert [(a["title"], a["tags"]) for a in listed["actions"]] == [("Ship the exporter", ["backend", "urgent"])]


# -- list ----------------------------------------------------------------------------------------


async def test_list_filters_by_status_tag_and_parent_and_pages(client: Client, clock: FakeClock) -> None:
    parent = await create(client, "parent", clock, priority=1)
    kids = [await create(client, f"kid {i}", clock, parent_id=parent["id"], tags=["kid"]) for i in range(3)]
    done = await create(client, "done one", clock, tags=["kid"])
    await update(client, done["id"], status="done")
    gone = await create(client, "cancelled one", clock)
    await update(client, gone["id"], status="cancelled")
    await create(client, "blocked one", clock, status="blocked", priority=-1)

    # Open ones by default, highest priority then oldest first.
    assert await titles(client) == ["parent", "kid 0", "kid 1", "kid 2", "blocked one"]
    assert await titles(client, status=["done"]) == ["done one"]
    assert await titles(client, status=["done", "cancelled"]) == ["done one", "cancelled one"]
    assert await titles(client, tag="kid") == ["kid 0", "kid 1", "kid 2"]
    assert await titles(client, tag="kid", status=["done"]) == ["done one"]
    assert await titles(client, parent_id=parent["id"]) == [k["title"] for k in kids]

    first = await call(client, "memory_action_list", limit=2)
    second = await call(client, "memory_action_list", limit=2, offset=2)
    last = await call(client, "memory_action_list", limit=2, offset=4)
    assert (first["total"], first["next_offset"]) == (5, 2)
    assert [a["title"] for a in second["actions"]] == ["kid 1", "kid 2"]
    assert second["next_offset"] == 4
    assert ([a["title"] for a in last["actions"]], last["next_offset"]) == (["blocked one"], None)


async def test_an_update_changes_fields_and_keeps_the_rest(client: Client, clock: FakeClock) -> None:
    action = await create(client, "Draft", description="v1", tags=["a"], priority=1)
    clock.advance(minutes=30)
    updated = (await update(client, action["id"], title="Final", priority=4, tags=["b"], due="2026-03-01T12:00:00Z"))[
        "action"
    ]
    assert (updated["title"], updated["description"], updated["priority"], updated["tags"]) == ("Final", "v1", 4, ["b"])
    assert updated["due"] == "2026-03-01T12:00:00.000000Z"
    assert updated["updated_at"] == "2026-01-05T09:30:00.000000Z"
    assert updated["created_at"] == "2026-01-05T09:00:00.000000Z"


async def test_secrets_in_actions_are_redacted(client: Client) -> None:
    created = await call(
        client,
        "memory_action_create",
        title="Rotate the key",
        description="old key ghp_abcdefghijklmnopqrstuvwxyz0123456789 leaked",
    )
    assert sum(created["redacted"].values()) == 1
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in created["action"]["description"]


# -- restart -------------------------------------------------------------------------------------


async def test_actions_with_dependencies_and_children_survive_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        a = await create(first, "A", clock, priority=2)
        b = await create(first, "B", clock, depends_on=[a["id"]])
        parent = await create(first, "Parent", clock)
        await create(first, "Child", clock, parent_id=parent["id"], tags=["x"])
        before = await call(first, "memory_action_list", status=["pending", "active", "blocked", "done", "cancelled"])

    async with Client(build_server(settings, clock)) as second:
        after = await call(second, "memory_action_list", status=["pending", "active", "blocked", "done", "cancelled"])
        assert await frontier(second) == ["A", "Child"]
        message = await call_error(second, "memory_action_update", id=a["id"], add_depends_on=[b["id"]])
        assert f"{a['id']} -> {b['id']} -> {a['id']}" in message
        await update(second, a["id"], status="done")
        assert await frontier(second) == ["B", "Child"]

    assert after == before
