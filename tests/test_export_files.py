"""Export to and import from files through the real server: streamed, exact, and all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_memory.repositories import archive
from mcp_memory.server import build_server
from mcp_memory.services import export_format, operations
from tests.conftest import FakeClock, call, call_error
from tests.test_export_target import names
from tests.test_export_text import dumped_in_order
from tests.test_tools_loop import ScriptedModel
from tests.test_tools_operations import anyio_backend, export_document, exported, fresh_settings, populate

__all__ = ["anyio_backend", "exported"]  # module-scoped fixtures shared with the in-memory import tests

Progress = list[tuple[float, float | None, str | None]]


async def empty_after(client: Client) -> None:
    """Assert that nothing at all was written: no rows, no audit entries, nothing indexed."""
    left = await export_document(client, all_projects=True)
    health = await call(client, "memory_diagnose")
    assert all(rows == [] for rows in left["tables"].values())
    assert health["counts"]["audit_log"] == 0
    assert health["index_docs"] == {}


@pytest.mark.parametrize("walk", [False, True], ids=["sorted", "walked"])
async def test_a_file_export_is_the_inline_document_byte_for_byte(
    client: Client, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walk: bool
) -> None:
    monkeypatch.setattr(operations, "EXPORT_PAGE", 2)  # several pages per table
    if walk:  # a large project's rows come in key order from a walk of the key index, not a sort
        monkeypatch.setattr(archive, "_SORT_ROWS", 0)
    await populate(client, clock)
    await call(client, "memory_save", content='Naïve "quotes"\nand a second line — ✓', concepts=["ünïcode"])
    await call(client, "memory_save", content="Another project's note.", project="other")
    inline = await export_document(client)
    target = tmp_path / "backup.json"

    written = await call(client, "memory_export", path=str(target))

    assert target.read_text(encoding="utf-8") == dumped_in_order(inline)
    assert written["counts"] == {name: len(rows) for name, rows in inline["tables"].items()}
    assert names(tmp_path, "backup") == ["backup.json"]  # no temporary left


async def test_a_file_export_reports_progress_and_a_cancelled_one_leaves_no_file(
    client: Client, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "EXPORT_PAGE", 1)
    await populate(client, clock)
    folder = tmp_path / "backups"
    folder.mkdir()
    target = folder / "backup.json"
    seen: Progress = []

    async def record(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await client.call_tool("memory_export", {"path": str(target)}, progress_callback=record)
    target.unlink()
    with anyio.CancelScope() as scope:

        async def cancel(progress: float, total: float | None, message: str | None) -> None:
            if progress == 3:
                scope.cancel()

        await client.call_tool("memory_export", {"path": str(target)}, progress_callback=cancel)

    assert not result.is_error
    assert [(p, t) for p, t, _ in seen] == [(float(i), 8.0) for i in range(1, 9)]  # 2 sessions, 3 obs, 3 memories
    assert seen[-1][2] == "exported 8 of 8 rows (memories)"  # tables are written in import order
    assert scope.cancelled_caught
    await anyio.sleep(0.05)  # the server finishes unwinding the cancelled call
    assert [p.name async for p in anyio.Path(folder).iterdir()] == []


async def test_a_file_import_takes_tables_in_any_order_and_the_header_last(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    await populate(client, clock)
    original = await export_document(client)
    shuffled = {"tables": dict(reversed(list(original["tables"].items())))}
    shuffled.update({key: value for key, value in original.items() if key != "tables"})
    source = tmp_path / "shuffled.json"
    source.write_text(json.dumps(shuffled, separators=(",", ":")), encoding="utf-8")

    async with Client(build_server(fresh_settings(tmp_path), clock)) as fresh:
        imported = await call(fresh, "memory_import", path=str(source))
        copied = await export_document(fresh)
        recalled = await call(fresh, "memory_recall", query="msgpack wire format")
        health = await call(fresh, "memory_diagnose")
    async with Client(build_server(fresh_settings(tmp_path, "inline"), clock)) as other:
        inline = await call(other, "memory_import", document=original)

    assert imported == inline
    assert imported["inserted"] == {"sessions": 2, "observations": 3, "memories": 3}
    assert copied == original
    assert recalled["hits"][0]["snippet"].startswith("Chose msgpack")
    assert health["index_in_sync"] is True


async def test_a_file_import_reports_progress_in_bytes_read(
    exported: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "IMPORT_CHUNK", 2)
    monkeypatch.setattr(export_format, "READ_CHUNK", 512)
    source = tmp_path / "backup.json"
    source.write_text(dumped_in_order(exported), encoding="utf-8")
    size = source.stat().st_size
    seen: Progress = []

    async def record(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        result = await fresh.call_tool("memory_import", {"path": str(source)}, progress_callback=record)

    assert not result.is_error
    done = [p for p, _, _ in seen]
    assert len(seen) >= 5  # memories 3, observations 3, sessions 2: at least five chunks of two
    assert done == sorted(done)
    assert {t for _, t, _ in seen} == {size}
    assert done[-1] == size
    assert str(seen[-1][2]).startswith("imported 8 rows (memories)")


async def test_a_truncated_file_rolls_back_the_rows_it_had_already_written(
    exported: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "IMPORT_CHUNK", 2)
    monkeypatch.setattr(export_format, "READ_CHUNK", 256)
    text = dumped_in_order(exported)
    source = tmp_path / "cut.json"
    source.write_text(text[: int(len(text) * 0.9)], encoding="utf-8")
    chunks: Progress = []

    async def record(progress: float, total: float | None, message: str | None) -> None:
        chunks.append((progress, total, message))

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        result = await fresh.call_tool("memory_import", {"path": str(source)}, progress_callback=record)
        message = result.content[0].text if result.is_error else ""  # type: ignore[union-attr]
        await empty_after(fresh)

    assert result.is_error
    assert "path:" in message
    assert "ends early" in message
    assert chunks  # some rows had been stored before the end was found missing


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"format": "mcp-memory-export", "tables": {}}', "document: format_version"),
        ('{"tables": {"sessions": [{"id": "s1"}]}}', "document.tables.sessions[0]"),
        ('{"format_version": 1, "tables": {}}', "document: format must be"),
        ('{"format": "mcp-memory-export", "format_version": 1}', "document.tables: must be an object"),
        ('{"format": "mcp-memory-export", "format_version": 1, "notes": "x", "tables": {}}', "document.notes: unknown"),
        ('{"format": "mcp-memory-export", "format_version": 1, "tables": {}} []', "path: not a JSON export"),
    ],
)
async def test_a_file_that_is_not_a_whole_export_is_refused_and_nothing_is_written(
    client: Client, tmp_path: Path, content: str, expected: str
) -> None:
    source = tmp_path / "odd.json"
    source.write_text(content, encoding="utf-8")

    message = await call_error(client, "memory_import", path=str(source))

    assert expected in message
    await empty_after(client)


async def test_a_byte_order_mark_is_read_past_and_bytes_that_are_not_utf8_are_named(
    exported: dict[str, Any], tmp_path: Path
) -> None:
    with_bom = tmp_path / "bom.json"
    with_bom.write_bytes(b"\xef\xbb\xbf" + dumped_in_order(exported).encode())
    latin = tmp_path / "latin1.json"
    latin.write_bytes(b'{"format": "caf\xe9"}')

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        imported = await call(fresh, "memory_import", path=str(with_bom))
        message = await call_error(fresh, "memory_import", path=str(latin))

    assert imported["inserted"] == {"sessions": 2, "observations": 3, "memories": 3}
    assert "path: not UTF-8 text (byte 15)" in message


@pytest.mark.parametrize("at", [510, 511, 512, 513])
async def test_a_bad_byte_is_placed_exactly_across_read_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    """The decoder holds back the start of a character cut by a read; the offset still counts from the file's start."""
    monkeypatch.setattr(export_format, "READ_CHUNK", 512)
    source = tmp_path / "broken.json"
    padding = b'{"format": "' + b"x" * (at - 12)
    source.write_bytes(padding + b"\xc3(" + b'"}')  # a two-byte character whose second byte is wrong

    async with Client(build_server(fresh_settings(tmp_path))) as fresh:
        message = await call_error(fresh, "memory_import", path=str(source))

    assert f"path: not UTF-8 text (byte {at})" in message


@pytest.mark.parametrize("order", ["sorted", "reversed"])
async def test_a_file_in_any_table_order_imports_as_the_inline_document_does(
    clock: FakeClock, tmp_path: Path, order: str
) -> None:
    """Tables read before their turn wait: a session name another project holds, a slot matched by
    name and a model-written summary come out of the file as out of the inline document."""
    model = ScriptedModel("The team picked msgpack after a 3x benchmark.")
    async with Client(build_server(fresh_settings(tmp_path, "a"), clock), sampling_callback=model, mode="legacy") as a:
        await call(a, "memory_observe", content="Chose msgpack for the wire format.", session_id="conv-1")
        clock.advance(minutes=1)
        await call(a, "memory_crystallize", session_id="conv-1")
        note = await call(a, "memory_save", content="The release checklist lives in the notes slot.")
        slot = await call(a, "memory_slot_create", name="notes", content="from machine A")
        await call(a, "memory_relate", source_id=note["id"], target_id=slot["slot"]["id"], type="related")
        document = await export_document(a)
    tables = sorted(document["tables"]) if order == "sorted" else list(reversed(document["tables"]))
    source = tmp_path / "backup.json"
    source.write_text(json.dumps({**document, "tables": {t: document["tables"][t] for t in tables}}), encoding="utf-8")
    clock.advance(minutes=1)
    results, copies = {}, {}
    for via in ("file", "inline"):
        async with Client(build_server(fresh_settings(tmp_path, f"b-{via}"), clock)) as b:
            await call(b, "memory_observe", content="Another project's talk.", session_id="conv-1", project="ay")
            own = await call(b, "memory_slot_create", name="notes", content="machine B's own notes")
            arguments = {"path": str(source)} if via == "file" else {"document": document}
            results[via] = await call(b, "memory_import", **arguments)
            # The two databases gave their own slots different ids; the rows naming them must follow.
            copies[via] = json.loads(json.dumps(await export_document(b)).replace(own["slot"]["id"], "slot_own"))

    assert results["file"] == results["inline"]
    assert results["file"]["matched_by_name"] == {"slots": 1}
    assert copies["file"] == copies["inline"]
    [session] = copies["file"]["tables"]["sessions"]
    assert session["id"].startswith("conv-1#")  # ay holds the plain name
    assert (session["summary_source"], session["summary"]) == ("sampling", model.text)
