"""Start-up edges refused in one line, never a traceback: no home directory, an unknown ~user, a host with a
port or a scheme in it; and Ctrl-C or SIGTERM while the server is still starting exits quietly."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from mcp_memory.auth import Grant, http_grants
from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests._servers import TOKEN, run_clis, serve_command, server_env

STRANGER = 12345  # a uid with no passwd entry, as under `docker run --user 12345`


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def _refusal(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a refused start-up (exit status 2), failing on anything else."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr.strip()


# -- no home directory ------------------------------------------------------------------------------------


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder a uid of no group may write in (a test's tmp_path is its owner's only)."""
    folder = Path(tempfile.mkdtemp(prefix="mcp-memory-nohome-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_stranger(
    runs: Sequence[tuple[Sequence[str], Mapping[str, str]]], cwd: Path
) -> list[subprocess.CompletedProcess[str]]:
    """`python -m mcp_memory ARGS` side by side as a uid with no passwd entry and no HOME (nor XDG_DATA_HOME)."""
    drop = ["setpriv", f"--reuid={STRANGER}", f"--regid={STRANGER}", "--clear-groups"]
    procs = []
    for args, extra in runs:
        env = {k: v for k, v in server_env(extra).items() if k not in ("HOME", "XDG_DATA_HOME")}
        procs.append(
            subprocess.Popen(
                [*drop, sys.executable, "-m", "mcp_memory", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=cwd,
            )
        )
    done = []
    for (args, _), proc in zip(runs, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        done.append(subprocess.CompletedProcess(list(args), proc.returncode, out, err))
    return done


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run as a uid with no passwd entry",
)
def test_without_a_home_directory_only_the_default_database_is_refused(shared_dir: Path) -> None:
    explicit = shared_dir / "explicit.db"
    from_env = shared_dir / "from-env.db"
    version, usage, flag, variable, no_db, tilde = _as_stranger(
        [
            (["--version"], {}),
            (["--help"], {}),
            (["serve", "--db", str(explicit)], {}),
            (["serve"], {"MCP_MEMORY_DB": str(from_env)}),
            (["serve"], {}),
            (["serve", "--db", "~/memory.db"], {}),
        ],
        shared_dir,
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("mcp-memory ")
    assert usage.returncode == 0, usage.stderr
    assert "default memory.db in the per-user data directory" in " ".join(usage.stdout.split())
    for served in (flag, variable):  # stdin is closed at once: the server opens its database and stops
        assert served.returncode == 0, served.stderr
        assert "Traceback" not in served.stderr
    assert explicit.is_file()
    assert from_env.is_file()
    assert _refusal(no_db) == (
        "mcp-memory: --db: no home directory to keep the default database in (set HOME);"
        " pass --db PATH or set MCP_MEMORY_DB"
    )
    assert _refusal(tilde) == (
        "mcp-memory: --db: cannot expand ~ in '~/memory.db': this user has no home directory (set HOME)"
    )


# -- ~user, --host ----------------------------------------------------------------------------------------


def test_an_unknown_user_in_a_path_is_refused_naming_the_setting(tmp_path: Path) -> None:
    unknown = "~no-such-user-mcp-memory"
    db = str(tmp_path / "m.db")
    flag, variable, token_file = run_clis(
        [
            (["--db", f"{unknown}/memory.db"], None),
            ([], {"MCP_MEMORY_DB": f"{unknown}/memory.db"}),
            (["--transport", "sse", "--db", db, "--auth-token-file", f"{unknown}/tokens"], None),
        ]
    )
    why = "no user 'no-such-user-mcp-memory' on this machine"
    db_refused = f"cannot expand {unknown} in '{unknown}/memory.db': {why}"
    assert _refusal(flag) == f"mcp-memory: --db: {db_refused}"
    assert _refusal(variable) == f"mcp-memory: MCP_MEMORY_DB: {db_refused}"
    tokens_refused = f"cannot expand {unknown} in '{unknown}/tokens': {why}"
    assert _refusal(token_file) == f"mcp-memory: --auth-token-file: {tokens_refused}"


def test_a_host_with_a_port_or_a_scheme_is_refused_in_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    http = ["--transport", "streamable-http", "--port", "0", "--db", db]
    with_port, url, from_env, no_token = run_clis(
        [
            ([*http, "--host", "127.0.0.1:8765"], {"MCP_MEMORY_AUTH_TOKEN": TOKEN}),
            ([*http, "--host", "http://127.0.0.1"], {"MCP_MEMORY_AUTH_TOKEN": TOKEN}),
            (http, {"MCP_MEMORY_HOST": "127.0.0.1:8765", "MCP_MEMORY_AUTH_TOKEN": TOKEN}),
            ([*http, "--host", "127.0.0.1:8765", "--insecure"], None),
        ]
    )
    expected = "expected a host name or IP address (e.g. 127.0.0.1, ::1, memory.example.com), not a URL or host:port"
    assert _refusal(with_port) == f"mcp-memory: --host: {expected}, got '127.0.0.1:8765'; give the port with --port"
    assert _refusal(url) == f"mcp-memory: --host: {expected}, got 'http://127.0.0.1'; give the port with --port"
    assert _refusal(from_env) == (
        f"mcp-memory: MCP_MEMORY_HOST: {expected}, got '127.0.0.1:8765'; give the port with --port"
    )
    assert _refusal(no_token) == _refusal(with_port)


def test_a_host_is_read_without_blanks_or_brackets_and_serves_with_a_token(tmp_path: Path) -> None:
    spelled = {"127.0.0.1 ": "127.0.0.1", " ::1": "::1", "[::1]": "::1", "memory.example.com": "memory.example.com"}
    for given, host in spelled.items():
        settings = Settings.resolve({"host": given, "db": str(tmp_path / "m.db")}, {})
        assert settings.host == host
        build_server(settings, grants=[Grant(TOKEN)])  # the token's nominal issuer URL is built from the host
    from_env = Settings.resolve({"db": str(tmp_path / "m.db")}, {"MCP_MEMORY_HOST": "127.0.0.1 "})
    assert from_env.host == "127.0.0.1"
    for blank in (" ", "[memory.example.com]", "user@host", "a b"):
        with pytest.raises(ValueError, match=r"^--host: expected a host name or IP address"):
            Settings.resolve({"host": blank, "db": str(tmp_path / "m.db")}, {})


def test_a_host_name_in_any_case_is_one_host_and_localhost_is_loopback(tmp_path: Path) -> None:
    for given in ("LOCALHOST", "Localhost"):
        settings = Settings.resolve({"host": given, "transport": "streamable-http", "db": str(tmp_path / "m.db")}, {})
        assert settings.host == "localhost"
        assert http_grants(settings) == []  # served without a token, as lower-case localhost is


@pytest.mark.parametrize(
    ("field", "entry"),
    [
        ("allowed_hosts", "https://memory.example.com"),
        ("allowed_hosts", "*"),
        ("allowed_hosts", "*.example.com"),
        ("allowed_hosts", "memory.example.com:99999"),
        ("allowed_hosts", "memory.example.com/mcp"),
        ("allowed_origins", "app.example"),
        ("allowed_origins", "https://app.example/"),
        ("allowed_origins", "null"),
    ],
)
def test_an_allow_list_entry_no_request_can_match_is_refused(tmp_path: Path, field: str, entry: str) -> None:
    # taken literally, each refused every request it was meant to let in (and "*" passed for the
    # allow-list a wildcard bind needs)
    good = "127.0.0.1" if field == "allowed_hosts" else "https://ok.example"
    with pytest.raises(ValueError, match=rf"^--{field.replace('_', '-')}: expected .*got '{re.escape(entry)}'"):
        Settings.resolve({field: f"{good}, {entry}", "db": str(tmp_path / "m.db")}, {})


def test_allow_list_entries_of_every_working_form_are_kept(tmp_path: Path) -> None:
    hosts = "memory.example.com, memory.example.com:*, memory.example.com:8443, [::1]:8080, ::1, 10.0.0.1:*"
    origins = "https://app.example, http://app.example:3000, https://app.example:*, vscode-webview://abc123"
    settings = Settings.resolve({"allowed_hosts": hosts, "allowed_origins": origins, "db": str(tmp_path / "m.db")}, {})
    assert settings.allowed_hosts == hosts.split(", ")
    assert settings.allowed_origins == origins.split(", ")


# -- Ctrl-C while starting -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "transport"),
    [
        (signal.SIGINT, "streamable-http"),
        (signal.SIGTERM, "streamable-http"),
        (signal.SIGINT, "stdio"),
        (signal.SIGTERM, "stdio"),
    ],
)
def test_a_stop_signal_while_the_sdk_is_still_loading_exits_quietly(
    tmp_path: Path, sent: signal.Signals, transport: str
) -> None:
    """Noted while starting (an interrupt raised in the SDK's imports can surface as another error,
    or leave a half-opened database keeping the process alive), acted on at the next safe point."""
    extra = ("--port", "0") if transport != "stdio" else ()
    proc = subprocess.Popen(
        serve_command("--transport", transport, *extra, "--db", str(tmp_path / "m.db")),
        stdin=subprocess.PIPE,  # kept open: a stdio server stops for the signal, not for its input ending
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
    )
    try:
        assert proc.stderr is not None
        # Logged just before the transports (and the SDK, seconds of imports) are loaded.
        first = proc.stderr.readline()
        assert "database" in first, first
        proc.send_signal(sent)
        proc.wait(timeout=30)
        rest = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, rest
    assert "Traceback" not in rest
    assert "KeyboardInterrupt" not in rest


# -- what start-up is given ------------------------------------------------------------------------------


@pytest.mark.parametrize("closed", ["<&-", ">&-"])
def test_a_stdio_server_started_without_stdin_or_stdout_says_so_in_one_line(tmp_path: Path, closed: str) -> None:
    db = tmp_path / "m.db"
    command = " ".join(f"'{part}'" for part in serve_command("--db", str(db)))
    done = subprocess.run(
        ["sh", "-c", f"exec {command} {closed}"], capture_output=True, text=True, env=server_env(), timeout=60
    )

    assert done.returncode == 1, done.stderr
    assert _last_line(done) == (
        "mcp-memory: the stdio transport needs an open stdin and stdout; --transport streamable-http serves a URL"
    )
    assert "Traceback" not in done.stderr
    assert not db.exists()  # refused before anything was opened


def test_a_database_path_through_a_file_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("a file, not a folder")
    (done,) = run_clis([(("--db", str(tmp_path / "notes" / "m.db")), None)])

    assert done.returncode == 1
    assert _last_line(done).endswith(f"{tmp_path / 'notes'} is a file, not a folder")


def test_a_blank_agent_id_names_no_agent(tmp_path: Path) -> None:
    assert Settings(db=tmp_path / "m.db", agent_id="   ").agent_id is None
    assert Settings(db=tmp_path / "m.db", agent_id=" ci-bot ").agent_id == "ci-bot"


def test_an_unsafe_bind_names_the_variable_beside_the_flag(tmp_path: Path) -> None:
    env = {"MCP_MEMORY_HOST": "0.0.0.0", "MCP_MEMORY_TRANSPORT": "sse"}
    (done,) = run_clis([(("--db", str(tmp_path / "m.db")), env)])

    assert _refusal(done).startswith("mcp-memory: --host / MCP_MEMORY_HOST 0.0.0.0: refusing to serve")


def test_options_of_the_http_transports_are_said_to_do_nothing_under_stdio(tmp_path: Path) -> None:
    plain, given = run_clis(
        [
            (("--db", str(tmp_path / "a.db")), None),
            (
                ("--db", str(tmp_path / "b.db"), "--port", "9000"),
                {"MCP_MEMORY_AUTH_TOKEN": "s3cret-token-value", "MCP_MEMORY_SESION_IDLE_MINUTES": "5"},
            ),
        ]
    )

    warned = "--port, --auth-token: for --transport sse or streamable-http only; serving stdio, they are ignored"
    misspelt = (
        "ignored, no such setting: MCP_MEMORY_SESION_IDLE_MINUTES (did you mean MCP_MEMORY_SESSION_IDLE_MINUTES?)"
    )
    assert (plain.returncode, given.returncode) == (0, 0)  # stdin closes at once: served, then done
    assert warned not in plain.stderr
    assert "no such setting" not in plain.stderr
    assert warned in given.stderr
    assert misspelt in given.stderr


def test_variables_naming_no_setting_are_listed_with_the_likeliest_meant() -> None:
    environ = {
        "MCP_MEMORY_DB": "m.db",
        "MCP_MEMORY_TOKEN": "t",
        "MCP_MEMORY_AUTH_TOKN": "t",
        "MCP_MEMORY_SOMETHING_ELSE": "1",
        "mcp_memory_port": "9000",  # not read: variable names are case-sensitive
        "PATH": "/bin",
    }

    assert Settings.unknown_variables(environ) == [
        "MCP_MEMORY_AUTH_TOKN (did you mean MCP_MEMORY_AUTH_TOKEN?)",
        "MCP_MEMORY_SOMETHING_ELSE",
        "MCP_MEMORY_TOKEN (did you mean MCP_MEMORY_AUTH_TOKEN?)",
        "mcp_memory_port (did you mean MCP_MEMORY_PORT?)",
    ]


def test_stdin_closed_before_any_request_is_said_once(tmp_path: Path) -> None:
    (done,) = run_clis([(("--db", str(tmp_path / "m.db")), None)])

    assert done.returncode == 0
    assert done.stderr.count("stdin closed; finishing 0 call(s) in flight") == 1
