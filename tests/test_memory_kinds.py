"""A memory's new version keeps its chain's kind unless the caller names another."""

from __future__ import annotations

from mcp import Client

from tests.conftest import call


async def test_a_near_duplicate_saved_without_a_kind_keeps_the_chains_kind(client: Client) -> None:
    first = await call(client, "memory_save", content="I prefer dark mode in every editor.", kind="preference")
    second = await call(client, "memory_save", content="I prefer dark mode in every editor and terminal.")
    again = await call(client, "memory_save", content="I prefer dark mode in every editor and terminal.")
    kept = await call(client, "memory_profile")
    named = await call(
        client, "memory_save", content="I prefer dark mode in every editor and terminal.", kind="decision"
    )
    fresh = await call(client, "memory_save", content="The staging cluster runs in Frankfurt.")
    profile = await call(client, "memory_profile")

    assert second["superseded_id"] == first["id"]
    assert second["kind"] == "preference"
    assert again["unchanged"] is True  # the same content, no kind given: nothing to change
    assert kept["preferences"] == ["I prefer dark mode in every editor and terminal."]
    assert (named["kind"], named["superseded_id"]) == ("decision", second["id"])
    assert fresh["kind"] == "fact"
    assert profile["preferences"] == []  # the chain is a decision now
