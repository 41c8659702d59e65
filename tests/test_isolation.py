"""Projects are isolated: no tool, prompt or resource called for one project shows another's records.

Three projects get canary records of every kind through a real HTTP server; then every listed tool
(with minimal valid arguments, and with other projects' ids where it takes ids), both prompts and
both resources are called for each project, through a project-bound token and through an unbound
token naming the project, and no answer may contain another project's canary. `--isolated` and
MCP roots are checked over stdio.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp_types import ListRootsResult, Root

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests._servers import TOKEN, HttpServer, mcp_client, running, stdio_params
from tests.conftest import call, call_error
from tests.test_context_resource_fixes import events_until

PROJECTS = ("alpha", "beta", "gamma")
BOUND = {p: f"{p}-bound-token-0123456789abcdef" for p in PROJECTS}
QUERY = "CANARY xyzzy"


def canary(project: str) -> str:
    return f"CANARY-{project}-xyzzy"


@dataclass
class Seeded:
    """The ids of one project's canary records."""

    project: str
    ids: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, kind: str) -> str:
        return self.ids[kind]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    tmp = tmp_path_factory.mktemp("isolation")
    (tmp / "tokens").write_text("".join(f"{BOUND[p]} {p} {p}-agent\n" for p in PROJECTS))
    args = ["--auth-token-file", str(tmp / "tokens"), "--project", "home"]
    with running(tmp, env={"MCP_MEMORY_AUTH_TOKEN": TOKEN}, args=args) as started:
        yield started


@pytest.fixture(scope="module")
async def seeded(server: HttpServer) -> dict[str, Seeded]:
    return {p: await _seed(server, p) for p in PROJECTS}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def _seed(server: HttpServer, project: str) -> Seeded:
    """Canary observations, a session, a memory, a lesson, outcomes (and what they derive), a slot, actions."""
    mark = canary(project)
    seeded = Seeded(project)
    async with mcp_client(server, BOUND[project]) as client:
        first = await call(
            client,
            "memory_observe",
            content=f"Decided to use {mark} for the cache.",
            type="decision",
            session_id=f"conversation-{project}",
            facts=[f"{mark} fact"],
            concepts=[mark],
        )
        await call(client, "memory_observe", content=f"Error: {mark} broke the build.", type="error")
        await call(
            client,
            "memory_observe",
            content=f"Fixed {mark} by pinning it.",
            type="fix",
            session_id=f"conversation-{project}",
            end_session=True,
        )
        seeded.ids["observation"] = first["id"]
        seeded.ids["session"] = first["session_id"]
        seeded.ids["memory"] = (await call(client, "memory_save", content=f"{mark} is the cache key prefix."))["id"]
        seeded.ids["lesson"] = (
            await call(client, "memory_lesson_save", content=f"Check {mark} before deploying.", task_type="deploy")
        )["lesson"]["id"]
        for n, success in enumerate((False, False, True, True, True)):
            recorded = await call(
                client,
                "memory_outcome_record",
                task=f"Deploy {mark} service {n}",
                task_type="deploy",
                success=success,
                score=0.95 if success else 0.2,
                strategy=f"roll out {mark} canary first",
                error=None if success else f"{mark} timeout during rollout",
                mistakes=[] if success else [f"skipped the {mark} smoke test"],
                successes=[f"ran the {mark} smoke test"] if success else [],
                mistake_cards=[]
                if success
                else [{"type": "skipped_check", "wrong_decision": f"skip {mark}", "correct_decision": f"run {mark}"}],
            )
            seeded.ids["outcome"] = recorded["id"]
        await call(client, "memory_slot_create", name="notes", content=f"Pinned: {mark}.", pinned=True)
        seeded.ids["action"] = (await call(client, "memory_action_create", title=f"Ship {mark}"))["action"]["id"]
        blocked = await call(client, "memory_action_create", title=f"Then {mark}", depends_on=[seeded["action"]])
        seeded.ids["action2"] = blocked["action"]["id"]
        await call(client, "memory_relate", source_id=seeded["memory"], target_id=seeded["action"])
    return seeded


# -- every tool, prompt and resource ---------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One call to make for a project: a tool with arguments; `refused` when it must be a "not found"-like
    error, None when it may be one or succeed (showing nothing of the other project either way)."""

    tool: str
    args: dict[str, Any]
    refused: bool | None = False
    label: str = ""


def probes(mine: Seeded, theirs: list[Seeded], tag: str, export: dict[str, Any]) -> list[Probe]:
    """Minimal valid calls of every tool, then calls aimed at other projects' ids."""
    other_ids = [s[k] for s in theirs for k in ("observation", "memory", "lesson", "action", "outcome")]
    other_sessions = [s["session"] for s in theirs]
    own: list[Probe] = [
        Probe("memory_observe", {"content": f"Probe note {tag} xyzzy."}),
        Probe("memory_recall", {"query": QUERY, "include_memories": True, "limit": 50}),
        Probe("memory_sessions", {}),
        Probe("memory_observations", {"full": True, "limit": 100}),
        Probe("memory_timeline", {}),
        Probe("memory_timeline", {"anchor": mine["observation"], "before": 10, "after": 10}),
        Probe("memory_save", {"content": f"Probe memory {tag} xyzzy."}),
        Probe("memory_get", {"id": mine["memory"]}),
        Probe("memory_smart_search", {"query": QUERY, "limit": 50}),
        Probe("memory_smart_search", {"ids": [mine[k] for k in ("observation", "memory", "lesson", "action")]}),
        Probe("memory_forget", {"ids": [mine["memory"]], "dry_run": True}),
        Probe("memory_lesson_save", {"content": f"Probe lesson {tag} xyzzy."}),
        Probe("memory_lesson_recall", {"query": QUERY, "include_global": True}),
        Probe("memory_lesson_recall", {"task_type": "deploy"}),
        Probe("memory_lessons", {"limit": 100}),
        Probe("memory_outcome_record", {"task": f"Probe task {tag}", "success": True}),
        Probe("memory_insights", {"task_type": "deploy"}),
        Probe("memory_insights", {}),
        Probe("memory_profile", {}),
        Probe("memory_slot_list", {}),
        Probe("memory_slot_get", {"name": "notes"}),
        Probe("memory_slot_create", {"name": f"probe_{tag}".replace("-", "_"), "content": "probe"}),
        Probe("memory_slot_append", {"name": f"probe_{tag}".replace("-", "_"), "text": "more"}),
        Probe("memory_slot_replace", {"name": f"probe_{tag}".replace("-", "_"), "content": "replaced"}),
        Probe("memory_slot_delete", {"name": f"probe_{tag}".replace("-", "_")}),
        Probe("memory_action_create", {"title": f"Probe action {tag}"}),
        Probe("memory_action_update", {"id": mine["action2"], "priority": 5}),
        Probe("memory_action_list", {"limit": 100}),
        Probe("memory_frontier", {}),
        Probe("memory_relate", {"source_id": mine["memory"], "target_id": mine["action2"]}),
        Probe("memory_related", {"id": mine["memory"], "hops": 3}),
        Probe("memory_context", {}),
        Probe("memory_context", {"query": QUERY, "task_type": "deploy", "budget": 8000}),
        Probe("memory_crystallize", {"session_id": mine["session"], "force": True}),
        Probe("memory_crystallize", {}),
        Probe("memory_consolidate", {"dry_run": True}),
        Probe("memory_consolidate", {}),
        Probe("memory_reflect", {}),
        Probe("memory_reflect", {"session_id": mine["session"]}),
        Probe("memory_diagnose", {}),
        Probe("memory_export", {}),
        Probe("memory_import", {"document": export}),
    ]
    aimed: list[Probe] = [Probe("memory_smart_search", {"ids": other_ids + other_sessions}, label="their-ids")]
    for obs, mem, act, ses in zip(
        [s["observation"] for s in theirs],
        [s["memory"] for s in theirs],
        [s["action"] for s in theirs],
        other_sessions,
        strict=True,
    ):
        aimed += [
            Probe("memory_get", {"id": mem}, refused=True),
            Probe("memory_forget", {"ids": [mem]}, refused=True),
            Probe("memory_forget", {"ids": [obs]}, refused=True),
            Probe("memory_timeline", {"anchor": obs}, refused=True),
            Probe("memory_related", {"id": mem}, refused=True),
            Probe("memory_relate", {"source_id": mine["memory"], "target_id": mem}, refused=True),
            Probe("memory_relate", {"source_id": act, "target_id": mine["action"]}, refused=True),
            Probe("memory_action_update", {"id": act, "status": "cancelled"}, refused=True),
            Probe("memory_action_create", {"title": "Sneaky", "depends_on": [act]}, refused=True),
            Probe("memory_action_create", {"title": "Sneaky", "parent_id": act}, refused=True),
            Probe("memory_save", {"content": "Sneaky replacement.", "supersedes": mem}, refused=True),
            Probe("memory_crystallize", {"session_id": ses, "force": True}, refused=True),
            Probe("memory_reflect", {"session_id": ses}, refused=True),
            Probe("memory_observations", {"session_id": ses, "full": True}, refused=None),
            Probe("memory_recall", {"query": QUERY, "session_id": ses}, refused=None),
            Probe("memory_timeline", {"session_id": ses}, refused=None),
            Probe("memory_forget", {"session_id": ses}, refused=None),
        ]
    return own + aimed


def _visible(result: Any) -> str:
    """Everything a client sees of a tool, prompt or resource result."""
    return json.dumps(result.model_dump(mode="json", by_alias=True), ensure_ascii=False)


def _leaks(text: str, project: str) -> list[str]:
    return [canary(p) for p in PROJECTS if p != project and canary(p) in text]


MODES = [pytest.param("bound", id="project-bound-token"), pytest.param("named", id="unbound-token-naming-project")]


@pytest.mark.parametrize("mode", MODES)
async def test_no_tool_prompt_or_resource_shows_another_projects_records(
    server: HttpServer, seeded: dict[str, Seeded], mode: str
) -> None:
    for project in PROJECTS:
        mine, theirs = seeded[project], [seeded[p] for p in PROJECTS if p != project]
        token = BOUND[project] if mode == "bound" else TOKEN
        named = {} if mode == "bound" else {"project": project}
        async with mcp_client(server, token) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            export = (await call(client, "memory_export", **named))["document"]
            plan = probes(mine, theirs, f"{mode}-{project}", export)
            assert {p.tool for p in plan} == set(tools), "every listed tool is probed"
            seen: dict[str, list[str]] = {}
            for probe in plan:
                args = dict(probe.args)
                if "project" in tools[probe.tool].input_schema.get("properties", {}):
                    args.update(named)
                result = await client.call_tool(probe.tool, args)
                text = _visible(result)
                where = f"{project}/{probe.tool}{probe.label and ' ' + probe.label}({args})"
                assert _leaks(text, project) == [], where
                if probe.refused or (probe.refused is None and result.is_error):
                    assert result.is_error, where
                    assert "in this project" in text, f"{where}: {text[:500]}"
                else:
                    assert not result.is_error, f"{where}: {text[:500]}"
                seen.setdefault(probe.tool, []).append(text)

            their_ids = next(p for p in plan if p.label == "their-ids").args["ids"]
            fetched = await call(client, "memory_smart_search", ids=their_ids, **named)
            assert sorted(fetched["missing"]) == sorted(their_ids)

            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert prompts == {"session_start", "session_end"}
            for name, arguments in (
                ("session_start", {}),
                ("session_start", {"query": QUERY, "task_type": "deploy"}),
                ("session_end", {}),
            ):
                if name == "session_start":
                    arguments = arguments | named
                text = _visible(await client.get_prompt(name, arguments))
                assert _leaks(text, project) == [], f"{project}/prompt {name}"
                seen.setdefault(f"prompt:{name}", []).append(text)

            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert templates == {"memory://context{?project,query,task_type,budget}", "memory://slots/{name}{?project}"}
            suffix = f"project={project}" if named else ""
            for uri in (
                "memory://context" + (f"?{suffix}" if suffix else ""),
                f"memory://context?query={quote(QUERY)}&task_type=deploy" + (f"&{suffix}" if suffix else ""),
                "memory://slots/notes" + (f"?{suffix}" if suffix else ""),
            ):
                text = _visible(await client.read_resource(uri))
                assert _leaks(text, project) == [], f"{project}/resource {uri}"
                seen.setdefault(f"resource:{uri.split('?')[0]}", []).append(text)

        # The probes could see: each project's own canary shows up where it should.
        for where in (
            "memory_recall",
            "memory_smart_search",
            "memory_get",
            "memory_observations",
            "memory_lesson_recall",
            "memory_insights",
            "memory_slot_get",
            "memory_action_list",
            "memory_context",
            "memory_export",
            "prompt:session_start",
            "resource:memory://context",
            "resource:memory://slots/notes",
        ):
            assert any(canary(project) in text for text in seen[where]), f"{project}: {where} never showed its canary"

    # Nothing aimed at another project changed it.
    for project in PROJECTS:
        async with mcp_client(server, BOUND[project]) as client:
            mine = seeded[project]
            assert (await call(client, "memory_get", id=mine["memory"]))["memory"]["is_latest"] is True
            listed = await call(client, "memory_observations", session_id=mine["session"], full=True)
            assert [canary(project) in o["content"] for o in listed["observations"]] == [True, True]
            actions = {a["id"]: a for a in (await call(client, "memory_action_list", limit=100))["actions"]}
            assert actions[mine["action"]]["status"] == "pending"
            assert canary(project) in (await call(client, "memory_slot_get", name="notes"))["content"]


async def test_a_bound_token_cannot_name_another_project_in_any_tool_prompt_or_resource(
    server: HttpServer, seeded: dict[str, Seeded]
) -> None:
    async with mcp_client(server, BOUND["alpha"]) as client:
        tools = (await client.list_tools()).tools
        export = (await call(client, "memory_export"))["document"]
        plan = {p.tool: p for p in reversed(probes(seeded["alpha"], [], "x", export))}
        with_project = [t.name for t in tools if "project" in t.input_schema.get("properties", {})]
        assert len(with_project) >= len(tools) - 2  # all but diagnose and import
        for name in with_project:
            text = await call_error(client, name, **(plan[name].args | {"project": "beta"}))
            assert "project" in text, name
            assert canary("beta") not in text, name
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("session_start", {"project": "beta"})
        assert canary("beta") not in str(refused.value)
        for uri in ("memory://context?project=beta", "memory://slots/notes?project=beta"):
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert canary("beta") not in str(refused.value)


async def test_prompt_and_resource_refusals_name_the_project_field(server: HttpServer) -> None:
    async with mcp_client(server, BOUND["alpha"]) as client:
        with pytest.raises(MCPError, match="project"):
            await client.get_prompt("session_start", {"project": "beta"})
        for uri in ("memory://context?project=beta", "memory://slots/notes?project=beta"):
            with pytest.raises(MCPError, match="project: "):
                await client.read_resource(uri)


# -- known holes --------------------------------------------------------------------------------------


async def test_a_bound_token_cannot_export_other_projects(server: HttpServer, seeded: dict[str, Seeded]) -> None:
    async with mcp_client(server, BOUND["alpha"]) as client:
        result = await client.call_tool("memory_export", {"all_projects": True})
    assert _leaks(_visible(result), "alpha") == []


async def test_a_bound_tokens_diagnosis_counts_its_own_project_only(
    server: HttpServer, seeded: dict[str, Seeded]
) -> None:
    async with mcp_client(server, TOKEN) as admin:
        await call(admin, "memory_save", content="Only delta keeps this note.", project="delta")
        everything = await call(admin, "memory_diagnose")
        all_rows = (await call(admin, "memory_export", all_projects=True))["counts"]
    async with mcp_client(server, BOUND["alpha"]) as client:
        mine = await call(client, "memory_diagnose")
        own_rows = (await call(client, "memory_export"))["counts"]

    tables = set(own_rows) & set(mine["counts"])
    assert {t: mine["counts"][t] for t in tables} == {t: own_rows[t] for t in tables}
    assert {t: everything["counts"][t] for t in tables} == {t: all_rows[t] for t in tables}
    assert 0 < mine["counts"]["memories"] < everything["counts"]["memories"]
    assert "search_terms" not in mine["counts"]  # the vocabulary is shared by every project
    assert 0 < sum(mine["index_docs"].values()) < sum(everything["index_docs"].values())
    assert mine["index_docs"] == mine["stored_docs"]
    assert mine["index_in_sync"] is True
    assert 0 < mine["index_postings"] < everything["index_postings"]
    assert (mine["projects"], mine["db_path"], mine["db_bytes"]) == (["alpha"], None, None)
    assert "page_count" not in mine["sqlite"]
    assert everything["db_bytes"] > 0
    assert set(everything["projects"]) >= {"alpha", "beta", "gamma", "delta"}


async def test_a_bound_token_cannot_import_into_other_projects(server: HttpServer) -> None:
    async with mcp_client(server, BOUND["beta"]) as beta:  # a record of its own: the canaries stay untouched
        saved = await call(beta, "memory_save", content="Beta keeps the vault combination in the safe.")
        theirs = (await call(beta, "memory_get", id=saved["id"]))["memory"]
    forged = theirs | {"content": "Overwritten by alpha.", "updated_at": "2099-01-01T00:00:00Z"}
    planted = theirs | {"id": "mem_plantedbyalpha0000000", "root_id": "mem_plantedbyalpha0000000"}
    document = {"format": "mcp-memory-export", "format_version": 1, "tables": {"memories": [forged, planted]}}
    stolen = forged | {"project": "alpha"}  # claims alpha's own project for beta's id
    async with mcp_client(server, BOUND["alpha"]) as alpha:
        await alpha.call_tool("memory_import", {"document": document})
        refused = await call_error(alpha, "memory_import", document=document | {"tables": {"memories": [stolen]}})
    async with mcp_client(server, BOUND["beta"]) as beta:
        after = (await call(beta, "memory_get", id=saved["id"]))["memory"]
        planted_seen = await beta.call_tool("memory_get", {"id": planted["id"]})
    assert after == theirs
    assert planted_seen.is_error
    assert "document.tables.memories[0].id: already names a record of another project" in refused


# -- --isolated and roots over stdio ---------------------------------------------------------------------


def _roots(folder: Path) -> Any:
    async def list_roots(_: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=folder.as_uri(), name="workspace")])

    return list_roots


async def _project_of_calls(client: Client) -> str:
    await call(client, "memory_observe", content="Where does this land?")
    return str((await call(client, "memory_observations"))["project"])


async def test_isolated_stdio_refuses_any_project_but_its_own(tmp_path: Path) -> None:
    db = tmp_path / "isolated.db"
    async with Client(stdio_params(db, "--isolated", "--project", "home")) as client:  # no roots: --project
        for tool, args in (
            ("memory_save", {"content": "Elsewhere."}),
            ("memory_recall", {"query": "anything"}),
            ("memory_export", {}),
        ):
            text = await call_error(client, tool, **args, project="elsewhere")
            assert "project" in text
            assert "home" in text
        assert await _project_of_calls(client) == "home"
        await call(client, "memory_save", content="At home.", project="home")


@pytest.mark.parametrize("marker", [None, "marked-project"], ids=["folder-name", "marker-file"])
@pytest.mark.parametrize("isolated", [True, False], ids=["isolated", "not-isolated"])
async def test_the_clients_roots_choose_the_project_and_isolated_refuses_others(
    tmp_path: Path, marker: str | None, isolated: bool
) -> None:
    folder = tmp_path / "my-workspace"
    folder.mkdir()
    if marker:
        (folder / ".mcp-memory-project").write_text(f"{marker}\n")
    expected = marker or "my-workspace"
    args = ["--project", "fallback", *(["--isolated"] if isolated else [])]
    db = tmp_path / "roots.db"
    async with Client(stdio_params(db, *args), list_roots_callback=_roots(folder), mode="legacy") as client:
        assert await _project_of_calls(client) == expected
        await call(client, "memory_save", content="Named explicitly.", project=expected)
        for other in ("fallback", "elsewhere"):
            if isolated:
                text = await call_error(client, "memory_save", content="Elsewhere.", project=other)
                assert "project" in text
                assert expected in text
            else:
                await call(client, "memory_save", content=f"Saved in {other}.", project=other)


async def test_a_project_bound_listener_hears_nothing_of_another_projects_writes(server: HttpServer) -> None:
    mine, theirs = PROJECTS[0], PROJECTS[1]
    watched = ["memory://context", "memory://slots/listen_probe", f"memory://context?project={quote(theirs)}"]

    async with (
        mcp_client(server, BOUND[mine]) as listener,
        mcp_client(server, BOUND[theirs]) as other,
        listener.listen(resources_list_changed=True, resource_subscriptions=watched) as subscription,
    ):
        await call(other, "memory_slot_create", name="listen_probe", content="not yours")
        await call(other, "memory_save", content="A fact of another project.")
        await call(listener, "memory_save", content="A fact of my own.")
        # Events keep the order of the writes: any of the other project's would come first.
        seen = await events_until(subscription, {ResourceUpdated("memory://context")})

    assert seen == [ResourceUpdated("memory://context")]


async def test_a_bound_callers_import_is_heard_of_in_its_project_only(server: HttpServer, tmp_path: Path) -> None:
    mine, theirs = PROJECTS[0], PROJECTS[1]
    async with Client(build_server(Settings(db=tmp_path / "elsewhere.db", project=mine))) as elsewhere:
        await call(elsewhere, "memory_slot_create", name="imported_probe", content="from a copy", pinned=True)
        document = (await call(elsewhere, "memory_export"))["document"]
    watched = ["memory://context", "memory://slots/imported_probe"]

    async with (
        mcp_client(server, BOUND[mine]) as listener,
        mcp_client(server, BOUND[theirs]) as other,
        listener.listen(resources_list_changed=True, resource_subscriptions=watched) as mine_hears,
        other.listen(resources_list_changed=True, resource_subscriptions=watched) as theirs_hear,
    ):
        imported = await call(listener, "memory_import", document=document)
        heard = await events_until(mine_hears, {ResourceUpdated(uri) for uri in watched} | {ResourcesListChanged()})
        await call(other, "memory_save", content="A fact of their own.")
        # Events keep the order of the writes: any of the import's would come first.
        overheard = await events_until(theirs_hear, {ResourceUpdated("memory://context")})

    assert (imported["inserted"]["slots"], imported["projects"]) == (1, [mine])
    assert set(heard) == {ResourceUpdated(uri) for uri in watched} | {ResourcesListChanged()}
    assert overheard == [ResourceUpdated("memory://context")]
