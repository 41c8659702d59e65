"""What memory_forget does to the sessions that stay when some of their observations or outcomes go:
counted, numbered and titled without them, their digest lines cut, and no summary left that may
quote them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from mcp_memory.db import Tx
from mcp_memory.models.records import Observation, Outcome
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.services.compress import shorten
from mcp_memory.services.episodic_docs import digest_line_minute, observation_doc, session_doc_of
from mcp_memory.services.indexing import Indexer


async def thin_sessions(
    tx: Tx,
    indexer: Indexer,
    project: str,
    forgotten: Sequence[Observation],
    digest_lines: dict[str, list[int]],
    now: str,
) -> None:
    """Make the sessions of `forgotten` (deleted) observations, and of the folded ones whose
    `digest_lines` go, as if those had never been recorded: counted and numbered without them,
    titled after what remains, and no summary that may quote them."""
    by_session: dict[str, list[Observation]] = defaultdict(list)
    for obs in forgotten:
        by_session[obs.session_id].append(obs)
    sessions, observations = SessionRepository(tx), ObservationRepository(tx)
    renumbered: list[str] = []
    for session_id in sorted({*by_session, *digest_lines}):
        session = await sessions.get(session_id, project)
        gone = by_session.get(session_id, [])
        lines = (session.folded_digest or "").split("\n")
        cut = set(digest_lines.get(session_id, ()))
        folded_gone = [digest_line_minute(lines[i], session.started_at) for i in sorted(cut)]
        kept = [line for i, line in enumerate(lines) if i not in cut]
        remaining = await observations.in_session(session_id)
        title = session.title
        # A title is an observation's title (whole, or cut to 80 characters by crystallize).
        if title is not None and (
            title in {t for o in gone for t in (o.title, shorten(o.title, 80))}
            or any(_quotes(lines[i], title) for i in cut)
        ):
            title = remaining[0].title if remaining else None
        # A summary written once a forgotten observation was recorded may quote it (a folded line
        # without a time may be anyone's), and one of a session with nothing left says nothing; the
        # session then needs a summary again, and crystallize / consolidate write it from what remains.
        written = session.summarized_at or ""
        left = remaining or any(line.startswith("- ") for line in kept)
        quoted = session.summary is not None and (
            not left or any(o.created_at <= written for o in gone) or any((m or "") <= written for m in folded_gone)
        )
        positions = [o.seq for o in gone]
        if cut:
            taken = {o.seq for o in (*remaining, *gone)}
            free = [seq for seq in range(1, session.observation_count + 1) if seq not in taken]
            positions += _folded_positions(free, [*remaining, *gone], folded_gone)
            digest = "\n".join(kept) if any(line.startswith("- ") for line in kept) else ""
            # Un-fold first: the observation count never drops below the folded count.
            await sessions.add_folded(session_id, digest, -min(len(cut), session.folded_count), now)
        renumbered += await observations.close_gaps(session_id, positions)
        await sessions.remove_observations(session_id, len(gone) + len(cut), title, quoted, now)
        await _reindex(tx, indexer, sessions, session_id, project)
    # Index entries carry each observation's position in its session (neighbours are found by it).
    await indexer.put_many(tx, [observation_doc(o) for o in await observations.get_many(renumbered, project)])
    for obs_id in renumbered:
        tx.changed("observation", obs_id, "update")


async def unsummarise(tx: Tx, indexer: Indexer, project: str, outcomes: Sequence[Outcome], now: str) -> None:
    """Drop the summaries of the sessions of forgotten `outcomes` written once those were recorded (a
    summary tells how a session's tasks went); crystallize / consolidate write them again without."""
    sessions = SessionRepository(tx)
    earliest: dict[str, str] = {}
    for outcome in outcomes:
        if outcome.session_id is not None:
            earliest[outcome.session_id] = min(outcome.created_at, earliest.get(outcome.session_id, outcome.created_at))
    for session_id in await sessions.drop_summaries_since(sorted(earliest.items()), now):
        await _reindex(tx, indexer, sessions, session_id, project)


async def _reindex(tx: Tx, indexer: Indexer, sessions: SessionRepository, session_id: str, project: str) -> None:
    """Note a session as changed and bring its index entry in line (gone when it tells nothing)."""
    tx.changed("session", session_id, "update")
    spec = await session_doc_of(tx, await sessions.get(session_id, project))
    if spec is None:
        await indexer.drop(tx, [session_id])
    else:
        await indexer.put(tx, spec)


def _quotes(line: str, title: str) -> bool:
    """Whether a digest line is of the observation a session title was taken from (either may be cut short)."""
    text, head = line.split("] ", 1)[-1].rstrip("…"), title.rstrip("…")
    return bool(head) and (text.startswith(head) or head.startswith(text))


def _folded_positions(free: list[int], known: Sequence[Observation], minutes: Sequence[str | None]) -> list[int]:
    """Positions in their session of folded observations made at `minutes`, among the `free` ones
    (their lines keep no position): each takes the first after every `known` observation made before it."""
    free, taken = list(free), []
    for minute in minutes:
        if not free:
            break
        before = max((o.seq for o in known if minute and (o.occurred_at or o.created_at)[:16] < minute), default=0)
        position = next((p for p in free if p > before), free[-1])
        free.remove(position)
        taken.append(position)
    return taken
