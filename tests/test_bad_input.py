"""Bad input to every tool: a tool error naming the field and the rule, nothing written, server still fine."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

LONG_ID = "s" * 129
BAD_PROJECTS = [
    "a/b",
    "*",
    "",
    "a\\b",
    "tab\there",
    "p" * 129,
    "zero\u200bwidth",
    "\u202etset",
    "del\x7f",
    "\u0301\u0301",
]


def case(tool: str, field: str | None, rule: str, **args: Any) -> Any:
    """One bad call: the field its error must name (None for not-found errors) and a rule fragment."""
    label = f"{tool}-{field or 'not_found'}-{rule}"
    return pytest.param(tool, args, field, rule, id=re.sub(r"[^A-Za-z0-9_'.-]+", "_", label)[:90])


def project_cases(tool: str, **required: Any) -> list[Any]:
    return [
        pytest.param(tool, {**required, "project": name}, "project", "", id=f"{tool}-project-{n}")
        for n, name in enumerate(BAD_PROJECTS)
    ]


CASES = [
    # memory_observe
    case("memory_observe", "content", "Field required"),
    case("memory_observe", "content", "at least 1 character", content=""),
    case("memory_observe", "content", "valid string", content=5),
    case("memory_observe", "content", "valid string", content=["a", "list"]),
    case("memory_observe", "content", "at most 100000 characters", content="x" * 100_001),
    case("memory_observe", "content", "must contain text", content="   \n\t "),
    case("memory_observe", "type", "pattern", content="ok", type="Decision!"),
    case("memory_observe", "type", "pattern", content="ok", type=""),
    case("memory_observe", "title", "at most 300 characters", content="ok", title="t" * 301),
    case("memory_observe", "facts", "valid list", content="ok", facts="one fact"),
    case("memory_observe", "facts", "at most 50 items", content="ok", facts=["f"] * 51),
    case("memory_observe", "facts", "at most 2000 characters", content="ok", facts=["f" * 2_001]),
    case("memory_observe", "concepts", "at most 50 items", content="ok", concepts=["c"] * 51),
    case("memory_observe", "concepts", "at most 100 characters", content="ok", concepts=["c" * 101]),
    case("memory_observe", "files", "at most 200 items", content="ok", files=["f.py"] * 201),
    case("memory_observe", "session_id", "letters, digits", content="ok", session_id="bad id!"),
    case("memory_observe", "session_id", "letters, digits", content="ok", session_id="-starts-with-dash"),
    case("memory_observe", "session_id", "at most 128 characters", content="ok", session_id=LONG_ID),
    case("memory_observe", "ref", "at most 500 characters", content="ok", ref="r" * 501),
    case("memory_observe", "occurred_at", "ISO-8601", content="ok", occurred_at="yesterday"),
    case("memory_observe", "occurred_at", "ISO-8601", content="ok", occurred_at="2025-13-45"),
    case("memory_observe", "occurred_at", "at most 40 characters", content="ok", occurred_at="2" * 41),
    case("memory_observe", "importance", "less than or equal to 1", content="ok", importance=1.5),
    case("memory_observe", "importance", "greater than or equal to 0", content="ok", importance=-0.1),
    case("memory_observe", "importance", "valid number", content="ok", importance="high"),
    case("memory_observe", "end_session", "valid boolean", content="ok", end_session="maybe"),
    case("memory_observe", "agent_id", "at most 128 characters", content="ok", agent_id="a" * 129),
    *project_cases("memory_observe", content="ok"),
    # memory_recall
    case("memory_recall", "query", "Field required"),
    case("memory_recall", "query", "at least 1 character", query=""),
    case("memory_recall", "query", "at most 2000 characters", query="q" * 2_001),
    case("memory_recall", "query", "valid string", query=42),
    case("memory_recall", "limit", "greater than or equal to 1", query="x", limit=0),
    case("memory_recall", "limit", "greater than or equal to 1", query="x", limit=-3),
    case("memory_recall", "limit", "less than or equal to 100", query="x", limit=101),
    case("memory_recall", "limit", "valid integer", query="x", limit="ten"),
    case("memory_recall", "limit", "fractional part", query="x", limit=2.5),
    case("memory_recall", "types", "valid list", query="x", types="error"),
    case("memory_recall", "types", "at most 20 items", query="x", types=["t"] * 21),
    case("memory_recall", "since", "ISO-8601", query="x", since="last week"),
    case("memory_recall", "until", "ISO-8601", query="x", until="soon"),
    case("memory_recall", "since", "later than until", query="x", since="2025-02-01", until="2025-01-01"),
    case("memory_recall", "session_id", "at most 128 characters", query="x", session_id=LONG_ID),
    case("memory_recall", "include_memories", "valid boolean", query="x", include_memories="sometimes"),
    *project_cases("memory_recall", query="x"),
    # memory_sessions
    case("memory_sessions", "status", "'active', 'idle', 'open', 'ended' or 'all'", status="paused"),
    case("memory_sessions", "limit", "greater than or equal to 1", limit=0),
    case("memory_sessions", "offset", "greater than or equal to 0", offset=-1),
    *project_cases("memory_sessions"),
    # memory_observations
    case("memory_observations", "order", "'newest' or 'oldest'", order="sideways"),
    case("memory_observations", "full", "valid boolean", full="yes please"),
    case("memory_observations", "limit", "greater than or equal to 1", limit=0),
    case("memory_observations", "offset", "greater than or equal to 0", offset=-5),
    case("memory_observations", "since", "ISO-8601", since="noon"),
    case("memory_observations", "types", "at most 20 items", types=["t"] * 21),
    case("memory_observations", "session_id", "No session 'no-such-session'", session_id="no-such-session"),
    *project_cases("memory_observations"),
    # memory_timeline
    case("memory_timeline", "anchor", "No observation 'obs_0000000000unknown000'", anchor="obs_0000000000unknown000"),
    case("memory_timeline", "session_id", "No session 'no-such-session'", session_id="no-such-session"),
    case("memory_timeline", "at", "ISO-8601", at="noon"),
    case("memory_timeline", "before", "greater than or equal to 0", before=-1),
    case("memory_timeline", "after", "less than or equal to 100", after=101),
    case("memory_timeline", "anchor", "at most 128 characters", anchor="o" * 129),
    *project_cases("memory_timeline"),
    # memory_save
    case("memory_save", "content", "Field required"),
    case("memory_save", "content", "at least 1 character", content=""),
    case("memory_save", "content", "at most 20000 characters", content="x" * 20_001),
    case("memory_save", "content", "must contain text", content="   "),
    case("memory_save", "kind", "pattern", content="ok", kind="Fact"),
    case("memory_save", "kind", "valid string", content="ok", kind=7),
    case("memory_save", "title", "at most 300 characters", content="ok", title="t" * 301),
    case("memory_save", "importance", "greater than or equal to 0", content="ok", importance=-0.1),
    case("memory_save", "concepts", "at most 50 items", content="ok", concepts=["c"] * 51),
    case("memory_save", "files", "at most 1000 characters", content="ok", files=["f" * 1_001]),
    case("memory_save", "occurred_at", "ISO-8601", content="ok", occurred_at="yesterday"),
    case(
        "memory_save",
        "supersedes",
        "No memory 'mem_0000000000unknown000'",
        content="ok",
        supersedes="mem_0000000000unknown000",
    ),
    case("memory_save", "session_id", "No session 'no-such-session'", content="ok", session_id="no-such-session"),
    *project_cases("memory_save", content="ok"),
    # memory_get
    case("memory_get", "id", "Field required"),
    case("memory_get", "id", "at least 1 character", id=""),
    case("memory_get", "id", "valid string", id=123),
    case("memory_get", "id", "at most 128 characters", id="m" * 129),
    case("memory_get", "id", "No memory 'mem_0000000000unknown000'", id="mem_0000000000unknown000"),
    case(
        "memory_get",
        "id",
        "No memory 'obs_0000000000unknown000' in this project (that is an observation id, not a memory's)",
        id="obs_0000000000unknown000",
    ),
    *project_cases("memory_get", id="mem_0000000000unknown000"),
    # memory_smart_search
    case("memory_smart_search", "query", "give a query, or ids"),
    case("memory_smart_search", "query", "give a query, or ids", query=""),
    case("memory_smart_search", "query", "at most 2000 characters", query="q" * 2_001),
    case("memory_smart_search", "ids", "at most 100 items", ids=["mem_x"] * 101),
    case("memory_smart_search", "ids", "at least 1 character", ids=[""]),
    case("memory_smart_search", "kinds", "'observation', 'memory', 'session' or 'lesson'", query="x", kinds=["action"]),
    case("memory_smart_search", "kinds", "at most 4 items", query="x", kinds=["memory"] * 5),
    case("memory_smart_search", "limit", "greater than or equal to 1", query="x", limit=0),
    *project_cases("memory_smart_search", query="x"),
    # memory_forget
    case("memory_forget", "ids", "give ids, or at least one filter"),
    case("memory_forget", "ids", "give ids, or at least one filter", ids=[]),
    case("memory_forget", "ids", "at most 100 items", ids=["mem_x"] * 101),
    case("memory_forget", "ids", "not both", ids=["mem_x"], kind="memory"),
    case("memory_forget", "ids", "not both", ids=["obs_x"], session_id="chat-1", dry_run=True),
    case("memory_forget", "ids", "not both", ids=["obs_x"], since="2026-01-01"),
    case("memory_forget", "ids", "not both", ids=["obs_x"], until="2026-01-01"),
    case("memory_forget", "ids", "at least 1 character", ids=[""]),
    case("memory_forget", "kind", "'observation', 'memory', 'session' or 'lesson'", kind="outcome"),
    case("memory_forget", "since", "ISO-8601", since="yesterday"),
    case("memory_forget", "until", "ISO-8601", until="tomorrow"),
    case("memory_forget", "since", "later than until", since="2025-02-01", until="2025-01-01"),
    case("memory_forget", "dry_run", "valid boolean", ids=["mem_x"], dry_run="perhaps"),
    case("memory_forget", "ids", "No memory 'mem_0000000000unknown000'", ids=["mem_0000000000unknown000"]),
    case("memory_forget", "ids", "No observation 'obs_0000000000unknown000'", ids=["obs_0000000000unknown000"]),
    case("memory_forget", "ids", "No session 'no-such-session'", ids=["no-such-session"]),
    case("memory_forget", "session_id", "No session 'no-such-session'", session_id="no-such-session"),
    case("memory_forget", "ids", "No lesson 'les_0000000000unknown000'", ids=["les_0000000000unknown000"]),
    *project_cases("memory_forget", kind="memory"),
    # memory_export
    case("memory_export", "path", "at most 4096 characters", path="p" * 4_097),
    case("memory_export", "overwrite", "valid boolean", overwrite="maybe"),
    case("memory_export", "all_projects", "valid boolean", all_projects="every"),
    *project_cases("memory_export"),
    case("memory_diagnose", "project", "unknown argument; this takes no arguments", project="x"),
    # memory_import
    case("memory_import", "document", "exactly one of document or path"),
    case("memory_import", "document", "valid dictionary", document="not a document"),
    case("memory_import", "document", "format must be 'mcp-memory-export'", document={"format": "zip"}),
    case("memory_import", "path", "at most 4096 characters", path="p" * 4_097),
]


def names_field(message: str, field: str) -> bool:
    """Whether the error names `field` as its location (pydantic's loc line, or our `field: rule`)."""
    return re.search(rf"(^|\n|: ){re.escape(field)}(\.\d+)?(\n|:)", message) is not None


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def shared_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """One server for every bad call of the table: each call must leave it working for the next."""
    settings = Settings(db=tmp_path_factory.mktemp("bad") / "memory.db", project="test", synchronous="normal")
    async with Client(build_server(settings, FakeClock())) as connected:
        yield connected


STORED = ("sessions", "observations", "memories", "audit_log", "search_docs")


@pytest.mark.parametrize(("tool", "args", "field", "rule"), CASES)
async def test_bad_input_is_a_tool_error_naming_the_field_and_the_server_carries_on(
    shared_client: Client, tool: str, args: dict[str, Any], field: str | None, rule: str
) -> None:
    before = (await call(shared_client, "memory_diagnose"))["counts"]

    message = await call_error(shared_client, tool, **args)

    assert message.startswith(f"Error executing tool {tool}")
    if field is not None:
        assert names_field(message, field), message
    assert rule in message
    assert "Traceback" not in message
    after_diagnosis = await call(shared_client, "memory_diagnose")
    after = after_diagnosis["counts"]
    assert {t: after[t] for t in STORED} == {t: before[t] for t in STORED}  # nothing half-written
    assert after_diagnosis["index_in_sync"] is True
    saved = await call(shared_client, "memory_observe", content=f"Still working after a bad {tool} call.")
    assert saved["id"].startswith("obs_")


async def test_errors_after_data_exists_leave_it_untouched(client: Client) -> None:
    mem = await call(client, "memory_save", content="A memory that must survive bad calls.")
    obs = await call(client, "memory_observe", content="An observation that must survive bad calls.")
    before = (await call(client, "memory_export"))["document"]

    await call_error(client, "memory_forget", ids=[mem["id"], "mem_0000000000unknown000"])
    await call_error(client, "memory_forget", ids=[obs["id"]], since="not a date")
    await call_error(client, "memory_save", content="x" * 20_001, supersedes=mem["id"])
    await call_error(client, "memory_observe", content="ok", session_id=obs["session_id"], occurred_at="soon")

    assert (await call(client, "memory_export"))["document"] == before
    assert (await call(client, "memory_recall", query="survive bad calls"))["hits"][0]["id"] == obs["id"]


@pytest.mark.parametrize(
    "query",
    [
        'title:"x" AND (y OR z*)',
        "NEAR(a b) -c ^d ~e",
        "'; DROP TABLE memories; --",
        "\\\\ %% __ [] {} ?? ::",
        "     ",
        "🙂🙃",
    ],
)
async def test_no_query_text_breaks_search(client: Client, query: str) -> None:
    saved = await call(client, "memory_save", content="Memories table holds long-lived facts.")

    recalled = await call(client, "memory_recall", query=query, include_memories=True)
    searched = await call(client, "memory_smart_search", query=query)

    assert recalled["query"] == query
    assert {h["id"] for h in recalled["hits"]} <= {saved["id"]}
    assert {h["id"] for h in searched["hits"]} <= {saved["id"]}
    assert (await call(client, "memory_diagnose"))["counts"]["memories"] == 1


async def test_a_query_of_query_syntax_still_finds_its_words(client: Client) -> None:
    saved = await call(client, "memory_save", content="Drop the memories table only in tests.")

    hits = await call(client, "memory_smart_search", query="'; DROP TABLE memories; --")

    assert [h["id"] for h in hits["hits"]] == [saved["id"]]
