"""SQL for sessions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from mcp_memory.errors import NotFoundError
from mcp_memory.ids import SERVER_SESSION_GLOB, scoped_session_id
from mcp_memory.models.records import Session
from mcp_memory.repositories.base import Repository, dump_json, row_dict

_COLUMNS = (
    "id, project, agent_id, title, started_at, last_activity_at, ended_at, summary, summary_source, "
    "summarized_at, folded_digest, observation_count, folded_count, created_at, updated_at"
)


RECENT_FIRST = "ORDER BY last_activity_at DESC, id DESC"
"""The order of session pages, the most recently active first: index sessions_by_activity's."""
_TELLING = (
    "(s.observation_count != s.folded_count OR coalesce(s.summary, '') != '' OR coalesce(s.folded_digest, '') != '')"
)
"""Whether session `s` has something to tell: an observation not folded away, a summary or a folded digest."""
_HAPPENED = "coalesce(o.occurred_at, o.created_at)"
"""When observation `o` happened: observations_by_time's and observations_by_session_time's expression."""


class SessionRepository(Repository):
    """Sessions of every project; callers always pass the project they act for."""

    async def get_or_none(self, session_id: str, project: str) -> Session | None:
        """A session of the project by its stored id or by the name its caller gave it (see scoped_session_id)."""
        row = await self.conn.fetchone(
            f"SELECT {_COLUMNS} FROM sessions WHERE id IN (?, ?) AND project = ? ORDER BY length(id) LIMIT 1",
            (session_id, scoped_session_id(session_id, project), project),
        )
        return None if row is None else Session(**row_dict(row))

    async def get(self, session_id: str, project: str, field: str = "session_id") -> Session:
        """A session of the project, or an error naming the argument (`field`) that named it."""
        found = await self.get_or_none(session_id, project)
        if found is None:
            raise NotFoundError("session", session_id, "call memory_sessions to list sessions", field=field)
        return found

    async def exists_anywhere(self, session_id: str) -> bool:
        """Whether any project holds this id (then a caller's name is stored scoped to its project)."""
        return bool(await self.conn.fetchval("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))

    async def add(self, session: Session) -> None:
        await self.conn.execute(
            f"INSERT INTO sessions ({_COLUMNS}) VALUES ({', '.join('?' * 15)})",
            (
                session.id,
                session.project,
                session.agent_id,
                session.title,
                session.started_at,
                session.last_activity_at,
                session.ended_at,
                session.summary,
                session.summary_source,
                session.summarized_at,
                session.folded_digest,
                session.observation_count,
                session.folded_count,
                session.created_at,
                session.updated_at,
            ),
        )

    async def latest_open(self, project: str, agent_id: str | None) -> Session | None:
        """The agent's most recently active open session among those the server started (ids `ses_…`
        of the shape it mints).

        Sessions a caller named itself are its own conversations: only that caller, by name, adds to them,
        even when the name starts with "ses_".
        """
        row = await self.conn.fetchone(
            f"SELECT {_COLUMNS} FROM sessions WHERE project = ? AND agent_id IS ? AND ended_at IS NULL "
            "AND id GLOB ? ORDER BY last_activity_at DESC, id DESC LIMIT 1",
            (project, agent_id, SERVER_SESSION_GLOB),
        )
        return None if row is None else Session(**row_dict(row))

    async def latest_active(self, project: str, agent_id: str | None, active_since: str) -> Session | None:
        """The agent's open session (server-started or caller-named) most recently active since `active_since`."""
        row = await self.conn.fetchone(
            f"SELECT {_COLUMNS} FROM sessions WHERE project = ? AND agent_id IS ? AND ended_at IS NULL "
            "AND last_activity_at >= ? ORDER BY last_activity_at DESC, id DESC LIMIT 1",
            (project, agent_id, active_since),
        )
        return None if row is None else Session(**row_dict(row))

    async def record_observation(self, session_id: str, at: str, title: str | None) -> None:
        """Count one more observation and move the activity time; set the title if it has none."""
        await self.conn.execute(
            "UPDATE sessions SET observation_count = observation_count + 1, last_activity_at = ?, "
            "updated_at = ?, title = coalesce(title, ?) WHERE id = ?",
            (at, at, title, session_id),
        )

    async def end(self, session_id: str, at: str, now: str) -> None:
        """End an open session as of `at` (its last activity, for one found idle), stamped changed `now`."""
        await self.conn.execute(
            "UPDATE sessions SET ended_at = ?, updated_at = ? WHERE id = ? AND ended_at IS NULL",
            (at, now, session_id),
        )

    async def end_idle(self, project: str, idle_before: str, at: str) -> list[str]:
        """End every open session last active before `idle_before`, as of its last activity; returns their ids."""
        rows = await self.conn.fetchall(
            "UPDATE sessions SET ended_at = last_activity_at, updated_at = ? "
            "WHERE project = ? AND ended_at IS NULL AND last_activity_at < ? RETURNING id",
            (at, project, idle_before),
        )
        return sorted(r[0] for r in rows)

    async def reopen(self, session_id: str, at: str) -> None:
        await self.conn.execute("UPDATE sessions SET ended_at = NULL, updated_at = ? WHERE id = ?", (at, session_id))

    async def add_folded(self, session_id: str, digest: str, count: int, at: str) -> None:
        """Record that `count` observations were folded into the session's digest."""
        await self.conn.execute(
            "UPDATE sessions SET folded_digest = ?, folded_count = folded_count + ?, updated_at = ? WHERE id = ?",
            (digest, count, at, session_id),
        )

    async def page(
        self, project: str, status: str, idle_before: str, limit: int, offset: int
    ) -> tuple[list[Session], int]:
        """Sessions most recently active first, by status (active, idle, open, ended, all), and the total.

        Open sessions last active before `idle_before` are idle; the others are active.
        """
        where, params = "project = ?", [project]
        if status in ("active", "idle", "open"):
            where += " AND ended_at IS NULL"
        if status == "active":
            where += " AND last_activity_at >= ?"
            params.append(idle_before)
        elif status == "idle":
            where += " AND last_activity_at < ?"
            params.append(idle_before)
        elif status == "ended":
            where += " AND ended_at IS NOT NULL"
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM sessions WHERE {where} {RECENT_FIRST} LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        total = await self.conn.fetchval(f"SELECT count(*) FROM sessions WHERE {where}", params)
        return [Session(**row_dict(r)) for r in rows], int(total)

    async def latest_telling(self, project: str, limit: int) -> list[tuple[Session, str]]:
        """The `limit` sessions of the project with something to tell (those count_telling counts) that
        went on latest, each with when: its latest kept observation happened (occurred_at, else when it
        was recorded), or, keeping none, its last activity. Latest first; of those that went on at the
        same moment, the one whose observation was recorded last, then those keeping none by id, descending.

        Imported history is recorded today but happened long ago, so the activity time alone would put
        it first. Read without visiting every session: observations_by_time is walked in its own order
        until `limit` sessions are found (every row read belongs to one of them or to one with nothing
        to tell), and sessions_by_activity gives those keeping no observation that went on since then.
        """
        happened: dict[str, str] = {}
        silent: set[str] = set()
        async for page in self.conn.pages(
            f"SELECT o.session_id, {_HAPPENED}, {_TELLING} FROM observations o JOIN sessions s ON s.id = o.session_id "
            f"WHERE o.project = ? ORDER BY {_HAPPENED} DESC, o.rowid DESC",
            (project,),
            size=4 * limit,
        ):
            for session_id, when, telling in page:
                if session_id in happened or session_id in silent:
                    continue
                if telling:
                    happened[session_id] = when
                else:
                    silent.add(session_id)
            if len(happened) >= limit:
                break
        ids = list(happened)[:limit]
        boundary = happened[ids[-1]] if len(ids) == limit else ""  # what went on before cannot make it
        stored = {s.id: s for s in await self.get_many(ids)}
        found = [(stored[i], happened[i]) for i in ids if i in stored]
        rows = await self.conn.fetchall(
            # Checked from the index alone first: only a session keeping no observation reads its row.
            f"SELECT {_COLUMNS} FROM sessions s WHERE project = ? AND last_activity_at >= ? "
            f"AND NOT EXISTS (SELECT 1 FROM observations o WHERE o.session_id = s.id) AND {_TELLING} "
            f"{RECENT_FIRST} LIMIT ?",
            (project, boundary, limit),
        )
        found += [(s, s.last_activity_at) for s in (Session(**row_dict(r)) for r in rows)]
        found.sort(key=lambda pair: pair[1], reverse=True)  # stable: each source keeps its order at a tie
        return found[:limit]

    async def needing_summary(self, project: str) -> list[Session]:
        """Ended sessions with no summary, or one older than their last activity or their latest outcome
        (the summary tells how outcomes went; recording one does not move the activity time)."""
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM sessions LEFT JOIN ("
            "SELECT session_id, max(created_at) AS outcome_at FROM outcomes "
            "WHERE project = ? AND session_id IS NOT NULL GROUP BY session_id"
            ") latest ON latest.session_id = sessions.id "
            "WHERE project = ? AND ended_at IS NOT NULL "
            "AND (summary IS NULL OR summarized_at < max(last_activity_at, coalesce(outcome_at, ''))) "
            "ORDER BY started_at, id",
            (project, project),
        )
        return [Session(**row_dict(r)) for r in rows]

    async def set_summary(self, session_id: str, summary: str, source: str, at: str, title: str | None) -> None:
        await self.conn.execute(
            "UPDATE sessions SET summary = ?, summary_source = ?, summarized_at = ?, updated_at = ?, "
            "title = coalesce(title, ?) WHERE id = ?",
            (summary, source, at, at, title, session_id),
        )

    async def remove_observations(
        self, session_id: str, count: int, title: str | None, drop_summary: bool, at: str
    ) -> None:
        """Take `count` forgotten observations off the session's count, give it `title`, and drop its
        summary when that was written from them (it then needs one again)."""
        await self.conn.execute(
            "UPDATE sessions SET observation_count = max(observation_count - ?, folded_count), title = ?, "
            "summary = CASE WHEN ? THEN NULL ELSE summary END, "
            "summary_source = CASE WHEN ? THEN NULL ELSE summary_source END, "
            "summarized_at = CASE WHEN ? THEN NULL ELSE summarized_at END, updated_at = ? WHERE id = ?",
            (count, title, drop_summary, drop_summary, drop_summary, at, session_id),
        )

    async def drop_summaries_since(self, written: Sequence[tuple[str, str]], at: str) -> list[str]:
        """Drop the summary of each session, given as (id, time), that was written at or after that time
        (it may quote what was recorded then); returns the sessions whose summary went."""
        dropped = []
        for session_id, since in written:
            row = await self.conn.fetchone(
                "UPDATE sessions SET summary = NULL, summary_source = NULL, summarized_at = NULL, updated_at = ? "
                "WHERE id = ? AND summary IS NOT NULL AND summarized_at >= ? RETURNING id",
                (at, session_id, since),
            )
            if row is not None:
                dropped.append(str(row[0]))
        return dropped

    async def records_held(self, session_ids: Sequence[str]) -> Counter[str]:
        """How many observations and outcomes each of these sessions holds (one grouped read a table)."""
        held: Counter[str] = Counter()
        for table in ("observations", "outcomes"):
            rows = await self.fetch_in(
                f"SELECT session_id, count(*) FROM {table} WHERE session_id IN ({{ids}}) GROUP BY session_id",
                session_ids,
            )
            held.update({str(r[0]): int(r[1]) for r in rows})
        return held

    async def restamp(self, session_id: str, at: str) -> None:
        """Set when a session last changed (an import whose changes to it came to nothing gives it back)."""
        await self.conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (at, session_id))

    async def recount(self, session_ids: Sequence[str], at: str) -> list[Session]:
        """Count those sessions' observations again (stored ones plus the folded) and move each one's
        activity time up to its latest observation; returns the sessions that changed.

        `updated_at` never moves back (a row imported from a clock ahead of ours stays the newer copy)."""
        rows = await self.conn.fetchall(
            "WITH held (session_id, kept, latest) AS ("
            "SELECT s.id, count(o.id), max(o.created_at) FROM sessions s "
            "LEFT JOIN observations o ON o.session_id = s.id "
            "WHERE s.id IN (SELECT value FROM json_each(?)) GROUP BY s.id) "
            "UPDATE sessions SET observation_count = folded_count + held.kept, "
            "last_activity_at = max(last_activity_at, coalesce(held.latest, '')), updated_at = max(updated_at, ?) "
            "FROM held WHERE sessions.id = held.session_id "
            "AND (observation_count <> folded_count + held.kept OR last_activity_at < held.latest) "
            f"RETURNING {_COLUMNS}",
            (dump_json(list(session_ids)), at),
        )
        return [Session(**row_dict(r)) for r in rows]

    async def over_cap(self, project: str, cap: int) -> list[str]:
        """Sessions keeping more than `cap` observations."""
        rows = await self.conn.fetchall(
            "SELECT id FROM sessions WHERE project = ? AND observation_count - folded_count > ? ORDER BY id",
            (project, cap),
        )
        return [r[0] for r in rows]

    async def ids_begun_between(self, project: str, since: str | None, until: str | None) -> list[str]:
        """Ids of sessions that began within [since, until] (either bound may be open): when the
        earliest of their observations happened, folded ones included, or the session started if
        that was sooner. A conversation imported today from last May began last May."""
        rows = await self.conn.fetchall(
            "SELECT id FROM (SELECT s.id, min(s.started_at, coalesce((SELECT min(coalesce(o.occurred_at, "
            "o.created_at)) FROM observations o WHERE o.session_id = s.id), s.started_at), "
            "coalesce((SELECT min(f.happened_at) FROM folded_observations f WHERE f.session_id = s.id), "
            "s.started_at)) AS began "
            "FROM sessions s WHERE s.project = ?) WHERE began >= coalesce(?, '') AND began <= coalesce(?, '9999') "
            "ORDER BY id",
            (project, since, until),
        )
        return [r[0] for r in rows]

    async def get_many(self, session_ids: Sequence[str]) -> list[Session]:
        """Those sessions that exist, in any project, by id."""
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM sessions WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (dump_json(list(session_ids)),),
        )
        return [Session(**row_dict(r)) for r in rows]

    async def all_in_project(self, project: str) -> list[Session]:
        rows = await self.conn.fetchall(f"SELECT {_COLUMNS} FROM sessions WHERE project = ? ORDER BY id", (project,))
        return [Session(**row_dict(r)) for r in rows]

    async def delete(self, session_id: str) -> None:
        await self.conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    async def count(self, project: str | None = None) -> int:
        if project is None:
            return int(await self.conn.fetchval("SELECT count(*) FROM sessions"))
        return int(await self.conn.fetchval("SELECT count(*) FROM sessions WHERE project = ?", (project,)))

    async def kept_observations(self, project: str) -> int:
        """How many observations the project's sessions keep, from their own counts: one row per
        session read, where counting the observations reads an index entry for each (10 ms at 100k)."""
        return int(
            await self.conn.fetchval(
                "SELECT coalesce(sum(observation_count - folded_count), 0) FROM sessions WHERE project = ?", (project,)
            )
        )

    async def count_telling(self, project: str) -> int:
        """How many sessions of the project have something to tell: an observation not folded away, a
        summary or a folded digest."""
        return int(
            await self.conn.fetchval(f"SELECT count(*) FROM sessions s WHERE project = ? AND {_TELLING}", (project,))
        )
