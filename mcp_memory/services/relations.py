"""Relations: typed, weighted edges between any two records, and walks over them."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.db import Conn, Tx
from mcp_memory.errors import InvalidInputError, NotFoundError
from mcp_memory.ids import kind_of, new_id, public_id
from mcp_memory.models.organising import RelatedNode, RelatedResult, RelateResult
from mcp_memory.models.records import Relation
from mcp_memory.models.results import RelationView
from mcp_memory.repositories.forgotten import ForgottenRepository
from mcp_memory.repositories.memories import MemoryRepository
from mcp_memory.repositories.relations import RecordNames, RelationRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.services.common import GLOBAL_PROJECT, Service

RELATION_TYPES = (
    "related", "supersedes", "extends", "contradicts", "depends_on", "derived_from", "part_of", "causes",
    "fixes", "mentions", "duplicates",
)  # fmt: skip
"""Suggested relation types; any lower_snake_case type is accepted."""


def relation_view(r: Relation) -> RelationView:
    """A relation as tools show it."""
    return RelationView(
        id=r.id, source_id=r.source_id, target_id=r.target_id, type=r.type, weight=r.weight, note=r.note,
        created_at=r.created_at,
    )  # fmt: skip


async def relation_views(conn: Conn, project: str, relations: Sequence[Relation]) -> list[RelationView]:
    """Relations as tools show them: between the nodes `memory_related` lists, a memory by its latest
    version's id, whichever version the edge was made on."""
    versions = MemoryNodes(MemoryRepository(conn), project)
    await versions.learn([end for r in relations for end in (r.source_id, r.target_id)])
    return [relation_view(versions.between_nodes(r)) for r in relations]


DROPPED_ENDS = "dropped relation ends"
"""The transaction's note of each relation deleted with `drop_relations` or `drop_edges`: its
(source, target) by id."""


async def drop_relations(tx: Tx, ids: Sequence[str]) -> list[str]:
    """Delete every relation touching the records `ids`, which are going away, and every edge naming
    one of those (an edge may point at an edge), all the way down; audit each one (noting its ends,
    so a pass that reports its changes can say what it linked); returns their ids."""
    return _dropped(tx, await RelationRepository(tx).delete_touching(ids))


async def drop_edges(tx: Tx, project: str, relation_ids: Sequence[str], at: str) -> list[str]:
    """Delete these relations of `project` (duplicates folded into another edge, or self-links) and
    every edge naming one of them, all the way down, audited as `drop_relations` does; returns their
    ids. Each is noted as forgotten, so an import of a copy made before does not bring it back."""
    dropped = _dropped(tx, await RelationRepository(tx).delete_with_dependents(relation_ids))
    await ForgottenRepository(tx).note("relation", project, dropped, at)
    return dropped


def _dropped(tx: Tx, dropped: dict[str, tuple[str, str]]) -> list[str]:
    for relation_id in dropped:
        tx.changed("relation", relation_id, "delete")
    tx.note(DROPPED_ENDS, dropped)
    return list(dropped)


def survivor(edges: Sequence[Relation]) -> Relation:
    """Which of several edges that are one (same ends, by memory chain, and type) stays: the last
    updated (then the greatest id), with its weight and note."""
    return max(edges, key=lambda e: (e.updated_at, e.id))


async def fold_chain_relations(tx: Tx, project: str, memory_ids: Sequence[str], at: str) -> list[str]:
    """Make the relations of these memories' chains, just joined into fewer chains, one edge per
    pair of nodes and type again: edges that now link the same two nodes with the same type fold
    into the `survivor`, and those that now link a chain to itself go (a memory is one node), each
    with the edges naming it. Returns the ids of the relations deleted (audited and noted, at `at`,
    as `drop_edges` does)."""
    versions = MemoryNodes(MemoryRepository(tx), project)
    await versions.learn(memory_ids)
    nodes = dict.fromkeys(versions.node(i) for i in memory_ids)
    touching = await RelationRepository(tx).touching(project, [i for n in nodes for i in versions.ids(n)], "both", None)
    await versions.learn([i for edge in touching for i in (edge.source_id, edge.target_id)])
    doomed: list[str] = []
    alike: dict[tuple[str, str, str], list[Relation]] = {}
    for edge in touching:
        source, target = versions.node(edge.source_id), versions.node(edge.target_id)
        if source == target:
            doomed.append(edge.id)
        else:
            alike.setdefault((source, target, edge.type), []).append(edge)
    for edges in alike.values():
        kept = survivor(edges)
        doomed += [e.id for e in edges if e is not kept]
    return await drop_edges(tx, project, sorted(doomed), at) if doomed else []


class RelationService(Service):
    """Links records and walks the links."""

    async def relate(
        self, project: str, source_id: str, target_id: str, type_: str, weight: float, note: str | None
    ) -> RelateResult:
        """Store an edge between two records of the project (or global lessons and slots)."""
        scrub = self.scrubber()
        now = self.now_iso()
        async with self.db.transaction("memory_relate", project=project) as tx:
            # compared as stored: a session named by its caller's name and by its stored id is one record
            source_id, target_id = [await _stored_id(tx, project, i) for i in (source_id, target_id)]
            if source_id == target_id:
                raise InvalidInputError("target_id", "must differ from source_id")
            names = await RecordNames(tx).describe([source_id, target_id], [project, GLOBAL_PROJECT])
            for field, record_id in (("source_id", source_id), ("target_id", target_id)):
                if record_id not in names:
                    raise NotFoundError("record", record_id, "use memory_smart_search to find ids", field=field)
            versions = MemoryNodes(MemoryRepository(tx), project)
            await versions.learn([source_id, target_id])
            if versions.node(source_id) == versions.node(target_id):
                raise InvalidInputError(
                    "target_id", "is a version of the same memory as source_id; a memory is one node"
                )
            repo = RelationRepository(tx)
            # A memory keeps its links across versions: the edge made to an older version is this edge.
            same = await repo.all_between(
                project, versions.ids(versions.node(source_id)), versions.ids(versions.node(target_id)), type_
            )
            kept = survivor(same) if same else None
            if kept is not None and len(same) > 1:  # one edge stored twice (an import of two copies): folded now
                await drop_edges(tx, project, sorted(e.id for e in same if e is not kept), self.now_iso())
            relation = Relation(
                id=new_id("relation"),
                project=project,
                source_id=source_id if kept is None else kept.source_id,
                target_id=target_id if kept is None else kept.target_id,
                type=type_,
                weight=weight,
                note=scrub.optional(note),
                created_at=now,
                updated_at=now,
            )
            created = await repo.upsert(relation)
            stored = await repo.get(relation.source_id, relation.target_id, type_, project)
            assert stored is not None
            tx.changed("relation", stored.id, "create" if created else "update")
        # the versions of both ends are known: the edge stored is between two of them
        return RelateResult(
            relation=relation_view(versions.between_nodes(stored)), created=created, redacted=scrub.summary()
        )

    async def related(
        self,
        project: str,
        start: str,
        *,
        hops: int = 1,
        types: Sequence[str] | None = None,
        direction: str = "both",
        limit: int = 20,
    ) -> RelatedResult:
        """Records reachable from `start` within `hops` edges, nearest first, then strongest.

        A memory is one node however many versions it has: edges made to any of its versions are
        its edges, and it is shown by its latest version's id. Each node is reached by its
        strongest path (highest product of weights) among the shortest ones.
        """
        scopes = [project, GLOBAL_PROJECT]
        async with self.db.read() as conn:
            start = await _stored_id(conn, project, start)
            names = RecordNames(conn)
            if start not in await names.describe([start], scopes):
                raise NotFoundError("record", start, "use memory_smart_search to find ids", field="id")
            repo = RelationRepository(conn)
            versions = MemoryNodes(MemoryRepository(conn), project)
            await versions.learn([start])
            start = versions.node(start)
            reached: dict[str, tuple[int, str, float]] = {start: (0, "", 1.0)}
            edges: dict[str, Relation] = {}
            ring = [start]
            for depth in range(1, hops + 1):
                touching = await repo.touching(project, [i for n in ring for i in versions.ids(n)], direction, types)
                await versions.learn([i for edge in touching for i in (edge.source_id, edge.target_id)])
                frontier = set(ring)
                best: dict[str, tuple[int, str, float]] = {}  # this depth's nodes by their strongest path
                for edge in touching:
                    edges[edge.id] = edge
                    source, target = versions.node(edge.source_id), versions.node(edge.target_id)
                    for here, there in _steps(source, target, direction):
                        if here not in frontier or there in reached:
                            continue
                        weight = reached[here][2] * edge.weight
                        if there not in best or weight > best[there][2]:
                            best[there] = (depth, edge.type, weight)
                reached.update(best)
                ring = list(best)
                if not ring:
                    break
            if ring:  # the last hop's nodes: their edges to each other (and back) are listed too
                for edge in await repo.touching(project, [i for n in ring for i in versions.ids(n)], direction, types):
                    edges[edge.id] = edge
                await versions.learn([i for edge in edges.values() for i in (edge.source_id, edge.target_id)])
            described = await names.describe([r for r in reached if r != start], scopes)
            # An edge as a node is titled by its ends as callers see them (not stored ids: an older
            # version, a session's scoped id)
            titled = await repo.get_many([i for i, (kind, _) in described.items() if kind == "relation"], project)
            await versions.learn([end for edge in titled for end in (edge.source_id, edge.target_id)])
            for edge in map(versions.between_nodes, titled):
                ends = f"{public_id(edge.source_id)} -> {public_id(edge.target_id)}"
                described[edge.id] = ("relation", f"{edge.type}: {ends}")
        nodes = sorted(
            (
                # a path's weight is a product: shown to 4 places (0.18, not 0.18000000000000002), ranked exact
                RelatedNode(
                    id=i, kind=kind, title=title, hops=reached[i][0], via=reached[i][1], weight=round(reached[i][2], 4)
                )
                for i, (kind, title) in described.items()
            ),
            key=lambda n: (n.hops, -reached[n.id][2], n.id),
        )[:limit]
        kept = {n.id for n in nodes} | {start}
        shown = []
        for edge in map(versions.between_nodes, edges.values()):
            if edge.source_id != edge.target_id and edge.source_id in kept and edge.target_id in kept:
                # shown between the nodes as listed (a memory's latest version), whichever version it was made on
                shown.append(relation_view(edge))
        return RelatedResult(start=start, nodes=nodes, edges=sorted(shown, key=lambda e: e.id))


class MemoryNodes:
    """Memory ids resolved to their version chains: a memory keeps its relations across versions."""

    def __init__(self, memories: MemoryRepository, project: str) -> None:
        self._memories = memories
        self._project = project
        self._latest: dict[str, str] = {}
        self._chain: dict[str, list[str]] = {}

    async def learn(self, ids: Sequence[str]) -> None:
        """Look up the chains of the memories among `ids` not seen yet."""
        unseen = list(dict.fromkeys(i for i in ids if kind_of(i) == "memory" and i not in self._latest))
        for chain in (await self._memories.versions_of(unseen, self._project)).values():
            self._chain[chain[0]] = chain
            self._latest.update((version, chain[0]) for version in chain)

    def node(self, record_id: str) -> str:
        """The node a record id stands for: a memory's latest version, any other record itself."""
        return self._latest.get(record_id, record_id)

    def between_nodes(self, relation: Relation) -> Relation:
        """The relation with each end the node it stands for (learned first)."""
        ends = {"source_id": self.node(relation.source_id), "target_id": self.node(relation.target_id)}
        return relation.model_copy(update=ends)

    def ids(self, node: str) -> list[str]:
        """Every stored id an edge of `node` may name."""
        return self._chain.get(node, [node])


def _steps(source: str, target: str, direction: str) -> list[tuple[str, str]]:
    """The (from, to) moves an edge allows in a walk of the given direction."""
    forward, backward = (source, target), (target, source)
    return {"out": [forward], "in": [backward]}.get(direction, [forward, backward])


async def _stored_id(conn: Conn, project: str, record_id: str) -> str:
    """The stored id of a record as a caller names it (a session by its caller's name may be scoped).

    A caller may name its session `ses_…` too, so an id that looks like a session's is looked up the same way.
    """
    if kind_of(record_id) in (None, "session"):
        session = await SessionRepository(conn).get_or_none(record_id, project)
        if session is not None:
            return session.id
    return record_id
