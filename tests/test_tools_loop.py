"""Knowledge-loop tools through the real server: crystallize, consolidate, reflect, and sampling."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server.mcpserver import MCPServer
from mcp_types import CreateMessageRequestParams, CreateMessageResult, ErrorData, TextContent

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

SECRET = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"  # a GitHub token shape: ghp_ + 36 characters
REDACTED = "[REDACTED:github_token]"
MODES = [pytest.param("legacy", id="legacy"), pytest.param("auto", id="modern")]
"""`legacy`: initialize handshake, the server asks the client directly (create_message); `auto` on an
in-process server: protocol 2026-07-28, the server answers `input_required` with a Sample request."""


# -- scripted client models ----------------------------------------------------------------------------


@dataclass
class ScriptedModel:
    """A sampling callback that answers with a fixed text (or misbehaves as told) and records every ask."""

    text: str = ""
    behaviour: str = "answer"  # answer | raise | error | sleep
    asked: list[CreateMessageRequestParams] = field(default_factory=list)

    async def __call__(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        self.asked.append(params)
        if self.behaviour == "raise":
            raise RuntimeError("the user declined the sampling request")
        if self.behaviour == "error":
            return ErrorData(code=-1, message="User rejected sampling request")
        if self.behaviour == "sleep":
            await anyio.sleep(5)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=self.text), model="scripted")

    def prompt(self, n: int = 0) -> str:
        content = self.asked[n].messages[0].content
        assert isinstance(content, TextContent)
        return content.text


class Shared(NamedTuple):
    server: MCPServer[Any]
    plain: Client


@pytest.fixture
async def shared(settings: Settings, clock: FakeClock) -> AsyncIterator[Shared]:
    """One server that several clients (with and without a model) connect to in turn, and a client without one."""
    server = build_server(settings, clock)
    async with Client(server) as plain:  # keeps the shared app (and its index) open between clients
        yield Shared(server, plain)


# -- a known session -------------------------------------------------------------------------------------

SESSION = "conv-storage"
KNOWN = [
    # (type, title, files, concepts)
    ("decision", "Moved session storage from Redis to SQLite in WAL mode", ["mcp_memory/db.py"], ["sqlite", "wal"]),
    ("error", "pytest failed: ImportError cannot import name Stemmer", [], ["pystemmer"]),
    ("fix", "Pinned PyStemmer below version 4 in pyproject.toml", ["pyproject.toml"], ["pystemmer"]),
    ("file_change", "Rewrote the session repository for SQLite", ["mcp_memory/repositories/sessions.py"], ["sqlite"]),
    ("error", "The export endpoint timed out on large projects", [], []),
    ("tool_use", "Ran ruff format over the repository", [], []),
]
OUTCOME_TASK = "Migrate the session store off Redis to the zanzibar layout"

KNOWN_SUMMARY = "\n".join(
    [
        "6 observations, 2026-01-05 09:00 to 2026-01-05 09:05.",  # the title is the decision listed below
        "Decisions:",
        "- Moved session storage from Redis to SQLite in WAL mode",
        "Errors and fixes:",
        "- pytest failed: ImportError cannot import name Stemmer -> fixed: Pinned PyStemmer below version 4 in "
        "pyproject.toml",
        "- The export endpoint timed out on large projects -> unresolved",
        "Files: mcp_memory/db.py, pyproject.toml, mcp_memory/repositories/sessions.py",
        "Concepts: sqlite, pystemmer, wal",
        f"Outcome: {OUTCOME_TASK} succeeded (score 0.90)",
        "Also:",
        "- Rewrote the session repository for SQLite",
    ]
)


async def observe_known_session(client: Client, clock: FakeClock, *, end: bool = True) -> list[str]:
    ids = []
    for n, (kind, title, files, concepts) in enumerate(KNOWN):
        last = n == len(KNOWN) - 1
        saved = await call(
            client,
            "memory_observe",
            content=title + ".",
            title=title,
            type=kind,
            files=files,
            concepts=concepts,
            facts=[],
            session_id=SESSION,
            end_session=end and last,
        )
        ids.append(saved["id"])
        if not last:
            clock.advance(minutes=1)
    await call(
        client,
        "memory_outcome_record",
        task=OUTCOME_TASK,
        task_type="refactor",
        success=True,
        score=0.9,
        session_id=SESSION,
    )
    return ids


async def summary_in_sessions(client: Client, session_id: str) -> str | None:
    listed = await call(client, "memory_sessions", status="all", limit=100)
    return next(s["summary"] for s in listed["sessions"] if s["id"] == session_id)


# -- crystallize ------------------------------------------------------------------------------------------


async def test_crystallize_writes_the_extractive_summary_of_a_session(client: Client, clock: FakeClock) -> None:
    await observe_known_session(client, clock)

    result = await call(client, "memory_crystallize", session_id=SESSION)

    assert result["sessions"] == [
        {
            "session_id": SESSION,
            "title": "Moved session storage from Redis to SQLite in WAL mode",
            "summary": KNOWN_SUMMARY,
            "source": "extractive",
            "changed": True,
        }
    ]
    # memory_sessions shows it on one line (cut at a word boundary past 600 characters)
    assert await summary_in_sessions(client, SESSION) == " ".join(KNOWN_SUMMARY.split())


async def test_a_crystallized_summary_is_searchable_and_in_the_context(client: Client, clock: FakeClock) -> None:
    await observe_known_session(client, clock)
    before = await call(client, "memory_recall", query="zanzibar layout", session_id=SESSION)
    await call(client, "memory_crystallize", session_id=SESSION)

    # "zanzibar" is only in the outcome's task, which only the summary repeats
    after = await call(client, "memory_recall", query="zanzibar layout", session_id=SESSION)
    searched = await call(client, "memory_smart_search", query="zanzibar", kinds=["session"])
    context = await call(client, "memory_context")

    assert before["hits"] == []
    assert [(h["id"], h["kind"]) for h in after["hits"]] == [(SESSION, "session")]
    assert [(h["id"], h["kind"]) for h in searched["hits"]] == [(SESSION, "session")]
    recent = context["text"].split("## Recent sessions\n", 1)[1]
    line = recent.splitlines()[0]
    assert line.startswith(
        "- 2026-01-05 Moved session storage from Redis to SQLite in WAL mode (6 observations): Errors and fixes: "
        "- pytest failed: ImportError cannot import name Stemmer -> fixed: Pinned PyStemmer"
    )
    assert "-> fixed: Pinned PyStemmer" in line


async def test_crystallize_is_idempotent_until_forced_or_the_session_moves_on(client: Client, clock: FakeClock) -> None:
    await observe_known_session(client, clock)
    first = (await call(client, "memory_crystallize", session_id=SESSION))["sessions"][0]

    again = (await call(client, "memory_crystallize", session_id=SESSION))["sessions"][0]
    forced = (await call(client, "memory_crystallize", session_id=SESSION, force=True))["sessions"][0]
    clock.advance(minutes=10)
    await call(
        client, "memory_observe", content="Came back to add the zstd codec.", type="decision", session_id=SESSION
    )
    stale = (await call(client, "memory_crystallize", session_id=SESSION))["sessions"][0]

    assert (again["changed"], again["summary"], again["source"]) == (False, first["summary"], "extractive")
    assert (forced["changed"], forced["summary"]) == (True, first["summary"])
    assert stale["changed"] is True
    assert stale["summary"].startswith("7 observations")
    assert "- Came back to add the zstd codec." in stale["summary"].splitlines()


async def test_crystallize_without_a_session_does_every_ended_session_lacking_a_current_summary(
    client: Client, clock: FakeClock
) -> None:
    await call(client, "memory_observe", content="Chose uv for packaging.", type="decision", session_id="done-a")
    await call(client, "memory_observe", content="Packaging works.", session_id="done-a", end_session=True)
    await call(client, "memory_observe", content="Wrote the README intro.", session_id="done-b", end_session=True)
    await call(client, "memory_crystallize", session_id="done-b")
    await call(client, "memory_observe", content="Still exploring the cache.", session_id="still-open")
    clock.advance(minutes=5)

    first = await call(client, "memory_crystallize")
    second = await call(client, "memory_crystallize")

    assert [(s["session_id"], s["changed"]) for s in first["sessions"]] == [("done-a", True)]
    assert first["sessions"][0]["summary"] == (
        "2 observations, 2026-01-05 09:00 to 2026-01-05 09:00.\n"
        "Decisions:\n"
        "- Chose uv for packaging.\n"
        "Also:\n"
        "- Packaging works."
    )
    assert second["sessions"] == []
    assert await summary_in_sessions(client, "still-open") is None


async def test_a_crystallize_pass_over_a_backlog_lists_the_latest_summaries_and_stores_all(
    client: Client, clock: FakeClock
) -> None:
    names = [f"old-{i:02d}" for i in range(25)]
    for name in names:
        await call(client, "memory_observe", content=f"Ran the {name} job.", session_id=name, end_session=True)
        clock.advance(minutes=1)

    result = await call(client, "memory_crystallize")
    stored = await call(client, "memory_sessions", limit=50)

    assert result["total"] == 25
    assert [s["session_id"] for s in result["sessions"]] == names[5:]  # the latest 20, oldest first
    assert sum(1 for s in stored["sessions"] if s.get("summary")) == 25
    assert (await call(client, "memory_crystallize"))["total"] == 0


async def test_crystallize_an_unknown_session_is_a_clear_not_found(client: Client) -> None:
    message = await call_error(client, "memory_crystallize", session_id="conv-nope")

    assert "No session 'conv-nope' in this project" in message


# -- sampling: crystallize ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_crystallize_uses_the_clients_model_when_it_offers_sampling(
    shared: Shared, clock: FakeClock, mode: str
) -> None:
    server, plain = shared
    await observe_known_session(plain, clock)
    model = ScriptedModel(f"Moved sessions to SQLite (WAL).\nPyStemmer pinned < 4; token {SECRET} rotated.")

    async with Client(server, sampling_callback=model, mode=mode) as sampling:
        protocol = sampling.protocol_version
        result = await call(sampling, "memory_crystallize", session_id=SESSION)

    assert (protocol == "2026-07-28") == (mode == "auto")
    expected = f"Moved sessions to SQLite (WAL).\nPyStemmer pinned < 4; token {REDACTED} rotated."
    [made] = result["sessions"]
    assert (made["summary"], made["source"], made["changed"]) == (expected, "sampling", True)
    assert SECRET not in str(result)
    assert await summary_in_sessions(plain, SESSION) == " ".join(expected.split())
    # one tight request: a token cap, a system prompt, the extractive draft and the observations to work from
    assert len(model.asked) == 1
    asked = model.asked[0]
    assert asked.max_tokens == 600
    assert asked.system_prompt is not None
    assert "At most 12 short lines" in model.prompt()
    assert "- pytest failed: ImportError cannot import name Stemmer -> fixed: Pinned PyStemmer" in model.prompt()
    assert "- [tool_use] Ran ruff format over the repository" in model.prompt()


@pytest.mark.parametrize("mode", MODES)
async def test_crystallize_with_sampling_is_idempotent_and_asks_the_model_once(
    shared: Shared, clock: FakeClock, mode: str
) -> None:
    server, plain = shared
    await observe_known_session(plain, clock)
    model = ScriptedModel("Moved sessions to SQLite.")

    async with Client(server, sampling_callback=model, mode=mode) as sampling:
        first = (await call(sampling, "memory_crystallize", session_id=SESSION))["sessions"][0]
        again = (await call(sampling, "memory_crystallize", session_id=SESSION))["sessions"][0]

    assert (first["changed"], first["source"]) == (True, "sampling")
    assert (again["changed"], again["summary"], again["source"]) == (False, "Moved sessions to SQLite.", "sampling")
    assert len(model.asked) == 1


async def extractive_summary(plain: Client) -> str:
    summary = (await call(plain, "memory_crystallize", session_id=SESSION))["sessions"][0]["summary"]
    assert summary == KNOWN_SUMMARY
    return str(summary)


@pytest.mark.parametrize("behaviour", ["raise", "error"])
async def test_a_model_that_refuses_or_fails_in_legacy_mode_falls_back_to_the_extractive_summary(
    shared: Shared, clock: FakeClock, behaviour: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, plain = shared
    await observe_known_session(plain, clock)
    expected = await extractive_summary(plain)
    model = ScriptedModel("never used", behaviour=behaviour)

    with caplog.at_level("INFO", logger="mcp_memory.tools.loop"):
        async with Client(server, sampling_callback=model, mode="legacy") as sampling:
            result = await call(sampling, "memory_crystallize", session_id=SESSION, force=True)

    assert len(model.asked) == 1
    [logged] = [r.getMessage() for r in caplog.records if r.name == "mcp_memory.tools.loop"]
    assert logged.startswith("sampling unavailable, using the rule-based result: MCPError(")
    [made] = result["sessions"]
    assert (made["summary"], made["source"], made["changed"]) == (expected, "extractive", True)


async def test_a_legacy_models_summary_of_a_session_that_changed_meanwhile_is_not_stored(
    shared: Shared, clock: FakeClock
) -> None:
    server, plain = shared
    await observe_known_session(plain, clock)

    async def model(context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        # while the client's model writes, the agent records how the session went
        clock.advance(seconds=5)
        await call(plain, "memory_outcome_record", task="Move sessions to SQLite", success=False, session_id=SESSION)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="Moved to SQLite."), model="m"
        )

    async with Client(server, sampling_callback=model, mode="legacy") as sampling:
        [made] = (await call(sampling, "memory_crystallize", session_id=SESSION, force=True))["sessions"]
    clock.advance(minutes=1)
    [again] = (await call(plain, "memory_crystallize", session_id=SESSION))["sessions"]

    # stored as current, the model's summary (of the session before the outcome) was never redone
    assert (made["source"], made["changed"]) == ("extractive", True)
    assert "- Move sessions to SQLite failed" in made["summary"]
    assert (again["changed"], again["summary"]) == (False, made["summary"])


# answers that say nothing once cleaned: blank, punctuation, only a private part
EMPTY_ANSWERS = ["   \n  ", "...\n-", "<private>the plan we agreed on</private>"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("answer", EMPTY_ANSWERS)
async def test_an_empty_model_answer_falls_back_to_the_extractive_summary(
    shared: Shared, clock: FakeClock, mode: str, answer: str
) -> None:
    server, plain = shared
    await observe_known_session(plain, clock)
    expected = await extractive_summary(plain)
    model = ScriptedModel(answer)

    async with Client(server, sampling_callback=model, mode=mode) as sampling:
        result = await call(sampling, "memory_crystallize", session_id=SESSION, force=True)

    assert len(model.asked) == 1
    assert (result["sessions"][0]["summary"], result["sessions"][0]["source"]) == (expected, "extractive")


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_sampling_gets_the_extractive_summary_without_being_asked(
    shared: Shared, clock: FakeClock, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, plain = shared
    await observe_known_session(plain, clock)

    # Asked anyway, a modern client without a sampling callback could not answer the Sample request (the
    # call would fail), and a legacy one would answer an error, which the server logs before falling back.
    with caplog.at_level("INFO", logger="mcp_memory.tools.loop"):
        async with Client(server, mode=mode) as modelless:
            result = await call(modelless, "memory_crystallize", session_id=SESSION)

    assert (result["sessions"][0]["summary"], result["sessions"][0]["source"]) == (KNOWN_SUMMARY, "extractive")
    assert [r.getMessage() for r in caplog.records if r.name == "mcp_memory.tools.loop"] == []


async def test_crystallizing_every_ended_session_never_asks_the_model(shared: Shared, clock: FakeClock) -> None:
    server, plain = shared
    await observe_known_session(plain, clock)
    model = ScriptedModel("A model summary.")

    async with Client(server, sampling_callback=model) as sampling:
        result = await call(sampling, "memory_crystallize")

    assert [(s["session_id"], s["summary"], s["source"]) for s in result["sessions"]] == [
        (SESSION, KNOWN_SUMMARY, "extractive")
    ]
    assert model.asked == []


async def test_a_legacy_model_that_times_out_falls_back_to_the_extractive_summary(
    settings: Settings, clock: FakeClock
) -> None:
    server = build_server(settings.model_copy(update={"sampling_timeout_s": 0.2}), clock)
    model = ScriptedModel("too late", behaviour="sleep")
    async with Client(server) as plain:
        await observe_known_session(plain, clock)
        started = time.monotonic()
        async with Client(server, sampling_callback=model, mode="legacy") as sampling:
            result = await call(sampling, "memory_crystallize", session_id=SESSION)
        elapsed = time.monotonic() - started

    assert len(model.asked) == 1
    assert (result["sessions"][0]["summary"], result["sessions"][0]["source"]) == (KNOWN_SUMMARY, "extractive")
    assert elapsed < 3  # the 5 s answer was not waited for


# -- reflect ------------------------------------------------------------------------------------------------

ERROR_A = "pytest failed: ImportError cannot import name Stemmer from PyStemmer"
ERROR_B = "pytest failed again: ImportError cannot import name Stemmer from PyStemmer"
FIX = "Pinned PyStemmer below version 4 in pyproject.toml"
RELEASE_STEPS = ["bump the version", "run the tests", "tag the release"]
FRIDAYS = "Deploys to production run on Fridays after the weekly review."
NO_FRIDAYS = "Never deploy to production on Fridays."


async def observe(client: Client, title: str, kind: str, session_id: str, **extra: Any) -> str:
    saved = await call(
        client, "memory_observe", content=title + ".", title=title, type=kind, facts=[], session_id=session_id, **extra
    )
    return str(saved["id"])


async def build_reflection_history(client: Client, clock: FakeClock) -> dict[str, Any]:
    """Two sessions with a recurring error (fixed after its first sighting), three successful releases of
    which two share a step sequence, one failure, and two memories where one negates the other."""
    ids: dict[str, Any] = {}
    ids["error_a"] = await observe(client, ERROR_A, "error", "conv-1", concepts=["pystemmer"])
    clock.advance(minutes=1)
    ids["fix"] = await observe(client, FIX, "fix", "conv-1", concepts=["pystemmer"])
    clock.advance(minutes=1)
    await observe(client, "Released version 1.4", "note", "conv-1", concepts=["release"], end_session=True)
    clock.advance(hours=2)
    ids["error_b"] = await observe(client, ERROR_B, "error", "conv-2", concepts=["pystemmer", "ci"])
    clock.advance(minutes=1)
    ids["outcomes"] = []
    for steps, ok in (
        (["update the changelog", *RELEASE_STEPS], True),
        ([*RELEASE_STEPS, "publish to PyPI"], True),
        (["build the wheel", "upload the wheel"], True),
        (["tag the release", "publish to PyPI"], False),
    ):
        recorded = await call(
            client, "memory_outcome_record", task="Release the package", task_type="release", success=ok, steps=steps
        )
        ids["outcomes"].append(recorded["id"])
    ids["fridays"] = (await call(client, "memory_save", content=FRIDAYS, kind="decision"))["id"]
    ids["no_fridays"] = await call(client, "memory_save", content=NO_FRIDAYS, kind="decision")
    clock.advance(minutes=1)
    return ids


async def test_reflect_never_recommends_steps_that_mostly_fail(client: Client, clock: FakeClock) -> None:
    steps = ["edit the config by hand", "restart the service"]

    async def deploy(ok: bool) -> None:
        error = None if ok else "service failed to start: bad config"
        await call(
            client, "memory_outcome_record", task="Deploy", task_type="deployment", success=ok, steps=steps, error=error
        )
        clock.advance(minutes=1)

    for ok in (True, True):
        await deploy(ok)
    learned = (await call(client, "memory_reflect"))["heuristics"]
    for _ in range(5):
        await deploy(False)
    later = await call(client, "memory_reflect")
    insights = await call(client, "memory_insights", task_type="deployment")

    assert [h["confidence"] for h in learned] == [1.0]
    assert later["heuristics"] == []
    # the heuristic learned from the two successes is retired once the steps fail 5 times in 7
    assert insights["heuristics"] == []
    faded = await call(client, "memory_lessons", kinds=["heuristic"], status="faded")
    assert [(h["id"], h["confidence"]) for h in faded["lessons"]] == [(learned[0]["id"], 0.2857)]


async def test_reflect_learns_anti_patterns_heuristics_and_contradictions(client: Client, clock: FakeClock) -> None:
    ids = await build_reflection_history(client, clock)
    assert ids["no_fridays"]["superseded_id"] is None  # on one topic, but not similar enough to be a new version
    no_fridays = ids["no_fridays"]["id"]

    result = await call(client, "memory_reflect")

    assert (result["session_id"], result["since"], result["until"]) == (None, "2025-12-29T11:04:00.000000Z", None)
    assert result["source"] == "extractive"
    [anti] = result["anti_patterns"]
    assert (anti["kind"], anti["content"], anti["context"]) == (
        "anti_pattern",
        f"Recurring error: {ERROR_A}",
        f"Seen 2 times. Fixed by: {FIX}",
    )
    assert anti["confidence"] == 0.6
    assert anti["source"] == {"evidence": sorted([ids["error_a"], ids["error_b"]]), "via": "memory_reflect"}
    [heuristic] = result["heuristics"]
    assert (heuristic["kind"], heuristic["task_type"], heuristic["content"], heuristic["context"]) == (
        "heuristic",
        "release",
        "For release tasks: bump the version -> run the tests -> tag the release",
        "These steps succeeded in 2 of the 2 outcomes that took them.",
    )
    assert heuristic["confidence"] == 1.0
    assert heuristic["source"]["evidence"] == sorted(ids["outcomes"][:2])
    [contradiction] = result["contradictions"]
    pair = sorted([ids["fridays"], no_fridays])
    assert (contradiction["source_id"], contradiction["target_id"], contradiction["type"]) == (*pair, "contradicts")
    assert result["lessons"] == []
    assert result["insights"] == [
        "4 observations and 4 outcomes reviewed.",
        "3 of 4 outcomes succeeded.",
        "2 errors recorded; 1 recurring one became an anti-pattern.",
        "1 recurring successful step sequence became a heuristic.",
        "1 pair of memories looks contradictory; check them with memory_related.",
        "Most discussed: pystemmer, release, ci.",
    ]

    related = await call(client, "memory_related", id=ids["fridays"], types=["contradicts"])
    assert [(n["id"], n["via"]) for n in related["nodes"]] == [(no_fridays, "contradicts")]
    listed = await call(client, "memory_lessons", kinds=["anti_pattern", "heuristic"])
    assert sorted(lesson["id"] for lesson in listed["lessons"]) == sorted([anti["id"], heuristic["id"]])


async def lesson_state(client: Client) -> list[tuple[Any, ...]]:
    """What a reflection could change on a lesson (its shown confidence also decays with the clock)."""
    listed = await call(client, "memory_lessons", status="all", limit=100)
    return sorted(
        (x["id"], x["reinforcements"], x["last_reinforced_at"], x["context"], str(x["source"]))
        for x in listed["lessons"]
    )


async def test_reflecting_twice_on_the_same_window_changes_nothing(client: Client, clock: FakeClock) -> None:
    ids = await build_reflection_history(client, clock)
    window = {"since": "2026-01-05T00:00:00Z", "until": "2026-01-05T23:59:59Z"}
    await call(client, "memory_reflect", **window)
    lessons = await lesson_state(client)
    related = await call(client, "memory_related", id=ids["fridays"])
    clock.advance(minutes=30)

    again = await call(client, "memory_reflect", **window)

    assert (again["anti_patterns"], again["heuristics"], again["contradictions"]) == ([], [], [])
    assert await lesson_state(client) == lessons
    assert await call(client, "memory_related", id=ids["fridays"]) == related


async def test_reflect_on_one_session_sees_only_that_session(client: Client, clock: FakeClock) -> None:
    await build_reflection_history(client, clock)

    result = await call(client, "memory_reflect", session_id="conv-1")

    assert result["session_id"] == "conv-1"
    assert (result["anti_patterns"], result["heuristics"], result["contradictions"]) == ([], [], [])
    assert result["insights"] == [
        "3 observations and 0 outcomes reviewed.",
        "1 error recorded; 0 recurring ones became anti-patterns.",
        "Most discussed: pystemmer, release.",
    ]


async def test_a_new_sighting_of_a_known_error_reinforces_its_anti_pattern(client: Client, clock: FakeClock) -> None:
    await build_reflection_history(client, clock)
    first = (await call(client, "memory_reflect"))["anti_patterns"][0]
    clock.advance(minutes=5)
    third = await observe(client, ERROR_A + " on CI", "error", "conv-3")

    again = await call(client, "memory_reflect")

    [anti] = again["anti_patterns"]
    assert anti["id"] == first["id"]
    assert anti["reinforcements"] == 1
    assert anti["context"] == f"Seen 3 times. Fixed by: {FIX}"
    assert third in anti["source"]["evidence"]


# -- sampling: reflect --------------------------------------------------------------------------------------

MODEL_RULES = f"""Rules:
- Pin native dependencies such as PyStemmer before upgrading.
2. Never paste tokens like {SECRET} into observations.
* ok
"""


@pytest.mark.parametrize("mode", MODES)
async def test_reflect_saves_the_rules_the_clients_model_proposes(shared: Shared, clock: FakeClock, mode: str) -> None:
    server, plain = shared
    await build_reflection_history(plain, clock)
    model = ScriptedModel(MODEL_RULES)

    async with Client(server, sampling_callback=model, mode=mode) as sampling:
        result = await call(sampling, "memory_reflect")

    assert result["source"] == "sampling"
    assert [(x["kind"], x["content"], x["source"]["via"]) for x in result["lessons"]] == [
        ("lesson", "Pin native dependencies such as PyStemmer before upgrading.", "sampling"),
        ("lesson", f"Never paste tokens like {REDACTED} into observations.", "sampling"),
    ]
    # Each rule remembers the evidence it was drawn from, so the same window never counts twice.
    assert all(x["source"]["evidence"] for x in result["lessons"])
    assert SECRET not in str(result)
    assert len(result["anti_patterns"]) == len(result["heuristics"]) == 1  # the rule-based findings still count
    assert len(model.asked) == 1
    assert model.asked[0].max_tokens == 600
    assert f"- [error] {ERROR_B}" in model.prompt()
    assert "- outcome: Release the package failed" in model.prompt()
    stored = await call(plain, "memory_lessons", kinds=["lesson"])
    assert {x["content"] for x in stored["lessons"]} == {x["content"] for x in result["lessons"]}


@pytest.mark.parametrize("mode", MODES)
async def test_only_the_rules_of_a_models_reply_are_learned(shared: Shared, clock: FakeClock, mode: str) -> None:
    server, plain = shared
    await build_reflection_history(plain, clock)
    reply = (
        "**Here are the rules the agent should follow:**\n\n1. Pin PyStemmer before upgrading it.\n"
        "2. **Run the migrations before the tests.**\n```\npip install x\n```\n"
    )
    async with Client(server, sampling_callback=ScriptedModel(reply), mode=mode) as sampling:
        result = await call(sampling, "memory_reflect")

    assert [x["content"] for x in result["lessons"]] == [
        "Pin PyStemmer before upgrading it.",
        "Run the migrations before the tests.",
    ]


async def test_reflecting_twice_with_a_model_changes_nothing_the_second_time(shared: Shared, clock: FakeClock) -> None:
    server, plain = shared
    await build_reflection_history(plain, clock)
    model = ScriptedModel(MODEL_RULES)
    window = {"since": "2026-01-05T00:00:00Z", "until": "2026-01-05T23:59:59Z"}

    async with Client(server, sampling_callback=model) as sampling:
        await call(sampling, "memory_reflect", **window)
        lessons = await lesson_state(plain)
        clock.advance(minutes=30)
        await call(sampling, "memory_reflect", **window)

    assert await lesson_state(plain) == lessons


@pytest.mark.parametrize("behaviour", ["raise", "error"])
async def test_reflect_falls_back_to_the_rules_when_a_legacy_model_fails(
    shared: Shared, clock: FakeClock, behaviour: str
) -> None:
    server, plain = shared
    await build_reflection_history(plain, clock)
    model = ScriptedModel("never used", behaviour=behaviour)

    async with Client(server, sampling_callback=model, mode="legacy") as sampling:
        result = await call(sampling, "memory_reflect")

    assert len(model.asked) == 1
    assert (result["source"], result["lessons"]) == ("extractive", [])
    assert len(result["anti_patterns"]) == len(result["heuristics"]) == len(result["contradictions"]) == 1


@pytest.mark.parametrize("answer", [*EMPTY_ANSWERS, "- [private]\n* <private>rule one is secret</private>"])
async def test_a_model_answer_without_a_rule_saves_no_lesson(shared: Shared, clock: FakeClock, answer: str) -> None:
    server, plain = shared
    await build_reflection_history(plain, clock)
    model = ScriptedModel(answer)

    async with Client(server, sampling_callback=model, mode="legacy") as sampling:
        result = await call(sampling, "memory_reflect")

    assert len(model.asked) == 1
    assert (result["source"], result["lessons"]) == ("extractive", [])
    assert (await call(plain, "memory_lessons", kinds=["lesson"]))["lessons"] == []


# -- consolidate --------------------------------------------------------------------------------------------

DUPLICATE_ID = "mem_0dup00000000000000000"
WEEK_MINUTES = 7 * 24 * 60
FACT = "The staging database listens on port 5433"


@dataclass
class History:
    """Ids of the records the consolidation fixture built."""

    anchor: str = ""
    old_outcomes: list[str] = field(default_factory=list)
    fading: str = ""
    protected_lesson: str = ""
    strong: str = ""
    old_heuristic: str = ""
    original: str = ""
    weak_heuristic: str = ""
    protected_heuristic: str = ""
    low_value: list[str] = field(default_factory=list)
    protected_observation: str = ""
    big: list[str] = field(default_factory=list)


async def outcomes(client: Client, task_type: str, strategy: str, wins: int, losses: int) -> list[str]:
    ids = []
    for success in [True] * wins + [False] * losses:
        recorded = await call(
            client,
            "memory_outcome_record",
            task=f"Run the {task_type} job",
            task_type=task_type,
            success=success,
            strategy=strategy,
        )
        ids.append(recorded["id"])
    return ids


async def heuristic_of(client: Client, task_type: str) -> dict[str, Any]:
    listed = await call(client, "memory_lessons", kinds=["heuristic"], task_type=task_type, status="all")
    [found] = listed["lessons"]
    return found


async def build_history(settings: Settings, clock: FakeClock, *, protect_observation: bool = False) -> History:
    """Everything one consolidation pass has to deal with, built through the tools on a fake clock.

    Five weeks before the pass: three successful deployments (a heuristic, confidence 1.0), one of them
    pointed at by a relation; lessons at 0.12 (one pointed at) and 0.9. At the pass: one fact seen in three
    ended sessions, two near-duplicate live memories (the second imported, as saving it would have
    superseded the first), two heuristics at 0.6 that a raised heuristic_min_success no longer supports (a
    relation points at one of them), a session of 12 observations (two tool_use ones are the least
    valuable), a pinned slot and an open action.
    """
    h = History()
    async with Client(build_server(settings, clock)) as client:
        h.anchor = (await call(client, "memory_save", content="Release engineering notes for the payments service."))[
            "id"
        ]
        h.old_outcomes = await outcomes(client, "deployment", "blue green rollout with canary health checks", 3, 0)
        h.old_heuristic = (await heuristic_of(client, "deployment"))["id"]
        save = "memory_lesson_save"
        h.fading = (await call(client, save, content="Prefer tabs in the legacy Makefile.", confidence=0.12))["lesson"][
            "id"
        ]
        h.protected_lesson = (
            await call(client, save, content="Check the feature flag dashboard before a release.", confidence=0.12)
        )["lesson"]["id"]
        h.strong = (
            await call(client, save, content="Run the full test suite before tagging a release.", confidence=0.9)
        )["lesson"]["id"]
        for target in (h.old_outcomes[0], h.protected_lesson):
            await call(client, "memory_relate", source_id=h.anchor, target_id=target)

        clock.advance(days=35)
        for n in (1, 2, 3):
            await call(
                client,
                "memory_observe",
                content=f"Session {n} checked the staging setup.",
                type="decision",
                facts=[FACT],
                session_id=f"conv-{n}",
                end_session=True,
            )
        h.original = (
            await call(
                client, "memory_save", content="The staging server runs PostgreSQL 16 behind pgbouncer on port 6432."
            )
        )["id"]
        document = (await call(client, "memory_export"))["document"]
        row = next(r for r in document["tables"]["memories"] if r["id"] == h.original)
        duplicate = row | {
            "id": DUPLICATE_ID,
            "root_id": DUPLICATE_ID,
            "content": "The staging server runs PostgreSQL 16 behind pgbouncer, on port 6432.",
            "created_at": "2026-02-09T09:01:00Z",
            "updated_at": "2026-02-09T09:01:00Z",
        }
        imported = await call(client, "memory_import", document=document | {"tables": {"memories": [duplicate]}})
        assert imported["inserted"] == {"memories": 1}

        await outcomes(client, "migration", "apply migrations one table at a time", 3, 2)
        await outcomes(client, "testing", "run the slow suite in parallel shards", 3, 2)
        weak, protected = await heuristic_of(client, "migration"), await heuristic_of(client, "testing")
        assert (weak["confidence"], protected["confidence"]) == (0.6, 0.6)
        h.weak_heuristic, h.protected_heuristic = weak["id"], protected["id"]
        await call(client, "memory_relate", source_id=h.anchor, target_id=h.protected_heuristic)

        for n in range(12):
            kind = "tool_use" if n in (2, 5) else "note"
            h.big.append(await observe(client, f"Step {n} of the big import", kind, "big-import"))
        h.low_value = [h.big[2], h.big[5]]
        if protect_observation:
            h.protected_observation = h.big[2]
            await call(client, "memory_relate", source_id=h.anchor, target_id=h.protected_observation)
        await call(client, "memory_slot_create", name="pending_items", content="Ship the importer.", pinned=True)
        await call(client, "memory_action_create", title="Write the release notes")
    clock.advance(minutes=5)
    return h


def lowered(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"observation_cap": 10, "outcome_retention_days": 30, "heuristic_min_success": 0.6}
    )


def expected_changes(h: History) -> list[tuple[str, str, str]]:
    return [
        ("memory", "merged", h.original),
        ("memory", "promoted", "<new>"),
        ("session", "crystallized", "conv-1"),
        ("session", "crystallized", "conv-2"),
        ("session", "crystallized", "conv-3"),
        ("lesson", "decayed", h.old_heuristic),
        ("lesson", "faded", h.fading),
        ("lesson", "decayed", h.protected_lesson),
        ("lesson", "decayed", h.strong),
        ("observation", "folded", h.low_value[0]),
        ("observation", "folded", h.low_value[1]),
        ("outcome", "pruned", h.old_outcomes[1]),
        ("outcome", "pruned", h.old_outcomes[2]),
        ("lesson", "dropped", h.weak_heuristic),
    ]


def changes_of(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(kind, action, id), sorted; a promoted memory's id is minted by the pass itself, so it reads <new>."""
    return sorted(
        (c["kind"], c["action"], "<new>" if c["action"] == "promoted" else c["id"]) for c in report["changes"]
    )


async def export_all(client: Client) -> dict[str, Any]:
    return (await call(client, "memory_export", all_projects=True))["document"]


async def test_consolidate_reports_exactly_the_changes_it_makes(settings: Settings, clock: FakeClock) -> None:
    h = await build_history(settings, clock)
    async with Client(build_server(lowered(settings), clock)) as client:
        before = await export_all(client)

        report = await call(client, "memory_consolidate")

        after = await export_all(client)
        assert report["dry_run"] is False
        assert changes_of(report) == sorted(expected_changes(h))
        assert report["counts"] == {
            "merged": 1, "promoted": 1, "crystallized": 3, "decayed": 3, "faded": 1, "folded": 2, "pruned": 2,
            "dropped": 1,
        }  # fmt: skip
        details = {(c["action"], c["id"]): c["detail"] for c in report["changes"]}
        assert details["merged", h.original] == f"now a version of {DUPLICATE_ID}"
        assert details["decayed", h.old_heuristic] == "1.000 -> 0.774"
        assert details["decayed", h.protected_lesson] == "0.120 -> 0.093"
        assert details["dropped", h.weak_heuristic] == "confidence 0.60"

        # merged: one chain, the newer memory latest
        chain = await call(client, "memory_get", id=h.original)
        assert chain["latest_id"] == DUPLICATE_ID
        assert [(v["id"], v["version"], v["is_latest"]) for v in chain["versions"]] == [
            (h.original, 1, False),
            (DUPLICATE_ID, 2, True),
        ]
        # promoted: the recurring fact is now a memory
        [promoted] = [c for c in report["changes"] if c["action"] == "promoted"]
        assert (await call(client, "memory_get", id=promoted["id"]))["memory"]["content"] == FACT
        assert promoted["detail"] == f"seen in 3 sessions: {FACT}"
        # crystallized
        for n in (1, 2, 3):
            assert f"Decisions: - Session {n} checked the" in (await summary_in_sessions(client, f"conv-{n}") or "")
        # lessons: the faded one is soft-deleted (kept, hidden); the protected one decayed but was not deleted
        rows = {r["id"]: r for r in after["tables"]["lessons"]}
        assert rows[h.fading]["deleted_at"] == "2026-02-09T09:05:00.000000Z"
        assert rows[h.protected_lesson]["deleted_at"] is None
        assert rows[h.protected_lesson]["confidence"] == pytest.approx(0.12 * 0.95 ** (5 + 5 / WEEK_MINUTES))
        assert rows[h.weak_heuristic]["deleted_at"] == "2026-02-09T09:05:00.000000Z"
        assert rows[h.protected_heuristic]["deleted_at"] is None
        faded = await call(client, "memory_lessons", status="faded", scope="project", kinds=["lesson", "heuristic"])
        assert h.fading in {x["id"] for x in faded["lessons"]}
        # folded: the two tool_use observations went into the session digest
        kept = await call(client, "memory_observations", session_id="big-import", limit=100)
        assert {o["id"] for o in kept["observations"]} == set(h.big) - set(h.low_value)
        session = next(s for s in (await call(client, "memory_sessions"))["sessions"] if s["id"] == "big-import")
        assert (session["observation_count"], session["folded_count"]) == (10, 2)
        # pruned: the old outcomes went, except the one a relation points at
        assert {o["id"] for o in after["tables"]["outcomes"]} & set(h.old_outcomes) == {h.old_outcomes[0]}
        # never touched: relations, the pinned slot and the open action
        for table in ("relations", "slots", "actions"):
            assert after["tables"][table] == before["tables"][table], table
        assert (await call(client, "memory_diagnose"))["index_in_sync"] is True


async def test_a_dry_run_changes_nothing_and_reports_what_the_real_run_then_does(
    settings: Settings, clock: FakeClock
) -> None:
    h = await build_history(settings, clock)
    async with Client(build_server(lowered(settings), clock)) as client:
        before = await export_all(client)

        dry = await call(client, "memory_consolidate", dry_run=True)
        unchanged = await export_all(client)
        health = await call(client, "memory_diagnose")
        real = await call(client, "memory_consolidate")
        again = await call(client, "memory_consolidate")

    assert unchanged == before
    assert health["index_in_sync"] is True
    assert dry["dry_run"] is True
    # Same (kind, action) multiset; and every id the same, except the promoted memory's, which each pass
    # mints afresh (the dry run's was never stored).
    assert Counter((c["kind"], c["action"]) for c in dry["changes"]) == Counter(
        (c["kind"], c["action"]) for c in real["changes"]
    )
    assert changes_of(dry) == changes_of(real) == sorted(expected_changes(h))
    assert dry["counts"] == real["counts"]
    assert (again["changes"], again["counts"]) == ([], {})


async def test_consolidate_reports_progress_up_to_the_total(settings: Settings, clock: FakeClock) -> None:
    await build_history(settings, clock)
    received: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        received.append((progress, total, message))

    async with Client(build_server(lowered(settings), clock)) as client:
        result = await client.call_tool("memory_consolidate", {}, progress_callback=on_progress)

    assert not result.is_error
    assert [(p, t) for p, t, _ in received] == [(n, 11) for n in range(12)]
    assert [m for _, _, m in received] == [
        "finding near-duplicate memories",
        "finding recurring facts",
        "relinking broken version chains",
        "merging near-duplicate memories",
        "promoting recurring facts",
        "folding sessions over the cap",
        "crystallizing ended sessions",
        "persisting lesson decay",
        "pruning old outcomes",
        "dropping weak heuristics",
        "deleting words no record uses",
        "done",
    ]


async def test_a_cancelled_consolidation_leaves_nothing_behind(settings: Settings, clock: FakeClock) -> None:
    await build_history(settings, clock)
    received: list[float] = []
    async with Client(build_server(lowered(settings), clock)) as client:
        before = await export_all(client)
        with anyio.CancelScope() as scope:

            async def cancel_after_three_steps(progress: float, total: float | None, message: str | None) -> None:
                received.append(progress)
                if progress == 6:  # merged, promoted and crystallized are written, not committed
                    scope.cancel()

            await client.call_tool("memory_consolidate", {}, progress_callback=cancel_after_three_steps)

        after = await export_all(client)
        health = await call(client, "memory_diagnose")
        report = await call(client, "memory_consolidate", dry_run=True)

    assert scope.cancelled_caught
    assert received == [0, 1, 2, 3, 4, 5, 6]
    assert after == before
    assert health["index_in_sync"] is True
    assert report["counts"]["merged"] == 1  # the server still answers, and the work is still to do


async def test_consolidate_never_folds_an_observation_a_relation_points_to(
    settings: Settings, clock: FakeClock
) -> None:
    h = await build_history(settings, clock, protect_observation=True)
    async with Client(build_server(lowered(settings), clock)) as client:
        report = await call(client, "memory_consolidate")
        related = await call(client, "memory_related", id=h.anchor)
        kept = await call(client, "memory_observations", session_id="big-import", limit=100)

    folded = {c["id"] for c in report["changes"] if c["action"] == "folded"}
    assert h.protected_observation not in folded
    assert h.protected_observation in {o["id"] for o in kept["observations"]}
    assert h.protected_observation in {n["id"] for n in related["nodes"]}


async def test_consolidate_reports_each_relation_it_deletes_with_a_record_it_folds_or_prunes(
    settings: Settings, clock: FakeClock
) -> None:
    """A relation from a folded observation or a pruned outcome goes with it, and the report lists it
    (a dry run too), naming its ends; relations between records that stay are left alone."""
    h = await build_history(settings, clock)
    async with Client(build_server(settings, clock)) as client:
        from_folded = (await call(client, "memory_relate", source_id=h.low_value[0], target_id=h.anchor))["relation"]
        from_pruned = (await call(client, "memory_relate", source_id=h.old_outcomes[1], target_id=h.strong))["relation"]
        kept = (await call(client, "memory_relate", source_id=h.big[0], target_id=h.strong))["relation"]
    async with Client(build_server(lowered(settings), clock)) as client:
        dry = await call(client, "memory_consolidate", dry_run=True)
        real = await call(client, "memory_consolidate")
        after = await export_all(client)

    deleted = sorted([("relation", "deleted", from_folded["id"]), ("relation", "deleted", from_pruned["id"])])
    assert changes_of(dry) == changes_of(real) == sorted(expected_changes(h) + deleted)
    assert real["counts"]["deleted"] == 2
    details = {c["id"]: c["detail"] for c in real["changes"] if c["kind"] == "relation"}
    assert details == {
        from_folded["id"]: f"{h.low_value[0]} -> {h.anchor}",
        from_pruned["id"]: f"{h.old_outcomes[1]} -> {h.strong}",
    }
    assert {r["id"] for r in after["tables"]["relations"]} & {from_folded["id"], from_pruned["id"], kept["id"]} == {
        kept["id"]
    }


async def test_a_merge_reaches_a_copy_made_before_it_through_import(settings: Settings, clock: FakeClock) -> None:
    h = await build_history(settings, clock)
    copy = settings.model_copy(update={"db": settings.db.with_name("copy.db")})
    async with Client(build_server(lowered(settings), clock)) as client, Client(build_server(copy, clock)) as replica:
        await call(replica, "memory_import", document=await export_all(client))
        await call(client, "memory_consolidate")
        merged = await export_all(client)
        await call(replica, "memory_import", document=merged)
        replicated = await export_all(replica)

    # every row the merge moved carries a newer update time, so the import replaced the stale copies
    assert replicated["tables"]["memories"] == merged["tables"]["memories"]
    roots = {m["id"]: m["root_id"] for m in merged["tables"]["memories"]}
    assert roots[DUPLICATE_ID] == roots[h.original]


async def test_a_cancelled_legacy_consolidation_is_all_or_nothing(settings: Settings, clock: FakeClock) -> None:
    # Over JSON-RPC the cancellation is a notification racing the pass, so it may land after the commit;
    # whichever wins, the store holds either none of the pass or all of it.
    await build_history(settings, clock)
    async with Client(build_server(lowered(settings), clock), mode="legacy") as client:
        before = await export_all(client)
        with anyio.CancelScope() as scope:

            async def cancel_at_once(progress: float, total: float | None, message: str | None) -> None:
                scope.cancel()

            await client.call_tool("memory_consolidate", {}, progress_callback=cancel_at_once)
        await anyio.sleep(0.2)  # let a pass that outran the cancellation commit
        after = await export_all(client)
        remaining = await call(client, "memory_consolidate", dry_run=True)

    assert scope.cancelled_caught
    if after == before:
        assert remaining["counts"]["merged"] == 1
    else:
        assert remaining["changes"] == []
