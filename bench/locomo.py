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

    python bench/locomo.py                        # every conversation in ../shared/data/locomo/
    python bench/locomo.py --limit-questions 20   # quick: first 20 questions per conversation
    python bench/locomo.py --data path/to/locomo10.json --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import json
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
            ids: list[str] = []
            for raw in qa.get("evidence") or []:
                ids.extend(normalise_evidence(str(raw), report))
            missing = [e for e in ids if e not in known]
            report.dangling.extend(f"{cid}/{e}" for e in missing)
            evidence = list(dict.fromkeys(e for e in ids if e in known))
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

    def add(self, category: int, ranked_refs: Sequence[str | None], evidence: Sequence[str]) -> None:
        wanted = set(evidence)
        recalls = tuple(len(wanted & set(ranked_refs[:k])) / len(wanted) for k in KS)
        first = next((i + 1 for i, ref in enumerate(ranked_refs[:LIMIT]) if ref in wanted), None)
        self.rows[category].append((*recalls, 1.0 / first if first else 0.0))

    def summary(self, categories: Sequence[int] | None) -> tuple[int, list[float]]:
        rows = [r for c, rs in self.rows.items() if categories is None or c in categories for r in rs]
        if not rows:
            return 0, [float("nan")] * (len(KS) + 1)
        return len(rows), np.mean(np.asarray(rows), axis=0).tolist()


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


async def ours_run(conversations: Sequence[Conversation], db: Path) -> tuple[Scores, dict[str, Any]]:
    """Observe every turn and ask every question through an in-process MCP client."""
    from mcp import Client

    from mcp_memory.config import Settings
    from mcp_memory.server import build_server

    settings = Settings(db=db, project="locomo", synchronous="normal", log_level="WARNING")
    scores = Scores()
    observe_times: list[float] = []
    recall_times: list[float] = []
    async with Client(build_server(settings)) as client:

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            if result.is_error or result.structured_content is None:
                text = " ".join(getattr(block, "text", "") for block in result.content)
                raise RuntimeError(f"{tool} failed: {text}")
            return result.structured_content

        for conv in conversations:
            project = f"locomo-{conv.cid}"
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
                start = time.perf_counter()
                await call("memory_observe", arguments)
                observe_times.append(time.perf_counter() - start)
        for conv in conversations:
            project = f"locomo-{conv.cid}"
            for q in conv.questions:
                start = time.perf_counter()
                found = await call("memory_recall", {"query": q.text, "limit": LIMIT, "project": project})
                recall_times.append(time.perf_counter() - start)
                scores.add(q.category, [hit.get("ref") for hit in found["hits"]], q.evidence)
    return scores, {"observe": observe_times, "recall": recall_times}


def analyzer_run(conversations: Sequence[Conversation]) -> tuple[Scores, list[float]]:
    """Diagnostic: rank-bm25 over our analyzer's terms of the turn text alone (no title/facts/concepts)."""
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
        "'rank-bm25 + our analyzer' indexes the turn text alone; ours also indexes the extracted title, facts and "
        "concepts, so the difference isolates how observations are indexed from how text is analysed.",
    ]
    return "\n".join(lines) + out + "\n" + "\n".join(notes) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo folder of *.json, or one file")
    parser.add_argument("--limit-questions", type=int, default=0, help="at most this many questions per conversation")
    parser.add_argument("--markdown", action="store_true", help="also print the tables as markdown")
    parser.add_argument("--json", metavar="FILE", help="write per-category results to FILE")
    args = parser.parse_args()

    started = time.perf_counter()
    evidence = EvidenceReport()
    conversations = load(args.data, evidence)
    if args.limit_questions:
        for conv in conversations:
            conv.questions = conv.questions[: args.limit_questions]

    with tempfile.TemporaryDirectory(prefix="mcp-memory-locomo-") as folder:
        ours, times = asyncio.run(ours_run(conversations, Path(folder) / "memory.db"))
    systems = {
        "mcp-memory memory_recall": (ours, times["recall"]),
        "rank-bm25, lower().split()": naive_run(conversations, _split),
        "rank-bm25, \\w+ regex": naive_run(conversations, _regex),
        "rank-bm25 + our analyzer": analyzer_run(conversations),
    }
    info = {
        "data": args.data,
        "wall": time.perf_counter() - started,
        "observe": times["observe"],
        "recall": times["recall"],
        "limit": args.limit_questions,
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
