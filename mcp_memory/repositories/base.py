"""What every repository shares: its connection and the JSON-list column codec."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from pydantic_core import from_json

from mcp_memory.db import Conn, Row

T = TypeVar("T")

ID_CHUNK = 500
"""Ids bound in one statement: SQLite caps the parameters of one."""


def chunked(items: Sequence[Any], size: int = ID_CHUNK) -> Iterator[Sequence[Any]]:
    """`items` in slices of at most `size`, for statements that bind one parameter per item."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Repository:
    """A repository works on one connection: a reader snapshot or the open write transaction."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def fetch_in(self, sql: str, ids: Sequence[Any], before: Sequence[Any] = ()) -> list[Row]:
        """The rows of `sql`, where `{ids}` stands for the list `ids` (bound after the parameters
        `before`), a chunk of ids per statement."""
        rows: list[Row] = []
        for chunk in chunked(ids):
            rows += await self.conn.fetchall(sql.replace("{ids}", placeholders(len(chunk))), (*before, *chunk))
        return rows

    async def fetch_paged(self, sql: str, params: Sequence[Any], record: Callable[[Row], T]) -> list[T]:
        """Every row of `sql` made a record, a page at a time: making 100,000 records takes over a
        second, and each page's trip to the database lets other requests in between."""
        records: list[T] = []
        async for rows in self.conn.pages(sql, params):
            records += map(record, rows)
        return records

    async def delete_in(self, table: str, ids: Sequence[Any]) -> None:
        """Delete the rows of `table` whose id is among `ids`, a chunk per statement."""
        for chunk in chunked(ids):
            await self.conn.execute(f"DELETE FROM {table} WHERE id IN ({placeholders(len(chunk))})", tuple(chunk))


def dump_json(value: Any) -> str:
    """JSON text of a structured column (lists, objects)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def row_dict(row: Row, json_columns: Sequence[str] = (), bool_columns: Sequence[str] = ()) -> dict[str, Any]:
    """A row as a dict with its JSON columns and 0/1 flags decoded."""
    data = dict(zip(row.keys(), tuple(row), strict=True))
    for column in json_columns:
        text = data.get(column)
        # pydantic's JSON parser, not json.loads: the same values, three times as fast on the lists
        # of a recall's rows (a third of what reading a row costs)
        data[column] = from_json(text) if text else None
    for column in bool_columns:
        value = data.get(column)
        data[column] = None if value is None else bool(value)
    return data


def placeholders(count: int) -> str:
    """`?, ?, …` for an IN clause of `count` values."""
    return ", ".join("?" * count)
