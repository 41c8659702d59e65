"""The index cache: the built search index saved beside the database, so a restart reads it back
instead of rebuilding it from every record's stored terms.

The database stays the only source of truth. A cache names the last audit-log row it reflects
(and that row's time, which tells this database's history from a restored or foreign one's); the
indexer loads it only when that row is still there, then applies the rows written since, exactly
as it applies other processes' writes. A cache that is missing, unreadable, of another format or
analyzer, or from another history is ignored and the index is rebuilt.

The file is a NumPy `.npz` archive (no pickles): a JSON header, the vocabulary, and per project
the documents' columns, their term blobs and their postings grouped by term. It is written to a
temporary file and renamed into place, so readers see the old file or the new one, never half.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memory.search.bm25 import PartitionState
from mcp_memory.search.docstore import Columns
from mcp_memory.search.index import IndexState
from mcp_memory.search.postings import GroupedPostings, group_postings

FORMAT = 2  # 2: the header names the time zone of the date terms
_SEP = "\x00"  # between packed strings; ids and terms never contain it (checked when writing)
_COLUMNS: dict[str, npt.DTypeLike] = {
    "lengths": np.float64,
    "kinds": np.int32,
    "subtypes": np.int32,
    "sessions": np.int32,
    "ats": np.float64,
    "seqs": np.int32,
    "weights": np.float64,
    "digests": np.int64,
}
_POSTINGS: dict[str, npt.DTypeLike] = {"terms": np.int32, "ends": np.int64, "docs": np.int32, "tfs": np.uint16}
_STALE_TEMP_S = 3600.0  # a temporary file this old was left by a writer that died


class CacheError(Exception):
    """The cache file cannot be used (missing, damaged, or not what this code writes)."""


@dataclass(frozen=True, slots=True)
class CacheHeader:
    """What a cache reflects: which analyzer made its terms and which audit-log row it is current to."""

    format: int
    analyzer: int
    timezone: str  # the zone whose days the date terms name
    seq: int  # the last audit-log row whose changes the cache reflects
    stamp: str  # that row's time ("" for none): a restored or foreign database's row differs
    vocab_mark: int  # every term id up to this one is in the cache's vocabulary, unless deleted before it was written
    docs: int


_EXAMPLE = CacheHeader(FORMAT, 0, "", 0, "", 0, 0)  # the type of each field


def cache_path(db: Path) -> Path:
    """Where the index cache of the database at `db` lives (beside its -wal and -shm files)."""
    return db.with_name(db.name + "-index")


class CacheReader:
    """An open cache file: the header first (cheap), then, if the caller wants it, the state."""

    def __init__(self, path: Path) -> None:
        try:
            archive = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise CacheError("no index cache") from None
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
            raise CacheError(f"unreadable index cache: {exc}") from exc
        if not isinstance(archive, np.lib.npyio.NpzFile):  # a lone .npy array
            raise CacheError("not an index cache")
        self._archive = archive
        try:
            raw = json.loads(self._array("header", np.uint8).tobytes())
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            if raw.get("format") != FORMAT:  # first: another format may lack this one's fields
                raise CacheError(f"index cache format {raw.get('format')}, expected {FORMAT}")
            self.header = CacheHeader(**{f.name: raw[f.name] for f in fields(CacheHeader)})
            self._names = {key: raw[key] for key in ("kinds", "subtypes", "sessions", "projects")}
            typed = all(
                type(getattr(self.header, f.name)) is type(getattr(_EXAMPLE, f.name)) for f in fields(CacheHeader)
            )
            if not typed or not all(isinstance(names, list) for names in self._names.values()):
                raise ValueError("fields of the wrong type")
        except CacheError:
            self.close()
            raise
        except (ValueError, KeyError, TypeError) as exc:
            self.close()
            raise CacheError(f"index cache header is damaged: {exc}") from exc

    def __enter__(self) -> CacheReader:
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()

    def close(self) -> None:
        self._archive.close()

    def state(self) -> IndexState:
        """Read the whole index state (blocking: seconds at a million records)."""
        try:
            terms = _unpack_strings(self._array("vocab_terms", np.uint8))
            ids = self._array("vocab_ids", np.int64)
            if len(terms) != len(ids):
                raise CacheError("index cache vocabulary is damaged")
            partitions = {project: self._partition(str(i)) for i, project in enumerate(self._names["projects"])}
            state = IndexState(
                vocab=dict(zip(terms, ids.tolist(), strict=True)),
                kinds=list(self._names["kinds"]),
                subtypes=list(self._names["subtypes"]),
                sessions=list(self._names["sessions"]),
                partitions=partitions,
            )
        except (OSError, ValueError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
            raise CacheError(f"index cache is damaged: {exc}") from exc
        if state.doc_count != self.header.docs:
            raise CacheError(f"index cache holds {state.doc_count} documents, its header says {self.header.docs}")
        return state

    def _partition(self, tag: str) -> PartitionState:
        keys = _unpack_strings(self._array(f"{tag}.keys", np.uint8))
        count = len(keys)
        blob_data = self._array(f"{tag}.blobs", np.uint8)
        blob_ends = self._array(f"{tag}.blob_ends", np.int64)
        if len(blob_ends) != count or (count and int(blob_ends[-1]) != len(blob_data)):
            raise CacheError("index cache term blobs are damaged")
        starts = [0, *blob_ends[:-1].tolist()]
        view = blob_data.data  # a slice of the buffer copies only that document's bytes
        blobs = [view[a:b].tobytes() for a, b in zip(starts, blob_ends.tolist(), strict=True)]
        del view, blob_data
        columns = Columns(
            keys=keys, blobs=blobs, **{name: self._array(f"{tag}.{name}", t) for name, t in _COLUMNS.items()}
        )
        if any(len(getattr(columns, name)) != count for name in _COLUMNS):
            raise CacheError("index cache columns are damaged")
        postings = GroupedPostings(**{name: self._array(f"{tag}.{name}", t) for name, t in _POSTINGS.items()})
        if len(postings.terms) != len(postings.ends) or len(postings.docs) != len(postings.tfs):
            raise CacheError("index cache postings are damaged")
        if len(postings.ends) and (int(postings.ends[-1]) != len(postings.docs) or np.any(np.diff(postings.ends) <= 0)):
            raise CacheError("index cache postings are damaged")
        if len(postings.docs) and (int(postings.docs.min()) < 0 or int(postings.docs.max()) >= count):
            raise CacheError("index cache postings name documents it does not hold")
        return PartitionState(columns, postings)

    def _array(self, name: str, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
        try:
            array: npt.NDArray[Any] = self._archive[name]
        except KeyError:
            raise CacheError(f"index cache lacks {name!r}") from None
        if array.dtype != np.dtype(dtype) or array.ndim != 1:
            raise CacheError(f"index cache {name!r} is {array.dtype}{list(array.shape)}, expected {np.dtype(dtype)}")
        return array


def write_cache(path: Path, header: CacheHeader, state: IndexState) -> Path:
    """Write the cache to a temporary file beside `path` and return it (blocking).

    The caller renames it into place (or deletes it) once it knows the cache may be published.
    Postings that the state leaves out (the index was written to since it was loaded) are
    grouped here, off the event loop.
    """
    arrays: dict[str, npt.NDArray[Any]] = {}
    projects = list(state.partitions)
    meta = asdict(header) | {
        "kinds": state.kinds,
        "subtypes": state.subtypes,
        "sessions": state.sessions,
        "projects": projects,
    }
    arrays["header"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    arrays["vocab_terms"] = _pack_strings(list(state.vocab))
    arrays["vocab_ids"] = np.fromiter(state.vocab.values(), dtype=np.int64, count=len(state.vocab))
    for i, project in enumerate(projects):
        saved = state.partitions[project]
        columns = saved.columns
        postings = saved.postings or group_postings(columns)
        arrays[f"{i}.keys"] = _pack_strings(columns.keys)
        arrays[f"{i}.blobs"] = np.frombuffer(b"".join(columns.blobs), dtype=np.uint8)
        sizes = np.fromiter((len(b) for b in columns.blobs), dtype=np.int64, count=len(columns.blobs))
        arrays[f"{i}.blob_ends"] = np.cumsum(sizes)
        for name, dtype in _COLUMNS.items():
            arrays[f"{i}.{name}"] = np.asarray(getattr(columns, name), dtype=dtype)
        for name, dtype in _POSTINGS.items():
            arrays[f"{i}.{name}"] = np.asarray(getattr(postings, name), dtype=dtype)
    _remove_stale_temporaries(path)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **arrays)  # type: ignore[arg-type]
            out.flush()
            os.fsync(out.fileno())  # renamed over the old cache only once its bytes are on disk
    except BaseException:
        discard(temporary)
        raise
    return temporary


def with_postings(state: IndexState) -> IndexState:
    """`state` with the postings of every partition grouped (blocking; a state taken after writes
    leaves them out)."""
    partitions = {
        project: saved if saved.postings is not None else PartitionState(saved.columns, group_postings(saved.columns))
        for project, saved in state.partitions.items()
    }
    return replace(state, partitions=partitions)


def unused_terms(state: IndexState) -> dict[str, int]:
    """The vocabulary entries that no document of `state` contains (postings grouped: with_postings)."""
    if not state.vocab:
        return {}
    used = [saved.postings.terms for saved in state.partitions.values() if saved.postings is not None]
    ids = np.fromiter(state.vocab.values(), dtype=np.int64, count=len(state.vocab))
    unused = np.flatnonzero(~np.isin(ids, np.concatenate(used) if used else np.empty(0, dtype=np.int32)))
    terms = list(state.vocab)
    return {terms[i]: int(ids[i]) for i in unused.tolist()}


def publish(temporary: Path, path: Path) -> None:
    """Put a written cache in place (atomically: readers see the old file or this one); a cache
    that cannot be put there (a folder in its place, say) is deleted, not left beside it."""
    try:
        os.replace(temporary, path)
    except BaseException:
        discard(temporary)
        raise


def discard(path: Path) -> None:
    """Delete a cache or temporary file if it exists."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _remove_stale_temporaries(path: Path) -> None:
    # a writer killed mid-write (the process exited) leaves its temporary file behind
    cutoff = time.time() - _STALE_TEMP_S
    for leftover in path.parent.glob(f"{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def _pack_strings(values: list[str]) -> npt.NDArray[np.uint8]:
    joined = _SEP.join(values)
    if joined.count(_SEP) != max(len(values) - 1, 0):
        raise CacheError("a key or term contains a NUL character; not cached")
    return np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)


def _unpack_strings(data: npt.NDArray[np.uint8]) -> list[str]:
    return data.tobytes().decode("utf-8").split(_SEP) if len(data) else []
