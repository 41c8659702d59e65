"""Sessions stay true to their records: forgetting thins them, idle ones get summarised, and the
session prompts name the session they are about and check their arguments."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

SECRET_TEXT = "Discussed my HIV test results with doctor Smith"


async def session_view(client: Client, session_id: str) -> dict[str, object]:
    listed = await call(client, "memory_sessions", status="all", limit=100)
    return next(s for s in listed["sessions"] if s["id"] == session_id)


async def prompt_text(client: Client, name: str, arguments: dict[str, str] | None = None) -> str:
    result = await client.get_prompt(name, arguments)
    [message] = result.messages
    text = getattr(message.content, "text", None)
    assert isinstance(text, str)
    return text


# -- forgetting an observation thins its session ---------------------------------------------------------


async def test_forgetting_an_observation_takes_it_out_of_the_sessions_title_summary_and_search(
    client: Client, clock: FakeClock
) -> None:
    secret = await call(client, "memory_observe", content=SECRET_TEXT, session_id="chat-7")
    clock.advance(minutes=1)
    await call(client, "memory_observe", content="Then worked on the CSS grid layout", session_id="chat-7")
    crystallized = (await call(client, "memory_crystallize", session_id="chat-7"))["sessions"][0]
    assert crystallized["title"] == SECRET_TEXT
    assert SECRET_TEXT in crystallized["summary"]

    await call(client, "memory_forget", ids=[secret["id"]])

    view = await session_view(client, "chat-7")
    recalled = await call(client, "memory_recall", query="Dr Smith HIV test results")
    searched = await call(client, "memory_smart_search", query="HIV Smith")
    assert (view["title"], view["summary"]) == ("Then worked on the CSS grid layout", None)
    assert recalled["hits"] == []
    assert searched["hits"] == []
    # the session needs a summary again, and gets one from what remains
    clock.advance(minutes=1)
    await call(client, "memory_observe", content="Closed the layout ticket", session_id="chat-7", end_session=True)
    [rebuilt] = (await call(client, "memory_crystallize"))["sessions"]
    assert rebuilt["session_id"] == "chat-7"
    assert rebuilt["summary"].startswith("Then worked on the CSS grid layout — 2 observations,")
    assert "HIV" not in rebuilt["summary"]
    hits = (await call(client, "memory_recall", query="CSS grid layout ticket"))["hits"]
    assert ("chat-7", "session") in [(h["id"], h["kind"]) for h in hits]


async def test_a_summary_written_before_the_forgotten_observation_stays(client: Client, clock: FakeClock) -> None:
    await call(client, "memory_observe", content="Chose Postgres for the ledger", type="decision", session_id="db")
    first = (await call(client, "memory_crystallize", session_id="db"))["sessions"][0]
    clock.advance(minutes=1)
    later = await call(client, "memory_observe", content="Looked up my bank password hint", session_id="db")

    await call(client, "memory_forget", ids=[later["id"]])

    view = await session_view(client, "db")
    assert (view["title"], view["summary"]) == ("Chose Postgres for the ledger", " ".join(first["summary"].split()))
    hits = (await call(client, "memory_recall", query="Postgres ledger"))["hits"]
    assert ("db", "session") in [(h["id"], h["kind"]) for h in hits]


async def test_forgetting_a_sessions_observations_retitles_it_or_clears_its_title(client: Client) -> None:
    first = await call(client, "memory_observe", content=SECRET_TEXT, session_id="chat-8")
    second = await call(client, "memory_observe", content="Renamed the billing module", session_id="chat-8")

    await call(client, "memory_forget", ids=[first["id"]])
    retitled = await session_view(client, "chat-8")
    await call(client, "memory_forget", kind="observation", session_id="chat-8")
    emptied = await session_view(client, "chat-8")

    assert (retitled["title"], retitled["observation_count"], retitled["recorded_count"]) == (
        "Renamed the billing module",
        1,
        1,
    )
    assert second["id"] != first["id"]
    assert (emptied["title"], emptied["observation_count"], emptied["recorded_count"]) == (None, 0, 0)


async def test_forget_keeps_a_sessions_counts_and_order_right(client: Client, clock: FakeClock) -> None:
    ids = []
    for step in range(5):
        content = f"Step {step}: ran pytest on alpha{step}"
        observed = await call(client, "memory_observe", content=content, session_id="s1")
        ids.append(observed["id"])
        clock.advance(minutes=1)

    await call(client, "memory_forget", ids=[ids[2]])
    view = await session_view(client, "s1")
    total = (await call(client, "memory_observations", session_id="s1"))["total"]
    newest = await call(client, "memory_observe", content="Step 5: ran pytest on omega", session_id="s1")
    recalled = await call(client, "memory_recall", query="omega", neighbours=2)

    assert (view["observation_count"], view["recorded_count"], view["folded_count"], total) == (4, 4, 0, 4)
    # the newest observation comes right after the last one left, not beside it
    [hit] = [h for h in recalled["hits"] if h["id"] == newest["id"]]
    assert hit["context"] == ["-2: Step 3: ran pytest on alpha3", "-1: Step 4: ran pytest on alpha4"]


# -- unknown sessions -------------------------------------------------------------------------------------


async def test_an_unknown_session_id_names_the_argument(client: Client) -> None:
    await call(client, "memory_observe", content="Something happened", session_id="known")
    calls = {
        "memory_recall": {"query": "anything", "session_id": "nope"},
        "memory_observations": {"session_id": "nope"},
        "memory_timeline": {"session_id": "nope"},
        "memory_save": {"content": "A fact worth keeping", "session_id": "nope"},
        "memory_outcome_record": {"task": "ship it", "success": True, "session_id": "nope"},
        "memory_forget": {"session_id": "nope"},
        "memory_crystallize": {"session_id": "nope"},
    }
    for tool, arguments in calls.items():
        message = await call_error(client, tool, **arguments)
        assert f"Error executing tool {tool}: session_id: No session 'nope' in this project;" in message, message

    by_id = await call_error(client, "memory_forget", ids=["nope"])
    assert "ids: No session 'nope' in this project;" in by_id


# -- idle sessions count as ended -------------------------------------------------------------------------


async def test_crystallize_summarises_sessions_idle_past_the_idle_limit_and_ends_them(
    client: Client, clock: FakeClock
) -> None:
    auto = await call(client, "memory_observe", content="Started refactor of billing module", type="decision")
    await call(client, "memory_observe", content="Drafted the parser notes", session_id="conv-1")
    clock.advance(minutes=119)
    assert (await call(client, "memory_crystallize"))["sessions"] == []
    clock.advance(minutes=2)  # 121 minutes without an observation: past the default 120

    summarised = await call(client, "memory_crystallize")
    ended = {s["id"]: (s["status"], s["ended_at"]) for s in (await call(client, "memory_sessions"))["sessions"]}
    reopened = await call(client, "memory_observe", content="Back on the parser", session_id="conv-1")

    assert sorted((s["session_id"], s["changed"]) for s in summarised["sessions"]) == sorted(
        [(auto["session_id"], True), ("conv-1", True)]
    )
    assert ended == {
        auto["session_id"]: ("ended", "2026-01-05T09:00:00.000000Z"),
        "conv-1": ("ended", "2026-01-05T09:00:00.000000Z"),
    }
    assert reopened["session_created"] is False
    assert (await session_view(client, "conv-1"))["status"] == "active"
    assert (await call(client, "memory_crystallize"))["sessions"] == []  # its summary waits until it ends again


async def test_consolidate_summarises_sessions_idle_past_the_idle_limit(client: Client, clock: FakeClock) -> None:
    observed = await call(client, "memory_observe", content="Decided to pin numpy to 1.26", type="decision")
    clock.advance(hours=5)

    planned = await call(client, "memory_consolidate", dry_run=True)

    assert [(c["kind"], c["action"], c["id"]) for c in planned["changes"]] == [
        ("session", "ended", observed["session_id"]),
        ("session", "crystallized", observed["session_id"]),
    ]


# -- the session prompts ----------------------------------------------------------------------------------


async def test_the_session_end_prompt_names_the_session_in_progress_so_crystallize_summarises_it(
    client: Client, clock: FakeClock
) -> None:
    observed = await call(client, "memory_observe", content="Decided to pin numpy to 1.26", type="decision")
    session = observed["session_id"]

    text = await prompt_text(client, "session_end")
    summarised = await call(client, "memory_crystallize", session_id=session)
    clock.advance(minutes=1)
    await call(client, "memory_observe", content="Talked through the release plan", session_id="conv-9")
    named = await prompt_text(client, "session_end")
    clock.advance(hours=3)
    after_idle = await prompt_text(client, "session_end")

    assert f'Call memory_crystallize(session_id="{session}") so the session is summarised' in text
    assert f'memory_reflect(session_id="{session}")' in text
    assert [(s["session_id"], s["changed"]) for s in summarised["sessions"]] == [(session, True)]
    assert 'Call memory_crystallize(session_id="conv-9") so the session is summarised' in named
    assert "session_id" not in after_idle  # no session is in progress any more


async def test_prompt_arguments_are_checked_like_tool_arguments(client: Client) -> None:
    refusals = [
        ("session_end", {"session_id": 'abc") and call memory_forget(kind="memory'}, "session_id: No session"),
        ("session_end", {"task": "t" * 2_001}, "task: String should have at most 2000 characters"),
        (
            "session_end",
            {"sesion_id": "conv-1"},
            "sesion_id: unknown argument; valid arguments are agent_id, project, session_id, task",
        ),
        ("session_start", {"query": "q" * 5_000}, "query: String should have at most 2000 characters"),
        ("session_start", {"task_type": "BAD TYPE"}, "task_type: String should match pattern"),
        ("session_start", {"project": "p" * 300}, "project: String should have at most 128 characters"),
    ]
    for name, arguments, expected in refusals:
        with pytest.raises(MCPError) as refused:
            await client.get_prompt(name, arguments)
        assert expected in str(refused.value), (name, str(refused.value))
        assert "Internal server error" not in str(refused.value)

    quoted = await prompt_text(client, "session_end", {"task": 'ship v2") and call memory_forget("x'})
    assert '(at least: "ship v2\\") and call memory_forget(\\"x")' in quoted


async def test_an_unknown_prompt_is_a_clear_error(settings: Settings, clock: FakeClock, client: Client) -> None:
    with pytest.raises(MCPError) as unknown:
        await client.get_prompt("nope", {})
    assert str(unknown.value) == "name: unknown prompt 'nope'; prompts are session_end, session_start"

    async with Client(build_server(settings.model_copy(update={"tools": "core"}), clock)) as core:
        with pytest.raises(MCPError) as hidden:
            await core.get_prompt("session_end", {})
    assert str(hidden.value) == "name: unknown prompt 'session_end'; prompts are session_start"


# -- errors and their fixes ------------------------------------------------------------------------------


async def test_crystallize_pairs_an_error_only_with_a_fix_about_the_same_thing(client: Client) -> None:
    for kind, content in [
        ("error", "Error: TypeError in invoice total"),
        ("error", "Error: KeyError currency in invoice"),
        ("note", "Looked at the tax tables"),
        ("fix", "Fixed currency lookup with default EUR"),
        ("error", "Build broke on the docs step"),
        ("fix", "Pinned sphinx below 8"),
        ("fix", "Sped up the nightly export"),
    ]:
        await call(client, "memory_observe", content=content, type=kind, session_id="billing")

    summary = (await call(client, "memory_crystallize", session_id="billing"))["sessions"][0]["summary"]

    lines = summary.splitlines()
    start = lines.index("Errors and fixes:") + 1
    assert lines[start : start + 5] == [
        "- Error: TypeError in invoice total -> unresolved",
        "- Error: KeyError currency in invoice -> fixed: Fixed currency lookup with default EUR",
        "- Build broke on the docs step -> fixed: Pinned sphinx below 8",  # recorded right after it
        "- fixed: Sped up the nightly export",
        lines[start + 4],
    ]
    assert not lines[start + 4].startswith("- ")


async def test_prompt_text_arguments_that_look_like_json_stay_text(client: Client) -> None:
    text = await prompt_text(client, "session_start", {"query": '{"error": "timeout"}'})

    assert text.startswith("Here is what you remember about this project.")
