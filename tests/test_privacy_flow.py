"""A secret given to any tool never reaches the database file, the index or an export."""

from __future__ import annotations

import json
from pathlib import Path

from mcp import Client

from mcp_memory.config import Settings
from tests.conftest import call

TOKEN = "ghp_" + "Zx9" * 12
PASSWORD = "hunter2" + "-s3cr3t-" + "pw"
PRIVATE = "my-home-address-" + "42"


def _raw_bytes(settings: Settings) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{settings.db}{suffix}")
        if path.exists():
            data += path.read_bytes()
    return data


async def test_secrets_are_redacted_everywhere(client: Client, settings: Settings) -> None:
    observed = await call(
        client,
        "memory_observe",
        content=f"Pushed with token {TOKEN} <private>{PRIVATE}</private> and db password={PASSWORD}",
        title=f"push with {TOKEN}",
        facts=[f"the password is {PASSWORD!r}"],
        ref=f"https://bob:{PASSWORD}@example.com/log",
    )
    saved = await call(client, "memory_save", content=f"Deploy key {TOKEN} lives in the vault", concepts=[TOKEN])
    assert observed["redacted"]["github_token"] == 2
    assert observed["redacted"]["private"] == 1
    assert observed["redacted"]["password_assignment"] >= 1
    assert saved["redacted"]["github_token"] == 2

    exported = await call(client, "memory_export", all_projects=True)
    text = json.dumps(exported)
    assert "[REDACTED:github_token]" in text
    assert "[private]" in text
    for secret in (TOKEN, PASSWORD, PRIVATE):
        assert secret not in text
        assert secret.encode() not in _raw_bytes(settings)
        hits = await call(client, "memory_smart_search", query=secret)
        assert hits["hits"] == []
    stemmed_pieces = [t for t in ("zx9zx9", "hunter2", "home-address") if t in text.lower()]
    assert stemmed_pieces == []


async def test_imported_secrets_are_redacted_too(client: Client, settings: Settings) -> None:
    await call(client, "memory_save", content="A harmless memory about tea.")
    document = (await call(client, "memory_export"))["document"]
    document["tables"]["memories"][0]["content"] = f"token {TOKEN}"
    document["tables"]["memories"][0]["updated_at"] = "2999-01-01T00:00:00.000000Z"
    result = await call(client, "memory_import", document=document)
    assert result["updated"]["memories"] == 1
    assert result["redacted"] == {"github_token": 1}
    assert TOKEN.encode() not in _raw_bytes(settings)


async def test_an_imported_agent_id_or_lesson_source_loses_its_secrets(client: Client, settings: Settings) -> None:
    await call(client, "memory_save", content="A harmless memory about tea.")
    await call(client, "memory_lesson_save", content="Brew green tea below boiling.")
    document = (await call(client, "memory_export"))["document"]
    memory, lesson = document["tables"]["memories"][0], document["tables"]["lessons"][0]
    memory["agent_id"] = f"bot {TOKEN}"
    lesson["agent_id"] = f"bot {TOKEN}"
    lesson["source"] = {"via": "a script", "notes": [f"pushed with {TOKEN}"], "n": 2}
    for row in (memory, lesson):
        row["updated_at"] = "2999-01-01T00:00:00.000000Z"  # newer than the stored row: the import applies it
    result = await call(client, "memory_import", document=document)
    assert result["redacted"] == {"github_token": 3}
    assert TOKEN.encode() not in _raw_bytes(settings)
    tables = (await call(client, "memory_export"))["document"]["tables"]
    assert tables["memories"][0]["agent_id"] == "bot [REDACTED:github_token]"
    assert tables["lessons"][0]["source"] == {
        "via": "a script", "notes": ["pushed with [REDACTED:github_token]"], "n": 2,
    }  # fmt: skip


async def test_yaml_html_cli_and_disguised_secrets_never_reach_the_store(client: Client, settings: Settings) -> None:
    listed = "Lm20" + "-Vq8z-" + "Qp99"
    block = "c0Rx7" + "-Jw5k-" + "Ht4p"
    typed = "Tr0ub4" + "-Yx6n"
    flag = "Fl4g" + "-Bz3m"
    disguised = "ghp_" + "\u200b" + "Kq7" * 12
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in "ghp_" + "Wv3" * 12)
    content = (
        f"config:\n  api_keys:\n    - {listed}\n  password: |\n    {block}\n"
        f'<input type="password" value="{typed}">\n'
        f"docker login -u ci -p {flag} registry.example.com\n"
        f"tokens seen: {disguised} and {fullwidth}\n"
    )
    saved = await call(client, "memory_save", content=content)
    assert saved["redacted"] == {"password_assignment": 4, "github_token": 2}

    text = json.dumps(await call(client, "memory_export", all_projects=True), ensure_ascii=False)
    for secret in (listed, block, typed, flag, disguised, fullwidth, "Kq7Kq7", "Ｗｖ３"):
        assert secret not in text
        assert secret.encode() not in _raw_bytes(settings)
        assert (await call(client, "memory_smart_search", query=secret))["hits"] == []
