"""Where memory_export writes: never over the database, never into a file that is not its own."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.errors import InvalidInputError
from mcp_memory.services import operations
from mcp_memory.services.export_file import STALE_AFTER_S, TEMPORARY_SUFFIX, publish
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_operations import populate


def names(folder: Path, part: str = "") -> list[str]:
    """The names in a folder (that contain `part`), sorted."""
    return sorted(p.name for p in folder.iterdir() if part in p.name)


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-index"])
async def test_an_export_over_the_database_or_its_files_is_refused(
    client: Client, clock: FakeClock, settings: Settings, suffix: str
) -> None:
    await populate(client, clock)
    target = settings.db.with_name(settings.db.name + suffix)
    before = await call(client, "memory_export")

    message = await call_error(client, "memory_export", path=str(target), overwrite=True)
    saved = await call(client, "memory_save", content="Written after the refused export.")
    found = await call(client, "memory_get", id=saved["id"])
    after = await call(client, "memory_export")

    assert f"path: {target} is the database's own file" in message
    assert found["memory"]["content"] == "Written after the refused export."
    assert len(after["document"]["tables"]["memories"]) == len(before["document"]["tables"]["memories"]) + 1


async def test_a_file_sharing_the_targets_name_is_left_alone(client: Client, clock: FakeClock, tmp_path: Path) -> None:
    await populate(client, clock)
    folder = tmp_path / "out"
    folder.mkdir()
    notes = folder / "notes.tmp"
    notes.write_text("my own notes")

    await call(client, "memory_export", path=str(folder / "notes"))

    assert notes.read_text() == "my own notes"
    assert names(folder) == ["notes", "notes.tmp"]
    assert json.loads((folder / "notes").read_text())["format"] == "mcp-memory-export"


async def test_a_killed_exports_leftover_is_cleared_once_stale_and_a_running_ones_is_not(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    await populate(client, clock)
    folder = tmp_path / "out"
    folder.mkdir()
    stale = folder / f".backup.json.abc{TEMPORARY_SUFFIX}"
    running = folder / f".backup.json.def{TEMPORARY_SUFFIX}"
    for leftover in (stale, running):
        leftover.write_text('{"format": "mcp-memory-export", ')
    old = time.time() - STALE_AFTER_S - 60
    os.utime(stale, (old, old))

    await call(client, "memory_export", path=str(folder / "backup.json"))

    assert names(folder) == sorted(["backup.json", running.name])


async def test_two_exports_to_one_path_at_once_leave_one_whole_document(
    client: Client, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "EXPORT_PAGE", 1)  # many small writes, so the two interleave
    await populate(client, clock)
    await call(client, "memory_save", content="Only in the other project.", project="other")
    target = tmp_path / "same.json"
    results: dict[str, bool] = {}

    async def export(**arguments: object) -> None:
        result = await client.call_tool("memory_export", {"path": str(target), "overwrite": True, **arguments})
        results[str(arguments)] = result.is_error

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: export(all_projects=True))
        group.start_soon(lambda: export())

    document = json.loads(target.read_text(encoding="utf-8"))
    assert list(results.values()) == [False, False]
    assert document["format"] == "mcp-memory-export"
    assert names(tmp_path, "same") == ["same.json"]


async def test_without_overwrite_a_file_made_while_exporting_is_not_replaced(tmp_path: Path) -> None:
    temporary = anyio.Path(tmp_path / f".late.json.x{TEMPORARY_SUFFIX}")
    await temporary.write_text("the export")
    target = anyio.Path(tmp_path / "late.json")
    await target.write_text("made by someone else meanwhile")

    with pytest.raises(InvalidInputError, match="exists; pass overwrite=true"):
        await publish(temporary, target, overwrite=False)
    await publish(temporary, anyio.Path(tmp_path / "free.json"), overwrite=False)

    assert await target.read_text() == "made by someone else meanwhile"
    assert (tmp_path / "free.json").read_text() == "the export"
    assert not await temporary.exists()


async def test_an_export_through_a_link_replaces_the_linked_file_and_keeps_the_link(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    await populate(client, clock)
    backup = tmp_path / "backup-1.json"
    await call(client, "memory_export", path=str(backup))  # an earlier export, which the link names
    await call(client, "memory_save", content="Saved after the earlier export.")
    latest = tmp_path / "latest.json"
    latest.symlink_to(backup)

    await call(client, "memory_export", path=str(latest), overwrite=True)

    assert latest.is_symlink()
    memories = json.loads(backup.read_text())["tables"]["memories"]
    assert "Saved after the earlier export." in [m["content"] for m in memories]


async def test_an_export_over_something_not_a_regular_file_is_refused(client: Client, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    message = await call_error(client, "memory_export", path=str(fifo), overwrite=True)
    assert f"path: {fifo} is not a regular file" in message
    assert fifo.is_fifo()


@pytest.mark.parametrize("overwrite", [False, True])
async def test_a_file_that_is_not_an_export_is_never_overwritten(
    client: Client, clock: FakeClock, tmp_path: Path, overwrite: bool
) -> None:
    await populate(client, clock)
    notes = tmp_path / "notes.md"
    notes.write_text("# My notes\n\nThe deploy key lives in the vault.\n")

    message = await call_error(client, "memory_export", path=str(notes), overwrite=overwrite)

    assert message.endswith(
        f"path: {notes} is not an mcp-memory export; overwrite replaces only an earlier export, "
        "so name another file (or move that one away first)"
    )
    assert notes.read_text() == "# My notes\n\nThe deploy key lives in the vault.\n"


async def test_overwrite_replaces_an_earlier_export_or_an_empty_file(
    client: Client, clock: FakeClock, tmp_path: Path
) -> None:
    await populate(client, clock)
    earlier, empty = tmp_path / "backup.json", tmp_path / "empty.json"
    await call(client, "memory_export", path=str(earlier))
    empty.write_text("")
    await call(client, "memory_save", content="Saved after the first export.")

    for target in (earlier, empty):
        refused = await call_error(client, "memory_export", path=str(target))
        await call(client, "memory_export", path=str(target), overwrite=True)
        document = json.loads(target.read_text(encoding="utf-8"))

        assert refused.endswith(f"path: {target} exists; pass overwrite=true to replace it")
        contents = [m["content"] for m in document["tables"]["memories"]]
        assert "Saved after the first export." in contents
