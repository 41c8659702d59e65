"""Reflect tells one error hit by different commands by the error it states, not the command."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_memory.services.reflect_findings import error_signature
from tests.conftest import call

pytestmark = pytest.mark.anyio
SINCE = "2025-01-01T00:00:00Z"
DENIED = "PermissionError: [Errno 13] Permission denied: '/var/lib/app'"


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        (
            "pytest tests/ failed: ModuleNotFoundError: No module named 'requests'",
            "ModuleNotFoundError: No module named 'requests'",
        ),
        (
            'Traceback (most recent call last):\n  File "a.py", line 3\n    raise StorageError(why)\n'
            "StorageError: disk is full\n",
            "StorageError: disk is full",
        ),
        ("TypeError: expected str, got ValueError instead", "TypeError: expected str, got ValueError instead"),
        ("cargo build: error[E0308]: mismatched types", "error[E0308]: mismatched types"),
        ("git push: fatal: not a git repository", "fatal: not a git repository"),
        ("ValueError", None),  # names an error but says nothing of it
        ("the build broke again", None),
    ],
)
def test_the_error_an_observation_states(text: str, statement: str | None) -> None:
    assert error_signature(text) == statement


async def test_one_error_hit_by_three_commands_is_one_anti_pattern_named_by_the_error(client: Client) -> None:
    for i, command in enumerate(
        ("pytest tests/test_api.py failed", "python -m app.server crashed on start", "mcp-memory serve")
    ):
        await call(
            client,
            "memory_observe",
            content=f"{command}: ModuleNotFoundError: No module named 'requests'",
            type="error",
            session_id=f"s{i}",
        )
    await call(
        client,
        "memory_observe",
        content="Installed requests with pip; the import works now",
        type="decision",
        session_id="s0",
    )
    found = await call(client, "memory_reflect", since=SINCE)
    assert [(a["content"], a["context"]) for a in found["anti_patterns"]] == [
        (
            "Recurring error: ModuleNotFoundError: No module named 'requests'",
            "Seen 3 times. Fixed by: Installed requests with pip; the import works now",
        )
    ]
    assert len(found["anti_patterns"][0]["source"]["evidence"]) == 3


async def test_tracebacks_ending_in_one_exception_recur_whatever_their_frames(client: Client) -> None:
    for i, frame in enumerate(("load_config in settings.py", "save_report in reports/writer.py")):
        await call(
            client,
            "memory_observe",
            content=f"Traceback (most recent call last):\n  File {frame}\n{DENIED}",
            type="error",
            session_id=f"s{i}",
        )
    found = await call(client, "memory_reflect", since=SINCE)
    assert [a["content"] for a in found["anti_patterns"]] == [f"Recurring error: {DENIED}"]


async def test_different_errors_of_one_type_from_one_command_stay_apart(client: Client) -> None:
    for i, message in enumerate(
        ("invalid literal for int() with base 10: 'abc'", "too many values to unpack (expected 2)")
    ):
        await call(
            client,
            "memory_observe",
            content=f"python import_users.py: ValueError: {message}",
            type="error",
            session_id=f"s{i}",
        )
    found = await call(client, "memory_reflect", since=SINCE)
    assert found["anti_patterns"] == []
    assert "2 errors recorded" in " ".join(found["insights"])
