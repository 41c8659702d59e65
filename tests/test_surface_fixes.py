"""The public surface tells the truth: start-up checks, core-profile notes and hints, annotations, schemas, --help."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client
from pydantic import ValidationError

from mcp_memory.config import SHOWN_DEFAULTS, Settings
from mcp_memory.search.embeddings import DEFAULT_SENTENCE_TRANSFORMER
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call, call_error
from tests.test_cli_fixes import _cli

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
CORE_NOTE = "not exposed: the server runs with --tools core"


# 1. A new lesson must not be born faded


@pytest.mark.parametrize(
    ("cli", "env"),
    [
        ({"lesson_confidence": 0.1}, {}),  # at the default fade line
        ({"lesson_fade_at": 0.6}, {}),  # above the default confidence
        ({}, {"MCP_MEMORY_LESSON_CONFIDENCE": "0.3", "MCP_MEMORY_LESSON_FADE_AT": "0.3"}),
    ],
)
def test_a_lesson_confidence_at_or_below_the_fade_line_is_refused(
    tmp_path: Path, cli: dict[str, float], env: dict[str, str]
) -> None:
    with pytest.raises(ValueError, match=r"--lesson-confidence .*must be above --lesson-fade-at") as refused:
        Settings.resolve({"db": str(tmp_path / "m.db"), **cli}, env)
    assert "MCP_MEMORY_LESSON_CONFIDENCE" in str(refused.value)
    assert "MCP_MEMORY_LESSON_FADE_AT" in str(refused.value)
    with pytest.raises(ValidationError):
        Settings(db=tmp_path / "m.db", lesson_confidence=0.2, lesson_fade_at=0.2)
    assert Settings(db=tmp_path / "m.db", lesson_confidence=0.2, lesson_fade_at=0.19).lesson_confidence == 0.2


def test_the_cli_refuses_a_fade_line_above_the_lesson_confidence_in_one_line(tmp_path: Path) -> None:
    done = _cli("serve", "--db", str(tmp_path / "m.db"), "--lesson-fade-at", "0.6")
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("mcp-memory: --lesson-confidence (MCP_MEMORY_LESSON_CONFIDENCE) must be above")
    assert "--lesson-fade-at (MCP_MEMORY_LESSON_FADE_AT)" in lines[0]
    assert not (tmp_path / "m.db").exists()


# 2. The core profile's note names only real tools it hides


async def test_the_core_note_names_no_value_of_the_caller_and_no_made_up_tool(
    settings: Settings, clock: FakeClock
) -> None:
    async with Client(build_server(settings.model_copy(update={"tools": "core"}), clock)) as client:
        slot = await call_error(client, "memory_slot_append", name="memory_notes", text="hello")
        named_like_a_tool = await call_error(client, "memory_slot_append", name="memory_forget", text="hello")
        session = await call_error(client, "memory_recall", query="deploy", session_id="memory_work")
        misspelt = await call_error(client, "memory_consolidat")
        hidden = await call_error(client, "memory_consolidate")

    assert slot.endswith(f"(memory_slot_create is {CORE_NOTE})")
    assert named_like_a_tool.endswith(f"(memory_slot_create is {CORE_NOTE})")
    assert session.endswith(f"(memory_sessions is {CORE_NOTE})")
    assert CORE_NOTE not in misspelt
    assert hidden.endswith(f"(memory_consolidate is {CORE_NOTE})")


# 3. Hints under core name only exposed tools


async def test_recall_hint_under_core_names_no_hidden_tool(settings: Settings, clock: FakeClock) -> None:
    hints = {}
    for profile in ("core", "all"):
        db = settings.db.with_name(f"{profile}.db")
        async with Client(build_server(settings.model_copy(update={"tools": profile, "db": db}), clock)) as client:
            await call(client, "memory_lesson_save", content="Always rebase feature branches before merging")
            hints[profile] = (await call(client, "memory_recall", query="rebase branches"))["hint"]

    assert "lessons do" in hints["core"]
    assert "memory_lesson_recall" not in hints["core"]
    assert "memory_smart_search" in hints["core"]
    assert "memory_lesson_recall" in hints["all"]


# 4. Annotations: a tool that may delete or overwrite is destructive


async def test_tools_that_delete_or_overwrite_are_annotated_destructive(client: Client) -> None:
    tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    hints = {
        name: (a.read_only_hint, a.destructive_hint, a.idempotent_hint) for name, a in tools.items() if a is not None
    }
    assert hints["memory_observe"] == (False, True, False)  # folds (deletes) observations past the cap
    assert hints["memory_outcome_record"] == (False, True, False)  # trims mistake cards, prunes rules
    assert hints["memory_relate"] == (False, True, True)  # overwrites an edge's weight and note
    assert hints["memory_lesson_save"] == (False, True, False)  # a second task type clears the first
    assert hints["memory_save"] == (False, False, True)  # versions are kept; an identical save is a no-op


async def test_relating_a_pair_again_overwrites_its_edge_and_an_identical_save_changes_nothing(
    client: Client,
) -> None:
    a = await call(client, "memory_save", content="Postgres is the primary database")
    again = await call(client, "memory_save", content="Postgres is the primary database")
    b = await call(client, "memory_save", content="Redis caches session tokens")
    await call(client, "memory_relate", source_id=a["id"], target_id=b["id"], weight=0.9, note="first")
    await call(client, "memory_relate", source_id=a["id"], target_id=b["id"], weight=0.1, note="second")
    edges = (await call(client, "memory_related", id=a["id"]))["edges"]

    assert (again["id"], again["unchanged"]) == (a["id"], True)
    assert [(e["weight"], e["note"]) for e in edges] == [(0.1, "second")]


async def test_a_lesson_saved_for_a_second_task_type_loses_its_first(client: Client) -> None:
    await call(client, "memory_lesson_save", content="Run the linter first", task_type="bugfix")
    again = await call(client, "memory_lesson_save", content="Run the linter first", task_type="refactor")
    assert again["lesson"].get("task_type") is None


# 5. The confidence schema states the rule the tool enforces


async def test_lesson_confidence_schema_states_the_fade_floor_and_the_default(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    described = tools["memory_lesson_save"].input_schema["properties"]["confidence"]["description"]
    assert "above the server's --lesson-fade-at (0.1 unless set" in described
    assert "--lesson-confidence (0.5 unless set)" in described
    assert "must be above 0.1" in await call_error(client, "memory_lesson_save", content="x y", confidence=0.1)


async def test_session_id_schema_states_the_characters_a_new_name_may_use(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    described = tools["memory_observe"].input_schema["properties"]["session_id"]["description"]
    assert "ASCII letters, digits and . _ : @ -" in described


# 6. --help words computed defaults as README's configuration table does


def test_help_words_computed_defaults_as_the_readme_table_does() -> None:
    done = _cli("--help", env={"COLUMNS": "10000"})  # one line per option: nothing wrapped at a hyphen
    assert done.returncode == 0
    text = done.stdout
    assert "default None" not in text
    assert "default []" not in text
    readme = (ROOT / "README.md").read_text()
    for name, shown in SHOWN_DEFAULTS.items():
        assert f"[env {Settings.env_name(name)}; default {shown}]" in text, name
        row = re.search(rf"^\| `{Settings.option_name(name)}` \| `[A-Z_]+` \| ([^|]+) \|", readme, re.MULTILINE)
        assert row is not None, name
        assert row.group(1).replace("`", "") == shown, name
    assert SHOWN_DEFAULTS["embedding_model"].startswith(f"{DEFAULT_SENTENCE_TRANSFORMER} ")
    assert "[env MCP_MEMORY_AGENT_ID; default none]" in text
