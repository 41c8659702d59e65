"""Real `mcp-memory serve` subprocesses for the transport tests: free ports, readiness, clean shutdown.

Every server is a child of the test process, started with a clean `MCP_MEMORY_*` environment, its
stderr captured to a file (shown when it fails to start or when a test asks), and stopped with
SIGTERM (then SIGKILL) so no test leaves a process behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
TOKEN = "unbound-token-0123456789abcdef"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a server: ours without any MCP_MEMORY_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcp_memory", "serve", *args]


@contextmanager
def initialized_stdio_server(db: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A `serve` subprocess over stdio that has answered `initialize`; killed if still running after."""
    proc = subprocess.Popen(
        serve_command("--db", str(db), *args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=server_env(),
    )
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()


@dataclass
class HttpServer:
    """One running HTTP server subprocess."""

    proc: subprocess.Popen[bytes]
    transport: str
    host: str
    port: int
    db: Path
    log: Path
    stopped: bool = field(default=False)

    @property
    def base(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The MCP endpoint: /mcp for streamable HTTP, /sse for SSE."""
        return self.base + ("/mcp" if self.transport == "streamable-http" else "/sse")

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self) -> int:
        """SIGTERM, wait for the exit (SIGKILL after a while); returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.stopped = True
        return self.proc.returncode


def start_http(
    tmp: Path,
    *,
    transport: str = "streamable-http",
    db: Path | None = None,
    host: str = "127.0.0.1",
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    name: str = "server",
) -> HttpServer:
    """Start a server on a free port and wait until /readyz answers 200 (raises with its stderr if not)."""
    db = db or tmp / "memory.db"
    for attempt in range(3):  # a free port can be taken between choosing it and binding it
        port = free_port(host)
        log = tmp / f"{name}-{port}.log"
        command = serve_command("--transport", transport, "--host", host, "--port", str(port), "--db", str(db), *args)
        with log.open("wb") as err:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=server_env(env)
            )
        server = HttpServer(proc, transport, host, port, db, log)
        try:
            wait_ready(server)
        except RuntimeError:
            server.terminate()
            if attempt < 2 and "address already in use" in server.stderr().lower():
                continue
            raise
        return server
    raise AssertionError("unreachable")


def wait_ready(server: HttpServer, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    with httpx2.Client(trust_env=False, timeout=2.0) as http:
        while time.monotonic() < deadline:
            if not server.alive():
                raise RuntimeError(f"server exited with {server.proc.returncode}:\n{server.stderr()}")
            with suppress(httpx2.TransportError):
                if http.get(server.base + "/readyz").status_code == 200:
                    return
            time.sleep(0.05)
    raise RuntimeError(f"server not ready after {timeout} s:\n{server.stderr()}")


@contextmanager
def running(tmp: Path, **kwargs: Any) -> Iterator[HttpServer]:
    """A server for the duration of the block; always stopped (and its stderr shown when it failed)."""
    server = start_http(tmp, **kwargs)
    try:
        yield server
    finally:
        code = server.terminate()
        if code not in (0, -signal.SIGTERM):
            sys.stderr.write(f"--- {server.transport} server exited with {code} ---\n{server.stderr()}\n")


def run_clis(
    runs: Sequence[tuple[Sequence[str], Mapping[str, str] | None]], timeout: float = 20.0
) -> list[subprocess.CompletedProcess[str]]:
    """Run several `mcp-memory serve ARGS` side by side to completion (start-up refusals); killed on timeout."""
    procs = [
        (
            args,
            subprocess.Popen(
                serve_command(*args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=server_env(env),
            ),
        )
        for args, env in runs
    ]
    done = []
    for args, proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        done.append(subprocess.CompletedProcess(list(args), proc.returncode, out, err))
    return done


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@asynccontextmanager
async def mcp_client(server: HttpServer, token: str | None = TOKEN, **kwargs: Any) -> AsyncIterator[Client]:
    """A connected SDK client over the server's own transport, sending `token` as a bearer token."""
    headers = bearer(token)
    if server.transport == "sse":
        async with Client(sse_client(server.url, headers=headers), **kwargs) as client:
            yield client
        return
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(server.url, http_client=http), **kwargs) as client,
    ):
        yield client


def stdio_params(db: Path, *args: str, env: Mapping[str, str] | None = None) -> StdioServerParameters:
    """A stdio server on `db` (the SDK client spawns it with a minimal environment plus `env`)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_memory", "serve", "--db", str(db), *args],
        env=dict(env) if env else None,
    )


def pid_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - exists, someone else's
        return True
    with suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)
