"""The resources and the compiled context: project names the SDK's path checks refused, resource events
after each committed write, a session-start prompt that carries memory at small budgets, a left-out line
that counts everything left out, and recent sessions in the order they happened — through the real server."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp_types import INVALID_PARAMS

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from mcp_memory.tools.prompts import SESSION_START
from tests.conftest import FakeClock, call, call_error
from tests.test_context_fixes import hinted_calls, prompt_text, resource_text

LONG_WORDS = "- when a task ends, record how it went with memory_outcome_record."
SHORT_WORDS = "While you work: record with memory_observe, save facts with memory_save, look up with memory_recall."


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


async def refusal(client: Client, uri: str) -> MCPError:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)
    return refused.value


# -- 1. project names with a colon or dots, and slot names that break the rule -------------------------


@pytest.mark.parametrize("project", ["x:web", "C:", "..", "a:..c"])
async def test_the_resources_read_projects_whose_names_look_like_paths(client: Client, project: str) -> None:
    await call(
        client, "memory_slot_create", name="persona", content=f"Persona of {project}.", pinned=True, project=project
    )
    named = quote(project, safe="")

    slot = await resource_text(client, f"memory://slots/persona?project={named}")
    compiled = await resource_text(client, f"memory://context?project={named}")

    assert slot == f"Persona of {project}."
    assert compiled == (await call(client, "memory_context", project=project))["text"]
    assert compiled.startswith(f"# Memory for project {project}\n\n## Pinned\n### persona\nPersona of {project}.")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("memory://slots/persona?project=a%2Fb", "project: must be 1-128 characters"),
        ("memory://slots/persona?project=%00x", "project: must be 1-128 characters"),
        ("memory://context?project=%2Fetc", "project: must be 1-128 characters"),
        ("memory://context?project=" + "p" * 129, "project: String should have at most 128 characters"),
        ("memory://slots/Persona", "name: must be lower_snake_case"),
        ("memory://slots/", "name: must be lower_snake_case"),
        ("memory://slots/..", "name: must be lower_snake_case"),
        ("memory://slots/a%2Fb?project=x", "name: must be lower_snake_case"),
        ("memory://slots/persona%0A", "name: must be lower_snake_case"),
    ],
)
async def test_a_resource_names_the_rule_a_project_or_slot_name_breaks(client: Client, uri: str, expected: str) -> None:
    await call(client, "memory_slot_create", name="persona", content="Terse.")

    refused = await refusal(client, uri)

    assert refused.code == INVALID_PARAMS
    assert expected in refused.message
    assert "Unknown resource" not in refused.message


# -- 2. resource events follow committed writes ----------------------------------------------------------


async def events_until(subscription: Any, wanted: set[ServerEvent]) -> list[ServerEvent]:
    """The events the stream delivers, in order, until every one of `wanted` has come (fails after 5 s)."""
    seen: list[ServerEvent] = []
    with anyio.fail_after(5):
        async for event in subscription:
            seen.append(event)
            if wanted <= set(seen):
                break
    return seen


async def test_slot_writes_publish_resource_events_after_they_commit(client: Client) -> None:
    await call(client, "memory_slot_create", name="persona", content="v1", pinned=True)
    watched = ["memory://slots/persona", "memory://slots/notes", "memory://context"]

    async with client.listen(resources_list_changed=True, resource_subscriptions=watched) as subscription:
        await call(client, "memory_slot_replace", name="persona", content="v2")
        changed = await events_until(
            subscription, {ResourceUpdated("memory://slots/persona"), ResourceUpdated("memory://context")}
        )
        everything = {
            ResourcesListChanged(),
            ResourceUpdated("memory://slots/notes"),
            ResourceUpdated("memory://context"),
        }
        await call(client, "memory_slot_create", name="notes", content="n")
        created = await events_until(subscription, everything)
        await call(client, "memory_slot_delete", name="notes")
        deleted = await events_until(subscription, everything)

    assert ResourcesListChanged() not in changed  # a new content, the same list
    assert set(created) == set(deleted) == everything
    assert await resource_text(client, "memory://slots/persona") == "v2"


async def test_a_refused_write_publishes_nothing(client: Client) -> None:
    await call(client, "memory_slot_create", name="persona", content="v1", size_limit=10)
    await call(client, "memory_slot_create", name="notes", content="n")
    watched = ["memory://slots/persona", "memory://slots/notes"]

    async with client.listen(resources_list_changed=True, resource_subscriptions=watched) as subscription:
        await call_error(client, "memory_slot_replace", name="persona", content="far too long for the limit")
        await call_error(client, "memory_slot_create", name="persona", content="again")
        await call(client, "memory_slot_append", name="notes", text="more")
        seen = await events_until(subscription, {ResourceUpdated("memory://slots/notes")})

    assert seen == [ResourceUpdated("memory://slots/notes")]  # events keep their order: nothing came before


async def test_events_name_a_projects_resources_as_its_template_spells_them(client: Client) -> None:
    project = "x:web"
    named = f"?project={quote(project, safe='')}"
    watched = [f"memory://slots/persona{named}", f"memory://context{named}", "memory://slots/persona"]

    async with client.listen(resources_list_changed=True, resource_subscriptions=watched) as subscription:
        await call(client, "memory_slot_append", name="persona", text="Careful.", project=project)
        seen = await events_until(subscription, {ResourceUpdated(uri) for uri in watched[:2]})
        await call(client, "memory_save", content="The web app deploys on Fridays.", project=project)
        saved = await events_until(subscription, {ResourceUpdated(f"memory://context{named}")})

    # The caller's own project is another: its slot list and its bare persona did not change.
    assert set(seen) == {ResourceUpdated(uri) for uri in watched[:2]}
    assert saved == [ResourceUpdated(f"memory://context{named}")]  # a memory changes the context, no slot
    assert await resource_text(client, watched[0]) == "Careful."


async def test_a_slot_forgotten_by_id_changes_the_resource_list(client: Client) -> None:
    slot = (await call(client, "memory_slot_create", name="notes", content="n"))["slot"]

    async with client.listen(resources_list_changed=True) as subscription:
        await call(client, "memory_forget", ids=[slot["id"]])
        seen = await events_until(subscription, {ResourcesListChanged()})

    assert seen == [ResourcesListChanged()]
    assert "memory://slots/notes" not in {str(r.uri) for r in (await client.list_resources()).resources}


async def test_an_import_names_the_resources_of_the_projects_it_wrote(client: Client, tmp_path: Path) -> None:
    async with Client(build_server(Settings(db=tmp_path / "elsewhere.db", project="x:web"))) as elsewhere:
        await call(elsewhere, "memory_slot_create", name="notes", content="from a copy")
        document = (await call(elsewhere, "memory_export"))["document"]
    named = f"?project={quote('x:web', safe='')}"
    theirs = [f"memory://context{named}", f"memory://slots/notes{named}"]

    async with client.listen(resources_list_changed=True, resource_subscriptions=["memory://context", *theirs]) as sub:
        await call(client, "memory_import", document=document)
        seen = await events_until(sub, {ResourceUpdated(uri) for uri in theirs})
        await call(client, "memory_save", content="A fact of the caller's own project.")
        own = await events_until(sub, {ResourceUpdated("memory://context")})

    # the caller's own context and slot list did not change: only its own save told it so
    assert set(seen) == {ResourceUpdated(uri) for uri in theirs}
    assert own == [ResourceUpdated("memory://context")]


# -- 3. the session-start prompt takes the words that let the most memory in ----------------------------


async def test_a_small_budget_gives_the_prompt_the_words_that_leave_room_for_memory(
    settings: Settings, clock: FakeClock
) -> None:
    small = settings.model_copy(update={"context_budget": 150})
    async with Client(build_server(small, clock)) as client:
        await call(client, "memory_slot_create", name="persona", content="You review code carefully. " * 8, pinned=True)
        prompt = await prompt_text(client, "session_start")
        resource = await resource_text(client, "memory://context")

    # The long words leave the slot no room; the short ones do, and win the tie with no words at all.
    assert len(SESSION_START.format(context="", project_hint="")) + len(resource) > 4 * 150
    assert prompt.startswith(resource)
    assert "### persona\nYou review code carefully." in prompt
    assert SHORT_WORDS in prompt
    assert LONG_WORDS not in prompt
    assert "Left out" not in prompt
    assert tokens(prompt) <= 150


@pytest.mark.parametrize("budget", [100, 150, 200])
async def test_the_prompt_carries_memory_whenever_the_context_does(
    settings: Settings, clock: FakeClock, budget: int
) -> None:
    small = settings.model_copy(update={"context_budget": budget})
    async with Client(build_server(small, clock)) as client:
        await fill(client, clock)
        prompt = await prompt_text(client, "session_start")
        compiled = await call(client, "memory_context")

    assert sum(section["included"] for section in compiled["sections"]) >= 2
    assert headings(prompt)  # before: the words and the left-out line took the whole budget
    assert tokens(prompt) <= budget


async def test_a_large_budget_keeps_the_full_words(client: Client, clock: FakeClock) -> None:
    await fill(client, clock, n=30)

    prompt = await prompt_text(client, "session_start")

    assert prompt.startswith("Here is what you remember about this project.")
    assert LONG_WORDS in prompt
    assert headings(prompt)[:3] == ["## Pinned", "## Project profile", "## Lessons"]
    assert tokens(prompt) <= 2000


# -- 4. the left-out line counts what it does not list ---------------------------------------------------

_MORE = re.compile(r"; and (\d+) more \(memory_smart_search finds them(; pass project=\"[^\"]+\")?\)$")


@pytest.mark.parametrize("project", [None, "billing"])
async def test_the_left_out_line_counts_every_item_it_leaves_unlisted(client: Client, project: str | None) -> None:
    named = {"project": project} if project else {}
    for i in range(30):
        await call(client, "memory_save", content=f"Fact {i}: service s{i} reads queue q{i} and table t{i}.", **named)
    uri = "memory://context?budget=100" + (f"&project={project}" if project else "")

    text = await resource_text(client, uri)

    body, start, hint = text.rpartition("\nLeft out for space (fetch with): ")
    assert start, text
    more = _MORE.search(hint)
    assert more is not None, hint
    calls = hinted_calls(hint)
    assert {arguments.get("project") for _, arguments in calls} == {project}  # the calls name it, not the rest
    assert more[2] is None
    listed = [i for tool, arguments in calls if tool == "memory_smart_search" for i in arguments["ids"]]
    profile_listed = "memory_profile(" in hint
    shown = len(re.findall(r"^- \[fact\] ", body, re.MULTILINE)) + ("## Project profile" in body)
    # 30 memories and the profile: each is shown, listed, or counted among the more.
    assert shown + len(listed) + profile_listed + int(more[1]) == 31
    assert shown >= 1
    assert tokens(text) <= 100


async def test_what_lies_past_a_sections_read_is_left_out_but_not_for_space(client: Client, clock: FakeClock) -> None:
    for i in range(60):
        await call(client, "memory_save", content=f"Fact {i}: zorblax{i} quuxinator{i} frobnicates widget{i}.")
        clock.advance(seconds=1)

    text = await resource_text(client, "memory://context?budget=100000")
    compiled = await call(client, "memory_context", budget=100000)

    [memories] = [s for s in compiled["sections"] if s["name"] == "memories"]
    assert (memories["included"], memories["omitted"]) == (50, 10)
    assert text.endswith("\n\nLeft out: 10 items (memory_smart_search finds them)")
    assert "for space" not in text
    assert text.startswith(compiled["text"])


# -- 5. recent sessions in the order they happened -------------------------------------------------------


async def test_recent_sessions_put_what_happened_last_first(client: Client, clock: FakeClock) -> None:
    await call(client, "memory_observe", content="Today: fixed the parser crash.", session_id="today")
    for year in range(2010, 2021):
        clock.advance(minutes=1)  # recorded after today's session, though it happened years before
        await call(
            client, "memory_observe", content=f"Old chat from {year} about lexers.", session_id=f"old{year}",
            occurred_at=f"{year}-03-01T12:00:00Z",
        )  # fmt: skip
    clock.advance(minutes=1)
    await call(client, "memory_observe", content="Later today: a second look.", session_id="later")

    compiled = await call(client, "memory_context", budget=300)

    recent = compiled["text"].split("## Recent sessions\n")[1].split("\n\n")[0].splitlines()
    days = [line[2:12] for line in recent]
    assert recent[:3] == [
        "- 2026-01-05 Later today: a second look. (1 observation)",
        "- 2026-01-05 Today: fixed the parser crash. (1 observation)",
        "- 2020-03-01 Old chat from 2020 about lexers. (1 observation)",
    ]
    assert days == sorted(days, reverse=True)
    [sessions] = [s for s in compiled["sections"] if s["name"] == "sessions"]
    assert sessions["included"] + sessions["omitted"] == 13


async def test_sessions_that_happened_at_the_same_moment_keep_one_order(tmp_path: Path, clock: FakeClock) -> None:
    settings = Settings(db=tmp_path / "memory.db", project="test", synchronous="normal", timezone="UTC")
    orders: list[Sequence[str]] = []
    async with Client(build_server(settings, clock)) as client:
        for name in ("beta", "alpha", "gamma"):
            clock.advance(minutes=1)
            await call(
                client, "memory_observe", content=f"Imported chat {name}.", session_id=name,
                occurred_at="2024-05-01T10:00:00Z",
            )  # fmt: skip
        for _ in range(2):
            text = (await call(client, "memory_context"))["text"]
            orders.append(re.findall(r"Imported chat (\w+)\.", text))

    assert orders[0] == orders[1]
    assert sorted(orders[0]) == ["alpha", "beta", "gamma"]


async def fill(client: Client, clock: FakeClock, n: int = 8) -> None:
    """Every section of the context, n records each (the repro of the small-budget prompt)."""
    await call(client, "memory_slot_create", name="persona", content="You are a meticulous reviewer. " * 5, pinned=True)
    await call(client, "memory_slot_create", name="house_rules", content="No force pushes. " * 4, pinned=True)
    for i in range(n):
        await call(client, "memory_observe", content=f"Investigated flaky export test {i} in m{i}.", session_id=f"s{i}")
        clock.advance(minutes=5)
        await call(client, "memory_crystallize", session_id=f"s{i}")
        await call(client, "memory_lesson_save", content=f"Lesson {i}: run test {i} thrice near widget{i}.")
        await call(
            client, "memory_outcome_record", task=f"Fix bug {i}", task_type="bugfix", success=False,
            mistake_cards=[{"type": f"slip{i}", "correct_decision": f"reproduce flake {i} first"}],
        )  # fmt: skip
        await call(client, "memory_save", content=f"Fact {i}: component c{i} uses tables t{i} and q{i}.")


async def test_a_global_lesson_saved_from_a_project_announces_that_projects_context_by_name(client: Client) -> None:
    theirs = f"memory://context?project={quote('other', safe='')}"
    watched = [theirs, "memory://context"]

    async with client.listen(resource_subscriptions=watched) as subscription:
        await call(
            client, "memory_lesson_save", content="Always pin dependency versions", scope="global", project="other"
        )
        seen = await events_until(subscription, {ResourceUpdated(theirs), ResourceUpdated("memory://context")})

    assert set(seen) == {ResourceUpdated(theirs), ResourceUpdated("memory://context")}
    assert "Always pin dependency versions" in await resource_text(client, theirs)
