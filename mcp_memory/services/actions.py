"""Actions: work items with validated status changes, acyclic dependencies and a parent/child tree.

Rules: an action cannot become active or done while a dependency is not done (nor take on an
unfinished one while it is); a parent cannot be done or cancelled while a child is still open, and
no open action sits under a cancelled one; reopening a child (or adding one) reopens a done parent
(active while that child is active and the parent waits for no dependency, else pending), so it is
refused when that would reopen a done action under a cancelled one. So an action waits for its
dependencies and its children, and a change that would make it wait for itself (a dependency
cycle, or a child depending on its own ancestor) is refused. The frontier is every pending or
active action whose dependencies are all done and that has no open children, by priority (highest
first) then age (oldest first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mcp_memory.db import Conn, Tx, distinct_tags, fold_tag, stored_tag
from mcp_memory.errors import ConflictError, InvalidInputError, NotFoundError
from mcp_memory.ids import new_id
from mcp_memory.models.organising import ActionList, ActionResult, ActionView
from mcp_memory.models.records import Action
from mcp_memory.repositories.actions import ActionRepository
from mcp_memory.services.common import TAG_CHARS, Scrubber, Service, moment, normal_forms

STATUSES = ("pending", "active", "blocked", "done", "cancelled")
OPEN_STATUSES = ("pending", "active", "blocked")
CLOSED_STATUSES = ("done", "cancelled")
TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"active", "blocked", "done", "cancelled"}),
    "active": frozenset({"pending", "blocked", "done", "cancelled"}),
    "blocked": frozenset({"pending", "active", "done", "cancelled"}),
    "done": frozenset({"pending", "active"}),
    "cancelled": frozenset({"pending"}),
}
"""Allowed status changes; reopening is done → pending/active and cancelled → pending."""


class ActionService(Service):
    """Creates, updates and lists actions, and computes the frontier."""

    async def create(
        self,
        project: str,
        title: str,
        *,
        description: str | None = None,
        status: str = "pending",
        priority: int = 0,
        parent_id: str | None = None,
        depends_on: Sequence[str] = (),
        tags: Sequence[str] = (),
        due: str | None = None,
        agent_id: str | None = None,
    ) -> ActionResult:
        """Create an action under an optional parent, after optional dependencies."""
        if status not in ("pending", "active", "blocked"):
            raise InvalidInputError("status", "a new action starts as pending, active or blocked")
        scrub = self.scrubber()
        now = self.now_iso()
        action = Action(
            id=new_id("action"),
            project=project,
            agent_id=scrub.optional(agent_id or self.settings.agent_id),
            title=scrub.required("title", title),
            description=scrub.optional(description),
            status=status,
            priority=priority,
            parent_id=parent_id,
            tags=_tags(scrub, tags),
            due=moment("due", due, self.zone),
            created_at=now,
            updated_at=now,
        )
        deps = list(dict.fromkeys(depends_on))
        async with self.db.transaction("memory_action_create", actor=action.agent_id, project=project) as tx:
            repo = ActionRepository(tx)
            await self._require(repo, project, deps, "depends_on")
            if parent_id is not None:
                await self._require(repo, project, [parent_id], "parent_id")
            if status == "active":
                await self._check_dependencies_done(repo, action, deps, new=True)
            await self._refuse_cancelled_ancestor(repo, action, "parent_id", new=True)
            await repo.add(action)
            await repo.add_dependencies(action.id, deps)
            await self._refuse_cycles(repo, action.id, deps, "depends_on", new=True)
            tx.changed("action", action.id, "create")
            also = await self._reopen_parent(tx, action)
            view = (await self._views(tx, [action]))[0]
        return ActionResult(action=view, also_changed=also, redacted=scrub.summary())

    async def update(
        self,
        project: str,
        action_id: str,
        *,
        title: str | None = None,
        description: str | None = None,
        status: str | None = None,
        priority: int | None = None,
        parent_id: str | None = None,
        clear_parent: bool = False,
        add_depends_on: Sequence[str] = (),
        remove_depends_on: Sequence[str] = (),
        tags: Sequence[str] | None = None,
        due: str | None = None,
        clear_due: bool = False,
    ) -> ActionResult:
        """Change an action; a refused change writes nothing (the transaction rolls back)."""
        if clear_parent and parent_id is not None:
            raise InvalidInputError("clear_parent", "cannot be combined with parent_id; give one or the other")
        if clear_due and due is not None:
            raise InvalidInputError("clear_due", "cannot be combined with due; give one or the other")
        if not (
            title is not None or description is not None or status is not None or priority is not None
            or parent_id is not None or clear_parent or add_depends_on or remove_depends_on
            or tags is not None or due is not None or clear_due
        ):  # fmt: skip
            raise InvalidInputError("id", "nothing to change: give a field to change, such as status or title")
        removing = set(remove_depends_on)
        both = [dep for dep in add_depends_on if dep in removing]
        if both:
            raise InvalidInputError("remove_depends_on", f"{both[0]} is also in add_depends_on; give it in one of them")
        scrub = self.scrubber()
        now = self.now_iso()
        async with self.db.transaction("memory_action_update", project=project) as tx:
            repo = ActionRepository(tx)
            (current,) = await self._require(repo, project, [action_id], "id")
            changes: dict[str, object] = {"updated_at": now}
            if title is not None:
                changes["title"] = scrub.required("title", title)
            if description is not None:
                changes["description"] = scrub.text(description)
            if priority is not None:
                changes["priority"] = priority
            if tags is not None:
                changes["tags"] = _tags(scrub, tags)
            if due is not None or clear_due:
                changes["due"] = moment("due", due, self.zone)
            new_parent = None
            if clear_parent:
                changes["parent_id"] = None
            elif parent_id is not None and parent_id != current.parent_id:
                await self._require(repo, project, [parent_id], "parent_id")
                if parent_id == action_id or action_id in await repo.ancestors(parent_id):
                    raise ConflictError(f"parent_id: {parent_id} is {action_id} or one of its descendants")
                changes["parent_id"] = new_parent = parent_id
            removed = list(dict.fromkeys(remove_depends_on))
            await self._require(repo, project, removed, "remove_depends_on")  # a typo must not pass as done
            existing = {dep for dep, _ in (await repo.dependencies([action_id]))[action_id]}
            strays = [dep for dep in removed if dep not in existing]
            if strays:
                raise InvalidInputError("remove_depends_on", f"{strays[0]} is not a dependency of {action_id}")
            added = [d for d in dict.fromkeys(add_depends_on) if d not in removed and d not in existing]
            await self._require(repo, project, added, "add_depends_on")
            if action_id in added:
                raise ConflictError(
                    f"add_depends_on: {action_id} would make a dependency cycle: {action_id} -> {action_id}"
                )
            await repo.remove_dependencies(action_id, removed)
            await repo.add_dependencies(action_id, added)
            action = current.model_copy(update=changes)
            if status is not None and (status != current.status or status in ("active", "done")):
                # Restating active or done checks again what those states require.
                action = await self._transition(repo, action, current.status, status, now)
            elif action.status in ("active", "done"):
                # Staying active or done: only new dependencies must be done; an old one reopened since
                # does not stop the action from being edited.
                waiting = await unfinished(repo, action, added)
                if waiting:
                    way_out = (
                        f"reopen {action_id}"
                        if action.status == "done"
                        else "set its status to pending in the same call"
                    )
                    raise ConflictError(
                        f"add_depends_on: {action_id} is {action.status} and would be blocked by unfinished "
                        f"dependencies: {_with_states(waiting)}; finish them first, or {way_out}"
                    )
            if new_parent is not None or (current.status not in OPEN_STATUSES and action.status in OPEN_STATUSES):
                await self._refuse_cancelled_ancestor(repo, action, "parent_id" if new_parent else "status")
            await repo.update(action)
            # Checked on the graph as it will be, so a new parent and new dependencies are seen together.
            await self._refuse_cycles(repo, action_id, added, "add_depends_on", new_parent)
            tx.changed("action", action.id, "update")
            also = await self._reopen_parent(tx, action)
            view = (await self._views(tx, [action]))[0]
        return ActionResult(action=view, also_changed=also, redacted=scrub.summary())

    async def _refuse_cycles(
        self,
        repo: ActionRepository,
        action_id: str,
        deps: Sequence[str],
        field: str,
        parent: str | None = None,
        *,
        new: bool = False,
    ) -> None:
        """Refuse new dependencies (or a new parent) through which the action would wait for itself.

        An action waits for its dependencies and for its children, so a child depending on its own
        ancestor is a cycle too: neither could ever be done. A `new` action, refused, never gets
        its id, so the cycle calls it "the new action".
        """
        for dep in deps:
            path = await repo.wait_path(dep, action_id)
            if path is not None:
                cycle = _describe([(action_id, False), *path], {action_id: "the new action"} if new else {})
                raise ConflictError(f"{field}: {dep} would make a dependency cycle: {cycle}")
        if parent is not None:
            path = await repo.wait_path(action_id, parent)
            if path is not None:
                cycle = _describe([(parent, False), (action_id, True), *path[1:]])
                raise ConflictError(f"parent_id: {parent} would make a dependency cycle: {cycle}")

    async def _transition(self, repo: ActionRepository, action: Action, old: str, new: str, now: str) -> Action:
        if new not in STATUSES:
            raise InvalidInputError("status", f"must be one of {', '.join(STATUSES)}")
        if new != old and new not in TRANSITIONS[old]:
            allowed = ", ".join(sorted(TRANSITIONS[old]))
            raise ConflictError(f"status: cannot go from {old} to {new}; from {old} an action can become {allowed}")
        if new in ("active", "done"):
            await self._check_dependencies_done(repo, action, None)
        if new in ("done", "cancelled"):  # either would leave open work under a closed action
            children = await repo.open_children(action.id)
            if children:
                raise ConflictError(
                    f"status: {action.id} still has open children: {', '.join(children)}; finish or cancel them first"
                )
        if new == old:
            return action
        return action.model_copy(update={"status": new, "completed_at": now if new == "done" else None})

    async def _check_dependencies_done(
        self, repo: ActionRepository, action: Action, deps: Sequence[str] | None, *, new: bool = False
    ) -> None:
        """Refuse active or done while a dependency is unfinished; a `new` action, refused, never gets its id."""
        waiting = await unfinished(repo, action, deps)
        if not waiting:
            return
        if new:  # memory_action_create has no remove_depends_on: the way out is in its own arguments
            raise ConflictError(
                f"status: the new action would be blocked by unfinished dependencies: {_with_states(waiting)}; "
                "finish them first, leave them out of depends_on, or create it pending"
            )
        raise ConflictError(
            f"status: {action.id} is blocked by unfinished dependencies: {_with_states(waiting)}; "
            "finish them first, or drop them with remove_depends_on"
        )

    async def _refuse_cancelled_ancestor(
        self, repo: ActionRepository, action: Action, field: str, *, new: bool = False
    ) -> None:
        """Refuse an open action under a cancelled parent, or under done ones a cancelled action holds.

        A cancelled action has no open work under it, and `_reopen_parent` would reopen those done
        ones. A `new` action, refused, never gets its id, so it is called "the new action".
        """
        if action.status not in OPEN_STATUSES or action.parent_id is None:
            return
        who = "the new action" if new else action.id
        chain = [action.parent_id, *await repo.ancestors(action.parent_id)]
        done: list[str] = []
        for ancestor in await repo.get_many(chain, action.project):
            if ancestor.status == "done":  # reopened by _reopen_parent: look at what holds it
                done.append(ancestor.id)
                continue
            if ancestor.status != "cancelled":
                return
            if not done:
                opened = f"would be open under {ancestor.id}, which is cancelled"
            else:
                kin = f"parent {done[0]}" if len(done) == 1 else f"ancestors {', '.join(done)}"
                opened = f"would reopen its done {kin} under {ancestor.id}, which is cancelled"
            raise ConflictError(
                f"{field}: {who} {opened}; reopen {ancestor.id} (status pending) first, or give {who} another parent"
            )

    async def _reopen_parent(self, tx: Tx, action: Action) -> list[str]:
        """A done parent with an open child is not done: reopen it (and its done ancestors).

        Each one reopened is stamped with the child's change time, as any write is: an import
        elsewhere takes the newer row, so a copy holding the parent done learns it was reopened.
        """
        if action.status not in OPEN_STATUSES or action.parent_id is None:
            return []
        return await reopen_ancestors(tx, action, action.updated_at)

    async def page(
        self,
        project: str,
        *,
        statuses: Sequence[str] | None,
        tag: str | None,
        parent_id: str | None,
        limit: int,
        offset: int,
    ) -> ActionList:
        """Actions by status (open ones by default), highest priority then oldest first."""
        tag = _tag_filter(tag)
        for status in statuses or ():
            if status not in STATUSES:
                raise InvalidInputError("status", f"must be among {', '.join(STATUSES)}")
        async with self.db.read() as conn:
            if parent_id is not None:
                await self._require(ActionRepository(conn), project, [parent_id], "parent_id")
            found, total = await ActionRepository(conn).page(
                project, statuses=statuses or OPEN_STATUSES, tag=tag, parent_id=parent_id, limit=limit, offset=offset
            )
            views = await self._views(conn, found)
        more = offset + len(views) < total
        return ActionList(
            project=project, total=total, actions=views, next_offset=offset + len(views) if more else None
        )

    async def frontier(self, project: str, *, tag: str | None, limit: int, offset: int = 0) -> ActionList:
        """What can be done next: open actions with every dependency done, by priority then age."""
        tag = _tag_filter(tag)
        async with self.db.read() as conn:
            found, total = await ActionRepository(conn).frontier(project, tag, limit, offset)
            views = await self._views(conn, found)
        more = offset + len(views) < total
        return ActionList(
            project=project, total=total, actions=views, next_offset=offset + len(views) if more else None
        )

    async def _require(self, repo: ActionRepository, project: str, ids: Sequence[str], field: str) -> list[Action]:
        found = await repo.get_many(ids, project)
        missing = [i for i in ids if i not in {a.id for a in found}]
        if missing:
            raise NotFoundError("action", missing[0], "call memory_action_list to see actions", field=field)
        return found

    async def _views(self, conn: Conn, actions: Sequence[Action]) -> list[ActionView]:
        repo = ActionRepository(conn)
        ids = [a.id for a in actions]
        deps = await repo.dependencies(ids)
        children = await repo.child_counts(ids)
        return [
            ActionView(
                id=a.id,
                title=a.title,
                description=a.description,
                status=a.status,
                priority=a.priority,
                parent_id=a.parent_id,
                depends_on=[d for d, _ in deps[a.id]],
                blocked_by=[d for d, state in deps[a.id] if state != "done"],
                children=children[a.id][0],
                children_done=children[a.id][1],
                tags=a.tags,
                due=a.due,
                completed_at=a.completed_at,
                created_at=a.created_at,
                updated_at=a.updated_at,
            )
            for a in actions
        ]


def _tags(scrub: Scrubber, tags: Sequence[str]) -> list[str]:
    """Tags as stored: scrubbed, stripped, composed (NFC), one per spelling ignoring case and Unicode
    form (the first kept), sorted."""
    for i, tag in enumerate(tags):
        if not tag.strip():  # dropping it would say nothing, and on an update would clear the tags
            raise InvalidInputError(f"tags.{i}", "must contain text (tags=[] clears an action's tags)")
    stored = normal_forms("tags", scrub.many(tags) or [], stored_tag, TAG_CHARS)
    return sorted(distinct_tags(stored), key=str.casefold)


def _tag_filter(tag: str | None) -> str | None:
    """A tag to filter by, folded as tags are compared; a blank one is refused, not matched to none."""
    if tag is None:
        return None
    if not tag.strip():
        raise InvalidInputError("tag", "must contain text (leave it out to list every tag)")
    return fold_tag(tag)


def _describe(steps: Sequence[tuple[str, bool]], names: Mapping[str, str] | None = None) -> str:
    """A cycle as text: `a -> b` where a depends on b, `a -> child b` where a is b's parent; an
    action in `names` is called by that name instead of its id."""
    named = [((names or {}).get(step, step), is_child) for step, is_child in steps]
    text = " -> ".join(f"child {step}" if is_child else step for step, is_child in named)
    if any(is_child for _, is_child in steps):
        text += " (a parent cannot be done before its children, so none of these could ever be done)"
    return text


def _with_states(waiting: dict[str, str]) -> str:
    """Unfinished dependencies as an error names them: each id with its status."""
    return ", ".join(f"{dep} ({state})" for dep, state in waiting.items())


async def unfinished(repo: ActionRepository, action: Action, deps: Sequence[str] | None) -> dict[str, str]:
    """Which of these dependencies (default: all the action's stored ones) are not done, with their status."""
    if deps is not None:
        states = [(d.id, d.status) for d in await repo.get_many(deps, action.project)]
    else:
        states = (await repo.dependencies([action.id]))[action.id]
    return {dep: state for dep, state in states if state != "done"}


async def reopen_ancestors(tx: Tx, child: Action, stamp: str) -> list[str]:
    """Reopen the closed ancestors over an open child, nearest first, up to the first open one.

    A parent is active again only when the child is being worked on and nothing it depends on is
    unfinished (an active action never waits for a dependency); otherwise it is pending. A cancelled
    one (only a merge of two copies leaves one over open work) is pending, as reopening it is, and so
    are those above it. Each is stamped `stamp`, or its own time if later, so its row is the newer.
    """
    repo = ActionRepository(tx)
    reopened = []
    working = child.status == "active"
    for ancestor in await repo.get_many(await repo.ancestors(child.id), child.project):
        if ancestor.status not in CLOSED_STATUSES:
            break
        working = working and ancestor.status == "done" and not await unfinished(repo, ancestor, None)
        status = "active" if working else "pending"
        row = {"status": status, "completed_at": None, "updated_at": max(stamp, ancestor.updated_at)}
        await repo.update(ancestor.model_copy(update=row))
        tx.changed("action", ancestor.id, "reopen")
        reopened.append(ancestor.id)
    return reopened
