"""The embedding worker in trouble: a record the model rejects, a store or catch-up that fails, a model
that hangs when the server is told to stop, and one whose vectors change length while the server runs."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt
import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.repositories.embeddings import EmbeddingRepository
from mcp_memory.search.embeddings import EmbeddingError
from mcp_memory.services import embedding
from tests._embedding import FakeEmbeddingServer, HashedNgrams
from tests._servers import initialized_stdio_server
from tests.conftest import FakeClock, call
from tests.test_embeddings import (
    DISTRACTORS,
    PANORAMAS,
    TYPO_QUERY,
    diagnose_until,
    observe_all,
    serving,
    settled,
)

POISON = "POISON" + " x" * 10


class Picky(HashedNgrams):
    """Fails every call holding the text POISON, as a model fails an input too long for it; `tries`
    keeps when each such call came and what it held."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__(gate=gate)
        self.tries: list[tuple[float, list[str]]] = []

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if POISON in texts:
            with self._lock:
                self.calls.append(list(texts))
                self.tries.append((time.monotonic(), list(texts)))
            raise RuntimeError("input too long for the model's context")
        return super()._embed(texts)


async def _saved_in_one_batch(client: Client, provider: HashedNgrams, gate: threading.Event, texts: list[str]) -> None:
    """Save `texts` while the worker waits in the model with another record, so they reach it as one batch."""
    await diagnose_until(client, lambda r: r["queued"] == 0)  # the (empty) start-up pass is done
    await call(client, "memory_save", content="first record")
    with anyio.fail_after(5):
        while not provider.calls:  # noqa: ASYNC110 - set by the worker thread, not by a task
            await anyio.sleep(0.01)
    for text in texts:
        await call(client, "memory_save", content=text)
    gate.set()


# -- a record the model rejects ------------------------------------------------------------------------


async def test_a_record_the_model_rejects_keeps_no_other_record_of_its_batch_from_a_vector(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "FIRST_RETRY_S", 0.01)
    gate = threading.Event()
    provider = Picky(gate=gate)
    try:
        async with serving(settings, clock, provider) as client:
            await _saved_in_one_batch(client, provider, gate, [POISON, PANORAMAS, *DISTRACTORS])
            report = await diagnose_until(
                client, lambda r: r["vectors"] == 5 and r["stored_by_model"] == {r["provider"]: 5}
            )
            calls = list(provider.calls)
            hits = (await call(client, "memory_smart_search", query=TYPO_QUERY))["hits"]
    finally:
        gate.set()

    assert (report["vectors"], report["lacking"], report["queued"]) == (5, 1, 0)
    assert report["stored_by_model"] == {"test:hashed-ngrams-64": 5}
    assert report["failures"] == 7
    assert "too long" in report["last_error"]
    batch = [POISON, PANORAMAS, *DISTRACTORS]
    assert calls == [
        ["first record"],
        *[batch] * 5,  # the whole batch, with back-off: the model might have been down
        [POISON, PANORAMAS],  # then halves, once each, down to the record it fails on alone
        [POISON],
        [PANORAMAS],
        DISTRACTORS,
    ]
    assert hits[0]["snippet"].startswith("The photographer")  # found by its vector


class Down(HashedNgrams):
    """A model that cannot be reached until `up` is set: every call fails as a refused connection does."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__(gate=gate)
        self.up = threading.Event()

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not self.up.is_set() and texts != ["first record"]:
            with self._lock:
                self.calls.append(list(texts))
            raise EmbeddingError("test: cannot reach http://127.0.0.1:1/v1/embeddings", unreachable=True)
        return super()._embed(texts)


async def test_a_model_that_cannot_be_reached_splits_no_batch_and_blames_no_record(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "FIRST_RETRY_S", 0.01)
    monkeypatch.setattr(embedding, "RETRY_LATER_S", 0.2)  # the once-a-minute catch-up, sped up
    gate = threading.Event()
    provider = Down(gate=gate)
    texts = [PANORAMAS, *DISTRACTORS]
    try:
        async with serving(settings, clock, provider) as client:
            await _saved_in_one_batch(client, provider, gate, texts)
            down = await diagnose_until(client, lambda r: r["failures"] >= 10)  # two rounds at least
            calls = [c for c in provider.calls if c != ["first record"]]
            provider.up.set()  # back: the next catch-up embeds them all, none held back as rejected
            report = await diagnose_until(client, settled)
    finally:
        gate.set()

    assert calls[:5] == [texts] * 5  # five tries with back-off, and never in halves
    assert all(c == texts for c in calls)
    assert (down["vectors"], down["lacking"]) == (1, 4)
    assert (report["vectors"], report["lacking"]) == (5, 0)


async def test_a_record_the_model_rejected_alone_is_tried_alone_and_less_often(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "FIRST_RETRY_S", 0.01)
    monkeypatch.setattr(embedding, "RETRY_LATER_S", 0.1)  # the once-a-minute catch-up, sped up
    provider = Picky()
    async with serving(settings, clock, provider) as client:
        await diagnose_until(client, lambda r: r["queued"] == 0)
        await call(client, "memory_save", content=POISON)
        with anyio.fail_after(10):
            while len(provider.tries) < 8:  # noqa: ASYNC110 - set by the worker thread, not by a task
                await anyio.sleep(0.01)
        await call(client, "memory_save", content=PANORAMAS)  # not held up by the rejected one
        report = await diagnose_until(client, lambda r: r["vectors"] == 1)

    tries = provider.tries[:8]
    assert [texts for _, texts in tries] == [[POISON]] * 8
    gaps = [tries[i + 1][0] - tries[i][0] for i in range(4, 7)]
    # one round of five attempts; after it, one try each time, waiting twice as long as the time before
    assert all(gap >= wait for gap, wait in zip(gaps, [0.1, 0.2, 0.4], strict=True)), gaps
    assert (report["vectors"], report["lacking"]) == (1, 1)
    assert [PANORAMAS] in provider.calls


async def test_a_rejected_record_whose_text_changes_is_embedded_at_once(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "FIRST_RETRY_S", 0.01)  # the next catch-up stays a minute away
    provider = Picky()
    async with serving(settings, clock, provider) as client:
        await diagnose_until(client, lambda r: r["queued"] == 0)
        await call(client, "memory_lesson_save", content=POISON)
        rejected = await diagnose_until(client, lambda r: r["failures"] == 5 and r["queued"] == 0)
        await call(client, "memory_lesson_save", content=POISON, context=PANORAMAS)  # the same lesson, more text
        report = await diagnose_until(client, settled)

    assert (rejected["vectors"], rejected["lacking"]) == (0, 1)
    assert (report["vectors"], report["lacking"], report["failures"]) == (1, 0, 5)
    assert provider.calls[-1] == [f"{POISON}\n{PANORAMAS}"]


# -- a step that fails is tried again --------------------------------------------------------------------


async def test_a_batch_whose_store_met_a_locked_database_is_stored_later(settings: Settings, clock: FakeClock) -> None:
    impatient = settings.model_copy(update={"busy_timeout_ms": 300})
    gate = threading.Event()
    provider = HashedNgrams(gate=gate)
    try:
        async with serving(impatient, clock, provider) as client:
            await diagnose_until(client, lambda r: r["queued"] == 0)
            await call(client, "memory_observe", content=PANORAMAS)
            with anyio.fail_after(5):
                while not provider.calls:  # noqa: ASYNC110 - the worker is in the model with the record's text
                    await anyio.sleep(0.01)
            other = sqlite3.connect(impatient.db, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")  # another process's long write (an import, say)
            gate.set()
            try:
                locked = await diagnose_until(client, lambda r: r["failures"] > 0)
            finally:
                other.execute("COMMIT")
                other.close()
            report = await diagnose_until(client, settled)
    finally:
        gate.set()

    assert "locked" in locked["last_error"]
    assert (locked["vectors"], locked["lacking"]) == (0, 1)
    assert (report["vectors"], report["lacking"]) == (1, 0)
    assert report["stored_by_model"] == {"test:hashed-ngrams-64": 1}


async def test_a_catch_up_pass_that_failed_runs_again(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(settings, clock, None) as client:
        await observe_all(client, [PANORAMAS, *DISTRACTORS])
    real = EmbeddingRepository.lacking
    failed: list[str] = []

    async def locked_once(self: EmbeddingRepository, model: str) -> list[tuple[str, str]]:
        if not failed:
            failed.append(model)
            raise sqlite3.OperationalError("database is locked")
        return await real(self, model)

    monkeypatch.setattr(EmbeddingRepository, "lacking", locked_once)
    async with serving(settings, clock, HashedNgrams()) as client:
        report = await diagnose_until(client, lambda r: settled(r) and r["vectors"] == 4)

    assert failed == ["test:hashed-ngrams-64"]
    assert (report["embedded"], report["failures"]) == (4, 1)
    assert "locked" in report["last_error"]


async def test_a_failed_drop_of_vectors_of_the_old_length_is_tried_again(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = HashedNgrams(64), HashedNgrams(32)
    before.name = after.name = "test:same-name"
    async with serving(settings, clock, before) as client:
        await observe_all(client, [PANORAMAS, *DISTRACTORS])
        await diagnose_until(client, settled)
    real = EmbeddingRepository.delete_other_lengths
    failed: list[int] = []

    async def locked_once(self: EmbeddingRepository, model: str, dim: int) -> int:
        if not failed:
            failed.append(dim)
            raise sqlite3.OperationalError("database is locked")
        return await real(self, model, dim)

    monkeypatch.setattr(EmbeddingRepository, "delete_other_lengths", locked_once)
    async with serving(settings, clock, after) as client:  # no query: the worker alone sees the new length
        report = await diagnose_until(client, lambda r: settled(r) and r["embedded"] == 4)

    assert failed == [32]
    assert (report["dimension"], report["vectors"], report["stored_by_model"]) == (32, 4, {"test:same-name": 4})


# -- a hung model and shutdown -------------------------------------------------------------------------


class Threads(HashedNgrams):
    """Notes whether each call ran in a daemon thread."""

    def __init__(self) -> None:
        super().__init__()
        self.daemon: list[bool] = []

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.daemon.append(threading.current_thread().daemon)
        return super()._embed(texts)


async def test_the_model_is_called_in_daemon_threads(settings: Settings, clock: FakeClock) -> None:
    provider = Threads()
    async with serving(settings, clock, provider) as client:
        await observe_all(client, [PANORAMAS])
        await diagnose_until(client, settled)
        await call(client, "memory_recall", query=TYPO_QUERY)
    assert provider.calls == [[PANORAMAS], [TYPO_QUERY]]
    assert provider.daemon == [True, True]  # the worker's and the query's: neither holds up the process's exit


def test_sigterm_ends_a_stdio_server_whose_model_hangs_at_once(settings: Settings, clock: FakeClock) -> None:
    async def write() -> None:
        async with serving(settings, clock, None) as client:
            await observe_all(client, [PANORAMAS, *DISTRACTORS])

    anyio.run(write)
    with FakeEmbeddingServer(delay_s=60) as server:
        args = ("--embeddings", "openai", "--embedding-model", "hashed", "--embedding-url", server.url)
        with initialized_stdio_server(settings.db, *args, "--embedding-timeout-s", "30") as proc:
            deadline = time.monotonic() + 10
            while not server.requests and time.monotonic() < deadline:  # the start-up catch-up is in the model
                time.sleep(0.05)
            assert len(server.requests) == 1
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                code: Any = proc.wait(40)
            except subprocess.TimeoutExpired:
                code = "still running"
            took = time.monotonic() - started
    assert took < 3, f"SIGTERM took {took:.1f} s to end the process (exit {code})"


# -- a model whose vectors change length while the server runs ------------------------------------------


def test_a_provider_takes_a_new_length_and_reports_it() -> None:
    provider = HashedNgrams(64)
    assert provider.embed(["one"]).shape == (1, 64)
    provider.size = 32  # another model behind the same name
    rows = provider.embed(["one", "two"])
    assert rows.shape == (2, 32)
    assert provider.dim == 32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), [1.0, 1.0], rtol=1e-6)


async def test_a_model_that_changes_length_while_the_server_runs_embeds_everything_again(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding, "FIRST_RETRY_S", 0.01)
    with FakeEmbeddingServer(64) as server:
        configured = settings.model_copy(
            update={"embeddings": "openai", "embedding_model": "hashed", "embedding_url": server.url}
        )
        async with serving(configured, clock, None) as client:
            await observe_all(client, [PANORAMAS, *DISTRACTORS])
            before = await diagnose_until(client, settled)
            server.provider.size = 32  # `ollama pull` brought another model under the tag
            await call(client, "memory_observe", content="A new record after the model changed.")
            report = await diagnose_until(client, lambda r: settled(r) and r["vectors"] == 5)
            hits = (await call(client, "memory_recall", query=TYPO_QUERY))["hits"]

    assert (before["dimension"], before["vectors"]) == (64, 4)
    assert (report["dimension"], report["vectors"], report["stored_by_model"]) == (32, 5, {"openai:hashed": 5})
    assert (report["embedded"], report["failures"]) == (4 + 1 + 4, 0)  # the new record, then the four again
    assert hits[0]["snippet"].startswith("The photographer")
