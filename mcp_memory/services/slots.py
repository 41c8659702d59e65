"""Slots: named blocks of text kept in front of the agent, with hard size limits.

A slot lives in a project or in the global scope ("*"); reads, appends and replaces try the
project first, deletes touch only the scope named (a repeated delete must never reach the global
slot a project slot shadowed). Appending or replacing past the limit is refused with the numbers
and a way out; nothing is truncated. Default names are offered, never forced: appending to (or
replacing) one that does not exist yet creates it.

Global slots open every project's context, so a caller restricted to one project (`restricted`,
from a bound token or `--isolated`) may read them but never write them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from mcp_memory.db import Tx
from mcp_memory.errors import ConflictError, InvalidInputError, LimitExceededError, NotFoundError
from mcp_memory.ids import new_id
from mcp_memory.models.organising import SlotDeleted, SlotList, SlotResult, SlotSummary, SlotView, SuggestedSlot
from mcp_memory.models.records import Slot
from mcp_memory.repositories.forgotten import ForgottenRepository
from mcp_memory.repositories.slots import SlotRepository
from mcp_memory.services.common import GLOBAL_PROJECT, Service
from mcp_memory.services.relations import drop_relations

DEFAULT_SLOTS: dict[str, tuple[str, bool]] = {
    "persona": ("Who the agent is here: role, tone, what it must always or never do.", True),
    "user_preferences": ("How the user likes to work: style, tools, conventions, pet peeves.", True),
    "project_context": ("What this project is: purpose, stack, layout, constraints.", True),
    "pending_items": ("Open threads to pick up next time, with enough context to resume.", True),
    "self_notes": ("The agent's own scratch notes: hunches, reminders, things to check.", False),
}
"""Offered on first use: (description, pinned)."""

FitCase = Literal["create", "append", "content", "size_limit"]
"""Which call, or which of memory_slot_replace's arguments, broke a slot's limit: it decides the advice."""

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")

SLOT_LIMIT_MAX = 100_000
"""The largest size_limit a slot may have (and so the most any slot holds)."""

_WRITTEN = "slots written"
"""The book of `Tx.note` where each write of a slot notes, by id, where it lives, its name and whether
what a list of slots shows of it changed."""


@dataclass(frozen=True)
class SlotChange:
    """A slot a committed transaction wrote, for whoever shows slots (the server's resources)."""

    scope: str | None
    """The project it lives in (GLOBAL_PROJECT: a global slot); None when the write did not say (a
    memory_forget, which deletes slots as records of any kind)."""
    name: str | None
    listing: bool
    """Whether what a list of slots shows of it may have changed: made, deleted or described anew."""


def note_written(tx: Tx, slot: Slot, *, listing: bool) -> None:
    """Note on `tx` that it wrote `slot` (`listing`: made, deleted or described anew), for `written_slots`."""
    tx.note(_WRITTEN, {slot.id: (slot.project, slot.name, listing)})


def written_slots(tx: Tx) -> list[SlotChange]:
    """The slots `tx` wrote, from its changes (call once it has committed: a rollback wrote none)."""
    found = []
    for kind, record_id, op in tx.changes:
        if kind in ("slot", "slots"):  # a forget names the kind, an import the table
            noted = tx.noted(_WRITTEN, record_id)
            scope, name, described = noted if noted is not None else (None, None, False)
            found.append(SlotChange(scope, name, described or op != "update"))
    return found


class SlotService(Service):
    """Creates, reads, appends to, replaces and deletes slots."""

    def view(self, slot: Slot) -> SlotView:
        return SlotView(
            id=slot.id,
            name=slot.name,
            scope="global" if slot.project == GLOBAL_PROJECT else "project",
            content=slot.content,
            size=len(slot.content),
            size_limit=slot.size_limit,
            pinned=slot.pinned,
            description=slot.description,
            updated_at=slot.updated_at,
        )

    async def overview(self, project: str) -> SlotList:
        """The project's slots, then global ones it does not shadow, then unused default names."""
        async with self.db.read() as conn:
            slots = await SlotRepository(conn).in_scopes([project, GLOBAL_PROJECT])
        seen: set[str] = set()
        summaries = []
        for slot in slots:
            if slot.name in seen:
                continue  # a project slot shadows a global slot of the same name
            seen.add(slot.name)
            view = self.view(slot)
            summaries.append(
                SlotSummary(
                    name=view.name,
                    scope=view.scope,
                    pinned=view.pinned,
                    size=view.size,
                    size_limit=view.size_limit,
                    description=view.description,
                    preview=slot.content if len(slot.content) <= 120 else slot.content[:119] + "…",
                )
            )
        suggested = [
            SuggestedSlot(name=name, description=desc, pinned=pinned)
            for name, (desc, pinned) in DEFAULT_SLOTS.items()
            if name not in seen
        ]
        return SlotList(project=project, slots=summaries, suggested=suggested)

    async def get(self, project: str, name: str, scope: str | None = None) -> SlotView:
        """One slot: the project's, else the global one (or exactly the scope asked for)."""
        _check_name(name)  # "Persona" breaks the rule, which says more than "not found"
        async with self.db.read() as conn:
            slot = await self._find(SlotRepository(conn), project, name, scope)
        return self.view(slot)

    async def pinned(self, project: str) -> list[Slot]:
        """Pinned slots visible in the project (project ones shadow global ones of the same name)."""
        async with self.db.read() as conn:
            slots = await SlotRepository(conn).in_scopes([project, GLOBAL_PROJECT])
        visible: dict[str, Slot] = {}
        for slot in slots:
            visible.setdefault(slot.name, slot)  # a project slot shadows a global one of the same name
        return [s for s in visible.values() if s.pinned]

    async def create(
        self,
        project: str,
        name: str,
        *,
        content: str = "",
        size_limit: int | None = None,
        pinned: bool | None = None,
        description: str | None = None,
        scope: str = "project",
        restricted: str | None = None,
    ) -> SlotResult:
        """Create a slot; its content must already fit its limit."""
        _check_name(name)
        if scope == "global":
            _check_global_writable(restricted)
        scrub = self.scrubber()
        target = GLOBAL_PROJECT if scope == "global" else project
        default_desc, default_pinned = DEFAULT_SLOTS.get(name, (None, False))
        async with self.db.transaction("memory_slot_create", project=target) as tx:
            repo = SlotRepository(tx)
            if await repo.get_or_none(target, name) is not None:
                raise ConflictError(
                    f"name: slot {name!r} already exists; use memory_slot_replace or memory_slot_append"
                )
            slot = self._new(
                target,
                name,
                scrub.text(content),
                size_limit or self.settings.slot_size_limit,
                default_pinned if pinned is None else pinned,
                scrub.optional(description) or default_desc,
            )
            _fits("content", slot, slot.content, "create", created=True, redacted=bool(scrub.summary()))
            await repo.add(slot)
            tx.changed("slot", slot.id, "create")
            note_written(tx, slot, listing=True)
        return SlotResult(slot=self.view(slot), created=True, redacted=scrub.summary())

    async def append(
        self,
        project: str,
        name: str,
        text: str,
        *,
        separator: str = "\n",
        scope: str | None = None,
        restricted: str | None = None,
    ) -> SlotResult:
        """Add text to the end of a slot (creating a default-named slot on first use)."""
        _check_name(name)
        scrub = self.scrubber()
        # As create and replace take it: a markdown rule, a checkbox or a ✓ is ordinary slot text.
        addition = scrub.text(text)
        if not addition.strip():
            raise InvalidInputError("text", "must not be blank")
        async with self.db.transaction("memory_slot_append", project=project) as tx:
            slot, created = await self._find_or_default(tx, project, name, scope, restricted)
            # Filtered whole as well: a secret may come in pieces ("password:" stored, the value appended).
            content = scrub.text(f"{slot.content}{separator}{addition}" if slot.content else addition)
            _fits("text", slot, content, "append", created=created, redacted=bool(scrub.summary()))
            slot = slot.model_copy(update={"content": content, "updated_at": self.now_iso()})
            await self._save(tx, slot, created)
        return SlotResult(slot=self.view(slot), created=created, redacted=scrub.summary())

    async def replace(
        self,
        project: str,
        name: str,
        *,
        content: str | None = None,
        old: str | None = None,
        size_limit: int | None = None,
        pinned: bool | None = None,
        description: str | None = None,
        scope: str | None = None,
        restricted: str | None = None,
    ) -> SlotResult:
        """Rewrite a slot's content (or one passage of it: `old` → `content`) and/or its settings."""
        _check_name(name)
        if content is None and old is not None:
            raise InvalidInputError("content", "give the text that replaces old")
        if content is None and size_limit is None and pinned is None and description is None:
            raise InvalidInputError(
                "content",
                "nothing to change: give content (with old for one passage), size_limit, pinned or description",
            )
        scrub = self.scrubber()
        new_text = None if content is None else scrub.text(content)
        # The stored text went through the privacy filter, so the passage is looked for as it would be stored
        # (by a scrubber of its own: a secret in the text to find is not one this call redacts).
        old = None if old is None else self.scrubber().text(old)
        async with self.db.transaction("memory_slot_replace", project=project) as tx:
            slot, created = await self._find_or_default(tx, project, name, scope, restricted)
            body = slot.content
            if old is not None and new_text is not None:
                found = _occurrences(body, old)
                if not found and created:  # a default name offered, not a slot yet: nothing to look in
                    raise InvalidInputError(
                        "old", f"slot {name!r} does not exist yet; give content without old to create it"
                    )
                if not found:
                    raise InvalidInputError("old", f"text not found in slot {name!r}; call memory_slot_get to see it")
                if found > 1:  # which one was meant? Replacing the first could change the wrong line
                    raise InvalidInputError(
                        "old", f"text found {found} times in slot {name!r}; give more of it, so it is found once"
                    )
                # Filtered whole as well: the passage may complete a secret ("password: TBD" → the value).
                body = scrub.text(body.replace(old, new_text, 1))
            elif new_text is not None:
                body = new_text
            # Blame the argument that broke the limit: text too long even for the old limit, else the limit.
            field: FitCase = "content" if new_text is not None and len(body) > slot.size_limit else "size_limit"
            slot = slot.model_copy(
                update={
                    "content": body,
                    "size_limit": size_limit or slot.size_limit,
                    "pinned": slot.pinned if pinned is None else pinned,
                    "description": slot.description if description is None else scrub.text(description),
                    "updated_at": self.now_iso(),
                }
            )
            _fits(field, slot, body, field, created=created, redacted=bool(scrub.summary()))
            await self._save(tx, slot, created, described=description is not None)
        return SlotResult(slot=self.view(slot), created=created, redacted=scrub.summary())

    async def delete(
        self, project: str, name: str, scope: str = "project", *, restricted: str | None = None
    ) -> SlotDeleted:
        """Delete the project's slot, or the global one only when `scope` is "global"."""
        if scope == "global":
            _check_global_writable(restricted)
        target = GLOBAL_PROJECT if scope == "global" else project
        async with self.db.transaction("memory_slot_delete", project=project) as tx:
            repo = SlotRepository(tx)
            slot = await repo.get_or_none(target, name)
            if slot is None:
                hint = "call memory_slot_list to see the slots here"
                if target != GLOBAL_PROJECT and await repo.get_or_none(GLOBAL_PROJECT, name) is not None:
                    hint = (
                        "only a global slot has that name; it is read-only for this connection"
                        if restricted is not None
                        else 'only a global slot has that name; pass scope="global" to delete it'
                    )
                elif target == GLOBAL_PROJECT:
                    hint = 'scope="global" looks among the global slots only, and none has that name'
                    if await repo.get_or_none(project, name) is not None:
                        hint += "; this project's own slot has it: leave scope out to delete that one"
                raise NotFoundError("slot", name, hint, field="name")
            # Noted as memory_forget notes what it deletes: an import of an older copy does not bring it back.
            await ForgottenRepository(tx).remember("slot", [slot.id], self.now_iso())
            await repo.delete(slot.id)
            relations = await drop_relations(tx, [slot.id])
            tx.changed("slot", slot.id, "delete")
            note_written(tx, slot, listing=True)
        scope = "global" if slot.project == GLOBAL_PROJECT else "project"
        return SlotDeleted(name=slot.name, scope=scope, id=slot.id, relations_deleted=relations)

    async def _find(self, repo: SlotRepository, project: str, name: str, scope: str | None) -> Slot:
        scopes = {"project": [project], "global": [GLOBAL_PROJECT], None: [project, GLOBAL_PROJECT]}[scope]
        for candidate in scopes:
            slot = await repo.get_or_none(candidate, name)
            if slot is not None:
                return slot
        hint = "create it with memory_slot_create"
        if name in DEFAULT_SLOTS:
            hint += " or append to it (default names are created on first append or replace)"
        if scope == "global":
            hint = 'scope="global" looks among the global slots only, and none has that name; ' + hint
        raise NotFoundError("slot", name, hint, field="name")

    async def _find_or_default(
        self, tx: Tx, project: str, name: str, scope: str | None, restricted: str | None
    ) -> tuple[Slot, bool]:
        """The slot a write changes (a default name is made on first use); never a global one if `restricted`."""
        if scope == "global":
            _check_global_writable(restricted)
        repo = SlotRepository(tx)
        try:
            slot = await self._find(repo, project, name, scope)
        except NotFoundError:
            if name not in DEFAULT_SLOTS:
                raise
            description, pinned = DEFAULT_SLOTS[name]
            target = GLOBAL_PROJECT if scope == "global" else project
            return self._new(target, name, "", self.settings.slot_size_limit, pinned, description), True
        if restricted is not None and slot.project == GLOBAL_PROJECT:  # found by falling back from the project
            way_out = (
                'pass scope="project" to create the project\'s own'
                if name in DEFAULT_SLOTS
                else "create the project's own with memory_slot_create"
            )
            raise InvalidInputError(
                "scope",
                f"slot {name!r} exists only in the global scope, and global slots are read-only for a connection "
                f"restricted to project {restricted!r}; {way_out}",
            )
        return slot, False

    async def _save(self, tx: Tx, slot: Slot, created: bool, *, described: bool = False) -> None:
        repo = SlotRepository(tx)
        if created:
            await repo.add(slot)
        else:
            await repo.update(slot)
        tx.changed("slot", slot.id, "create" if created else "update")
        note_written(tx, slot, listing=created or described)

    def _new(self, scope: str, name: str, content: str, limit: int, pinned: bool, description: str | None) -> Slot:
        now = self.now_iso()
        return Slot(
            id=new_id("slot"),
            project=scope,
            name=name,
            content=content,
            size_limit=limit,
            pinned=pinned,
            description=description,
            created_at=now,
            updated_at=now,
        )


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):  # not `$`, which lets a trailing newline through
        raise InvalidInputError("name", "must be lower_snake_case: a letter, then letters, digits or _ (max 64)")


def _check_global_writable(restricted: str | None) -> None:
    """Refuse a global write to a caller restricted to one project: it would reach every project's context."""
    if restricted is not None:
        raise InvalidInputError(
            "scope", f"global slots are read-only for a connection restricted to project {restricted!r}"
        )


def _fits(
    field: str, slot: Slot, content: str, case: FitCase, *, created: bool = False, redacted: bool = False
) -> None:
    """Refuse content longer than the slot's limit, naming the argument to change and a way out that
    fits the call (`case`) and whether the slot would have been `created` by it."""
    size = len(content)
    if size <= slot.size_limit:
        return
    if size > SLOT_LIMIT_MAX:  # no size_limit holds it: a shorter text is the only way out
        shorter: dict[FitCase, str] = {
            "create": "Shorten the content.",
            "append": "Append shorter text."
            if created
            else "Append shorter text, or make room first by rewriting the slot shorter with memory_slot_replace.",
            "content": "Give shorter content.",
            "size_limit": "Replace the content with shorter text in the same call.",
        }
        raise LimitExceededError(
            f"{field}: slot {slot.name!r} would hold {size} characters, more than any slot holds "
            f"({SLOT_LIMIT_MAX}); nothing was {'created' if created else 'changed'}. {shorter[case]}"
        )
    ways_out: dict[FitCase, str] = {
        "create": f"Shorten the content, or give a size_limit of at least {size}.",
        # A slot made by this append has nothing to rewrite; one that exists can make room first.
        "append": (
            f"Append shorter text, or create the slot holding this text with memory_slot_create or "
            f"memory_slot_replace (content and a size_limit of at least {size})."
            if created
            else f"Append shorter text, or make room first with memory_slot_replace: rewrite the slot shorter, "
            f"or raise its size_limit to at least {size}."
        ),
        "content": f"Give shorter content, or a size_limit of at least {size}, in the same memory_slot_replace call.",
        # The caller set the limit: raising it back is the way, not a rewrite in a later call.
        "size_limit": (
            f"The content is {size} characters, so size_limit must be at least {size}, "
            "or replace the content with shorter text in the same call."
        ),
    }
    # A secret is stored as its [REDACTED:…] placeholder, which can be longer than the secret.
    counted = " (secrets counted as the placeholders they are stored as)" if redacted else ""
    raise LimitExceededError(
        f"{field}: slot {slot.name!r} would hold {size} characters{counted}, over its limit of {slot.size_limit}; "
        f"nothing was {'created' if created else 'changed'}. {ways_out[case]}"
    )


def _occurrences(text: str, part: str) -> int:
    """How many times `part` occurs in `text`, overlapping ones too ("aa" twice in "aaa")."""
    count, start = 0, text.find(part)
    while start != -1:
        count += 1
        start = text.find(part, start + 1)
    return count
