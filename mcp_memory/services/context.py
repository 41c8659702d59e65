"""The start-of-session context: the best of everything, packed into a token budget.

Sections, in order: pinned slots, project profile, lessons (heuristics and anti-patterns included)
ranked by confidence × relevance, the most seen mistake cards, recent sessions, and memories
relevant to the query or task type (else the most important ones). A query or task type focuses,
never filters: what matches it comes first, and the best of the rest follow while budget remains.
Tokens are estimated as ceil(characters / 4) of the final text, which never exceeds the budget.
Each section is cut at an item boundary; what did not fit is listed with its public id, and one
fetch hint names the calls that return all of it. Each section reads a bounded number of records
(five times its share), but counts every record it would show given unlimited room (in SQL, or for
lessons as their ranking reads them), so what it reports left out is the true number.

`render` gives the context as one text within the budget, placed in a frame (a prompt's words around
it) and followed by the line saying what was left out and how to fetch it: the room of both is taken
from the sections' room.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from mcp_memory.clock import local_minute
from mcp_memory.ids import public_id
from mcp_memory.models.learning import LessonView, ProfileResult
from mcp_memory.models.organising import ContextResult, ContextSection, OmittedItem
from mcp_memory.models.records import Memory, MistakeCard, Relation, Session
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository
from mcp_memory.repositories.relations import RelationRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.search.index import SearchFilter
from mcp_memory.search.spelling import respell_query
from mcp_memory.services.common import GLOBAL_PROJECT, Deps, Service
from mcp_memory.services.compress import counted, shorten
from mcp_memory.services.insights import InsightsService
from mcp_memory.services.lessons import LessonService
from mcp_memory.services.relations import MemoryNodes
from mcp_memory.services.slots import SlotService
from mcp_memory.services.summaries import SUMMARY_HEADER

CHARS_PER_TOKEN = 4
FETCH_IDS_PER_CALL = 100  # memory_smart_search takes at most this many ids
OMITTED_TITLE_CHARS = 60
OMITTED_LISTED = 20
"""At most this many left-out items are listed: a small budget must not buy a long list instead."""
OMITTED_PER_TOKENS = 50
"""And, past the first `OMITTED_MIN`, one per this many tokens of budget: the list (and its fetch
hint) costs tokens too."""
OMITTED_MIN = 5
_PREFERENCES = 5
"""Preferences the profile section shows (the memories section then leaves them out)."""
_POOL = 5
"""Each section reads this many times its share: the further items fill budget the others leave."""
LEFT_OUT = "\nLeft out for space: "
LEFT_OUT_FETCH = "\nLeft out for space (fetch with): "
LEFT_OUT_PAST = "\nLeft out: "
"""The line's start when nothing was left out for space, only what lies past what each section reads."""
MORE = "{more} (memory_smart_search finds them{project})"
"""What the line says of the left-out items it does not list, and how to reach them."""
_FITTING = 8
"""`render` packs the sections at most this many times, each with the room the left-out line last needed."""


def estimate_tokens(text: str) -> int:
    """The documented estimator: one token per four characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class _Item:
    text: str
    id: str | None
    title: str


@dataclass
class _Section:
    name: str
    heading: str
    items: list[_Item] = field(default_factory=list)
    share: int | None = None
    """Items it may take before every section has had its share; the rest fill what budget is left."""
    total: int = 0
    """How many records it would show given unlimited room: its items are the first of them."""

    def first_take(self) -> int:
        """How many of its items it takes before the others have had their share (all, without one)."""
        return len(self.items) if self.share is None else min(self.share, len(self.items))

    def eligible(self) -> int:
        """Its records, read or not (never fewer than it read: a count can lag a write made meanwhile)."""
        return max(self.total, len(self.items))


@dataclass
class _Packed:
    """The context `_pack` made, with what the rendered text needs beyond the tool's result."""

    result: ContextResult
    shown: int
    """How many sections it shows something of."""
    for_space: bool
    """Whether anything was left out for want of room (else only what lies past what a section reads)."""


class ContextService(Service):
    """Compiles the context from the other services' reads."""

    def __init__(self, deps: Deps, lessons: LessonService, slots: SlotService, insights: InsightsService) -> None:
        super().__init__(deps)
        self.lessons = lessons
        self.slots = slots
        self.insights = insights

    async def compile(
        self,
        project: str,
        *,
        query: str | None = None,
        task_type: str | None = None,
        budget: int | None = None,
        default_project: str | None = None,
    ) -> ContextResult:
        """The context for a session in `project`, focused on `query` / `task_type` when given.

        `default_project` is the project a call that names none reaches (default: the server's);
        the fetch hint names `project` only when it differs.
        """
        budget = budget or self.settings.context_budget
        sections = await self._sections(project, query, task_type)
        default = default_project or self.settings.project
        return self._pack(project, sections, budget, budget * CHARS_PER_TOKEN, default).result

    async def render(
        self,
        project: str,
        *,
        query: str | None = None,
        task_type: str | None = None,
        budget: int | None = None,
        default_project: str | None = None,
        frames: Sequence[tuple[str, str]] = (("", ""),),
    ) -> str:
        """The context as one text of at most `budget` tokens (ceil(characters / 4)), ending with the line
        that says what was left out for space and how to fetch it.

        `frames` are (before, after) pairs of text to put around the context, most wanted first: of those
        that leave room for the header, the one that lets the most sections show something is used (a tie
        goes to the one that also has room for that line, then to the one wanted first); the last frame, cut
        to the budget, when none leaves room. So a frame's words never cost the context a whole section,
        while a large budget, where every frame shows every section, keeps the fullest words (counting
        items instead would drop them whenever there is more memory than budget). The frame and the line
        take their room from the sections; the line lists fewer of what was left out when listing it all
        would leave no section anything, and is left off only when even the header alone leaves it no room.
        """
        budget = budget or self.settings.context_budget
        sections = await self._sections(project, query, task_type)
        default = default_project or self.settings.project
        limit = budget * CHARS_PER_TOKEN
        header = len(_header(project))
        fitting = [(b, a) for b, a in frames if len(b) + header + len(a) <= limit] or [frames[-1]]
        rendered = []
        for n, (before, after) in enumerate(fitting):
            text, line, shown = self._fit(project, sections, budget, limit - len(before) - len(after), default)
            rendered.append(((shown, line is not None, -n), before + text + after + (line or "")))
        return _cut(max(rendered)[1], limit)

    def _fit(
        self, project: str, sections: list[_Section], budget: int, room: int, default: str
    ) -> tuple[str, str | None, int]:
        """The context, the line saying what it left out, and how many sections show something, the text and
        the line together in `room` characters (the line takes its room from the sections); the line is None
        when something was left out but it found no room.

        The line lists fewer of the left-out items when listing them all would leave the context no item
        at all: the most it can list beside at least one item (all, when even its shortest form leaves no
        item room).
        """
        fitted = self._fit_listing(project, sections, budget, room, default, None)
        if fitted[2] or not self._fit_listing(project, sections, budget, room, default, 0)[2]:
            return fitted
        for listing in range(_listed(budget) - 1, -1, -1):
            fitted = self._fit_listing(project, sections, budget, room, default, listing)
            if fitted[2]:
                break
        return fitted

    def _fit_listing(
        self, project: str, sections: list[_Section], budget: int, room: int, default: str, listing: int | None
    ) -> tuple[str, str | None, int]:
        """`_fit` with the line listing at most `listing` of the left-out items (all that are listed: None)."""
        header = len(_header(project))
        reserve = 0
        for _ in range(_FITTING):
            packed = self._pack(project, sections, budget, room - reserve, default)
            text = packed.result.text
            line = self._left_out(packed, project, default, listing=listing)
            if len(text) + len(line) <= room or len(text) == header:
                break  # it fits, or the sections have no room left to give
            reserve = max(reserve + 1, len(line))
        if len(text) + len(line) > room:
            line = self._left_out(packed, project, default, room - len(text), listing)
        left = packed.result.omitted or packed.result.omitted_unlisted
        return text, line if line or not left else None, packed.shown

    async def _sections(self, project: str, query: str | None, task_type: str | None) -> list[_Section]:
        """Every section, in order, with the items it read and the count of all it would show."""
        focus = self._focus(query, task_type)
        # A misspelt word of the focus is searched as the known word beside it (search/spelling.py);
        # an embedding model reads the focus as typed.
        words = focus and respell_query(self.deps.index, [project, GLOBAL_PROJECT], focus).text
        lessons, active = await self._lessons(project, words, task_type)
        profile = await self.insights.profile(project, top=8, active_lessons=active)
        return [
            await self._pinned(project),
            self._profile(profile),
            lessons,
            await self._mistakes(project, task_type),
            await self._sessions(project),
            await self._memories(project, focus, words, set(profile.preferences[:_PREFERENCES])),
        ]

    def _pack(self, project: str, sections: list[_Section], budget: int, room: int, default: str) -> _Packed:
        """The context of `sections` in `room` characters; `budget` (tokens) sets how many left-out items are listed."""
        text = _header(project)
        taken = _fill(sections, len(text), room)
        report: list[ContextSection] = []
        left: list[tuple[bool, int, _Section, _Item]] = []
        unread = 0  # left out without being read: past what the section reads
        for order, (section, included) in enumerate(zip(sections, taken, strict=True)):
            if included:
                text += section.heading + "".join(i.text + "\n" for i in section.items[:included])
            # Listed most wanted first: what a section's share left out, then its further items.
            share = section.first_take()
            left += [(n >= share, order, section, i) for n, i in enumerate(section.items) if n >= included]
            unread += section.eligible() - len(section.items)
            if section.eligible():
                report.append(
                    ContextSection(
                        name=section.name,
                        included=included,
                        omitted=section.eligible() - included,
                        tokens=estimate_tokens("".join(i.text + "\n" for i in section.items[:included])),
                    )
                )
        left.sort(key=lambda entry: entry[:2])  # stable: each section's items keep their order
        omitted = [
            OmittedItem(section=section.name, id=item.id, title=shorten(item.title, OMITTED_TITLE_CHARS))
            for _, _, section, item in left[: _listed(budget)]
        ]
        result = ContextResult(
            project=project,
            text=text,
            tokens=estimate_tokens(text),
            budget=budget,
            sections=report,
            omitted=omitted,
            omitted_unlisted=len(left) + unread - len(omitted),
            fetch=self._fetch_hint(project, default, omitted),
        )
        # An item read but not taken found no room; what lies past what a section reads is left out for
        # space only when some of what it read was too (else the budget had room, the read had not).
        return _Packed(result, sum(1 for included in taken if included), bool(left))

    def _left_out(
        self, packed: _Packed, project: str, default: str, room: int | None = None, listing: int | None = None
    ) -> str:
        """The line that says what the context left out and how to fetch it ("" when nothing was): the
        first of the left-out items (at most `listing`) with the call that fetches them, and how many more
        there are.

        Within `room` characters when given: listing fewer of the left-out items (the most wanted kept),
        else only their number; "" when not even that fits.
        """
        omitted = packed.result.omitted
        total = len(omitted) + packed.result.omitted_unlisted
        named = "" if project == default else f"; pass project={_quoted(project)}"
        for count in range(min(len(omitted), len(omitted) if listing is None else listing), -1, -1):
            listed = omitted[:count]
            if count:
                fetch = self._fetch_hint(project, default, listed)
                line = LEFT_OUT_FETCH + fetch if fetch else LEFT_OUT + "; ".join(o.title for o in listed)
                rest = MORE.format(more=f"{total - count} more", project="" if fetch else named)  # calls name it
                line += f"; and {rest}" if total > count else ""
            elif total:
                start = LEFT_OUT if packed.for_space else LEFT_OUT_PAST
                line = start + MORE.format(more=counted(total, "item"), project=named)
            else:
                line = ""
            if room is None or len(line) <= room:
                return line
        return ""

    async def session_id(self, project: str, session_id: str) -> str:
        """The id callers use for a session of `project`, or the not-found error naming session_id."""
        async with self.db.read() as conn:
            return public_id((await SessionRepository(conn).get(session_id, project)).id)

    def _focus(self, query: str | None, task_type: str | None) -> str | None:
        """What the context is focused on: the query without its secrets and private parts, else the task type.

        A redacted secret cannot match anything stored, and must not reach an embedding provider.
        """
        searched = self.scrubber().query(query)[1] if query else ""
        return searched or (task_type.replace("_", " ") if task_type else None)

    def _fetch_hint(self, project: str, default_project: str, omitted: list[OmittedItem]) -> str | None:
        """The calls that return everything left out, naming the project when an unnamed call would miss it.

        The profile has no id; its tool is left out of the hint under the core tool profile, which lacks it.
        """
        named = [] if project == default_project else [f"project={_quoted(project)}"]
        ids = [public_id(o.id) for o in omitted if o.id is not None]
        calls = [
            _call("memory_smart_search", f"ids={_quoted(ids[start : start + FETCH_IDS_PER_CALL])}", *named)
            for start in range(0, len(ids), FETCH_IDS_PER_CALL)
        ]
        if len(ids) < len(omitted) and self.settings.tools == "all":
            calls.append(_call("memory_profile", *named))
        return "; ".join(calls) or None

    async def _pinned(self, project: str) -> _Section:
        section = _Section("pinned_slots", "\n## Pinned\n")
        for slot in await self.slots.pinned(project):
            if slot.content.strip():
                section.items.append(_Item(f"### {slot.name}\n{slot.content.strip()}", slot.id, slot.name))
        return section

    @staticmethod
    def _profile(profile: ProfileResult) -> _Section:
        section = _Section("profile", "\n## Project profile\n")
        if not (profile.sessions or profile.memories or profile.lessons or profile.task_types):
            return section
        lines = [
            f"{counted(profile.sessions, 'session')}, {counted(profile.observations, 'observation')}, "
            f"{counted(profile.memories, 'memory')}, {counted(profile.lessons, 'lesson')}."
        ]
        if profile.top_concepts:
            lines.append("Concepts: " + ", ".join(c.name for c in profile.top_concepts))
        if profile.top_files:
            lines.append("Files: " + ", ".join(f.name for f in profile.top_files))
        for stats in profile.task_types[:5]:
            lines.append(
                f"{stats.task_type}: {stats.successes}/{stats.outcomes} succeeded, mean score {stats.mean_score:.2f}"
            )
        # Whole as the profile keeps them; one cut short there is listed among the memories too, with its id.
        lines += [f"Preference: {p}" for p in profile.preferences[:_PREFERENCES]]
        section.items.append(_Item("\n".join(lines), None, "project profile"))
        return section

    async def _lessons(self, project: str, focus: str | None, task_type: str | None) -> tuple[_Section, int]:
        """The lessons section, and how many of the project's own lessons are active (the profile's count)."""
        found: list[LessonView] = []
        later: list[LessonView] = []
        matched: set[str] = set()
        actives: list[int] = []  # of each scope: the project's first
        scopes = [project] if project == GLOBAL_PROJECT else [project, GLOBAL_PROJECT]
        for scope, share in zip(scopes, (10, 5), strict=False):
            # The focus puts what matches first; then what applies to the task type (its own lessons and
            # untyped ones), then the best of the rest, each by confidence.
            limit = share * _POOL
            relevant = await self.lessons.ranked(scope, focus, task_type=task_type, limit=limit) if focus else []
            matched.update(lesson.id for lesson in relevant)
            # One read of the scope's lessons ranks them for the task type and, after those, for every type.
            orders = [task_type, None] if task_type else [None]
            rankings = await self.lessons.rankings(scope, None, task_types=orders, limit=limit)
            ranked = _unique(relevant + [lesson for views, _ in rankings for lesson in views])[:limit]
            # Every active lesson of the scope is one the section shows given unlimited room (the task
            # type's and the focus's first, the rest after): the last ranking, of every type, counts them.
            actives.append(rankings[-1][1])
            found += ranked[:share]  # the project's share, then the global one, before either's rest
            later += ranked[share:]
        # What matches the focus, then the task type's own lessons, lead whatever their scope: a global
        # lesson that applies comes before the project's that do not (stable: each tier keeps its order).
        ordered = sorted(
            found + later,
            key=lambda lesson: (lesson.id not in matched, task_type is None or lesson.task_type != task_type),
        )
        section = _Section("lessons", "\n## Lessons\n", share=len(found), total=sum(actives))
        for lesson in ordered:
            # why it is bad and the better strategy: a strategy may run to many lines, an item is one
            detail = f" — {shorten(lesson.context, 300)}" if lesson.kind == "anti_pattern" and lesson.context else ""
            line = f"- [{lesson.kind} {lesson.confidence:.2f}] {shorten(lesson.content, 300)}{detail} ({lesson.id})"
            section.items.append(_Item(line, lesson.id, shorten(lesson.content, 80)))
        return section, actives[0]

    async def _mistakes(self, project: str, task_type: str | None) -> _Section:
        section = _Section("mistake_cards", "\n## Mistakes to avoid\n", share=5)
        async with self.db.read() as conn:
            repo = MistakeCardRepository(conn)
            # The task type's cards first, then the most seen of the others.
            limit = 5 * _POOL
            focused = await repo.top(project, task_type, limit) if task_type else []
            cards = _unique(focused + await repo.top(project, None, limit))[:limit]
            section.total = await repo.count(project)  # the task type's cards come first, the rest follow
        for c in cards:
            line = f"- Seen {c.seen_count}x, {c.type} in {shorten(c.task, 80)!r}: do {shorten(c.correct_decision, 160)}"
            if c.wrong_decision:
                line += f", not {shorten(c.wrong_decision, 120)}"
            if c.why:
                line += f" ({shorten(c.why, 120)})"
            section.items.append(_Item(line, c.id, shorten(c.correct_decision, 80)))
        return section

    async def _sessions(self, project: str) -> _Section:
        section = _Section("sessions", "\n## Recent sessions\n", share=5)
        async with self.db.read() as conn:
            sessions = SessionRepository(conn)
            # Those that went on latest first: imported history keeps its own day, and its place.
            found = await sessions.latest_telling(project, 5 * _POOL)
            section.total = await sessions.count_telling(project)
        for s, happened in found:
            title = s.title or public_id(s.id)
            kept = s.observation_count - s.folded_count
            line = f"- {local_minute(happened, self.zone)[:10]} {title} ({counted(kept, 'observation')})"
            summary = _beyond_title(s, title)
            if summary:
                line += f": {shorten(summary, 400)}"
            section.items.append(_Item(line, s.id, title))
        return section

    async def _memories(self, project: str, focus: str | None, words: str | None, in_profile: set[str]) -> _Section:
        section = _Section("memories", "\n## Memories\n", share=10)
        vector = await self.query_vector(focus) if focus else None
        limit = 10 * _POOL
        async with self.db.read() as conn:
            repo = MemoryRepository(conn)
            memories = await repo.important(project, limit)
            if focus:
                hits = self.deps.index.search(
                    project,
                    words or "",
                    SearchFilter(kinds=frozenset({"memory"})),
                    limit,
                    self.now().timestamp(),
                    vector,
                )
                memories = _unique(await repo.get_many([h.doc_id for h in hits], project) + memories)[:limit]
            # A memory keeps its links across versions: an edge may name an older version of either end.
            nodes = MemoryNodes(repo, project)
            await nodes.learn([m.id for m in memories])
            versions = [i for m in memories for i in nodes.ids(nodes.node(m.id))]
            edges = await RelationRepository(conn).touching(project, versions, "both", ["contradicts"])
            await nodes.learn([end for edge in edges for end in (edge.source_id, edge.target_id)])
            # Given unlimited room it shows every latest memory (what the focus finds is among them) but
            # the preferences the profile shows whole, each of which holds every word of what it shows.
            latest = await repo.count(project, latest_only=True)
            groups = [sorted(set(p.removesuffix("…").split()), key=lambda w: (-len(w), w)) for p in sorted(in_profile)]
            holding = await repo.latest_contents_holding(project, "preference", groups)
        disputes = _disputes(memories, edges, nodes.node)
        shown = sum(_flat(content) in in_profile for content in holding)
        for m in memories:
            if m.kind == "preference" and _flat(m.content) in in_profile:
                continue  # the profile shows all of it already
            line = f"- [{m.kind}] {shorten(m.content, 300)} ({'; '.join([m.id, *disputes.get(m.id, [])])})"
            section.items.append(_Item(line, m.id, m.title or shorten(m.content, 80)))
            latest += not m.is_latest  # an index a write has not yet reached may still find an older version
        section.total = latest - shown
        return section


def _flat(content: str) -> str:
    """A memory's content as the profile shows a preference it does not cut short: on one line."""
    return " ".join(content.split())


def _disputes(memories: list[Memory], edges: list[Relation], node: Callable[[str], str]) -> dict[str, list[str]]:
    """For each memory a contradiction links to another of `memories` (`node` maps either end, which
    may be an older version, to the memory shown), a note naming the other and whether it is newer,
    so an agent does not act on the older side unawares."""
    made = {m.id: (m.created_at, m.id) for m in memories}
    notes: dict[str, list[str]] = {}
    for edge in edges:
        ends = (node(edge.source_id), node(edge.target_id))
        if ends[0] == ends[1] or not all(end in made for end in ends):
            continue
        older, newer = sorted(ends, key=made.__getitem__)
        notes.setdefault(older, []).append(f"contradicted by newer {newer}")
        notes.setdefault(newer, []).append(f"contradicts older {older}")
    return {i: list(dict.fromkeys(n)) for i, n in notes.items()}


def _listed(budget: int) -> int:
    """How many of the left-out items are listed at `budget` tokens, at most."""
    return min(OMITTED_LISTED, max(OMITTED_MIN, budget // OMITTED_PER_TOKENS))


def _header(project: str) -> str:
    return f"# Memory for project {project}\n"


def _cut(text: str, limit: int) -> str:
    """`text` within `limit` characters: cut at its last line break that leaves it so, else at the limit.

    Only a frame longer than the whole budget is cut: `render` fits everything else.
    """
    if len(text) <= limit:
        return text
    end = text.rfind("\n", 0, limit + 1)
    return text[: end if end > 0 else limit]


def _fill(sections: list[_Section], used: int, room: int) -> list[int]:
    """How many items of each section fit in `room` characters (`used` already are), in order.

    Every section first takes up to its share, so none crowds out those after it; what room is left
    then goes to each section's further items, in section order. A section stops at its first item
    that does not fit (cut at an item boundary, never skipping to a smaller one).
    """
    taken = [0] * len(sections)
    for first in (True, False):
        for n, section in enumerate(sections):
            stop = section.first_take() if first else len(section.items)
            while taken[n] < stop:
                size = (len(section.heading) if taken[n] == 0 else 0) + len(section.items[taken[n]].text) + 1
                if used + size > room:
                    break
                used += size
                taken[n] += 1
    return taken


_T = TypeVar("_T", LessonView, Memory, MistakeCard)


def _unique(items: list[_T]) -> list[_T]:
    """First occurrence of each record, in order."""
    seen: set[str] = set()
    out = []
    for item in items:
        if item.id not in seen:
            seen.add(item.id)
            out.append(item)
    return out


def _call(tool: str, *arguments: str) -> str:
    return f"{tool}({', '.join(arguments)})"


def _quoted(value: str | list[str]) -> str:
    """A value as the JSON a tool call takes, so any name reads as data."""
    return json.dumps(value, ensure_ascii=False)


def _beyond_title(session: Session, title: str) -> str:
    """The session's summary (else its folded digest) without what its context line already says.

    An extractive summary opens with a line of title, observation count and span, and lists the
    decision or observation the title was taken from; a heading left with nothing under it goes too.
    A summary the client's model wrote is shown as it is.
    """
    if not session.summary or session.summary_source == "sampling":
        return session.summary or session.folded_digest or ""
    lines = session.summary.splitlines()
    if SUMMARY_HEADER.match(lines[0]):
        lines = lines[1:]
    lines = [line for line in lines if line.removeprefix("- ") != title]
    if not lines:
        return ""
    return "\n".join(
        line
        for line, following in zip(lines, [*lines[1:], ""], strict=True)
        if not (line.endswith(":") and not following.startswith("- "))  # "Decisions:" with no decision left
    )
