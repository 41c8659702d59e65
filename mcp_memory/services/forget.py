"""Forgetting: hard deletion by id or by filter, planned first so a dry run shows exactly the same.

Every record deleted is noted by id (repositories/forgotten.py), never by its text, so that an
import of a copy made before does not bring it back and an export carries the forget elsewhere.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mcp_memory.db import Conn
from mcp_memory.errors import InvalidInputError, NotFoundError
from mcp_memory.ids import kind_of
from mcp_memory.models.records import Session
from mcp_memory.models.results import ForgetResult
from mcp_memory.repositories.actions import ActionRepository
from mcp_memory.repositories.folded import FoldedRepository
from mcp_memory.repositories.forgotten import ForgottenRepository
from mcp_memory.repositories.lessons import LessonRepository
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository, OutcomeRepository
from mcp_memory.repositories.relations import RecordNames, RelationRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.services.common import GLOBAL_PROJECT, Deps, Service, time_window
from mcp_memory.services.episodic_docs import digest_line_minute
from mcp_memory.services.forget_derived import clear_reflection, derived_from
from mcp_memory.services.forget_sessions import thin_sessions, unsummarise
from mcp_memory.services.index_build import FORGET_ACTION
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.memories import memory_doc
from mcp_memory.services.recount import Recount

FILTERABLE = ("observation", "memory", "session", "lesson")
"""Kinds memory_forget can select by filter; every kind can be deleted by id."""
BY_ID_ONLY = ("outcome", "action", "mistake_card", "relation", "slot")
FOLDED = "folded_observation"
"""The result's name for a folded observation's digest line: listed by its session, once per line."""
LISTED_IDS = 1_000
"""The result lists at most this many ids of a kind (its counts say how many there are)."""


# fmt: off
_FILLER = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "my", "our", "your", "his", "her", "its", "their",
    "we", "i", "you", "he", "she", "it", "they", "is", "are", "was", "were", "be", "been", "am", "has",
    "have", "had", "of", "to", "in", "on", "at", "by", "for", "with", "from", "and", "or", "as", "now",
    "still", "also",
})
# fmt: on
"""Words a fact's fingerprint leaves out, so "Our queue uses X" and "The queue uses X" are one fact.
Frozen here, not the search's stop words: a fingerprint stored today must match the same fact
in any later release (the text it came from is gone)."""


def fact_fingerprint(text: str) -> str:
    """What a forgotten fact leaves behind: a hash of its words (case-folded, in any order, without
    `_FILLER`), not its text."""
    return fact_fingerprints(text)[0]


def fact_fingerprints(text: str) -> tuple[str, str]:
    """A fact's fingerprint, and the one releases before `_FILLER` stored (every word kept)."""
    words = set(re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold()))
    return _hashed(words - _FILLER), _hashed(words)


def _hashed(words: set[str]) -> str:
    return hashlib.sha256(" ".join(sorted(words)).encode()).hexdigest()


@dataclass
class _Plan:
    """Ids to delete, by kind; a memory chain is listed by every version's id."""

    observations: list[str] = field(default_factory=list)
    memory_roots: list[str] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    others: dict[str, list[str]] = field(default_factory=dict)
    digest_lines: dict[str, list[int]] = field(default_factory=dict)
    """Sessions that stay, with the positions of the folded observations' lines to cut from their digest."""
    folded: list[str] = field(default_factory=list)
    """Ids of the folded observations those lines stand for (noted when they were folded)."""
    reflection: bool = False
    """Whether the profile's reflection insights go with them."""
    released: dict[str, list[str]] = field(default_factory=dict)
    """Actions that stay but lose a link to one that goes: those that waited for it, its children."""

    def doomed(self) -> list[str]:
        """Every record id the plan deletes (a folded observation's line is its session's update)."""
        found = [*self.observations, *self.memories, *self.sessions, *self.lessons]
        return list(dict.fromkeys([*found, *(i for ids in self.others.values() for i in ids)]))

    def as_dict(self) -> dict[str, list[str]]:
        found = {
            "observation": sorted(set(self.observations)),
            "memory": sorted(set(self.memories)),
            "session": sorted(set(self.sessions)),
        }
        if self.lessons:
            found["lesson"] = sorted(set(self.lessons))
        found.update({kind: sorted(set(ids)) for kind, ids in self.others.items() if ids})
        if self.digest_lines:
            found[FOLDED] = sorted(s for s, lines in self.digest_lines.items() for _ in lines)
        return found


class ForgetService(Service):
    """Deletes records for good (the audit log keeps only their ids)."""

    def __init__(self, deps: Deps, lessons: LessonService) -> None:
        super().__init__(deps)
        self.recount = Recount(deps, lessons)

    async def forget(
        self,
        project: str,
        *,
        ids: Sequence[str] | None,
        kind: str | None,
        session_id: str | None,
        since: str | None,
        until: str | None,
        dry_run: bool,
        restricted: str | None = None,
        derived: bool = True,
        again: bool = False,
    ) -> ForgetResult:
        """Delete the named records, or every record matching the filters; a dry run only reports.

        Global lessons and slots can be named by id, except by a caller `restricted` to one project:
        to it they are read-only, so their ids are as unknown as another project's. With `derived`,
        what was learned from the records alone, or quotes them, goes too (forget_derived.py).
        `again`: the records were forgotten before (an import brought them back); their notes keep
        the time they have.
        """
        if kind is not None and kind not in FILTERABLE:
            raise InvalidInputError("kind", f"must be one of {', '.join(FILTERABLE)}")
        start, end = time_window(since, until, self.zone)
        filtered = kind is not None or session_id is not None or start is not None or end is not None
        if not ids and not filtered:
            raise InvalidInputError("ids", "give ids, or at least one filter (kind, session_id, since, until)")
        if ids and filtered:
            # A filter does not narrow the ids, it forgets its own matches: refuse rather than
            # delete more than the caller named.
            raise InvalidInputError(
                "ids", "give ids or filters (kind, session_id, since, until), not both: call once for each"
            )
        scopes = [project] if restricted is not None else [project, GLOBAL_PROJECT]
        if dry_run:
            async with self.db.read() as conn:
                plan = await self._plan(conn, project, scopes, ids, kind, session_id, start, end, derived)
            return self._result(plan, dry_run=True)
        async with self.db.transaction(FORGET_ACTION, project=project) as tx:
            plan = await self._plan(tx, project, scopes, ids, kind, session_id, start, end, derived)
            observations, memories, sessions = (
                ObservationRepository(tx),
                MemoryRepository(tx),
                SessionRepository(tx),
            )
            # Memories and outcomes outlive the session they were saved in (the database clears their
            # link): the latest memories' index entries must forget it too, and the audit names every
            # row so changed, so other processes re-read them.
            going = set(plan.memories)
            unlinked = {
                memory_id: latest
                for memory_id, latest in (await memories.ids_in_sessions(plan.sessions, project)).items()
                if memory_id not in going
            }
            orphans = [memory_id for memory_id, latest in unlinked.items() if latest]
            going_outcomes = set(plan.others.get("outcome", []))
            unlinked_outcomes = [
                o for o in await OutcomeRepository(tx).ids_in_sessions(plan.sessions) if o not in going_outcomes
            ]
            # Sessions that stay lose some observations: their count, title and summary must forget them too.
            thinned = [
                o
                for o in await observations.get_many(sorted(set(plan.observations)), project)
                if o.session_id not in plan.sessions
            ]
            # Noted before the rows go (the note reads each one's project): an import of an older copy
            # must not bring them back, and an export carries the notes to the other copies.
            noted = ForgottenRepository(tx)
            for kind_name, id_list in plan.as_dict().items():
                if kind_name != FOLDED:
                    await noted.remember(kind_name, id_list, self.now_iso(), again=again)
            for session in plan.sessions:
                await sessions.delete(session)  # cascades to the session's observations
            await observations.delete(plan.observations)
            await thin_sessions(tx, self.deps.indexer, project, thinned, plan.digest_lines, self.now_iso())
            # No copy may store a folded observation's row again once its line is cut.
            await noted.note("observation", project, plan.folded, self.now_iso(), again=again)
            await FoldedRepository(tx).delete(plan.folded)
            # Consolidation must not promote a forgotten memory's fact again from the observations that repeat it.
            said = [m.content for root in plan.memory_roots for m in await memories.chain(root, project)]
            await MetaRepository(tx).add_forgotten_facts(project, map(fact_fingerprint, said), self.now_iso())
            for root in plan.memory_roots:
                await memories.delete_chain(root, project)
            await LessonRepository(tx).delete(plan.lessons)
            if plan.reflection:
                await clear_reflection(tx, project, self.now_iso())
            records = RecordNames(tx)
            outcomes = await OutcomeRepository(tx).get_many(plan.others.get("outcome", []), project)
            cards = MistakeCardRepository(tx)
            sightings = await cards.sightings_in([o.id for o in outcomes]) if derived else {}
            for other_kind, other_ids in plan.others.items():
                await records.delete(other_kind, other_ids)
            await self.recount.after_forget(tx, outcomes if derived else [])  # what counted them and stays
            for card_id in await cards.seen_fewer(sightings, self.now_iso()):  # those gone with them match none
                tx.changed("mistake_card", card_id, "update")
            kept = [o for o in outcomes if o.session_id not in plan.sessions]
            await unsummarise(tx, self.deps.indexer, project, kept, self.now_iso())
            doomed = plan.doomed()  # with the relations touching them, deleted above as records of their own
            await self.deps.indexer.drop(tx, doomed)
            await self.deps.indexer.put_many(tx, [memory_doc(m) for m in await memories.get_many(orphans, project)])
            for kind_name, id_list in plan.as_dict().items():
                for record_id in id_list if kind_name != FOLDED else ():  # a cut digest is its session's update
                    tx.changed(kind_name, record_id, "delete")
            released = sorted({action_id for ids in plan.released.values() for action_id in ids})
            cleared = (("memory", list(unlinked)), ("outcome", unlinked_outcomes), ("action", released))
            for kind_name, id_list in cleared:  # links the database cleared as the records they named went
                for record_id in id_list:
                    tx.changed(kind_name, record_id, "update")
            if doomed or plan.digest_lines:  # the index cache on disk still holds their terms
                tx.on_commit(self.deps.builder.drop_cache)
        return self._result(plan, dry_run=False)

    async def forget_again(self, ids: Sequence[str], noted_as: Mapping[str, str]) -> tuple[int, set[str]]:
        """Delete the stored records among `ids` that were forgotten (here, or on the copy an import
        came from), each in the project it was forgotten in (a note never deletes another project's
        record, nor one made after the forget under the same id); returns how many records went
        (with what went with them), and which of `ids`.
        `noted_as`: stored id -> the id a note may know the record by (a session stored scoped)."""
        gone, went = 0, set()
        async with self.db.transaction(FORGET_ACTION) as tx:
            by_project: dict[str, list[str]] = defaultdict(list)
            for record_id, project in (await ForgottenRepository(tx).still_stored(ids, noted_as)).items():
                by_project[project].append(record_id)
            for project, stored in sorted(by_project.items()):
                went.update(stored)
                # What the copy derived from them went there (and is noted too) or was kept on purpose,
                # as consolidation keeps the heuristics of the outcomes it prunes.
                result = await self.forget(
                    project,
                    ids=sorted(stored),
                    kind=None,
                    session_id=None,
                    since=None,
                    until=None,
                    dry_run=False,
                    derived=False,
                    again=True,
                )
                gone += result.total
        return gone, went

    async def _plan(
        self,
        conn: Conn,
        project: str,
        scopes: Sequence[str],
        ids: Sequence[str] | None,
        kind: str | None,
        session_id: str | None,
        since: str | None,
        until: str | None,
        derived: bool,
    ) -> _Plan:
        plan = _Plan()
        observations, memories, sessions = (
            ObservationRepository(conn),
            MemoryRepository(conn),
            SessionRepository(conn),
        )
        others = [i for i in ids or () if (kind_of(i) or "session") in ("lesson", *BY_ID_ONLY)]
        named = await RecordNames(conn).describe(others, scopes)
        for record_id in ids or ():
            record_kind = kind_of(record_id) or "session"
            if record_kind == "observation":
                plan.observations.append((await observations.get(record_id, project, field="ids")).id)
            elif record_kind == "memory":
                plan.memory_roots.append((await memories.get(record_id, project, field="ids")).root_id)
            elif record_kind == "session":
                plan.sessions.append((await sessions.get(record_id, project, field="ids")).id)
            elif record_id not in named:
                hint = (
                    "memory_related on one of its ends lists relations"
                    if record_kind == "relation"
                    else "use memory_smart_search or the kind's list tool"
                )
                raise NotFoundError(record_kind, record_id, hint, field="ids")
            elif record_kind == "lesson":
                plan.lessons.append(record_id)
            else:
                plan.others.setdefault(record_kind, []).append(record_id)
        if kind is not None or session_id is not None or since is not None or until is not None:
            if kind == "lesson" and session_id is not None:
                raise InvalidInputError(
                    "session_id", "lessons belong to no session; leave it out to forget lessons by when first saved"
                )
            if session_id is not None:
                session_id = (await sessions.get(session_id, project, field="session_id")).id
            if kind in (None, "observation"):
                plan.observations += await observations.ids_matching(
                    project, session_id=session_id, since=since, until=until
                )
                plan.digest_lines = await self._digest_lines(sessions, project, session_id, since, until)
                plan.folded = await FoldedRepository(conn).made_between(project, session_id, since, until)
            if kind in (None, "memory"):
                plan.memory_roots += await memories.root_ids_matching(
                    project, None, since, until, session_id=session_id
                )
            if kind in (None, "lesson") and session_id is None:
                found = await LessonRepository(conn).find([project], include_deleted=True)
                plan.lessons += [
                    lesson.id
                    for lesson in found
                    if (since is None or lesson.created_at >= since) and (until is None or lesson.created_at <= until)
                ]
            if kind in (None, "session"):
                if session_id is not None and since is None and until is None:
                    plan.sessions.append(session_id)
                elif kind == "session" and session_id is None:
                    plan.sessions += await sessions.ids_begun_between(project, since, until)
                elif session_id is None:  # "what happened then": a session goes only when all of it did
                    plan.sessions += await self._wholly_within(conn, project, plan, since, until)
                elif kind == "session":  # the filters combine: the session goes if it began in the window
                    begun = await sessions.ids_begun_between(project, since, until)
                    plan.sessions += [session_id] if session_id in begun else []
        for session in plan.sessions:
            plan.observations += await observations.ids_in_session(session)
            plan.digest_lines.pop(session, None)  # the whole session goes (its notes of folded ones with it)
        if plan.folded:  # those of a session that goes, go with it
            plan.folded = await FoldedRepository(conn).outside(plan.folded, plan.sessions)
        for root in dict.fromkeys(plan.memory_roots):
            plan.memories += [m.id for m in await memories.chain(root, project)]
        plan.memory_roots = list(dict.fromkeys(plan.memory_roots))
        # What was learned from them alone, or quotes them, goes too (listed, so a dry run shows it).
        if derived:
            # a folded observation was evidence as much as a stored one: its line goes, or its session
            folded = {*plan.folded, *await FoldedRepository(conn).in_sessions(plan.sessions)}
            taken = await derived_from(conn, project, set(plan.doomed()) | folded)
            plan.lessons = list(dict.fromkeys([*plan.lessons, *taken.lessons]))
            if taken.mistake_cards:
                cards = plan.others.setdefault("mistake_card", [])
                cards += [card for card in taken.mistake_cards if card not in cards]
            plan.reflection = taken.reflection
        # An edge cannot outlive either end: the records' relations go with them, and are listed.
        if edges := await RelationRepository(conn).ids_touching(plan.doomed()):
            plan.others.setdefault("relation", []).extend(edges)
        # Actions that stay lose their links to those that go (the database drops them): said, since a
        # dependency gone reads as one done, and a child gone top-level.
        if going := plan.others.get("action"):
            actions = ActionRepository(conn)
            released = {"dependents": await actions.waiting_on(going), "children": await actions.children_of(going)}
            plan.released = {name: ids for name, ids in released.items() if ids}
        return plan

    @staticmethod
    async def _wholly_within(conn: Conn, project: str, plan: _Plan, since: str | None, until: str | None) -> list[str]:
        """Sessions that began in [since, until] and hold nothing from outside it: every kept
        observation already planned to go, every folded one's digest line cut. One that went on
        past the window stays, with what it holds from outside it."""
        planned = set(plan.observations)
        observations = ObservationRepository(conn)
        began = await SessionRepository(conn).ids_begun_between(project, since, until)
        within = []
        for session in await SessionRepository(conn).get_many(began):
            digest = (session.folded_digest or "").split("\n")
            folded = [i for i, line in enumerate(digest) if line.startswith("- ")]
            if set(folded) - set(plan.digest_lines.get(session.id, [])):
                continue
            if all(i in planned for i in await observations.ids_in_session(session.id)):
                within.append(session.id)
        return within

    @staticmethod
    async def _digest_lines(
        sessions: SessionRepository, project: str, session_id: str | None, since: str | None, until: str | None
    ) -> dict[str, list[int]]:
        """Positions of the digest lines of folded observations made in [since, until], by session
        (of `session_id` only, when given)."""
        found = [await sessions.get(session_id, project)] if session_id else await sessions.all_in_project(project)
        cuts = {}
        for session in found:
            lines = (session.folded_digest or "").split("\n")
            if cut := [i for i, line in enumerate(lines) if _made_between(line, session, since, until)]:
                cuts[session.id] = cut
        return cuts

    @staticmethod
    def _result(plan: _Plan, dry_run: bool) -> ForgetResult:
        deleted = plan.as_dict()
        # a filter can reach a whole history: ids past the cap would only flood the caller's context
        return ForgetResult(
            dry_run=dry_run,
            deleted={kind: ids[:LISTED_IDS] for kind, ids in deleted.items()},
            counts={kind: len(ids) for kind, ids in deleted.items()},
            total=sum(len(ids) for ids in deleted.values()),
            insights_cleared=plan.reflection,
            released={name: ids[:LISTED_IDS] for name, ids in plan.released.items()},
        )


def _made_between(line: str, session: Session, since: str | None, until: str | None) -> bool:
    """Whether a line of the session's digest is of a folded observation made in [since, until]."""
    if not line.startswith("- "):
        return False  # the `…` where a long digest was shortened
    minute = digest_line_minute(line, session.started_at)
    if minute is None:
        # Folded before lines carried a time: it was made in the window if the whole session was.
        return (since or "") <= session.started_at and session.last_activity_at <= (until or "9999")
    # A line keeps only the minute: it goes when any of that minute lies in the window.
    return (since is None or f"{minute}:59.999999Z" >= since) and (until is None or f"{minute}:00" <= until)
