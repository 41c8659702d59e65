"""What the services hand the indexer: a record's index document (DocSpec, and the terms it stands
for) and how to enumerate or look up a kind's documents; and what the indexer hands the embedder
(EmbedJob, VectorFeed)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from zoneinfo import ZoneInfo

from mcp_memory.clock import epoch
from mcp_memory.db import Conn, Database
from mcp_memory.search import dates
from mcp_memory.search.analyzer import Analyzer


@dataclass(frozen=True, slots=True)
class DocSpec:
    """What to index for one record: identity, filter attributes and weighted text fields."""

    doc_id: str
    kind: str
    project: str
    at: str
    fields: Sequence[tuple[str, int]] = field(default_factory=tuple)
    subtype: str | None = None
    session_id: str | None = None
    seq: int = 0  # position in the session, for records that are part of one (observations)
    weight: float = 0.5  # importance, 0..1
    dated: bool = False  # index the record's date and the dates its text points at


DocSource = Callable[[Database], AsyncIterator[list[DocSpec]]]
"""Yields every record of one kind as batches of DocSpecs (used to re-analyse everything)."""

DocLookup = Callable[[Conn, str, Sequence[str]], Awaitable[list[DocSpec]]]
"""The DocSpecs of some records of one kind in one project, by id (missing ones left out)."""


def spec_text(spec: DocSpec) -> str:
    """The text a record is indexed (and embedded) from."""
    return "\n".join(text for text, _ in spec.fields if text)


def spec_terms(spec: DocSpec, analyzer: Analyzer, zone: ZoneInfo) -> tuple[str, Counter[str], int]:
    """A record's whole text, its terms counted by field weight (with its date tokens: its own date's
    and its text's when dated, else its text's), and its length: of the words only, as date tokens
    say when and do not lengthen a record."""
    counts: Counter[str] = Counter()
    for text, weight in spec.fields:
        if text:
            for term in analyzer.terms(text):
                counts[term] += weight
    whole = spec_text(spec)
    length = sum(counts.values())
    # A query takes a written date as a date, not as words: only a token meets it, so a record with no
    # date of its own (a lesson) still carries those of the dates its text writes out.
    tokens = dates.record_tokens(whole, epoch(spec.at), zone) if spec.dated else []
    counts.update(tokens or dates.text_tokens(whole))
    return whole, counts, length


def text_digest(text: str) -> str:
    """Short digest of indexed text: a stored vector is current while its digest matches."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class EmbedJob:
    """A record whose text needs a vector."""

    doc_id: str
    digest: str
    text: str


class VectorFeed(Protocol):
    """What the indexer tells the embedder (services/embedding.py) when vectors are enabled."""

    model: str

    def wanted(self, jobs: Sequence[EmbedJob]) -> None:
        """These records were (re-)indexed and have no current vector."""

    def lacking_elsewhere(self, doc_ids: Sequence[str]) -> None:
        """Another process indexed these records, and they have no vector yet."""
