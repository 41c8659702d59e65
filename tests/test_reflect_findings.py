"""Reflect's error clustering against the plain rule it implements: each error joins the first
cluster whose first error's words overlap its own by the similarity threshold."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mcp_memory.config import Settings
from mcp_memory.models.records import Observation
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.services.common import jaccard
from mcp_memory.services.reflect_findings import recurring_errors


def _errors(seed: int, count: int) -> list[Observation]:
    rng = random.Random(seed)
    words = ["timeout", "socket", "deploy", "build", "cache", "index", "parser", "token", "disk", "quota"]
    return [
        Observation(
            id=f"obs_{i:04d}",
            project="p",
            session_id=f"ses_{i // 5:03d}",
            seq=i % 5 + 1,
            type="error" if rng.random() < 0.8 else "note",
            title=" ".join(rng.sample(words, rng.randint(1, 5))),
            content="",
            facts=[rng.choice(words)] if rng.random() < 0.3 else [],
            created_at="2026-01-01T00:00:00Z",
        )
        for i in range(count)
    ]


def _leader_clusters(observations: list[Observation], analyzer: Analyzer, threshold: float) -> list[list[str]]:
    clusters: list[list[Observation]] = []
    for error in (o for o in observations if o.type == "error"):
        mine = frozenset(analyzer.terms(f"{error.title} {' '.join(error.facts)}"))
        for cluster in clusters:
            head = cluster[0]
            if jaccard(frozenset(analyzer.terms(f"{head.title} {' '.join(head.facts)}")), mine) >= threshold:
                cluster.append(error)
                break
        else:
            clusters.append([error])
    return [[o.id for o in c] for c in clusters]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threshold", [0.2, 0.5, 1.0])
def test_errors_cluster_as_the_rule_says(tmp_path: Path, seed: int, threshold: float) -> None:
    settings = Settings(db=tmp_path / "m.db", similarity=threshold, anti_pattern_min_failures=2)
    analyzer = Analyzer()
    observations = _errors(seed, 150)
    expected = [c for c in _leader_clusters(observations, analyzer, threshold) if len(c) >= 2]
    found = recurring_errors(observations, analyzer, settings)
    assert [f.evidence for f in found] == expected
    assert len(expected) >= 2  # enough recurring errors that a wrong cluster would show
    assert all(f.kind == "anti_pattern" and f.content.startswith("Recurring error: ") for f in found)
