"""Operator-facing start-up fixes: token files, IPv6 hosts, port 0 and ports in use, env spellings, db paths."""

from __future__ import annotations

import importlib.util
import logging
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from mcp_memory.auth import Grant, load_grants
from mcp_memory.cli import _parser, _warn_missing_embeddings
from mcp_memory.config import Settings, url_host
from mcp_memory.server import build_server
from tests._servers import (
    INITIALIZE,
    TOKEN,
    HttpServer,
    bearer,
    run_clis,
    serve_command,
    server_env,
)

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
BOUND = "bound-token-file-0123456789"
BANNER = re.compile(r"serving \S+(?: HTTP)? at (http://\S+)")


def _resolve(*argv: str, env: dict[str, str] | None = None) -> Settings:
    """Settings through the real parser, as the CLI builds them."""
    args = _parser().parse_args(argv)
    return Settings.resolve({name: getattr(args, name, None) for name in Settings.model_fields}, env or {})


def _grants_of(tmp: Path, content: str | bytes) -> list[Grant]:
    tokens = tmp / "tokens"
    if isinstance(content, bytes):
        tokens.write_bytes(content)
    else:
        tokens.write_text(content)
    return load_grants(Settings(db=tmp / "m.db", auth_token_file=tokens))


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


def _start_on_port_zero(
    tmp: Path, host: str = "127.0.0.1", env: dict[str, str] | None = None
) -> tuple[HttpServer, str]:
    """A server told `--port 0`, and the URL its banner announces (waits for the banner)."""
    log = tmp / f"port0-{host.replace(':', '_')}.log"
    command = serve_command("--transport", "streamable-http", "--host", host, "--port", "0", "--db", str(tmp / "m.db"))
    with log.open("wb") as err:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=server_env(env)
        )
    server = HttpServer(proc, "streamable-http", host, 0, tmp / "m.db", log)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and server.alive():
        found = BANNER.search(server.stderr())
        if found:
            return server, found.group(1)
        time.sleep(0.05)
    server.terminate()
    raise AssertionError(f"no banner:\n{server.stderr()}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, str]]:
    """A server on --port 0 with a padded token in its variable and a token file starting with a BOM."""
    tmp = tmp_path_factory.mktemp("served")
    (tmp / "tokens").write_bytes(("\ufeff" + f"{BOUND} alpha\n").encode())
    env = {"MCP_MEMORY_AUTH_TOKEN": f"{TOKEN} \n", "MCP_MEMORY_AUTH_TOKEN_FILE": str(tmp / "tokens")}
    server, url = _start_on_port_zero(tmp, env=env)
    try:
        yield server, url
    finally:
        server.terminate()


@pytest.fixture(scope="module")
def start_ups(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Start-ups that must fail, run side by side once (each costs a second of CPU); tests read their own."""
    tmp = tmp_path_factory.mktemp("start_ups")
    (tmp / "empty").write_text("# tokens go here\n\n   \n")
    db = ["--db", str(tmp / "m.db")]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        busy = str(blocker.getsockname()[1])
        cases: dict[str, list[str]] = {
            "no-tokens": ["--transport", "streamable-http", "--port", "0", "--auth-token-file", str(tmp / "empty")],
            "in-use": ["--transport", "streamable-http", "--port", busy, "--log-level", "CRITICAL"],
            "unknown-host": ["--transport", "sse", "--host", "no.such.host.invalid", "--port", busy, "--insecure"],
        }
        done = run_clis([([*args, *db], None) for args in cases.values()])
    return dict(zip(cases, done, strict=True))


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr
    return done.stderr.strip().splitlines()[-1]


# 1. A token file without tokens


def test_a_token_file_without_tokens_refuses_to_start(start_ups: dict[str, subprocess.CompletedProcess[str]]) -> None:
    done = start_ups["no-tokens"]
    assert done.returncode == 2
    assert re.fullmatch(
        r"mcp-memory: --auth-token-file: no tokens in /\S+/empty \(expected lines of .*\)", _last_line(done)
    )


@pytest.mark.parametrize("content", ["", "# nothing yet\n", "\n  \n# a comment\n"])
def test_load_grants_refuses_a_file_without_tokens(tmp_path: Path, content: str) -> None:
    with pytest.raises(ValueError, match=f"^--auth-token-file: no tokens in {tmp_path / 'tokens'} "):
        _grants_of(tmp_path, content)


# 2. IPv6 literals


def test_url_host_brackets_ipv6_literals() -> None:
    hosts = ("::1", "127.0.0.1", "memory.example.com", "")
    assert [url_host(h) for h in hosts] == ["[::1]", "127.0.0.1", "memory.example.com", "0.0.0.0"]


def test_build_server_with_a_token_accepts_an_ipv6_host(tmp_path: Path) -> None:
    for host in ("::1", "fe80::1%eth0"):
        server = build_server(Settings(db=tmp_path / "m.db", host=host, port=8765), grants=[Grant(TOKEN)])
        assert server.name == "mcp-memory"


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_ipv6_host_with_a_token_serves_and_checks_it(tmp_path: Path) -> None:
    server, url = _start_on_port_zero(tmp_path, host="::1", env={"MCP_MEMORY_AUTH_TOKEN": TOKEN})
    try:
        assert re.fullmatch(r"http://\[::1\]:[1-9]\d*/mcp", url)
        with httpx2.Client(trust_env=False, timeout=10) as http:
            assert http.post(url, json=INITIALIZE, headers=JSON_HEADERS).status_code == 401
            assert http.post(url, json=INITIALIZE, headers=JSON_HEADERS | bearer(TOKEN)).status_code == 200
    finally:
        server.terminate()


# 3. One token listed twice


@pytest.mark.parametrize("second", ["beta bot-b", "alpha bot-a"])
def test_a_token_listed_twice_names_the_file_and_both_lines(tmp_path: Path, second: str) -> None:
    # Refused whether or not the second line binds it differently: a token is listed once.
    tokens = tmp_path / "tokens"
    expected = f"{tokens}:3: the same token as {tokens}:1; list each token once"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _grants_of(tmp_path, f"{BOUND} alpha bot-a\n# the same again\n{BOUND} {second}\n")


def test_a_token_in_the_file_and_the_variable_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} alpha\n")
    settings = _resolve("--auth-token-file", str(tokens), env={"MCP_MEMORY_AUTH_TOKEN": TOKEN})
    with pytest.raises(ValueError, match=f"^{tokens}:1: the same token as --auth-token / MCP_MEMORY_AUTH_TOKEN;"):
        load_grants(settings)


# 4. Whitespace and a byte-order mark around tokens


def test_token_whitespace_and_bom_are_stripped(tmp_path: Path) -> None:
    for raw in (f" {TOKEN} \n", f"\ufeff{TOKEN}\r\n"):
        token = _resolve(env={"MCP_MEMORY_AUTH_TOKEN": raw}).auth_token
        assert token is not None
        assert token.get_secret_value() == TOKEN
    grants = _grants_of(tmp_path, ("\ufeff" + f"{BOUND}  alpha  bot\r\n").encode())
    assert grants == [Grant(BOUND, "alpha", "bot")]


def test_padded_variable_token_and_bom_file_token_are_accepted(served: tuple[HttpServer, str]) -> None:
    _, url = served
    with httpx2.Client(trust_env=False, timeout=10) as http:
        statuses = [
            http.post(url, json=INITIALIZE, headers=JSON_HEADERS | bearer(token)).status_code
            for token in (None, TOKEN, BOUND)
        ]
    assert statuses == [401, 200, 200]


# 5. Unreadable files and short tokens name the file (and line)


def test_a_binary_token_file_names_the_file_and_line(tmp_path: Path) -> None:
    expected = f"--auth-token-file: {tmp_path / 'tokens'}:2: not UTF-8 text (byte {len(BOUND) + 1})"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _grants_of(tmp_path, f"{BOUND}\n".encode() + b"\xff\xfe\x00garbage")


def test_a_short_token_names_the_file_and_line(tmp_path: Path) -> None:
    expected = f"{tmp_path / 'tokens'}:3: a bearer token must be at least 16 characters"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _grants_of(tmp_path, f"{BOUND}\n\nshorty alpha\n")


def test_a_token_no_client_can_send_names_its_character(tmp_path: Path) -> None:
    expected = f"{tmp_path / 'tokens'}:2: a bearer token must be printable ASCII, not U+00E4"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _grants_of(tmp_path, f"{BOUND}\npässwort-0123456789abcdef\n".encode())


# 6. Port 0 and a port in use


def test_port_zero_banner_names_the_port_it_listens_on(served: tuple[HttpServer, str]) -> None:
    server, url = served
    port = int(url.rsplit(":", 1)[1].removesuffix("/mcp"))
    assert port != 0
    assert url == f"http://127.0.0.1:{port}/mcp"
    assert f"URL: http://127.0.0.1:{port}/mcp" in server.stderr()  # the Inspector hint too
    with httpx2.Client(trust_env=False, timeout=10) as http:
        assert http.get(f"http://127.0.0.1:{port}/healthz").status_code == 200


def test_a_port_in_use_exits_with_one_line_even_at_critical(
    start_ups: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    done = start_ups["in-use"]
    assert done.returncode == 1
    assert re.fullmatch(r"mcp-memory: cannot listen on 127\.0\.0\.1:\d+: address already in use", done.stderr.strip())


def test_an_unknown_host_name_exits_with_one_line(start_ups: dict[str, subprocess.CompletedProcess[str]]) -> None:
    done = start_ups["unknown-host"]
    assert done.returncode == 1
    assert _last_line(done).startswith("mcp-memory: cannot listen on no.such.host.invalid:")
    assert "serving" not in done.stderr


# 7. Environment values among fixed choices ignore case, as flags do


def test_environment_choices_ignore_case_like_flags() -> None:
    env = {
        "MCP_MEMORY_TRANSPORT": "SSE",
        "MCP_MEMORY_SYNCHRONOUS": "FULL",
        "MCP_MEMORY_TOOLS": "Core",
        "MCP_MEMORY_EMBEDDINGS": "None",
        "MCP_MEMORY_LOG_LEVEL": "debug",
    }
    settings = _resolve(env=env)
    picked = (settings.transport, settings.synchronous, settings.tools, settings.embeddings, settings.log_level)
    assert picked == ("sse", "full", "core", "none", "DEBUG")
    assert _resolve("--transport", "Streamable-HTTP").transport == "streamable-http"
    assert _resolve(env={"MCP_MEMORY_TRANSPORT": "Streamable-HTTP"}).transport == "streamable-http"


def test_a_choice_no_flag_accepts_is_refused_from_the_environment_too() -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--transport", "http"])
    with pytest.raises(ValueError, match=r"^MCP_MEMORY_TRANSPORT: Input should be 'stdio', 'sse' or 'streamable-http'"):
        _resolve(env={"MCP_MEMORY_TRANSPORT": "HTTP"})


# 8. Database paths: variables expanded, an unset one or an empty path refused


def test_variables_in_db_paths_are_expanded(tmp_path: Path) -> None:
    env = {"DATA_DIR": str(tmp_path)}
    assert _resolve("--db", "$DATA_DIR/flag.db", env=env).db == tmp_path / "flag.db"
    assert _resolve(env={**env, "MCP_MEMORY_DB": "${DATA_DIR}/env.db"}).db == tmp_path / "env.db"
    assert _resolve("--auth-token-file", "$DATA_DIR/tokens", env=env).auth_token_file == tmp_path / "tokens"


def test_an_unset_variable_in_a_db_path_is_named() -> None:
    expected = "MCP_MEMORY_DB: environment variable NOPE_UNSET (in '$NOPE_UNSET/m.db') is not set"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _resolve(env={"MCP_MEMORY_DB": "$NOPE_UNSET/m.db"})


@pytest.mark.parametrize("path", ["${HOME", "${HOME/m.db", "${}/m.db"])
def test_an_unclosed_or_nameless_variable_in_a_db_path_is_refused(path: str) -> None:
    expected = f"--db: ${{ without a variable name and a closing }} (in {path!r})"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _resolve("--db", path, env={"HOME": "/home/someone"})


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_db_path_is_refused(empty: str) -> None:
    expected = "--db: an empty path names no file"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _resolve("--db", empty)


# 9. A local embedding model that cannot load


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is not None, reason="sentence-transformers is installed"
)
def test_missing_sentence_transformers_warns_at_start_up(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcp_memory"):
        _warn_missing_embeddings(Settings(db=tmp_path / "m.db", embeddings="none"))
        assert caplog.records == []
        _warn_missing_embeddings(Settings(db=tmp_path / "m.db", embeddings="sentence-transformers"))
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "sentence-transformers package is not installed, so searches use BM25 only" in record.getMessage()
