"""A date a lesson's text writes out finds it: a query reads such words as a date, not as words."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.conftest import call


@pytest.mark.parametrize("query", ["2024-12-20", "December 20, 2024", "20 December"])
async def test_a_lesson_is_found_by_a_date_its_text_names(client: Client, query: str) -> None:
    lesson = await call(client, "memory_lesson_save", content="Since the 2024-12-20 outage, never deploy on Fridays.")
    await call(client, "memory_lesson_save", content="Keep the payments API behind a feature flag.")

    found = await call(client, "memory_smart_search", query=query)

    assert [hit["id"] for hit in found["hits"]] == [lesson["lesson"]["id"]]
