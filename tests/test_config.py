"""Settings come from CLI flags, then MCP_MEMORY_* variables, then defaults; --help documents all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcp_memory.cli import _parser
from mcp_memory.config import Settings


def test_cli_wins_over_environment_which_wins_over_defaults(tmp_path: Path) -> None:
    env = {"MCP_MEMORY_PROJECT": "from-env", "MCP_MEMORY_PORT": "9001", "MCP_MEMORY_DB": str(tmp_path / "e.db")}
    settings = Settings.resolve({"project": "from-cli", "db": None, "port": None}, env)
    assert settings.project == "from-cli"
    assert settings.port == 9001
    assert settings.db == tmp_path / "e.db"
    assert settings.transport == "stdio"


def test_environment_booleans_and_choices_are_parsed() -> None:
    settings = Settings.resolve({}, {"MCP_MEMORY_ALLOW_FILE_PATHS": "false", "MCP_MEMORY_TRANSPORT": "sse"})
    assert settings.allow_file_paths is False
    assert settings.transport == "sse"


def test_a_bad_value_names_its_source() -> None:
    with pytest.raises(ValueError, match="MCP_MEMORY_PORT"):
        Settings.resolve({}, {"MCP_MEMORY_PORT": "not-a-port"})
    with pytest.raises(ValueError, match="--transport"):
        Settings.resolve({"transport": "carrier-pigeon"}, {})


def test_a_setting_that_needs_another_names_the_missing_one() -> None:
    with pytest.raises(ValueError, match=r"^--embedding-model \(MCP_MEMORY_EMBEDDING_MODEL\) is required"):
        Settings.resolve({"embeddings": "openai"}, {})
    assert Settings.resolve({"embeddings": "openai", "embedding_model": "nomic-embed-text"}, {}).embedding_model


def test_default_database_lives_in_the_user_data_directory() -> None:
    settings = Settings.resolve({}, {})
    assert settings.db.name == "memory.db"
    assert "mcp-memory" in settings.db.parts[-2]


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValueError, match="frozen"):
        settings.port = 1  # type: ignore[misc]


def test_help_documents_every_option_and_its_variable() -> None:
    text = _parser().format_help()
    for name in Settings.model_fields:
        assert Settings.option_name(name) in text
        assert Settings.env_name(name) in text


def test_python_dash_m_prints_help_without_dev_tools() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_memory", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "MCP_MEMORY_DB" in done.stdout
    assert "serve" in done.stdout
