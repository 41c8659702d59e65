"""What a tool stores an import takes back: concepts and files drawn from the content are no longer
than a caller may give, and a concept or tag that lower case or composition lengthens past its
limit is refused, naming it, rather than stored where no backup could restore it."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error
from tests.test_tools_operations import export_document, fresh_settings

CLASS = "com.example.platform.services.billing.internal.adapters.persistence.jpa.repositories.InvoiceRepositoryImpl"
DEEP = "/" + "/".join(["segment" * 25] * 7) + "/handler.py"


async def test_concepts_and_files_drawn_from_content_fit_what_an_import_takes(tmp_path: Path, clock: FakeClock) -> None:
    async with Client(build_server(fresh_settings(tmp_path, "here"), clock)) as client:
        observed = await call(
            client, "memory_observe", content=f"Fixed NullPointerException in {CLASS} by checking for null invoices."
        )
        pathed = await call(client, "memory_observe", content=f"The crash came from {DEEP} and from src/app.py.")
        document = await export_document(client)
    async with Client(build_server(fresh_settings(tmp_path, "there"), clock)) as client:
        imported = await call(client, "memory_import", document=document)

    assert (len(CLASS), len(DEEP)) == (106, 1_243)  # past the 100 and 1,000 a caller may give
    assert CLASS.casefold() not in observed["concepts"]  # longer than any concept a caller may give
    assert "nullpointerexception" in observed["concepts"]
    assert pathed["files"] == ["src/app.py"]
    assert imported["inserted"]["observations"] == 2


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("memory_save", {"content": "Notes on ligatures.", "concepts": ["ok", "\ufb03" * 40]}, "concepts.1"),
        ("memory_observe", {"content": "Street names.", "concepts": ["stra\u00dfe" * 16 + "\u00df" * 4]}, "concepts.0"),
        ("memory_lesson_save", {"content": "Use the deploy script.", "tags": ["\u0958" * 40]}, "tags.0"),
        ("memory_action_create", {"title": "Deploy", "tags": ["fine", "\u0958" * 40]}, "tags.1"),
    ],
)
async def test_a_concept_or_tag_longer_as_stored_than_its_limit_is_refused(
    client: Client, tool: str, arguments: dict[str, object], field: str
) -> None:
    text = await call_error(client, tool, **arguments)

    assert f"{field}: must be at most" in text
    assert "as stored" in text
    assert (await call(client, "memory_diagnose"))["counts"]["audit_log"] == 0  # nothing written
