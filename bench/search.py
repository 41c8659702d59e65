"""How fast is search, and how much memory does it take, at 1k / 10k / 100k (/ 1M) records?

For each size N a fresh SQLite file is filled with N synthetic observations (in large transactions
through the repositories and the indexer, as the services would store them), then a fresh process
opens it with `open_app` (the normal start-up: the index is rebuilt from stored terms) and measures
start-up, resident memory, recall latency (service layer and raw index), the session-start context
and save latency (service layer, synchronous=normal and full). A third fresh process builds naive
`rank_bm25.BM25Okapi` over the very same analysed terms and measures the same things, so the ratios
compare data structures, not tokenisers. Every process is new so that RSS figures mean something.

    python bench/search.py                       # N = 1k, 10k, 100k
    python bench/search.py --sizes 1000,10000    # quicker
    python bench/search.py --million             # adds N = 1M (naive rank-bm25 skipped there)
    python bench/search.py --markdown            # also print the tables as markdown
    python bench/search.py --cpu 1               # pin the measuring processes to one CPU (steadier latencies)

Most of the wall time is filling the databases (about 3.5 minutes at 100k on 2 cores), not measuring.
Targets are printed beside the numbers (at 100k: recall p50 <= 5 ms, save <= 2 ms, rebuild <= 2 s);
nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from _common import code_version, load_note, machine, ms, pct, peak_rss_mib, ratio, rss_mib, secs, table

PROJECT = "bench"
SEED = 20240501
TARGET_N = 100_000
TARGET_RECALL_P50 = 0.005
TARGET_SAVE = 0.002
TARGET_REBUILD = 2.0
# Naive rank-bm25 at N = 100,000 on the machine the targets were set on (recall p50; a full
# rebuild, which naive pays on every save and we compare start-up with): a target scaled by how
# much slower naive runs here is what a slower machine should be held to.
REFERENCE_NAIVE_RECALL = 0.131
REFERENCE_NAIVE_REBUILD = 1.75
NAIVE_MAX_N = 200_000
POPULATE_BATCH = 2_000
SESSION_SIZE = 50

# ---------------------------------------------------------------------------------------------------
# Synthetic corpus: Zipf-distributed words, English function words (all stop words), code
# identifiers, paths and numbers, cut into sentences. Reproducible from the seed, vectorised.


def _words(text: str) -> list[str]:
    return text.split()


FUNCTION_WORDS = _words(
    "the of and to a in is that for it was on with as be by at this are from or have an but not they which "
    "you we were all there been if their has will would can when so what about into more some than then also "
    "only its over just these after other could our do how should because any where"
)
COMMON_WORDS = _words(
    "use file test error fix value run build server user data change update add remove check call return "
    "function config request response cache index query database table record session memory search result "
    "issue bug log time path version module class method type string list default option setting start stop "
    "open close read write load save create delete move copy parse format handle retry timeout lock thread "
    "process worker queue task job event message client connection port host network token key api endpoint "
    "schema migration field column row page limit offset filter sort order group count total size length "
    "disk cpu slow fast failing passing flaky broken works deploy release branch commit merge review patch "
    "docker image container cluster node pod service proxy header cookie auth login password account email"
)
_ONSETS = _words("b c d f g h j k l m n p r s t v w z br cr dr fl gr pl pr sl st tr ch sh th")
_NUCLEI = _words("a e i o u ai ea io ou ee")
_CODAS = ["", "", "", "n", "r", "l", "s", "t", "m", "nd", "st", "x"]
_SUFFIXES = ["", "", "", "", "", "s", "s", "ed", "ing", "er", "ation", "ly", "ment"]
_EXTENSIONS = _words("py py py ts js md json toml yaml rs go sql sh")
_ERRORS = _words("Error Exception Timeout Failure Warning")

# Share of raw tokens per category: function words, content words, identifiers/paths, numbers.
_MIX = (0.40, 0.51, 0.06, 0.03)
_RAW_TOKENS = (44, 176)  # uniform range of raw tokens per record; about 84 analysed terms on average
_SENTENCE_END = 1 / 14
_TYPES = ("note", "note", "decision", "error", "fix", "discovery", "tool_use", "file_change")


def _zipf_cdf(size: int, s: float, q: float) -> np.ndarray:
    weights = 1.0 / np.power(np.arange(size, dtype=np.float64) + q, s)
    cdf = np.cumsum(weights)
    normalised: np.ndarray = cdf / cdf[-1]
    return normalised


class Corpus:
    """A reproducible generator of realistic-looking technical notes."""

    def __init__(self, seed: int = SEED, vocab: int = 60_000, identifiers: int = 20_000, numbers: int = 5_000):
        rng = np.random.default_rng(seed)
        self.seed = seed
        self.words = self._make_words(rng, vocab)
        self.identifiers = self._make_identifiers(rng, identifiers)
        self.numbers = self._make_numbers(rng, numbers)
        pools = [FUNCTION_WORDS, self.words, self.identifiers, self.numbers]
        self.table = np.array([t for pool in pools for t in pool], dtype=object)
        self.offsets = np.cumsum([0] + [len(p) for p in pools])[:-1]
        self.cdfs = [
            _zipf_cdf(len(FUNCTION_WORDS), 0.9, 1.0),
            _zipf_cdf(len(self.words), 1.05, 2.7),
            _zipf_cdf(len(self.identifiers), 0.9, 1.0),
            np.linspace(1 / len(self.numbers), 1.0, len(self.numbers)),
        ]

    @staticmethod
    def _make_words(rng: np.random.Generator, size: int) -> list[str]:
        words = list(dict.fromkeys(COMMON_WORDS))
        seen = set(words) | set(FUNCTION_WORDS)
        while len(words) < size:
            batch = 8192
            syllables = rng.choice([1, 2, 2, 2, 2, 3], batch)
            onsets = rng.integers(0, len(_ONSETS), (batch, 3))
            nuclei = rng.integers(0, len(_NUCLEI), (batch, 3))
            codas = rng.integers(0, len(_CODAS), (batch, 3))
            suffixes = rng.integers(0, len(_SUFFIXES), batch)
            for i in range(batch):
                stem = "".join(
                    _ONSETS[onsets[i, j]] + _NUCLEI[nuclei[i, j]] + _CODAS[codas[i, j]] for j in range(syllables[i])
                )
                word = stem + _SUFFIXES[suffixes[i]]
                if len(word) > 2 and word not in seen:
                    seen.add(word)
                    words.append(word)
                    if len(words) == size:
                        break
        return words

    def _make_identifiers(self, rng: np.random.Generator, size: int) -> list[str]:
        # Identifiers are built from the 3,000 most common words, as real code names are.
        head = self.words[:3000]
        out: set[str] = set()
        while len(out) < size:
            kind = int(rng.integers(0, 6))
            parts = [head[int(i)] for i in rng.integers(0, len(head), int(rng.integers(2, 4)))]
            if kind == 0:
                ident = "_".join(parts)
            elif kind == 1:
                ident = parts[0] + "".join(p.capitalize() for p in parts[1:])
            elif kind == 2:
                ident = "src/" + "/".join(parts[:-1]) + "/" + parts[-1] + "." + str(rng.choice(_EXTENSIONS))
            elif kind == 3:
                ident = ".".join(parts)
            elif kind == 4:
                ident = "".join(p.capitalize() for p in parts[:2]) + str(rng.choice(_ERRORS))
            else:
                ident = parts[0].upper() + "_" + parts[1].upper()
            out.add(ident)
        ordered = sorted(out)
        return [ordered[i] for i in rng.permutation(len(ordered))]

    @staticmethod
    def _make_numbers(rng: np.random.Generator, size: int) -> list[str]:
        out: list[str] = []
        for i in range(size):
            kind = i % 5
            if kind == 0:
                out.append(str(int(rng.integers(0, 100))))
            elif kind == 1:
                out.append(str(int(rng.integers(100, 100_000))))
            elif kind == 2:
                out.append(f"{rng.integers(0, 5)}.{rng.integers(0, 20)}.{rng.integers(0, 30)}")
            elif kind == 3:
                out.append(f"{rng.integers(1, 999)}ms")
            else:
                out.append(str(int(rng.choice([200, 201, 204, 301, 400, 401, 403, 404, 409, 429, 500, 502, 503]))))
        return out

    def _tokens(self, rng: np.random.Generator, count: int) -> np.ndarray:
        cats = rng.choice(len(_MIX), size=count, p=_MIX)
        index = np.empty(count, dtype=np.int64)
        for cat, cdf in enumerate(self.cdfs):
            mask = cats == cat
            index[mask] = np.searchsorted(cdf, rng.random(int(mask.sum()))) + self.offsets[cat]
        return self.table[index]

    def texts(self, start: int, count: int, stream: int = 0) -> list[str]:
        """Records `start`…`start+count-1` of stream `stream` (the same call always gives the same text)."""
        rng = np.random.default_rng([self.seed, stream, start, count])
        lengths = rng.integers(_RAW_TOKENS[0], _RAW_TOKENS[1] + 1, count)
        tokens = self._tokens(rng, int(lengths.sum()))
        ends = np.flatnonzero(rng.random(len(tokens)) < _SENTENCE_END)
        tokens[ends] = [t + "." for t in tokens[ends].tolist()]
        starts = ends[ends + 1 < len(tokens)] + 1
        tokens[starts] = [t[:1].upper() + t[1:] for t in tokens[starts].tolist()]
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        out = []
        for a, b in itertools.pairwise(bounds):
            words = tokens[a:b].tolist()
            words[0] = words[0][:1].upper() + words[0][1:]
            out.append(" ".join(words).rstrip(".") + ".")
        return out

    def chunks(self, n: int, size: int, stream: int = 0) -> Iterator[tuple[int, list[str]]]:
        """(start, texts) for records 0…n-1 in chunks of `size`."""
        for start in range(0, n, size):
            yield start, self.texts(start, min(size, n - start), stream)

    def queries(self, count: int, seed: int = 7) -> list[str]:
        """Plain-text queries of 2–6 words mixing common, mid-frequency and rare terms and identifiers."""
        rng = np.random.default_rng([self.seed, seed])
        out = []
        n_words = len(self.words)
        for _ in range(count):
            words: list[str] = []
            for _ in range(int(rng.integers(2, 7))):
                pick = rng.random()
                if pick < 0.35:  # common: the Zipf head
                    words.append(self.words[int(np.searchsorted(self.cdfs[1], rng.random() * self.cdfs[1][300]))])
                elif pick < 0.70:  # mid: drawn as the corpus draws
                    words.append(self.words[int(np.searchsorted(self.cdfs[1], rng.random()))])
                elif pick < 0.90:  # rare: the long tail, uniformly
                    words.append(self.words[int(rng.integers(n_words // 10, n_words))])
                else:
                    words.append(self.identifiers[int(np.searchsorted(self.cdfs[2], rng.random()))])
            if rng.random() < 0.3:  # people type "how to …", "the …"
                words.insert(int(rng.integers(0, len(words))), FUNCTION_WORDS[int(rng.integers(0, 12))])
            out.append(" ".join(words))
        return out


def _times(start: int, count: int) -> list[str]:
    base = datetime(2024, 1, 1, tzinfo=UTC)
    return [(base + timedelta(minutes=10 * (start + i))).strftime("%Y-%m-%dT%H:%M:%S.%fZ") for i in range(count)]


# ---------------------------------------------------------------------------------------------------
# Workers (each runs in its own process; prints one JSON line on stdout)


def _settings(db: Path, synchronous: str, cache: bool = False) -> Any:
    """Settings for a measuring process; the index cache is off unless a row measures it."""
    from mcp_memory.config import Settings

    return Settings(
        db=db,
        project=PROJECT,
        synchronous=synchronous,
        log_level="WARNING",
        timezone="UTC",  # the stores this makes date their records in UTC, whatever the machine's zone
        index_cache=cache,
        index_cache_min_records=0,
    )


async def _populate(n: int, db: Path) -> dict[str, Any]:
    """Fill `db` with n observations the way the services store them, in large transactions."""
    from mcp_memory.context import open_app
    from mcp_memory.ids import new_id
    from mcp_memory.models.records import Observation, Session
    from mcp_memory.repositories.observations import ObservationRepository
    from mcp_memory.repositories.sessions import SessionRepository
    from mcp_memory.services.compress import TYPE_IMPORTANCE, compress
    from mcp_memory.services.episodic_docs import observation_doc
    from mcp_memory.services.fixes import Cues

    t0 = time.perf_counter()
    corpus = Corpus()
    content_terms = 0
    sampled = 0
    async with open_app(_settings(db, "normal")) as app:
        analyzer = app.deps.index.analyzer
        for start, texts in corpus.chunks(n, POPULATE_BATCH):
            when = _times(start, len(texts))
            async with app.deps.db.transaction("bench_populate", project=PROJECT) as tx:
                sessions, observations = SessionRepository(tx), ObservationRepository(tx)
                specs = []
                session: Session | None = None
                for i, text in enumerate(texts):
                    number = start + i
                    if session is None or number % SESSION_SIZE == 0:
                        last = _times(number + SESSION_SIZE - 1 - number % SESSION_SIZE, 1)[0]
                        session = Session(
                            id=new_id("session"),
                            project=PROJECT,
                            started_at=when[i],
                            last_activity_at=last,
                            ended_at=last,
                            observation_count=SESSION_SIZE,
                            created_at=when[i],
                            updated_at=last,
                        )
                        await sessions.add(session)
                    packed = compress(text)
                    kind = _TYPES[number % len(_TYPES)]
                    obs = Observation(
                        id=new_id("observation"),
                        project=PROJECT,
                        session_id=session.id,
                        seq=number % SESSION_SIZE + 1,
                        type=kind,
                        title=packed.title,
                        content=text,
                        facts=packed.facts,
                        concepts=packed.concepts,
                        files=packed.files,
                        importance=TYPE_IMPORTANCE.get(kind, 0.5),
                        occurred_at=when[i],
                        created_at=when[i],
                    )
                    cues = Cues.of(analyzer, kind, obs.title, text, obs.concepts, obs.files)
                    await observations.add(obs, cues.dump())
                    specs.append(observation_doc(obs))
                    if sampled < 2000:
                        content_terms += len(analyzer.terms(text))
                        sampled += 1
                await app.deps.indexer.put_many(tx, specs)
            if sys.stderr.isatty():
                print(f"  populate N={n:,}: {start + len(texts):,} records", file=sys.stderr, end="\r", flush=True)
        part = app.deps.index.partition(PROJECT)
        assert part is not None
        avg_len = part.total_len / part.n_docs
        vocab = len(app.deps.index.vocab)
        postings = app.deps.index.posting_count()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return {
        "populate_s": time.perf_counter() - t0,
        "content_terms": content_terms / max(sampled, 1),
        "doc_len": avg_len,
        "vocab": vocab,
        "postings": postings,
    }


def _patch_timers(phases: dict[str, float]) -> None:
    """Time the phases of start-up by wrapping (not changing) the code under test."""
    from mcp_memory.repositories.search_docs import SearchDocRepository
    from mcp_memory.search.index import SearchIndex
    from mcp_memory.services.index_build import IndexBuilder

    def wrap_async(cls: Any, name: str, label: str) -> None:
        original = getattr(cls, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                phases[label] = phases.get(label, 0.0) + time.perf_counter() - t

        setattr(cls, name, timed)

    def wrap_sync(cls: Any, name: str, label: str) -> None:
        original = getattr(cls, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                phases[label] = phases.get(label, 0.0) + time.perf_counter() - t

        setattr(cls, name, timed)

    wrap_async(IndexBuilder, "rebuild", "rebuild")
    wrap_async(SearchDocRepository, "all_docs", "read_docs")
    wrap_async(SearchDocRepository, "vocabulary", "read_vocab")
    wrap_sync(SearchIndex, "load", "load")


async def _time_saves(app: Any, corpus: Corpus, count: int, stream: int) -> dict[str, list[float]]:
    observe_texts = corpus.texts(0, count + 5, stream=stream)
    memory_texts = [t[:400] for t in corpus.texts(0, count + 5, stream=stream + 1)]
    observe: list[float] = []
    save: list[float] = []
    for i, text in enumerate(observe_texts):
        t = time.perf_counter()
        await app.episodic.observe(PROJECT, text, "note")
        if i >= 5:  # the first few warm caches up
            observe.append(time.perf_counter() - t)
    for i, text in enumerate(memory_texts):
        t = time.perf_counter()
        await app.memories.save(PROJECT, text, "fact")
        if i >= 5:
            save.append(time.perf_counter() - t)
    return {"observe": observe, "save": save}


async def _ours(n: int, db: Path, queries: int, saves: int) -> dict[str, Any]:
    from mcp_memory.context import open_app
    from mcp_memory.search.index import SearchFilter
    from mcp_memory.services.search import EPISODIC_KINDS

    phases: dict[str, float] = {}
    _patch_timers(phases)
    corpus = Corpus()
    texts = corpus.queries(queries)
    base_rss = await _baseline_rss(texts[0])
    phases.clear()
    out: dict[str, Any] = {"baseline_rss": base_rss}

    async with AsyncExitStack() as stack:
        t = time.perf_counter()
        app = await stack.enter_async_context(open_app(_settings(db, "normal")))
        out["open_s"] = time.perf_counter() - t
        out["phases"] = dict(phases)
        out["rss"] = rss_mib() - base_rss
        out["peak"] = peak_rss_mib() - base_rss
        out["docs"] = app.deps.index.doc_count()

        flt = SearchFilter(kinds=EPISODIC_KINDS)
        index = app.deps.index
        for q in texts[:10]:  # warm-up
            index.search(PROJECT, q, flt, 10)
            await app.search.recall(PROJECT, q, limit=10)
        raw, top = [], []
        partition = index.partition(PROJECT)
        assert partition is not None
        for q in texts:
            t = time.perf_counter()
            index.search(PROJECT, q, flt, 10)
            raw.append(time.perf_counter() - t)
            # the pure Okapi scores, before the ranking steps, are what must equal rank-bm25's
            _, okapi = partition.scores(index.query_terms(q))
            top.append(sorted(okapi.tolist(), reverse=True)[:10])
        service = []
        for q in texts:
            t = time.perf_counter()
            await app.search.recall(PROJECT, q, limit=10)
            service.append(time.perf_counter() - t)
        out["raw"], out["service"], out["top"] = raw, service, top
        contexts = []  # what every session opens with: the compiled context, without and with a query
        for focus in [None, *texts[:19]]:
            t = time.perf_counter()
            await app.context.compile(PROJECT, query=focus)
            contexts.append(time.perf_counter() - t)
        out["context"] = contexts
        out["query_terms"] = float(np.mean([len(index.query_terms(q)) for q in texts]))
        out["features"] = _feature_costs(index, texts)
        out["normal"] = await _time_saves(app, corpus, saves, stream=1)

    phases.clear()
    async with open_app(_settings(db, "full")) as app:
        out["reopen_rebuild_s"] = phases.get("rebuild", float("nan"))
        out["full"] = await _time_saves(app, corpus, saves, stream=3)
    out["stdio"] = await _stdio_start(db, texts[0], cache=False)
    return out


async def _baseline_rss(query: str) -> float:
    """RSS once lazy imports, SQLite and its threads are loaded: open and close an empty database."""
    from mcp_memory.context import open_app

    with tempfile.TemporaryDirectory() as empty:
        async with open_app(_settings(Path(empty) / "empty.db", "normal")) as app:
            await app.search.recall(PROJECT, query)
    gc.collect()
    return rss_mib()


async def _cache_write(db: Path) -> dict[str, Any]:
    """Open with the index cache on and no cache yet: the rebuild, then the cache written after it."""
    from mcp_memory.context import open_app
    from mcp_memory.search.cache import cache_path, discard

    path = cache_path(db)
    discard(path)
    async with open_app(_settings(db, "normal", cache=True)) as app:
        builder = app.deps.builder
        for _ in range(2):  # the write the rebuild started, then a timed one of the same index
            t = time.perf_counter()
            task = builder.write_cache(app.deps.db)
            if task is None or not await task:
                raise SystemExit("the index cache was not written")
            write_s = time.perf_counter() - t
    return {"write_s": write_s, "cache_mib": path.stat().st_size / 2**20}


async def _cached(db: Path, query: str) -> dict[str, Any]:
    """Open with a current index cache: start-up time and memory, then a spawned stdio server's."""
    from mcp_memory.context import open_app

    base = await _baseline_rss(query)
    t = time.perf_counter()
    async with open_app(_settings(db, "normal", cache=True)) as app:
        out: dict[str, Any] = {"open_s": time.perf_counter() - t, "source": app.deps.builder.source}
        out["rss"], out["peak"] = rss_mib() - base, peak_rss_mib() - base
        if out["source"] != "cache":
            raise SystemExit("the index was rebuilt instead of loaded from its cache")
    out["stdio"] = await _stdio_start(db, query, cache=True)
    return out


async def _stdio_start(db: Path, query: str, cache: bool) -> dict[str, float]:
    """Seconds from spawning `mcp-memory serve` over stdio to its handshake and to its first recall.

    The server builds its index after the handshake; the first call waits for the build.
    """
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mcp_memory",
            "serve",
            "--db",
            str(db),
            "--project",
            PROJECT,
            "--log-level",
            "WARNING",
            "--index-cache" if cache else "--no-index-cache",
        ],
    )
    t = time.perf_counter()
    async with Client(server) as client:
        handshake = time.perf_counter() - t
        result = await client.call_tool("memory_recall", {"query": query, "limit": 10})
        if result.is_error:
            raise SystemExit(f"memory_recall over stdio failed: {result.content}")
        first = time.perf_counter() - t
    return {"handshake": handshake, "first_recall": first}


VECTOR_DIM = 384  # all-MiniLM-L6-v2's; the cost of exact cosine grows with it


def _feature_costs(index: Any, texts: list[str]) -> dict[str, Any]:
    """Raw index.search latency with the ranking steps added one at a time, then vectors (random,
    unit length: the cost of exact cosine top-k does not depend on what the vectors mean)."""
    from mcp_memory.search.index import SearchFilter
    from mcp_memory.search.ranking import RankParams
    from mcp_memory.services.search import EPISODIC_KINDS

    partition = index.partition(PROJECT)
    flt = SearchFilter(kinds=EPISODIC_KINDS)
    now = time.time()
    full = partition.rank
    off = RankParams(before=0, after=0, window=0, session=0, importance=0, recency=0)
    steps: list[tuple[str, RankParams, float | None]] = [
        ("Okapi BM25 only", off, None),
        ("+ context from neighbours", RankParams(before=full.before, after=full.after, window=full.window,
                                                 session=0, importance=0, recency=0), None),
        ("+ session evidence", RankParams(before=full.before, after=full.after, window=full.window,
                                          session=full.session, importance=0, recency=0), None),
        ("+ importance and recency, dates in the query (default)", full, now),
    ]  # fmt: skip
    out: dict[str, Any] = {}
    for name, rank, when in steps:
        partition.rank = rank
        out[name] = _timed(lambda q, when=when: index.search(PROJECT, q, flt, 10, now=when), texts)
    partition.rank = full

    rng = np.random.default_rng(SEED)
    keys = [k for k in partition.keys if k is not None]
    gc.collect()
    before = rss_mib()
    vectors = rng.standard_normal((len(keys), VECTOR_DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    digests = np.array([partition.attrs_of(k).digest for k in keys], dtype=np.int64)
    partition.set_vectors(keys, digests, vectors)
    del vectors
    gc.collect()
    out["vector_rss"] = rss_mib() - before
    queries = rng.standard_normal((len(texts), VECTOR_DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    by_text = {q: queries[i] for i, q in enumerate(texts)}
    out[f"+ vectors ({VECTOR_DIM} dims): exact cosine top-k and fusion"] = _timed(
        lambda q: index.search(PROJECT, q, flt, 10, now=now, vector=by_text[q]), texts
    )
    low = index._low_filter(flt)  # the partition-level filter (codes, not names)
    out["vectors alone: cosine over every record"] = _timed(lambda q: partition.nearest(by_text[q], low, 100), texts)
    index.drop_vectors()
    return out


def _timed(run: Any, texts: list[str]) -> list[float]:
    for q in texts[:10]:  # warm-up
        run(q)
    times = []
    for q in texts:
        t = time.perf_counter()
        run(q)
        times.append(time.perf_counter() - t)
    return times


def _naive(n: int, db: Path, queries: int, saves: int) -> dict[str, Any]:
    import sqlite3

    from rank_bm25 import BM25Okapi

    from mcp_memory.config import Settings
    from mcp_memory.search import dates
    from mcp_memory.search.analyzer import Analyzer
    from mcp_memory.search.postings import decode_terms
    from mcp_memory.services.compress import compress

    analyzer = Analyzer()
    corpus = Corpus()
    texts = corpus.queries(queries)
    gc.collect()
    rss0 = rss_mib()
    # The same tokenised corpus our index holds: each stored record's terms, repeated by count.
    conn = sqlite3.connect(db)
    names = {i: term for term, i in conn.execute("SELECT term, id FROM search_terms")}
    docs: list[list[str]] = []
    words: list[int] = []  # each record's length as our index counts it: its date tokens left out
    for (blob,) in conn.execute("SELECT terms FROM search_docs ORDER BY rowid"):
        pairs = decode_terms(blob)
        doc: list[str] = []
        for t, f in zip(pairs["t"].tolist(), pairs["f"].tolist(), strict=True):
            doc.extend([names[t]] * f)
        docs.append(doc)
        words.append(sum(1 for term in doc if not term.startswith(dates.PREFIX)))
    conn.close()
    gc.collect()
    rss1 = rss_mib()
    # the same k1 and b as our index, so the scores can be compared
    k1, b = Settings.model_fields["bm25_k1"].default, Settings.model_fields["bm25_b"].default
    t = time.perf_counter()
    model = BM25Okapi(docs, k1=k1, b=b)
    build = time.perf_counter() - t
    # Dates say when, not what, so our index leaves them out of a record's length (README, "How
    # recall ranks"); rank-bm25 then scores with those lengths, its idf still over every term.
    model.doc_len, model.avgdl = words, sum(words) / max(len(words), 1)
    gc.collect()
    out: dict[str, Any] = {"build_s": build, "rss": rss_mib() - rss1, "rss_tokens": rss1 - rss0, "docs": len(docs)}

    k = 10
    qterms = [analyzer.terms(q) for q in texts]
    times, top = [], []
    for terms in qterms:
        t = time.perf_counter()
        scores = model.get_scores(terms)
        best = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
        best = best[np.argsort(-scores[best])]
        times.append(time.perf_counter() - t)
        top.append([float(s) for s in scores[best] if s > 0])
    out["query"], out["top"] = times, top
    del model
    gc.collect()

    # A "save" with rank-bm25 is a full rebuild over the corpus plus the new document.
    rounds = min(saves, max(5, 300_000 // max(n, 1)))
    extra = corpus.texts(0, rounds, stream=1)
    rebuilds = []
    for text in extra:
        packed = compress(text)
        fields = (packed.title, " ".join(packed.facts), " ".join(packed.concepts), " ".join(packed.files), text)
        doc = [t for field in fields for t in analyzer.terms(field)]
        docs.append(doc)
        t = time.perf_counter()
        BM25Okapi(docs, k1=k1, b=b)
        rebuilds.append(time.perf_counter() - t)
    out["save"] = rebuilds
    return out


def _worker(args: argparse.Namespace) -> None:
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    db = Path(args.db)
    if args.worker == "populate":
        result = asyncio.run(_populate(args.n, db))
        result["db_mib"] = sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 2**20
    elif args.worker == "ours":
        result = asyncio.run(_ours(args.n, db, args.queries, args.saves))
    elif args.worker == "cache_write":
        result = asyncio.run(_cache_write(db))
    elif args.worker == "cached":
        result = asyncio.run(_cached(db, Corpus().queries(1)[0]))
    else:
        result = _naive(args.n, db, args.queries, args.saves)
    print(json.dumps(result))


def _run_worker(kind: str, n: int, db: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        kind,
        "--n",
        str(n),
        "--db",
        str(db),
        "--queries",
        str(args.queries),
        "--saves",
        str(args.saves),
        *(["--cpu", str(args.cpu)] if args.cpu is not None else []),
    ]
    t = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} worker for N={n} failed with exit code {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - t
    print(f"  {kind:8} N={n:>9,}: {result['wall_s']:.1f} s", file=sys.stderr, flush=True)
    return result


# ---------------------------------------------------------------------------------------------------
# Report


def _p(values: list[float]) -> tuple[float, float]:
    return pct(values, 50), pct(values, 95)


def _pp(values: list[float]) -> str:
    p50, p95 = _p(values)
    return f"{ms(p50)} / {ms(p95)}"


def _target(n: int, value: float, limit: float, naive: float | None, reference: float) -> str:
    """The verdict on a target as set, and on the same target scaled by naive's speed here."""
    if n != TARGET_N:
        return ""

    def shown(seconds: float) -> str:
        return f"{ms(seconds)} ms" if seconds < 1 else f"{secs(seconds)} s"

    verdict = f"{'met' if value <= limit else 'MISSED'} (<= {shown(limit)})"
    if naive is None:
        return verdict
    scale = naive / reference
    scaled = limit * scale
    return f"{verdict}; naive x{scale:.2f}: {'met' if value <= scaled else 'MISSED'} (<= {shown(scaled)})"


def _agreement(ours: list[list[float]], naive: list[list[float]]) -> str:
    same = sum(
        1
        for a, b in zip(ours, naive, strict=True)
        if len(a) == len(b) and all(abs(x - y) <= 1e-6 * max(1.0, abs(y)) for x, y in zip(a, b, strict=True))
    )
    return f"{same}/{len(ours)}"


def report(results: dict[int, dict[str, Any]], args: argparse.Namespace, wall: float) -> str:
    sizes = sorted(results)
    header = [
        "bench/search.py - search speed and memory of mcp-memory's BM25 index vs naive rank_bm25.BM25Okapi",
        f"machine: {machine()}; code: {code_version()}",
        load_note(),
        f"sizes N = {', '.join(f'{n:,}' for n in sizes)}; {args.queries} queries and {args.saves} saves per size "
        "(plus warm-up); synthetic notes, seed "
        f"{SEED}; every N populated, measured and compared in fresh processes; total wall time {wall:.0f} s",
        "Times: p50 / p95 in milliseconds unless marked s. Ratios: naive / ours (higher = ours faster/smaller). "
        + (f"Workers pinned to CPU {args.cpu}." if args.cpu is not None else "Workers not pinned to a CPU."),
        "",
    ]
    md = args.markdown_now

    corpus_rows = []
    for n in sizes:
        pop = results[n]["populate"]
        corpus_rows.append(
            [
                f"{n:,}",
                f"{pop['content_terms']:.1f}",
                f"{pop['doc_len']:.1f}",
                f"{pop['vocab']:,}",
                f"{pop['postings']:,}",
                f"{pop['db_mib']:.1f}",
                secs(pop["populate_s"]),
            ]
        )
    tables = [
        table(
            "Corpus (observations; indexed text = title + facts + concepts + files + content, as observe stores it)",
            ["N", "terms/content", "terms/indexed doc", "vocabulary", "postings", "DB MiB", "populate s"],
            corpus_rows,
            markdown=md,
        )
    ]

    rebuild_rows = []
    for n in sizes:
        ours, naive = results[n]["ours"], results[n].get("naive")
        ph = ours["phases"]
        rebuild = ph.get("rebuild", float("nan"))
        naive_build = naive["build_s"] if naive else None
        rebuild_rows.append(
            [
                f"{n:,}",
                secs(ours["open_s"]),
                secs(rebuild),
                secs(ph.get("read_docs", 0) + ph.get("read_vocab", 0)),
                secs(ph.get("load", float("nan"))),
                secs(ours["reopen_rebuild_s"]),
                secs(ours["stdio"]["handshake"]),
                secs(ours["stdio"]["first_recall"]),
                secs(naive_build) if naive_build is not None else "skipped",
                ratio(naive_build, rebuild),
                _target(
                    n,
                    rebuild,
                    TARGET_REBUILD,
                    pct(naive["save"], 50) if naive else None,  # the reference is the same rebuild after a save
                    REFERENCE_NAIVE_REBUILD,
                ),
            ]
        )
    tables.append(
        table(
            "Start-up: open_app entry and Indexer.rebuild from stored terms (s); naive = BM25Okapi(corpus);"
            " stdio = a spawned `mcp-memory serve` answering the handshake / its first recall",
            [
                "N",
                "open_app",
                "rebuild",
                "SQL read",
                "index.load",
                "2nd open",
                "stdio handshake",
                "stdio 1st recall",
                "naive build",
                "ratio",
                "target",
            ],
            rebuild_rows,
            markdown=md,
        )
    )

    cache_rows = []
    for n in sizes:
        ours, cached, written = results[n]["ours"], results[n]["cached"], results[n]["cache_write"]
        cache_rows.append(
            [
                f"{n:,}",
                f"{written['cache_mib']:.1f}",
                secs(written["write_s"]),
                f"{secs(ours['open_s'])} / {secs(cached['open_s'])}",
                ratio(ours["open_s"], cached["open_s"]),
                f"{secs(ours['stdio']['first_recall'])} / {secs(cached['stdio']['first_recall'])}",
                f"{ours['rss']:.0f} / {cached['rss']:.0f}",
                f"{ours['peak']:.0f} / {cached['peak']:.0f}",
            ]
        )
    tables.append(
        table(
            "Start-up from the index cache: rebuilt from stored terms / loaded from the cache (s; MiB over the"
            " baseline); the cache is written in the background after a rebuild",
            ["N", "cache MiB", "write s", "open_app", "ratio", "stdio 1st recall", "RSS after", "RSS peak"],
            cache_rows,
            markdown=md,
        )
    )

    save_rows = []
    for n in sizes:
        ours, naive = results[n]["ours"], results[n].get("naive")
        normal, full = ours["normal"], ours["full"]
        naive_p50 = pct(naive["save"], 50) if naive else None
        ours_p50 = pct(normal["observe"], 50)
        save_rows.append(
            [
                f"{n:,}",
                _pp(normal["observe"]),
                _pp(full["observe"]),
                _pp(normal["save"]),
                _pp(full["save"]),
                f"{_pp(naive['save'])} (x{len(naive['save'])})" if naive else "skipped",
                ratio(naive_p50, ours_p50),
                _target(n, ours_p50, TARGET_SAVE, naive_p50, REFERENCE_NAIVE_REBUILD),
            ]
        )
    tables.append(
        table(
            "Save at the service layer (ms, p50 / p95): episodic.observe and memories.save; "
            "naive = full BM25Okapi rebuild after adding one doc",
            [
                "N",
                "observe normal",
                "observe full",
                "mem.save normal",
                "mem.save full",
                "naive rebuild",
                "ratio",
                "target (observe, normal)",
            ],
            save_rows,
            markdown=md,
        )
    )

    recall_rows = []
    for n in sizes:
        ours, naive = results[n]["ours"], results[n].get("naive")
        naive_p50 = pct(naive["query"], 50) if naive else None
        recall_rows.append(
            [
                f"{n:,}",
                _pp(ours["service"]),
                _pp(ours["raw"]),
                _pp(naive["query"]) if naive else "skipped",
                ratio(naive_p50, pct(ours["raw"], 50)),
                ratio(naive_p50, pct(ours["service"], 50)),
                _agreement(ours["top"], naive["top"]) if naive else "-",
                _target(n, pct(ours["service"], 50), TARGET_RECALL_P50, naive_p50, REFERENCE_NAIVE_RECALL),
            ]
        )
    tables.append(
        table(
            "Recall, top 10 (ms, p50 / p95): search.recall (service), index.search (raw), naive get_scores + top-k",
            ["N", "service", "raw index", "naive", "ratio raw", "ratio service", "same top-10 scores", "target"],
            recall_rows,
            markdown=md,
        )
    )

    tables.append(
        table(
            "Session-start context: context.compile (what memory_context returns), 20 calls (ms, p50 / p95)",
            ["N", "context"],
            [[f"{n:,}", _pp(results[n]["ours"]["context"])] for n in sizes],
            markdown=md,
        )
    )

    feature_names = [k for k in results[sizes[0]]["ours"]["features"] if k != "vector_rss"]
    feature_rows = [[name, *(_pp(results[n]["ours"]["features"][name]) for n in sizes)] for name in feature_names]
    feature_rows.append(
        ["RSS of the vectors (MiB)", *(f"{results[n]['ours']['features']['vector_rss']:.1f}" for n in sizes)]
    )
    tables.append(
        table(
            "Query cost of each ranking step: raw index.search, top 10 (ms, p50 / p95; each row adds to the one above)",
            ["step", *(f"N = {n:,}" for n in sizes)],
            feature_rows,
            markdown=md,
        )
    )

    mem_rows = []
    for n in sizes:
        ours, naive = results[n]["ours"], results[n].get("naive")
        mem_rows.append(
            [
                f"{n:,}",
                f"{ours['baseline_rss']:.0f}",
                f"{ours['rss']:.1f}",
                f"{ours['peak']:.1f}",
                f"{naive['rss']:.1f}" if naive else "skipped",
                f"{naive['rss_tokens']:.1f}" if naive else "-",
                ratio(naive["rss"], ours["rss"]) if naive else "-",
            ]
        )
    tables.append(
        table(
            "Memory (MiB): RSS growth over the process baseline after start-up",
            ["N", "baseline RSS", "ours after rebuild", "ours peak", "naive model", "naive token lists", "ratio"],
            mem_rows,
            markdown=md,
        )
    )
    notes = [
        "Notes: 'naive model' excludes the token lists rank-bm25 needs kept to rebuild on every save (shown apart).",
        "'same top-10 scores': queries whose top-10 positive Okapi scores (before the ranking steps) equal "
        "rank-bm25's with the same k1 and b (1e-6 rel.).",
        "Vector rows use random unit vectors and exclude embedding the query (model-dependent: see bench/locomo.py).",
        f"Targets are for N = {TARGET_N:,} and are not asserted. They were set where naive rank-bm25 took "
        f"{ms(REFERENCE_NAIVE_RECALL)} ms a query and {secs(REFERENCE_NAIVE_REBUILD)} s a rebuild; "
        "'naive xF' holds this run to them scaled by how much slower (F > 1) naive ran here.",
    ]
    if any("naive" not in results[n] for n in sizes):
        notes.append(f"Naive rank-bm25 is skipped above N = {NAIVE_MAX_N:,} (minutes per build, GBs of dicts).")
    return "\n".join(header) + "\n" + "\n".join(tables) + "\n" + "\n".join(notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated record counts")
    parser.add_argument("--million", action="store_true", help="also run N = 1,000,000")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per size")
    parser.add_argument("--saves", type=int, default=200, help="timed saves per kind and setting")
    parser.add_argument("--markdown", action="store_true", help="also print the tables as markdown")
    parser.add_argument("--json", metavar="FILE", help="write the raw measurements to FILE")
    parser.add_argument("--cpu", type=int, help="pin the measuring processes to this CPU (less thread-handoff noise)")
    parser.add_argument(
        "--worker", choices=["populate", "ours", "cache_write", "cached", "naive"], help=argparse.SUPPRESS
    )
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    if args.million and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    started = time.perf_counter()
    results: dict[int, dict[str, Any]] = {}
    for n in sorted(sizes):
        folder = Path(tempfile.mkdtemp(prefix=f"mcp-memory-bench-{n}-"))
        try:
            db = folder / "memory.db"
            entry = {"populate": _run_worker("populate", n, db, args)}
            if n <= NAIVE_MAX_N:  # naive only reads, so it runs first on the DB exactly as populated
                entry["naive"] = _run_worker("naive", n, db, args)
            entry["ours"] = _run_worker("ours", n, db, args)
            entry["cache_write"] = _run_worker("cache_write", n, db, args)
            entry["cached"] = _run_worker("cached", n, db, args)
            results[n] = entry
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    wall = time.perf_counter() - started
    if args.json:
        Path(args.json).write_text(json.dumps(results))
    args.markdown_now = False
    print(report(results, args, wall))
    if args.markdown:
        args.markdown_now = True
        print(report(results, args, wall))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
