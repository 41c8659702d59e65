"""Where an export file is written: never over the database, through a temporary file of its own.

The document is written to a fresh temporary file beside the target and renamed into place, so a
crash never leaves half an export at the target, two exports to one path never write into one
file, and no file of the user's that happens to share a name is touched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread

from mcp_memory.errors import InvalidInputError

TEMPORARY_SUFFIX = ".mcp-memory-export.tmp"
_EXPORT_MARK = re.compile(rb'"format"\s*:\s*"mcp-memory-export"')
_HEAD_BYTES = 65_536
"""How much of an existing file is read for the mark of an export (its keys are written sorted, so
"format" leads; another tool's reformatting may move it, though seldom this far)."""
STALE_AFTER_S = 3600.0
"""A temporary export file this old is a killed export's leftover (an export takes minutes at most)."""
_NAME_MAX = 255  # bytes in a file name, on every common file system
_RANDOM_CHARS = 8  # of tempfile's names
_DATABASE_FILES = ("", "-wal", "-shm", "-journal", "-index")


def refuse_database_files(field: str, target: Path, db: Path) -> None:
    """Refuse a target that is the database or one of the files SQLite and the index cache keep beside it."""
    place = target.resolve()
    for suffix in _DATABASE_FILES:
        kept = db.with_name(db.name + suffix).resolve()
        same = place == kept
        with contextlib.suppress(OSError):
            same = same or os.path.samefile(target, kept)
        # the index cache is written through temporary files named after it
        if same or (suffix == "-index" and place.parent == kept.parent and place.name.startswith(kept.name)):
            raise InvalidInputError(field, f"{target} is the database's own file; name another file")


async def regular_target(field: str, target: anyio.Path) -> anyio.Path:
    """The file an export to `target` replaces: a symbolic link's own target (the link stays a link),
    and never a device, a folder or anything else but a regular file."""
    if await target.is_symlink():
        try:
            target = await target.resolve()
        except (OSError, RuntimeError) as exc:  # a loop of links
            raise InvalidInputError(field, f"cannot follow the link {target}: {exc}") from None
    if await target.exists() and not await target.is_file():
        raise InvalidInputError(field, f"{target} is not a regular file (a folder, device or socket); name a file")
    return target


async def refuse_foreign_file(field: str, target: anyio.Path) -> None:
    """Refuse to overwrite a file that holds something other than an export: `overwrite` replaces an
    earlier export (or an empty file), never a user's own file an agent happened to name."""
    try:
        async with await anyio.open_file(target, "rb") as handle:
            head = await handle.read(_HEAD_BYTES)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InvalidInputError(
            field, f"cannot read {target} to check it is an export: {exc.strerror or exc}"
        ) from None
    if head.strip() and not _EXPORT_MARK.search(head):
        raise InvalidInputError(
            field,
            f"{target} is not an mcp-memory export; overwrite replaces only an earlier export, "
            "so name another file (or move that one away first)",
        )


async def temporary_beside(target: anyio.Path) -> anyio.Path:
    """A new, empty temporary file in the target's folder, after removing leftovers of killed exports."""

    stem = _shortened(target.name)

    def make() -> str:
        for stale in Path(target.parent).glob(f".{_glob_escape(stem)}.*{TEMPORARY_SUFFIX}"):
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > STALE_AFTER_S:
                    stale.unlink()
        handle, name = tempfile.mkstemp(prefix=f".{stem}.", suffix=TEMPORARY_SUFFIX, dir=target.parent)
        os.close(handle)
        return name

    return anyio.Path(await anyio.to_thread.run_sync(make))


async def publish(temporary: anyio.Path, target: anyio.Path, overwrite: bool) -> None:
    """Move the finished temporary file to the target, atomically; without `overwrite`, never over a file."""
    if overwrite:
        await temporary.replace(target)
        return
    try:
        # A hard link fails if the target exists, however late another writer made it.
        await anyio.to_thread.run_sync(os.link, temporary, target)
    except FileExistsError:
        raise InvalidInputError("path", f"{target} exists; pass overwrite=true to replace it") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if await target.exists():  # a file system without hard links: the check is as late as it can be
            raise InvalidInputError("path", f"{target} exists; pass overwrite=true to replace it") from None
        await temporary.replace(target)
        return
    await temporary.unlink()


def _shortened(name: str) -> str:
    """As much of a target's file name as leaves its temporary file's name within NAME_MAX bytes."""
    room = _NAME_MAX - len(f"..{'x' * _RANDOM_CHARS}{TEMPORARY_SUFFIX}")
    return os.fsencode(name)[:room].decode(errors="ignore") if len(os.fsencode(name)) > room else name


def _glob_escape(name: str) -> str:
    """`name` with the characters glob treats as patterns bracketed, so it matches only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)
