"""Import files built to break a JSON decoder (nesting thousands deep, numbers of thousands of
digits) are refused with an error naming the place, like any other malformed file; nothing is written."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from mcp_memory.services.export_format import READ_CHUNK
from tests.conftest import call, call_error

DEEP = "[" * 5000 + "]" * 5000
DIGITS = sys.get_int_max_str_digits()
BIG = "1" + "0" * (DIGITS + 700)


@pytest.fixture
async def document(client: Client) -> dict[str, Any]:
    """The export document of a store holding one named session's observation and one memory."""
    await call(client, "memory_observe", content="Chose msgpack for the wire format.", session_id="conv-1")
    await call(client, "memory_save", content="The API listens on port 8080.")
    exported = (await call(client, "memory_export"))["document"]
    assert isinstance(exported, dict)
    return exported


def _fresh(tmp_path: Path) -> Settings:
    return Settings(db=tmp_path / "fresh" / "memory.db", project="test", synchronous="normal", timezone="UTC")


async def _nothing_written(client: Client) -> None:
    """Assert the store holds no rows, no audit entries and nothing indexed."""
    left = (await call(client, "memory_export", all_projects=True))["document"]
    assert all(rows == [] for rows in left["tables"].values())
    health = await call(client, "memory_diagnose")
    assert health["counts"]["audit_log"] == 0
    assert health["index_docs"] == {}


def _hostile(document: dict[str, Any], where: str, value: str) -> tuple[str, int]:
    """The document as one line of JSON with `value` written in at `where`, and the column the
    reader names: the start of the row or header value holding it (each is decoded whole)."""
    text = json.dumps(document)
    rows = '"memories": ['
    start = text.index(rows) + len(rows)
    if where == "row":  # a row of its own, before the real ones
        return text[:start] + value + ", " + text[start:], start + 1
    if where == "field":  # the version of the first memory
        at = text.index('"version": ', start) + len('"version": ')
    else:  # a header value
        at = start = text.index('"format_version": ') + len('"format_version": ')
    return text[:at] + value + text[text.index(",", at) :], start + 1


@pytest.mark.parametrize("where", ["row", "field", "header"])
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (DEEP, "the value starting here is nested too deeply"),
        (BIG, f"the value starting here holds a number of more than {DIGITS:,} digits"),
    ],
    ids=["deep", "big-number"],
)
async def test_a_file_a_decoder_cannot_take_is_named_and_nothing_is_written(
    document: dict[str, Any], tmp_path: Path, where: str, value: str, problem: str
) -> None:
    text, column = _hostile(document, where, value)
    source = tmp_path / "hostile.json"
    source.write_text(text, encoding="utf-8")
    async with Client(build_server(_fresh(tmp_path))) as fresh:
        message = await call_error(fresh, "memory_import", path=str(source))
        assert f"path: not a JSON export document: line 1 column {column}: {problem}" in message
        await _nothing_written(fresh)
        # The server is none the worse: the real document imports after it.
        source.write_text(json.dumps(document), encoding="utf-8")
        imported = await call(fresh, "memory_import", path=str(source))
        assert imported["inserted"]["memories"] == 1


@pytest.mark.parametrize(("value", "problem"), [(DEEP, "nested too deeply"), (BIG, "digits")], ids=["deep", "big"])
async def test_a_hostile_value_cut_by_the_end_of_a_read_is_named_too(
    document: dict[str, Any], tmp_path: Path, value: str, problem: str
) -> None:
    text, _ = _hostile(document, "row", value)
    # Whitespace before the value puts its start 100 characters before the first read ends.
    start = text.index(value)
    text = text[:start] + " " * (READ_CHUNK - 100 - start) + text[start:]
    assert text.index(value) == READ_CHUNK - 100
    source = tmp_path / "padded.json"
    source.write_text(text, encoding="utf-8")
    async with Client(build_server(_fresh(tmp_path))) as fresh:
        message = await call_error(fresh, "memory_import", path=str(source))
        assert f"path: not a JSON export document: line 1 column {READ_CHUNK - 99}: " in message
        assert problem in message
        await _nothing_written(fresh)


async def test_an_inline_document_with_deeply_nested_values_is_refused_by_name(
    document: dict[str, Any], tmp_path: Path
) -> None:
    nested: list[Any] = []
    for _ in range(200):  # about as deep as a client will send
        nested = [nested]
    as_row = json.loads(json.dumps(document))
    as_row["tables"]["memories"].insert(0, nested)
    as_field = json.loads(json.dumps(document))
    as_field["tables"]["memories"][0]["content"] = nested
    async with Client(build_server(_fresh(tmp_path))) as fresh:
        message = await call_error(fresh, "memory_import", document=as_row)
        assert "document.tables.memories[0]: must be an object" in message
        message = await call_error(fresh, "memory_import", document=as_field)
        assert "document.tables.memories[0].content: Input should be a valid string" in message
        await _nothing_written(fresh)


@pytest.mark.parametrize("field", ["format_version", "schema_version"])
async def test_an_inline_header_version_of_thousands_of_digits_is_refused_by_name(
    document: dict[str, Any], tmp_path: Path, field: str
) -> None:
    huge = json.loads(json.dumps(document))
    huge[field] = 10 ** (DIGITS + 700)
    async with Client(build_server(_fresh(tmp_path))) as fresh:
        message = await call_error(fresh, "memory_import", document=huge)
        assert f"document: {field} (a number of more than 19 digits) is" in message
        await _nothing_written(fresh)
