"""SQL for actions, their dependencies and their parent/child tree."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from mcp_memory.db import Row, distinct_tags
from mcp_memory.models.records import Action
from mcp_memory.repositories.base import Repository, dump_json, placeholders, row_dict

_COLUMNS = (
    "id, project, agent_id, title, description, status, priority, parent_id, tags, due, completed_at, "
    "created_at, updated_at"
)
_OPEN = "('pending', 'active', 'blocked')"
_REACH = (
    "WITH RECURSIVE reach(id) AS ("
    " SELECT ?"
    " UNION SELECT d.depends_on FROM action_dependencies d JOIN reach ON d.action_id = reach.id"
    " UNION SELECT a.id FROM actions a JOIN reach ON a.parent_id = reach.id"
    ")"
)
"""Every action `?` waits for, directly or not (its dependencies and children); UNION visits each once."""


def _action(row: Row) -> Action:
    values = row_dict(row, ("tags",))
    # Tags stored before tags were composed may hold "cafe\u0301" beside "café": read as one, they are
    # written back as one by the action's next update (filters fold stored values, matching either).
    values["tags"] = distinct_tags(values["tags"])
    return Action(**values)


class ActionRepository(Repository):
    """Actions of one project at a time."""

    async def add(self, a: Action) -> None:
        await self.conn.execute(
            f"INSERT INTO actions ({_COLUMNS}) VALUES ({placeholders(13)})",
            (
                a.id,
                a.project,
                a.agent_id,
                a.title,
                a.description,
                a.status,
                a.priority,
                a.parent_id,
                dump_json(a.tags),
                a.due,
                a.completed_at,
                a.created_at,
                a.updated_at,
            ),
        )

    async def update(self, a: Action) -> None:
        await self.conn.execute(
            "UPDATE actions SET title = ?, description = ?, status = ?, priority = ?, parent_id = ?, tags = ?, "
            "due = ?, completed_at = ?, updated_at = ? WHERE id = ?",
            (
                a.title,
                a.description,
                a.status,
                a.priority,
                a.parent_id,
                dump_json(a.tags),
                a.due,
                a.completed_at,
                a.updated_at,
                a.id,
            ),
        )

    async def get_many(self, ids: Sequence[str], project: str) -> list[Action]:
        rows = await self.fetch_in(
            f"SELECT {_COLUMNS} FROM actions WHERE +project = ? AND id IN ({{ids}})", ids, (project,)
        )
        by_id = {r["id"]: _action(r) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    async def dependencies(self, ids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        """For each action, its dependencies as (id, status)."""
        found: dict[str, list[tuple[str, str]]] = {i: [] for i in ids}
        rows = await self.fetch_in(
            "SELECT d.action_id, d.depends_on, a.status FROM action_dependencies d "
            "JOIN actions a ON a.id = d.depends_on WHERE d.action_id IN ({ids}) ORDER BY d.depends_on",
            ids,
        )
        for action_id, dep, status in rows:
            found[action_id].append((dep, status))
        return found

    async def waiting_on(self, ids: Sequence[str]) -> list[str]:
        """Actions, other than `ids`, that depend on any of `ids`."""
        rows = await self.fetch_in(
            "SELECT DISTINCT action_id FROM action_dependencies WHERE depends_on IN ({ids})", ids
        )
        return sorted({r[0] for r in rows} - set(ids))

    async def children_of(self, ids: Sequence[str]) -> list[str]:
        """Actions, other than `ids`, whose parent is among `ids`."""
        rows = await self.fetch_in("SELECT id FROM actions WHERE parent_id IN ({ids})", ids)
        return sorted({r[0] for r in rows} - set(ids))

    async def child_counts(self, ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """For each action, (children, children done or cancelled)."""
        found = dict.fromkeys(ids, (0, 0))
        rows = await self.fetch_in(
            "SELECT parent_id, count(*), sum(status IN ('done', 'cancelled')) FROM actions "
            "WHERE parent_id IN ({ids}) GROUP BY parent_id",
            ids,
        )
        for parent, total, done in rows:
            found[parent] = (int(total), int(done or 0))
        return found

    async def open_children(self, action_id: str) -> list[str]:
        rows = await self.conn.fetchall(
            "SELECT id FROM actions WHERE parent_id = ? AND status NOT IN ('done', 'cancelled') ORDER BY id",
            (action_id,),
        )
        return [r[0] for r in rows]

    async def open_under_closed(self, ids: Sequence[str]) -> list[Action]:
        """Open actions under a done or cancelled parent, where the action or its parent is among
        `ids`: those an active child first (it reopens its parent active), then by id."""
        found: dict[str, Action] = {}
        for end in ("c", "p"):
            rows = await self.fetch_in(
                f"SELECT {', '.join('c.' + column for column in _COLUMNS.split(', '))} FROM actions c "
                f"JOIN actions p ON p.id = c.parent_id WHERE {end}.id IN ({{ids}}) "
                f"AND c.status IN {_OPEN} AND p.status IN ('done', 'cancelled')",
                ids,
            )
            found.update((row["id"], _action(row)) for row in rows)
        return sorted(found.values(), key=lambda a: (a.status != "active", a.id))

    async def add_dependencies(self, action_id: str, deps: Sequence[str]) -> None:
        await self.conn.executemany(
            "INSERT INTO action_dependencies (action_id, depends_on) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [(action_id, dep) for dep in deps],
        )

    async def remove_dependencies(self, action_id: str, deps: Sequence[str]) -> None:
        if deps:
            await self.conn.execute(
                f"DELETE FROM action_dependencies WHERE action_id = ? AND depends_on IN ({placeholders(len(deps))})",
                (action_id, *deps),
            )

    async def wait_path(self, start: str, goal: str) -> list[tuple[str, bool]] | None:
        """A shortest chain of "waits for" edges from `start` to `goal`, if one exists.

        An action waits for its dependencies and for its children. Each step is (action id, whether
        it is a child of the step before); the first step is `start`. Linear in the graph: the
        reachability test visits each action once, and the edges are fetched only when a path exists.
        """
        if not await self.conn.fetchval(f"{_REACH} SELECT EXISTS (SELECT 1 FROM reach WHERE id = ?)", (start, goal)):
            return None
        rows = await self.conn.fetchall(
            f"{_REACH} SELECT d.action_id, d.depends_on, 0 FROM action_dependencies d"
            " JOIN reach ON d.action_id = reach.id"
            " UNION ALL SELECT a.parent_id, a.id, 1 FROM actions a JOIN reach ON a.parent_id = reach.id",
            (start,),
        )
        edges: dict[str, list[tuple[str, bool]]] = {}
        for source, target, is_child in rows:
            edges.setdefault(source, []).append((target, bool(is_child)))
        # Breadth first with back-pointers: each action is visited once and the path is a shortest one.
        came_from: dict[str, tuple[str, bool] | None] = {start: None}
        queue = deque([start])
        while queue and goal not in came_from:
            node = queue.popleft()
            for target, is_child in sorted(edges.get(node, [])):
                if target not in came_from:
                    came_from[target] = (node, is_child)
                    queue.append(target)
        if goal not in came_from:
            return None
        path = []
        node, step = goal, came_from[goal]
        while step is not None:
            path.append((node, step[1]))
            node, step = step[0], came_from[step[0]]
        path.append((start, False))
        return path[::-1]

    async def ancestors(self, action_id: str) -> list[str]:
        """Parent, grandparent, … of an action (stops at a repeat, so a corrupt loop cannot hang)."""
        rows = await self.conn.fetchall(
            "WITH RECURSIVE up(id, depth) AS ("
            " SELECT parent_id, 1 FROM actions WHERE id = ?"
            " UNION"
            " SELECT a.parent_id, up.depth + 1 FROM actions a JOIN up ON a.id = up.id"
            " WHERE a.parent_id IS NOT NULL AND up.depth < 1000"
            ") SELECT id FROM up WHERE id IS NOT NULL ORDER BY depth",
            (action_id,),
        )
        return [r[0] for r in rows]

    async def page(
        self,
        project: str,
        *,
        statuses: Sequence[str],
        tag: str | None,
        parent_id: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[Action], int]:
        """Actions by status (and folded tag, parent), highest priority then oldest first, and the total."""
        clauses = ["project = ?", f"status IN ({placeholders(len(statuses))})"]
        params: list[object] = [project, *statuses]
        if tag is not None:
            clauses.append("EXISTS (SELECT 1 FROM json_each(actions.tags) WHERE folded(value) = ?)")
            params.append(tag)
        if parent_id is not None:
            clauses.append("parent_id = ?")
            params.append(parent_id)
        where = " AND ".join(clauses)
        rows = await self.conn.fetchall(
            f"SELECT {_COLUMNS} FROM actions WHERE {where} ORDER BY priority DESC, created_at, id LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        total = await self.conn.fetchval(f"SELECT count(*) FROM actions WHERE {where}", params)
        return [_action(r) for r in rows], int(total)

    async def frontier(self, project: str, tag: str | None, limit: int, offset: int) -> tuple[list[Action], int]:
        """Open, unblocked actions whose dependencies are all done and that have no open children,
        highest priority then oldest first, and how many there are in all (`tag` given folded)."""
        where = (
            "a.project = ? AND a.status IN ('pending', 'active') "
            "AND NOT EXISTS (SELECT 1 FROM action_dependencies d JOIN actions b ON b.id = d.depends_on "
            "                WHERE d.action_id = a.id AND b.status <> 'done') "
            f"AND NOT EXISTS (SELECT 1 FROM actions c WHERE c.parent_id = a.id AND c.status IN {_OPEN})"
        )
        params: list[object] = [project]
        if tag is not None:
            where += " AND EXISTS (SELECT 1 FROM json_each(a.tags) WHERE folded(value) = ?)"
            params.append(tag)
        rows = await self.conn.fetchall(
            f"SELECT {', '.join('a.' + c.strip() for c in _COLUMNS.split(','))} FROM actions a "
            f"WHERE {where} ORDER BY a.priority DESC, a.created_at, a.id LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        total = await self.conn.fetchval(f"SELECT count(*) FROM actions a WHERE {where}", params)
        return [_action(r) for r in rows], int(total)

    async def count_open(self, project: str) -> int:
        return int(
            await self.conn.fetchval(
                f"SELECT count(*) FROM actions WHERE project = ? AND status IN {_OPEN}", (project,)
            )
        )
