"""Near-duplicate memories: which pairs a consolidation pass merges, worked out before it writes.

Comparing every live memory of a project with all the others takes about a minute at 100,000
memories, so consolidation plans the merges on a snapshot, outside its write transaction; inside
it, each planned pair is merged only if both memories are still live and still say what the plan
compared (`still_as_planned`), as `ChainsInPass` shows them: read once, then kept as each merge
leaves them.

Two memories linked `contradicts` (by memory_reflect or a caller, between any of their versions,
either way round) are never merged, however alike their words: they are a conflict to resolve, and
merged, the relation would link two versions of one memory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import NamedTuple, TypeGuard

from mcp_memory.db import Conn
from mcp_memory.models.records import Memory, MemoryDigest
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.relations import RelationRepository
from mcp_memory.search.termsets import TermSets
from mcp_memory.services.common import Breather
from mcp_memory.services.memories import SUPERSEDE_THRESHOLD

TermsOf = Callable[[MemoryDigest], tuple[frozenset[int], int]]
"""A memory's term ids, and how many of its words no other memory can hold (see TermSets.similar)."""


class Pair(NamedTuple):
    """Two live memories of different chains to merge: the older one's chain first, the newer latest."""

    older: MemoryDigest
    newer: MemoryDigest


async def duplicate_pairs(
    probes: Sequence[MemoryDigest],
    others: Mapping[str, MemoryDigest],
    every: TermSets,
    terms_of: TermsOf,
    merged: set[str],
    apart: AbstractSet[frozenset[str]] = frozenset(),
) -> list[Pair]:
    """The pairs to merge, taking `probes` in turn: each into the first (by id) of `others` in another
    chain whose words it shares above the supersede threshold, older into newer, unless the two are
    `apart` (pairs of ids known to contradict each other). A memory merged away (its id is added to
    `merged`, which may hold earlier plans' too) is compared no further."""
    pairs = []
    breathe = Breather()
    for memory in probes:
        await breathe()
        if memory.id in merged:
            continue
        terms, unknown = terms_of(memory)
        for other_id, overlap in sorted(every.similar(terms, SUPERSEDE_THRESHOLD, unknown).items()):
            other = others.get(other_id)
            if other is None or other.root_id == memory.root_id or other_id in merged:
                continue
            if overlap <= SUPERSEDE_THRESHOLD or frozenset((memory.id, other_id)) in apart:
                continue
            older, newer = sorted((memory, other), key=lambda m: (m.created_at, m.id))
            pairs.append(Pair(older, newer))
            merged.add(older.id)
            if older.id == memory.id:
                break
    return pairs


async def contradicting(conn: Conn, project: str, ids: Sequence[str]) -> set[frozenset[str]]:
    """The pairs among `ids` (memories of different chains) that a `contradicts` relation joins,
    between any versions of the two chains, either way round."""
    chains = await MemoryRepository(conn).versions_of(ids, project)
    chain_of = {version: memory_id for memory_id, versions in chains.items() for version in versions}
    found: set[frozenset[str]] = set()
    if not chain_of:
        return found
    for relation in await RelationRepository(conn).touching(project, list(chain_of), "both", ["contradicts"]):
        source, target = chain_of.get(relation.source_id), chain_of.get(relation.target_id)
        if source is not None and target is not None and source != target:
            found.add(frozenset((source, target)))
    return found


def still_as_planned(current: Memory | None, planned: MemoryDigest) -> TypeGuard[Memory]:
    """Whether a memory is, inside the transaction, still live and saying what the plan compared."""
    return current is not None and current.is_latest and current.text == planned.text


class ChainsInPass:
    """The memories a merge step works on, as the step leaves them, grouped by chain, with each
    chain's length."""

    def __init__(self, memories: list[Memory]) -> None:
        self.by_id = {m.id: m for m in memories}
        self.members: dict[str, list[str]] = defaultdict(list)
        for memory in memories:
            self.members[memory.root_id].append(memory.id)
        self.lengths: dict[str, int] = {}

    def get(self, memory_id: str) -> Memory | None:
        return self.by_id.get(memory_id)

    def contradict(self, older: Memory, newer: Memory, apart: AbstractSet[frozenset[str]]) -> bool:
        """Whether merging the two memories' chains would join two memories known to contradict each
        other (`apart`): theirs, or any this pass merged into either chain already."""
        return any(
            frozenset((first, second)) in apart
            for first in self.members[older.root_id]
            for second in self.members[newer.root_id]
        )

    def merged(self, older: Memory, newer: Memory, at: str) -> None:
        """What MemoryRepository.merge_chains did: the newer chain follows the older one's versions."""
        offset = self.lengths[older.root_id]
        for memory_id in self.members.pop(newer.root_id, []):
            moved = self.by_id[memory_id]
            update = {"root_id": older.root_id, "version": moved.version + offset, "updated_at": at}
            self.by_id[memory_id] = moved.model_copy(update=update)
            self.members[older.root_id].append(memory_id)
        self.by_id[older.id] = older.model_copy(
            update={"is_latest": False, "superseded_by": newer.root_id, "updated_at": at}
        )
        self.lengths[older.root_id] += self.lengths.pop(newer.root_id)
