"""Episodic tools through the real server: observe, recall, sessions, observations, timeline."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.ids import scoped_session_id
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error

CORPUS = [
    ("decision", "We switched SQLite to WAL journal mode so that readers never block the single writer."),
    ("error", "pytest crashed with ImportError: cannot import name 'Stemmer' after upgrading PyStemmer."),
    ("fix", "Pinned PyStemmer below version 4 in pyproject.toml, which fixed the Stemmer import error."),
    ("note", "The release checklist lives in docs/RELEASING.md and needs a changelog entry."),
    ("tool_use", "Ran ruff format over the whole repository; 12 files were reformatted."),
    ("conversation", "The user prefers short answers with code samples instead of long explanations."),
]


async def sessions_by_id(client: Client) -> dict[str, dict[str, Any]]:
    listed = await call(client, "memory_sessions", status="all", limit=100)
    return {s["id"]: s for s in listed["sessions"]}


async def observe_corpus(client: Client, clock: FakeClock, **extra: Any) -> list[str]:
    ids = []
    for kind, content in CORPUS:
        ids.append((await call(client, "memory_observe", content=content, type=kind, **extra))["id"])
        clock.advance(minutes=1)
    return ids


# -- sessions ------------------------------------------------------------------------------------


async def test_observing_reuses_the_session_until_it_has_been_idle_too_long(client: Client, clock: FakeClock) -> None:
    first = await call(client, "memory_observe", content="Started on the export feature.")
    clock.advance(minutes=119)
    second = await call(client, "memory_observe", content="Export writes JSON with sorted keys.")
    clock.advance(minutes=121)
    third = await call(client, "memory_observe", content="Back after lunch: import is next.")

    assert first["session_created"] is True
    assert second["session_created"] is False
    assert second["session_id"] == first["session_id"]
    assert third["session_created"] is True
    assert third["session_id"] != first["session_id"]

    sessions = await sessions_by_id(client)
    assert set(sessions) == {first["session_id"], third["session_id"]}
    old, new = sessions[first["session_id"]], sessions[third["session_id"]]
    assert old["status"] == "ended"
    assert old["observation_count"] == 2
    assert old["ended_at"] == "2026-01-05T10:59:00.000000Z"  # ended at its last activity
    assert new["status"] == "active"
    assert new["observation_count"] == 1
    assert new["ended_at"] is None


async def test_an_idle_session_is_listed_as_idle_before_the_next_observation_ends_it(
    client: Client, clock: FakeClock
) -> None:
    saved = await call(client, "memory_observe", content="Reading the migration code.")
    clock.advance(minutes=200)

    listed = await call(client, "memory_sessions", status="open")
    idle = await call(client, "memory_sessions", status="idle")
    active = await call(client, "memory_sessions", status="active")

    assert [(s["id"], s["status"]) for s in listed["sessions"]] == [(saved["session_id"], "idle")]
    assert [s["id"] for s in idle["sessions"]] == [saved["session_id"]]
    assert active["sessions"] == []


async def test_different_agents_get_their_own_sessions(client: Client) -> None:
    a = await call(client, "memory_observe", content="Agent A looks at the parser.", agent_id="agent-a")
    b = await call(client, "memory_observe", content="Agent B looks at the docs.", agent_id="agent-b")
    a2 = await call(client, "memory_observe", content="Agent A fixes the parser.", agent_id="agent-a")

    assert a["session_id"] != b["session_id"]
    assert a2["session_id"] == a["session_id"]
    sessions = await sessions_by_id(client)
    assert sessions[a["session_id"]]["agent_id"] == "agent-a"
    assert sessions[b["session_id"]]["agent_id"] == "agent-b"


async def test_a_caller_chosen_session_id_is_created_then_reused(client: Client, clock: FakeClock) -> None:
    first = await call(client, "memory_observe", content="User asked about backups.", session_id="conv-42")
    clock.advance(minutes=500)  # longer than the idle window: a named session is still the same one
    second = await call(client, "memory_observe", content="Explained memory_export.", session_id="conv-42")

    assert (first["session_id"], first["session_created"]) == ("conv-42", True)
    assert (second["session_id"], second["session_created"]) == ("conv-42", False)
    sessions = await sessions_by_id(client)
    assert list(sessions) == ["conv-42"]
    assert sessions["conv-42"]["observation_count"] == 2
    assert sessions["conv-42"]["title"] == "User asked about backups."


async def test_an_observation_without_session_id_never_joins_a_caller_named_session(client: Client) -> None:
    named = await call(client, "memory_observe", content="Chat about caching.", session_id="conv-42")
    implicit = await call(client, "memory_observe", content="A note with no session given.")
    again = await call(client, "memory_observe", content="Another note with no session given.")

    # A caller-named session is that caller's conversation; implicit observations get a server session.
    assert named["session_id"] == "conv-42"
    assert implicit["session_id"].startswith("ses_")
    assert implicit["session_created"] is True
    assert again["session_id"] == implicit["session_id"]


async def test_two_projects_may_name_their_sessions_alike_and_each_sees_only_its_own(
    client: Client,
) -> None:
    ops = await call(client, "memory_observe", content="Ops rotated the TLS keys.", session_id="conv-7", project="ops")
    dev = await call(client, "memory_observe", content="Dev fixed the flaky login test.", session_id="conv-7")
    again = await call(client, "memory_observe", content="Dev reran the suite.", type="error", session_id="conv-7")
    assert (ops["session_id"], dev["session_id"], again["session_id"]) == ("conv-7",) * 3
    assert [ops["session_created"], dev["session_created"], again["session_created"]] == [True, True, False]
    await call(client, "memory_save", content="Dev's login test needs a fixed clock.", session_id="conv-7")
    await call(client, "memory_outcome_record", task="Fix the login test", success=True, session_id="conv-7")

    seen = {
        "sessions": await call(client, "memory_sessions"),
        "observations": await call(client, "memory_observations", session_id="conv-7", full=True),
        "timeline": await call(client, "memory_timeline", session_id="conv-7"),
        "recall": await call(client, "memory_recall", query="tls keys login test", session_id="conv-7"),
        "search": await call(client, "memory_smart_search", query="login test", ids=["conv-7"]),
        "crystallize": await call(client, "memory_crystallize", session_id="conv-7", force=True),
        "reflect": await call(client, "memory_reflect", session_id="conv-7"),
        "relate": await call(client, "memory_relate", source_id="conv-7", target_id=dev["id"]),
        "related": await call(client, "memory_related", id="conv-7"),
        "context": await call(client, "memory_context"),
        "forget": await call(client, "memory_forget", session_id="conv-7", dry_run=True),
    }
    text = json.dumps(seen)
    assert "TLS" not in text  # nothing of ops' session
    assert scoped_session_id("conv-7", "test") not in text  # the name shows as the caller gave it
    assert [s["id"] for s in seen["sessions"]["sessions"]] == ["conv-7"]
    assert {o["id"] for o in seen["observations"]["observations"]} == {dev["id"], again["id"]}
    assert {h["id"] for h in seen["recall"]["hits"]} <= {dev["id"], again["id"], "conv-7"}
    assert ([s["id"] for s in seen["search"]["sessions"]], seen["search"]["missing"]) == (["conv-7"], [])
    assert seen["crystallize"]["sessions"][0]["session_id"] == "conv-7"
    assert seen["related"]["start"] == "conv-7"
    assert [n["id"] for n in seen["related"]["nodes"]] == [dev["id"]]
    assert set(seen["forget"]["deleted"]["observation"]) == {dev["id"], again["id"]}
    assert seen["forget"]["deleted"]["session"] == ["conv-7"]
    theirs = await call(client, "memory_observations", session_id="conv-7", project="ops", full=True)
    assert [o["id"] for o in theirs["observations"]] == [ops["id"]]

    await call(client, "memory_forget", session_id="conv-7")  # dev's session only
    assert (await call(client, "memory_sessions"))["total"] == 0
    assert (await call(client, "memory_sessions", project="ops"))["sessions"][0]["observation_count"] == 1


async def test_end_session_closes_the_session_and_the_next_observation_starts_another(
    client: Client, clock: FakeClock
) -> None:
    first = await call(client, "memory_observe", content="Wrapped up the refactor.")
    clock.advance(minutes=5)
    last = await call(client, "memory_observe", content="All tests pass; ending here.", end_session=True)
    clock.advance(minutes=1)
    after = await call(client, "memory_observe", content="New task: write the README.")

    assert last["session_ended"] is True
    assert last["session_id"] == first["session_id"]
    assert after["session_created"] is True
    assert after["session_id"] != first["session_id"]
    ended = (await call(client, "memory_sessions", status="ended"))["sessions"]
    assert [(s["id"], s["ended_at"]) for s in ended] == [(first["session_id"], "2026-01-05T09:05:00.000000Z")]


async def test_observing_into_an_ended_named_session_reopens_it(client: Client, clock: FakeClock) -> None:
    await call(client, "memory_observe", content="First part of the chat.", session_id="conv-9", end_session=True)
    clock.advance(minutes=30)
    again = await call(client, "memory_observe", content="The user came back to the chat.", session_id="conv-9")

    assert again["session_id"] == "conv-9"
    session = (await sessions_by_id(client))["conv-9"]
    assert session["observation_count"] == 2
    assert session["status"] == "active"
    assert session["ended_at"] is None


async def test_sessions_are_paged_most_recently_active_first(client: Client, clock: FakeClock) -> None:
    for name in ("conv-a", "conv-b", "conv-c"):
        await call(client, "memory_observe", content=f"Work in {name}.", session_id=name)
        clock.advance(minutes=1)
    await call(client, "memory_observe", content="Back to the first one.", session_id="conv-a")

    first = await call(client, "memory_sessions", limit=2)
    rest = await call(client, "memory_sessions", limit=2, offset=first["next_offset"])

    assert [s["id"] for s in first["sessions"]] == ["conv-a", "conv-c"]
    assert first["total"] == 3
    assert first["next_offset"] == 2
    assert [s["id"] for s in rest["sessions"]] == ["conv-b"]
    assert rest["next_offset"] is None


async def test_sessions_and_observations_survive_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        saved = await call(first, "memory_observe", content="The cache key includes the project name.")
    clock.advance(minutes=10)
    async with Client(build_server(settings, clock)) as second:
        again = await call(second, "memory_observe", content="Cache invalidation happens on every save.")
        hits = await call(second, "memory_recall", query="cache key project")

    assert again["session_id"] == saved["session_id"]
    assert again["session_created"] is False
    assert hits["hits"][0]["id"] == saved["id"]


async def test_concurrent_observations_share_one_session_without_losing_any(client: Client) -> None:
    results: list[dict[str, Any]] = []

    async def observe(n: int) -> None:
        results.append(await call(client, "memory_observe", content=f"Parallel step number {n} finished."))

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(observe, n)

    assert len({r["session_id"] for r in results}) == 1
    assert len({r["id"] for r in results}) == 8
    listed = await call(client, "memory_observations", limit=100)
    assert listed["total"] == 8
    assert (await sessions_by_id(client))[results[0]["session_id"]]["observation_count"] == 8


# -- compression and importance ---------------------------------------------------------------------


async def test_title_facts_concepts_and_files_are_extracted_when_omitted(client: Client) -> None:
    saved = await call(
        client,
        "memory_observe",
        content=(
            "We switched the SQLite journal to WAL mode in mcp_memory/db.py. "
            "Readers must never block the writer, because the index rebuild reads while observeTool writes. "
            "The busy timeout is now 10000 ms. Unrelated chatter here."
        ),
        type="decision",
    )

    assert saved["title"] == "We switched the SQLite journal to WAL mode in mcp_memory/db.py."
    assert saved["facts"] == [
        "Readers must never block the writer, because the index rebuild reads while observeTool writes.",
        "The busy timeout is now 10000 ms.",
    ]
    assert saved["files"] == ["mcp_memory/db.py"]
    assert saved["concepts"] == ["sqlite", "observetool"]  # a product name in acronym case is one too


@pytest.mark.parametrize("title", ["", "   ", "\u200b\u2060", "\ufeff \u200d"])
async def test_a_title_that_shows_nothing_is_no_title(client: Client, title: str) -> None:
    observed = await call(client, "memory_observe", content="Switched the journal to WAL. More text.", title=title)
    saved = await call(client, "memory_save", content="The journal is in WAL mode.", title=title)
    memory = (await call(client, "memory_get", id=saved["id"]))["memory"]

    assert observed["title"] == "Switched the journal to WAL."  # one is made, as when none is given
    assert memory["title"] is None


async def test_caller_given_title_facts_concepts_and_files_are_kept(client: Client) -> None:
    saved = await call(
        client,
        "memory_observe",
        content="Long tool output that mentions src/other.py and someIdentifier many times.",
        title="Switched to WAL",
        facts=["Readers no longer block", "busy_timeout is 10 s"],
        concepts=["SQLite", "concurrency"],
        files=["mcp_memory/db.py"],
    )
    listed = await call(client, "memory_observations", full=True)

    assert saved["title"] == "Switched to WAL"
    assert saved["facts"] == ["Readers no longer block", "busy_timeout is 10 s"]
    assert saved["concepts"] == ["sqlite", "concurrency"]  # tags are case-folded
    assert saved["files"] == ["mcp_memory/db.py"]
    stored = listed["observations"][0]
    assert (stored["title"], stored["facts"], stored["concepts"], stored["files"]) == (
        saved["title"],
        saved["facts"],
        saved["concepts"],
        saved["files"],
    )


async def test_caller_given_fields_are_kept_whole_up_to_the_schema_limits(client: Client) -> None:
    title = "Migration plan " + "step " * 52  # 279 characters, under the 300 the schema allows
    facts = [f"Fact {i}: " + "detail " * 40 for i in range(30)]
    files = [f"src/module_{i}.py" for i in range(150)]

    saved = await call(client, "memory_observe", content="Planning notes.", title=title, facts=facts, files=files)

    assert saved["title"] == title.strip()
    assert saved["facts"] == [f.strip() for f in facts]
    assert saved["files"] == files


async def test_extraction_keeps_camel_case_names_and_abbreviations_whole(client: Client) -> None:
    saved = await call(
        client,
        "memory_observe",
        content=(
            "Talked with Dr. Smith about moving from JavaScript to TypeScript. "
            "The NullPointerException in AuthController came from PostgreSQL returning null."
        ),
    )

    assert saved["title"] == "Talked with Dr. Smith about moving from JavaScript to TypeScript."
    assert {"javascript", "typescript", "nullpointerexception", "authcontroller", "postgresql"} <= set(
        saved["concepts"]
    )
    assert not {"java", "type", "null", "auth", "postgre"} & set(saved["concepts"])


async def test_sentences_end_at_cjk_full_stops(client: Client) -> None:
    saved = await call(client, "memory_observe", content="我们决定使用 SQLite。读者永远不会阻塞写入者！")

    assert saved["title"] == "我们决定使用 SQLite。"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("decision", 0.8), ("error", 0.75), ("fix", 0.75), ("note", 0.5), ("tool_use", 0.3), ("my_own_type", 0.5)],
)
async def test_importance_defaults_by_observation_type(client: Client, kind: str, expected: float) -> None:
    saved = await call(client, "memory_observe", content="Something happened in the build.", type=kind)
    assert saved["importance"] == expected


async def test_a_caller_given_importance_wins_over_the_type_default(client: Client) -> None:
    saved = await call(client, "memory_observe", content="Ran the linter.", type="tool_use", importance=0.95)
    listed = await call(client, "memory_observations")
    assert saved["importance"] == 0.95
    assert listed["observations"][0]["importance"] == 0.95


# -- the per-session cap ----------------------------------------------------------------------------


async def test_the_session_cap_folds_the_lowest_importance_oldest_observations(
    settings: Settings, clock: FakeClock
) -> None:
    capped = settings.model_copy(update={"observation_cap": 10})
    # #0 is the oldest but important; #1-#6 are cheap tool runs; #7-#14 are notes.
    plan = [("decision", "Decision zero: keep the schema flat.")]
    plan += [("tool_use", f"Tool run {n}: listed the folder toolrun{n}.") for n in range(1, 7)]
    plan += [("note", f"Note {n}: reviewed module number {n}.") for n in range(7, 15)]
    async with Client(build_server(capped, clock)) as client:
        results = []
        for kind, content in plan:
            results.append(await call(client, "memory_observe", content=content, type=kind))
            clock.advance(minutes=1)
        listed = await call(client, "memory_observations", limit=100, order="oldest")
        session_id = results[0]["session_id"]
        session = (await sessions_by_id(client))[session_id]
        full = await call(client, "memory_smart_search", ids=[session_id])
        recalled = await call(client, "memory_recall", query="toolrun3")

    ids = [r["id"] for r in results]
    assert [r["folded"] for r in results] == [0] * 10 + [1] * 5
    assert listed["total"] == 10
    assert [o["id"] for o in listed["observations"]] == [ids[0], ids[6], *ids[7:]]
    assert session["folded_count"] == 5
    assert session["observation_count"] == 10  # kept
    assert session["recorded_count"] == 15  # every observation ever recorded, folded ones included
    digest = full["sessions"][0]["folded_digest"]
    for n in range(1, 6):
        assert f"Tool run {n}: listed the folder toolrun{n}." in digest
    assert "Tool run 6" not in digest
    assert "Decision zero" not in digest
    # the folded observations are gone from the index, but the session digest still finds them
    assert [(h["id"], h["kind"]) for h in recalled["hits"]] == [(session_id, "session")]


async def test_a_large_cap_folds_a_fiftieth_at_once(settings: Settings, clock: FakeClock) -> None:
    # Past a cap of 100, the session folds down to 98: the digest is re-indexed once per three
    # observations rather than on each, and the session never holds more than the cap.
    capped = settings.model_copy(update={"observation_cap": 100})
    async with Client(build_server(capped, clock)) as client:
        folded = []
        for n in range(107):
            result = await call(client, "memory_observe", content=f"Note {n}: checked shelf {n}.", session_id="long")
            folded.append(result["folded"])
        session = (await sessions_by_id(client))["long"]
    assert folded == [0] * 100 + [3, 0, 0, 3, 0, 0, 3]
    assert session["observation_count"] == 98
    assert session["folded_count"] == 9


# -- recall -----------------------------------------------------------------------------------------


async def test_recall_ranks_the_relevant_observation_first(client: Client, clock: FakeClock) -> None:
    ids = await observe_corpus(client, clock)

    hits = (await call(client, "memory_recall", query="why did the Stemmer import fail?"))["hits"]

    assert hits[0]["id"] in (ids[1], ids[2])
    assert {h["id"] for h in hits[:2]} == {ids[1], ids[2]}
    assert hits[0]["kind"] == "observation"
    assert hits[0]["score"] >= hits[1]["score"] > 0
    # records near a match ride along on a share of its score, well below it; the far ones stay out
    assert all(0 < h["score"] < hits[1]["score"] * 0.75 for h in hits[2:])
    assert ids[5] not in {h["id"] for h in hits}


async def test_recall_can_carry_each_hits_neighbouring_turns(client: Client, clock: FakeClock) -> None:
    await observe_corpus(client, clock)

    bare = (await call(client, "memory_recall", query="WAL journal mode", limit=1))["hits"]
    framed = (await call(client, "memory_recall", query="WAL journal mode", limit=1, neighbours=2))["hits"]
    middle = (await call(client, "memory_recall", query="release checklist changelog", limit=1, neighbours=1))["hits"]

    assert bare[0]["context"] == []
    assert framed[0]["id"] == bare[0]["id"]
    assert framed[0]["context"] == [f"+1: {CORPUS[1][1]}", f"+2: {CORPUS[2][1]}"]  # the first turn: none before
    assert middle[0]["context"] == [f"-1: {CORPUS[2][1]}", f"+1: {CORPUS[4][1]}"]
    assert "neighbours" in await call_error(client, "memory_recall", query="WAL", neighbours=4)


async def test_recall_frames_each_hit_with_its_own_sessions_turns(client: Client, clock: FakeClock) -> None:
    turns = {
        "alpha": ["Kiwi crate shipped to the depot.", "Alpha filler about lunch.", "Kiwi crate returned damaged."],
        "beta": ["Kiwi invoice sent to accounting.", "Beta filler about the weather."],
    }
    for session, contents in turns.items():
        for content in contents:
            await call(client, "memory_observe", content=content, session_id=session)
            clock.advance(minutes=1)

    hits = (await call(client, "memory_recall", query="kiwi", limit=10, neighbours=1))["hits"]

    framed = {h["snippet"]: h["context"] for h in hits}
    # the page's turns are read in one statement: each hit keeps to its own session and positions
    assert framed[turns["alpha"][0]] == [f"+1: {turns['alpha'][1]}"]
    assert framed[turns["alpha"][2]] == [f"-1: {turns['alpha'][1]}"]
    assert framed[turns["beta"][0]] == [f"+1: {turns['beta'][1]}"]
    if turns["alpha"][1] in framed:  # lent a share of its neighbours' scores
        assert framed[turns["alpha"][1]] == [f"-1: {turns['alpha'][0]}", f"+1: {turns['alpha'][2]}"]


async def test_recall_returns_compact_hits_with_the_callers_ref_and_time(client: Client) -> None:
    saved = await call(
        client,
        "memory_observe",
        content="Deploys go through the staging cluster first.",
        type="decision",
        ref="msg-1234",
        occurred_at="2025-12-01T08:30:00Z",
    )

    hit = (await call(client, "memory_recall", query="staging deploys"))["hits"][0]

    assert hit["id"] == saved["id"]
    assert hit["type"] == "decision"
    assert hit["session_id"] == saved["session_id"]
    assert hit["ref"] == "msg-1234"
    assert hit["occurred_at"] == "2025-12-01T08:30:00.000000Z"
    assert hit["title"] == "Deploys go through the staging cluster first."


async def test_recall_honours_session_id(client: Client) -> None:
    a = await call(client, "memory_observe", content="Flaky test in the login flow.", session_id="conv-a")
    b = await call(client, "memory_observe", content="Flaky test in the payment flow.", session_id="conv-b")

    everywhere = await call(client, "memory_recall", query="flaky test")
    only_b = await call(client, "memory_recall", query="flaky test", session_id="conv-b")
    unknown = await call_error(client, "memory_recall", query="flaky test", session_id="conv-zzz")

    assert {h["id"] for h in everywhere["hits"]} == {a["id"], b["id"]}
    assert [h["id"] for h in only_b["hits"]] == [b["id"]]
    assert "No session 'conv-zzz'" in unknown


async def test_recall_honours_types(client: Client, clock: FakeClock) -> None:
    ids = await observe_corpus(client, clock)

    errors = await call(client, "memory_recall", query="Stemmer import", types=["error"])
    fixes_or_errors = await call(client, "memory_recall", query="Stemmer import", types=["error", "fix"])

    assert [h["id"] for h in errors["hits"]] == [ids[1]]
    assert {h["id"] for h in fixes_or_errors["hits"]} == {ids[1], ids[2]}


async def test_recall_honours_since_and_until(client: Client) -> None:
    days = ["2025-11-01T10:00:00Z", "2025-11-05T10:00:00Z", "2025-11-09T10:00:00Z"]
    ids = [
        (await call(client, "memory_observe", content=f"Database backup ran on day {n}.", occurred_at=day))["id"]
        for n, day in enumerate(days)
    ]

    later = await call(client, "memory_recall", query="database backup", since="2025-11-03")
    earlier = await call(client, "memory_recall", query="database backup", until="2025-11-05T10:00:00Z")
    middle = await call(client, "memory_recall", query="database backup", since="2025-11-02", until="2025-11-06")

    assert {h["id"] for h in later["hits"]} == {ids[1], ids[2]}
    assert {h["id"] for h in earlier["hits"]} == {ids[0], ids[1]}  # until is inclusive
    assert [h["id"] for h in middle["hits"]] == [ids[1]]


async def test_recall_includes_memories_only_when_asked(client: Client) -> None:
    obs = await call(client, "memory_observe", content="Discussed the retention policy for audit logs.")
    mem = await call(client, "memory_save", content="Audit logs are kept for 90 days (retention policy).")

    episodic = await call(client, "memory_recall", query="audit log retention")
    everything = await call(client, "memory_recall", query="audit log retention", include_memories=True)

    assert [h["id"] for h in episodic["hits"]] == [obs["id"]]
    assert {(h["id"], h["kind"]) for h in everything["hits"]} == {(obs["id"], "observation"), (mem["id"], "memory")}


async def test_recall_limit_caps_the_number_of_hits(client: Client) -> None:
    for n in range(5):
        await call(client, "memory_observe", content=f"Migration step {n} applied to the schema.")

    hits = (await call(client, "memory_recall", query="migration schema", limit=3))["hits"]

    assert len(hits) == 3


async def test_recall_is_confined_to_the_project(client: Client) -> None:
    await call(client, "memory_observe", content="Kafka consumer lag alert fired.", project="ops")
    mine = await call(client, "memory_observe", content="Kafka topic naming convention agreed.")

    hits = await call(client, "memory_recall", query="kafka")
    ops = await call(client, "memory_recall", query="kafka", project="ops")

    assert [h["id"] for h in hits["hits"]] == [mine["id"]]
    assert hits["project"] == "test"
    assert len(ops["hits"]) == 1
    assert ops["hits"][0]["id"] != mine["id"]


# -- listing observations ---------------------------------------------------------------------------


async def test_observations_are_paged_newest_first_with_a_next_offset(client: Client, clock: FakeClock) -> None:
    ids = await observe_corpus(client, clock)  # six observations, one minute apart

    first = await call(client, "memory_observations", limit=4)
    second = await call(client, "memory_observations", limit=4, offset=first["next_offset"])

    assert first["total"] == second["total"] == 6
    assert [o["id"] for o in first["observations"]] == ids[::-1][:4]
    assert first["next_offset"] == 4
    assert [o["id"] for o in second["observations"]] == ids[::-1][4:]
    assert second["next_offset"] is None


async def test_observations_in_oldest_order(client: Client, clock: FakeClock) -> None:
    ids = await observe_corpus(client, clock)

    page = await call(client, "memory_observations", order="oldest", limit=3, offset=2)

    assert [o["id"] for o in page["observations"]] == ids[2:5]
    assert page["next_offset"] == 5


async def test_observations_show_content_only_when_full(client: Client, clock: FakeClock) -> None:
    await observe_corpus(client, clock)

    compact = await call(client, "memory_observations", limit=100, order="oldest")
    full = await call(client, "memory_observations", limit=100, order="oldest", full=True)

    assert all(o["content"] is None for o in compact["observations"])
    assert [o["content"] for o in full["observations"]] == [content for _, content in CORPUS]
    assert [o["type"] for o in full["observations"]] == [kind for kind, _ in CORPUS]


async def test_observations_filter_by_session_type_and_time(client: Client) -> None:
    a1 = await call(client, "memory_observe", content="A one", type="note", session_id="a", occurred_at="2025-01-01")
    a2 = await call(client, "memory_observe", content="A two", type="error", session_id="a", occurred_at="2025-01-03")
    b1 = await call(client, "memory_observe", content="B one", type="error", session_id="b", occurred_at="2025-01-02")

    by_session = await call(client, "memory_observations", session_id="a")
    by_type = await call(client, "memory_observations", types=["error"])
    by_time = await call(client, "memory_observations", since="2025-01-02", until="2025-01-02T23:59:59Z")

    assert [o["id"] for o in by_session["observations"]] == [a2["id"], a1["id"]]
    assert [o["id"] for o in by_type["observations"]] == [a2["id"], b1["id"]]
    assert [o["id"] for o in by_time["observations"]] == [b1["id"]]
    assert by_time["total"] == 1


# -- timeline ---------------------------------------------------------------------------------------


async def test_timeline_around_an_anchor_returns_its_neighbours_in_time_order(client: Client, clock: FakeClock) -> None:
    ids = []
    for n in range(7):
        ids.append((await call(client, "memory_observe", content=f"Step {n} of the deploy.", ref=f"line-{n}"))["id"])
        clock.advance(minutes=1)

    timeline = await call(client, "memory_timeline", anchor=ids[3], before=2, after=2)

    assert timeline["anchor_id"] == ids[3]
    assert [e["id"] for e in timeline["entries"]] == ids[1:6]
    assert [e["anchor"] for e in timeline["entries"]] == [False, False, True, False, False]
    assert [e["ref"] for e in timeline["entries"]] == [f"line-{n}" for n in range(1, 6)]
    whens = [e["when"] for e in timeline["entries"]]
    assert whens == sorted(whens)


async def test_timeline_uses_occurred_at_rather_than_recording_order(client: Client) -> None:
    late = await call(
        client, "memory_observe", content="Imported: deploy finished.", occurred_at="2025-03-01T12:00:00Z"
    )
    early = await call(
        client, "memory_observe", content="Imported: deploy started.", occurred_at="2025-03-01T11:00:00Z"
    )
    middle = await call(
        client, "memory_observe", content="Imported: migrations ran.", occurred_at="2025-03-01T11:30:00Z"
    )

    timeline = await call(client, "memory_timeline", anchor=middle["id"], before=5, after=5)

    assert [e["id"] for e in timeline["entries"]] == [early["id"], middle["id"], late["id"]]
    assert timeline["entries"][0]["when"] == "2025-03-01T11:00:00.000000Z"


async def test_timeline_at_a_moment_splits_before_and_after_it(client: Client) -> None:
    ids = [
        (await call(client, "memory_observe", content=f"Hour {h} check-in.", occurred_at=f"2025-06-01T{h:02d}:00:00Z"))[
            "id"
        ]
        for h in range(8, 15)
    ]

    timeline = await call(client, "memory_timeline", at="2025-06-01T11:30:00Z", before=2, after=2)

    assert timeline["anchor_id"] is None
    assert [e["id"] for e in timeline["entries"]] == ids[2:6]  # 10:00, 11:00 | 12:00, 13:00
    assert not any(e["anchor"] for e in timeline["entries"])


async def test_timeline_defaults_to_the_most_recent_observations(client: Client, clock: FakeClock) -> None:
    ids = await observe_corpus(client, clock)

    timeline = await call(client, "memory_timeline", before=3)

    assert [e["id"] for e in timeline["entries"]] == ids[-3:]


async def test_timeline_can_be_confined_to_one_session(client: Client, clock: FakeClock) -> None:
    mine = []
    for n in range(3):
        mine.append((await call(client, "memory_observe", content=f"Mine {n}", session_id="s-mine"))["id"])
        clock.advance(minutes=1)
        await call(client, "memory_observe", content=f"Other {n}", session_id="s-other")
        clock.advance(minutes=1)

    timeline = await call(client, "memory_timeline", anchor=mine[1], session_id="s-mine")

    assert [e["id"] for e in timeline["entries"]] == mine
    assert {e["session_id"] for e in timeline["entries"]} == {"s-mine"}


# -- privacy ----------------------------------------------------------------------------------------


async def test_private_text_and_secrets_never_reach_storage_or_the_index(client: Client) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    saved = await call(
        client,
        "memory_observe",
        content=f"Deployed with token {token}. <private>zanzibar launch codes</private> Deploy finished fine.",
        title="Deploy <private>zanzibar</private>",
        facts=[f"token was {token}"],
    )

    listed = await call(client, "memory_observations", full=True)
    stored = listed["observations"][0]
    hidden = await call(client, "memory_recall", query="zanzibar launch codes")

    assert sum(saved["redacted"].values()) >= 3
    assert token not in str(saved)
    text = " ".join([stored["content"], stored["title"], *stored["facts"]])
    assert token not in text
    assert "zanzibar" not in text
    assert "Deploy finished fine." in stored["content"]
    assert hidden["hits"] == []


@pytest.mark.parametrize("tool", ["memory_observe", "memory_save"])
@pytest.mark.parametrize(
    "content", ["<private>only secrets here</private>", "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"]
)
async def test_content_that_is_entirely_private_or_secret_is_refused(client: Client, tool: str, content: str) -> None:
    message = await call_error(client, tool, content=content)

    assert message.startswith(f"Error executing tool {tool}: content:")
    counts = (await call(client, "memory_diagnose"))["counts"]
    assert counts["observations"] == counts["memories"] == counts["sessions"] == 0
