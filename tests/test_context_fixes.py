"""The compiled context's fixes: a scrubbed query, one fetch hint that names the project and only tools
the profile exposes, the resource's left-out line and checked arguments, the session-end prompt's
session and project, the profile of a project with only outcomes, and session lines that say each
fact once — all through the real server."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests._embedding import HashedNgrams
from tests.conftest import FakeClock, call

API_KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"
_CALL = re.compile(r"(memory_\w+)\(([^()]*)\)")


async def prompt_text(client: Client, name: str, arguments: dict[str, str] | None = None) -> str:
    [message] = (await client.get_prompt(name, arguments)).messages
    text = getattr(message.content, "text", None)
    assert isinstance(text, str)
    return text


async def resource_text(client: Client, uri: str) -> str:
    [content] = (await client.read_resource(uri)).contents
    text = getattr(content, "text", None)
    assert isinstance(text, str)
    return text


def hinted_calls(hint: str) -> list[tuple[str, dict[str, Any]]]:
    """The calls a fetch hint names, with their arguments decoded (each `name=<json>`)."""
    calls = []
    for tool, arguments in _CALL.findall(hint):
        as_json = "{" + re.sub(r"(?:^|, )(\w+)=", lambda m: ("" if m.start() == 0 else ", ") + f'"{m[1]}": ', arguments)
        calls.append((tool, json.loads(as_json + "}")))
    return calls


async def fill_billing(client: Client) -> dict[str, str]:
    """A non-default project whose pinned slot leaves the profile, a lesson and a memory out of budget 100."""
    project = {"project": "billing"}
    slot = await call(client, "memory_slot_append", name="persona", text="billing agent " * 24, **project)
    lesson = await call(client, "memory_lesson_save", content="Always verify webhook signatures first.", **project)
    memory = await call(client, "memory_save", content="Billing uses Stripe webhooks.", **project)
    await call(client, "memory_save", content="The default project's own memory.")
    return {"slot": slot["slot"]["id"], "lesson": lesson["lesson"]["id"], "memory": memory["id"]}


# -- 1. the query is scrubbed before it is searched or embedded ------------------------------------------


async def test_the_context_query_reaches_neither_the_embedder_nor_the_index_with_its_secrets(
    settings: Settings, clock: FakeClock
) -> None:
    provider = HashedNgrams()
    async with Client(build_server(settings, clock, provider=provider)) as client:
        zebra = (await call(client, "memory_save", content="Zebra crossings are painted white.", importance=0.1))["id"]
        other = (await call(client, "memory_save", content="Deploy keys rotate monthly.", importance=0.9))["id"]
        provider.calls.clear()

        tool = await call(client, "memory_context", query=f"deploy key {API_KEY}")
        prompt = await prompt_text(
            client, "session_start", {"query": f"rotation <private>flamingo</private> {API_KEY}"}
        )
        resource = await resource_text(client, f"memory://context?query=monthly%20{API_KEY}")
        private_only = await call(client, "memory_context", query="<private>zebra crossings</private>")
        sent = [text for batch in provider.calls for text in batch]
        control = await call(client, "memory_context", query="zebra crossings")

    assert not [text for text in sent if API_KEY in text or "flamingo" in text or text == "zebra crossings"]
    # What is left of each query still focuses the context.
    assert ["deploy key"] in provider.calls
    assert ["rotation"] in provider.calls
    assert ["monthly"] in provider.calls
    assert API_KEY not in tool["text"] + prompt + resource
    # BM25 never saw the private word either: the order stays by importance, unlike an open query.
    assert private_only["text"].index(other) < private_only["text"].index(zebra)
    assert control["text"].index(zebra) < control["text"].index(other)


# -- 2. one economical fetch hint that names the project -------------------------------------------------


async def test_left_out_items_of_another_project_are_fetched_by_the_one_hint(client: Client) -> None:
    ids = await fill_billing(client)

    compiled = await call(client, "memory_context", project="billing", budget=100)

    assert ids["slot"] not in [o["id"] for o in compiled["omitted"]]  # the slot fits, the rest does not
    assert compiled["omitted"] == [
        {"section": "profile", "id": None, "title": "project profile"},
        {"section": "lessons", "id": ids["lesson"], "title": "Always verify webhook signatures first."},
        {"section": "memories", "id": ids["memory"], "title": "Billing uses Stripe webhooks."},
    ]
    assert compiled["fetch"] == (
        f'memory_smart_search(ids=["{ids["lesson"]}", "{ids["memory"]}"], project="billing"); '
        'memory_profile(project="billing")'
    )
    [(search, search_args), (profile, profile_args)] = hinted_calls(compiled["fetch"])
    fetched = await call(client, search, **search_args)
    assert fetched["missing"] == []
    assert [m["id"] for m in fetched["memories"]] == [ids["memory"]]
    assert [lesson["id"] for lesson in fetched["lessons"]] == [ids["lesson"]]
    fetched_profile = await call(client, profile, **profile_args)
    assert (fetched_profile["project"], fetched_profile["memories"], fetched_profile["lessons"]) == ("billing", 1, 1)


async def test_the_default_project_is_not_named_and_omitted_titles_are_short(client: Client) -> None:
    long = "Every deploy must be preceded by a full database backup verified by restore " * 3
    memory = (await call(client, "memory_save", content=long))["id"]
    await call(client, "memory_slot_create", name="persona", content="p " * 170, pinned=True)

    compiled = await call(client, "memory_context", budget=100)

    assert compiled["omitted"] == [
        {"section": "profile", "id": None, "title": "project profile"},
        {"section": "memories", "id": memory, "title": "Every deploy must be preceded by a full database backup…"},
    ]
    assert compiled["fetch"] == f'memory_smart_search(ids=["{memory}"]); memory_profile()'


async def test_a_long_left_out_list_is_cut_to_the_most_wanted_and_counted(client: Client) -> None:
    slots = []
    for i in range(102):  # none fits in the budget
        made = await call(client, "memory_slot_create", name=f"block_{i:03}", content=f"block {i} " * 60, pinned=True)
        slots.append(made["slot"]["id"])

    compiled = await call(client, "memory_context", budget=100)
    roomy = await call(client, "memory_context", budget=2000)

    calls = hinted_calls(compiled["fetch"])
    listed = [o["id"] for o in compiled["omitted"]]
    assert len(listed) == 5  # a small budget lists few: the list costs tokens too
    assert compiled["omitted_unlisted"] == 97
    assert (len(roomy["omitted"]), roomy["omitted"][0]["section"]) == (20, "pinned_slots")  # never more than 20
    assert [s["omitted"] for s in compiled["sections"] if s["name"] == "pinned_slots"] == [102]
    assert set(listed) <= set(slots)
    assert [(tool, args["ids"]) for tool, args in calls] == [("memory_smart_search", listed)]


async def test_a_preference_the_profile_shows_is_not_listed_again_among_the_memories(client: Client) -> None:
    preference = await call(client, "memory_save", content="Prefers small commits.", kind="preference")
    fact = await call(client, "memory_save", content="The API listens on port 8080.")

    text = (await call(client, "memory_context"))["text"]

    assert text.count("Prefers small commits.") == 1
    assert "Preference: Prefers small commits." in text
    assert preference["id"] not in text
    assert f"- [fact] The API listens on port 8080. ({fact['id']})" in text


# -- 3. the core profile names only tools it exposes ----------------------------------------------------


async def test_under_the_core_profile_hints_name_only_exposed_tools(settings: Settings, clock: FakeClock) -> None:
    core = settings.model_copy(update={"tools": "core"})
    async with Client(build_server(core, clock)) as client:
        exposed = {t.name for t in (await client.list_tools()).tools}
        ids = await fill_billing(client)
        compiled = await call(client, "memory_context", project="billing", budget=100)
        prompt = await prompt_text(client, "session_start", {"project": "billing"})
        resource = await resource_text(client, "memory://context?project=billing&budget=100")

    assert "memory_profile" not in exposed
    assert compiled["fetch"] == f'memory_smart_search(ids=["{ids["lesson"]}", "{ids["memory"]}"], project="billing")'
    for text in (compiled["fetch"], prompt, resource):
        assert set(re.findall(r"memory_\w+", text)) <= exposed, text


async def test_under_the_core_profile_a_left_out_profile_alone_is_named_without_a_call(
    settings: Settings, clock: FakeClock
) -> None:
    core = settings.model_copy(update={"tools": "core", "context_budget": 100})
    async with Client(build_server(core, clock)) as client:
        await call(client, "memory_slot_append", name="persona", text="p " * 80)  # a default slot: pinned
        await call(client, "memory_outcome_record", task="Ship it", task_type="deployment", success=True)
        # Without its words the prompt holds the slot and the profile: the words would cost it a section.
        prompt = await prompt_text(client, "session_start")
        await call(client, "memory_slot_append", name="persona", text="p " * 70)
        compiled = await call(client, "memory_context")
        resource = await resource_text(client, "memory://context")

    assert compiled["omitted"] == [{"section": "profile", "id": None, "title": "project profile"}]
    assert compiled["fetch"] is None
    assert "### persona\n" in prompt
    assert "## Project profile\n" in prompt
    assert "While you work" not in prompt
    assert resource.endswith("\nLeft out for space: project profile")
    assert len(prompt) <= 4 * 100
    assert len(resource) <= 4 * 100


# -- 4. the context resource ------------------------------------------------------------------------------


async def test_the_context_resource_says_what_was_left_out_like_the_prompt(client: Client) -> None:
    ids = await fill_billing(client)

    resource = await resource_text(client, "memory://context?project=billing&budget=100")
    prompt = await prompt_text(client, "session_start", {"project": "billing"})
    compiled = await call(client, "memory_context", project="billing", budget=100)
    default_budget = await call(client, "memory_context", project="billing")

    # The left-out line counts against the budget too: it takes its room from the sections.
    text, line, fetch = resource.rpartition("\nLeft out for space (fetch with): ")
    assert line
    assert len(resource) <= 4 * 100
    assert text.startswith("# Memory for project billing\n")
    [(search, search_args)] = hinted_calls(fetch)
    assert (search, search_args["project"]) == ("memory_smart_search", "billing")
    # memory_context at that budget keeps the slot; beside the line it no longer fits, and each record
    # is in the text or fetched by the line's call.
    assert [o["id"] for o in compiled["omitted"]] == [None, ids["lesson"], ids["memory"]]
    assert search_args["ids"] == [ids["slot"], ids["memory"]]
    assert ids["lesson"] in text
    assert "## Project profile" in text
    assert not [listed for listed in search_args["ids"] if listed in text]
    assert default_budget["omitted"] == []
    assert await resource_text(client, "memory://context?project=billing") == default_budget["text"]
    # The prompt's budget is the server's default, so nothing is left out there; it names the project instead.
    assert 'While you work (pass project="billing" to every call):' in prompt
    assert "Left out" not in prompt


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("query=" + "q" * 2_001, "query: String should have at most 2000 characters"),
        ("task_type=Bug-Fix", "task_type: String should match pattern '^[a-z][a-z0-9_]{0,39}$'"),
        ("budget=99", "budget: Input should be greater than or equal to 100"),
        ("budget=100001", "budget: Input should be less than or equal to 100000"),
        ("budget=lots", "budget: Input should be a valid integer"),
    ],
)
async def test_the_context_resource_checks_its_arguments_naming_them(client: Client, query: str, expected: str) -> None:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(f"memory://context?{query}")
    assert expected in str(refused.value)
    assert refused.value.code == INVALID_PARAMS  # the caller's mistake, not the server's internal error


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        (
            "memory://context?budjet=100",
            "budjet: unknown argument; this resource takes project, query, task_type, budget",
        ),
        ("memory://context?budget=500&bogus=1", "bogus: unknown argument"),
        ("memory://slots/persona?projekt=x", "projekt: unknown argument; this resource takes project"),
        ("memory://slots/persona?project=a%2Fb", "project: must be"),
        ("memory://slots/persona?project=a&project=b", "project: given 2 times; give it once"),
        ("memory://context?budget=500&budget=100", "budget: given 2 times; give it once"),
    ],
)
async def test_a_resource_refuses_arguments_it_does_not_take_or_cannot_use(
    client: Client, uri: str, expected: str
) -> None:
    await call(client, "memory_slot_replace", name="persona", content="Terse.")

    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)

    assert expected in str(refused.value)
    assert refused.value.code == INVALID_PARAMS


async def test_the_context_resource_takes_a_budget_and_a_query_that_looks_like_a_path(client: Client) -> None:
    for i in range(8):
        await call(client, "memory_save", content=f"Endpoint /api/users/{i} pages results " + "x " * 80)
    small = await call(client, "memory_context", budget=150)

    read_small = await resource_text(client, "memory://context?budget=150")
    read_path = await resource_text(client, "memory://context?query=%2Fapi%2Fusers%20..%2Fadmin")

    text, line, fetch = read_small.rpartition("\nLeft out for space (fetch with): ")
    assert line
    assert len(read_small) <= 4 * 150 < len(small["text"] + line + small["fetch"])
    assert text == small["text"][: len(text)]  # the same context, with room made for the line
    [(search, arguments)] = hinted_calls(fetch)
    assert search == "memory_smart_search"
    assert len(arguments["ids"]) == len(small["omitted"]) == 5
    assert not [listed for listed in arguments["ids"] if listed in text]
    assert read_path.startswith("# Memory for project test\n")


# -- 5. the session-end prompt ----------------------------------------------------------------------------


async def test_the_session_end_prompt_refuses_a_session_the_project_does_not_have(client: Client) -> None:
    await call(client, "memory_observe", content="Billing work.", session_id="bill", project="billing")
    await call(client, "memory_observe", content="Our work.", session_id="ours")

    refusals = {}
    for session in ("nope", "bill"):
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("session_end", {"session_id": session})
        refusals[session] = str(refused.value)
    ours = await prompt_text(client, "session_end", {"session_id": "ours"})

    for session, message in refusals.items():
        assert message == f"session_id: No session '{session}' in this project; call memory_sessions to list sessions"
    assert 'Call memory_crystallize(session_id="ours") so the session is summarised' in ours


async def test_the_session_end_prompt_takes_a_project_and_names_it_in_every_call(client: Client) -> None:
    await call(client, "memory_observe", content="Billing work.", session_id="bill", project="billing")

    current = await prompt_text(client, "session_end", {"project": "billing"})
    named = await prompt_text(client, "session_end", {"project": "billing", "session_id": "bill"})
    default = await prompt_text(client, "session_end", {"project": "test"})

    for text in (current, named):
        assert 'starts smarter (pass project="billing" to every call):' in text
        assert 'memory_reflect(session_id="bill", project="billing")' in text
        assert 'memory_crystallize(session_id="bill", project="billing")' in text
    assert "project=" not in default


# -- 6. the profile of a project with only outcomes -------------------------------------------------------


async def test_a_project_with_only_outcomes_has_a_profile_in_its_context(client: Client) -> None:
    await call(client, "memory_outcome_record", task="Deploy the API", task_type="deployment", success=True, score=0.7)

    compiled = await call(client, "memory_context")

    assert "\n## Project profile\n0 sessions, 0 observations, 0 memories, 0 lessons.\n" in compiled["text"]
    assert "deployment: 1/1 succeeded, mean score 0.70" in compiled["text"]
    assert [s["name"] for s in compiled["sections"]] == ["profile"]


# -- 7. session lines say each fact once -------------------------------------------------------------------


async def test_a_summarised_session_line_names_its_title_once(client: Client, clock: FakeClock) -> None:
    title = "Moved the cache to Redis"
    await call(client, "memory_observe", content=title, type="decision", session_id="conv-1")
    clock.advance(minutes=1)
    await call(
        client, "memory_observe", content="Error: connection refused on port 6379.", type="error", session_id="conv-1"
    )
    clock.advance(minutes=1)
    await call(client, "memory_observe", content="Fixed the port in settings.", type="fix", session_id="conv-1")
    await call(client, "memory_observe", content="Only a decision here", type="decision", session_id="conv-2")
    await call(client, "memory_crystallize", session_id="conv-1")
    await call(client, "memory_crystallize", session_id="conv-2")

    text = (await call(client, "memory_context"))["text"]

    lines = text.split("## Recent sessions\n", 1)[1].splitlines()
    [busy] = [line for line in lines if title in line]
    [quiet] = [line for line in lines if "Only a decision here" in line]
    assert busy.count(title) == 1
    assert busy.startswith(f"- 2026-01-05 {title} (3 observations): Errors and fixes: - Error: connection refused")
    assert "Decisions:" not in busy  # its one decision is the title
    assert " observations, 2026-01-05" not in busy  # the summary's own header line
    assert quiet == "- 2026-01-05 Only a decision here (1 observation)"


async def test_a_session_summarised_down_to_its_header_still_compiles(client: Client) -> None:
    await call(client, "memory_observe", content="ran the linter", type="tool_use", session_id="t", end_session=True)
    await call(client, "memory_crystallize")

    text = (await call(client, "memory_context"))["text"]

    assert "- 2026-01-05 ran the linter (1 observation)\n" in text


async def test_blank_prompt_and_resource_arguments_count_as_not_given(client: Client) -> None:
    # a client's prompt form sends "" for each field left empty; a resource URI may carry `?task_type=`
    await call(client, "memory_slot_create", name="persona", content="Terse, cites files.", pinned=True)
    await call(client, "memory_observe", content="Tuned the flaky export test.", session_id="s1")
    blank = {"query": "", "task_type": " ", "project": ""}

    start = await prompt_text(client, "session_start", blank)
    end = await prompt_text(client, "session_end", {"session_id": "", "task": "", "project": ""})
    context = await resource_text(client, "memory://context?project=&query=&task_type=&budget=")
    slot = await resource_text(client, "memory://slots/persona?project=")

    assert start == await prompt_text(client, "session_start")
    assert end == await prompt_text(client, "session_end")
    assert 'memory_crystallize(session_id="s1")' in end
    assert context == await resource_text(client, "memory://context")
    assert slot == "Terse, cites files."


async def test_the_context_profile_shows_the_same_counts_as_memory_profile(client: Client, clock: FakeClock) -> None:
    for i in range(5):
        await call(client, "memory_observe", content=f"Parser note {i}", concepts=["legacy_parser"])
        clock.advance(minutes=1)
    for i in range(3):
        await call(client, "memory_observe", content=f"Router note {i}", concepts=["new_router"])
        clock.advance(minutes=1)
    await call(client, "memory_save", content="Routes are declared in one table.", concepts=["route_table"])

    context = await call(client, "memory_context")
    profile = await call(client, "memory_profile")

    concepts_line = next(line for line in context["text"].splitlines() if line.startswith("Concepts: "))
    assert concepts_line == "Concepts: legacy_parser, new_router, route_table"
    assert "8 observations" in context["text"]
    assert [(c["name"], c["count"]) for c in profile["top_concepts"]] == [
        ("legacy_parser", 5),
        ("new_router", 3),
        ("route_table", 1),
    ]


async def test_memories_a_contradiction_links_say_which_is_newer(client: Client, clock: FakeClock) -> None:
    old = await call(client, "memory_save", kind="decision", content="Invoice PDFs are rendered with WeasyPrint.")
    clock.advance(days=2)
    new = await call(client, "memory_save", kind="decision", content="Invoices now use ReportLab for the PDF output.")
    other = await call(client, "memory_save", kind="fact", content="The staging database listens on port 5433.")
    await call(client, "memory_relate", source_id=old["id"], target_id=new["id"], type="contradicts")

    lines = (await call(client, "memory_context"))["text"].splitlines()

    def line_of(memory_id: str) -> str:
        [line] = [line for line in lines if f"({memory_id}" in line]
        return line

    assert line_of(old["id"]).endswith(f"({old['id']}; contradicted by newer {new['id']})")
    assert line_of(new["id"]).endswith(f"({new['id']}; contradicts older {old['id']})")
    assert line_of(other["id"]).endswith(f"({other['id']})")


# -- a global lesson that applies leads the project's that do not --------------------------------------------


@pytest.mark.parametrize("focus", [{"query": "kafka offsets"}, {"task_type": "bugfix"}])
async def test_a_global_lesson_matching_the_focus_comes_before_project_lessons_that_do_not(
    client: Client, focus: dict[str, str]
) -> None:
    for i in range(12):
        await call(client, "memory_lesson_save", content=f"Project lesson {i} about unrelated stuff number{i}.")
    kafka = await call(
        client, "memory_lesson_save", content="Kafka consumers must commit offsets after processing", scope="global"
    )
    bugfix = await call(
        client, "memory_lesson_save", content="Always reproduce a bug first", scope="global", task_type="bugfix"
    )
    wanted = kafka if "query" in focus else bugfix

    compiled = await call(client, "memory_context", budget=300, **focus)

    lessons = next(s for s in compiled["sections"] if s["name"] == "lessons")
    assert lessons["included"] >= 1
    assert f"({wanted['lesson']['id']})" in compiled["text"].split("## Lessons", 1)[1].splitlines()[1]
