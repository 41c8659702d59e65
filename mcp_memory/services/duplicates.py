"""Near-duplicate memories: which pairs a consolidation pass merges, worked out before it writes.

Comparing every live memory of a project with all the others takes about a minute at 100,000
memories, so consolidation plans the merges on a snapshot, outside its write transaction; inside
it, each planned pair is merged only if both memories are still live and still say what the plan
compared (`still_as_planned`), as `ChainsInPass` shows them: read once, then kept as each merge
leaves them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypeGuard

from mcp_memory.models.records import Memory, MemoryDigest
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
) -> list[Pair]:
    """The pairs to merge, taking `probes` in turn: each into the first (by id) of `others` in another
    chain whose words it shares above the supersede threshold, older into newer. A memory merged
    away (its id is added to `merged`, which may hold earlier plans' too) is compared no further."""
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
            if overlap <= SUPERSEDE_THRESHOLD:
                continue
            older, newer = sorted((memory, other), key=lambda m: (m.created_at, m.id))
            pairs.append(Pair(older, newer))
            merged.add(older.id)
            if older.id == memory.id:
                break
    return pairs


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
