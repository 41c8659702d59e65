"""Actions and slots: cycle checks that scale, cycles through the parent tree, editing done work,
frontier paging, clearing fields, and slot errors and annotations that say what happens."""

from __future__ import annotations

from typing import Any

from mcp import Client

from tests.conftest import call, call_error


async def create(client: Client, title: str, **extra: Any) -> str:
    return str((await call(client, "memory_action_create", title=title, **extra))["action"]["id"])


async def update(client: Client, action_id: str, **extra: Any) -> dict[str, Any]:
    return (await call(client, "memory_action_update", id=action_id, **extra))["action"]


async def listed(client: Client) -> dict[str, dict[str, Any]]:
    every = ["pending", "active", "blocked", "done", "cancelled"]
    return {a["id"]: a for a in (await call(client, "memory_action_list", status=every, limit=100))["actions"]}


# -- dependency cycles ---------------------------------------------------------------------------


async def test_a_deep_diamond_lattice_is_checked_once_per_action(client: Client) -> None:
    # 24 layers of two actions, each depending on both of the layer below: 2^23 paths from top to
    # bottom. The old check enumerated every path (36 s at 21 layers); each action is visited once now.
    layers: list[list[str]] = []
    below: list[str] = []
    for layer in range(24):
        below = [await create(client, f"L{layer}-{k}", depends_on=below) for k in range(2)]
        layers.append(below)
    top, bottom = layers[-1][0], layers[0][0]

    lone = await create(client, "lone")
    assert (await update(client, lone, add_depends_on=[top]))["depends_on"] == [top]

    message = await call_error(client, "memory_action_update", id=bottom, add_depends_on=[top])
    cycle = message.split("would make a dependency cycle: ")[1].split(" -> ")
    assert (cycle[0], cycle[1], cycle[-1]) == (bottom, top, bottom)
    assert len(cycle) == 25  # bottom, one action of each layer from 23 down to 1, bottom again
    assert all(step in layers[23 - i] for i, step in enumerate(cycle[1:-1]))
    assert (await listed(client))[bottom]["depends_on"] == []


async def test_a_child_cannot_depend_on_its_parent_or_any_ancestor(client: Client) -> None:
    epic = await create(client, "Epic")
    story = await create(client, "Story", parent_id=epic)

    message = await call_error(client, "memory_action_create", title="Task", parent_id=story, depends_on=[story])
    # the refused action never gets an id: the cycle calls it by what it is
    assert (
        f"depends_on: {story} would make a dependency cycle: the new action -> {story} -> child the new action"
        in message
    )
    assert "act_" not in message.replace(story, "")
    assert "a parent cannot be done before its children" in message

    message = await call_error(client, "memory_action_create", title="Task", parent_id=story, depends_on=[epic])
    assert f"the new action -> {epic} -> child {story} -> child the new action" in message
    assert "Task" not in {a["title"] for a in (await listed(client)).values()}

    task = await create(client, "Task", parent_id=story)
    message = await call_error(client, "memory_action_update", id=task, add_depends_on=[epic])
    assert (
        f"add_depends_on: {epic} would make a dependency cycle: {task} -> {epic} -> child {story} -> child {task}"
        in message
    )
    assert (await listed(client))[task]["depends_on"] == []


async def test_a_new_parent_that_the_action_waits_for_is_a_cycle(client: Client) -> None:
    spec = await create(client, "Spec")
    build = await create(client, "Build", depends_on=[spec])

    message = await call_error(client, "memory_action_update", id=build, parent_id=spec)
    assert f"parent_id: {spec} would make a dependency cycle: {spec} -> child {build} -> {spec}" in message

    # A new parent and a new dependency in one call are checked together; nothing is written.
    other = await create(client, "Other")
    message = await call_error(client, "memory_action_update", id=other, parent_id=spec, add_depends_on=[spec])
    assert f"{other} -> {spec} -> child {other}" in message
    state = (await listed(client))[other]
    assert (state["parent_id"], state["depends_on"]) == (None, [])


async def test_a_cycle_through_dependencies_and_children_is_refused(client: Client) -> None:
    release = await create(client, "Release")
    notes = await create(client, "Release notes", parent_id=release)
    deploy = await create(client, "Deploy", depends_on=[release])  # Deploy -> Release -> child Notes

    message = await call_error(client, "memory_action_update", id=notes, add_depends_on=[deploy])
    assert f"{notes} -> {deploy} -> {release} -> child {notes}" in message


async def test_a_parent_may_depend_on_its_own_child(client: Client) -> None:
    # Redundant (a parent waits for its children anyway) but no deadlock: both can still be done.
    parent = await create(client, "Parent")
    child = await create(client, "Child", parent_id=parent)
    assert (await update(client, parent, add_depends_on=[child]))["depends_on"] == [child]
    await update(client, child, status="done")
    assert (await update(client, parent, status="done"))["status"] == "done"


# -- editing done actions ------------------------------------------------------------------------


async def test_a_done_action_stays_editable_after_a_dependency_is_reopened(client: Client) -> None:
    spec = await create(client, "Write spec")
    build = await create(client, "Implement", depends_on=[spec])
    await update(client, spec, status="done")
    await update(client, build, status="done")
    await update(client, spec, status="pending")

    edited = await update(client, build, title="Implement v1", tags=["release"], add_depends_on=[spec])

    assert (edited["title"], edited["status"], edited["blocked_by"]) == ("Implement v1", "done", [spec])
    # Taking on a new unfinished dependency while done is still refused, naming the argument.
    fresh = await create(client, "Fresh")
    message = await call_error(client, "memory_action_update", id=build, add_depends_on=[fresh])
    assert f"add_depends_on: {build} is done and would be blocked by unfinished dependencies: {fresh}" in message
    # Setting it done again (reopen, then done) checks every dependency.
    await update(client, spec, status="done")
    await update(client, build, status="active")
    await update(client, spec, status="pending")
    message = await call_error(client, "memory_action_update", id=build, status="done")
    assert f"status: {build} is blocked by unfinished dependencies: {spec}" in message


# -- frontier, due and parent arguments ----------------------------------------------------------


async def test_the_frontier_pages_like_the_action_list(client: Client) -> None:
    for i in range(5):
        await create(client, f"task {i}", priority=10 - i)
    await create(client, "waiting", priority=50, depends_on=[await create(client, "not yet", status="blocked")])

    first = await call(client, "memory_frontier", limit=2)
    assert ([a["title"] for a in first["actions"]], first["total"], first["next_offset"]) == (
        ["task 0", "task 1"],
        5,
        2,
    )
    last = await call(client, "memory_frontier", limit=2, offset=4)
    assert ([a["title"] for a in last["actions"]], last["total"], last["next_offset"]) == (["task 4"], 5, None)
    tagged = await call(client, "memory_frontier", tag="none")
    assert (tagged["total"], tagged["next_offset"]) == (0, None)


async def test_a_due_date_can_be_cleared(client: Client) -> None:
    action = await create(client, "Ship", due="2026-02-01")
    assert (await update(client, action, clear_due=True))["due"] is None
    assert (await update(client, action, due="2026-03-01"))["due"] == "2026-03-01T00:00:00.000000Z"


async def test_contradictory_clear_arguments_are_refused_naming_both(client: Client) -> None:
    parent = await create(client, "Parent")
    action = await create(client, "Child", parent_id=parent, due="2026-02-01")
    other = await create(client, "Other")

    message = await call_error(client, "memory_action_update", id=action, clear_parent=True, parent_id=other)
    assert "clear_parent: cannot be combined with parent_id" in message
    message = await call_error(client, "memory_action_update", id=action, clear_due=True, due="2026-03-01")
    assert "clear_due: cannot be combined with due" in message
    message = await call_error(
        client, "memory_action_update", id=action, add_depends_on=[other], remove_depends_on=[other]
    )
    assert f"remove_depends_on: {other} is also in add_depends_on" in message
    state = (await listed(client))[action]
    assert (state["parent_id"], state["due"], state["depends_on"]) == (parent, "2026-02-01T00:00:00.000000Z", [])


# -- slots ---------------------------------------------------------------------------------------


async def test_slot_limit_errors_name_the_argument_to_change(client: Client) -> None:
    message = await call_error(client, "memory_slot_create", name="notes", content="x" * 10, size_limit=5)
    assert "content: slot 'notes' would hold 10 characters, over its limit of 5; nothing was created" in message
    assert "memory_slot_replace" not in message  # it does not exist: replacing it would fail
    assert "size_limit" in message
    # The advice works: a larger size_limit.
    assert (await call(client, "memory_slot_create", name="notes", content="x" * 10, size_limit=10))["created"]

    message = await call_error(client, "memory_slot_append", name="notes", text="y")
    assert "text: slot 'notes' would hold 12 characters, over its limit of 10; nothing was changed" in message
    message = await call_error(client, "memory_slot_replace", name="notes", content="z" * 11)
    assert "content: slot 'notes' would hold 11 characters" in message
    message = await call_error(client, "memory_slot_replace", name="notes", size_limit=4)
    assert "size_limit: slot 'notes' would hold 10 characters, over its limit of 4" in message
    message = await call_error(client, "memory_slot_replace", name="notes", content="abcdef", size_limit=4)
    assert "size_limit: slot 'notes' would hold 6 characters, over its limit of 4" in message
    assert (await call(client, "memory_slot_get", name="notes"))["content"] == "x" * 10


async def test_a_missing_slot_error_names_the_argument(client: Client) -> None:
    message = await call_error(client, "memory_slot_get", name="ghost")
    assert "name: No slot 'ghost' in this project" in message
    assert "name: No slot 'ghost'" in await call_error(client, "memory_slot_delete", name="ghost")
    assert "first append or replace" in await call_error(client, "memory_slot_get", name="persona")


async def test_slot_annotations_match_what_the_tools_do(client: Client) -> None:
    tools = {t.name: t.annotations for t in (await client.list_tools()).tools if t.name.startswith("memory_slot_")}
    hints = {name: (a.destructive_hint, a.idempotent_hint) for name, a in tools.items() if a is not None}
    assert hints == {
        "memory_slot_list": (None, None),
        "memory_slot_get": (None, None),
        "memory_slot_create": (False, True),
        "memory_slot_append": (False, False),
        "memory_slot_replace": (True, False),
        "memory_slot_delete": (True, True),
    }

    # replace is not idempotent: the same passage replacement grows the slot each time.
    await call(client, "memory_slot_create", name="echo", content="a")
    grown = [(await call(client, "memory_slot_replace", name="echo", old="a", content="ab"))["slot"]["content"]]
    grown.append((await call(client, "memory_slot_replace", name="echo", old="a", content="ab"))["slot"]["content"])
    assert grown == ["ab", "abb"]
    # create and delete are: a repeat changes nothing more.
    assert "already exists" in await call_error(client, "memory_slot_create", name="echo", content="a")
    assert (await call(client, "memory_slot_get", name="echo"))["content"] == "abb"
    await call(client, "memory_slot_delete", name="echo")
    assert "No slot 'echo'" in await call_error(client, "memory_slot_delete", name="echo")


# -- tags ------------------------------------------------------------------------------------------


async def test_tags_are_one_per_spelling_and_match_ignoring_case(client: Client) -> None:
    tagged = await create(client, "Tune the pool", tags=["Backend", "backend ", "perf"])
    renamed = await update(client, tagged, tags=["PERF", "Perf", "Backend"])
    other = await create(client, "Write the docs", tags=["docs"])

    by_tag = await call(client, "memory_action_list", tag="perf")
    frontier = await call(client, "memory_frontier", tag="BACKEND")

    assert renamed["tags"] == ["Backend", "PERF"]
    assert [a["id"] for a in by_tag["actions"]] == [tagged]
    assert [a["id"] for a in frontier["actions"]] == [tagged]
    assert other not in {a["id"] for a in by_tag["actions"]}


# -- unknown ids ------------------------------------------------------------------------------------


async def test_unknown_ids_in_removals_and_parent_filters_are_named(client: Client) -> None:
    build = await create(client, "Build")
    test = await create(client, "Test", depends_on=[build])

    removal = await call_error(client, "memory_action_update", id=test, remove_depends_on=["act_0000typo"])
    listing = await call_error(client, "memory_action_list", parent_id="act_0000typo")

    assert "remove_depends_on: No action 'act_0000typo'" in removal
    assert "parent_id: No action 'act_0000typo'" in listing
    assert (await listed(client))[test]["depends_on"] == [build]
    # an action that exists but is not a dependency: refused too, a wrong id is a mistake either way
    stray = await call_error(client, "memory_action_update", id=test, remove_depends_on=[test])
    assert f"remove_depends_on: {test} is not a dependency of {test}" in stray
    nothing = await call_error(client, "memory_action_update", id=test)
    assert "id: nothing to change" in nothing
    assert (await listed(client))[test]["depends_on"] == [build]
