"""Embedding test doubles: a deterministic hashed n-gram provider and a real OpenAI-style HTTP server.

Neither downloads a model, so tests of hybrid search stay fast and offline.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memory.search.embeddings import EmbeddingProvider

GATE_TIMEOUT_S = 10.0


def _features(text: str) -> list[str]:
    features: list[str] = []
    for word in re.findall(r"\w+", text.lower()):
        padded = f"#{word}#"
        # The "w:" prefix keeps a three-letter word apart from the identical 3-gram inside it.
        features.append(f"w:{word}")
        features.extend(padded[i : i + 3] for i in range(len(padded) - 2))
    return features


class HashedNgrams(EmbeddingProvider):
    """Signed feature hashing of words and character 3-grams: texts sharing words or stems score close."""

    def __init__(self, dim: int = 64, *, fail_times: int = 0, gate: threading.Event | None = None) -> None:
        super().__init__(f"test:hashed-ngrams-{dim}", dim)
        self.size = dim
        self.fail_times = fail_times  # the next N calls to _embed raise RuntimeError
        self.gate = gate  # when given, _embed waits for it (up to GATE_TIMEOUT_S) before answering
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            self.calls.append(list(texts))
            fail = self.fail_times > 0
            if fail:
                self.fail_times -= 1
        if fail:
            raise RuntimeError("scripted failure")
        if self.gate is not None:
            self.gate.wait(GATE_TIMEOUT_S)
        rows = np.zeros((len(texts), self.size), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in _features(text):
                digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
                rows[row, digest % self.size] += 1.0 if digest >> 63 else -1.0
        return rows


@dataclass(frozen=True)
class ReceivedRequest:
    """One request the fake server received."""

    path: str
    headers: dict[str, str]
    body: Any  # the decoded JSON, or None when the body was not JSON


@dataclass
class _Script:
    status: int
    body: str
    remaining: int


@dataclass
class _State:
    provider: HashedNgrams
    reverse: bool
    delay_s: float = 0.0
    requests: list[ReceivedRequest] = field(default_factory=list)
    scripts: list[_Script] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with state.lock:
            state.requests.append(ReceivedRequest(self.path, dict(self.headers.items()), body))
            script = state.scripts[0] if state.scripts else None
            if script is not None:
                script.remaining -= 1
                if script.remaining == 0:
                    state.scripts.pop(0)
        if state.delay_s and state.stopping.wait(state.delay_s):
            return  # shutting down: drop the connection without an answer
        if script is not None:
            self._answer(script.status, script.body.encode(), "text/plain")
            return
        if self.path != "/v1/embeddings":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        texts = body.get("input") if isinstance(body, dict) else None
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or "model" not in body:
            self._json(400, {"error": {"message": "expected {'model': ..., 'input': [str, ...]}"}})
            return
        vectors = state.provider.embed(texts)
        data = [{"object": "embedding", "index": i, "embedding": row.tolist()} for i, row in enumerate(vectors)]
        if state.reverse:
            data.reverse()
        self._json(200, {"object": "list", "model": body["model"], "data": data, "usage": {"prompt_tokens": 0}})

    def _json(self, status: int, payload: Any) -> None:
        self._answer(status, json.dumps(payload).encode(), "application/json")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and hung up is expected in these tests


class FakeEmbeddingServer:
    """A real HTTP server on 127.0.0.1 answering `POST /v1/embeddings` the OpenAI way, with HashedNgrams vectors.

    `data` comes back in reversed order (with correct `index` fields) unless `reverse=False`.
    """

    def __init__(self, dim: int = 64, *, reverse: bool = True, delay_s: float = 0.0) -> None:
        self.provider = HashedNgrams(dim)
        self._state = _State(self.provider, reverse, delay_s)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL a client is configured with, e.g. `http://127.0.0.1:PORT/v1`."""
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def delay_s(self) -> float:
        return self._state.delay_s

    @delay_s.setter
    def delay_s(self, value: float) -> None:
        self._state.delay_s = value

    def answer_next(self, count: int, status: int = 500, body: str = "internal error") -> None:
        """Answer the next `count` requests with `status` and `body` verbatim (an error, or a malformed reply)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._state.lock:
            self._state.scripts.append(_Script(status, body, count))

    def start(self) -> FakeEmbeddingServer:
        self._server = _Server(self._state)
        # A short poll interval keeps shutdown() quick (the default waits up to half a second).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-embeddings", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._state.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeEmbeddingServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
