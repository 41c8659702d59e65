"""Fix cues: what pairing an error with its fix reads of each observation's text (services/fixes.py
`Cues`), stored when the observation is recorded or imported and read by recall, through the real
server and the SQLite file it writes."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.search.analyzer import ANALYZER_VERSION, Analyzer
from mcp_memory.server import build_server
from mcp_memory.services.fixes import CUES_VERSION, Cues
from tests.conftest import FakeClock, call
from tests.test_tools_operations import export_document

SESSION = [
    ("error", "Import of billing/ledger.py fails: ImportError cannot import name LedgerRow"),
    ("note", "Coffee."),
    ("note", "Tests pass now for invoices; the ledger import still fails."),
    ("file_change", "Renamed LedgerEntry to LedgerRow in billing/ledger.py"),
]


async def _observe(client: Client) -> list[str]:
    """Observe SESSION in one session; returns the ids in order."""
    ids: list[str] = []
    session_id = None
    for kind, content in SESSION:
        found = await call(client, "memory_observe", type=kind, content=content, session_id=session_id)
        session_id = found["session_id"]
        ids.append(found["id"])
    return ids


async def _fix_of(client: Client, error_id: str) -> str | None:
    """The fix recall names on the error hit."""
    hits = (await call(client, "memory_recall", query="ImportError LedgerRow"))["hits"]
    hit = next(h for h in hits if h["id"] == error_id)
    return None if hit["fixed_by"] is None else hit["fixed_by"]["id"]


def _rows(path: Path) -> dict[str, tuple[str, str, str, list[str], str | None, list[str]]]:
    """Every observation's (type, title, content, files, fix_cues, concepts), by id."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT id, type, title, content, files, fix_cues, concepts FROM observations").fetchall()
    return {r[0]: (r[1], r[2], r[3], json.loads(r[4]), r[5], json.loads(r[6])) for r in rows}


def _set_cues(path: Path, obs_id: str, text: str | None) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE observations SET fix_cues = ? WHERE id = ?", (text, obs_id))


async def test_observe_stores_the_cues_of_each_observation_and_recall_pairs_by_them(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        ids = await _observe(client)
        paired = await _fix_of(client, ids[0])
    rows = _rows(settings.db)

    # the change naming the error's file and identifier fixes it; the note that says tests pass
    # also says the import still fails, so it fixes nothing
    assert paired == ids[3]
    analyzer = Analyzer()
    for kind, title, content, files, stored, concepts in rows.values():
        assert stored is not None
        assert Cues.load(stored) == Cues.of(analyzer, kind, title, content, concepts, files)
    told = Cues.load(rows[ids[2]][4])
    assert told is not None
    assert (told.says_fixed, told.reports_failure, told.anchors) == (True, True, frozenset())
    assert told.terms is not None
    assert {"invoic", "ledger"} <= told.terms
    assert Cues.load(rows[ids[1]][4]) == Cues(says_fixed=False, reports_failure=False, anchors=None, terms=None)
    change = Cues.load(rows[ids[3]][4])
    assert change is not None
    assert change.anchors
    assert change.terms is None

    # no cues (a row from before them), cues of other rules, a damaged value: read from the text
    for text in (None, json.dumps({"v": CUES_VERSION + 1, "s": False, "f": True}), "{not json", "[]"):
        _set_cues(settings.db, ids[3], text)
        async with Client(build_server(settings, clock)) as client:
            assert await _fix_of(client, ids[0]) == ids[3], text

    # current cues are what pairing reads: ones saying the change reports a failure unmake the pair
    doctored = Cues(says_fixed=False, reports_failure=True, anchors=frozenset({"ledgerrow"}))
    _set_cues(settings.db, ids[3], doctored.dump())
    async with Client(build_server(settings, clock)) as client:
        assert await _fix_of(client, ids[0]) is None


async def test_stored_words_are_read_only_when_the_analyzer_that_made_them_is_current(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        found = await call(client, "memory_observe", type="error", content="Sync of invoices crashed: KeyError")
        await call(client, "memory_observe", type="note", content="Coffee.")  # not right after: paired by words
        fix = await call(client, "memory_observe", type="fix", content="Invoices sync: guarded the lookup")
        hits = (await call(client, "memory_recall", query="invoices KeyError"))["hits"]
    assert next(h for h in hits if h["id"] == found["id"])["fixed_by"]["id"] == fix["id"]
    stored = _rows(settings.db)[fix["id"]][4]
    assert stored is not None
    cues = Cues.load(stored)
    assert cues is not None
    assert cues.terms == frozenset({"invoic", "sync", "guard", "lookup"})

    # words saying the fix is about something else unmake the pair
    doctored = json.loads(stored) | {"t": ["payrol"]}
    _set_cues(settings.db, fix["id"], json.dumps(doctored))
    async with Client(build_server(settings, clock)) as client:
        hits = (await call(client, "memory_recall", query="invoices KeyError"))["hits"]
    assert next(h for h in hits if h["id"] == found["id"])["fixed_by"] is None

    # the same words from another analyzer are not read: the fix's own are analysed again
    _set_cues(settings.db, fix["id"], json.dumps(doctored | {"z": ANALYZER_VERSION - 1}))
    assert Cues.load(json.dumps(doctored | {"z": ANALYZER_VERSION - 1})) == replace(cues, terms=None)
    async with Client(build_server(settings, clock)) as client:
        hits = (await call(client, "memory_recall", query="invoices KeyError"))["hits"]
    assert next(h for h in hits if h["id"] == found["id"])["fixed_by"]["id"] == fix["id"]


async def test_a_change_to_an_observations_text_drops_its_cues_and_a_new_position_keeps_them(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings, clock)) as client:
        ids = await _observe(client)
    before = _rows(settings.db)

    with sqlite3.connect(settings.db) as conn:
        conn.execute("UPDATE observations SET seq = seq + 10 WHERE id = ?", (ids[1],))
        for column, value in [("content", "Coffee with the ledger team."), ("title", "Tea."), ("type", "error")]:
            conn.execute(f"UPDATE observations SET {column} = ? WHERE id = ?", (value, ids[0]))
            dropped = conn.execute("SELECT fix_cues FROM observations WHERE id = ?", (ids[0],)).fetchone()[0]
            assert dropped is None, column
            conn.execute("UPDATE observations SET fix_cues = ? WHERE id = ?", (before[ids[0]][4], ids[0]))
        # cues written with the change are the change's own
        conn.execute("UPDATE observations SET content = 'x', fix_cues = '{}' WHERE id = ?", (ids[2],))
    after = _rows(settings.db)

    assert after[ids[1]][4] == before[ids[1]][4]
    assert after[ids[2]][4] == "{}"
    assert after[ids[3]][4] == before[ids[3]][4]


async def test_an_import_stores_the_cues_of_the_observations_it_brings(tmp_path: Path, clock: FakeClock) -> None:
    source = Settings(db=tmp_path / "a.db", project="test", synchronous="normal", timezone="UTC")
    target = Settings(db=tmp_path / "b.db", project="test", synchronous="normal", timezone="UTC")
    async with Client(build_server(source, clock)) as client:
        ids = await _observe(client)
        document = await export_document(client)
    async with Client(build_server(target, clock)) as client:
        await call(client, "memory_import", document=document)
        paired = await _fix_of(client, ids[0])

    assert "fix_cues" not in document["tables"]["observations"][0]  # worked out, never exported
    imported = {i: row[4] for i, row in _rows(target.db).items()}
    assert imported == {i: row[4] for i, row in _rows(source.db).items()}
    assert all(text is not None for text in imported.values())
    assert paired == ids[3]


def test_the_cues_of_known_texts_are_those_their_version_stored() -> None:
    """When this fails, what `Cues.of` finds has changed: bump CUES_VERSION (the analyzer's version
    when only the words changed with it), so cues stored by the rules before are worked out again,
    and write down what it finds now."""
    assert CUES_VERSION == 1
    analyzer = Analyzer()
    found = [Cues.of(analyzer, kind, content, content, [], []) for kind, content in SESSION]
    named = {"billing/ledger.py", "ledger.py", "importerror", "ledgerrow"}
    assert found == [
        Cues(False, True, frozenset(named), frozenset(named | {"bill", "ledger", "py", "import", "name", "row"})),
        Cues(False, False, None, None),
        Cues(True, True, frozenset(), frozenset({"test", "pass", "now", "invoic", "ledger", "import", "still"})),
        Cues(False, False, frozenset({"billing/ledger.py", "ledger.py", "ledgerentry", "ledgerrow"}), None),
    ]
    retry = Cues.of(analyzer, "note", "Retry", "Works again after a retry", ["retries"], [])
    assert retry == Cues(True, False, frozenset(), frozenset({"retri"}))
    assert Cues.of(analyzer, "tool_use", "ls", "ls src/", [], ["src/app.py"]) == Cues(False, False, None, None)
