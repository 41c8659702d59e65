"""Crystallize: fold a session into a summary, extractively, or in the client's model's words.

The extractive summary lists the session's decisions, each error with the later fix that is about
the same thing (`pair_fixes`; errors sharing a fix are listed together, and fixes that answer no
listed error stand on their own), the files touched, the main concepts, how its outcomes went
(failures first), and its most important other observations with the facts they recorded. When the
connected client lends its model (MCP sampling), the tool layer asks it to rewrite that draft;
whatever it returns is scrubbed and stored instead, else the draft is. A session with nothing left
in it (every observation forgotten) gets no summary.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from mcp_memory.clock import local_minute
from mcp_memory.db import Tx
from mcp_memory.errors import InvalidInputError
from mcp_memory.ids import public_id
from mcp_memory.models.loop import CrystallizeResult, SessionSummaryView, SummarySource
from mcp_memory.models.records import Observation, Outcome, Session
from mcp_memory.privacy import says_something
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.outcomes import OutcomeRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.services.common import Deps, Service, idle_cutoff
from mcp_memory.services.compress import counted, shorten
from mcp_memory.services.episodic_docs import session_doc_of
from mcp_memory.services.fixes import pair_fixes

SUMMARY_CHARS = 2_000
LISTED_SUMMARIES = 20
"""A crystallize pass over many sessions returns the summaries of this many, the latest."""
SUMMARY_HEADER = re.compile(r"^(?:.*(?::| —) )?\d+ observations?, [\d-]{10} [\d:]{5} to [\d-]{10} [\d:]{5}\.$")
"""The first line of an extractive summary (`SummaryService.draft`): the title (unless a decision listed
below says it), observation count and span (after a colon in summaries stored by earlier builds)."""
SAMPLING_PROMPT = """\
Rewrite these notes of one working session as a summary another agent will read before the next
session on the same project. Keep every decision, error and fix, file and outcome that matters;
drop chatter. At most 12 short lines of plain text, no preamble.

{draft}

Observations, in order:
{observations}"""

_HIGHLIGHT_TYPES = {"discovery", "preference", "note", "file_change"}
_HIGHLIGHT_CHARS = 240
"""An "Also:" line, its title and facts together, is at most this long."""
_FACT_CHARS = 120
_FACT_MIN_CHARS = 40  # less room than this left on a line: a fact cut that short says nothing
_LISTED_OUTCOMES = 5
_LISTED_DECISIONS = 8
_LISTED_ERRORS = 6
"""A summary lists this many decisions and errors (each with its fix), then counts the rest."""


_ASKED_KEPT = 1_000
"""How many sessions' sampling prompts a server remembers the state of, the oldest forgotten first."""


class SummaryService(Service):
    """Builds and stores session summaries."""

    def __init__(self, deps: Deps) -> None:
        super().__init__(deps)
        # What each session held when its sampling prompt was built (see `summarise`).
        self._asked: dict[str, tuple[object, ...]] = {}

    async def crystallize(
        self, project: str, session_id: str | None, *, force: bool = False, model_summary: str | None = None
    ) -> CrystallizeResult:
        """Summarise one session, or every ended session whose summary is missing or stale."""
        if model_summary is not None and session_id is None:
            raise InvalidInputError("session_id", "a model-written summary needs one session")
        async with self.db.transaction("memory_crystallize", project=project) as tx:
            repo = SessionRepository(tx)
            if session_id is not None:
                targets = [await repo.get(session_id, project)]
            else:
                await self.end_idle(tx, project)
                targets = await repo.needing_summary(project)
            views = [await self.summarise(tx, s, force=force, model_summary=model_summary) for s in targets]
            if session_id is not None and views[0] is None:
                raise InvalidInputError(
                    "session_id",
                    f"session {session_id!r} has nothing left to summarise (its observations were forgotten); "
                    f"memory_forget(ids={json.dumps([session_id])}) removes the session itself",
                )
        done = [view for view in views if view is not None]
        # A backlog (an imported history, say) can hold thousands: listing every summary would
        # flood the caller's context, and each is stored anyway.
        return CrystallizeResult(project=project, sessions=done[-LISTED_SUMMARIES:], total=len(done))

    async def refresh(self, tx: Tx, session_ids: Sequence[str]) -> list[str]:
        """Write again the summaries of those sessions that have one, since records joined them that
        their activity time cannot show (an import's, recorded before the summary); returns their ids."""
        rewritten = []
        for session in await SessionRepository(tx).get_many(session_ids):
            if session.summary is not None:
                view = await self.summarise(tx, session, force=True)
                if view is not None and view.changed:
                    rewritten.append(session.id)
        return rewritten

    async def end_idle(self, tx: Tx, project: str) -> list[str]:
        """End the sessions idle for `session_idle_minutes` (a session with no observation for that long
        has ended; its caller reopens it by name); returns their ids."""
        cutoff = idle_cutoff(self.now(), self.settings.session_idle_minutes)
        ended = await SessionRepository(tx).end_idle(project, cutoff, self.now_iso())
        for session_id in ended:
            tx.changed("session", session_id, "end")
        return ended

    async def current_session(self, project: str, agent_id: str | None) -> str | None:
        """The id (as callers see it) of the agent's session in progress: its most recently active
        session not yet idle (a caller-named one too), or None when none is."""
        cutoff = idle_cutoff(self.now(), self.settings.session_idle_minutes)
        async with self.db.read() as conn:
            current = await SessionRepository(conn).latest_active(project, agent_id, cutoff)
        return None if current is None else public_id(current.id)

    async def summarise(
        self, tx: Tx, session: Session, *, force: bool = False, model_summary: str | None = None
    ) -> SessionSummaryView | None:
        """Store the summary of one session (unless it is already up to date) inside `tx`; None, and
        nothing stored, for a session with nothing left to summarise."""
        # Only a call bringing the model's summary takes the state its prompt was built from: another
        # caller's summarise in between (a plain crystallize, a consolidation) must not take it away.
        asked = self._asked.pop(session.id, None) if model_summary else None
        outcomes = await OutcomeRepository(tx).in_session(session.id)
        if _is_current(session, outcomes) and not force:
            return SessionSummaryView(
                session_id=session.id,
                title=session.title,
                summary=session.summary or "",
                source="sampling" if session.summary_source == "sampling" else "extractive",
                changed=False,
            )
        observations, cues = await ObservationRepository(tx).in_session_with_cues(session.id)
        if not observations and not outcomes and not session.folded_digest:
            return None
        if model_summary and asked != _state(session, outcomes):
            # The session changed while the model wrote (a client of an older protocol asks once and
            # is not asked again): its summary would be stored as current, missing what came since.
            model_summary = None
        source: SummarySource = "extractive"
        # Put together from scrubbed parts, it is scrubbed whole too, as an import will scrub it: a
        # summary must come back from an export as it was stored.
        text = self.scrubber().text(self.draft(session, observations, outcomes, cues))
        sampled = shorten_lines(self.scrubber().text(model_summary.strip()), SUMMARY_CHARS) if model_summary else ""
        if says_something(sampled):  # a reply of only private parts or punctuation keeps the extractive summary
            text, source = sampled, "sampling"
        title = session.title or _title_for(observations)
        # Never stamped before what it covers: an outcome imported from a machine whose clock runs ahead
        # would otherwise leave the summary stale, and rewritten by every pass, until this clock caught up.
        now = max([self.now_iso(), session.last_activity_at, *(o.created_at for o in outcomes)])
        await SessionRepository(tx).set_summary(session.id, text, source, now, title)
        tx.changed("session", session.id, "crystallize")
        stored = session.model_copy(update={"summary": text, "title": title, "summarized_at": now})
        spec = await session_doc_of(tx, stored)
        if spec is not None:
            await self.deps.indexer.put(tx, spec)
        return SessionSummaryView(session_id=session.id, title=title, summary=text, source=source, changed=True)

    async def sampling_prompt(self, project: str, session_id: str, force: bool = False) -> str | None:
        """The prompt that asks the client's model for a summary, or None when none is needed."""
        async with self.db.read() as conn:
            session = await SessionRepository(conn).get_or_none(session_id, project)
            if session is None:
                return None
            outcomes = await OutcomeRepository(conn).in_session(session.id)
            if _is_current(session, outcomes) and not force:
                return None
            observations, cues = await ObservationRepository(conn).in_session_with_cues(session.id)
        self._asked.pop(session.id, None)
        self._asked[session.id] = _state(session, outcomes)
        while len(self._asked) > _ASKED_KEPT:  # prompts whose answer never came back (the model declined)
            self._asked.pop(next(iter(self._asked)))
        if not observations:
            return None
        lines = [f"- [{o.type}] {shorten(o.title, 160)}" for o in observations[-80:]]
        draft = self.draft(session, observations, outcomes, cues)
        return SAMPLING_PROMPT.format(draft=draft, observations="\n".join(lines))

    def draft(
        self,
        session: Session,
        observations: Sequence[Observation],
        outcomes: Sequence[Outcome],
        cues: Mapping[str, str | None] | None = None,
    ) -> str:
        """The extractive summary of a session (pairing its errors with their fixes by the observations'
        stored `cues`, by id, where there are)."""
        title = session.title or _title_for(observations) or public_id(session.id)
        # In recording order, but a caller may record past turns late: the span is earliest to latest.
        happened = [o.occurred_at or o.created_at for o in observations]
        first = min(happened) if happened else session.started_at
        last = max(happened) if happened else session.last_activity_at
        kept = session.observation_count - session.folded_count
        span = f"{local_minute(first, self.zone)} to {local_minute(last, self.zone)}"
        decisions = [o for o in observations if o.type == "decision"]
        listed = [shorten(o.title, 200) for o in decisions[:_LISTED_DECISIONS]]
        # the title is shown beside the summary: a decision listed below says it, the header need not
        # A dash, not a colon: "…the deploy token: 1 observation" reads to the privacy filter as a secret.
        lead = "" if any(_says(line, title) for line in listed) else f"{title.rstrip('.,;: ')} — "
        lines = [f"{lead}{counted(kept, 'observation')}, {span}."]
        if listed:
            lines.append("Decisions:")
            lines += [f"- {line}" for line in listed]
            if len(decisions) > len(listed):
                lines.append(f"- … and {counted(len(decisions) - len(listed), 'more decision')}")
        every_error = [o for o in observations if o.type == "error"]
        # Every error is paired, listed or not: the fix of one left out is not a fix of nothing.
        fixed = pair_fixes(self.deps.index.analyzer, every_error, observations, cues)
        claimed = {fix.id for fix in fixed.values()}
        errors, rest = every_error[:_LISTED_ERRORS], every_error[_LISTED_ERRORS:]
        alone = [o for o in observations if o.type == "fix" and o.id not in claimed][:4]
        if errors or alone:
            lines.append("Errors and fixes:")
            lines += _error_lines(errors, fixed)
            if rest:
                mended = sum(1 for error in rest if error.id in fixed)
                which = "all fixed" if mended == len(rest) else f"{mended} fixed" if mended else "none fixed"
                lines.append(f"- … and {counted(len(rest), 'more error')} ({which})")
            lines += [f"- fixed: {shorten(fix.title, 140)}" for fix in alone]
        files = Counter(f for o in observations for f in o.files)
        if files:
            lines.append("Files: " + ", ".join(f for f, _ in files.most_common(10)))
        concepts = Counter(c for o in observations for c in o.concepts)
        if concepts:
            lines.append("Concepts: " + ", ".join(c for c, _ in concepts.most_common(10)))
        highlights = sorted(
            (o for o in observations if o.type in _HIGHLIGHT_TYPES and o.id not in claimed),
            key=lambda o: (-o.importance, o.seq),
        )[:5]
        also = (
            ["Also:", *(f"- {_with_facts(o)}" for o in sorted(highlights, key=lambda o: o.seq))] if highlights else []
        )
        folded = [f"({session.folded_count} older low-value observations were folded away.)"] * bool(
            session.folded_count
        )
        # The header, how the session went and what was folded are always said: cut at the limit,
        # a long session's decisions and errors once pushed its failed outcome out of the summary.
        parts = [(lines[:1], True), (lines[1:], False), (_outcome_lines(outcomes), True), (also, False), (folded, True)]
        return _fitted(parts, SUMMARY_CHARS)


def _error_lines(errors: Sequence[Observation], fixed: dict[str, Observation]) -> list[str]:
    """The summary's lines for `errors`, each with its fix; errors that share a fix are listed
    together, the fix said once (an error that recurs would otherwise repeat it on every line)."""
    sharing: dict[str, list[Observation]] = {}
    for error in errors:
        if (fix := fixed.get(error.id)) is not None:
            sharing.setdefault(fix.id, []).append(error)
    lines: list[str] = []
    for error in errors:
        fix = fixed.get(error.id)
        if fix is None:
            lines.append(f"- {shorten(error.title, 140)} -> unresolved")
        elif sharing[fix.id][0] is error:
            lines.append(f"- {shorten(error.title, 140)} -> fixed: {shorten(fix.title, 120)}")
            lines += [f"- {shorten(e.title, 140)} -> same fix as above" for e in sharing[fix.id][1:]]
    return lines


def _outcome_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """How a session's outcomes went: failures first (a summary that lists only successes reads as
    a session that went well), at most `_LISTED_OUTCOMES`, then a count of the rest."""

    def line(outcome: Outcome) -> str:
        verdict = "succeeded" if outcome.success else "failed"
        return f"{shorten(outcome.task, 120)} {verdict} (score {outcome.score or 0:.2f})"

    if len(outcomes) <= 1:
        return [f"Outcome: {line(o)}" for o in outcomes]
    ordered = sorted(outcomes, key=lambda o: bool(o.success))  # stable: each kind in the order recorded
    succeeded = sum(1 for o in outcomes if o.success)
    lines = [f"Outcomes: {succeeded} of {len(outcomes)} succeeded"]
    lines += [f"- {line(o)}" for o in ordered[:_LISTED_OUTCOMES]]
    rest = ordered[_LISTED_OUTCOMES:]
    if rest:
        failed = sum(1 for o in rest if not o.success)
        which = "all failed" if failed == len(rest) else f"{failed} failed" if failed else "all succeeded"
        lines.append(f"- … and {len(rest)} more ({which})")
    return lines


def _with_facts(obs: Observation) -> str:
    """An observation's title and then the facts it recorded that the title does not already say,
    as many as fit in `_HIGHLIGHT_CHARS` (a discovery's point is often in its facts, not its title)."""
    text = shorten(obs.title, 160)
    said = obs.title.casefold()
    joiner = " — "
    for fact in obs.facts:
        room = _HIGHLIGHT_CHARS - len(text) - len(joiner)
        if room < _FACT_MIN_CHARS:
            break
        if fact.rstrip("…").casefold() in said:
            continue  # extracted facts often repeat the title's sentence
        text += joiner + shorten(fact, min(room, _FACT_CHARS))
        joiner = "; "
    return text


def _state(session: Session, outcomes: Sequence[Outcome]) -> tuple[object, ...]:
    """What a summary of the session is drawn from, in brief: any observation, fold or outcome changes it."""
    return (session.observation_count, session.folded_count, session.last_activity_at, tuple(o.id for o in outcomes))


def _is_current(session: Session, outcomes: Sequence[Outcome]) -> bool:
    """Whether the session's summary already covers everything that happened in it: written once its
    last observation and its last outcome (`outcomes`, the session's) were recorded. An outcome
    recorded later does not move the session's activity time, yet the summary tells how they went.
    SessionRepository.needing_summary asks the same."""
    changed = max([session.last_activity_at, *(o.created_at for o in outcomes)])
    return session.summary is not None and (session.summarized_at or "") >= changed


def _says(line: str, title: str) -> bool:
    """Whether a summary line says the title (the whole of it, or more where the title was cut short)."""
    return line == title or (title.endswith("…") and line.startswith(title[:-1]))


def _title_for(observations: Sequence[Observation]) -> str | None:
    decision = next((o for o in observations if o.type == "decision"), None)
    chosen = decision or (observations[0] if observations else None)
    return None if chosen is None else shorten(chosen.title, 80)


def _fitted(parts: Sequence[tuple[Sequence[str], bool]], limit: int) -> str:
    """The lines of `parts` in order, within `limit` characters: those of a part marked True all,
    the others while they fit in what those leave, the first that does not (and every later one
    not marked True) given as one "…" line."""
    needed = sum(len(line) + 1 for lines, kept in parts if kept for line in lines)
    room = limit - needed - 2  # a "…" line, should one be needed
    out: list[str] = []
    cut = False
    for lines, kept in parts:
        for line in lines:
            if not kept and (cut or len(line) + 1 > room):
                if not cut:
                    out.append("…")
                cut = True
                continue
            out.append(line)
            room -= 0 if kept else len(line) + 1
    return shorten_lines("\n".join(out), limit)  # the lines always said are long only past all bounds


def shorten_lines(text: str, limit: int) -> str:
    """`text` cut at a line boundary to at most `limit` characters."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return cut[: cut.rfind("\n")] + "\n…" if "\n" in cut else cut + "…"
