"""The export document as a file, written and read a row at a time.

A million-record export is gigabytes of JSON; holding it whole (as text, then as Python objects,
then as records) takes many times that in memory. The writer here produces, table page by table
page, exactly the text `json.dumps(document, ensure_ascii=False, indent=1, sort_keys=True)` would,
except that the tables come in the order they are written; the reader is a push parser that takes
text as it is read and hands back the header values, the start of each table and each table row
as soon as it is complete.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from mcp_memory.errors import ImportFormatError

MAX_VALUE_CHARS = 32 * 2**20  # one row (or header value) larger than this is taken to be malformed
_INDENT = 1
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()


def _dumps(value: Any, level: int) -> str:
    """`value` as json.dumps would write it nested `level` deep in the indented document."""
    text = json.dumps(value, ensure_ascii=False, indent=_INDENT, sort_keys=True)
    # Newlines inside JSON strings are escaped, so every raw newline here is layout.
    return text.replace("\n", "\n" + " " * (_INDENT * level))


class DocumentWriter:
    """Text of an export document, produced piece by piece in the order it is written.

    Call `start`, then for each table `table` followed by any number of `rows`, then `end`;
    concatenated, the pieces equal the document dumped whole with sorted keys (tables written in
    name order), or with its tables in the order written.
    """

    def __init__(self) -> None:
        self._tables = 0
        self._rows = 0

    def start(self, header: dict[str, Any]) -> str:
        """The opening brace and every top-level value but `tables` (which sorts after them all)."""
        if any(key >= "tables" for key in header):
            raise ValueError("header keys must sort before 'tables'")
        members = [f"\n{' ' * _INDENT}{json.dumps(key)}: {_dumps(header[key], 1)}," for key in sorted(header)]
        return "{" + "".join(members) + f'\n{" " * _INDENT}"tables": {{'

    def table(self, name: str) -> str:
        """Close the previous table's rows (if any) and open `name`'s."""
        text = self._close_table() + ("," if self._tables else "")
        self._tables += 1
        self._rows = 0
        return text + f"\n{' ' * (2 * _INDENT)}{json.dumps(name)}: ["

    def rows(self, rows: Iterable[dict[str, Any]]) -> str:
        """Some rows of the open table."""
        pad = "\n" + " " * (3 * _INDENT)
        pieces = []
        for row in rows:
            pieces.append(("," if self._rows else "") + pad + _dumps(row, 3))
            self._rows += 1
        return "".join(pieces)

    def end(self) -> str:
        """Close the last table, `tables` and the document."""
        return self._close_table() + (f"\n{' ' * _INDENT}}}" if self._tables else "}") + "\n}"

    def _close_table(self) -> str:
        if not self._tables:
            return ""
        return f"\n{' ' * (2 * _INDENT)}]" if self._rows else "]"


@dataclass(frozen=True, slots=True)
class Header:
    """A top-level value of the document other than its tables."""

    key: str
    value: Any


@dataclass(frozen=True, slots=True)
class TableStart:
    """The start of one table's rows (so an empty table is seen too)."""

    table: str


@dataclass(frozen=True, slots=True)
class Row:
    """One row of one table, with its position in that table's list."""

    table: str
    index: int
    value: Any


class DocumentSyntaxError(ValueError):
    """The text is not JSON (or ends early); `line` and `column` count from 1."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"line {line} column {column}: {message}")


class _At(Enum):
    START = auto()  # before the document's "{"
    TOP_FIRST = auto()  # after "{": a key or "}"
    TOP_KEY = auto()  # after ",": a key
    TOP_COLON = auto()
    TOP_VALUE = auto()
    TOP_NEXT = auto()  # after a value: "," or "}"
    TABLES_OPEN = auto()  # "tables" value: "{"
    TABLE_FIRST = auto()
    TABLE_KEY = auto()
    TABLE_COLON = auto()
    ROWS_OPEN = auto()  # a table's value: "["
    ROW_FIRST = auto()  # after "[": a row or "]"
    ROW = auto()  # after ",": a row
    ROW_NEXT = auto()  # after a row: "," or "]"
    TABLE_NEXT = auto()  # after a table's "]": "," or "}"
    END = auto()


# After a value inside an object or list: its closing character, and the state after "," or after it.
_AFTER_VALUE = {
    _At.TOP_NEXT: ("}", _At.TOP_KEY, _At.END),
    _At.TABLE_NEXT: ("}", _At.TABLE_KEY, _At.TOP_NEXT),
    _At.ROW_NEXT: ("]", _At.ROW, _At.TABLE_NEXT),
}


class _NeedMore(Exception):
    """The buffered text stops inside the next token."""


class DocumentReader:
    """Push parser for an export document: `feed` text as it arrives, then `close`.

    Each call returns the header values, table starts and rows completed by that text. Only the
    document's outer structure is parsed here (an object whose `tables` holds lists of rows); each
    row and header value is decoded whole by the json module. Structure errors name the place the way
    the in-memory import does (`document.tables.x: …`); malformed JSON raises DocumentSyntaxError.
    """

    def __init__(self, tables: Collection[str], max_value_chars: int = MAX_VALUE_CHARS) -> None:
        self._known = tables
        self._max = max_value_chars
        self._buf = ""
        self._pos = 0
        self._line = 1  # line and column of self._buf[0] in the whole text
        self._column = 1
        self._closed = False
        self._at = _At.START
        self._key = ""
        self._table = ""
        self._index = 0
        self._top_keys: set[str] = set()
        self._seen_tables: set[str] = set()

    @property
    def saw_tables(self) -> bool:
        """Whether the document had a `tables` member (so far)."""
        return "tables" in self._top_keys

    def feed(self, text: str) -> list[Header | TableStart | Row]:
        """Take more text; return what it completed."""
        self._forget_consumed()
        self._buf += text
        return list(self._parse())

    def close(self) -> list[Header | TableStart | Row]:
        """No more text: return what is left, or raise if the document is incomplete."""
        self._closed = True
        items = list(self._parse())
        if self._at is not _At.END:
            raise self._syntax("the document ends early", len(self._buf))
        return items

    def _forget_consumed(self) -> None:
        consumed = self._buf[: self._pos]
        newlines = consumed.count("\n")
        if newlines:
            self._line += newlines
            self._column = len(consumed) - consumed.rfind("\n")
        else:
            self._column += len(consumed)
        self._buf = self._buf[self._pos :]
        self._pos = 0

    def _parse(self) -> Iterator[Header | TableStart | Row]:
        try:
            while True:
                item = self._step()
                if item is not None:
                    yield item
        except _NeedMore:
            return

    def _step(self) -> Header | TableStart | Row | None:
        """Advance over one token; a completed header value or row comes back."""
        at = self._at
        char = self._next_char()
        if at is _At.START:
            self._expect(char, "{", "the document must be a JSON object")
            self._at = _At.TOP_FIRST
        elif at in (_At.TOP_FIRST, _At.TOP_KEY):
            if char == "}" and at is _At.TOP_FIRST:
                self._pos += 1
                self._at = _At.END
            else:
                self._key = self._string("a member name")
                if self._key in self._top_keys:
                    raise ImportFormatError(f"document.{self._key}: appears twice")
                self._top_keys.add(self._key)
                self._at = _At.TOP_COLON
        elif at in (_At.TOP_COLON, _At.TABLE_COLON):
            self._expect(char, ":", "expected ':'")
            self._at = _At.TOP_VALUE if at is _At.TOP_COLON else _At.ROWS_OPEN
        elif at is _At.TOP_VALUE:
            if self._key == "tables":
                if char != "{":
                    raise ImportFormatError("document.tables: must be an object of table name to rows")
                self._pos += 1
                self._at = _At.TABLE_FIRST
                return None
            value = self._value()
            self._at = _At.TOP_NEXT
            return Header(self._key, value)
        elif at in _AFTER_VALUE:
            close, after_comma, after_close = _AFTER_VALUE[at]
            if char != "," and char != close:
                raise self._syntax(f"expected ',' or '{close}'", self._pos)
            self._pos += 1
            self._at = after_comma if char == "," else after_close
        elif at in (_At.TABLE_FIRST, _At.TABLE_KEY):
            if char == "}" and at is _At.TABLE_FIRST:
                self._pos += 1
                self._at = _At.TOP_NEXT
            else:
                self._table = self._string("a table name")
                if self._table not in self._known:
                    raise ImportFormatError(f"document.tables: unknown table {self._table!r}")
                if self._table in self._seen_tables:
                    raise ImportFormatError(f"document.tables.{self._table}: appears twice")
                self._seen_tables.add(self._table)
                self._at = _At.TABLE_COLON
        elif at is _At.ROWS_OPEN:
            if char != "[":
                raise ImportFormatError(f"document.tables.{self._table}: must be a list of rows")
            self._pos += 1
            self._index = 0
            self._at = _At.ROW_FIRST
            return TableStart(self._table)
        elif at in (_At.ROW_FIRST, _At.ROW):
            if char == "]" and at is _At.ROW_FIRST:
                self._pos += 1
                self._at = _At.TABLE_NEXT
                return None
            row = Row(self._table, self._index, self._value())
            self._index += 1
            self._at = _At.ROW_NEXT
            return row
        else:  # END: only whitespace may follow
            raise self._syntax("extra text after the document", self._pos)
        return None

    def _next_char(self) -> str:
        """The next character that is not whitespace (left unconsumed)."""
        match = _WHITESPACE.match(self._buf, self._pos)
        assert match is not None  # the pattern matches the empty string
        self._pos = match.end()
        if self._pos >= len(self._buf):
            if self._closed and self._at is not _At.END:
                raise self._syntax("the document ends early", self._pos)
            raise _NeedMore
        return self._buf[self._pos]

    def _expect(self, char: str, wanted: str, message: str) -> None:
        if char != wanted:
            raise self._syntax(message, self._pos)
        self._pos += 1

    def _string(self, what: str) -> str:
        if self._buf[self._pos] != '"':
            raise self._syntax(f"expected {what} in double quotes", self._pos)
        value = self._value()
        assert isinstance(value, str)
        return value

    def _value(self) -> Any:
        """Decode the JSON value at the current position, or ask for more text."""
        try:
            value, end = _decoder.raw_decode(self._buf, self._pos)
        except RecursionError:
            # No export nests deeper than a few levels; more text would not make this one valid.
            raise self._syntax("the value starting here is nested too deeply", self._pos) from None
        except json.JSONDecodeError as exc:
            pending = len(self._buf) - self._pos
            if not self._closed and pending <= self._max:
                raise _NeedMore from None  # most likely cut off by the end of the text so far
            if not self._closed:
                raise self._syntax(f"a value longer than {self._max:,} characters, or {exc.msg}", self._pos) from None
            if exc.msg.startswith("Unterminated") or exc.pos >= len(self._buf.rstrip()):
                raise self._syntax("the document ends early, inside the value starting here", self._pos) from None
            raise self._syntax(exc.msg, exc.pos) from None
        except ValueError:
            # int() refuses a literal of more digits than sys.get_int_max_str_digits(), cut off or not.
            raise self._syntax(
                f"the value starting here holds a number of more than {sys.get_int_max_str_digits():,} digits",
                self._pos,
            ) from None
        if end >= len(self._buf) and not self._closed:
            raise _NeedMore  # a number at the very end may go on in the next piece
        self._pos = end
        return value

    def _syntax(self, message: str, pos: int) -> DocumentSyntaxError:
        before = self._buf[:pos]
        newlines = before.count("\n")
        line = self._line + newlines
        column = pos - before.rfind("\n") if newlines else self._column + pos
        return DocumentSyntaxError(message, line, column)
