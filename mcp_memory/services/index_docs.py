"""What the services hand the indexer: a record's index document (DocSpec) and how to enumerate or
look up a kind's documents; and what the indexer hands the embedder (EmbedJob, VectorFeed)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mcp_memory.db import Conn, Database


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
