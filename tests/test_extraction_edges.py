"""What memory_observe extracts from awkward content: a caller's title leaves a lone sentence a fact,
names opening a sentence are not cut to their last words, code fences and preprocessor lines are no
titles or concepts, a long run of path-like characters is read in linear time, and a folded turn's
digest line carries its date across a change of clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from mcp_memory.services.compress import compress
from tests.conftest import FakeClock, call


async def test_a_callers_title_leaves_a_lone_sentence_a_fact(client: Client) -> None:
    content = "Fixed the off-by-one error in parser.py at line 42 because the loop bound was wrong."

    saved = await call(client, "memory_observe", content=content, title="Parser fix")

    assert saved["facts"] == [content]


async def test_a_name_opening_a_sentence_is_not_cut_to_its_last_words(client: Client) -> None:
    content = "Deployed today. New York users saw errors. Alice Smith rolled it back, as did Bob Jones."

    saved = await call(client, "memory_observe", content=content)

    assert {"york", "smith", "users saw"}.isdisjoint(saved["concepts"])
    assert "bob jones" in saved["concepts"]


async def test_code_fences_and_emphasis_make_no_title(client: Client) -> None:
    fenced = await call(client, "memory_observe", content="```bash\nnpm install vitest\n```\nInstalled vitest.")
    bold = await call(client, "memory_observe", content="**Decision**: use vitest for the unit tests.")

    assert fenced["title"] == "npm install vitest"
    assert bold["title"] == "Decision: use vitest for the unit tests."


async def test_preprocessor_directives_are_no_hashtag_concepts(client: Client) -> None:
    content = "#ifndef CONFIG_H\n#define CONFIG_H\n#include <stdio.h>\n#endif\nAdded a guard. #build #c-headers"

    saved = await call(client, "memory_observe", content=content)

    assert {"ifndef", "define", "include", "endif"}.isdisjoint(saved["concepts"])
    assert {"build", "c-headers"} <= set(saved["concepts"])


def test_a_long_run_of_path_like_characters_is_read_in_linear_time() -> None:
    # Unbounded repeats in the path pattern backtracked from every start: 40 kB of `a/` took 16 s.
    def cost(text: str, times: int) -> float:
        began = time.process_time()
        for _ in range(times):
            compress(text, None, None, None, None)
        return (time.process_time() - began) / times

    for unit in ("a/", "a.", "-/"):
        small, large = cost(unit * 2_000, 10), cost(unit * 20_000, 1)
        assert large < 40 * small + 0.05, (unit, small, large)  # ten times the text: about ten times the work


async def test_a_folded_turn_after_the_clocks_change_carries_its_date(settings: Settings) -> None:
    zoned = settings.model_copy(update={"timezone": "America/New_York", "observation_cap": 10})
    clock = FakeClock(datetime(2024, 3, 10, 4, 30, tzinfo=UTC))  # Saturday 9 March, 23:30 EST
    async with Client(build_server(zoned, clock)) as client:
        for i in range(14):  # one an hour; the first four fold, the last of them at 03:30 EDT on Sunday
            await call(client, "memory_observe", content=f"tool output number {i}", type="tool_use")
            clock.advance(minutes=60)
        exported = await call(client, "memory_export")
    digest = exported["document"]["tables"]["sessions"][0]["folded_digest"].split("\n")

    assert [line[:25] for line in digest] == [
        "- 23:30-05:00 [tool_use] ",
        "- 2024-03-10 00:30-05:00 ",
        "- 2024-03-10 01:30-05:00 ",
        "- 2024-03-10 03:30-04:00 ",  # without its date it read as Saturday's
    ]
