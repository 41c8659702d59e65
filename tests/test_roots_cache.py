"""A client's MCP roots are asked once per connection, not once per call, and again after roots/list_changed."""

from __future__ import annotations

import warnings
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, ErrorData, ListRootsResult, Root

from mcp_memory.config import Settings
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call


class Workspace:
    """A client's roots: one folder, which the test may switch; counts the roots/list requests it answers."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.asked = 0

    async def list_roots(self, _: ClientRequestContext) -> ListRootsResult:
        self.asked += 1
        return ListRootsResult(roots=[Root(uri=self.folder.as_uri(), name="workspace")])


def _folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder


async def _project(client: Client) -> str:
    return str((await call(client, "memory_observations"))["project"])


async def test_roots_are_asked_once_per_connection(settings: Settings, clock: FakeClock, tmp_path: Path) -> None:
    workspace = Workspace(_folder(tmp_path, "alpha-ws"))
    server = build_server(settings, clock)
    async with Client(server, list_roots_callback=workspace.list_roots, mode="legacy") as client:
        assert await _project(client) == "alpha-ws"
        await call(client, "memory_save", content="Roots are asked once.")
        await call(client, "memory_recall", query="roots")
        assert await _project(client) == "alpha-ws"
        assert workspace.asked == 1
    async with Client(server, list_roots_callback=workspace.list_roots, mode="legacy") as client:
        assert await _project(client) == "alpha-ws"
        assert await _project(client) == "alpha-ws"
    assert workspace.asked == 2  # a new connection asks again, once


async def test_concurrent_first_calls_ask_for_roots_once(settings: Settings, clock: FakeClock, tmp_path: Path) -> None:
    workspace = Workspace(_folder(tmp_path, "alpha-ws"))
    projects: list[str] = []

    async def observe(client: Client) -> None:
        projects.append(await _project(client))

    server = build_server(settings, clock)
    async with (
        Client(server, list_roots_callback=workspace.list_roots, mode="legacy") as client,
        anyio.create_task_group() as tg,
    ):
        for _ in range(4):
            tg.start_soon(observe, client)
    assert projects == ["alpha-ws"] * 4
    assert workspace.asked == 1


async def test_roots_list_changed_makes_the_next_call_ask_again(
    settings: Settings, clock: FakeClock, tmp_path: Path
) -> None:
    workspace = Workspace(_folder(tmp_path, "alpha-ws"))
    beta = _folder(tmp_path, "beta-ws")
    async with Client(build_server(settings, clock), list_roots_callback=workspace.list_roots, mode="legacy") as client:
        assert await _project(client) == "alpha-ws"
        workspace.folder = beta
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots and ping are deprecated on the 2026-07-28 protocol, not this one
            await client.send_roots_list_changed()
            await client.send_ping()  # the notification is read before the ping it preceded is answered
        assert await _project(client) == "beta-ws"
        assert await _project(client) == "beta-ws"
    assert workspace.asked == 2


async def test_a_client_that_cannot_list_roots_is_asked_once_and_gets_the_default(
    settings: Settings, clock: FakeClock
) -> None:
    asked = 0

    async def failing(_: ClientRequestContext) -> ErrorData:
        nonlocal asked
        asked += 1
        raise MCPError(code=INTERNAL_ERROR, message="no roots here")

    async with Client(build_server(settings, clock), list_roots_callback=failing, mode="legacy") as client:
        assert [await _project(client) for _ in range(3)] == ["test"] * 3
    assert asked == 1
