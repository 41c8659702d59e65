"""Pins the public surface: tool names, parameters, annotations; README and example config agree."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mcp import Client

ROOT = Path(__file__).resolve().parent.parent

# name: (parameters in order, required, (read-only, destructive, idempotent))
SURFACE: dict[str, tuple[list[str], list[str], tuple[bool | None, bool | None, bool | None]]] = {
    "memory_observe": (
        ["content", "type", "title", "facts", "concepts", "files", "session_id", "ref", "occurred_at",
         "importance", "end_session", "agent_id", "project"],
        ["content"],
        (False, True, False),
    ),
    "memory_recall": (
        ["query", "limit", "session_id", "types", "since", "until", "include_memories", "neighbours", "project"],
        ["query"],
        (True, None, None),
    ),
    "memory_sessions": (["status", "limit", "offset", "project"], [], (True, None, None)),
    "memory_observations": (
        ["session_id", "types", "since", "until", "order", "full", "limit", "offset", "project"],
        [],
        (True, None, None),
    ),
    "memory_timeline": (["anchor", "at", "session_id", "before", "after", "project"], [], (True, None, None)),
    "memory_save": (
        ["content", "kind", "title", "concepts", "files", "importance", "supersedes", "ref", "occurred_at",
         "session_id", "agent_id", "project"],
        ["content"],
        (False, False, True),
    ),
    "memory_get": (["id", "project"], ["id"], (True, None, None)),
    "memory_smart_search": (["query", "ids", "kinds", "limit", "project"], [], (True, None, None)),
    "memory_forget": (
        ["ids", "kind", "session_id", "since", "until", "dry_run", "project"], [], (False, True, True)
    ),
    "memory_lesson_save": (
        ["content", "context", "tags", "task_type", "confidence", "scope", "agent_id", "project"],
        ["content"],
        (False, True, False),
    ),
    "memory_lesson_recall": (
        ["query", "task_type", "kinds", "include_global", "limit", "project"], [], (True, None, None)
    ),
    "memory_lessons": (
        ["kinds", "task_type", "status", "scope", "limit", "offset", "project"], [], (True, None, None)
    ),
    "memory_outcome_record": (
        ["task", "success", "score", "task_type", "strategy", "steps", "error", "feedback", "mistakes",
         "successes", "mistake_cards", "duration_s", "session_id", "agent_id", "project"],
        ["task"],
        (False, True, False),
    ),
    "memory_insights": (["task_type", "limit", "project"], [], (True, None, None)),
    "memory_profile": (["project"], [], (True, None, None)),
    "memory_slot_list": (["project"], [], (True, None, None)),
    "memory_slot_get": (["name", "scope", "project"], ["name"], (True, None, None)),
    "memory_slot_create": (
        ["name", "content", "size_limit", "pinned", "description", "scope", "project"], ["name"], (False, False, True)
    ),
    "memory_slot_append": (
        ["name", "text", "separator", "scope", "project"], ["name", "text"], (False, False, False)
    ),
    "memory_slot_replace": (
        ["name", "content", "old", "size_limit", "pinned", "description", "scope", "project"],
        ["name"],
        (False, True, False),
    ),
    "memory_slot_delete": (["name", "scope", "project"], ["name"], (False, True, True)),
    "memory_action_create": (
        ["title", "description", "priority", "parent_id", "depends_on", "tags", "due", "status", "project"],
        ["title"],
        (False, True, False),  # a child made under a done parent reopens it
    ),
    "memory_action_update": (
        ["id", "status", "title", "description", "priority", "parent_id", "clear_parent", "add_depends_on",
         "remove_depends_on", "tags", "due", "clear_due", "project"],
        ["id"],
        (False, True, False),
    ),
    "memory_action_list": (["status", "tag", "parent_id", "limit", "offset", "project"], [], (True, None, None)),
    "memory_frontier": (["tag", "limit", "offset", "project"], [], (True, None, None)),
    "memory_relate": (
        ["source_id", "target_id", "type", "weight", "note", "project"],
        ["source_id", "target_id"],
        (False, True, True),
    ),
    "memory_related": (["id", "hops", "types", "direction", "limit", "project"], ["id"], (True, None, None)),
    "memory_context": (["query", "task_type", "budget", "project"], [], (True, None, None)),
    "memory_crystallize": (["session_id", "force", "project"], [], (False, True, True)),
    "memory_consolidate": (["dry_run", "project"], [], (False, True, False)),
    "memory_reflect": (["session_id", "since", "until", "project"], [], (False, True, False)),
    "memory_diagnose": ([], [], (True, None, None)),
    "memory_export": (["all_projects", "path", "overwrite", "project"], [], (False, True, True)),
    "memory_import": (["document", "path", "restore_forgotten"], [], (False, True, True)),
}  # fmt: skip


async def test_tool_names_parameters_and_annotations_are_pinned(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(tools) == sorted(SURFACE)
    for name, (params, required, hints) in SURFACE.items():
        tool = tools[name]
        assert list(tool.input_schema.get("properties", {})) == params, name
        assert sorted(tool.input_schema.get("required", [])) == sorted(required), name
        annotations = tool.annotations
        assert annotations is not None
        got = (annotations.read_only_hint, annotations.destructive_hint, annotations.idempotent_hint)
        assert got == hints, name
        assert annotations.open_world_hint is False
        assert tool.description, name
        assert "\n" not in tool.description, name
        assert len(tool.description) <= 120, name
        assert tool.output_schema is not None, f"{name} has no structured result"
        for param, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{name}.{param} has no description"


async def test_prompts_and_resource_templates_are_pinned(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert sorted(prompts) == ["session_end", "session_start"]
    assert [a.name for a in prompts["session_end"].arguments or []] == ["session_id", "task", "project", "agent_id"]
    assert [a.name for a in prompts["session_start"].arguments or []] == ["query", "task_type", "project"]
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert templates == {"memory://context{?project,query,task_type,budget}", "memory://slots/{name}{?project}"}


async def test_a_result_s_text_is_its_structured_content_as_compact_json_without_empty_fields(client: Client) -> None:
    await client.call_tool("memory_save", {"content": "The API listens on port 8080."})
    result = await client.call_tool("memory_smart_search", {"query": "API port"})

    (text,) = [block.text for block in result.content if block.type == "text"]
    structured = result.structured_content
    assert structured is not None
    [hit] = structured["hits"]
    assert (hit["snippet"], hit["ref"], hit["context"]) == (hit["title"], None, [])
    assert (structured["memories"], structured["missing"]) == ([], [])
    # the text copy leaves out what only repeats the title or holds nothing; the rest is the same
    shown = {key: hit[key] for key in ("id", "kind", "score", "title", "type", "created_at")}
    expected = {"project": "test", "query": "API port", "hits": [shown]}
    assert text == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))


async def test_readme_tool_table_matches_the_server(client: Client) -> None:
    readme = (ROOT / "README.md").read_text()
    listed = set(re.findall(r"^\| `(memory_\w+)` \|", readme, flags=re.MULTILINE))
    assert listed == {t.name for t in (await client.list_tools()).tools}


def test_readme_configuration_table_lists_every_setting() -> None:
    from mcp_memory.config import Settings

    readme = (ROOT / "README.md").read_text()
    for name in Settings.model_fields:
        assert f"`{Settings.option_name(name)}`" in readme, name
        assert f"`{Settings.env_name(name)}`" in readme, name


def test_example_client_config_runs_this_server() -> None:
    config = json.loads((ROOT / "claude_desktop_config.example.json").read_text())
    server = config["mcpServers"]["memory"]
    assert server["command"].endswith("/.venv/bin/mcp-memory")
    assert server["args"] == ["serve"]
    from mcp_memory.config import Settings

    assert all(key.startswith("MCP_MEMORY_") for key in server.get("env", {}))
    Settings.resolve({}, server.get("env", {}))  # every variable in the example is valid
