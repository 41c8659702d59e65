"""Concepts extracted without an LLM hold no stop words and no word capitalised only to open a clause."""

from __future__ import annotations

from mcp import Client

from tests.conftest import call


async def test_a_capitalised_word_after_a_colon_is_no_concept(client: Client) -> None:
    await call(client, "memory_observe", type="error", content="SignatureVerificationError: No signatures found.")
    await call(client, "memory_observe", type="error", content="ConnectionError: The remote host closed it.")
    await call(client, "memory_observe", type="error", content="TimeoutError: Upstream took too long.")

    profile = await call(client, "memory_profile")

    assert sorted(c["name"] for c in profile["top_concepts"]) == [
        "connectionerror",
        "signatureverificationerror",
        "timeouterror",
    ]


async def test_names_keep_their_words_but_lose_stop_words_and_abbreviations(client: Client) -> None:
    saved = await call(
        client,
        "memory_observe",
        content="Owner: Alice Smith; we asked Bob Jones and then This broke, e.g. when we saw The Beatles #if",
    )

    assert saved["concepts"] == ["alice smith", "bob jones", "beatles"]


async def test_an_error_messages_repeated_words_are_not_its_concepts(client: Client) -> None:
    refused = await call(
        client,
        "memory_observe",
        type="error",
        content=(
            'alembic upgrade head failed: psycopg.OperationalError: connection to server at "localhost", '
            "port 5432 failed: Connection refused. Is the server running on that host?"
        ),
    )
    missing = await call(
        client,
        "memory_observe",
        type="error",
        content="pytest failed: OSError: cannot load library 'pango': cannot open shared object file: No such file.",
    )

    assert refused["concepts"] == ["psycopg.operationalerror"]
    assert missing["concepts"] == ["oserror"]  # an acronym-led class name is an identifier


async def test_a_word_said_three_times_beside_an_identifier_is_a_concept(client: Client) -> None:
    saved = await call(
        client,
        "memory_observe",
        content="The invoice_service retries invoices; invoices that fail go to a queue; invoices are audited.",
    )

    assert saved["concepts"] == ["invoice_service", "invoices"]
