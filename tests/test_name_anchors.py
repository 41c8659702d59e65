"""Names checked by pattern are checked whole: a final newline is not part of a session id."""

from __future__ import annotations

from mcp import Client

from tests.conftest import call, call_error


async def test_a_session_id_ending_in_a_newline_is_refused_naming_the_field(client: Client) -> None:
    refused = await call_error(client, "memory_observe", content="A note.", session_id="chat\n")
    sessions = await call(client, "memory_sessions")

    assert "session_id: must be 1-128 characters" in refused
    assert sessions["sessions"] == []
