"""What every repository shares: its connection and the JSON-list column codec."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from mcp_memory.db import Conn, Row


class Repository:
    """A repository works on one connection: a reader snapshot or the open write transaction."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn


def dump_list(values: Iterable[str]) -> str:
    """JSON text of a list column."""
    return json.dumps(list(values), ensure_ascii=False)


def load_list(text: str | None) -> list[str]:
    """A list column back as a Python list."""
    return [] if not text else list(json.loads(text))


def row_dict(row: Row, list_columns: Sequence[str] = (), bool_columns: Sequence[str] = ()) -> dict[str, Any]:
    """A row as a dict with its JSON list columns and 0/1 flags decoded."""
    data = dict(zip(row.keys(), tuple(row), strict=True))
    for column in list_columns:
        data[column] = load_list(data.get(column))
    for column in bool_columns:
        data[column] = bool(data.get(column))
    return data


def placeholders(count: int) -> str:
    """`?, ?, …` for an IN clause of `count` values."""
    return ", ".join("?" * count)
