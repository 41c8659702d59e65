"""Embedding providers: turn texts into unit-length vectors for the semantic half of hybrid search.

Providers are optional and none is configured by default; without one, search is BM25 only. A local
sentence-transformers model needs the `embeddings` extra; an OpenAI-compatible endpoint (OpenAI, Ollama,
llama.cpp, vLLM...) needs nothing beyond the standard library.
"""

from __future__ import annotations

import http.client
import importlib
import json
import threading
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memory.config import check_http_url, shown_url

DEFAULT_SENTENCE_TRANSFORMER = "sentence-transformers/all-MiniLM-L6-v2"
PROVIDER_KINDS = ("none", "sentence-transformers", "openai")

_INSTALL_HINT = (
    "install the extra: pip install 'mcp-memory[embeddings]' (on a CPU-only machine, install torch first "
    "from the CPU wheel: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


class EmbeddingError(Exception):
    """A provider could not produce vectors; the message says what failed and where, never a secret.

    `unreachable`: the model could not be reached, loaded or did not answer (a refused connection, a
    timeout, a server error): no text of the batch is to blame, so splitting the batch cannot help.
    """

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class EmbeddingProvider(ABC):
    """Turns texts into L2-normalised float32 rows; subclasses implement `_embed` only."""

    def __init__(self, name: str, dim: int | None = None) -> None:
        # The name is stored next to every vector: a different name means the stored vectors are stale.
        self.name = name
        self._dim = dim

    @property
    def dim(self) -> int | None:
        """Vector length, once known (up front for some providers, else from the first successful embed); the
        latest embed's, should the model behind the name change (its old vectors are then replaced)."""
        return self._dim

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @abstractmethod
    def _embed(self, texts: Sequence[str]) -> npt.ArrayLike:
        """Return one row per text, in order; blocking (it runs in a worker thread)."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed `texts` into a C-contiguous float32 array of unit-length rows (an all-zero row stays zero)."""
        if isinstance(texts, str):
            # A bare string is a Sequence[str] of characters: embedding each letter is never what was meant.
            raise TypeError("embed() takes a sequence of texts, not a single string")
        batch = list(texts)
        if not batch:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        try:
            raw = self._embed(batch)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"{self.name}: embedding failed: {type(exc).__name__}: {exc}") from exc
        rows = self._validate(raw, len(batch))
        # Another length than before means another model behind the name (a re-pulled Ollama tag): the
        # embedder sees the new length and embeds every record again, rather than failing for good.
        self._dim = rows.shape[1]
        return rows

    def _validate(self, raw: npt.ArrayLike, count: int) -> npt.NDArray[np.float32]:
        try:
            rows = np.array(raw, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(f"{self.name}: vectors are ragged or not numeric ({exc})") from exc
        if rows.ndim != 2:
            raise EmbeddingError(f"{self.name}: expected a 2-D array of vectors, got shape {rows.shape}")
        if rows.shape[0] != count:
            raise EmbeddingError(f"{self.name}: got {rows.shape[0]} vectors for {count} texts")
        if rows.shape[1] < 1:
            raise EmbeddingError(f"{self.name}: vectors are empty")
        if not np.isfinite(rows).all():
            raise EmbeddingError(f"{self.name}: vectors contain NaN or infinite values")
        # Scale by the largest component first so squaring huge (but finite) values cannot overflow.
        scale = np.abs(rows).max(axis=1, keepdims=True)
        np.divide(rows, scale, out=rows, where=scale > 0)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        np.divide(rows, norms, out=rows, where=norms > 0)
        return np.ascontiguousarray(rows, dtype=np.float32)


class SentenceTransformerProvider(EmbeddingProvider):
    """A local sentence-transformers model, by hub name or folder path; loaded on first use."""

    def __init__(self, model: str, device: str = "cpu", batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError("batch_size: must be at least 1")
        super().__init__(f"sentence-transformers:{model}")
        self.model = model
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _load(self) -> Any:
        # Importing torch and reading the weights takes seconds, so it happens on the first embed, once.
        with self._load_lock:
            if self._model is not None:
                return self._model
            try:
                module = importlib.import_module("sentence_transformers")
            except ImportError as exc:
                raise EmbeddingError(
                    f"{self.name}: sentence-transformers is not installed or does not import ({exc}); {_INSTALL_HINT}",
                    unreachable=True,
                ) from exc
            try:
                model = module.SentenceTransformer(self.model, device=self.device)
            except Exception as exc:
                raise EmbeddingError(
                    f"{self.name}: could not load model {self.model!r} on {self.device!r} (not a model folder, "
                    f"or not downloadable and not cached - offline?): {type(exc).__name__}: {str(exc)[:300]}",
                    unreachable=True,
                ) from exc
            dim = _model_dimension(model)
            if dim is not None:
                self._dim = dim
            self._model = model
            return model

    def _embed(self, texts: Sequence[str]) -> npt.ArrayLike:
        model = self._load()
        vectors: npt.ArrayLike = model.encode(
            list(texts),
            convert_to_numpy=True,
            normalize_embeddings=True,
            batch_size=self.batch_size,
            show_progress_bar=False,
        )
        return vectors


def _model_dimension(model: Any) -> int | None:
    # Recent sentence-transformers renamed the method (the old name warns); an unknown size is learnt on first embed.
    for method in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        if hasattr(model, method):
            try:
                dim = getattr(model, method)()
            except Exception:
                return None
            return dim if type(dim) is int and dim > 0 else None
    return None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # urllib would replay the Authorization header to wherever a redirect points; a 3xx becomes an error instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class OpenAICompatibleProvider(EmbeddingProvider):
    """An OpenAI-style `POST {url}/embeddings` endpoint: OpenAI itself, Ollama (`http://127.0.0.1:11434/v1`)..."""

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        try:
            check_http_url(url)
        except ValueError as exc:
            raise ValueError(f"embedding_url: {exc}") from None
        if not timeout_s > 0:
            raise ValueError("embedding_timeout: must be more than 0 seconds")
        if batch_size < 1:
            raise ValueError("batch_size: must be at least 1")
        super().__init__(f"openai:{model}")
        self.url = url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.batch_size = batch_size
        self._endpoint = f"{self.url}/embeddings"
        self._shown_endpoint = shown_url(self._endpoint)
        self._api_key = api_key or None
        self._opener = urllib.request.build_opener(_NoRedirects)

    def __repr__(self) -> str:
        key = "<set>" if self._api_key else None
        return f"OpenAICompatibleProvider(url={shown_url(self.url)!r}, model={self.model!r}, api_key={key})"

    def _embed(self, texts: Sequence[str]) -> npt.ArrayLike:
        rows: list[list[Any]] = []
        for start in range(0, len(texts), self.batch_size):
            rows.extend(self._post(texts[start : start + self.batch_size]))
        return rows

    def _post(self, batch: Sequence[str]) -> list[list[Any]]:
        body = json.dumps({"model": self.model, "input": list(batch)}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self._endpoint, data=body, headers=headers, method="POST")
        where = self._shown_endpoint
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                raw: bytes = response.read()
        except urllib.error.HTTPError as exc:
            detail = self._excerpt(_read_quietly(exc))
            # 4xx but 429 is about the request (a text too long, say); 429 and 5xx about the server
            busy = exc.code == 429 or exc.code >= 500
            raise EmbeddingError(f"{self.name}: {where} answered HTTP {exc.code}: {detail}", unreachable=busy) from None
        except TimeoutError:
            late = f"{self.name}: {where} did not answer within {self.timeout_s:g} s"
            raise EmbeddingError(late, unreachable=True) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                late = f"{self.name}: {where} did not answer within {self.timeout_s:g} s"
                raise EmbeddingError(late, unreachable=True) from None
            raise EmbeddingError(f"{self.name}: cannot reach {where}: {exc.reason}", unreachable=True) from None
        except (OSError, http.client.HTTPException) as exc:
            failed = f"{self.name}: connection to {where} failed: {type(exc).__name__}: {exc}"
            raise EmbeddingError(failed, unreachable=True) from None
        return self._parse(raw, len(batch))

    def _parse(self, raw: bytes, count: int) -> list[list[Any]]:
        where = self._shown_endpoint
        try:
            payload = json.loads(raw)
        except ValueError:
            raise EmbeddingError(
                f"{self.name}: {where} answered with something that is not JSON: {self._excerpt(raw)}"
            ) from None
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise EmbeddingError(f"{self.name}: {where} answered without a `data` list: {self._excerpt(raw)}")
        if len(data) != count:
            raise EmbeddingError(f"{self.name}: {where} returned {len(data)} embeddings for {count} texts")
        indexes = [item.get("index") for item in data]
        if any(index is not None for index in indexes):
            # Servers may answer out of order; `index` says which input each vector belongs to.
            if sorted(i if type(i) is int else -1 for i in indexes) != list(range(count)):
                raise EmbeddingError(f"{self.name}: {where} returned embedding indexes {indexes[:20]!r}")
            data = sorted(data, key=lambda item: int(item["index"]))
        vectors = [item.get("embedding") for item in data]
        if not all(isinstance(vector, list) for vector in vectors):
            raise EmbeddingError(f"{self.name}: {where} returned an item without an `embedding` list")
        return vectors

    def _excerpt(self, text: str | bytes) -> str:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if self._api_key:
            # A server may echo the key back in its error; it must not end up in logs.
            text = text.replace(self._api_key, "***")
        text = " ".join(text.split())
        return text[:200] if text else "(empty body)"


def _read_quietly(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read(4096)
    except Exception:
        return b""


def provider_from_settings(
    kind: str, model: str | None, url: str, api_key: str | None, timeout_s: float
) -> EmbeddingProvider | None:
    """Build the configured provider (nothing is loaded or contacted yet); None when embeddings are off."""
    if kind == "none":
        return None
    if kind == "sentence-transformers":
        return SentenceTransformerProvider(model if model is not None else DEFAULT_SENTENCE_TRANSFORMER)
    if kind == "openai":
        if model is None:
            raise ValueError("embedding_model: required for the openai provider")
        return OpenAICompatibleProvider(url, model, api_key=api_key, timeout_s=timeout_s)
    expected = ", ".join(repr(k) for k in PROVIDER_KINDS)
    raise ValueError(f"embeddings: unknown provider {kind!r}; expected one of {expected}")
