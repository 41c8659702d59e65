"""Long-term memories: save with supersession by similarity, and read back with the version chain."""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator, Sequence
from collections.abc import Set as AbstractSet

from mcp_memory.db import Conn, Database, Tx
from mcp_memory.errors import ConflictError
from mcp_memory.ids import new_id
from mcp_memory.models.records import Memory, searchable_text
from mcp_memory.models.results import MemoryDetail, MemoryVersion, Resemblance, SaveResult
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.search.index import SearchFilter
from mcp_memory.services.common import Deps, Service, jaccard, moment
from mcp_memory.services.compress import concept_forms, title_or_none
from mcp_memory.services.index_docs import DocSpec

DEFAULT_KIND = "fact"
"""The kind of a memory saved without one that replaces none."""
SUPERSEDE_THRESHOLD = 0.7
"""Saving a memory whose term set has Jaccard similarity above this with a live one supersedes it."""

_SAME_CONTENT_READS = 8
"""How many of the most similar memories a save reads to find one with the same content."""

RESEMBLE_THRESHOLD = 0.5
"""A live memory at least this similar, but not above `SUPERSEDE_THRESHOLD`, is named in the save
result so the agent can decide whether the new one should replace it."""

_INHERITABLE = frozenset({"title", "concepts", "files"})
"""What a new version takes from the one it replaces when the save leaves it out."""
_INHERITING_SHARE = 0.5
"""A save that leaves some of those out looks for what it may replace down to this share of
`RESEMBLE_THRESHOLD`, then judges each found as it would be stored over it."""


def memory_doc(mem: Memory) -> DocSpec:
    """The index document of a memory (only the latest version of a chain is indexed)."""
    return DocSpec(
        doc_id=mem.id,
        kind="memory",
        subtype=mem.kind,
        project=mem.project,
        session_id=mem.session_id,
        at=mem.occurred_at or mem.created_at,
        fields=((mem.text, 1),),
        weight=mem.importance,
        dated=True,
    )


class MemoryService(Service):
    """Saves, versions and reads memories."""

    def __init__(self, deps: Deps) -> None:
        super().__init__(deps)
        deps.indexer.register_source("memory", self._memory_docs, self._memory_lookup)

    async def save(
        self,
        project: str,
        content: str,
        kind: str | None = None,
        *,
        title: str | None = None,
        concepts: Sequence[str] | None = None,
        files: Sequence[str] | None = None,
        importance: float | None = None,
        ref: str | None = None,
        occurred_at: str | None = None,
        supersedes: str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> SaveResult:
        """Store a memory; a near-duplicate of a live memory (or the one named) becomes its new version."""
        scrub = self.scrubber()
        content = scrub.required("content", content).strip()
        now = self.now_iso()
        agent = scrub.optional(agent_id or self.settings.agent_id)
        draft = Memory(
            id=new_id("memory"),
            project=project,
            agent_id=agent,
            session_id=session_id,
            kind=kind or DEFAULT_KIND,
            title=title_or_none(scrub.optional(title)),
            content=content,
            concepts=sorted(set(concept_forms(scrub.many(concepts) or []))),
            files=list(dict.fromkeys(f.strip() for f in scrub.many(files) or [] if f.strip())),
            importance=0.5 if importance is None else importance,
            ref=scrub.optional(ref),
            occurred_at=moment("occurred_at", occurred_at, self.zone),
            root_id="",
            created_at=now,
            updated_at=now,
        )
        optional = {
            "kind": kind, "title": title, "concepts": concepts, "files": files, "importance": importance, "ref": ref,
            "occurred_at": occurred_at, "session_id": session_id,
        }  # fmt: skip
        given = {name for name, value in optional.items() if value is not None}
        async with self.db.transaction("memory_save", actor=agent, project=project) as tx:
            if session_id is not None:
                draft = draft.model_copy(
                    update={"session_id": (await SessionRepository(tx).get(session_id, project)).id}
                )
            repo = MemoryRepository(tx)
            await self.deps.indexer.catch_up(tx)  # what the save replaces is read from the index
            parent, similarity, resembles = await self._predecessor(repo, draft, supersedes, given)
            if parent is not None and _same(parent, draft, given):
                return SaveResult(
                    id=parent.id,
                    kind=parent.kind,
                    version=parent.version,
                    root_id=parent.root_id,
                    unchanged=True,
                    redacted=scrub.summary(),
                )
            inherited = {
                name: getattr(parent, name)
                for name in ("kind", "title", "concepts", "files", "importance")
                if parent is not None and name not in given
            }
            mem = draft.model_copy(
                update=inherited
                | {
                    "root_id": parent.root_id if parent else draft.id,
                    "parent_id": parent.id if parent else None,
                    "version": parent.version + 1 if parent else 1,
                    "similarity": similarity,
                }
            )
            await repo.add(mem)
            tx.changed("memory", mem.id, "create")
            if parent is not None:
                await repo.mark_superseded(parent.id, mem.id, now)
                tx.changed("memory", parent.id, "supersede")
                await self.deps.indexer.drop(tx, [parent.id])
            await self.deps.indexer.put(tx, memory_doc(mem))
        return SaveResult(
            id=mem.id,
            kind=mem.kind,
            version=mem.version,
            root_id=mem.root_id,
            superseded_id=parent.id if parent else None,
            similarity=similarity,
            resembles=resembles,
            redacted=scrub.summary(),
        )

    async def _predecessor(
        self, repo: MemoryRepository, draft: Memory, supersedes: str | None, given: AbstractSet[str]
    ) -> tuple[Memory | None, float | None, Resemblance | None]:
        """The live memory the draft replaces (named, or the most similar above the threshold), its
        similarity, and otherwise the live memory it merely resembles.

        Each is compared with the draft as it would be stored over it: a title, concepts or files
        the call left out (`given` names what it gave) come from the memory it replaces, so they
        count as the same words, not as words only the stored one has.
        """
        if supersedes is not None:
            named = await repo.get(supersedes, draft.project, field="supersedes")
            if not named.is_latest:
                chain = await repo.chain(named.root_id, draft.project)
                latest = next((m.id for m in chain if m.is_latest), named.superseded_by)
                raise ConflictError(
                    f"supersedes: {supersedes} is an old version; the latest is {latest}, supersede that one"
                )
            return named, round(self._as_version_of(draft, named, given), 4), None
        # Found by the draft's own words: what it leaves out to inherit makes it look less alike.
        floor = RESEMBLE_THRESHOLD if given >= _INHERITABLE else RESEMBLE_THRESHOLD * _INHERITING_SHARE
        found = self._alike(draft.project, draft.text, floor)[:_SAME_CONTENT_READS]
        alike = [m for m in await repo.get_many([i for i, _ in found], draft.project) if m.is_latest] if found else []
        same = await self._same_content(repo, draft.project, draft.content, alike)
        if same is not None:
            return same, round(self._as_version_of(draft, same, given), 4), None
        scored = sorted(((self._as_version_of(draft, m, given), m.id, m) for m in alike), key=lambda s: (-s[0], s[1]))
        if not scored or scored[0][0] < RESEMBLE_THRESHOLD:
            return None, None, None
        similarity, _, best = scored[0]
        if similarity > SUPERSEDE_THRESHOLD:
            return best, round(similarity, 4), None
        return None, None, Resemblance(id=best.id, title=best.title, similarity=round(similarity, 4))

    def _as_version_of(self, draft: Memory, stored: Memory, given: AbstractSet[str]) -> float:
        """Jaccard of the draft's words, taking what the call left out from `stored`, to `stored`'s."""
        inherited = {name: getattr(stored, name) for name in _INHERITABLE - given}
        return self._jaccard(set(self.deps.index.analyzer.terms(draft.model_copy(update=inherited).text)), stored.id)

    @staticmethod
    async def _same_content(
        repo: MemoryRepository, project: str, content: str, alike: Sequence[Memory]
    ) -> Memory | None:
        """The live memory whose content is `content`: exactly, sought by content whatever its title,
        concepts or files make the two read like; else, case and spacing aside, among the few `alike`
        (the most similar by words: a save never scans every memory). The same content is the same
        memory ("Use tabs" saved again without the concept it was first given)."""
        same = await repo.latest_with_content(project, content)
        if same is not None:
            return same
        wanted = _normal(content)
        return next((m for m in alike if m.is_latest and _normal(m.content) == wanted), None)

    async def already_says(self, repo: MemoryRepository, project: str, text: str) -> bool:
        """Whether a live memory says `text`: nearly (its words alike above the supersede threshold,
        also as a save of `text` alone would store it over that memory, its title, concepts and files
        inherited, which is what would replace it), or the same content, whatever title it has."""
        found = self._alike(project, text, RESEMBLE_THRESHOLD * _INHERITING_SHARE)[:_SAME_CONTENT_READS]
        if found and found[0][1] > SUPERSEDE_THRESHOLD:
            return True
        alike = [m for m in await repo.get_many([i for i, _ in found], project) if m.is_latest] if found else []
        if await self._same_content(repo, project, text, alike) is not None:
            return True
        analyse = self.deps.index.analyzer.terms
        return any(
            self._jaccard(set(analyse(searchable_text(m.title, text, m.concepts, m.files))), m.id) > SUPERSEDE_THRESHOLD
            for m in alike
        )

    def _alike(self, project: str, text: str, floor: float) -> list[tuple[str, float]]:
        """The live memories with Jaccard >= `floor` to `text`, most similar first (ties by id)."""
        known, unknown = self.term_ids(text)
        found = self.deps.index.similar(project, known, floor, SearchFilter(kinds=frozenset({"memory"})), unknown)
        return sorted(found.items(), key=lambda s: (-s[1], s[0]))

    def term_ids(self, text: str) -> tuple[frozenset[int], int]:
        """The index's ids of `text`'s words, and how many of its words the index does not know."""
        terms = set(self.deps.index.analyzer.terms(text))
        known = frozenset(i for t in terms if (i := self.deps.index.vocab.get(t)) is not None)
        return known, len(terms) - len(known)

    def _jaccard(self, terms: set[str], other_id: str) -> float:
        other = self.deps.index.terms_of(other_id)
        vocab = self.deps.index.vocab
        shared = sum(1 for t in terms if vocab.get(t) in other)
        union = len(terms) + len(other) - shared
        return shared / union if union else 1.0

    async def get(self, project: str, memory_id: str) -> MemoryDetail:
        """A memory with every version of its chain, oldest first."""
        async with self.db.read() as conn:
            repo = MemoryRepository(conn)
            mem = await repo.get(memory_id, project, field="id")
            chain = await repo.chain(mem.root_id, project)
        latest = next((v for v in chain if v.is_latest), chain[-1])
        versions = [
            MemoryVersion(
                id=v.id,
                version=v.version,
                kind=v.kind,
                title=v.title,
                content=v.content,
                similarity=v.similarity,
                is_latest=v.is_latest,
                ref=v.ref,
                occurred_at=v.occurred_at,
                created_at=v.created_at,
            )
            for v in chain
        ]
        return MemoryDetail(memory=mem, latest_id=latest.id, versions=versions)

    async def join_apart(self, tx: Tx, chains: Sequence[tuple[str, str]]) -> list[str]:
        """Relink memory chains, given as (project, root id), that an import left out of line: two
        machines each saved a new version of one memory, then one imported the other's export (or
        rows of copies joined differently met, or a chain's first versions were merged into another
        chain elsewhere: the rest follow them). Every version is kept, in the order they were saved
        (never before the version it followed), the last one latest; the rows that move get a new
        update time, so an export of the result replaces the stale copies. Returns the root ids."""
        repo = MemoryRepository(tx)
        now = self.now_iso()
        targets: dict[str, str] = {}
        for project, root_id in chains:
            # A chain whose first version was moved into another (consolidation merged them on the
            # other machine) follows it there.
            target, seen = root_id, {root_id}
            while (first := await repo.get_or_none(target, project)) is not None and first.root_id not in seen:
                target = first.root_id
                seen.add(target)
            if target != root_id:
                for mem_id in await repo.reroot(root_id, target, project, now):
                    tx.changed("memory", mem_id, "update")
            targets.setdefault(target, project)
        moved: list[Memory] = []
        for root_id, project in sorted(targets.items()):
            order = _in_saved_order(await repo.chain(root_id, project), root_id)
            for position, (mem, links) in enumerate(zip(order, chain_line([m.id for m in order]), strict=True)):
                before = order[position - 1] if position else None
                if before is not None and mem.parent_id != before.id:
                    links["similarity"] = round(jaccard(self._words(before), self._words(mem)), 4)
                if all(getattr(mem, name) == value for name, value in links.items()):
                    continue
                mem = mem.model_copy(update=links | {"updated_at": now})
                await repo.relink(mem)
                tx.changed("memory", mem.id, "update")
                moved.append(mem)
        await self.reindex(tx, moved)
        return sorted(targets)

    def _words(self, mem: Memory) -> set[str]:
        return set(self.deps.index.analyzer.terms(mem.text))

    async def _memory_docs(self, db: Database) -> AsyncIterator[list[DocSpec]]:
        async with db.read() as conn:
            projects = await MetaRepository(conn).projects_of("memories")
        for project in projects:
            async with db.read() as conn:
                latest = await MemoryRepository(conn).latest_in_project(project)
            for batch in self.deps.indexer.batches([memory_doc(m) for m in latest]):
                yield batch

    @staticmethod
    async def _memory_lookup(conn: Conn, project: str, ids: Sequence[str]) -> list[DocSpec]:
        return [memory_doc(m) for m in await MemoryRepository(conn).get_many(ids, project) if m.is_latest]

    async def reindex(self, tx: Tx, memories: Sequence[Memory]) -> None:
        """Bring the index in line with stored memories (latest indexed, older versions not)."""
        await self.deps.indexer.drop(tx, [m.id for m in memories if not m.is_latest])
        await self.deps.indexer.put_many(tx, [memory_doc(m) for m in memories if m.is_latest])


def chain_line(ids: Sequence[str]) -> list[dict[str, object]]:
    """How each version of a chain is linked when it is one line in the order of `ids`, as the
    tools leave it: its version number, the version it follows and the one following it, and
    whether it is the latest."""
    return [
        {
            "version": position + 1,
            "parent_id": ids[position - 1] if position else None,
            "superseded_by": ids[position + 1] if position + 1 < len(ids) else None,
            "is_latest": position + 1 == len(ids),
        }
        for position in range(len(ids))
    ]


def _in_saved_order(chain: Sequence[Memory], root_id: str) -> list[Memory]:
    """A chain's versions oldest first by when each was saved, each after the version it followed
    (clocks of two machines may disagree), the root first; a version whose parent is not in the
    chain counts as following nothing."""
    ids = {mem.id for mem in chain}
    followers: dict[str, list[Memory]] = {}
    ready: list[tuple[bool, str, str, Memory]] = []
    for mem in chain:
        if mem.parent_id in ids and mem.parent_id != mem.id:
            followers.setdefault(mem.parent_id, []).append(mem)
        else:
            heapq.heappush(ready, (mem.id != root_id, mem.created_at, mem.id, mem))
    order: list[Memory] = []
    while ready:
        mem = heapq.heappop(ready)[3]
        order.append(mem)
        for follower in followers.pop(mem.id, []):
            heapq.heappush(ready, (follower.id != root_id, follower.created_at, follower.id, follower))
    # versions whose parents follow one another in a circle (no tool makes one): last, by time
    order += sorted((m for group in followers.values() for m in group), key=lambda m: (m.created_at, m.id))
    return order


def _normal(content: str) -> str:
    """Content as compared for sameness: case and spacing aside."""
    return " ".join(content.split()).casefold()


def _same(old: Memory, new: Memory, given: set[str]) -> bool:
    """Whether saving `new` would change nothing: same content, and every field the caller gave (its kind too)."""
    if old.content != new.content:
        return False
    return all(getattr(old, name) == getattr(new, name) for name in given)
