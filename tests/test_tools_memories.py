"""Long-term memory tools through the real server: save, get, smart search, forget."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_operations import export_document

DB_FACT = "The production database runs PostgreSQL 15 on the primary host db1 in the Frankfurt region."
DB_FACT_V2 = "The production database runs PostgreSQL 16 on the primary host db1 in the Frankfurt region."
OTHER_FACT = "Team standup happens every weekday at 09:30 in the Lisbon office kitchen."


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the analysed term sets, as the spec defines supersession."""
    left, right = set(Analyzer().terms(a)), set(Analyzer().terms(b))
    return len(left & right) / len(left | right)


# -- save and get -----------------------------------------------------------------------------------


async def test_a_saved_memory_reads_back_in_full(client: Client) -> None:
    saved = await call(
        client,
        "memory_save",
        content=DB_FACT,
        kind="decision",
        title="Production database",
        concepts=["PostgreSQL", "infra", "infra"],
        files=["deploy/db.tf"],
        importance=0.9,
        ref="ticket-88",
        occurred_at="2025-10-01",
    )
    got = await call(client, "memory_get", id=saved["id"])

    assert saved["id"].startswith("mem_")
    assert (saved["version"], saved["root_id"], saved["superseded_id"], saved["unchanged"]) == (
        1,
        saved["id"],
        None,
        False,
    )
    memory = got["memory"]
    assert memory["id"] == saved["id"]
    assert memory["project"] == "test"
    assert (memory["kind"], memory["title"], memory["content"]) == ("decision", "Production database", DB_FACT)
    assert memory["concepts"] == ["infra", "postgresql"]  # case-folded, de-duplicated, sorted
    assert memory["files"] == ["deploy/db.tf"]
    assert memory["importance"] == 0.9
    assert memory["ref"] == "ticket-88"
    assert memory["occurred_at"] == "2025-10-01T00:00:00.000000Z"
    assert memory["created_at"] == "2026-01-05T09:00:00.000000Z"
    assert memory["is_latest"] is True
    assert got["latest_id"] == saved["id"]
    assert [(v["id"], v["ref"], v["occurred_at"]) for v in got["versions"]] == [
        (saved["id"], "ticket-88", "2025-10-01T00:00:00.000000Z")
    ]


async def test_saving_a_near_duplicate_supersedes_it(client: Client, clock: FakeClock) -> None:
    assert jaccard(DB_FACT, DB_FACT_V2) > 0.7
    old = await call(client, "memory_save", content=DB_FACT)
    clock.advance(minutes=5)
    new = await call(client, "memory_save", content=DB_FACT_V2)

    assert new["id"] != old["id"]
    assert new["version"] == 2
    assert new["superseded_id"] == old["id"]
    assert new["root_id"] == old["id"]
    assert new["similarity"] == round(jaccard(DB_FACT, DB_FACT_V2), 4)

    via_old = await call(client, "memory_get", id=old["id"])
    via_new = await call(client, "memory_get", id=new["id"])
    assert via_old["memory"]["is_latest"] is False
    assert via_old["memory"]["superseded_by"] == new["id"]
    assert via_new["memory"]["is_latest"] is True
    assert via_new["memory"]["parent_id"] == old["id"]
    for detail in (via_old, via_new):
        assert detail["latest_id"] == new["id"]
        assert [(v["id"], v["version"], v["is_latest"]) for v in detail["versions"]] == [
            (old["id"], 1, False),
            (new["id"], 2, True),
        ]
        assert [v["content"] for v in detail["versions"]] == [DB_FACT, DB_FACT_V2]


@pytest.mark.parametrize(
    ("second", "supersedes"),
    [
        # 8 shared of 10 distinct terms: 0.8
        ("alpha bravo charlie delta echo foxtrot golf hotel india", True),
        # 7 shared of 10 distinct terms: exactly 0.7, which is not "more than 0.7"
        ("alpha bravo charlie delta echo foxtrot golf india juliet", False),
        (OTHER_FACT, False),
    ],
)
async def test_supersession_needs_a_jaccard_similarity_above_seven_tenths(
    client: Client, second: str, supersedes: bool
) -> None:
    first_text = "alpha bravo charlie delta echo foxtrot golf hotel"
    first = await call(client, "memory_save", content=first_text)
    saved = await call(client, "memory_save", content=second)

    assert (jaccard(first_text, second) > 0.7) is supersedes
    assert (saved["superseded_id"] == first["id"]) is supersedes
    assert saved["version"] == (2 if supersedes else 1)
    assert (await call(client, "memory_get", id=first["id"]))["memory"]["is_latest"] is (not supersedes)


@pytest.mark.parametrize(
    ("second", "similarity"),
    [
        ("alpha bravo charlie delta echo foxtrot golf india juliet", 0.7),  # 7 of 10
        ("alpha bravo charlie delta echo foxtrot kilo lima mike november", 0.5),  # 6 of 12
        ("alpha bravo charlie delta echo kilo lima mike november", None),  # 5 of 12: unrelated enough
    ],
)
async def test_a_save_that_resembles_a_live_memory_without_replacing_it_names_it(
    client: Client, second: str, similarity: float | None
) -> None:
    first = await call(client, "memory_save", content="alpha bravo charlie delta echo foxtrot golf hotel")
    saved = await call(client, "memory_save", content=second)

    assert saved["superseded_id"] is None
    expected = None if similarity is None else {"id": first["id"], "title": None, "similarity": similarity}
    assert saved["resembles"] == expected
    replaced = await call(client, "memory_save", content=second + " oscar", supersedes=first["id"])
    assert replaced["resembles"] is None  # a named predecessor needs no hint


async def test_a_near_duplicate_in_another_project_does_not_supersede(client: Client) -> None:
    theirs = await call(client, "memory_save", content=DB_FACT, project="elsewhere")
    mine = await call(client, "memory_save", content=DB_FACT_V2)

    assert mine["version"] == 1
    assert mine["superseded_id"] is None
    assert (await call(client, "memory_get", id=theirs["id"], project="elsewhere"))["memory"]["is_latest"] is True


async def test_supersession_finds_memories_saved_before_a_restart(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as first:
        old = await call(first, "memory_save", content=DB_FACT)
    async with Client(build_server(settings, clock)) as second:
        new = await call(second, "memory_save", content=DB_FACT_V2)
        chain = await call(second, "memory_get", id=old["id"])

    assert new["superseded_id"] == old["id"]
    assert [v["id"] for v in chain["versions"]] == [old["id"], new["id"]]


async def test_explicit_supersedes_replaces_a_dissimilar_memory(client: Client) -> None:
    old = await call(client, "memory_save", content="Deploys happen on Tuesdays.", kind="convention")
    new = await call(client, "memory_save", content="We ship continuously now, any day.", supersedes=old["id"])

    assert new["superseded_id"] == old["id"]
    assert new["version"] == 2
    assert new["root_id"] == old["id"]
    assert new["kind"] == "convention"  # a new version keeps its chain's kind unless told another
    detail = await call(client, "memory_get", id=old["id"])
    assert detail["latest_id"] == new["id"]


async def test_superseding_an_old_version_is_refused_naming_the_newer_one(client: Client) -> None:
    v1 = await call(client, "memory_save", content="Deploys happen on Tuesdays.")
    v2 = await call(client, "memory_save", content="Deploys happen on Thursdays.", supersedes=v1["id"])

    message = await call_error(client, "memory_save", content="Deploys happen daily.", supersedes=v1["id"])

    assert "supersedes" in message
    assert v2["id"] in message
    detail = await call(client, "memory_get", id=v1["id"])
    assert [v["id"] for v in detail["versions"]] == [v1["id"], v2["id"]]


async def test_superseding_an_old_version_of_a_long_chain_names_the_latest(client: Client) -> None:
    v1 = await call(client, "memory_save", content="Deploys happen on Tuesdays.")
    v2 = await call(client, "memory_save", content="Deploys happen on Thursdays.", supersedes=v1["id"])
    v3 = await call(client, "memory_save", content="Deploys happen on Fridays.", supersedes=v2["id"])

    message = await call_error(client, "memory_save", content="Deploys happen daily.", supersedes=v1["id"])

    assert v3["id"] in message


async def test_saving_an_identical_memory_again_changes_nothing(client: Client, clock: FakeClock) -> None:
    first = await call(client, "memory_save", content=DB_FACT, kind="fact", title="DB")
    clock.advance(minutes=1)
    again = await call(client, "memory_save", content=DB_FACT, kind="fact")

    assert again["unchanged"] is True
    assert again["id"] == first["id"]
    assert again["version"] == 1
    detail = await call(client, "memory_get", id=first["id"])
    assert [v["id"] for v in detail["versions"]] == [first["id"]]
    assert detail["memory"]["updated_at"] == "2026-01-05T09:00:00.000000Z"
    assert (await call(client, "memory_diagnose"))["counts"]["memories"] == 1


async def test_resaving_identical_content_with_new_metadata_makes_a_version_that_inherits_the_rest(
    client: Client,
) -> None:
    first = await call(client, "memory_save", content=DB_FACT, importance=0.3, concepts=["sqlite"], title="DB")
    same = await call(client, "memory_save", content=DB_FACT, importance=0.3)
    again = await call(client, "memory_save", content=DB_FACT, importance=0.9, ref="new-ref")

    assert same["unchanged"] is True
    assert same["id"] == first["id"]
    assert (again["unchanged"], again["version"], again["superseded_id"]) == (False, 2, first["id"])
    memory = (await call(client, "memory_get", id=again["id"]))["memory"]
    assert (memory["importance"], memory["ref"], memory["title"], memory["concepts"]) == (
        0.9,
        "new-ref",
        "DB",
        ["sqlite"],
    )


async def test_short_content_saved_again_is_the_same_memory_though_first_saved_with_metadata(client: Client) -> None:
    # "use" "tab" against "use" "tab" "style": a Jaccard of 2/3, yet plainly the same memory
    first = await call(client, "memory_save", content="Use tabs", concepts=["style"])
    same = await call(client, "memory_save", content="Use tabs")
    retitled = await call(client, "memory_save", content="use  TABS", title="Tabs")

    assert (same["unchanged"], same["id"]) == (True, first["id"])
    assert (retitled["version"], retitled["superseded_id"], retitled["resembles"]) == (2, first["id"], None)
    memory = (await call(client, "memory_get", id=retitled["id"]))["memory"]
    assert (memory["content"], memory["title"], memory["concepts"]) == ("use  TABS", "Tabs", ["style"])
    assert (await call(client, "memory_diagnose"))["counts"]["memories"] == 2  # both versions, one live


async def test_content_saved_again_is_the_same_memory_however_long_its_first_title(client: Client) -> None:
    # "use" "tab" against the eight words of title and content: too little alike by term sets, the
    # same memory all the same
    first = await call(
        client, "memory_save", content="Use tabs", title="Indentation style for every file of the monorepo"
    )
    same = await call(client, "memory_save", content="Use tabs")
    other_kind = await call(client, "memory_save", content="Use tabs", kind="preference")

    assert (same["unchanged"], same["id"]) == (True, first["id"])
    assert (other_kind["version"], other_kind["superseded_id"]) == (2, first["id"])
    assert other_kind["similarity"] == 1.0  # stored over the first, it takes its title: the same words
    memory = (await call(client, "memory_get", id=other_kind["id"]))["memory"]
    assert memory["title"] == "Indentation style for every file of the monorepo"
    found = await call(client, "memory_smart_search", query="tabs", kinds=["memory"])
    assert [hit["id"] for hit in found["hits"]] == [other_kind["id"]]  # one live memory


async def test_saving_the_same_content_as_another_kind_makes_a_new_version(client: Client) -> None:
    first = await call(client, "memory_save", content=DB_FACT, kind="fact")
    again = await call(client, "memory_save", content=DB_FACT, kind="decision")

    assert again["unchanged"] is False
    assert (again["version"], again["superseded_id"], again["kind"]) == (2, first["id"], "decision")
    assert again["similarity"] == 1.0


async def test_a_memory_can_name_the_session_it_was_learned_in(client: Client) -> None:
    obs = await call(client, "memory_observe", content="Learned about the proxy.", session_id="conv-1")
    saved = await call(client, "memory_save", content="The corporate proxy blocks port 8080.", session_id="conv-1")

    memory = (await call(client, "memory_get", id=saved["id"]))["memory"]

    assert memory["session_id"] == obs["session_id"] == "conv-1"


# -- smart search -----------------------------------------------------------------------------------


async def test_smart_search_returns_compact_hits_across_kinds(client: Client) -> None:
    obs = await call(client, "memory_observe", content="Redis eviction policy caused cache misses under load.")
    mem = await call(client, "memory_save", content="Use allkeys-lru as the Redis eviction policy.", kind="decision")
    await call(client, "memory_save", content=OTHER_FACT)

    found = await call(client, "memory_smart_search", query="redis eviction policy")

    assert {(h["id"], h["kind"]) for h in found["hits"]} == {(obs["id"], "observation"), (mem["id"], "memory")}
    by_id = {h["id"]: h for h in found["hits"]}
    assert by_id[mem["id"]]["type"] == "decision"
    assert by_id[mem["id"]]["snippet"] == "Use allkeys-lru as the Redis eviction policy."
    assert by_id[obs["id"]]["type"] == "note"
    assert found["observations"] == found["memories"] == found["sessions"] == []  # nothing in full yet


async def test_smart_search_kinds_restricts_the_hits(client: Client) -> None:
    await call(client, "memory_observe", content="Redis eviction policy caused cache misses.")
    mem = await call(client, "memory_save", content="Use allkeys-lru as the Redis eviction policy.")

    found = await call(client, "memory_smart_search", query="redis eviction", kinds=["memory"])

    assert [h["id"] for h in found["hits"]] == [mem["id"]]


async def test_smart_search_fetches_full_records_and_lists_missing_ids(client: Client) -> None:
    obs = await call(client, "memory_observe", content="Full observation content here.", session_id="conv-5")
    mem = await call(client, "memory_save", content="Full memory content here.")
    ids = ["mem_doesnotexist00000000", obs["id"], mem["id"], "conv-5", "obs_nothere", "no-such-session"]

    found = await call(client, "memory_smart_search", ids=ids)

    assert [o["id"] for o in found["observations"]] == [obs["id"]]
    assert found["observations"][0]["content"] == "Full observation content here."
    assert [m["id"] for m in found["memories"]] == [mem["id"]]
    assert found["memories"][0]["content"] == "Full memory content here."
    assert [s["id"] for s in found["sessions"]] == ["conv-5"]
    assert found["missing"] == ["mem_doesnotexist00000000", "obs_nothere", "no-such-session"]
    assert found["hits"] == []


async def test_smart_search_does_not_reach_into_another_project(client: Client) -> None:
    theirs = await call(client, "memory_save", content="Secret roadmap for Q3.", project="elsewhere")

    found = await call(client, "memory_smart_search", query="roadmap", ids=[theirs["id"]])

    assert found["hits"] == []
    assert found["memories"] == []
    assert found["missing"] == [theirs["id"]]


async def test_superseded_versions_are_not_search_hits(client: Client) -> None:
    old = await call(client, "memory_save", content=DB_FACT)
    new = await call(client, "memory_save", content=DB_FACT_V2)

    by_shared_words = await call(client, "memory_smart_search", query="production database Frankfurt")
    by_old_only_word = await call(client, "memory_smart_search", query="15")

    assert [h["id"] for h in by_shared_words["hits"]] == [new["id"]]
    assert old["id"] not in {h["id"] for h in by_old_only_word["hits"]}
    assert by_old_only_word["hits"] == []


# -- forget -----------------------------------------------------------------------------------------


async def test_forgetting_any_version_deletes_the_whole_chain(client: Client) -> None:
    old = await call(client, "memory_save", content=DB_FACT)
    new = await call(client, "memory_save", content=DB_FACT_V2)
    keep = await call(client, "memory_save", content=OTHER_FACT)

    result = await call(client, "memory_forget", ids=[old["id"]])

    assert result["dry_run"] is False
    assert result["deleted"] == {"observation": [], "memory": sorted([old["id"], new["id"]]), "session": []}
    assert result["total"] == 2
    for gone in (old["id"], new["id"]):
        assert "No memory" in await call_error(client, "memory_get", id=gone)
    assert (await call(client, "memory_get", id=keep["id"]))["memory"]["is_latest"] is True
    assert (await call(client, "memory_smart_search", query="production database"))["hits"] == []
    diagnosis = await call(client, "memory_diagnose")
    assert diagnosis["counts"]["memories"] == 1
    assert diagnosis["index_in_sync"] is True


async def test_forgetting_a_session_deletes_its_observations(client: Client, clock: FakeClock) -> None:
    doomed = []
    for n in range(3):
        doomed.append((await call(client, "memory_observe", content=f"Scratch work {n}.", session_id="conv-x"))["id"])
    kept = await call(client, "memory_observe", content="Scratch work elsewhere.", session_id="conv-y")

    result = await call(client, "memory_forget", ids=["conv-x"])

    assert result["deleted"] == {"observation": sorted(doomed), "memory": [], "session": ["conv-x"]}
    assert result["total"] == 4
    sessions = await call(client, "memory_sessions")
    assert [s["id"] for s in sessions["sessions"]] == ["conv-y"]
    listed = await call(client, "memory_observations", limit=100)
    assert [o["id"] for o in listed["observations"]] == [kept["id"]]
    assert [h["id"] for h in (await call(client, "memory_recall", query="scratch work"))["hits"]] == [kept["id"]]


async def test_forgetting_a_session_by_filter_deletes_it_with_its_observations(client: Client) -> None:
    obs = await call(client, "memory_observe", content="Temporary note.", session_id="conv-z")

    result = await call(client, "memory_forget", session_id="conv-z")

    assert result["deleted"] == {"observation": [obs["id"]], "memory": [], "session": ["conv-z"]}
    assert (await call(client, "memory_sessions"))["total"] == 0


async def test_forgetting_a_session_keeps_the_memories_learned_in_it(client: Client) -> None:
    await call(client, "memory_observe", content="Talked about the proxy.", session_id="conv-p")
    mem = await call(client, "memory_save", content="The corporate proxy blocks port 8080.", session_id="conv-p")

    result = await call(client, "memory_forget", ids=["conv-p"])

    assert result["deleted"]["memory"] == []
    memory = (await call(client, "memory_get", id=mem["id"]))["memory"]
    assert memory["session_id"] is None
    assert [h["id"] for h in (await call(client, "memory_smart_search", query="proxy port"))["hits"]] == [mem["id"]]


async def test_forgetting_sessions_by_time_window_uses_when_they_started(client: Client, clock: FakeClock) -> None:
    early = await call(client, "memory_observe", content="Early session.", session_id="early")
    clock.advance(days=3)
    late = await call(client, "memory_observe", content="Late session.", session_id="late")

    result = await call(client, "memory_forget", kind="session", since="2026-01-06")

    assert result["deleted"] == {"observation": [late["id"]], "memory": [], "session": ["late"]}
    remaining = await call(client, "memory_sessions")
    assert [s["id"] for s in remaining["sessions"]] == [early["session_id"]]


async def test_forgetting_by_kind_and_time_window(client: Client) -> None:
    days = ["2025-05-01", "2025-05-10", "2025-05-20"]
    obs = [
        (await call(client, "memory_observe", content=f"Incident review {n}.", occurred_at=day))["id"]
        for n, day in enumerate(days)
    ]
    mem = await call(client, "memory_save", content="Incidents get a review within a week.", occurred_at="2025-05-10")

    result = await call(client, "memory_forget", kind="observation", since="2025-05-05", until="2025-05-31")

    assert result["deleted"] == {"observation": sorted(obs[1:]), "memory": [], "session": []}
    listed = await call(client, "memory_observations", limit=100)
    assert [o["id"] for o in listed["observations"]] == [obs[0]]
    assert (await call(client, "memory_get", id=mem["id"]))["memory"]["id"] == mem["id"]
    assert (await call(client, "memory_sessions"))["total"] == 1  # the session itself is kept


async def test_forgetting_memories_by_time_window_spares_observations(client: Client) -> None:
    obs = await call(client, "memory_observe", content="Meeting notes.", occurred_at="2025-05-10")
    early = await call(client, "memory_save", content="Old convention about tabs.", occurred_at="2025-01-01")
    late = await call(client, "memory_save", content="New convention about spaces.", occurred_at="2025-05-10")

    result = await call(client, "memory_forget", kind="memory", since="2025-05-01")

    assert result["deleted"] == {"observation": [], "memory": [late["id"]], "session": []}
    assert (await call(client, "memory_get", id=early["id"]))["memory"]["id"] == early["id"]
    assert [o["id"] for o in (await call(client, "memory_observations"))["observations"]] == [obs["id"]]


async def test_a_dry_run_reports_exactly_what_a_real_run_deletes_and_changes_nothing(client: Client) -> None:
    for n in range(3):
        await call(client, "memory_observe", content=f"Observation {n} about flaky CI.", session_id="conv-ci")
    old = await call(client, "memory_save", content=DB_FACT, session_id="conv-ci")
    await call(client, "memory_save", content=DB_FACT_V2)
    await call(client, "memory_save", content=OTHER_FACT)
    before = await export_document(client)

    dry = await call(client, "memory_forget", ids=["conv-ci", old["id"]], dry_run=True)
    after_dry = await export_document(client)
    real = await call(client, "memory_forget", ids=["conv-ci", old["id"]])
    after_real = await export_document(client)

    assert dry["dry_run"] is True
    assert after_dry == before
    assert real["dry_run"] is False
    assert real["deleted"] == dry["deleted"]
    assert real["total"] == dry["total"] == 6  # 3 observations, 2 memory versions, 1 session
    assert len(after_real["tables"]["observations"]) == 0
    assert len(after_real["tables"]["sessions"]) == 0
    assert [m["content"] for m in after_real["tables"]["memories"]] == [OTHER_FACT]


async def test_a_dry_run_of_a_filter_matches_the_real_run(client: Client) -> None:
    for day in ("2025-02-01", "2025-02-15", "2025-03-01"):
        await call(client, "memory_observe", content=f"Standup notes of {day}.", occurred_at=day)
        await call(client, "memory_save", content=f"Decision taken on {day} about retries.", occurred_at=day)
    before = await export_document(client)

    dry = await call(client, "memory_forget", since="2025-02-10", until="2025-02-20", dry_run=True)
    unchanged = await export_document(client)
    real = await call(client, "memory_forget", since="2025-02-10", until="2025-02-20")

    assert unchanged == before
    assert real["deleted"] == dry["deleted"]
    assert (len(real["deleted"]["observation"]), len(real["deleted"]["memory"])) == (1, 1)


async def test_forgetting_with_neither_ids_nor_a_filter_is_refused(client: Client) -> None:
    await call(client, "memory_save", content=OTHER_FACT)

    message = await call_error(client, "memory_forget")
    empty_list = await call_error(client, "memory_forget", ids=[])

    assert message.startswith("Error executing tool memory_forget: ids:")
    assert "ids:" in empty_list
    assert (await call(client, "memory_diagnose"))["counts"]["memories"] == 1


async def test_forgetting_an_unknown_id_deletes_nothing(client: Client) -> None:
    kept = await call(client, "memory_save", content=OTHER_FACT)

    message = await call_error(client, "memory_forget", ids=[kept["id"], "mem_0000000000unknown000"])

    assert "No memory 'mem_0000000000unknown000'" in message
    assert (await call(client, "memory_get", id=kept["id"]))["memory"]["id"] == kept["id"]


async def test_forgetting_twice_is_an_error_the_second_time(client: Client) -> None:
    saved = await call(client, "memory_save", content=OTHER_FACT)
    await call(client, "memory_forget", ids=[saved["id"]])

    message = await call_error(client, "memory_forget", ids=[saved["id"]])

    assert f"No memory '{saved['id']}'" in message


async def test_an_edit_saved_without_the_title_and_concepts_it_would_inherit_supersedes(client: Client) -> None:
    first = await call(
        client,
        "memory_save",
        content=DB_FACT,
        kind="decision",
        title="Production database",
        concepts=["PostgreSQL", "infra"],
        files=["deploy/db.tf"],
    )
    edited = await call(client, "memory_save", content=DB_FACT_V2)  # one word of thirteen changed
    retitled = await call(client, "memory_save", content=DB_FACT_V2, title="Where production data lives")

    assert jaccard(DB_FACT, DB_FACT_V2) > 0.8
    assert (edited["version"], edited["superseded_id"]) == (2, first["id"])
    assert edited["similarity"] > 0.8  # compared as stored: with the title, concepts and files it takes
    memory = (await call(client, "memory_get", id=edited["id"]))["memory"]
    assert (memory["title"], memory["concepts"], memory["files"]) == (
        "Production database",
        ["infra", "postgresql"],
        ["deploy/db.tf"],
    )
    # a title given is its own: the words it changes count
    assert retitled["version"] == 3
