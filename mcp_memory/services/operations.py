"""Operations: export / import of a versioned JSON document."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel

from mcp_memory.db import Tx
from mcp_memory.errors import ConflictError, ImportFormatError, InvalidInputError
from mcp_memory.models.records import FoldedObservation, Observation, Outcome, Session, Slot
from mcp_memory.models.results import ExportResult, ImportResult
from mcp_memory.repositories.actions import ActionRepository
from mcp_memory.repositories.archive import ArchiveRepository, RowConflict, UpsertResult
from mcp_memory.repositories.archive_tables import TABLES, TableSpec
from mcp_memory.repositories.forgotten import ForgottenRepository
from mcp_memory.repositories.meta import MetaRepository
from mcp_memory.repositories.observations import ObservationRepository
from mcp_memory.repositories.outcomes import MistakeCardRepository
from mcp_memory.repositories.sessions import SessionRepository
from mcp_memory.services.actions import reopen_ancestors
from mcp_memory.services.common import Deps, Progress, Service, no_progress
from mcp_memory.services.export_file import (
    publish,
    refuse_database_files,
    refuse_foreign_file,
    regular_target,
    temporary_beside,
)
from mcp_memory.services.export_format import (
    RowParser,
    check_document,
    header,
    read_batches,
    row_parser,
)
from mcp_memory.services.export_text import DocumentWriter
from mcp_memory.services.import_scope import ImportScope, ImportTally
from mcp_memory.services.relations import fold_chain_relations
from mcp_memory.services.slots import note_written

IMPORT_CHUNK = 1_000  # rows upserted, indexed and reported as progress at a time
EXPORT_PAGE = 1_000  # rows read and written to an export file at a time
SESSION_CHUNK = 500  # sessions an import settles at a time (their renumbered observations sit in memory)

IMPORT_ACTION = "memory_import"
_WROTE_PROJECTS = "projects"
"""The key of `Tx.extra` (the audit row's detail) naming the projects an import wrote rows of."""


def written_projects(tx: Tx) -> list[str] | None:
    """The projects a committed import wrote rows of; None for a write of any other kind."""
    projects = tx.extra.get(_WROTE_PROJECTS) if tx.action == IMPORT_ACTION else None
    return None if projects is None else list(projects)


Reindexer = Callable[[Tx, Sequence[Any]], Awaitable[None]]
"""Brings the index in line with freshly imported records of one table."""

ChainJoiner = Callable[[Tx, Sequence[tuple[str, str]]], Awaitable[list[str]]]
"""Joins memory chains, as (project, root id), that grew apart; returns their root ids."""

Forgetter = Callable[[Sequence[str], Mapping[str, str]], Awaitable[tuple[int, set[str]]]]
"""Deletes the stored records among some ids that were forgotten (a stored id -> the id a note may
know it by); returns how many records went, and which of those ids."""

Folder = Callable[[Tx, str, str, Sequence[Observation], Sequence[Observation], str], Awaitable[None]]
"""Folds a session's observations (tx, session id, project, rows, those needing a digest line, now)."""

Resummariser = Callable[[Tx, Sequence[str]], Awaitable[list[str]]]
"""Writes again the summaries of sessions (by id) that have one; returns those rewritten."""


class OperationsService(Service):
    """Export and import."""

    def __init__(
        self,
        deps: Deps,
        reindexers: dict[str, Reindexer],
        join_chains: ChainJoiner,
        forget_again: Forgetter,
        fold: Folder,
        resummarise: Resummariser,
    ) -> None:
        super().__init__(deps)
        self._reindexers = reindexers
        self._join_chains = join_chains
        self._forget_again = forget_again
        self._fold = fold
        self._resummarise = resummarise

    async def export(
        self, projects: Sequence[str] | None, path: str | None, overwrite: bool, progress: Progress = no_progress
    ) -> ExportResult:
        """The export document for some projects (or all): inline, or streamed to the file at `path`."""
        if path is None:
            async with self.db.read() as conn:
                archive = ArchiveRepository(conn)
                await self._inline_fits(archive, projects)
                tables = {spec.name: await archive.dump(spec, projects) for spec in TABLES}
                document = {**header(await MetaRepository(conn).schema_version(), projects), "tables": tables}
            return ExportResult(counts={name: len(rows) for name, rows in tables.items()}, document=document)
        target = await regular_target("path", await self._file_path("path", path))
        refuse_database_files("path", Path(target), self.db.path)
        await refuse_foreign_file("path", target)  # before the hint below, which offers to overwrite it
        if await target.exists() and not overwrite:  # refused before the work; publish checks again after
            raise InvalidInputError("path", f"{target} exists; pass overwrite=true to replace it")
        temporary: anyio.Path | None = None
        try:
            temporary = await temporary_beside(target)
            counts = await self._write_file(temporary, projects, progress)
            await publish(temporary, target, overwrite)  # atomic: a crash never leaves half an export behind
        except OSError as exc:
            raise InvalidInputError("path", f"cannot write {target}: {exc.strerror or exc}") from None
        finally:  # published, cancelled or failed part-way: no temporary file is left
            if temporary is not None:
                await _remove(temporary)
        return ExportResult(counts=counts, path=str(target))

    async def _inline_fits(self, archive: ArchiveRepository, projects: Sequence[str] | None) -> None:
        """Refuse an inline export past --export-inline-max-rows, saying how to get it instead."""
        limit = self.settings.export_inline_max_rows
        rows = sum([await archive.count(spec, projects) for spec in TABLES]) if limit else 0
        if rows > limit:
            instead = (
                "pass path to write it to a file"
                if self.settings.file_paths_allowed
                else "file paths are off on this server, so its --export-inline-max-rows decides"
            )
            raise InvalidInputError(
                "path", f"this export holds {rows:,} rows, more than the {limit:,} returned inline; {instead}"
            )

    async def _write_file(
        self, temporary: anyio.Path, projects: Sequence[str] | None, progress: Progress
    ) -> dict[str, int]:
        """Write the export document page by page (it may be far larger than memory) and sync it."""
        counts = {spec.name: 0 for spec in TABLES}
        writer = DocumentWriter()
        async with self.db.read() as conn, await anyio.open_file(temporary, "w", encoding="utf-8") as out:
            archive = ArchiveRepository(conn)
            total = sum([await archive.count(spec, projects) for spec in TABLES])
            await out.write(writer.start(header(await MetaRepository(conn).schema_version(), projects)))
            for spec in TABLES:  # in import order, so that an import reads the file straight through
                await out.write(writer.table(spec.name))
                async for rows in archive.dump_pages(spec, projects, EXPORT_PAGE):
                    await out.write(writer.rows(rows))
                    counts[spec.name] += len(rows)
                    done = sum(counts.values())
                    await progress(done, total, f"exported {done} of {total} rows ({spec.name})")
            await out.write(writer.end())
            await out.flush()
            await anyio.to_thread.run_sync(os.fsync, out.wrapped.fileno())
        return counts

    async def import_(
        self,
        document: dict[str, Any] | None,
        path: str | None,
        only_project: str | None = None,
        progress: Progress = no_progress,
        restore_forgotten: bool = False,
    ) -> ImportResult:
        """Merge an export document: new rows are added, newer rows replace older, the rest is left.

        The document comes inline (validated whole before anything is written) or from a file read
        as a stream (validated row by row; any error rolls the whole import back). With
        `only_project`, every row must belong to that project (a restricted caller's import).
        `progress` hears how far it is after each chunk of rows (a large import takes a while).
        What either copy forgot stays forgotten (the rows are written, then deleted again in the same
        transaction, as memory_forget would); with `restore_forgotten` the document's rows come back
        and neither its notes of forgotten records nor this store's for those rows are kept.
        """
        if (document is None) == (path is None):
            raise InvalidInputError("document", "give exactly one of document or path")
        scrub = self.scrubber()
        parse = row_parser(scrub, only_project, self.zone)
        tally = ImportTally(ImportScope(only_project), restore=restore_forgotten)
        try:
            if document is not None:
                await self._import_document(document, parse, progress, tally)
            else:
                assert path is not None
                await self._import_file(await self._file_path("path", path), parse, progress, tally)
        except ConflictError as exc:  # every rule is checked row by row before this; a last safety net
            raise ImportFormatError(f"document: {exc}") from None
        return ImportResult(
            inserted=tally.inserted,
            updated=tally.updated,
            unchanged=tally.unchanged,
            reindexed=tally.reindexed,
            matched_by_name=tally.scope.matched,
            joined_chains=tally.joined,
            forgotten=tally.forgotten,
            restored=tally.restored,
            folded=tally.refolded,
            projects=sorted(tally.projects),
            reopened_actions=tally.reopened,
            redacted=scrub.summary(),
        )

    async def _import_document(
        self, document: dict[str, Any], parse: RowParser, progress: Progress, tally: ImportTally
    ) -> None:
        tables = check_document(document)
        parsed = {spec.name: [parse(spec, i, r) for i, r in enumerate(tables.get(spec.name, []))] for spec in TABLES}
        total = sum(len(rows) for rows in parsed.values())
        async with self.db.transaction(IMPORT_ACTION, project=tally.scope.only_project) as tx:
            await ArchiveRepository(tx).defer_foreign_keys()
            for spec, chunk in _chunks(parsed):
                await self._store(tx, spec, chunk, tally)
                await progress(tally.rows, total, f"imported {tally.rows} of {total} rows ({spec.name})")
            await self._finish(tx, tally)

    async def _import_file(self, source: anyio.Path, parse: RowParser, progress: Progress, tally: ImportTally) -> None:
        try:
            size = (await source.stat()).st_size
            handle = await anyio.open_file(source, "rb")
        except OSError as exc:
            raise InvalidInputError("path", f"cannot read {source}: {exc.strerror or exc}") from None
        async with handle, self.db.transaction(IMPORT_ACTION, project=tally.scope.only_project) as tx:
            await ArchiveRepository(tx).defer_foreign_keys()
            async with aclosing(read_batches(handle, parse, IMPORT_CHUNK)) as batches:
                async for spec, chunk, read in batches:
                    await self._store(tx, spec, chunk, tally)
                    mib = f"{read / 2**20:.1f} of {size / 2**20:.1f} MiB"
                    await progress(min(read, size), size, f"imported {tally.rows} rows ({spec.name}), {mib} read")
            await self._finish(tx, tally)

    async def _store(self, tx: Tx, spec: TableSpec, chunk: list[BaseModel], tally: ImportTally) -> None:
        """Upsert one chunk of a table's rows, note the changes and bring the index in line."""
        if spec.names_any and tally.restore:  # the document's notes of forgotten records are not kept
            tally.rows += len(chunk)
            return
        archive = ArchiveRepository(tx)
        if spec.unique and spec.key == ("id",) and not tally.restore:
            rows = [_identity(record) for record in chunk]
            stored = await archive.owners(spec.name, [i for i, _, _ in rows])
            covered = await ForgottenRepository(tx).covering([row for row in rows if row[0] not in stored])
            tally.scope.unwritten |= covered
            tally.unwritten += len(covered)
        chunk = await tally.scope.rename(archive, spec, chunk)
        await tally.scope.check_global(archive, spec, chunk, tally.seen(spec.name))
        try:
            outcomes = await _upsert(archive, spec, chunk, tally)
        except RowConflict as exc:
            where = f"document.tables.{spec.name}[{tally.seen(spec.name) + exc.position}].{exc.columns[-1]}"
            raise ImportFormatError(
                f"{where}: another record (stored, or earlier in the document) has the same "
                f"{', '.join(exc.columns)}; give the row that record's id, or change it"
            ) from None
        await tally.scope.check(archive, spec, tally.seen(spec.name), chunk, outcomes)
        if spec.name == "observations":
            # Stored here and there, at different positions: the copies numbered the session apart
            # (one renumbered it merging the other), so it is numbered afresh as both will number it.
            kept = [(r.id, r.seq) for r, o in zip(chunk, outcomes, strict=True) if isinstance(r, Observation)
                    and not (o.inserted or o.updated)]  # fmt: skip
            apart = await ObservationRepository(tx).placed_apart(kept) if kept else set()
            tally.placed_apart |= apart
            tally.sessions |= apart
        touched = []
        for record, outcome in zip(chunk, outcomes, strict=True):
            key = ":".join(str(getattr(record, k)) for k in spec.key)
            if spec.key == ("id",) and (outcome.inserted or outcome.updated or spec.names_any):
                # what the document notes as forgotten, or may have brought back
                tally.records.append((key, str(getattr(record, "project", ""))))
                if not spec.names_any:
                    tally.written.append((key, spec.name, outcome.inserted))
            if isinstance(record, Observation | Outcome) and record.session_id is not None:
                tally.carried[record.session_id] += 1
            if isinstance(record, FoldedObservation):
                tally.folded[record.id] = outcome.inserted
                if outcome.inserted:  # a note stored here already changes nothing to settle
                    tally.sessions.add(record.session_id)
            if outcome.inserted or outcome.updated:
                touched.append(record)
                if isinstance(project := getattr(record, "project", None), str):
                    tally.projects.add(project)
                if isinstance(record, Session | Observation):
                    tally.sessions.add(record.id if isinstance(record, Session) else record.session_id)
                if isinstance(record, Slot):
                    note_written(tx, record, listing=True)
                if isinstance(record, Session):
                    tally.replaced.add(record.id)
                    if outcome.inserted:
                        tally.added.add(record.id)
                grown = record.session_id if isinstance(record, Observation | Outcome) and outcome.inserted else None
                if grown is not None and grown not in tally.added:
                    tally.grown.add(grown)
                tx.changed(spec.name, key, "import")
            tally.note_graph(record, outcome.inserted or outcome.updated)
            tally.count(spec.name, outcome)
            if spec.name == "mistake_cards" and not (outcome.inserted or outcome.updated):
                tally.kept_cards.add(key)
        reindex = self._reindexers.get(spec.name)
        if reindex is not None and touched:
            if spec.name != "sessions":  # indexed once settled, when their observations are stored too
                await reindex(tx, touched)
            tally.reindexed += len(touched)
        tally.rows += len(chunk)

    async def _finish(self, tx: Tx, tally: ImportTally) -> None:
        """After the last row: the checks across rows, memory chains that grew apart joined, and
        the sessions written to settled."""
        # The sessions as the rows put them, before their observations are settled and forgets applied
        settling = await _stamps(tx, sorted(tally.sessions))
        # An action whose row the document's replaced depends on what the document says, no more.
        written = [action_id for action_id, was_written in tally.actions.items() if was_written]
        for action_id, dep in await ArchiveRepository(tx).drop_dependencies(written, tally.dependencies):
            tx.changed("action_dependencies", f"{action_id}:{dep}", "delete")
        apart = await tally.scope.finish(ArchiveRepository(tx))
        tally.joined = await self._join_chains(tx, apart)
        # Each copy may have linked its own version to the same record: one edge per pair and type again.
        for project in sorted({project for project, _ in apart}):
            roots = sorted({root for p, root in apart if p == project})
            await fold_chain_relations(tx, project, roots, self.now_iso())
        # a card made on two machines has been seen by the outcomes of both
        cards = sorted(tally.scope.matched_ids.get("mistake_cards", ()))
        for card_id in await MistakeCardRepository(tx).count_links(cards, self.now_iso()):
            tx.changed("mistake_card", card_id, "update")
            if card_id in tally.kept_cards:  # its row was the stored one; its count changed now
                tally.kept_cards.discard(card_id)
                tally.unchanged["mistake_cards"] -= 1
                tally.updated["mistake_cards"] += 1
        await self._settle_sessions(tx, tally)
        await self._resummarise(tx, sorted(tally.grown | await self._summarised_short(tx, tally)))
        tx.extra[_WROTE_PROJECTS] = sorted(tally.projects)
        if tally.restore:
            tally.restored = await ForgottenRepository(tx).unforget(tally.records)
        else:
            gone, went = await self._forget_again([i for i, _ in tally.records], tally.scope.noted_as)
            tally.forgotten = gone + tally.unwritten
            for record_id, table, inserted in tally.written:
                if record_id in went:  # written, then forgotten again: counted as forgotten only
                    (tally.inserted if inserted else tally.updated)[table] -= 1
        # Each copy sound, merged a parent may be closed over open work the other copy added under it:
        # reopened, as the tools reopen a parent for a new open child.
        for child in await ActionRepository(tx).open_under_closed(written):
            tally.reopened += await reopen_ancestors(tx, child, self.now_iso())
        await _keep_stamps(tx, settling)

    @staticmethod
    async def _summarised_short(tx: Tx, tally: ImportTally) -> set[str]:
        """Sessions stored here before whose row the document replaced, summary included, though
        they hold observations or outcomes the document lacks (recorded here since the copies
        parted): that summary cannot tell of them, and their times may all come before it."""
        sessions = SessionRepository(tx)
        replaced = [s.id for s in await sessions.get_many(sorted(tally.replaced - tally.added)) if s.summary]
        held = await sessions.records_held(replaced)
        return {session_id for session_id in replaced if held[session_id] > tally.carried[session_id]}

    async def _settle_sessions(self, tx: Tx, tally: ImportTally) -> None:
        """Make the sessions an import wrote to agree with the observations they now hold.

        Two copies of a session that grew apart (one export imported on two machines, both then
        recording) each counted and numbered their new observations from where they parted; merged,
        the count misses some and positions collide. Counts and activity times are taken again and
        colliding sessions renumbered in time order; the index learns the new positions. Rows either
        copy folded are folded again first.
        """
        sessions, observations = SessionRepository(tx), ObservationRepository(tx)
        ordered = sorted(tally.sessions)
        for start in range(0, len(ordered), SESSION_CHUNK):
            chunk = ordered[start : start + SESSION_CHUNK]
            await self._fold_again(tx, tally, await observations.folded_but_stored(chunk))
            recounted = await sessions.recount(chunk, self.now_iso())
            renumbered = await observations.renumber_muddled(chunk, sorted(tally.placed_apart))
            for session in recounted:
                tx.changed("session", session.id, "update")
            for obs in renumbered:
                tx.changed("observation", obs.id, "update")
            # The import's own reindexers: a session's entry is dated by its latest observation
            # (stored after the session's row), and an observation's carries its position (recall
            # finds neighbours by it).
            await self._reindexers["sessions"](tx, await sessions.get_many(chunk))
            await self._reindexers["observations"](tx, renumbered)

    async def _fold_again(self, tx: Tx, tally: ImportTally, stored: Sequence[Observation]) -> None:
        """Fold the rows an import stored (or kept) of observations that either copy folded.

        A digest line stands for such a row when the copy whose session row was kept folded it: this
        store, unless the import replaced the session row with the document's. Otherwise the row gets
        a line now, so that an observation folded anywhere ends up folded everywhere, once.
        """
        by_session: dict[str, list[Observation]] = {}
        for obs in stored:
            by_session.setdefault(obs.session_id, []).append(obs)
        now = self.now_iso()
        for session_id, rows in sorted(by_session.items()):
            if session_id in tally.replaced:
                lined = [o for o in rows if o.id not in tally.folded]
            else:  # noted here before this import, or only by the document
                lined = [o for o in rows if tally.folded.get(o.id, False)]
            await self._fold(tx, session_id, rows[0].project, rows, lined, now)
            tally.refolded += len(rows)

    async def _file_path(self, field: str, path: str) -> anyio.Path:
        if not self.settings.file_paths_allowed:
            raise InvalidInputError(field, "file paths are disabled on this server; pass the document inline")
        if not path.strip():  # "" would be the current folder
            raise InvalidInputError(field, "must name a file; leave path out for an inline document")
        if "\x00" in path:
            raise InvalidInputError(field, "must not contain a NUL character")
        try:
            target = await (await anyio.Path(path).expanduser()).absolute()
            folder = await target.is_dir()
        except (OSError, RuntimeError) as exc:  # a name too long; "~who" for a user this machine lacks
            raise InvalidInputError(field, f"cannot use {path!r}: {getattr(exc, 'strerror', None) or exc}") from None
        if folder:
            raise InvalidInputError(field, f"{target} is a folder; name a file")
        return target


async def _remove(path: anyio.Path) -> None:
    with anyio.CancelScope(shield=True):
        await path.unlink(missing_ok=True)


async def _upsert(
    archive: ArchiveRepository, spec: TableSpec, chunk: Sequence[BaseModel], tally: ImportTally
) -> list[UpsertResult]:
    """Upsert a chunk's rows, leaving out (as unchanged) the dependencies of actions whose stored row
    stays: it is as new as the document's, and so are its dependencies. (Those rows share no `unique`
    columns, so a RowConflict's position is still the chunk's.)"""
    stale = [tally.stale(record, spec) for record in chunk]
    if not any(stale):
        return await archive.upsert_many(spec, chunk)
    written = iter(await archive.upsert_many(spec, [r for r, s in zip(chunk, stale, strict=True) if not s]))
    return [UpsertResult(False, False) if s else next(written) for s in stale]


async def _stamps(tx: Tx, session_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """Each session's change stamp and a hash of the rest of its row (a large import settles many:
    their rows, digests and summaries included, are not all held at once)."""
    found: dict[str, tuple[str, int]] = {}
    sessions = SessionRepository(tx)
    for start in range(0, len(session_ids), SESSION_CHUNK):
        for session in await sessions.get_many(session_ids[start : start + SESSION_CHUNK]):
            found[session.id] = (session.updated_at, hash(tuple(session.model_dump(exclude={"updated_at"}).values())))
    return found


async def _keep_stamps(tx: Tx, settling: Mapping[str, tuple[str, int]]) -> None:
    """Give back its stamp to each session the import's last steps left as its rows put it.

    Settling counts a row written only to be forgotten again, and the forget takes it off: the
    session is as it was, but stamped now by both. Stamped so, an import of the same document would
    change it every time, and two copies would pass the row back and forth at every exchange.
    """
    sessions = SessionRepository(tx)
    for session_id, (stamp, content) in (await _stamps(tx, list(settling))).items():
        stamped, held = settling[session_id]
        if stamp != stamped and content == held:
            await sessions.restamp(session_id, stamped)


def _identity(record: BaseModel) -> tuple[str, str, str]:
    """(id, project, created_at) of a row of a table whose records keep a unique name."""
    values = record.model_dump(include={"id", "project", "created_at"})
    return str(values["id"]), str(values["project"]), str(values["created_at"])


def _chunks(parsed: dict[str, list[BaseModel]]) -> Iterator[tuple[TableSpec, list[BaseModel]]]:
    """Each table's rows, IMPORT_CHUNK at a time, tables in import order."""
    for spec in TABLES:
        rows = parsed[spec.name]
        for start in range(0, len(rows), IMPORT_CHUNK):
            yield spec, rows[start : start + IMPORT_CHUNK]
