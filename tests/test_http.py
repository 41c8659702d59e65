"""Real `mcp-memory serve` subprocesses on loopback: streamable HTTP, SSE and stdio, reached by the SDK's clients.

Covers the data path through each transport, bearer tokens (and project-bound ones), Host/Origin
validation, the body limit, the health endpoints, start-up refusals and the process life-cycle
(SIGTERM with a call in flight, stdin closing, the parent dying).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from mcp_memory import __version__
from tests._servers import (
    INITIALIZE,
    TOKEN,
    HttpServer,
    bearer,
    initialized_stdio_server,
    mcp_client,
    run_clis,
    running,
    serve_command,
    server_env,
    start_http,
    stdio_params,
    wait_gone,
)
from tests.conftest import call, call_error

ALPHA = "alpha-bound-token-0123456789"
BETA = "beta-bound-token-0123456789ab"
TOKENS_FILE = f"""\
# token          project  agent id
{ALPHA}   alpha    alpha-bot
{BETA}    beta
"""
LIMIT = 2048
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, HttpServer]]:
    """A streamable-HTTP and an SSE server on one database: an unbound token and two project-bound ones."""
    tmp = tmp_path_factory.mktemp("http")
    (tmp / "tokens").write_text(TOKENS_FILE)
    env = {"MCP_MEMORY_AUTH_TOKEN": TOKEN}
    args = ["--auth-token-file", str(tmp / "tokens"), "--max-request-bytes", str(LIMIT), "--project", "home"]
    args += ["--allowed-origins", "https://app.example:*,http://dev.example:3000"]
    with (
        running(tmp, transport="streamable-http", env=env, args=args, name="http") as http,
        running(tmp, transport="sse", env=env, args=args, name="sse") as sse,
    ):
        yield {"streamable-http": http, "sse": sse}


@pytest.fixture
def raw() -> Iterator[httpx2.Client]:
    with httpx2.Client(trust_env=False, timeout=10.0) as client:
        yield client


# -- the data path -----------------------------------------------------------------------------------


async def test_save_and_recall_through_streamable_http_sse_and_stdio_on_one_database(
    servers: dict[str, HttpServer],
) -> None:
    http, sse = servers["streamable-http"], servers["sse"]
    project = {"project": "roundtrip"}
    async with mcp_client(http) as client:
        via_http = await call(client, "memory_observe", content="Tuned the quokka cache eviction to LRU.", **project)
        mem_http = await call(client, "memory_save", content="The quokka cache holds 512 entries.", **project)
    async with mcp_client(sse) as client:
        via_sse = await call(client, "memory_observe", content="The wombat importer now retries twice.", **project)
        mem_sse = await call(client, "memory_save", content="Wombat imports run nightly at 02:00.", **project)

    for server in (http, sse):
        async with mcp_client(server) as client:
            assert await _recall_ids(client, "quokka eviction", **project) >= {via_http["id"]}
            assert await _recall_ids(client, "wombat importer retries", **project) >= {via_sse["id"]}
            assert await _search_ids(client, "quokka entries", **project) >= {mem_http["id"]}
            assert await _search_ids(client, "wombat nightly", **project) >= {mem_sse["id"]}

    # A stdio server on the same file while both HTTP servers run.
    async with Client(stdio_params(http.db)) as client:
        assert await _recall_ids(client, "quokka eviction", **project) >= {via_http["id"]}
        assert await _recall_ids(client, "wombat importer retries", **project) >= {via_sse["id"]}
        assert await _search_ids(client, "wombat nightly", **project) >= {mem_sse["id"]}
        via_stdio = await call(client, "memory_observe", content="The numbat linter flags tabs.", **project)
    async with mcp_client(http) as client:
        assert await _recall_ids(client, "numbat linter", **project) >= {via_stdio["id"]}
    assert http.alive()
    assert sse.alive()


async def _recall_ids(client: Client, query: str, **args: Any) -> set[str]:
    return {h["id"] for h in (await call(client, "memory_recall", query=query, **args))["hits"]}


async def _search_ids(client: Client, query: str, **args: Any) -> set[str]:
    return {h["id"] for h in (await call(client, "memory_smart_search", query=query, **args))["hits"]}


# -- bearer tokens ---------------------------------------------------------------------------------

ROUTES = [
    pytest.param("streamable-http", "POST", "/mcp", id="mcp-POST"),
    pytest.param("streamable-http", "GET", "/mcp", id="mcp-GET"),
    pytest.param("sse", "GET", "/sse", id="sse-GET"),
    pytest.param("sse", "POST", "/messages/?session_id=0123456789abcdef0123456789abcdef", id="messages-POST"),
]
BAD_CREDENTIALS = [
    pytest.param({}, "", id="no-token"),
    pytest.param(bearer("wrong-token-0123456789abcdef"), "", id="wrong-token"),
    pytest.param(bearer(TOKEN[:-1]), "", id="token-prefix"),
    pytest.param({"Authorization": f"Basic {TOKEN}"}, "", id="other-scheme"),
    pytest.param({}, f"access_token={TOKEN}", id="query-access_token"),
    pytest.param({}, f"token={TOKEN}", id="query-token"),
]


@pytest.mark.parametrize(("transport", "method", "path"), ROUTES)
@pytest.mark.parametrize(("headers", "query"), BAD_CREDENTIALS)
def test_mcp_routes_answer_401_with_bearer_challenge_without_a_valid_header_token(
    servers: dict[str, HttpServer],
    raw: httpx2.Client,
    transport: str,
    method: str,
    path: str,
    headers: dict[str, str],
    query: str,
) -> None:
    server = servers[transport]
    url = server.base + path + (("&" if "?" in path else "?") + query if query else "")
    body = json.dumps(INITIALIZE) if method == "POST" else None
    response = raw.request(method, url, headers=JSON_HEADERS | headers, content=body)
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN not in response.text


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_health_endpoints_need_no_token_and_reveal_only_status_and_version(
    servers: dict[str, HttpServer], raw: httpx2.Client, transport: str
) -> None:
    server = servers[transport]
    health = raw.get(server.base + "/healthz")
    ready = raw.get(server.base + "/readyz")
    assert (health.status_code, health.json()) == (200, {"status": "ok", "version": __version__})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    for response in (health, ready):
        assert str(server.db) not in response.text


def test_a_valid_token_and_a_loopback_origin_are_accepted(servers: dict[str, HttpServer], raw: httpx2.Client) -> None:
    server = servers["streamable-http"]
    origin = {"Origin": f"http://127.0.0.1:{server.port}"}
    response = raw.post(server.url, json=INITIALIZE, headers=JSON_HEADERS | bearer(TOKEN) | origin)
    assert response.status_code == 200, response.text
    assert "mcp-session-id" in response.headers


# -- Host / Origin / size ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("https://app.example", 200),  # `:*` is any port, the default one too: browsers leave it out
        ("https://app.example:8443", 200),
        ("http://dev.example:3000", 200),
        ("http://dev.example", 403),  # `:3000` is that port only
        ("http://app.example", 403),  # another scheme
    ],
)
def test_configured_origins_are_matched_as_browsers_send_them(
    servers: dict[str, HttpServer], raw: httpx2.Client, origin: str, status: int
) -> None:
    server = servers["streamable-http"]
    response = raw.post(server.url, json=INITIALIZE, headers=JSON_HEADERS | bearer(TOKEN) | {"Origin": origin})
    assert response.status_code == status, response.text


def _post_or_stream_status(raw: httpx2.Client, method: str, url: str, headers: dict[str, str]) -> int:
    """The status of a request; an event stream is closed as soon as its headers arrive."""
    body = json.dumps(INITIALIZE) if method == "POST" else None
    with raw.stream(method, url, headers=JSON_HEADERS | bearer(TOKEN) | headers, content=body) as response:
        return response.status_code


@pytest.mark.parametrize(("transport", "method", "path"), ROUTES)
def test_a_foreign_origin_is_refused_with_403(
    servers: dict[str, HttpServer], raw: httpx2.Client, transport: str, method: str, path: str
) -> None:
    server = servers[transport]
    for origin in ("http://evil.example", f"http://evil.example:{server.port}", "null"):
        status = _post_or_stream_status(raw, method, server.base + path, {"Origin": origin})
        assert status == 403, origin


@pytest.mark.parametrize(("transport", "method", "path"), ROUTES)
def test_a_foreign_host_is_refused_with_421(
    servers: dict[str, HttpServer], raw: httpx2.Client, transport: str, method: str, path: str
) -> None:
    server = servers[transport]
    for host in ("evil.example", f"evil.example:{server.port}", f"127.0.0.1.evil.example:{server.port}"):
        status = _post_or_stream_status(raw, method, server.base + path, {"Host": host})
        assert status == 421, host


@pytest.mark.parametrize(
    ("transport", "path"),
    [pytest.param("streamable-http", "/mcp", id="mcp"), pytest.param("sse", ROUTES[3].values[2], id="messages")],
)
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_over_large_body_is_refused_with_413(
    servers: dict[str, HttpServer], raw: httpx2.Client, transport: str, path: str, chunked: bool
) -> None:
    big = dict(INITIALIZE, params=dict(INITIALIZE["params"], clientInfo={"name": "x" * 2 * LIMIT, "version": "1"}))
    data = json.dumps(big).encode()
    content: Any = iter([data[:LIMIT], data[LIMIT:]]) if chunked else data
    response = raw.post(servers[transport].base + path, content=content, headers=JSON_HEADERS | bearer(TOKEN))
    assert response.status_code == 413, response.text


# -- project-bound tokens ------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_project_bound_token_acts_in_its_project_and_can_never_name_another(
    servers: dict[str, HttpServer], transport: str
) -> None:
    server = servers[transport]
    words = f"platypus {transport} ledger"
    async with mcp_client(server, ALPHA) as alpha:
        refused = await call_error(alpha, "memory_save", content=f"The {words} is in beta.", project="beta")
        assert "project" in refused
        assert "alpha" in refused
        refused = await call_error(alpha, "memory_recall", query="platypus", project="home")
        assert "project" in refused
        saved = await call(alpha, "memory_save", content=f"The {words} balances daily.")
        same = await call(alpha, "memory_save", content=f"The {words} balances daily.", project="alpha")
        assert same["unchanged"] is True
        got = (await call(alpha, "memory_get", id=saved["id"]))["memory"]
        assert (got["project"], got["agent_id"]) == ("alpha", "alpha-bot")
        listed = await call(alpha, "memory_observations")
        assert listed["project"] == "alpha"

    async with mcp_client(server, BETA) as beta:
        assert f"No memory {saved['id']!r} in this project" in await call_error(beta, "memory_get", id=saved["id"])
        assert saved["id"] not in await _search_ids(beta, words)
        assert "project" in await call_error(beta, "memory_get", id=saved["id"], project="alpha")
        in_beta = await call(beta, "memory_save", content=f"The {words} of beta is separate.")

    async with mcp_client(server, TOKEN) as unbound:  # an unbound token may use any project
        assert (await call(unbound, "memory_get", id=saved["id"], project="alpha"))["memory"]["id"] == saved["id"]
        assert saved["id"] in await _search_ids(unbound, words, project="alpha")
        assert in_beta["id"] in await _search_ids(unbound, words, project="beta")
        assert "in this project" in await call_error(unbound, "memory_get", id=saved["id"])  # --project home
        other = await call(unbound, "memory_save", content=f"The {words} lives in gamma.", project="gamma")
        assert (await call(unbound, "memory_get", id=other["id"], project="gamma"))["memory"]["project"] == "gamma"


def test_a_session_cannot_be_used_with_another_token(servers: dict[str, HttpServer], raw: httpx2.Client) -> None:
    server = servers["streamable-http"]
    owner, intruder = BETA, TOKEN  # each token is its own principal, agent id or not
    created = raw.post(server.url, json=INITIALIZE, headers=JSON_HEADERS | bearer(owner))
    assert created.status_code == 200
    session = {"mcp-session-id": created.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    own = raw.post(server.url, json=ping, headers=JSON_HEADERS | bearer(owner) | session)
    assert own.status_code == 200
    other = raw.post(server.url, json=ping, headers=JSON_HEADERS | bearer(intruder) | session)
    assert other.status_code == 404, other.text


# -- start-up refusals ------------------------------------------------------------------------------


def _refusals(tmp: Path, *runs: tuple[list[str], dict[str, str] | None]) -> list[str]:
    """Start-ups that must fail (run side by side): a non-zero status and a message, no traceback."""
    base = ["--transport", "streamable-http", "--port", "0", "--db", str(tmp / "m.db")]
    messages = []
    for done in run_clis([(base + args, env) for args, env in runs]):
        assert done.returncode != 0, (done.args, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.strip()
        messages.append(done.stderr)
    return messages


def test_start_up_refuses_unsafe_or_broken_settings_with_a_message(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ALPHA} alpha agent extra-field\n")
    token = {"MCP_MEMORY_AUTH_TOKEN": TOKEN}
    wildcard, wildcard_insecure, wildcard_no_token, other_host, short, bad_line, missing = _refusals(
        tmp_path,
        (["--host", "0.0.0.0"], token),
        (["--host", "0.0.0.0", "--insecure"], None),
        (["--host", "0.0.0.0"], None),
        (["--host", "192.0.2.1"], None),  # TEST-NET-1: not loopback (refused before binding)
        ([], {"MCP_MEMORY_AUTH_TOKEN": "short"}),
        (["--auth-token-file", str(tokens)], None),
        (["--auth-token-file", str(tmp_path / "missing")], None),
    )
    # A wildcard bind needs the Host names clients will use, so DNS-rebinding protection stays on.
    assert "--allowed-hosts" in wildcard
    assert "--allowed-hosts" in wildcard_insecure
    assert "MCP_MEMORY_AUTH_TOKEN" in wildcard_no_token or "--allowed-hosts" in wildcard_no_token
    # A non-loopback address without a token names every way out.
    for option in ("MCP_MEMORY_AUTH_TOKEN", "--auth-token-file", "--insecure"):
        assert option in other_host
    assert "16 characters" in short
    assert f"{tokens}:1" in bad_line
    assert "cannot read" in missing


def test_any_loopback_address_is_served_without_a_token(tmp_path: Path) -> None:
    # 127.0.0.0/8 is loopback: nothing outside this machine can reach it.
    with running(tmp_path, host="127.0.0.2") as server, httpx2.Client(trust_env=False) as raw:
        response = raw.post(server.url, json=INITIALIZE, headers=JSON_HEADERS)
        assert response.status_code == 200, response.text
        own_host = raw.post(server.url, json=INITIALIZE, headers=JSON_HEADERS | {"Host": f"127.0.0.2:{server.port}"})
        assert own_host.status_code == 200
        foreign = raw.post(server.url, json=INITIALIZE, headers=JSON_HEADERS | {"Host": "evil.example"})
        assert foreign.status_code == 421


# -- life-cycle -------------------------------------------------------------------------------------


def _closed_database(db: Path) -> list[str]:
    """Checks a database whose server has exited: intact and checkpointed; returns its memories' contents."""
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL was not checkpointed at close"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return [row[0] for row in conn.execute("SELECT content FROM memories ORDER BY content")]


SIGTERM_CASES = [
    pytest.param("streamable-http", "auto", id="streamable-http-2026"),
    pytest.param(
        "streamable-http",
        "legacy",
        id="streamable-http-2025",
    ),
    pytest.param(
        "sse",
        "auto",
        id="sse",
    ),
]


@pytest.mark.parametrize(("transport", "mode"), SIGTERM_CASES)
async def test_sigterm_lets_a_call_in_flight_finish_then_closes_the_database(
    tmp_path: Path, transport: str, mode: str
) -> None:
    with running(tmp_path, transport=transport, env={"MCP_MEMORY_AUTH_TOKEN": TOKEN}) as server:
        async with mcp_client(server, mode=mode) as client:
            await call(client, "memory_save", content="Saved before the signal.")
            result: dict[str, Any] = {}

            async def save() -> None:
                result.update(await call(client, "memory_save", content="Saved while the signal arrived."))

            # Another process holds the write lock, so the save stays in flight (waiting for it, event loop free)
            # for as long as this test says: deterministic, unlike a CPU-bound call.
            blocker = sqlite3.connect(server.db, isolation_level=None)
            try:
                blocker.execute("BEGIN IMMEDIATE")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(save)
                    await anyio.sleep(0.5)
                    assert not result
                    server.proc.send_signal(signal.SIGTERM)
                    await anyio.sleep(1.5)  # longer than sse-starlette's shutdown poll
                    assert server.alive(), "the server exited with a call in flight"
                    blocker.execute("ROLLBACK")
            finally:
                blocker.close()
        code = await anyio.to_thread.run_sync(server.proc.wait, 20)

    assert result["version"] == 1
    assert code in (0, -signal.SIGTERM), server.stderr()  # see test_an_http_server_stopped_by_a_signal_exits_0
    assert _closed_database(server.db) == ["Saved before the signal.", "Saved while the signal arrived."]


async def test_a_second_sigterm_stops_a_streamable_http_server_at_once(tmp_path: Path) -> None:
    args = ["--busy-timeout-ms", "60000"]  # the stuck save would wait a minute for the lock
    with running(tmp_path, env={"MCP_MEMORY_AUTH_TOKEN": TOKEN}, args=args) as server:
        blocker = sqlite3.connect(server.db, isolation_level=None)
        try:
            async with mcp_client(server) as client:
                await call(client, "memory_save", content="Saved before the signal.")
                blocker.execute("BEGIN IMMEDIATE")

                async def stuck_save() -> None:
                    with contextlib.suppress(Exception):  # the server stops under it
                        await client.call_tool("memory_save", {"content": "Stuck behind the lock."})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(stuck_save)
                    await anyio.sleep(0.5)
                    server.proc.send_signal(signal.SIGTERM)
                    await anyio.sleep(1.0)
                    assert server.alive(), "the first signal waits for the call in flight"
                    async with httpx2.AsyncClient(trust_env=False, timeout=5) as health:
                        ready = await health.get(server.base + "/readyz")
                    assert (ready.status_code, ready.json()) == (503, {"status": "stopping"})
                    began = time.monotonic()
                    server.proc.send_signal(signal.SIGTERM)
                    code = await anyio.to_thread.run_sync(server.proc.wait, 20)
                    took = time.monotonic() - began
                    tg.cancel_scope.cancel()
        finally:
            blocker.close()

    assert code in (0, -signal.SIGTERM), server.stderr()
    assert took < 3, f"{took:.1f} s: the rest of the first signal's 10 s grace was waited out"
    assert "received SIGTERM again; stopping without waiting" in server.stderr()
    assert "Traceback" not in server.stderr()  # the cancelled call is counted in one line, not traced


async def test_an_open_listen_stream_ends_on_sigterm_and_holds_no_shutdown(tmp_path: Path) -> None:
    with running(tmp_path, env={"MCP_MEMORY_AUTH_TOKEN": TOKEN}) as server:
        async with mcp_client(server) as client, client.listen(resources_list_changed=True) as sub:
            await call(client, "memory_slot_create", name="notes", content="v1", pinned=True)
            began = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            heard = []
            with anyio.move_on_after(20):
                async for event in sub:  # ends when the server closes the stream
                    heard.append(event)
            code = await anyio.to_thread.run_sync(server.proc.wait, 20)
            took = time.monotonic() - began

    assert code == 0, server.stderr()
    assert heard  # the slot's events, then the stream's end
    # an idle listen stream is no call in flight: the shutdown does not wait out its 10 s grace
    assert took < 5, f"{took:.1f} s"
    assert "graceful shutdown exceeded" not in server.stderr()


@pytest.mark.parametrize(
    "sig",
    [
        pytest.param(signal.SIGINT, id="SIGINT"),
        pytest.param(
            signal.SIGTERM,
            id="SIGTERM",
        ),
    ],
)
def test_an_http_server_stopped_by_a_signal_exits_0(tmp_path: Path, sig: signal.Signals) -> None:
    server = start_http(tmp_path)
    try:
        server.proc.send_signal(sig)
        code = server.proc.wait(20)
    finally:
        server.terminate()
    assert "Traceback" not in server.stderr()
    _closed_database(server.db)
    assert code == 0, f"exit status {code}"


def _children_with(marker: str) -> list[int]:
    """Live child processes of this test whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[1]) == os.getpid() and marker in cmdline:
            found.append(int(entry.name))
    return found


async def test_a_stdio_server_exits_by_itself_when_its_stdin_closes(tmp_path: Path) -> None:
    db = tmp_path / "stdin.db"
    async with Client(stdio_params(db)) as client:
        await call(client, "memory_save", content="Saved just before the client went away.")
        (pid,) = _children_with(str(db))
        started = time.monotonic()
    closed_in = time.monotonic() - started
    # The SDK closes stdin, waits up to 2 s for the server to exit on its own, then kills it.
    assert closed_in < 1.9, f"the server did not exit on its own after stdin closed ({closed_in:.2f} s)"
    assert wait_gone(pid, 1)
    assert _closed_database(db) == ["Saved just before the client went away."]


@pytest.mark.parametrize("stop", ["stdin closed", "SIGTERM"])
async def test_a_stdio_server_with_a_listen_stream_open_exits_promptly(tmp_path: Path, stop: str) -> None:
    db = tmp_path / "listen.db"
    async with Client(stdio_params(db)) as client:
        await call(client, "memory_save", content="Saved before listening.")
        (pid,) = _children_with(str(db))
        async with client.listen(resources_list_changed=True, resource_subscriptions=["memory://context"]):
            started = time.monotonic()
            if stop == "SIGTERM":
                os.kill(pid, signal.SIGTERM)
                assert await anyio.to_thread.run_sync(wait_gone, pid, 5)
    closed_in = time.monotonic() - started
    # the SDK closes stdin and waits up to 2 s before it kills the server; a listen stream counted
    # as a call in flight held the server for its whole 10 s grace
    assert closed_in < 1.9, f"{closed_in:.2f} s"
    assert wait_gone(pid, 1)
    assert _closed_database(db) == ["Saved before listening."]


def test_a_stdio_server_exits_0_when_its_stdin_closes(tmp_path: Path) -> None:
    """Without the SDK's kill escalation: a clean exit status once stdin closes, database checkpointed."""
    db = tmp_path / "stdin.db"
    with initialized_stdio_server(db) as proc:
        assert proc.stdin is not None
        proc.stdin.close()
        code = proc.wait(5)
    assert code == 0
    assert _closed_database(db) == []


def test_calls_piped_before_stdin_closes_are_all_answered_and_stored(tmp_path: Path) -> None:
    """A client that writes its requests and closes stdin (the spec's shutdown starts so) loses none."""
    db = tmp_path / "piped.db"
    saves = [
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "memory_save", "arguments": {"content": f"Piped note number {n}."}},
        }
        for n in range(2, 32)
    ]
    with initialized_stdio_server(db) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in [initialized, *saves]).encode())
        proc.stdin.close()
        replies = [json.loads(line) for line in proc.stdout.read().splitlines()]
        code = proc.wait(15)

    assert code == 0
    assert sorted(r["id"] for r in replies) == [m["id"] for m in saves]
    assert [r for r in replies if r.get("error") or r["result"].get("isError")] == []
    assert _closed_database(db) == sorted(f"Piped note number {n}." for n in range(2, 32))


PARENT = """\
import subprocess, sys, time
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("when", ["after start-up", "during start-up"])
def test_a_stdio_server_exits_when_its_parent_dies(tmp_path: Path, when: str) -> None:
    db = tmp_path / "orphan.db"
    # stdin is a pipe this test keeps open, so only the parent's death can stop the server.
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, *serve_command("--db", str(db))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=server_env(),
    )
    server_pid = 0
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        if when == "after start-up":
            deadline = time.monotonic() + 15
            while not db.exists() and time.monotonic() < deadline:  # started: it opened the database
                time.sleep(0.05)
            time.sleep(0.3)
            assert not wait_gone(server_pid, 0.1)
        else:  # killed while the server still imports the SDK, before it watches its parent
            time.sleep(1.0)  # but after it began: a parent dead before that leaves nothing to tell
        parent.kill()
        parent.wait()
        assert wait_gone(server_pid, 3 if when == "after start-up" else 15), "the stdio server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if server_pid and not wait_gone(server_pid, 0):
            os.kill(server_pid, signal.SIGKILL)
        if parent.stdin is not None:
            parent.stdin.close()
    _closed_database(db)


def test_a_stdio_server_exits_0_on_sigterm_while_its_stdin_stays_open(tmp_path: Path) -> None:
    db = tmp_path / "term.db"
    with initialized_stdio_server(db) as proc:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(3)
    assert code == 0
    _closed_database(db)
