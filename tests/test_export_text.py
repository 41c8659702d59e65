"""The export document's text, written and read a piece at a time, against the json module."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from mcp_memory.errors import ImportFormatError
from mcp_memory.services.export_text import (
    DocumentReader,
    DocumentSyntaxError,
    DocumentWriter,
    Header,
    Row,
    TableStart,
)

TABLES = {"actions", "memories", "observations", "sessions"}


def sample_document() -> dict[str, Any]:
    return {
        "format": "mcp-memory-export",
        "format_version": 1,
        "schema_version": 12,
        "projects": ["alpha", "béta"],
        "tables": {
            "actions": [],
            "memories": [
                {"id": "mem_1", "content": 'Line one\nline "two"\ttabbed — ünïcode ✓', "concepts": ["a", "b"]},
                {"id": "mem_2", "content": "", "concepts": [], "importance": 0.5, "nested": {"z": [1, {"y": None}]}},
            ],
            "observations": [{"id": f"obs_{i}", "facts": [f"fact {i}"] * (i % 3), "n": i} for i in range(25)],
            "sessions": [{"id": "s", "summary": None, "ended": True}],
        },
    }


def dumped_in_order(document: dict[str, Any]) -> str:
    """The document as json.dumps writes it with sorted keys, except that its tables keep their order."""
    inside_sorted = json.loads(json.dumps(document, sort_keys=True))
    inside_sorted["tables"] = {name: inside_sorted["tables"][name] for name in document["tables"]}
    return json.dumps(inside_sorted, ensure_ascii=False, indent=1)


def write_whole(document: dict[str, Any], page: int, in_order: bool = False) -> str:
    """The document through DocumentWriter, `page` rows per call, tables sorted or `in_order`."""
    writer = DocumentWriter()
    pieces = [writer.start({k: v for k, v in document.items() if k != "tables"})]
    for name in document["tables"] if in_order else sorted(document["tables"]):
        pieces.append(writer.table(name))
        rows = document["tables"][name]
        for start in range(0, len(rows), page):
            pieces.append(writer.rows(rows[start : start + page]))
    pieces.append(writer.end())
    return "".join(pieces)


def read_whole(text: str, cuts: list[int]) -> list[Header | TableStart | Row]:
    """Everything DocumentReader hands back when `text` arrives cut at `cuts`."""
    reader = DocumentReader(TABLES)
    items: list[Header | TableStart | Row] = []
    start = 0
    for cut in [*cuts, len(text)]:
        items += reader.feed(text[start:cut])
        start = cut
    return items + reader.close()


def as_document(items: list[Header | TableStart | Row], tables: set[str]) -> dict[str, Any]:
    """The document the items describe (`tables` named so that empty ones are there too)."""
    document: dict[str, Any] = {"tables": {name: [] for name in tables}}
    for item in items:
        if isinstance(item, Header):
            document[item.key] = item.value
        elif isinstance(item, TableStart):
            assert item.table in tables
        else:
            rows = document["tables"].setdefault(item.table, [])
            assert item.index == len(rows)
            rows.append(item.value)
    return document


@pytest.mark.parametrize("page", [1, 2, 1000])
def test_written_pieces_equal_the_document_dumped_whole(page: int) -> None:
    document = sample_document()

    assert write_whole(document, page) == json.dumps(document, ensure_ascii=False, indent=1, sort_keys=True)


def test_a_document_without_rows_is_written_as_json_writes_it() -> None:
    empty: dict[str, Any] = {"format": "x", "tables": {"a": [], "b": []}}
    no_tables: dict[str, Any] = {"format": "x", "tables": {}}

    assert write_whole(empty, 10) == json.dumps(empty, indent=1, sort_keys=True)
    assert write_whole(no_tables, 10) == json.dumps(no_tables, indent=1, sort_keys=True)


def test_reading_any_split_of_the_text_gives_the_document() -> None:
    document = sample_document()
    text = json.dumps(document, ensure_ascii=False, indent=1, sort_keys=True)
    compact = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    rng = random.Random(7)
    names = set(document["tables"])

    for source in (text, compact):
        assert as_document(read_whole(source, []), names) == document
        assert as_document(read_whole(source, list(range(1, len(source)))), names) == document  # a character at a time
        for _ in range(50):
            cuts = sorted(rng.sample(range(1, len(source)), rng.randint(1, 40)))
            assert as_document(read_whole(source, cuts), names) == document


def test_a_number_cut_at_the_end_of_a_piece_is_read_whole() -> None:
    items = read_whole('{"format_version": 12, "tables": {}}', [19, 20])

    assert items == [Header("format_version", 12)]


def test_the_header_may_come_after_the_tables() -> None:
    items = read_whole('{"tables": {"memories": [{"id": 1}]}, "format": "x"}', [5])

    assert items == [TableStart("memories"), Row("memories", 0, {"id": 1}), Header("format", "x")]


def test_every_table_start_is_handed_back_in_the_files_order_empty_ones_too() -> None:
    items = read_whole('{"tables": {"sessions": [], "actions": [1, 2], "memories": []}}', [14, 27, 40])

    assert items == [
        TableStart("sessions"),
        TableStart("actions"),
        Row("actions", 0, 1),
        Row("actions", 1, 2),
        TableStart("memories"),
    ]


@pytest.mark.parametrize("page", [1, 1000])
def test_tables_written_in_any_order_come_out_in_that_order(page: int) -> None:
    document = sample_document()
    document["tables"] = dict(reversed(document["tables"].items()))

    text = write_whole(document, page, in_order=True)

    assert text == dumped_in_order(document)
    assert list(json.loads(text)["tables"]) == list(document["tables"])


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"tables": {"widgets": []}}', "document.tables: unknown table 'widgets'"),
        ('{"tables": []}', "document.tables: must be an object"),
        ('{"tables": {"memories": {"id": 1}}}', "document.tables.memories: must be a list"),
        ('{"tables": {"memories": [], "memories": []}}', "document.tables.memories: appears twice"),
        ('{"format": "a", "format": "b"}', "document.format: appears twice"),
    ],
)
def test_a_wrong_shape_is_named_like_the_in_memory_import_names_it(text: str, where: str) -> None:
    with pytest.raises(ImportFormatError, match=where.replace("[", r"\[")):
        read_whole(text, [3])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "line 1 column 1: the document ends early"),
        ("[1, 2]", "line 1 column 1: the document must be a JSON object"),
        ('{"tables": {"memories": [{"id": 1}', "the document ends early"),
        ('{"tables": {"memories": [{"id": 1}, ]}}', "line 1 column 37: Expecting value"),
        ('{\n "format": "x",\n "tables": {}\n}\n\n junk', "line 6 column 2: extra text after the document"),
        ('{\n "format": "x"\n "tables": {}}', "line 3 column 2: expected ',' or '}'"),
        ("{format: 1}", "line 1 column 2: expected a member name in double quotes"),
    ],
)
def test_malformed_json_is_reported_with_its_line_and_column(text: str, message: str) -> None:
    with pytest.raises(DocumentSyntaxError) as caught:
        read_whole(text, [len(text) // 2] if text else [])

    assert message in str(caught.value)


def test_a_malformed_row_is_reported_before_the_whole_rest_is_buffered() -> None:
    reader = DocumentReader(TABLES, max_value_chars=100)
    reader.feed('{"tables": {"memories": [{"id": 1 "x": 2}, ')

    with pytest.raises(DocumentSyntaxError, match="longer than 100 characters"):
        reader.feed(", ".join(['{"id": 2}'] * 20))
