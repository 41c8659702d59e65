"""Episodic memory: sessions, observations, the per-session cap, listing and the timeline."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime

from mcp_memory.clock import epoch, to_iso
from mcp_memory.db import Conn, Database, Tx
from mcp_memory.errors import ConflictError, InvalidInputError, NotFoundError
from mcp_memory.ids import is_server_session_id, new_id, public_id, scoped_session_id
from mcp_memory.models.records import Observation, Session
from mcp_memory.models.results import (
    ObservationList,
    ObservationView,
    ObserveResult,
    SessionList,
    SessionView,
    TimelineEntry,
    TimelineResult,
)
from mcp_memory.repositories.folded import FoldedRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.search_docs import SearchDocRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.search.dates import local_day
from mcp_memory.services.common import Deps, Service, check_session_id, idle_cutoff, moment, time_window
from mcp_memory.services.compress import TYPE_IMPORTANCE, compress, shorten
from mcp_memory.services.episodic_docs import digest_line, observation_doc, session_doc_of, session_docs
from mcp_memory.services.fixes import Cues
from mcp_memory.services.index_docs import DocSpec
from mcp_memory.services.relations import drop_relations

SESSION_STATUSES = ("active", "idle", "open", "ended", "all")


class EpisodicService(Service):
    """Records what happens in sessions and lists it back."""

    def __init__(self, deps: Deps) -> None:
        super().__init__(deps)
        deps.indexer.register_source("observation", self._observation_docs, self._observation_lookup)
        deps.indexer.register_source("session", self._session_docs, self._session_lookup)

    async def observe(
        self,
        project: str,
        content: str,
        type: str = "note",
        *,
        title: str | None = None,
        facts: Sequence[str] | None = None,
        concepts: Sequence[str] | None = None,
        files: Sequence[str] | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        ref: str | None = None,
        occurred_at: str | None = None,
        importance: float | None = None,
        end_session: bool = False,
    ) -> ObserveResult:
        """Store one observation in the caller's (or the current) session and index it."""
        scrub = self.scrubber()
        content = scrub.required("content", content)
        packed = compress(content, scrub.optional(title), scrub.many(facts), scrub.many(concepts), scrub.many(files))
        when = moment("occurred_at", occurred_at, self.zone)
        instant = self.now()  # one moment for the whole call: a new session starts when its first observation is made
        now = to_iso(instant)
        agent = scrub.optional(agent_id or self.settings.agent_id)
        analyzer = self.deps.index.analyzer
        cues = Cues.of(analyzer, type, packed.title, content, packed.concepts, packed.files).dump()  # before the lock
        async with self.db.transaction("memory_observe", actor=agent, project=project) as tx:
            session, created = await self._session_for(tx, project, agent, session_id, instant)
            obs = Observation(
                id=new_id("observation"),
                project=project,
                session_id=session.id,
                agent_id=agent,
                seq=session.observation_count + 1,
                type=type,
                title=packed.title,
                content=content,
                facts=packed.facts,
                concepts=packed.concepts,
                files=packed.files,
                importance=TYPE_IMPORTANCE.get(type, 0.5) if importance is None else importance,
                ref=scrub.optional(ref),
                occurred_at=when,
                created_at=now,
            )
            await ObservationRepository(tx).add(obs, cues)
            tx.changed("observation", obs.id, "create")
            sessions = SessionRepository(tx)
            await sessions.record_observation(session.id, now, obs.title)
            await self.deps.indexer.put(tx, observation_doc(obs))
            kept = session.observation_count - session.folded_count + 1
            folded = len(await self._enforce_cap(tx, session.id, project, kept, keep=obs.id, now=now))
            if not folded and (session.summary or session.folded_digest):
                await self._redate_session(tx, session.id, project, obs.occurred_at or obs.created_at)
            if end_session:
                await sessions.end(session.id, now, now)
                tx.changed("session", session.id, "end")
        return ObserveResult(
            id=obs.id,
            session_id=session.id,
            session_created=created,
            session_ended=end_session,
            title=obs.title,
            facts=obs.facts,
            concepts=obs.concepts,
            files=obs.files,
            importance=obs.importance,
            folded=folded,
            redacted=scrub.summary(),
        )

    async def _session_for(
        self, tx: Tx, project: str, agent_id: str | None, session_id: str | None, instant: datetime
    ) -> tuple[Session, bool]:
        """The session an observation made at `instant` belongs to, creating (or reopening) one as the rules say."""
        repo = SessionRepository(tx)
        now = to_iso(instant)
        if session_id is not None:
            found = await repo.get_or_none(session_id, project)
            if found is not None:
                if found.ended_at is not None:
                    # The caller came back to a conversation it had closed: it is active again.
                    await repo.reopen(found.id, now)
                    tx.changed("session", found.id, "reopen")
                return found, False
            check_session_id(session_id)  # binds new names only: a session stored before a rule keeps its name
            if is_server_session_id(session_id):
                # Server-started sessions are told apart by the shape of their ids: a caller's new one of
                # that shape would be joined, and ended, by observations that name no session.
                raise NotFoundError(
                    "session",
                    session_id,
                    "an id of this shape names a session the server started; name a new one otherwise, e.g. 'chat-1'",
                    field="session_id",
                )
            if await repo.exists_anywhere(session_id):
                # Another project uses this name too: ours is stored marked with our project.
                name, session_id = session_id, scoped_session_id(session_id, project)
                if await repo.exists_anywhere(session_id):
                    # Only an older release's import could have stored another project's session
                    # under our mark; refusing beats writing into that session.
                    raise ConflictError(
                        f"session_id: {name!r} cannot name a new session of this project (the id it would be "
                        "stored under is taken); pick another name, e.g. 'chat-1'"
                    )
        else:
            current = await repo.latest_open(project, agent_id)
            if current is not None and current.last_activity_at >= idle_cutoff(
                instant, self.settings.session_idle_minutes
            ):
                return current, False
            if current is not None:
                # stamped now, so a copy holding it open takes the ended row from the next export
                await repo.end(current.id, current.last_activity_at, now)
                tx.changed("session", current.id, "end")
        session = Session(
            id=session_id or new_id("session"),
            project=project,
            agent_id=agent_id,
            started_at=now,
            last_activity_at=now,
            created_at=now,
            updated_at=now,
        )
        await repo.add(session)
        tx.changed("session", session.id, "create")
        return session, True

    async def _redate_session(self, tx: Tx, session_id: str, project: str, when: str) -> None:
        """Move a searchable session's date to a turn later than its latest one (a folded session
        is re-dated as it folds): a summary stays findable in the weeks it was continued in."""
        stored = await SearchDocRepository(tx).get_many([session_id])
        at = epoch(when)
        if stored and stored[0].at >= at:
            return
        zone = self.deps.index.zone
        if stored and local_day(stored[0].at, zone) == local_day(at, zone):
            # Same text, same day, so the same words and date tokens: only its time moves (a long
            # session would otherwise analyse its whole digest again on every observation).
            await self.deps.indexer.redate(tx, stored[0], at)
            tx.changed("session", session_id, "redate")
            return
        spec = await session_doc_of(tx, await SessionRepository(tx).get(session_id, project))
        if spec is not None:
            await self.deps.indexer.put(tx, spec)
            tx.changed("session", session_id, "redate")  # other processes and the index cache re-read it

    async def _enforce_cap(
        self, tx: Tx, session_id: str, project: str, kept: int, keep: str | None, now: str
    ) -> list[str]:
        """Fold the least valuable observations into the session digest when over the cap; returns their ids."""
        observations = ObservationRepository(tx)
        cap = self.settings.observation_cap
        if kept <= cap:
            return []
        # A fold re-indexes the session's digest, which costs as much for one observation as for
        # ten: past the cap, a session folds down to a fiftieth below it, so a long session pays that
        # once per dozen observations instead of on every one (a cap under 50 stays exact).
        excess = kept - cap + cap // 50
        victims = await observations.least_valuable(session_id, excess, keep=[keep] if keep else [])
        if victims:  # none when every one over the cap is kept (a relation points to it)
            await self.fold(tx, session_id, project, victims, victims, now)
        return [v.id for v in victims]

    async def fold(
        self,
        tx: Tx,
        session_id: str,
        project: str,
        victims: Sequence[Observation],
        lined: Sequence[Observation],
        now: str,
    ) -> None:
        """Fold the observations `victims` of a session: their rows go (noted as folded, so no import
        stores them again) and the `lined` ones among them get a line in the session's digest (the
        others have one already)."""
        ids = [v.id for v in victims]
        await ObservationRepository(tx).delete(ids)
        await FoldedRepository(tx).note(victims, now)
        await drop_relations(tx, ids)
        await self.deps.indexer.drop(tx, ids)
        for victim in victims:
            tx.changed("observation", victim.id, "fold")
        sessions = SessionRepository(tx)
        if lined:
            session = await sessions.get(session_id, project)
            lines = [digest_line(v, session.started_at, self.zone) for v in lined]
            # every line kept, however long the session: a folded observation is found by its line
            digest = "\n".join([session.folded_digest or "", *lines]).strip()
            await sessions.add_folded(session_id, digest, len(lined), now)
        tx.changed("session", session_id, "fold")  # other processes and the index cache re-read its digest
        spec = await session_doc_of(tx, await sessions.get(session_id, project))
        if spec is not None:
            await self.deps.indexer.put(tx, spec)

    async def fold_over_cap(self, tx: Tx, project: str) -> dict[str, list[str]]:
        """Fold every session of the project down to the cap (after it was lowered); returns the folded
        ids by session."""
        folded = {}
        now = self.now_iso()
        sessions = SessionRepository(tx)
        for session_id in await sessions.over_cap(project, self.settings.observation_cap):
            session = await sessions.get(session_id, project)
            kept = session.observation_count - session.folded_count
            folded[session_id] = await self._enforce_cap(tx, session_id, project, kept, keep=None, now=now)
        return folded

    async def sessions(self, project: str, status: str, limit: int, offset: int) -> SessionList:
        """Sessions of a project, most recently active first."""
        if status not in SESSION_STATUSES:
            raise InvalidInputError("status", f"must be one of {', '.join(SESSION_STATUSES)}")
        cutoff = idle_cutoff(self.now(), self.settings.session_idle_minutes)
        async with self.db.read() as conn:
            found, total = await SessionRepository(conn).page(project, status, cutoff, limit, offset)
            spans = await ObservationRepository(conn).spans([s.id for s in found])
        views = [
            SessionView(
                id=s.id,
                title=s.title,
                status="ended" if s.ended_at else ("active" if s.last_activity_at >= cutoff else "idle"),
                agent_id=s.agent_id,
                started_at=s.started_at,
                last_activity_at=s.last_activity_at,
                ended_at=s.ended_at,
                first_happened_at=spans[s.id][0] if s.id in spans else None,
                last_happened_at=spans[s.id][1] if s.id in spans else None,
                observation_count=s.observation_count - s.folded_count,
                recorded_count=s.observation_count,
                folded_count=s.folded_count,
                summary=shorten(s.summary, 600) if s.summary else None,
            )
            for s in found
        ]
        more = offset + len(views) < total
        return SessionList(
            project=project, total=total, sessions=views, next_offset=offset + len(views) if more else None
        )

    async def observations(
        self,
        project: str,
        *,
        session_id: str | None,
        types: Sequence[str] | None,
        since: str | None,
        until: str | None,
        limit: int,
        offset: int,
        newest_first: bool,
        full: bool,
    ) -> ObservationList:
        """A page of observations in time order, compressed unless `full`."""
        start, end = time_window(since, until, self.zone)
        async with self.db.read() as conn:
            if session_id is not None:
                session_id = (await SessionRepository(conn).get(session_id, project)).id
            found, total = await ObservationRepository(conn).page(
                project,
                session_id=session_id,
                types=types,
                since=start,
                until=end,
                limit=limit,
                offset=offset,
                newest_first=newest_first,
            )
        more = offset + len(found) < total
        return ObservationList(
            project=project,
            total=total,
            observations=[ObservationView.of(o, full) for o in found],
            next_offset=offset + len(found) if more else None,
        )

    async def timeline(
        self,
        project: str,
        *,
        anchor: str | None,
        at: str | None,
        session_id: str | None,
        before: int,
        after: int,
    ) -> TimelineResult:
        """Observations in time order around an observation, a moment, or the present."""
        if anchor is not None and not anchor.strip():
            raise InvalidInputError("anchor", "must be an observation id (obs_…); omit it to centre on now")
        if anchor is not None and at is not None:
            raise InvalidInputError("at", "give anchor (an observation id) or at (a moment), not both")
        async with self.db.read() as conn:
            repo = ObservationRepository(conn)
            if session_id is not None:
                session_id = (await SessionRepository(conn).get(session_id, project)).id
            anchor_obs = None
            if anchor is not None:
                anchor_obs = await repo.get(anchor, project, field="anchor")
                if session_id is not None and anchor_obs.session_id != session_id:
                    raise InvalidInputError(
                        "anchor",
                        f"{anchor_obs.id} is in session {public_id(anchor_obs.session_id)}, not in session_id; "
                        "leave session_id out, or centre on a moment with at",
                    )
                when, seq = anchor_obs.occurred_at or anchor_obs.created_at, anchor_obs.seq
            else:
                when = moment("at", at, self.zone) or self.now_iso()
                seq = 0 if at is not None else 1 << 62  # "now" comes after whatever was recorded at this moment
            earlier, later = await repo.around(
                project, when, seq, session_id, before, after, anchor_obs.id if anchor_obs else None
            )
        ordered = [*earlier, *([anchor_obs] if anchor_obs else []), *later]
        entries = [
            TimelineEntry(
                id=o.id,
                session_id=o.session_id,
                type=o.type,
                title=o.title,
                when=o.occurred_at or o.created_at,
                ref=o.ref,
                anchor=anchor_obs is not None and o.id == anchor_obs.id,
            )
            for o in ordered
        ]
        return TimelineResult(project=project, anchor_id=anchor, entries=entries)

    async def reindex_observations(self, tx: Tx, observations: Sequence[Observation]) -> None:
        """Index stored observations (after an import), and store the cues pairing reads of them."""
        await self.deps.indexer.put_many(tx, [observation_doc(o) for o in observations])
        analyzer = self.deps.index.analyzer
        cues = [(o.id, Cues.of(analyzer, o.type, o.title, o.content, o.concepts, o.files).dump()) for o in observations]
        await ObservationRepository(tx).set_fix_cues(cues)

    async def reindex_sessions(self, tx: Tx, sessions: Sequence[Session]) -> None:
        """Index stored sessions that have something to search, unindex the others."""
        specs = await session_docs(tx, sessions)
        await self.deps.indexer.drop(tx, [i for i, spec in specs.items() if spec is None])
        await self.deps.indexer.put_many(tx, [spec for spec in specs.values() if spec is not None])

    async def _observation_docs(self, db: Database) -> AsyncIterator[list[DocSpec]]:
        async with db.read() as conn:
            projects = await MetaRepository(conn).projects_of("observations")
        for project in projects:
            async with db.read() as conn:
                rows = await ObservationRepository(conn).all_in_project(project)
            for batch in self.deps.indexer.batches([observation_doc(o) for o in rows]):
                yield batch

    @staticmethod
    async def _observation_lookup(conn: Conn, project: str, ids: Sequence[str]) -> list[DocSpec]:
        return [observation_doc(o) for o in await ObservationRepository(conn).get_many(ids, project)]

    @staticmethod
    async def _session_lookup(conn: Conn, project: str, ids: Sequence[str]) -> list[DocSpec]:
        sessions = SessionRepository(conn)
        found = [s for i in ids if (s := await sessions.get_or_none(i, project)) is not None]
        return [spec for spec in (await session_docs(conn, found)).values() if spec is not None]

    async def _session_docs(self, db: Database) -> AsyncIterator[list[DocSpec]]:
        async with db.read() as conn:
            projects = await MetaRepository(conn).projects_of("sessions")
        for project in projects:
            async with db.read() as conn:
                found = await SessionRepository(conn).all_in_project(project)
                specs = [spec for spec in (await session_docs(conn, found)).values() if spec is not None]
            for batch in self.deps.indexer.batches(specs):
                yield batch
