"""Command line and transports: options on either side of `serve`, start-up failures, logs, proxies, shutdown."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

from mcp_memory.cli import _banner, _parser
from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests._servers import free_port, run_clis, running, server_env, stdio_params, wait_gone

pytestmark = pytest.mark.anyio

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    """`python -m mcp_memory ARGS` to completion (options may come before `serve`)."""
    return subprocess.run(
        [sys.executable, "-m", "mcp_memory", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=server_env(env),
        timeout=timeout,
    )


def _resolve(*argv: str, env: dict[str, str] | None = None) -> Settings:
    args = _parser().parse_args(argv)
    return Settings.resolve({name: getattr(args, name, None) for name in Settings.model_fields}, env or {})


# 1. Options before `serve`


def test_options_before_serve_are_not_overwritten_by_the_subcommand(tmp_path: Path) -> None:
    cli = str(tmp_path / "cli.db")
    settings = _resolve("--db", cli, "--transport", "sse", "serve", env={"MCP_MEMORY_DB": str(tmp_path / "env.db")})
    assert (settings.db, settings.transport) == (Path(cli), "sse")
    after = _resolve("--db", cli, "serve", "--db", str(tmp_path / "after.db"))
    assert after.db == tmp_path / "after.db"  # the later one wins, as usual for repeated options
    assert _resolve("serve", env={"MCP_MEMORY_DB": str(tmp_path / "env.db")}).db == tmp_path / "env.db"


async def test_db_before_serve_wins_over_the_environment(tmp_path: Path) -> None:
    cli, env = tmp_path / "cli.db", tmp_path / "env.db"
    params = stdio_params(cli, env={"MCP_MEMORY_DB": str(env), "MCP_MEMORY_PROJECT": "p"})
    params.args = ["-m", "mcp_memory", "--db", str(cli), "serve"]
    with anyio.fail_after(30):
        async with Client(params) as client:
            result = await client.call_tool("memory_save", {"content": "where does this land"})
            assert not result.is_error
    rows = sqlite3.connect(cli).execute("SELECT content FROM memories").fetchall()
    assert rows == [("where does this land",)]
    assert not env.exists()


# 2. A database that cannot be used


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
def test_bad_database_exits_with_one_line(tmp_path: Path, transport: str) -> None:
    not_db = tmp_path / "notadb.db"
    not_db.write_bytes(b"this is not an SQLite database, only text " * 10)
    directory = tmp_path / "folder.db"
    directory.mkdir()
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
        conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', 'now')")
    cases = {
        not_db: f"mcp-memory: cannot open database {not_db}: file is not a database",
        directory: f"mcp-memory: cannot open database {directory}: unable to open database file",
        newer: f"mcp-memory: {newer} has schema version 999, newer than this mcp-memory knows",
    }
    options = ["--transport", transport, *(["--port", "0"] if transport != "stdio" else []), "--log-level", "warning"]
    runs = [(["--db", str(db), *options], None) for db in cases]
    for done, expected in zip(run_clis(runs), cases.values(), strict=True):  # side by side
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip().startswith(expected), done.stderr
        assert "Traceback" not in done.stderr
        assert "serving" not in done.stderr  # no banner for a server that never started


# 3. Optional booleans


def test_allow_file_paths_is_a_boolean_flag(tmp_path: Path) -> None:
    assert _resolve("serve", "--allow-file-paths").allow_file_paths is True
    assert _resolve("serve", "--no-allow-file-paths").allow_file_paths is False
    assert _resolve("--no-allow-file-paths", "serve").allow_file_paths is False
    assert _resolve("serve").allow_file_paths is None


# 4. Logs on stderr only; 8. banner after start-up


def test_http_logs_and_banner_go_to_stderr_not_stdout(tmp_path: Path) -> None:
    port = free_port()
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    command = [sys.executable, "-m", "mcp_memory", "serve", "--transport", "streamable-http", "--port", str(port)]
    command += ["--db", str(tmp_path / "m.db")]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=server_env())
    try:
        deadline = time.monotonic() + 20
        with httpx2.Client(trust_env=False, timeout=2.0) as http:
            while time.monotonic() < deadline:
                try:
                    if http.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                        break
                except httpx2.TransportError:
                    time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.read_text() == ""
    logged = err.read_text()
    assert '"GET /healthz HTTP/1.1" 200' in logged
    assert f"serving Streamable HTTP at http://127.0.0.1:{port}/mcp" in logged


# 5. Reverse proxies: Host and Origin without a port, any case


def test_allowed_host_matches_with_and_without_port_and_any_case(tmp_path: Path) -> None:
    with running(tmp_path, args=["--allowed-hosts", "memory.example.com:*"]) as server:
        body = json.dumps(INIT)
        with httpx2.Client(trust_env=False, timeout=10) as http:

            def status(headers: dict[str, str]) -> int:
                return http.post(server.url, headers=JSON_HEADERS | headers, content=body).status_code

            assert status({"Host": "memory.example.com"}) == 200
            assert status({"Host": "memory.example.com:8443"}) == 200
            assert status({"Host": "Memory.Example.COM"}) == 200
            assert status({"Host": "evil.example.com"}) == 421
            assert status({"Origin": "https://memory.example.com"}) == 200
            assert status({"Origin": "http://memory.example.com:8080"}) == 200
            assert status({"Origin": "HTTPS://MEMORY.example.com"}) == 200
            assert status({"Origin": "https://evil.example.com"}) == 403


# 6. A call in flight at SIGTERM still gets its response


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stdio_call_in_flight_at_a_signal_gets_its_response(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "memory.db"
    command = [sys.executable, "-m", "mcp_memory", "serve", "--db", str(db)]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=server_env()
    )
    assert proc.stdin is not None
    assert proc.stdout is not None

    def send(message: dict[str, object]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    def save(request_id: int, content: str) -> None:
        params = {"name": "memory_save", "arguments": {"content": content}}
        send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    try:
        send(INIT)
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        save(2, "before")
        assert json.loads(proc.stdout.readline())["id"] == 2
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # hold the write lock so the next save is in flight
        save(3, "in flight")
        time.sleep(0.7)
        proc.send_signal(sig)
        time.sleep(0.3)
        blocker.execute("ROLLBACK")
        blocker.close()
        out = proc.stdout.read().decode()
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    responses = {message["id"]: message for message in map(json.loads, out.splitlines())}
    assert set(responses) == {3}
    assert responses[3]["result"]["isError"] is False
    stored = sqlite3.connect(db).execute("SELECT content FROM memories ORDER BY content").fetchall()
    assert stored == [("before",), ("in flight",)]
    assert wait_gone(proc.pid, 1)


def test_a_second_signal_stops_a_stdio_server_without_waiting_out_its_calls(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    command = [sys.executable, "-m", "mcp_memory", "serve", "--db", str(db), "--busy-timeout-ms", "60000"]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=server_env()
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    blocker = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        for message in (INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}):
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        blocker.execute("BEGIN IMMEDIATE")  # the save waits for the write lock, up to a minute
        params = {"name": "memory_save", "arguments": {"content": "stuck behind a lock"}}
        proc.stdin.write(
            (json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}) + "\n").encode()
        )
        proc.stdin.flush()
        time.sleep(0.7)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(20)
        took = time.monotonic() - began
        log = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        blocker.close()

    assert code == 0, log
    assert took < 5  # not the 10 s grace the first signal gives the call
    assert "received SIGINT again; stopping without waiting" in log
    assert "Traceback" not in log
    assert sqlite3.connect(db).execute("SELECT count(*) FROM memories").fetchone() == (0,)


# 7. busy_timeout_ms bounds the whole wait for the write lock


async def test_busy_timeout_bounds_the_total_wait(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "memory.db", project="p", synchronous="normal", busy_timeout_ms=600)
    async with Client(build_server(settings)) as client:
        assert not (await client.call_tool("memory_save", {"content": "first"})).is_error
        blocker = sqlite3.connect(settings.db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            started = time.monotonic()
            result = await client.call_tool("memory_save", {"content": "blocked"})
            waited = time.monotonic() - started
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert result.is_error
    assert "locked by another writer" in result.content[0].text  # type: ignore[union-attr]
    assert 0.5 <= waited < 1.2


# 8. Small things


def test_banner_brackets_an_ipv6_host(tmp_path: Path) -> None:
    banner = _banner(Settings(db=tmp_path / "m.db", transport="streamable-http", host="::1", port=18780))
    assert "http://[::1]:18780/mcp" in banner


def test_refused_start_prints_no_banner(tmp_path: Path) -> None:
    done = _cli("serve", "--db", str(tmp_path / "m.db"), "--transport", "sse", "--host", "0.0.0.0")
    assert done.returncode == 2
    assert "serving" not in done.stderr
    assert "refusing to serve a non-loopback address without a token" in done.stderr


def test_log_level_is_case_insensitive(tmp_path: Path) -> None:
    assert _resolve("serve", "--log-level", "debug").log_level == "DEBUG"
    assert _resolve("serve", env={"MCP_MEMORY_LOG_LEVEL": "warning"}).log_level == "WARNING"
    assert _resolve("--transport", "SSE", "serve").transport == "sse"


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", "Infinity"])
def test_float_settings_refuse_non_finite_values(raw: str) -> None:
    with pytest.raises(ValueError, match="MCP_MEMORY_BM25_K1: Input should be a finite number"):
        Settings.resolve({}, {"MCP_MEMORY_BM25_K1": raw})
    with pytest.raises(ValueError, match="MCP_MEMORY_RECENCY_HALF_LIFE_DAYS"):
        Settings.resolve({}, {"MCP_MEMORY_RECENCY_HALF_LIFE_DAYS": raw})


@pytest.mark.parametrize("url", ["notaurl", "ftp://host/v1", "http://127.0.0.1:99999/v1", "http:///v1"])
def test_an_embedding_url_that_is_not_http_is_refused_with_the_configuration(url: str) -> None:
    with pytest.raises(ValueError, match="--embedding-url: expected an http:// or https:// URL"):
        Settings.resolve({"embedding_url": url}, {})
    with pytest.raises(ValueError, match="MCP_MEMORY_EMBEDDING_URL: expected an http:// or https:// URL"):
        Settings.resolve({}, {"MCP_MEMORY_EMBEDDING_URL": url})


def test_an_embedding_url_error_never_shows_its_credentials() -> None:
    with pytest.raises(ValueError, match="got 'ftp://host/v1'") as refused:
        Settings.resolve({}, {"MCP_MEMORY_EMBEDDING_URL": "ftp://user:hunter2@host/v1"})
    assert "hunter2" not in str(refused.value)


def test_help_version_and_refusals_answer_without_importing_the_mcp_sdk(tmp_path: Path) -> None:
    """`--help`, `--version` and a refused configuration are read by people at a prompt: they must
    not wait seconds for the SDK and web stack to import."""
    db = str(tmp_path / "m.db")
    runs = [
        ["--help"],
        ["--version"],
        ["serve", "--transport", "streamable-http", "--host", "192.0.2.1", "--db", db],
        ["serve", "--transport", "sse", "--host", "0.0.0.0", "--auth-token", "t" * 16, "--db", db],
        ["serve", "--transport", "sse", "--auth-token", "short", "--db", db],
    ]
    probe = (
        "import sys\n"
        "from mcp_memory.cli import main\n"
        f"for argv in {runs!r}:\n"
        "    try:\n"
        "        print('status', main(argv))\n"
        "    except SystemExit as exc:\n"
        "        print('status', exc.code)\n"
        "print(sorted(m for m in ('mcp', 'uvicorn', 'starlette', 'mcp_memory.transports') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert "serve" in done.stdout  # the help text was printed
    assert [line for line in done.stdout.splitlines() if line.startswith("status")] == ["status 0"] * 2 + [
        "status 2"
    ] * 3
    refusals = [line for line in done.stderr.splitlines() if line.startswith("mcp-memory:")]
    assert [("--insecure" in r, "--allowed-hosts" in r, "16 characters" in r) for r in refusals] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
    ]
    assert done.stdout.strip().splitlines()[-1] == "[]"
