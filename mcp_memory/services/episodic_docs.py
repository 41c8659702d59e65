"""What the index holds of episodic records: an observation's document, a session's (its summary
and folded digest, dated when its conversation happened), and the digest lines folding writes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from mcp_memory.clock import from_iso, to_iso
from mcp_memory.db import Conn
from mcp_memory.models.records import Observation, Session
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.services.compress import compact_line
from mcp_memory.services.index_docs import DocSpec

CONTENT_INDEX_CHARS = 8_000
"""Content beyond this is stored but not indexed: a huge tool output would drown its own title."""

_DIGEST_TIME = re.compile(r"- (?:(\d{4}-\d{2}-\d{2}) )?(\d{2}:\d{2})([+-]\d{2}:\d{2})? \[")


def observation_doc(obs: Observation) -> DocSpec:
    """The index document of an observation: the head of its content plus whatever of its title,
    facts, concepts and files the content does not already say (extracted ones mostly repeat it,
    and indexing them again would only double their words)."""
    content = obs.content[:CONTENT_INDEX_CHARS]
    folded = content.casefold()
    extra = [
        piece
        for piece in (obs.title, *obs.facts, *obs.concepts, *obs.files)
        if piece.rstrip("…").casefold() not in folded
    ]
    return DocSpec(
        doc_id=obs.id,
        kind="observation",
        subtype=obs.type,
        project=obs.project,
        session_id=obs.session_id,
        at=obs.occurred_at or obs.created_at,
        fields=((content, 1), ("\n".join(extra), 1)),
        seq=obs.seq,
        weight=obs.importance,
        dated=True,
    )


DIGEST_LINE_CHARS = 256
"""Longer than any digest line with its newline: date, minute, offset, a type of 40 and 160 of title."""


def digest_line(obs: Observation, session_start: str, zone: tzinfo) -> str:
    """A folded observation's line in its session's digest: the minute it was made as the database's
    zone reads it, with that moment's offset from UTC (none in UTC, as lines were first written), the
    date only when that is not the session's first day; then its type, title and first facts."""
    local = from_iso(obs.occurred_at or obs.created_at).astimezone(zone)
    offset = local.utcoffset() or timedelta(0)
    began = from_iso(session_start).astimezone(timezone(offset))  # at the line's offset, as it is read
    # and as a person reads it: in the zone, across a change of offset since the session began
    first = from_iso(session_start).astimezone(zone).date()
    day = "" if local.date() == began.date() == first else f"{local:%Y-%m-%d} "
    # whole minutes: the few zones of the 1800s whose offsets ran to seconds are read to the minute
    sign, minutes = ("-" if offset < timedelta(0) else "+"), abs(offset) // timedelta(minutes=1)
    written = f"{sign}{minutes // 60:02d}:{minutes % 60:02d}" if offset else ""
    return f"- {day}{local:%H:%M}{written} [{obs.type}] {compact_line(obs.title, obs.facts, 160)}"


def digest_line_minute(line: str, session_start: str) -> str | None:
    """The minute (`YYYY-MM-DDTHH:MM`, UTC) a digest line's observation was made; None for a line
    with no time (folded before lines carried one) and for the `…` of a shortened digest."""
    found = _DIGEST_TIME.match(line)
    if found is None:
        return None
    if found[3] is None:  # a UTC minute, as every line was written before lines carried an offset
        return f"{found[1] or session_start[:10]}T{found[2]}"
    hours, minutes = found[3][1:].split(":")
    sign = -1 if found[3][0] == "-" else 1
    offset = timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))
    day = found[1] or f"{from_iso(session_start).astimezone(offset):%Y-%m-%d}"
    local = datetime.fromisoformat(f"{day}T{found[2]}").replace(tzinfo=offset)
    return f"{local.astimezone(UTC):%Y-%m-%dT%H:%M}"


INDEXED_DIGEST_CHARS = 100_000
"""How much of a session's folded digest the search index reads: its newest lines. Every line is kept,
shown and exported; re-reading a longer digest at each fold would slow a very long session's writes."""


def indexed_digest(digest: str | None) -> str:
    """The newest whole lines of a folded digest, up to `INDEXED_DIGEST_CHARS`."""
    text = digest or ""
    return text if len(text) <= INDEXED_DIGEST_CHARS else text[-INDEXED_DIGEST_CHARS:].split("\n", 1)[-1]


def session_doc(session: Session, latest: str | None) -> DocSpec | None:
    """The index document of a session, once it has a summary or a folded digest to search.

    It is dated when the latest of its observations happened (`latest`, or a folded one), as they
    are: a conversation imported today from last May is last May's, not today's.
    """
    if not session.summary and not session.folded_digest:
        return None
    minutes = [
        m for line in (session.folded_digest or "").split("\n") if (m := digest_line_minute(line, session.started_at))
    ]
    times = [t for t in (latest, max(minutes, default=None)) if t]
    return DocSpec(
        doc_id=session.id,
        kind="session",
        project=session.project,
        session_id=session.id,
        at=max(to_iso(from_iso(t)) for t in times) if times else session.last_activity_at,
        fields=((session.title or "", 1), (session.summary or "", 1), (indexed_digest(session.folded_digest), 1)),
        seq=-1,  # the session itself: a strong match lifts the session's records (search/ranking.py)
        dated=True,
    )


async def session_docs(conn: Conn, sessions: Sequence[Session]) -> dict[str, DocSpec | None]:
    """The index documents of `sessions` by id (None for one with nothing to search)."""
    searchable = [s.id for s in sessions if s.summary or s.folded_digest]
    spans = await ObservationRepository(conn).spans(searchable) if searchable else {}
    return {s.id: session_doc(s, spans[s.id][1] if s.id in spans else None) for s in sessions}


async def session_doc_of(conn: Conn, session: Session) -> DocSpec | None:
    """The index document of one session (None when it has nothing to search)."""
    return (await session_docs(conn, [session]))[session.id]
