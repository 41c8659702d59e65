"""Command line: `mcp-memory [serve] [options]`; every option also has an environment variable."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from collections.abc import Sequence
from typing import Any, get_args

from mcp_memory import __version__
from mcp_memory.auth import http_grants
from mcp_memory.config import DEFAULT_DB_TEXT, SHOWN_DEFAULTS, Settings, url_host
from mcp_memory.errors import MCPMemoryError

logger = logging.getLogger("mcp_memory")


def _options(default: Any) -> argparse.ArgumentParser:
    """Every setting as an option; `default` is what an option left out leaves in the namespace."""
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("options (each also read from the environment variable shown)")
    for name, field in Settings.model_fields.items():
        flag, env = Settings.option_name(name), Settings.env_name(name)
        help_text = f"{field.description} [env {env}; default {_shown_default(name)}]"
        kwargs: dict[str, Any] = {"dest": name, "default": default, "help": help_text}
        choices = get_args(field.annotation)
        if field.annotation is bool or set(choices) == {bool, type(None)}:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif choices and all(isinstance(c, str) for c in choices):
            # Case-insensitive: `--log-level debug` names the same level as DEBUG.
            by_lower = {c.lower(): c for c in choices}
            kwargs["type"] = lambda value, by_lower=by_lower: by_lower.get(value.lower(), value)
            kwargs["choices"] = choices
        group.add_argument(flag, **kwargs)
    return options


def _shown_default(name: str) -> str:
    """A setting's default as --help words it: one worked out at run time in words, never a bare None or []."""
    if name in SHOWN_DEFAULTS:
        return SHOWN_DEFAULTS[name]
    try:
        value = Settings.model_fields[name].get_default(call_default_factory=True)
    except RuntimeError:  # the database's default needs a home directory; --help and --version do not
        return DEFAULT_DB_TEXT
    return "none" if value is None else str(value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-memory",
        description="mcp-memory: a Model Context Protocol server that gives AI agents durable memory.",
        epilog="Runs `serve` when no command is given. Logs go to stderr; under stdio, stdout is the protocol.",
        parents=[_options(None)],
    )
    parser.add_argument("--version", action="version", version=f"mcp-memory {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command")
    commands.add_parser(
        # SUPPRESS: an option left out after `serve` must not overwrite one given before it.
        "serve",
        parents=[_options(argparse.SUPPRESS)],
        help="run the MCP server (the default)",
        description="Run the MCP server.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `mcp-memory` command."""
    try:
        return _run(argv)
    except KeyboardInterrupt:  # Ctrl-C while starting (importing the SDK takes seconds) or while serving
        return 0


def _run(argv: Sequence[str] | None) -> int:
    """Parse the command line, refuse a bad configuration in one line, else serve until stopped."""
    args = _parser().parse_args(argv)
    cli = {name: getattr(args, name, None) for name in Settings.model_fields}
    try:
        settings = Settings.resolve(cli)
        # refused here, before the seconds of importing the transports below
        grants = http_grants(settings) if settings.transport != "stdio" else []
    except ValueError as exc:
        print(f"mcp-memory: {exc}", file=sys.stderr)  # noqa: T201 - the CLI's own error output
        return 2
    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logger.info("database %s", settings.db)
    _warn_missing_embeddings(settings)
    _warn_http_only(settings)
    if unknown := Settings.unknown_variables():
        logger.warning("ignored, no such setting: %s", ", ".join(unknown))

    def announce(port: int) -> None:
        print(_banner(settings, port), file=sys.stderr, flush=True)  # noqa: T201 - the person starting it reads this

    # Imported here, not at the top: the MCP SDK and the web stack take seconds to import, which
    # `--help`, `--version` and a refused configuration should not wait for.
    from mcp_memory.transports import ListenError, serve

    try:
        return serve(settings, grants, announce)
    except (MCPMemoryError, ListenError) as exc:  # no database or no port: one line, not a traceback
        print(f"mcp-memory: {exc}", file=sys.stderr)  # noqa: T201 - the CLI's own error output
        return 1


_HTTP_ONLY = ("host", "port", "auth_token", "auth_token_file", "insecure", "allowed_hosts", "allowed_origins",
              "max_request_bytes")  # fmt: skip


def _warn_http_only(settings: Settings) -> None:
    """Say that options of the HTTP transports do nothing under stdio: `serve --port 9000` would
    otherwise sit silently reading stdin, and a token meant to protect it protects nothing."""
    if settings.transport != "stdio":
        return
    given = [
        name
        for name in _HTTP_ONLY
        if getattr(settings, name) != Settings.model_fields[name].get_default(call_default_factory=True)
    ]
    if given:
        named = ", ".join(f"--{name.replace('_', '-')}" for name in given)
        logger.warning("%s: for --transport sse or streamable-http only; serving stdio, they are ignored", named)
    if sys.stdin is not None and sys.stdin.isatty():
        logger.info(
            "serving MCP over stdio (for a client that starts this command); --transport streamable-http serves a URL"
        )


def _warn_missing_embeddings(settings: Settings) -> None:
    """Say at start-up, not at the first embedding, that a configured local model cannot be loaded."""
    # find_spec only looks for the package: importing it (and torch) would take seconds here.
    if settings.embeddings == "sentence-transformers" and importlib.util.find_spec("sentence_transformers") is None:
        logger.warning(
            "--embeddings sentence-transformers: the sentence-transformers package is not installed, so searches "
            "use BM25 only; pip install 'mcp-memory[embeddings]'"
        )


def _banner(settings: Settings, port: int | None = None) -> str:
    """How to reach an HTTP server, printed at start-up; `port` is the one bound (the OS picks for 0)."""
    path = "/mcp" if settings.transport == "streamable-http" else "/sse"
    url = f"http://{url_host(settings.host)}:{settings.port if port is None else port}{path}"
    kind = "Streamable HTTP" if settings.transport == "streamable-http" else "SSE"
    return (
        f"mcp-memory {__version__} serving {kind} at {url}\n"
        f"  database: {settings.db}\n"
        f"  MCP Inspector: npx @modelcontextprotocol/inspector  -> Transport: {kind}, URL: {url}\n"
        "  Stop with Ctrl-C."
    )
