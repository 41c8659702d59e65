"""memory_reflect flags two memories as contradicting only when they disagree: one negates the
other, or each gives a value the other lacks for the same thing."""

from __future__ import annotations

from mcp import Client

from tests.conftest import call

PG14 = "The test database is PostgreSQL 14 running in docker compose on port 5433."
PG15 = "The test database is PostgreSQL 15 running in docker compose on port 5434."
MOVED = "The test database is PostgreSQL 15 in docker compose on port 5434 (moved from 14/5433)."


async def save(client: Client, content: str, **args: str) -> str:
    return str((await call(client, "memory_save", content=content, **args))["id"])


async def flagged(client: Client) -> list[tuple[str, str]]:
    """The pairs memory_reflect flags, checked against its count of pairs that look contradictory."""
    result = await call(client, "memory_reflect")
    found = [(c["source_id"], c["target_id"]) for c in result["contradictions"]]
    counted = [i for i in result["insights"] if "contradictory" in i]
    pairs = "1 pair of memories looks" if len(found) == 1 else f"{len(found)} pairs of memories look"
    assert counted == ([f"{pairs} contradictory; check them with memory_related."] if found else [])
    return found


async def test_a_memory_that_says_more_about_the_same_values_agrees(client: Client) -> None:
    old, current = await save(client, PG14), await save(client, PG15)
    assert await flagged(client) == [tuple(sorted((old, current)))]  # 14/5433 against 15/5434: a real conflict

    await save(client, MOVED, supersedes=old)

    # 15 and 5434 are in both; 14/5433 is where it moved from, which the other does not dispute.
    assert await flagged(client) == []


async def test_numbers_about_different_things_do_not_conflict(client: Client) -> None:
    await save(client, "The API service listens on port 8080 and runs 4 workers.")
    await save(client, "The API service runs 4 workers with 2 GB of memory each.")
    assert await flagged(client) == []


async def test_different_numbers_for_the_same_thing_conflict(client: Client) -> None:
    first = await save(client, "The API service runs 4 workers with a database pool size of 20.")
    second = await save(client, "The database pool size of the API service was lowered to 10 last week.")
    assert await flagged(client) == [tuple(sorted((first, second)))]


async def test_different_numbers_with_nothing_to_tell_them_apart_conflict(client: Client) -> None:
    first = await save(client, "Deploys need Python 3.11 on the build host.")
    second = await save(client, "Deploys need 3.12 on the build host.")
    assert await flagged(client) == [tuple(sorted((first, second)))]
