"""The index cache: a restart loads the saved index and applies what was written since, and answers
exactly as a rebuild from the database would; a cache that does not fit the database is ignored.

Every test compares against a server started with the cache off (a rebuild from stored terms),
so a cache that dropped, kept or mis-scored one record fails the comparison.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.search.bm25 import BM25Params
from mcp_memory.search.cache import FORMAT, CacheHeader, CacheReader, cache_path, publish, write_cache
from mcp_memory.search.index import IndexDoc, SearchFilter, SearchIndex
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call

TOPICS = [
    "the importer streams JSON so large exports fit in memory",
    "a race in the temp-dir cleanup made the upload test flaky",
    "parse_config reads the TOML file before the environment",
    "we chose SQLite in WAL mode over Postgres for the desktop app",
    "the release checklist lives in docs/RELEASING.md",
    "retry the webhook three times with exponential back-off",
]
QUERIES = ["importer JSON memory", "flaky upload race", "parse_config TOML", "SQLite WAL", "webhook retry", "release"]


def _with(settings: Settings, **update: Any) -> Settings:
    return settings.model_copy(update={"index_cache_min_records": 0, **update})


async def _fill(client: Client, rounds: int = 3) -> list[str]:
    """Observations in sessions, memories and a lesson; returns the observation ids."""
    ids = []
    for r in range(rounds):
        for i, topic in enumerate(TOPICS):
            found = await call(
                client,
                "memory_observe",
                content=f"{topic} (round {r})",
                type="note",
                session_id=f"s{r}",
                end_session=i == len(TOPICS) - 1,
            )
            ids.append(found["id"])
    await call(client, "memory_save", content="Deploys go out on Tuesdays after the release checklist.")
    await call(client, "memory_lesson_save", content="Run the importer against a large export before releasing.")
    return ids


async def _answers(client: Client) -> list[list[tuple[str, float]]]:
    pages = []
    for query in [*QUERIES, "Tuesdays deploys", "Thursdays deploys"]:
        for tool in ("memory_recall", "memory_smart_search"):  # episodic records / every kind
            found = await call(client, tool, query=query, limit=10)
            pages.append([(hit["id"], round(hit["score"], 9)) for hit in found["hits"]])
    return pages


async def _open(settings: Settings, clock: FakeClock) -> tuple[str, list[list[tuple[str, float]]], dict[str, Any]]:
    """Start a server, report how it loaded its index and what it answers; then stop it."""
    async with Client(build_server(settings, clock)) as client:
        report = await call(client, "memory_diagnose")
        assert report["index_in_sync"]
        return report["index_source"], await _answers(client), report


async def test_a_restart_loads_the_cache_and_answers_as_a_rebuild_does(settings: Settings, clock: FakeClock) -> None:
    settings = _with(settings)
    async with Client(build_server(settings, clock)) as client:
        await _fill(client)
        assert (await call(client, "memory_diagnose"))["index_source"] == "rebuild"  # a new store: nothing to load
    assert not cache_path(settings.db).exists()  # an empty store is not cached
    source, first, _ = await _open(settings, clock)
    assert source == "rebuild"
    assert cache_path(settings.db).exists()

    source, cached, report = await _open(settings, clock)
    assert source == "cache"
    assert report["index_cache_bytes"] == cache_path(settings.db).stat().st_size > 0
    rebuilt = (await _open(settings.model_copy(update={"index_cache": False}), clock))[1]
    assert cached == rebuilt == first
    assert sum(1 for page in cached if page) > len(QUERIES), "most queries find something"


async def test_writes_made_after_the_cache_was_saved_are_applied_on_load(settings: Settings, clock: FakeClock) -> None:
    settings = _with(settings)
    async with Client(build_server(settings, clock)) as client:
        ids = await _fill(client)
    await _open(settings, clock)  # rebuilds and saves the cache
    saved = cache_path(settings.db).read_bytes()

    # Another process without a cache writes: new records, an edited memory, a removed session.
    async with Client(build_server(settings.model_copy(update={"index_cache": False}), clock)) as client:
        await call(client, "memory_observe", content="the zebra migration finished overnight", type="note")
        await call(client, "memory_save", content="Deploys go out on Thursdays after the release checklist.")
        await call(client, "memory_consolidate")
        rebuilt = await _answers(client)
        zebra = (await call(client, "memory_recall", query="zebra migration"))["hits"]
    assert cache_path(settings.db).read_bytes() == saved  # still the old cache

    # Loaded and caught up before the first call (a call would also catch up with other writers).
    async with open_app(settings, clock) as app:
        assert app.deps.builder.source == "cache"
        assert app.deps.builder.replayed >= 3
        found = app.deps.index.search("test", "zebra migration", SearchFilter(), 5)
        assert [h.doc_id for h in found] == [zebra[0]["id"]]
    source, cached, _ = await _open(settings, clock)
    assert source == "cache"
    assert cached == rebuilt
    async with Client(build_server(settings, clock)) as client:
        assert (await call(client, "memory_recall", query="zebra migration"))["hits"] == zebra != []
        thursday = (await call(client, "memory_smart_search", query="Thursdays deploys"))["hits"]
        assert thursday
        assert "Thursdays" in thursday[0]["snippet"]
        assert ids[0] in {h["id"] for h in (await call(client, "memory_recall", query="importer JSON"))["hits"]}


async def test_a_fold_reaches_another_server_and_the_cache(settings: Settings, clock: FakeClock) -> None:
    capped = _with(settings, observation_cap=3)
    animals = ["okapi", "tapir", "quoll", "numbat", "dugong"]
    async with Client(build_server(capped, clock)) as writer, Client(build_server(capped, clock)) as reader:
        await call(reader, "memory_diagnose")  # the reader has built its index before the writes
        for animal in animals:
            await call(writer, "memory_observe", content=f"We talked about the {animal}.", session_id="chat")
            await call(reader, "memory_recall", query=animal)  # catches up after every write
            clock.advance(minutes=1)
        written = [await call(writer, "memory_recall", query=a) for a in animals]
        read = [await call(reader, "memory_recall", query=a) for a in animals]
    _, cached, _ = await _open(capped, clock)  # saves the cache
    source, loaded, _ = await _open(capped, clock)

    # the folded turns live on in the session's digest, found by both servers and after a restart
    assert [[h["kind"] for h in r["hits"]] for r in written][:2] == [["session"], ["session"]]
    assert read == written
    assert (source, loaded) == ("cache", cached)


async def test_a_cache_older_than_a_forget_is_deleted_and_never_used(settings: Settings, clock: FakeClock) -> None:
    settings = _with(settings)
    async with Client(build_server(settings, clock)) as client:
        ids = await _fill(client)
    await _open(settings, clock)
    stale = settings.db.with_name("stale-copy")
    shutil.copyfile(cache_path(settings.db), stale)

    async with Client(build_server(settings, clock)) as client:
        gone = await call(client, "memory_forget", ids=[ids[0]])
        assert gone["deleted"]["observation"] == [ids[0]]
        assert not cache_path(settings.db).exists()  # its terms are no longer on disk

    # Another process may still hold (and publish) a cache from before the forget: it is not used.
    publish(stale, cache_path(settings.db))
    source, answers, _ = await _open(settings, clock)
    assert source == "rebuild"
    assert ids[0] not in {hit_id for page in answers for hit_id, _ in page}
    # the rebuild saved a fresh cache, which later starts use
    assert (await _open(settings, clock))[:2] == ("cache", answers)


async def test_a_cache_older_than_a_forget_an_import_carried_is_never_used(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    settings = _with(settings)
    other = settings.model_copy(update={"db": tmp_path / "other.db"})
    async with Client(build_server(settings, clock)) as client:
        ids = await _fill(client)
        document = (await call(client, "memory_export"))["document"]
    async with Client(build_server(other, clock)) as client:  # another machine forgets one there
        await call(client, "memory_import", document=document)
        clock.advance(minutes=5)
        await call(client, "memory_forget", ids=[ids[0]])
        forgetting = (await call(client, "memory_export"))["document"]
    await _open(settings, clock)
    stale = settings.db.with_name("stale-copy")
    shutil.copyfile(cache_path(settings.db), stale)

    async with Client(build_server(settings, clock)) as client:
        imported = await call(client, "memory_import", document=forgetting)
    publish(stale, cache_path(settings.db))  # as another process might, from before the import
    source, answers, _ = await _open(settings, clock)

    assert imported["forgotten"] >= 1
    assert source == "rebuild"  # the import's forget is a forget: its terms must not come back from disk
    assert ids[0] not in {hit_id for page in answers for hit_id, _ in page}


async def test_words_a_consolidation_sweeps_leave_another_servers_vocabulary(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as a, Client(build_server(settings, clock)) as b:
        await call(
            a, "memory_observe", content="We replaced the xylophone parser with a marimba lexer.", session_id="s1"
        )
        await call(a, "memory_crystallize", session_id="s1", force=True)
        await call(b, "memory_diagnose")  # b follows: it learns the summary's words
        clock.advance(hours=1)
        await call(a, "memory_observe", content="Switched the proxy to caddy.", session_id="s1")
        await call(a, "memory_crystallize", session_id="s1", force=True)
        await call(b, "memory_diagnose")  # b follows the new summary while the old one's words are stored
        swept = await call(a, "memory_consolidate")
        followed = await call(b, "memory_diagnose")
    async with Client(build_server(settings, clock)) as fresh:
        rebuilt = await call(fresh, "memory_diagnose")

    assert swept["words_deleted"] >= 1
    assert followed["index_terms"] == rebuilt["index_terms"]


async def test_a_forget_deletes_a_cache_left_by_an_earlier_run_even_with_the_cache_off(
    settings: Settings, clock: FakeClock
) -> None:
    settings = _with(settings)
    async with Client(build_server(settings, clock)) as client:
        ids = await _fill(client)
    await _open(settings, clock)
    assert cache_path(settings.db).exists()
    async with Client(build_server(settings.model_copy(update={"index_cache": False}), clock)) as client:
        await call(client, "memory_observe", content="a note the cache never saw", type="note")
        assert cache_path(settings.db).exists()  # off: neither read nor written
        await call(client, "memory_forget", ids=[ids[1]])
    assert not cache_path(settings.db).exists()


async def test_a_damaged_or_foreign_cache_is_ignored(settings: Settings, clock: FakeClock, tmp_path: Path) -> None:
    settings = _with(settings)
    async with Client(build_server(settings, clock)) as client:
        await _fill(client)
    _, expected, _ = await _open(settings, clock)
    path = cache_path(settings.db)

    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert (await _open(settings, clock))[:2] == ("rebuild", expected)

    path.write_bytes(data[:100] + bytes(len(data) - 200) + data[-100:])  # zeros in the middle
    assert (await _open(settings, clock))[:2] == ("rebuild", expected)

    # A cache of another store with the same history length: its audit row's time differs.
    other = _with(Settings(db=tmp_path / "other" / "memory.db", project="test", synchronous="normal"))
    other.db.parent.mkdir()
    later = FakeClock(clock.now)
    async with Client(build_server(other, later)) as client:
        await _fill(client, rounds=1)
        await call(client, "memory_observe", content="only the other store knows about kiwis", type="note")
    await _open(other, later)
    shutil.copyfile(cache_path(other.db), path)
    source, answers, _ = await _open(settings, clock)
    assert (source, answers) == ("rebuild", expected)


async def test_small_stores_write_no_cache(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as client:
        await _fill(client)
    assert (await _open(settings, clock))[0] == "rebuild"
    assert not cache_path(settings.db).exists()  # 20 records: far below the default 10,000


def _doc(i: int, index: SearchIndex, text: str, project: str) -> IndexDoc:
    counts: dict[str, int] = {}
    for term in index.analyzer.terms(text):
        counts[term] = counts.get(term, 0) + 1
    ids = {term: index.vocab.setdefault(term, len(index.vocab) + 1) for term in counts}
    session = f"s{i % 4}"
    return IndexDoc(
        f"obs_{i}", "observation", None, project, session, 1_000.0 + i, sum(counts.values()),
        index.pack(counts, ids), seq=i + 1, weight=(i % 10) / 10, digest=f"{i:016x}",
    )  # fmt: skip


def test_saved_state_restores_the_same_scores_after_adds_and_removes(tmp_path: Path) -> None:
    """The raw index: loaded, then written to (so the postings are regrouped when saved), saved,
    restored into a new index: every query scores every document the same."""
    rng = np.random.default_rng(7)
    words = [w for topic in TOPICS for w in topic.split()]
    index = SearchIndex(Analyzer(), BM25Params(1.2, 0.4))
    texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 12)))) for _ in range(600)]
    index.load([_doc(i, index, t, "a" if i % 3 else "b") for i, t in enumerate(texts[:400])])
    index.upsert_many([_doc(i, index, t, "a") for i, t in enumerate(texts[400:], start=400)])
    for i in range(0, 400, 7):
        index.remove(f"obs_{i}")
    header = CacheHeader(FORMAT, 0, "UTC", 0, "", max(index.vocab.values()), index.doc_count())
    publish(write_cache(tmp_path / "cache", header, index.state()), tmp_path / "cache")

    restored = SearchIndex(Analyzer(), BM25Params(1.2, 0.4))
    with CacheReader(tmp_path / "cache") as reader:
        assert reader.header == header
        restored.restore(reader.state())
    assert restored.doc_count() == index.doc_count() == 600 - len(range(0, 400, 7))
    assert restored.counts_by_kind() == index.counts_by_kind()
    for query in [*QUERIES, "flaky", "temp-dir cleanup memory"]:
        for project in ("a", "b"):
            for flt in (SearchFilter(), SearchFilter(session_id="s1")):
                assert restored.search(project, query, flt, 50) == index.search(project, query, flt, 50)


def test_a_cache_that_cannot_be_put_in_place_leaves_no_temporary_file(tmp_path: Path) -> None:
    index = SearchIndex(Analyzer(), BM25Params(1.2, 0.4))
    index.load([_doc(i, index, text, "a") for i, text in enumerate(QUERIES)])
    header = CacheHeader(FORMAT, 0, "UTC", 0, "", max(index.vocab.values()), index.doc_count())
    (tmp_path / "cache").mkdir()  # a folder where the cache goes

    with pytest.raises(IsADirectoryError):
        publish(write_cache(tmp_path / "cache", header, index.state()), tmp_path / "cache")
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]
