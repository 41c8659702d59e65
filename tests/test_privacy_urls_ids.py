"""URL passwords holding any punctuation are redacted whole, and a session id or project name that
holds a secret is refused (never stored) on every path: tool arguments and imports."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.privacy import PrivacyFilter
from mcp_memory.server import build_server
from tests.conftest import call, call_error
from tests.test_privacy_flow import _raw_bytes

F = PrivacyFilter()
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
AT_PASSWORD = "p@ssW0rd9" + "@x"  # two `@`: only the last one before the host ends it
SLASH_PASSWORD = "Xk9/vT2" + "qL7"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"postgres://admin:{AT_PASSWORD}@db.example.com:5432/app",
            "postgres://admin:[REDACTED:url_password]@db.example.com:5432/app",
        ),
        (
            f"https://deploy:{SLASH_PASSWORD}@git.example.com/repo.git",
            "https://deploy:[REDACTED:url_password]@git.example.com/repo.git",
        ),
        ("https://u:a/b@c@" + "host/x", "https://u:[REDACTED:url_password]@host/x"),
        ("https://u:ab:" + "cd9@host", "https://u:[REDACTED:url_password]@host"),
        # An `@` in the path after the host is not the host's.
        (
            "https://tok:x9" + "@registry.npmjs.org/@babel/core",
            "https://tok:[REDACTED:url_password]@registry.npmjs.org/@babel/core",
        ),
        (
            "git+https://user:t0ken9" + "@github.com/org/repo.git@v1.0#egg=x",
            "git+https://user:[REDACTED:url_password]@github.com/org/repo.git@v1.0#egg=x",
        ),
        # An email address as the user.
        (
            "smtp://me@gmail.com:appPw9" + "@smtp.gmail.com:587",
            "smtp://me@gmail.com:[REDACTED:url_password]@smtp.gmail.com:587",
        ),
        ("http://u:p9" + "@[::1]:80/", "http://u:[REDACTED:url_password]@[::1]:80/"),
    ],
)
def test_a_url_password_is_redacted_whole_whatever_punctuation_it_holds(text: str, expected: str) -> None:
    result = F.clean(text)
    assert result.text == expected
    assert result.counts == {"url_password": 1}
    assert F.clean(result.text).text == result.text  # cleaning again changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "https://host/path@x",
        "https://host:8080/path@x",
        "http://localhost:4873/@scope/pkg",
        "https://bob@host.com/x",
        "https://bob@host.com:443/x@y",
        "https://host:8080?next=a@b",
        "http://[::1]:8080/x@y",
        "https://example.com/a:b@c",
        "file:///home/me:x/y@z",
        "mailto:bob@example.com",
        "write to bob@example.com or alice@example.org",
        "https://u:@host",
    ],
)
def test_a_url_or_address_without_a_password_is_left_alone(text: str) -> None:
    assert F.clean(text).text == text


def test_hostile_url_like_text_is_cleaned_quickly() -> None:
    texts = [
        "://" + "a" * 100_000,
        "://a:" + "b/" * 50_000,
        "://a:" + "@" * 100_000,
        "://a:" * 20_000,
        ("://u:" + ("a" * 255 + "/") * 17) * 23,
        ("://u:" + "a/" * 17 + "a" * 255) * 340,
        "://" + "@:" * 50_000,
    ]
    start = time.process_time()
    for text in texts:
        F.clean(text)
    assert time.process_time() - start < 5.0


async def test_url_passwords_with_at_or_slash_never_reach_the_store(client: Client, settings: Settings) -> None:
    observed = await call(
        client, "memory_observe", content=f"DATABASE_URL=postgres://admin:{AT_PASSWORD}@db.example.com:5432/app"
    )
    saved = await call(client, "memory_save", content=f"Remote is https://deploy:{SLASH_PASSWORD}@git.example.com/r")
    assert observed["redacted"] == {"url_password": 1}
    assert saved["redacted"] == {"url_password": 1}

    text = json.dumps(await call(client, "memory_export", all_projects=True))
    assert "postgres://admin:[REDACTED:url_password]@db.example.com:5432/app" in text
    assert "https://deploy:[REDACTED:url_password]@git.example.com/r" in text
    for piece in ("ssW0rd9", "vT2qL7"):
        assert piece not in text
        assert piece.encode() not in _raw_bytes(settings)
        assert (await call(client, "memory_smart_search", query=piece))["hits"] == []


def test_a_token_after_a_hyphen_or_underscore_is_still_a_token() -> None:
    for joint in ("-", "_", "."):
        assert F.clean(f"conv{joint}{TOKEN}").text == f"conv{joint}[REDACTED:github_token]"
    # A short prefix that also ends words must still start one.
    assert F.clean("fdisk-sk-partition-table-2024-v1").counts == {}


async def test_a_session_id_holding_a_secret_is_refused_and_nothing_is_stored(
    client: Client, settings: Settings
) -> None:
    name = f"conv-{TOKEN}"
    message = await call_error(client, "memory_observe", content="named session", session_id=name)
    assert "session_id: looks like it contains a secret (github_token)" in message
    assert TOKEN not in message

    # A memory can only name a stored session, and no such session could be stored: the error
    # saying so (which is logged too) quotes the name with its secret redacted.
    missing = await call_error(client, "memory_save", content="a fact", session_id=name)
    assert "No session 'conv-[REDACTED:github_token]' in this project" in missing
    assert (await call(client, "memory_sessions"))["sessions"] == []
    assert TOKEN.encode() not in _raw_bytes(settings)
    assert TOKEN not in json.dumps(await call(client, "memory_export", all_projects=True))


async def test_a_project_name_holding_a_secret_is_refused_by_every_tool(client: Client, settings: Settings) -> None:
    project = f"proj-{TOKEN}"
    for tool, arguments in (
        ("memory_observe", {"content": "project probe"}),
        ("memory_save", {"content": "a fact"}),
        ("memory_recall", {"query": "probe"}),
    ):
        message = await call_error(client, tool, project=project, **arguments)
        assert "project: looks like it contains a secret (github_token)" in message
        assert TOKEN not in message
    assert TOKEN.encode() not in _raw_bytes(settings)


async def test_a_project_name_with_a_private_tag_is_refused(client: Client) -> None:
    message = await call_error(client, "memory_observe", content="x", project="notes <private>home")
    assert "project: must not contain a <private> tag" in message


async def test_a_non_ascii_session_id_is_refused_with_a_message_that_says_ascii(client: Client) -> None:
    message = await call_error(client, "memory_observe", content="x", session_id="conversación-1")
    assert "session_id: must be 1-128 characters of letters, digits and . _ : @ - (ASCII only" in message


@pytest.mark.parametrize("how", ["inline", "file"])
async def test_an_imported_session_id_holding_a_secret_is_refused(
    client: Client, settings: Settings, tmp_path: Path, how: str
) -> None:
    await call(client, "memory_observe", content="Chose msgpack for the wire format.", session_id="conv-1")
    text = json.dumps((await call(client, "memory_export"))["document"]).replace('"conv-1"', f'"conv-{TOKEN}"')
    assert TOKEN in text
    fresh = Settings(db=tmp_path / "fresh.db", project="test", synchronous="normal", timezone="UTC")
    message = await _import(fresh, tmp_path, text, how)
    assert "document.tables.sessions[0].id: looks like it contains a secret (github_token)" in message
    assert TOKEN not in message
    assert TOKEN.encode() not in _raw_bytes(fresh)


@pytest.mark.parametrize("how", ["inline", "file"])
async def test_an_imported_project_name_holding_a_secret_is_refused(client: Client, tmp_path: Path, how: str) -> None:
    await call(client, "memory_save", content="The API listens on port 8080.")
    text = json.dumps((await call(client, "memory_export"))["document"]).replace('"test"', f'"proj-{TOKEN}"')
    assert TOKEN in text
    fresh = Settings(db=tmp_path / "fresh.db", project="test", synchronous="normal", timezone="UTC")
    message = await _import(fresh, tmp_path, text, how)
    assert "project: looks like it contains a secret (github_token)" in message
    assert TOKEN not in message
    assert TOKEN.encode() not in _raw_bytes(fresh)


async def _import(settings: Settings, tmp_path: Path, text: str, how: str) -> str:
    """Import `text` into a fresh store, inline or from a file, expecting a refusal; its message."""
    async with Client(build_server(settings)) as fresh:
        if how == "inline":
            return await call_error(fresh, "memory_import", document=json.loads(text))
        source = tmp_path / "export.json"
        source.write_text(text, encoding="utf-8")
        return await call_error(fresh, "memory_import", path=str(source))
