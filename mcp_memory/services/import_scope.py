"""Checks an import across its rows: each stays inside its projects and the whole stays well formed.

No row replaces, or points at, another project's record; the one exception is a session name (a
caller's conversation key): one that another project holds is stored scoped to the imported row's
project, as memory_observe would store it. Every record a row names is in the document or stored,
and no action becomes its own ancestor or waits for itself, as the tools guarantee. A memory chain
the import leaves out of line (two latest versions: it grew apart on two machines, each saving a
version of its own; or rows of copies that were joined differently) is handed back to be relinked,
unless the document itself marks two versions of it latest (refused).
ImportTally counts what an import did, table by table, with its scope.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal

from pydantic import BaseModel

from mcp_memory.errors import ImportFormatError
from mcp_memory.ids import SCOPE_MARK, public_id, scoped_session_id
from mcp_memory.models.records import Action, ActionDependency, Memory, Session
from mcp_memory.repositories.archive import ArchiveRepository, ChainLink, UpsertResult
from mcp_memory.repositories.archive_tables import TableSpec
from mcp_memory.repositories.relations import table_of
from mcp_memory.services.common import GLOBAL_PROJECT
from mcp_memory.services.memories import chain_line

_id = attrgetter("id")  # of a row of a table keyed by id

# Records of these tables may be global ("*"), and a record of any project may point at them.
_GLOBAL_TARGETS = {"lessons", "slots", "forgotten"}


@dataclass(frozen=True, slots=True)
class _Claim:
    """One imported row's references, checked once the records they name are stored."""

    where: str
    project: str | None  # None: the row has no project of its own; its first reference's owner is it
    refs: tuple[tuple[str, str, str], ...]  # (column, table, id)


@dataclass(frozen=True, slots=True)
class _Suspect:
    """An imported row that left a chain or an action graph malformed, unless a later row mends it."""

    where: str
    shape: Literal["chain", "parent", "dependency", "waits"]
    key: str  # the memory chain's root id, or the action's id
    project: str = ""  # the chain's


class ImportScope:
    """Checks each upserted chunk of an import; call `finish` after the last one."""

    def __init__(self, only_project: str | None) -> None:
        self.only_project = only_project
        self._pending: list[_Claim] = []  # rows naming records not stored yet (later in the document)
        self._suspects: list[_Suspect] = []  # rows whose shape problem a later row might still mend
        self._renamed: dict[tuple[str, str], str] = {}  # (project, session name) -> the id it is stored under
        self._latest_rows: Counter[str] = Counter()  # memory chain root id -> rows of the document marked latest
        self._aliases: dict[str, str] = {}  # id of an imported record matched by name -> the stored record's id
        self.matched_ids: dict[str, set[str]] = {}  # table -> ids of the stored records rows were matched to
        self._left: dict[str, str] = {}  # id of an imported memory -> the chain (root id) it was stored in before
        self.noted_as: dict[str, str] = {}  # scoped id a session is stored under -> the name it came with
        # Rows of records a note says were forgotten, of tables whose records keep a unique name (a slot,
        # a lesson, a mistake card): never written (a record made since may hold the name) nor taken
        # as the record that holds it now; rows naming them are left out too. Counted as forgotten.
        self.unwritten: set[str] = set()

    async def rename(self, repo: ArchiveRepository, spec: TableSpec, records: list[BaseModel]) -> list[BaseModel]:
        """The chunk with each session named like another project's stored under its scoped id; each
        record with a name a stored record of another id holds (a slot, a lesson, a mistake card, a
        relation made on two machines alike) taken as that record; and rows naming either pointed at
        the id it is stored under (a table comes after those its rows name, in an export)."""
        if spec.name == "sessions":
            sessions = [r for r in records if isinstance(r, Session)]
            ids = [r.id for r in sessions]
            scoped = [scoped_session_id(r.id, r.project) for r in sessions if SCOPE_MARK not in r.id]
            owners = await repo.owners(
                "sessions", ids + sorted({public_id(i) for i in ids if SCOPE_MARK in i}) + scoped
            )
            return [self._scope(r, owners) if isinstance(r, Session) else r for r in records]
        if self._renamed:
            columns = [column for column, table in spec.refs if table in ("sessions", None)]
            records = [self._point(record, columns) for record in records]
        if self._aliases and spec.refs:
            records = [self._follow(record, [column for column, _ in spec.refs]) for record in records]
        if spec.unique and spec.key == ("id",):
            records = await self._match(repo, spec, records)
        if spec.name == "memories":  # a row moving to another chain leaves the rest of its old one behind
            roots = await repo.memory_roots([r.id for r in records if isinstance(r, Memory)])
            self._left.update(
                (r.id, roots[r.id])
                for r in records
                if isinstance(r, Memory) and roots.get(r.id, r.root_id) != r.root_id
            )
        return records

    async def _match(self, repo: ArchiveRepository, spec: TableSpec, records: list[BaseModel]) -> list[BaseModel]:
        """The chunk with each new record whose name a stored record holds under another id taken as it:
        the row then replaces the stored one if newer, as any row with that id would."""
        stored = await repo.owners(spec.name, [_id(r) for r in records])
        twins = await repo.twins(spec, [r for r in records if _id(r) not in stored and _id(r) not in self.unwritten])
        if not twins:
            return records
        self._aliases.update(twins)
        self.matched_ids.setdefault(spec.name, set()).update(twins.values())
        return [r.model_copy(update={"id": twins[_id(r)]}) if _id(r) in twins else r for r in records]

    @property
    def matched(self) -> dict[str, int]:
        """Table -> stored records that imported rows were taken as, by name."""
        return {table: len(ids) for table, ids in self.matched_ids.items()}

    def _follow(self, record: BaseModel, columns: list[str]) -> BaseModel:
        """One row with its references to records matched by name pointed at the stored ones."""
        update = {
            column: self._aliases[value] for column in columns if (value := getattr(record, column)) in self._aliases
        }
        return record.model_copy(update=update) if update else record

    def _scope(self, session: Session, owners: dict[str, str]) -> Session:
        """A session row, under its scoped id when another project holds its name (or held it when an
        earlier import kept this one apart); under its name when it was scoped on the copy it comes
        from but here its own project holds the name (one conversation, stored under its name on one
        machine and scoped on another, stays one)."""
        if SCOPE_MARK in session.id:
            name = public_id(session.id)
            if owners.get(name) == session.project and session.id not in owners:
                self._renamed[(session.project, session.id)] = name
                return session.model_copy(update={"id": name})
            return session
        scoped = scoped_session_id(session.id, session.project)
        # kept apart here by an earlier import, its name since freed (that project's session forgotten)
        kept_apart = session.id not in owners and owners.get(scoped) == session.project
        if owners.get(session.id, session.project) == session.project and not kept_apart:
            return session
        self._renamed[(session.project, session.id)] = scoped
        self.noted_as[scoped] = session.id  # a note of its forget here knows it by its name
        return session.model_copy(update={"id": scoped})

    def _point(self, record: BaseModel, columns: list[str]) -> BaseModel:
        """One row with its references to renamed sessions changed."""
        project = getattr(record, "project", None)
        if project is None:
            return record
        update = {
            column: self._renamed[(project, value)]
            for column in columns
            if (project, value := getattr(record, column)) in self._renamed
        }
        return record.model_copy(update=update) if update else record

    def left_out(self, record: BaseModel, spec: TableSpec) -> bool:
        """Whether a row is of a record in `unwritten`, or names one."""
        return getattr(record, "id", None) in self.unwritten or any(
            getattr(record, column) in self.unwritten for column, _ in spec.refs
        )

    async def check_global(
        self, archive: ArchiveRepository, spec: TableSpec, chunk: Sequence[BaseModel], first: int
    ) -> None:
        """Refuse a restricted import's global lesson or slot unless it is stored already, as it is or
        newer; `first` is the chunk's first row's position.

        A project's export carries the global records its relations name, so the project's own
        backup imports back; but only an unrestricted caller may add or change what every project shares.
        """
        only = self.only_project
        if only is None or spec.name not in _GLOBAL_TARGETS:
            return
        shared = [(i, record) for i, record in enumerate(chunk) if getattr(record, "project", None) == GLOBAL_PROJECT]
        alike = await archive.stored_alike(spec, [record for _, record in shared])
        for (index, _), stored in zip(shared, alike, strict=True):
            if not stored:
                raise ImportFormatError(
                    f"document.tables.{spec.name}[{first + index}].project: this connection may "
                    f"only import into {only!r}; a global record is admitted only when it is stored already "
                    "as it is (or newer); leave it out, or ask for an import by an unrestricted connection"
                )

    async def check(
        self,
        repo: ArchiveRepository,
        spec: TableSpec,
        first: int,
        records: Sequence[BaseModel],
        results: Sequence[UpsertResult],
    ) -> None:
        """Refuse the chunk if a row named another project's record; `first` is its first row's position."""
        claims = []
        for index, (record, result) in enumerate(zip(records, results, strict=True), start=first):
            where = f"document.tables.{spec.name}[{index}]"
            if isinstance(record, Memory) and record.is_latest:
                self._latest_rows[record.root_id] += 1
            if result.foreign:
                raise ImportFormatError(f"{where}.id: already names a record of another project; give the row a new id")
            unchanged = not (result.inserted or result.updated)
            if self.unwritten and self.left_out(record, spec):
                continue  # never written: it names nothing stored
            if not spec.refs or (unchanged and hasattr(record, "project")):
                continue  # an unchanged row of a project's own is the stored row, checked when it was written
            refs = tuple(
                (column, table or table_of(value), value)
                for column, table in spec.refs
                if isinstance(value := getattr(record, column), str)
            )
            claims.append(_Claim(where, getattr(record, "project", None) or self.only_project, refs))
        self._pending.extend(await self._settle(repo, claims, final=False))
        changed = [
            (f"document.tables.{spec.name}[{index}]", record)
            for index, (record, result) in enumerate(zip(records, results, strict=True), start=first)
            if result.inserted or result.updated
        ]
        suspects = _suspects(changed)
        suspects += [
            _Suspect(where, "chain", self._left[record.id], record.project)
            for where, record in changed
            if isinstance(record, Memory) and record.id in self._left
        ]
        self._suspects.extend(await self._misshapen(repo, suspects))

    async def finish(self, repo: ArchiveRepository) -> list[tuple[str, str]]:
        """Check the rows that named records stored later in the import, and the shapes left by the
        whole; returns the memory chains left out of line, as (project, root id), to be relinked."""
        pending, self._pending = self._pending, []
        await self._settle(repo, pending, final=True)
        suspects, self._suspects = self._suspects, []
        apart: dict[str, str] = {}
        for suspect in await self._misshapen(repo, suspects):
            if suspect.shape == "chain" and self._latest_rows[suspect.key] <= 1:
                apart.setdefault(suspect.key, suspect.project)
                continue
            raise ImportFormatError(f"{suspect.where}.{_PROBLEMS[suspect.shape].format(key=suspect.key)}")
        return sorted((project, root_id) for root_id, project in apart.items())

    @staticmethod
    async def _misshapen(repo: ArchiveRepository, suspects: list[_Suspect]) -> list[_Suspect]:
        """Those of the suspects whose chain or actions are malformed as things are stored now."""
        chains = await repo.chain_links([s.key for s in suspects if s.shape == "chain"])
        # What an action waits for, as the tools see it: its dependencies and its children. A cycle
        # may mix the two (each copy's graph sound, merged none could finish); a loop of parents
        # alone is one too, said as such.
        waits = await repo.in_cycles("waits", [s.key for s in suspects if s.shape != "chain"])
        parents = await repo.in_cycles("parent", [s.key for s in suspects if s.shape == "parent" and s.key in waits])
        found = []
        for s in suspects:
            if s.shape == "chain":
                if not _in_line(s.key, chains.get(s.key, [])):
                    found.append(s)
            elif s.key in waits:
                found.append(s if s.shape != "parent" or s.key in parents else dataclasses.replace(s, shape="waits"))
        return found

    async def _settle(self, repo: ArchiveRepository, claims: list[_Claim], final: bool) -> list[_Claim]:
        """Check every claim against the owners of what it names; returns those still waiting for a record."""
        wanted: dict[str, list[str]] = {}
        for claim in claims:
            for _, table, record_id in claim.refs:
                wanted.setdefault(table, []).append(record_id)
        owners = {table: await repo.owners(table, ids) for table, ids in wanted.items()}
        waiting = []
        for claim in claims:
            found = [(column, table, owners[table].get(record_id)) for column, table, record_id in claim.refs]
            if not final and any(owner is None for *_, owner in found):
                waiting.append(claim)
                continue
            for (column, _, owner), (*_, record_id) in zip(found, claim.refs, strict=True):
                if owner is None:
                    raise ImportFormatError(
                        f"{claim.where}.{column}: names {record_id!r}, which is neither in the document nor stored"
                    )
            project = claim.project or found[0][2]
            assert project is not None  # every reference was found
            for column, table, owner in found:
                if (
                    owner is not None
                    and owner != project
                    and not (owner == GLOBAL_PROJECT and table in _GLOBAL_TARGETS)
                ):
                    raise ImportFormatError(f"{claim.where}.{column}: names a record of another project")
        return waiting


_PROBLEMS = {
    "chain": "is_latest: the document marks more than one version of memory chain {key} latest; a chain has one",
    "parent": "parent_id: would make action {key} its own ancestor",
    "dependency": "depends_on: would make a dependency cycle through action {key}",
    "waits": "parent_id: would make action {key} wait for itself through its children and dependencies",
}


def _in_line(root_id: str, links: Sequence[ChainLink]) -> bool:
    """Whether a memory chain is one line from its root, as the tools leave it (`links` by version)."""
    stored = [{name: value for name, value in link._asdict().items() if name != "id"} for link in links]
    return bool(links) and links[0].id == root_id and stored == chain_line([link.id for link in links])


def _suspects(rows: Sequence[tuple[str, BaseModel]]) -> list[_Suspect]:
    """The written rows that could have broken a chain or an action graph, with what to check."""
    found = []
    for where, record in rows:
        if isinstance(record, Memory):
            found.append(_Suspect(where, "chain", record.root_id, record.project))
        elif isinstance(record, Action) and record.parent_id is not None:
            found.append(_Suspect(where, "parent", record.id))
        elif isinstance(record, ActionDependency):
            found.append(_Suspect(where, "dependency", record.action_id))
    return found


@dataclass
class ImportTally:
    """What an import has done so far, by table, and the check that keeps it inside its projects."""

    scope: ImportScope
    inserted: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)
    reindexed: int = 0
    rows: int = 0
    sessions: set[str] = field(default_factory=set)
    """Sessions whose row or observations the import wrote (their counts and positions are settled last)."""
    replaced: set[str] = field(default_factory=set)
    """Sessions whose row the document's replaced (or added): their digests are the document's."""
    added: set[str] = field(default_factory=set)
    """Sessions whose row the import added (new here)."""
    grown: set[str] = field(default_factory=set)
    """Sessions stored before the import that it added observations or outcomes to: their summaries
    are rewritten, as those records were made before the summary and its currency cannot show them."""
    kept_cards: set[str] = field(default_factory=set)
    """Mistake cards whose stored row the document's did not replace (their counts may still change)."""
    folded: dict[str, bool] = field(default_factory=dict)
    """The document's notes of folded observations: id -> whether the note is new here."""
    joined: list[str] = field(default_factory=list)
    """Root ids of the memory chains that had grown apart, joined at the end."""
    restore: bool = False
    """Whether forgotten records the document holds come back (else what either copy forgot stays so)."""
    records: list[tuple[str, str]] = field(default_factory=list)
    """(id, project) of the records the import wrote, and of those its notes say were forgotten."""
    written: list[tuple[str, str, bool]] = field(default_factory=list)
    """(id, table, whether inserted) of the records the import wrote, new here or replacing the stored row."""
    forgotten: int = 0
    unwritten: int = 0
    """Rows left out as records a note says were forgotten (see `ImportScope.unwritten`)."""
    restored: int = 0
    refolded: int = 0
    projects: set[str] = field(default_factory=set)
    """Projects the import wrote records of."""
    actions: dict[str, bool] = field(default_factory=dict)
    """The document's actions: id -> whether its row was written (new here, or newer than the stored one)."""
    dependencies: set[tuple[str, str]] = field(default_factory=set)
    """The document's dependencies, as (action id, what it depends on), of the actions whose row it wrote."""
    placed_apart: set[str] = field(default_factory=set)
    """Sessions whose observations the document and this copy number differently (see `_store`)."""
    carried: Counter[str] = field(default_factory=Counter)
    """Observation and outcome rows the document holds, by session (a session row it replaced has
    a summary of those at most)."""
    reopened: list[str] = field(default_factory=list)
    """Actions reopened at the end: closed, merged, over open work (see `reopen_ancestors`)."""

    def note_graph(self, record: BaseModel, written: bool) -> None:
        """Note an imported action row, or a dependency of an action whose row was written.

        Every change to an action's dependencies stamps the action, so its dependencies are those
        of its row kept: the stored ones when the stored row stays (see `stale`), else the
        document's (the import drops the others at the end).
        """
        if isinstance(record, Action):
            self.actions[record.id] = self.actions.get(record.id, False) or written
        elif isinstance(record, ActionDependency) and self.actions.get(record.action_id):
            self.dependencies.add((record.action_id, record.depends_on))

    def stale(self, record: BaseModel, spec: TableSpec) -> bool:
        """Whether a row is left out: a dependency of an action whose stored row the document's did not
        replace (the stored one is as new or newer, and so are its dependencies), or a forgotten record
        that keeps a name (see `ImportScope.unwritten`), or a row naming one."""
        if isinstance(record, ActionDependency) and self.actions.get(record.action_id) is False:
            return True
        return bool(self.scope.unwritten) and self.scope.left_out(record, spec)

    def seen(self, table: str) -> int:
        """Rows of `table` stored so far (the position of its next row in the document)."""
        return self.inserted.get(table, 0) + self.updated.get(table, 0) + self.unchanged.get(table, 0)

    def count(self, table: str, outcome: UpsertResult) -> None:
        self.inserted[table] = self.inserted.get(table, 0) + outcome.inserted
        self.updated[table] = self.updated.get(table, 0) + outcome.updated
        self.unchanged[table] = self.unchanged.get(table, 0) + (not outcome.inserted and not outcome.updated)
