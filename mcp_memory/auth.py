"""Bearer tokens for the HTTP transports, checked through the SDK's token-verifier hook.

A token may be bound to a project (and an agent id): calls made with it act in that project and
can never name another. Tokens come from `--auth-token` / `MCP_MEMORY_AUTH_TOKEN` (unbound) and
from `--auth-token-file`, one per line: `TOKEN [PROJECT [AGENT_ID]]`, `#` starting a comment.
Whether a bind address may be served with the tokens configured is decided here too.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mcp_memory.config import Settings
from mcp_memory.errors import InvalidInputError
from mcp_memory.projects import check_project

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

MIN_TOKEN_LENGTH = 16
WILDCARD = ("0.0.0.0", "::", "")


@dataclass(frozen=True, slots=True)
class Grant:
    """What one token allows: any project (None) or one, acting as an agent id or not."""

    token: str
    project: str | None = None
    agent_id: str | None = None


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (localhost, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_grants(settings: Settings) -> list[Grant]:
    """The tokens of an HTTP server whose settings are safe to serve; raises ValueError naming the way out.

    Needs nothing of the MCP SDK, so the CLI refuses a bad configuration before importing it.
    """
    grants = load_grants(settings)
    if not is_loopback(settings.host) and not grants and not settings.insecure:
        raise ValueError(
            f"--host / MCP_MEMORY_HOST {settings.host}: refusing to serve a non-loopback address without a token; set "
            "MCP_MEMORY_AUTH_TOKEN (or --auth-token-file), or pass --insecure to accept the risk"
        )
    if settings.host in WILDCARD and not settings.allowed_hosts:
        raise ValueError(
            f"--host / MCP_MEMORY_HOST {settings.host or '(all)'}: name the Host values clients will use with "
            "--allowed-hosts "
            "/ MCP_MEMORY_ALLOWED_HOSTS (e.g. memory.example.com:*), so DNS-rebinding protection can stay on"
        )
    return grants


def load_grants(settings: Settings) -> list[Grant]:
    """Every configured token; raises ValueError naming the file and line of a bad entry.

    A token file that names no token is refused: serving it would turn authentication off.
    A token may appear once only, so which project it binds to is never a matter of line order.
    """
    grants: list[tuple[str, Grant]] = []  # (where it was configured, grant)
    if settings.auth_token is not None:
        grants.append(("--auth-token / MCP_MEMORY_AUTH_TOKEN", Grant(settings.auth_token.get_secret_value())))
    if settings.auth_token_file is not None:
        path: Path = settings.auth_token_file
        file_grants = [(f"{path}:{number}", grant) for number, grant in _read_token_file(path)]
        if not file_grants:
            raise ValueError(f"--auth-token-file: no tokens in {path} (expected lines of TOKEN [PROJECT [AGENT_ID]])")
        grants += file_grants
    seen: dict[str, str] = {}
    for where, grant in grants:
        if len(grant.token) < MIN_TOKEN_LENGTH:
            raise ValueError(f"{where}: a bearer token must be at least {MIN_TOKEN_LENGTH} characters")
        # HTTP headers are read as Latin-1 and clients send UTF-8 or refuse: such a token never matches
        if odd := next((c for c in grant.token if not (c.isascii() and c.isprintable())), None):
            raise ValueError(f"{where}: a bearer token must be printable ASCII, not U+{ord(odd):04X}")
        if grant.token in seen:
            raise ValueError(f"{where}: the same token as {seen[grant.token]}; list each token once")
        seen[grant.token] = where
    return [grant for _, grant in grants]


def _read_token_file(path: Path) -> list[tuple[int, Grant]]:
    """The grants of a token file with their line numbers; raises ValueError naming the file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"--auth-token-file: cannot read {path}: {exc.strerror}") from None
    try:
        # utf-8-sig: an editor's byte-order mark would otherwise become part of the first token.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        at = raw[: exc.start].count(b"\n") + 1
        raise ValueError(f"--auth-token-file: {path}:{at}: not UTF-8 text (byte {exc.start})") from None
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) > 3:
            raise ValueError(f"{path}:{number}: expected TOKEN [PROJECT [AGENT_ID]]")
        if len(fields) > 1:
            try:
                fields[1] = check_project(fields[1])
            except InvalidInputError as exc:
                raise ValueError(f"{path}:{number}: project {exc.rule}") from None
        found.append((number, Grant(*fields)))
    return found


class StaticTokenVerifier:
    """The SDK `TokenVerifier` for configured tokens; the comparison is timing-safe."""

    def __init__(self, grants: list[Grant]) -> None:
        self._grants = [(grant.token.encode(), grant) for grant in grants]

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access a token grants, or None for an unknown token."""
        offered = token.encode()
        found = None
        for secret, grant in self._grants:
            # Compare with every token (no early exit), so timing says nothing about which matched.
            if hmac.compare_digest(secret, offered):
                found = grant
        if found is None:
            return None
        # Imported here: the rest of this module serves the CLI's checks, which run before the SDK is loaded.
        from mcp.server.auth.provider import AccessToken

        return AccessToken(
            token=token,
            # Each token its own principal, so the SDK never lets one token use another's session: not
            # the agent id, which two tokens (of two projects) may share; that stays a claim.
            client_id="token-" + hashlib.sha256(found.token.encode()).hexdigest()[:16],
            scopes=[],
            claims={"project": found.project, "agent_id": found.agent_id},
        )
