"""Forgotten words leave the store: when records are dropped, every term of theirs that no other
record (of any project) uses is deleted from `search_terms`, kept out of the index cache, and a
word that comes back later is stored again, under a new id, and found by every server."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.context import open_app
from mcp_memory.search.cache import CacheReader, cache_path
from mcp_memory.search.index import SearchFilter
from mcp_memory.search.postings import decode_terms
from mcp_memory.server import build_server
from mcp_memory.services.index_docs import DocSpec
from tests.conftest import FakeClock, call
from tests.test_reanalysis import make_older

SECRET = "Alice Whitfield is secretly interviewing at Globexcorp next Thursday"
SECRET_NOTE = "User mentioned the Whitfield interview at Globexcorp, keep it confidential"
SECRET_WORDS = {"whitfield", "globexcorp", "secret", "interview", "confidenti"}  # as the analyzer stems them


def stored_terms(db: Path) -> dict[str, int]:
    """The vocabulary table as it is on disk."""
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT term, id FROM search_terms").fetchall())


def dangling_term_ids(db: Path) -> set[int]:
    """Term ids that stored documents use but the vocabulary no longer holds."""
    with sqlite3.connect(db) as conn:
        known = {row[0] for row in conn.execute("SELECT id FROM search_terms")}
        blobs = [row[0] for row in conn.execute("SELECT terms FROM search_docs")]
    used = {term for blob in blobs for term in decode_terms(blob)["t"].tolist()}
    return used - known


def cached_terms(db: Path) -> dict[str, int]:
    with CacheReader(cache_path(db)) as reader:
        return reader.state().vocab


def hit_ids(found: dict[str, Any]) -> list[str]:
    return [hit["id"] for hit in found["hits"]]


async def test_forgotten_words_leave_the_vocabulary_and_a_later_cache_while_shared_words_stay(
    settings: Settings, clock: FakeClock
) -> None:
    settings = settings.model_copy(update={"index_cache_min_records": 0})
    async with Client(build_server(settings, clock)) as client:
        # The secret note opens its session, whose title it gives: the session is re-indexed without it.
        note = await call(client, "memory_observe", content=SECRET_NOTE, session_id="chat")
        clock.advance(minutes=1)
        kept = await call(client, "memory_observe", content="Alice reviewed the budget", session_id="chat")
        memory = await call(client, "memory_save", content=SECRET)
        elsewhere = await call(client, "memory_save", content="Thursday is the deploy window", project="other")
        assert stored_terms(settings.db).keys() >= SECRET_WORDS

        await call(client, "memory_forget", ids=[memory["id"], note["id"]])

        terms = stored_terms(settings.db)
        assert not SECRET_WORDS & terms.keys()
        assert {"alic", "thursday", "budget", "deploy"} <= terms.keys()  # still used here, or in another project
        assert dangling_term_ids(settings.db) == set()
        assert hit_ids(await call(client, "memory_recall", query="Alice budget")) == [kept["id"]]
        assert hit_ids(await call(client, "memory_smart_search", query="Thursday deploy", project="other")) == [
            elsewhere["id"]
        ]
        assert (await call(client, "memory_smart_search", query="Whitfield Globexcorp"))["hits"] == []

    # A restart rebuilds and saves the cache; neither holds the forgotten words.
    async with Client(build_server(settings, clock)) as client:
        assert (await call(client, "memory_diagnose"))["index_source"] == "rebuild"
    cached = cached_terms(settings.db)
    assert not SECRET_WORDS & cached.keys()
    assert {"alic", "thursday"} <= cached.keys()
    data = cache_path(settings.db).read_bytes()
    assert b"whitfield" not in data
    assert b"globexcorp" not in data


async def test_a_server_that_knew_the_words_keeps_them_out_of_the_cache_it_writes_later(
    settings: Settings, clock: FakeClock
) -> None:
    settings = settings.model_copy(update={"index_cache_min_records": 0})
    async with Client(build_server(settings, clock)) as client:
        memory = await call(client, "memory_save", content=SECRET)
        await call(client, "memory_save", content="Alice reviewed the budget")
        async with open_app(settings, clock) as other:  # another server, its index built with the secret
            indexer, index = other.deps.indexer, other.deps.index
            assert "whitfield" in index.vocab
            started = other.deps.builder.write_cache(other.deps.db)  # the one its start-up began, if still running
            if started is not None:
                await started
            await call(client, "memory_forget", ids=[memory["id"]])
            await indexer.sync(other.deps.db)  # it learns that the memory went, not that its words did
            write = other.deps.builder.write_cache(other.deps.db)
            assert write is not None
            assert await write  # published: no forget came after what it reflects
            assert not SECRET_WORDS & index.vocab.keys()
            assert "alic" in index.vocab
    cached = cached_terms(settings.db)
    assert not SECRET_WORDS & cached.keys()
    assert "alic" in cached


async def test_a_forgotten_word_saved_again_is_found_by_every_server_and_after_restarts(
    settings: Settings, clock: FakeClock
) -> None:
    cached = settings.model_copy(update={"index_cache_min_records": 0})
    async with Client(build_server(settings, clock)) as writer, Client(build_server(settings, clock)) as reader:
        memory = await call(writer, "memory_save", content=SECRET)
        assert hit_ids(await call(reader, "memory_smart_search", query="Whitfield")) == [memory["id"]]
        old_id = stored_terms(settings.db)["whitfield"]

        await call(writer, "memory_forget", ids=[memory["id"]])
        assert "whitfield" not in stored_terms(settings.db)

        # The reader still maps the word to its deleted id; it stores it again, under a new one.
        again = await call(reader, "memory_save", content="Whitfield joined the platform team")
        new_id = stored_terms(settings.db)["whitfield"]
        assert new_id > old_id
        assert dangling_term_ids(settings.db) == set()
        for client in (reader, writer):
            assert hit_ids(await call(client, "memory_smart_search", query="Whitfield")) == [again["id"]]
        third = await call(writer, "memory_save", content="Whitfield asked about the Globexcorp offer")
        assert stored_terms(settings.db)["whitfield"] == new_id
        assert dangling_term_ids(settings.db) == set()

    expected = {again["id"], third["id"]}
    async with Client(build_server(settings.model_copy(update={"index_cache": False}), clock)) as client:
        assert set(hit_ids(await call(client, "memory_smart_search", query="Whitfield"))) == expected
    async with Client(build_server(cached, clock)) as client:  # rebuilds, saves the cache
        assert (await call(client, "memory_diagnose"))["index_source"] == "rebuild"
    assert cached_terms(settings.db)["whitfield"] == new_id
    async with Client(build_server(cached, clock)) as client:
        assert (await call(client, "memory_diagnose"))["index_source"] == "cache"
        assert set(hit_ids(await call(client, "memory_smart_search", query="Whitfield"))) == expected


async def test_a_cache_written_before_a_word_was_deleted_does_not_bring_its_id_back(
    settings: Settings, clock: FakeClock
) -> None:
    settings = settings.model_copy(update={"index_cache_min_records": 0})
    async with Client(build_server(settings, clock)) as client:
        first = await call(client, "memory_save", content="The backup job copies the archive with rsync")
        await call(client, "memory_save", content="Deploys use the staging host")
    async with Client(build_server(settings, clock)) as client:  # rebuilds, saves the cache
        assert (await call(client, "memory_diagnose"))["index_source"] == "rebuild"
    old_id = cached_terms(settings.db)["rsync"]

    async with Client(build_server(settings, clock)) as client:
        # A new version leaves the word to no record: it is deleted (no forget: the cache stays).
        newer = "The backup job copies the archive with restic"
        await call(client, "memory_save", content=newer, supersedes=first["id"])
        assert "rsync" not in stored_terms(settings.db)
    assert cached_terms(settings.db)["rsync"] == old_id

    async with Client(build_server(settings, clock)) as client:  # its vocabulary maps the word to the old id
        assert (await call(client, "memory_diagnose"))["index_source"] == "cache"
        again = await call(client, "memory_save", content="rsync mirrors the photos every night")
        assert stored_terms(settings.db)["rsync"] > old_id
        assert dangling_term_ids(settings.db) == set()
        assert hit_ids(await call(client, "memory_smart_search", query="rsync")) == [again["id"]]
    async with Client(build_server(settings.model_copy(update={"index_cache": False}), clock)) as client:
        assert hit_ids(await call(client, "memory_smart_search", query="rsync")) == [again["id"]]


async def test_a_drop_sees_a_record_another_server_committed_since_its_index_last_looked(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        first = await call(client, "memory_save", content="The Zanzibar ferry leaves at noon")
        async with open_app(settings, clock) as other:  # its index holds the first memory only
            second = await call(client, "memory_save", content="Zanzibar visas take two weeks")
            # Straight to the service: no call middleware brings its index up to date first.
            await other.forget.forget(
                "test", ids=[first["id"]], kind=None, session_id=None, since=None, until=None, dry_run=False
            )
        assert "zanzibar" in stored_terms(settings.db)
        assert dangling_term_ids(settings.db) == set()
        assert hit_ids(await call(client, "memory_smart_search", query="Zanzibar")) == [second["id"]]


async def test_a_write_never_uses_a_term_id_another_server_deleted_since_its_index_last_looked(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        first = await call(client, "memory_save", content="The Zanzibar ferry leaves at noon")
        async with open_app(settings, clock) as other:  # maps "zanzibar" to the first memory's term
            await call(client, "memory_forget", ids=[first["id"]])
            assert "zanzibar" not in stored_terms(settings.db)
            saved = await other.memories.save("test", "Zanzibar visas take two weeks")
        assert dangling_term_ids(settings.db) == set()
        assert hit_ids(await call(client, "memory_smart_search", query="Zanzibar")) == [saved.id]


def _spec(doc_id: str, text: str) -> DocSpec:
    return DocSpec(doc_id, "memory", "p", "2026-01-01T00:00:00Z", fields=((text, 1),))


async def test_a_record_put_in_a_rolled_back_savepoint_keeps_no_word_alive(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "m.db", project="p", synchronous="normal")
    async with open_app(settings) as app:
        db, indexer = app.deps.db, app.deps.indexer
        saved = await app.memories.save("p", "quokka habitat survey")
        await app.memories.save("p", "habitat map for wombats")

        async def failing_inner() -> None:
            async with db.transaction("inner") as inner:
                await indexer.put(inner, _spec("mem_x", "quokka numbers"))
                raise ValueError("inner")

        left: set[str] = set()

        async def failing_outer() -> None:
            async with db.transaction("outer") as tx:
                with pytest.raises(ValueError, match="inner"):
                    await failing_inner()
                await indexer.drop(tx, [saved.id])
                left.update(row[0] for row in await tx.fetchall("SELECT term FROM search_terms"))
                raise RuntimeError("outer")  # the memory itself stays: undo the drop too

        with pytest.raises(RuntimeError, match="outer"):
            await failing_outer()
        assert "habitat" in left  # the other memory uses it
        assert "quokka" not in left  # only the rolled-back record would have used it
        assert "quokka" in stored_terms(settings.db)
        assert "quokka" in app.deps.index.vocab


async def test_a_word_deleted_in_a_rolled_back_savepoint_is_used_again_under_its_id(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "m.db", project="p", synchronous="normal")
    async with open_app(settings) as app:
        db, indexer = app.deps.db, app.deps.indexer
        saved = await app.memories.save("p", "quokka habitat survey")
        quokka = stored_terms(settings.db)["quokka"]

        async def failing_inner() -> None:
            async with db.transaction("inner") as inner:
                await indexer.drop(inner, [saved.id])
                raise ValueError("inner")

        async with db.transaction("outer") as tx:
            with pytest.raises(ValueError, match="inner"):
                await failing_inner()
            await indexer.put(tx, _spec("mem_y", "quokka numbers"))
        assert stored_terms(settings.db)["quokka"] == quokka
        assert dangling_term_ids(settings.db) == set()
        assert app.deps.index.vocab["quokka"] == quokka
    async with open_app(settings) as app:  # rebuilt from stored terms alone
        found = app.deps.index.search("p", "quokka", SearchFilter(), 10)
        assert {hit.doc_id for hit in found} == {saved.id, "mem_y"}


# -- words left behind before this collection existed -------------------------------------------------


def leave_words(db: Path, *words: str) -> None:
    """Store words no record uses, as a forget by an older release (or an older analyzer) left them."""
    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO search_terms (term) VALUES (?)", [(w,) for w in words])


async def test_consolidate_deletes_the_words_no_record_uses_and_a_dry_run_only_counts_them(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        saved = await call(client, "memory_save", content="Alice reviewed the budget")
        await call(client, "memory_save", content="Lunch options near the office")
        await call(client, "memory_save", content="Thursday is the deploy window", project="other")
    before = stored_terms(settings.db)
    leave_words(settings.db, "whitfield", "globexcorp")

    async with Client(build_server(settings, clock)) as client:
        dry = await call(client, "memory_consolidate", dry_run=True)
        kept = stored_terms(settings.db)
        real = await call(client, "memory_consolidate")
        again = await call(client, "memory_consolidate")
        found = hit_ids(await call(client, "memory_smart_search", query="Alice budget"))

    assert (dry["words_deleted"], real["words_deleted"], again["words_deleted"]) == (2, 2, 0)
    assert kept.keys() == before.keys() | {"whitfield", "globexcorp"}
    # words of every project's records stay, whichever project consolidated
    assert stored_terms(settings.db) == before
    assert "deploy" in before
    assert found == [saved["id"]]


async def test_a_re_analysis_deletes_the_words_only_the_previous_analyzer_made(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        saved = await call(client, "memory_save", content="The staging database lives on port 5433")
    leave_words(settings.db, "stagingdatabas")  # a form the previous analyzer made
    make_older(settings.db)

    async with Client(build_server(settings, clock)) as client:
        found = hit_ids(await call(client, "memory_smart_search", query="staging database"))

    terms = stored_terms(settings.db)
    assert "stagingdatabas" not in terms
    assert {"stage", "databas", "5433"} <= terms.keys()
    assert dangling_term_ids(settings.db) == set()
    assert found == [saved["id"]]


async def test_a_word_another_process_deleted_leaves_this_ones_vocabulary(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as a, Client(build_server(settings, clock)) as b:
        await call(b, "memory_lesson_save", content="stripe retry timeout flaky caroline.")
        memory = await call(a, "memory_save", content="redis release migration wheel deploy cache")
        await call(b, "memory_diagnose")  # b learns the word "cache"
        await call(a, "memory_forget", ids=[memory["id"]])  # its last record: the word is deleted there
        there = await call(b, "memory_lesson_recall", query="stripe cache")
        there_terms = (await call(b, "memory_diagnose"))["index_terms"]
    async with Client(build_server(settings, clock)) as c:
        fresh = await call(c, "memory_lesson_recall", query="stripe cache")
        fresh_terms = (await call(c, "memory_diagnose"))["index_terms"]

    # kept, the dead word still counted among the query's words, and scored the lesson lower
    assert [(x["id"], x["score"]) for x in there["lessons"]] == [(x["id"], x["score"]) for x in fresh["lessons"]]
    assert there_terms == fresh_terms


async def test_a_restart_from_the_index_cache_drops_words_deleted_since_it_was_written(
    settings: Settings, clock: FakeClock
) -> None:
    cached_settings = settings.model_copy(update={"index_cache": True, "index_cache_min_records": 0})
    async with Client(build_server(cached_settings, clock)) as first:
        await call(first, "memory_lesson_save", content="stripe retry timeout flaky caroline.")
        old = await call(first, "memory_save", content="redis release migration wheel deploy cache")
    async with Client(build_server(cached_settings, clock)) as second:  # rebuilds, and writes the cache
        assert (await call(second, "memory_diagnose"))["index_source"] == "rebuild"
        # a new version: the old one leaves the index, and "cache" (its word alone) the store
        await call(second, "memory_save", content="nightly backup of the sqlite database", supersedes=old["id"])
    async with Client(build_server(cached_settings, clock)) as third:
        assert (await call(third, "memory_diagnose"))["index_source"] == "cache"
        cached = await call(third, "memory_lesson_recall", query="stripe cache")
        cached_terms = (await call(third, "memory_diagnose"))["index_terms"]
    async with Client(build_server(settings.model_copy(update={"index_cache": False}), clock)) as fresh:
        rebuilt = await call(fresh, "memory_lesson_recall", query="stripe cache")
        rebuilt_terms = (await call(fresh, "memory_diagnose"))["index_terms"]

    assert [(x["id"], x["score"]) for x in cached["lessons"]] == [(x["id"], x["score"]) for x in rebuilt["lessons"]]
    assert cached_terms == rebuilt_terms
