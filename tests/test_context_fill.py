"""memory_context fills its budget: every section gets its share first, then the room left."""

from __future__ import annotations

from mcp import Client

from tests.conftest import call


async def _many(client: Client) -> None:
    for i in range(60):
        await call(client, "memory_save", content=f"Service svc_{i} listens on port {8000 + i} for component alpha{i}.")
    for i in range(40):
        await call(
            client, "memory_lesson_save", content=f"Check the healthcheck of component beta{i} before deploying."
        )


def _section(compiled: dict[str, object], name: str) -> dict[str, int]:
    sections = compiled["sections"]
    assert isinstance(sections, list)
    return next(s for s in sections if s["name"] == name)


async def test_a_large_budget_is_filled_past_each_sections_share(client: Client) -> None:
    await _many(client)

    compiled = await call(client, "memory_context", budget=2000)

    assert compiled["tokens"] <= 2000
    assert compiled["tokens"] > 1800  # the room the shares left is used, not wasted
    assert _section(compiled, "lessons")["included"] > 15
    assert _section(compiled, "memories")["included"] > 10
    assert compiled["omitted_unlisted"] + len(compiled["omitted"]) == sum(s["omitted"] for s in compiled["sections"])


async def test_a_small_budget_still_reaches_the_sections_after_a_long_one(client: Client) -> None:
    await _many(client)

    compiled = await call(client, "memory_context", budget=700)

    # 40 lessons would fill 700 tokens alone; their share stops at 15 so memories get theirs,
    # and only the room left after that goes to further lessons
    assert compiled["tokens"] <= 700
    assert _section(compiled, "memories")["included"] == 10
    assert 15 <= _section(compiled, "lessons")["included"] < 40
    # the items a share left out are listed before the further ones
    first = compiled["omitted"][0]
    assert first["section"] in {"lessons", "memories"}
