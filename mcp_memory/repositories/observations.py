"""SQL for observations."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic_core import from_json

from mcp_memory.db import Row
from mcp_memory.errors import NotFoundError
from mcp_memory.models.records import Observation
from mcp_memory.repositories.base import ID_CHUNK, Repository, chunked, dump_json, placeholders, row_dict

_COLUMNS = (
    "id, project, session_id, agent_id, seq, type, title, content, facts, concepts, files, importance, "
    "ref, occurred_at, created_at"
)
_LISTS = ("facts", "concepts", "files")
_WHEN = "coalesce(occurred_at, created_at)"
SPANS_SQL = (
    "WITH ends AS MATERIALIZED (SELECT s.value AS id, "
    f"(SELECT min({_WHEN}) FROM observations WHERE session_id = s.value) AS kept_first, "
    f"(SELECT max({_WHEN}) FROM observations WHERE session_id = s.value) AS kept_last, "
    "(SELECT min(happened_at) FROM folded_observations WHERE session_id = s.value) AS folded_first, "
    "(SELECT max(happened_at) FROM folded_observations WHERE session_id = s.value) AS folded_last "
    "FROM (SELECT DISTINCT value FROM json_each(?)) s) "
    "SELECT id, min(coalesce(kept_first, folded_first), coalesce(folded_first, kept_first)), "
    "max(coalesce(kept_last, folded_last), coalesce(folded_last, kept_last)) FROM ends"
)
"""When each of a list of sessions began and last went on, its folded turns included: one min and
one max per session and table, each a seek in observations_by_session_time or
folded_observations_by_session (a GROUP BY over their rows would read every one of them)."""


_WITH_WINDOWS_SQL = (
    f"WITH hit AS (SELECT {_COLUMNS}, fix_cues FROM observations "
    "WHERE +project = ? AND id IN (SELECT value FROM json_each(?))), "
    "span AS (SELECT session_id, min(seq) AS first, max(seq) + ? AS last FROM hit WHERE type = ? GROUP BY session_id) "
    "SELECT 1 AS asked, * FROM hit UNION ALL "
    f"SELECT 0, {', '.join('o.' + c for c in _COLUMNS.split(', '))}, o.fix_cues "
    "FROM span JOIN observations o ON o.session_id = span.session_id AND o.seq BETWEEN span.first AND span.last"
)
"""Observations asked for by id (`asked` 1) and the windows around those of one type (`asked` 0)."""


def _obs(row: Row) -> Observation:
    return Observation(**row_dict(row, _LISTS))


def _obs_with_cues(row: Row) -> tuple[Observation, str | None]:
    data = row_dict(row, _LISTS)
    cues = data.pop("fix_cues")
    return Observation(**data), cues


class ObservationRepository(Repository):
    """Observations; every query is confined to one project."""

    async def add(self, obs: Observation, fix_cues: str | None = None) -> None:
        """Store an observation with the cues pairing reads of it (services/fixes.py)."""
        await self.conn.execute(
            f"INSERT INTO observations ({_COLUMNS}, fix_cues) VALUES ({placeholders(16)})",
            (
                obs.id,
                obs.project,
                obs.session_id,
                obs.agent_id,
                obs.seq,
                obs.type,
                obs.title,
                obs.content,
                dump_json(obs.facts),
                dump_json(obs.concepts),
                dump_json(obs.files),
                obs.importance,
                obs.ref,
                obs.occurred_at,
                obs.created_at,
                fix_cues,
            ),
        )

    async def set_fix_cues(self, cues: Sequence[tuple[str, str]]) -> None:
        """Store (id, cues) for observations stored without them (an import's rows)."""
        await self.conn.executemany("UPDATE observations SET fix_cues = ? WHERE id = ?", [(c, i) for i, c in cues])

    async def get(self, obs_id: str, project: str, field: str | None = None) -> Observation:
        """An observation of the project, or an error naming the argument (`field`) that named it."""
        found = await self.get_many([obs_id], project)
        if not found:
            raise NotFoundError("observation", obs_id, "call memory_observations or memory_recall", field=field)
        return found[0]

    async def get_many(self, ids: Sequence[str], project: str) -> list[Observation]:
        """The observations among `ids` that exist in `project`, in the order of `ids`."""
        rows = await self.fetch_in(
            f"SELECT {_COLUMNS} FROM observations WHERE +project = ? AND id IN ({{ids}})", ids, (project,)
        )
        by_id = {r["id"]: _obs(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def page(
        self,
        project: str,
        *,
        session_id: str | None = None,
        types: Sequence[str] | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 50,
        offset: int = 0,
        newest_first: bool = True,
    ) -> tuple[list[Observation], int]:
        """Observations matching the filters in time order, and how many match in all."""
        where, params = self._where(project, session_id, types, since, until)
        order = "DESC" if newest_first else "ASC"
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM observations WHERE {where} "
            f"ORDER BY {_WHEN} {order}, seq {order}, id {order} LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        total = await self.conn.fetchval(f"SELECT count(*) FROM observations WHERE {where}", params)
        return [_obs(r) for r in rows], int(total)

    async def ids_matching(
        self,
        project: str,
        *,
        session_id: str | None = None,
        types: Sequence[str] | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[str]:
        where, params = self._where(project, session_id, types, since, until)
        rows = await self.conn.fetchall(f"SELECT id FROM observations WHERE {where} ORDER BY id", params)
        return [r[0] for r in rows]

    async def around(
        self,
        project: str,
        when: str,
        seq: int,
        session_id: str | None,
        before: int,
        after: int,
        anchor_id: str | None = None,
    ) -> tuple[list[Observation], list[Observation]]:
        """Up to `before` observations just before a position and `after` just after it.

        Observations are ordered by (time, seq, id): sessions often share a moment and a seq (an
        import, parallel chats), and only the id makes the order total. The position is the anchor
        observation's (when, seq, anchor_id); without `anchor_id` it is a moment, and observations
        recorded exactly at (when, seq) are on neither side.
        """
        scope, params = ("project = ?", [project])
        if session_id is not None:
            scope += " AND session_id = ?"
            params.append(session_id)
        # "" sorts before every id and the highest code point after every one: ties fall on neither side.
        low, high = (anchor_id, anchor_id) if anchor_id is not None else ("", "\U0010ffff")
        # The plain bound on the time lets SQLite seek in observations_by_time; the row value decides ties.
        earlier = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM observations WHERE {scope} AND {_WHEN} <= ? AND ({_WHEN}, seq, id) < (?, ?, ?) "
            f"ORDER BY {_WHEN} DESC, seq DESC, id DESC LIMIT ?",
            (*params, when, when, seq, low, before),
        )
        later = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM observations WHERE {scope} AND {_WHEN} >= ? AND ({_WHEN}, seq, id) > (?, ?, ?) "
            f"ORDER BY {_WHEN} ASC, seq ASC, id ASC LIMIT ?",
            (*params, when, when, seq, high, after),
        )
        return [_obs(r) for r in reversed(earlier)], [_obs(r) for r in later]

    async def in_spans(self, spans: Sequence[tuple[str, int, int]]) -> list[Observation]:
        """The observations at positions `first`..`last` of each (session, first, last), by
        session and position: one statement for a page of hits' neighbours, not one each."""
        found: list[Observation] = []
        for chunk in chunked(spans, ID_CHUNK // 3):
            where = " OR ".join(["(session_id = ? AND seq BETWEEN ? AND ?)"] * len(chunk))
            params = [value for span in chunk for value in span]
            found += map(_obs, await self.conn.fetchall(f"SELECT {_COLUMNS} FROM observations WHERE {where}", params))
        unique = {o.id: o for o in found}  # spans of two chunks may overlap
        return sorted(unique.values(), key=lambda o: (o.session_id, o.seq))

    async def get_many_with_windows(
        self, ids: Sequence[str], project: str, *, around: str, after: int
    ) -> tuple[list[Observation], list[tuple[Observation, str | None]]]:
        """The observations among `ids` that exist in `project`, in the order of `ids`, and the
        windows around those of type `around`: in each of their sessions, the observations from
        the first of them to `after` positions past the last, with their stored fix cues, by
        session and position. One statement for both: a search asks this of every page it shows."""
        if not ids:
            return [], []
        rows = await self.conn.fetchall(_WITH_WINDOWS_SQL, (project, json.dumps(list(ids)), after, around))
        made: dict[str, tuple[Observation, str | None]] = {}
        asked: dict[str, Observation] = {}
        window: list[tuple[Observation, str | None]] = []
        for row in rows:
            data = row_dict(row, _LISTS)
            in_window = not data.pop("asked")
            pair = made.get(data["id"])  # an error asked for is also in its own window: made once
            if pair is None:
                cues = data.pop("fix_cues")
                pair = made[data["id"]] = (Observation(**data), cues)
            if in_window:
                window.append(pair)
            else:
                asked[pair[0].id] = pair[0]
        window.sort(key=lambda pair: (pair[0].session_id, pair[0].seq))
        return [asked[i] for i in ids if i in asked], window

    async def kinds_between(
        self, project: str, since: str | None, until: str | None
    ) -> list[tuple[str, str, list[str]]]:
        """(session, type, concepts) of every observation made within [since, until], in time order:
        what a reflection over a long window counts, without making a record of each."""
        where, params = self._where(project, None, None, since, until)
        sql = f"SELECT session_id, type, concepts FROM observations WHERE {where} ORDER BY {_WHEN}, seq, id"
        return await self.fetch_paged(sql, params, lambda r: (r[0], r[1], from_json(r[2]) if r[2] else []))

    async def in_sessions_between_with_cues(
        self, project: str, session_ids: Sequence[str], since: str | None, until: str | None
    ) -> tuple[list[Observation], dict[str, str | None]]:
        """The observations of `session_ids` made within [since, until], in time order, and their
        stored fix cues by id."""
        where, params = self._where(project, None, None, since, until)
        sql = (
            f"SELECT {_COLUMNS}, fix_cues FROM observations WHERE {where} "
            f"AND session_id IN (SELECT value FROM json_each(?)) ORDER BY {_WHEN}, seq, id"
        )
        pairs = await self.fetch_paged(sql, (*params, dump_json(list(session_ids))), _obs_with_cues)
        return [obs for obs, _ in pairs], {obs.id: cues for obs, cues in pairs}

    async def in_session(self, session_id: str) -> list[Observation]:
        """Every observation of a session, in order."""
        return (await self.in_session_with_cues(session_id))[0]

    async def in_session_with_cues(self, session_id: str) -> tuple[list[Observation], dict[str, str | None]]:
        """Every observation of a session, in order, and their stored fix cues by id."""
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS}, fix_cues FROM observations WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        pairs = [_obs_with_cues(r) for r in rows]
        return [obs for obs, _ in pairs], {obs.id: cues for obs, cues in pairs}

    async def facts(self, project: str, ids: Sequence[str] | None = None) -> list[tuple[str, str, list[str]]]:
        """(id, session, facts) of a project's observations that carry facts, oldest first: all of
        them, or those among `ids`."""
        query = f"SELECT id, session_id, facts, {_WHEN}, seq FROM observations WHERE project = ? AND facts <> '[]' "
        if ids is None:
            rows = list(await self.conn.fetchall(f"{query} ORDER BY {_WHEN}, seq", (project,)))
        else:
            rows = sorted(
                await self.fetch_in(f"{query} AND id IN ({{ids}})", ids, (project,)), key=lambda r: (r[3], r[4])
            )
        return [(r["id"], r["session_id"], json.loads(r["facts"])) for r in rows]

    async def least_valuable(self, session_id: str, count: int, keep: Sequence[str] = ()) -> list[Observation]:
        """The `count` observations to fold first: lowest importance, then oldest; never one a relation targets."""
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM observations WHERE session_id = ? "
            f"AND id NOT IN ({placeholders(len(keep))}) "
            "AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.target_id = observations.id) "
            "ORDER BY importance ASC, seq ASC LIMIT ?",
            (session_id, *keep, count),
        )
        return [_obs(r) for r in rows]

    async def spans(self, session_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """When the first and the latest kept observation of each session happened (occurred_at,
        else when it was recorded); a session with none kept is left out."""
        rows = await self.conn.fetchall(SPANS_SQL, (dump_json(list(session_ids)),))
        return {r[0]: (r[1], r[2]) for r in rows if r[1] is not None}

    async def ids_in_session(self, session_id: str) -> list[str]:
        rows = await self.conn.fetchall("SELECT id FROM observations WHERE session_id = ?", (session_id,))
        return [r[0] for r in rows]

    async def close_gaps(self, session_id: str, removed: Sequence[int]) -> list[str]:
        """Number a session's observations as if those at the `removed` positions had never been
        recorded (the next observation takes the session's count + 1); returns the ids renumbered."""
        if not removed:
            return []
        rows = await self.conn.fetchall(
            "UPDATE observations SET seq = seq - (SELECT count(*) FROM json_each(?) WHERE value < observations.seq) "
            "WHERE session_id = ? AND seq > ? RETURNING id",
            (dump_json(sorted(removed)), session_id, min(removed)),
        )
        return sorted(r[0] for r in rows)

    async def placed_apart(self, positions: Sequence[tuple[str, int]]) -> set[str]:
        """The sessions of those observations, given as (id, position), stored at another position."""
        rows = await self.conn.fetchall(
            "SELECT DISTINCT o.session_id FROM json_each(?) j JOIN observations o "
            "ON o.id = json_extract(j.value, '$[0]') WHERE o.seq <> json_extract(j.value, '$[1]')",
            (dump_json([list(position) for position in positions]),),
        )
        return {str(r[0]) for r in rows}

    async def renumber_muddled(self, session_ids: Sequence[str], apart: Sequence[str] = ()) -> list[Observation]:
        """Number afresh, in time order, the observations of those sessions whose positions are out
        of place: colliding, past the count, or at or below the folded count where that is not where
        a fold left them (copies of a session that grew apart, or numbered it apart, merged by an
        import), or that another copy numbers otherwise (`apart`: the order both come to is time
        order). Returns those renumbered.

        A fold keeps the positions of what it keeps, so when a session has a note with the time of
        each folded observation, a position is in place if it is the observation's rank among the
        kept and folded ones in time order (as recorded), and that rank is what a renumbering gives.
        Without every note, folded observations count as the first: positions run from
        folded_count + 1 to the session's count. Either way the next observation recorded takes
        the count + 1.
        """
        rows = await self.conn.fetchall(
            "WITH chosen (session_id) AS (SELECT value FROM json_each(?)), "
            "noted (session_id) AS ("
            "SELECT s.id FROM sessions s WHERE s.id IN (SELECT session_id FROM chosen) AND s.folded_count > 0 "
            "AND s.folded_count = (SELECT count(*) FROM folded_observations f WHERE f.session_id = s.id)), "
            "events (session_id, id, at, kept) AS ("
            "SELECT session_id, id, coalesce(occurred_at, created_at), 1 FROM observations "
            "WHERE session_id IN (SELECT session_id FROM chosen) "
            "UNION ALL SELECT session_id, id, happened_at, 0 FROM folded_observations "
            "WHERE session_id IN (SELECT session_id FROM noted)), "
            "placed (id, seq) AS ("
            "SELECT e.id, row_number() OVER (PARTITION BY e.session_id ORDER BY e.at, e.id) "
            "+ CASE WHEN e.session_id IN (SELECT session_id FROM noted) THEN 0 ELSE s.folded_count END "
            "FROM events e JOIN sessions s ON s.id = e.session_id), "
            "muddled (session_id) AS ("
            "SELECT o.session_id FROM observations o JOIN sessions s ON s.id = o.session_id "
            "JOIN placed p ON p.id = o.id GROUP BY o.session_id "
            "HAVING count(DISTINCT o.seq) < count(*) OR max(o.seq) > max(s.observation_count) OR min(o.seq) < 1 "
            "OR (min(o.seq) <= max(s.folded_count) AND (o.session_id NOT IN (SELECT session_id FROM noted) "
            "OR sum(o.seq <> p.seq) > 0)) OR o.session_id IN (SELECT value FROM json_each(?))) "
            "UPDATE observations SET seq = placed.seq FROM placed "
            "WHERE observations.id = placed.id AND observations.session_id IN (SELECT session_id FROM muddled) "
            "AND observations.seq <> placed.seq "
            f"RETURNING {_COLUMNS}",
            (dump_json(list(session_ids)), dump_json(list(apart))),
        )
        return [_obs(r) for r in rows]

    async def delete(self, ids: Sequence[str]) -> None:
        await self.delete_in("observations", ids)

    async def folded_but_stored(self, session_ids: Sequence[str]) -> list[Observation]:
        """Rows of those sessions noted as folded (an import brought them back), in the order they happened."""
        rows = await self.fetch_in(
            f"SELECT {', '.join('o.' + c for c in _COLUMNS.split(', '))} FROM observations o "
            "JOIN folded_observations f ON f.id = o.id WHERE o.session_id IN ({ids})",
            session_ids,
        )
        return sorted(map(_obs, rows), key=lambda o: (o.occurred_at or o.created_at, o.seq, o.id))

    async def count(self, project: str | None = None) -> int:
        if project is None:
            return int(await self.conn.fetchval("SELECT count(*) FROM observations"))
        return int(await self.conn.fetchval("SELECT count(*) FROM observations WHERE project = ?", (project,)))

    async def all_in_project(self, project: str) -> list[Observation]:
        rows = await self.conn.fetchall(f"SELECT {_COLUMNS} FROM observations WHERE project = ?", (project,))
        return [_obs(r) for r in rows]

    @staticmethod
    def _where(
        project: str,
        session_id: str | None,
        types: Sequence[str] | None,
        since: str | None,
        until: str | None,
    ) -> tuple[str, tuple[object, ...]]:
        clauses, params = ["project = ?"], [project]
        if session_id is not None:
            clauses.append("session_id = ?")
            params.append(session_id)
        if types:
            clauses.append(f"type IN ({placeholders(len(types))})")
            params.extend(types)
        if since is not None:
            clauses.append(f"{_WHEN} >= ?")
            params.append(since)
        if until is not None:
            clauses.append(f"{_WHEN} <= ?")
            params.append(until)
        return " AND ".join(clauses), tuple(params)
