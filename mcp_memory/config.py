"""Settings: one frozen model filled from CLI flags, then `MCP_MEMORY_*` variables, then defaults.

This is the only module that reads the environment. Every field is also a command-line option
(`--field-name`) and an environment variable (`MCP_MEMORY_FIELD_NAME`), so `--help` and the README
configuration table both come from the field list below.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit, urlunsplit

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from mcp_memory.clock import local_zone_name, zone
from mcp_memory.errors import InvalidInputError
from mcp_memory.projects import check_agent_id, check_project

ENV_PREFIX = "MCP_MEMORY_"
# Settings holding a file path: `$NAME` / `${NAME}` in them are expanded (see `expand_variables`).
PATH_FIELDS = ("db", "auth_token_file")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")
# Dot-separated labels of letters, digits, _ and inner hyphens (a trailing dot allowed): no ':', '/', '@', blanks.
_HOST_NAME = re.compile(r"\w([\w-]*\w)?(\.\w([\w-]*\w)?)*\.?")

Transport = Literal["stdio", "sse", "streamable-http"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def url_host(host: str) -> str:
    """`host` as it goes in a URL: an IPv6 literal in brackets, the empty (all-interfaces) host as 0.0.0.0."""
    if not host:
        return "0.0.0.0"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def expand_variables(text: str, environ: Mapping[str, str]) -> str:
    """`$NAME` and `${NAME}` replaced by their values: a client's JSON config passes a path with no shell
    to expand it. Raises ValueError naming a variable that is not set, rather than make a folder `$NAME`."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in environ:
            raise ValueError(f"environment variable {name} (in {text!r}) is not set")
        return environ[name]

    for brace in re.finditer(r"\$\{", text):  # "${HOME" is a typo for a variable, not a folder to make
        if not _VARIABLE.match(text, brace.start()):
            raise ValueError(f"${{ without a variable name and a closing }} (in {text!r})")
    return _VARIABLE.sub(value, text)


DEFAULT_DB_TEXT = "memory.db in the per-user data directory"
SHOWN_DEFAULTS = {
    "allowed_hosts": "loopback names",
    "allowed_origins": "the allowed hosts",
    "embedding_model": "sentence-transformers/all-MiniLM-L6-v2 for sentence-transformers",
    "timezone": "the database's",
    "allow_file_paths": "stdio only",
}
"""Defaults worked out when the server runs, worded for `--help` as README's configuration table words them."""


def default_db_path() -> Path:
    """The per-user data directory's `memory.db` (e.g. ~/.local/share/mcp-memory/memory.db).

    Raises RuntimeError when there is no home directory to find it in (HOME unset, no passwd entry).
    """
    return platformdirs.user_data_path("mcp-memory", appauthor=False) / "memory.db"


class Settings(BaseModel):
    """Everything the server can be told; immutable once built."""

    # allow_inf_nan=False: every float setting is a finite quantity; "inf" or "nan" is a mistake.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    db: Path = Field(
        default_factory=default_db_path,
        description="SQLite database file (created on first run; ~ and $NAME expanded).",
    )
    project: str = Field(
        "default", min_length=1, max_length=128, description="Project namespace used when a call names none."
    )
    transport: Transport = Field(
        "stdio", description="stdio for local clients; sse or streamable-http for remote ones."
    )
    host: str = Field("127.0.0.1", description="Address the HTTP transports bind to.")
    port: int = Field(8765, ge=0, le=65535, description="Port the HTTP transports listen on (0: the OS picks one).")
    auth_token: SecretStr | None = Field(
        None, description="Bearer token every HTTP request must carry (prefer the variable: flags show in ps)."
    )
    auth_token_file: Path | None = Field(
        None,
        description="File of bearer tokens, one per line: TOKEN [PROJECT [AGENT_ID]]; a project binds the token.",
    )
    insecure: bool = Field(
        False, description="Allow serving HTTP on a non-loopback address without any token (not recommended)."
    )
    isolated: bool = Field(
        False, description="Refuse calls naming a project other than the token's or the client's roots'."
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Extra Host header values accepted, comma-separated: host or host:* (any port or none), or "
        "host:port; case-insensitive, and each also allows its http(s) Origins; loopback names always.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Extra browser Origins accepted, comma-separated: scheme://host with :port or :* (any port), "
        "no path, e.g. https://app.example.",
    )
    max_request_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="Largest HTTP request body accepted (bytes).")
    log_level: LogLevel = Field("INFO", description="Log level; logs always go to stderr.")
    tools: Literal["core", "all"] = Field(
        "all", description="Tool profile: core exposes the eight everyday tools, all exposes every tool."
    )
    agent_id: str | None = Field(
        None, max_length=128, description="Agent id recorded on writes when a call names none."
    )
    session_idle_minutes: int = Field(
        120, ge=1, description="A session with no observation for this long ends; the next starts a new one."
    )
    observation_cap: int = Field(
        500,
        ge=10,
        description="Observations kept per session; past it, the least valuable fold into the summary "
        "(down to 2%% below it).",
    )
    bm25_k1: float = Field(1.2, gt=0, description="BM25 term-frequency saturation (chosen on the LoCoMo dev set).")
    bm25_b: float = Field(0.4, ge=0, le=1, description="BM25 length normalisation (chosen on the LoCoMo dev set).")
    bm25_epsilon: float = Field(
        0.25, ge=0, description="Floor for very common terms, as a share of the mean idf (rank-bm25)."
    )
    context_before: float = Field(
        0.4, ge=0, le=2, description="Share of the scores of the records just before a record that it collects."
    )
    context_after: float = Field(
        0.2, ge=0, le=2, description="Share of the scores of the records just after a record that it collects."
    )
    context_window: int = Field(2, ge=0, le=5, description="How many neighbours on each side lend their scores.")
    session_boost: float = Field(
        0.4,
        ge=0,
        le=2,
        description="Share of its session's best score a record gets when it or a neighbour matches.",
    )
    importance_boost: float = Field(
        0.1, ge=0, le=1, description="Most a record's importance moves its score (± half this share)."
    )
    recency_boost: float = Field(0.05, ge=0, le=1, description="Most a record's recency adds to its score.")
    recency_half_life_days: float = Field(30.0, gt=0, description="Age at which the recency boost has halved.")
    # Optional embeddings for hybrid search (pip install 'mcp-memory[embeddings]' for sentence-transformers).
    embeddings: Literal["none", "sentence-transformers", "openai"] = Field(
        "none",
        description="Embedding provider for hybrid search: none, sentence-transformers (local model) or openai "
        "(any OpenAI-compatible /embeddings API, e.g. Ollama).",
    )
    embedding_model: str | None = Field(
        None,
        max_length=1_000,
        description="Model name or local folder (sentence-transformers), or model name (openai, required there).",
    )
    embedding_url: str = Field(
        "http://127.0.0.1:11434/v1", description="Base URL of the OpenAI-compatible API (default: a local Ollama)."
    )
    embedding_api_key: SecretStr | None = Field(
        None, description="API key for the OpenAI-compatible API, if it needs one (prefer the variable)."
    )
    embedding_weight: float = Field(
        0.1, ge=0, le=10, description="Weight of the vector ranking in reciprocal rank fusion (BM25's is 1)."
    )
    embedding_timeout_s: float = Field(
        10.0, gt=0, le=300, description="How long a search waits for the query's embedding before using BM25 alone."
    )
    timezone: str | None = Field(
        None,
        description="IANA time zone in which searches read dates (a record's day, what 'yesterday' means);"
        " 'localtime' is this machine's; a new database takes this machine's zone.",
    )
    synchronous: Literal["normal", "full"] = Field(
        "full",
        description="SQLite fsync policy: full survives power loss; normal survives process crashes only.",
    )
    busy_timeout_ms: int = Field(
        10_000, ge=0, description="How long, in all, a writer waits for another process's write lock."
    )
    index_cache: bool = Field(
        True, description="Save the built search index beside the database; a restart loads it instead of rebuilding."
    )
    index_cache_min_records: int = Field(
        10_000, ge=0, description="Write the index cache only for stores of at least this many indexed records."
    )

    allow_file_paths: bool | None = Field(
        None,
        description="Let memory_export / memory_import use files on the server's disk (never by default for "
        "remote callers).",
    )
    export_inline_max_rows: int = Field(
        20_000,
        ge=0,
        description="memory_export without a path refuses a document of more rows than this, which would flood "
        "the caller's context (0: no limit); a file takes any size.",
    )
    # Learning: lessons, outcomes and what is derived from them.
    lesson_confidence: float = Field(
        0.5, gt=0, le=1, description="Confidence of a newly saved lesson; must be above --lesson-fade-at."
    )
    lesson_decay_per_week: float = Field(
        0.05, ge=0, lt=1, description="Share of confidence a lesson loses per week without reinforcement."
    )
    lesson_fade_at: float = Field(
        0.1, ge=0, lt=1, description="A never-reinforced lesson at or below this confidence is soft-deleted."
    )
    similarity: float = Field(
        0.5, gt=0, le=1, description="Word-overlap (Jaccard) at which two strategies or errors count as similar."
    )
    heuristic_min_outcomes: int = Field(
        3, ge=1, description="Outcomes with a similar strategy needed before a heuristic is drawn."
    )
    heuristic_min_success: float = Field(
        0.5, ge=0, lt=1, description="A heuristic needs a success share above this (its confidence is that share)."
    )
    anti_pattern_min_failures: int = Field(
        2, ge=1, description="Failures with a similar error needed before an anti-pattern is drawn."
    )
    works_rule_score: float = Field(0.85, ge=0, le=1, description="Outcomes scoring at least this yield 'works' rules.")
    avoid_rule_score: float = Field(0.5, ge=0, le=1, description="Outcomes scoring below this yield 'avoid' rules.")
    max_rules_per_task_type: int = Field(
        20, ge=1, description="Rules of each kind kept per task type; the weakest beyond it are soft-deleted."
    )
    max_mistake_cards: int = Field(200, ge=1, description="Mistake cards kept per project; the least seen go first.")
    # Consolidation.
    promote_min_sessions: int = Field(
        3, ge=2, description="A fact recurring in this many sessions is promoted to a memory by consolidation."
    )
    outcome_retention_days: int = Field(
        180,
        ge=1,
        description="Consolidation prunes outcomes older than this that a heuristic or anti-pattern of their task type "
        "counts.",
    )
    sampling_timeout_s: float = Field(
        30.0, gt=0, le=600, description="How long crystallize/reflect wait for the client's model before falling back."
    )
    sampling_max_tokens: int = Field(
        600, ge=50, le=8_000, description="Token cap of a summary or rule list asked of the client's model."
    )
    # Slots and context.
    slot_size_limit: int = Field(
        2_000, ge=100, le=100_000, description="Default size limit of a new slot, in characters."
    )
    context_budget: int = Field(2_000, ge=100, le=100_000, description="Default token budget of memory_context.")

    @model_validator(mode="after")
    def _embedding_model_named(self) -> Settings:
        if self.embeddings == "openai" and not self.embedding_model:
            raise ValueError(
                "--embedding-model (MCP_MEMORY_EMBEDDING_MODEL) is required with --embeddings openai,"
                " e.g. nomic-embed-text"
            )
        return self

    @model_validator(mode="after")
    def _lessons_born_visible(self) -> Settings:
        # A lesson saved without a confidence starts at lesson_confidence: at or below the fade line,
        # every such lesson would be faded (hidden from recall and context) the moment it is saved.
        if self.lesson_confidence <= self.lesson_fade_at:
            raise ValueError(
                f"--lesson-confidence (MCP_MEMORY_LESSON_CONFIDENCE) must be above --lesson-fade-at"
                f" (MCP_MEMORY_LESSON_FADE_AT), got {self.lesson_confidence} and {self.lesson_fade_at}:"
                " a new lesson would be faded as soon as it is saved"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _fold_choice_case(cls, data: Any) -> Any:
        # A value among fixed choices is case-insensitive wherever it comes from, as the flags are.
        if not isinstance(data, dict):
            return data
        folded = dict(data)
        for name, value in data.items():
            field = cls.model_fields.get(name)
            choices = get_args(field.annotation) if field is not None else ()
            if isinstance(value, str) and choices and all(isinstance(c, str) for c in choices):
                folded[name] = {c.lower(): c for c in choices}.get(value.strip().lower(), value)
        return folded

    @field_validator("db", "auth_token_file", mode="before")
    @classmethod
    def _path_given(cls, value: object) -> object:
        # Path("") is ".", which would surface later as "cannot open database ."
        if isinstance(value, str) and not value.strip():
            raise ValueError("an empty path names no file")
        return value

    @field_validator("db", "auth_token_file")
    @classmethod
    def _expand_home(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        try:
            return value.expanduser()
        except RuntimeError:  # refused, rather than a folder named "~user" made in the working directory
            head = value.parts[0]
            why = "this user has no home directory (set HOME)"
            if head != "~":
                why = f"no user {head[1:]!r} on this machine"
            raise ValueError(f"cannot expand {head} in {str(value)!r}: {why}") from None

    @field_validator("host", mode="before")
    @classmethod
    def _bare_host(cls, value: object) -> object:
        return check_host(value) if isinstance(value, str) else value

    @field_validator("auth_token", mode="before")
    @classmethod
    def _strip_token(cls, value: object) -> object:
        # A token pasted with a newline or a trailing space (or a BOM) would never match the header.
        return value.strip().lstrip("\ufeff").strip() if isinstance(value, str) else value

    @field_validator("agent_id", mode="before")
    @classmethod
    def _agent_named(cls, value: object) -> object:
        # `--agent-id ""` (or spaces) names no agent: recorded, it would be an id no one can tell apart
        if isinstance(value, str):
            try:
                return check_agent_id(value)
            except InvalidInputError as exc:
                raise ValueError(exc.rule) from None
        return value

    @field_validator("project")
    @classmethod
    def _project_name(cls, value: str) -> str:
        try:
            return check_project(value)
        except InvalidInputError as exc:
            raise ValueError(exc.rule) from None

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value == "localtime":
            # the zone data's alias of whatever this machine's zone is: recorded in the database,
            # it would mean another zone on each machine that opened it, so its IANA name is kept
            return local_zone_name()
        if value is not None:
            zone(value)
        return value

    @field_validator("embedding_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_http_url(value)

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _allowed_hosts(cls, value: list[str]) -> list[str]:
        return [check_allowed_host(entry.strip()) for entry in value]

    @field_validator("allowed_origins")
    @classmethod
    def _allowed_origins(cls, value: list[str]) -> list[str]:
        return [check_allowed_origin(entry.strip()) for entry in value]

    @property
    def file_paths_allowed(self) -> bool:
        """Whether tools may read and write files on the server's disk (never by default for remote callers)."""
        return self.allow_file_paths if self.allow_file_paths is not None else self.transport == "stdio"

    @classmethod
    def option_name(cls, field: str) -> str:
        """The command-line flag of a field."""
        return "--" + field.replace("_", "-")

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable of a field."""
        return ENV_PREFIX + field.upper()

    @classmethod
    def unknown_variables(cls, environ: Mapping[str, str] | None = None) -> list[str]:
        """`MCP_MEMORY_*` variables that name no setting, each with the likeliest one it meant:
        a misspelt `MCP_MEMORY_AUTH_TOKN` would otherwise leave a server silently unprotected."""
        env = os.environ if environ is None else environ
        known = [name.upper() for name in cls.model_fields]
        found = []
        for variable in sorted(env):
            if not variable.upper().startswith(ENV_PREFIX) or variable[len(ENV_PREFIX) :] in known:
                continue
            # compared without the shared prefix, which would make every name look alike
            near = difflib.get_close_matches(variable[len(ENV_PREFIX) :].upper(), known, n=1, cutoff=0.6)
            found.append(f"{variable} (did you mean {ENV_PREFIX}{near[0]}?)" if near else variable)
        return found

    @classmethod
    def resolve(cls, cli: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings: a CLI value wins over the environment, which wins over the default.

        Raises ValueError naming the flag or variable that holds a bad value. `$NAME` in a path
        is expanded from the same environment.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        source: dict[str, str] = {}
        for name in cls.model_fields:
            if cli.get(name) is not None:
                values[name], source[name] = cli[name], cls.option_name(name)
            elif (raw := env.get(cls.env_name(name))) not in (None, ""):
                values[name], source[name] = raw, cls.env_name(name)
            if name in PATH_FIELDS and isinstance(values.get(name), str):
                try:
                    values[name] = expand_variables(values[name], env)
                except ValueError as exc:
                    raise ValueError(f"{source[name]}: {exc}") from None
        if "db" not in values:
            values["db"] = _default_db_or_refuse()
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else ""
                message = err["msg"].removeprefix("Value error, ")
                # whole-model checks have no location; their message names the setting itself
                problems.append(f"{source.get(field, field)}: {message}" if field else message)
            raise ValueError("; ".join(problems)) from None


def _default_db_or_refuse() -> Path:
    """The default database path; raises ValueError naming --db when there is no home directory for it."""
    try:
        return default_db_path()
    except RuntimeError:  # a uid with no passwd entry and no HOME (docker run --user 12345)
        raise ValueError(
            f"{Settings.option_name('db')}: no home directory to keep the default database in (set HOME);"
            f" pass --db PATH or set {Settings.env_name('db')}"
        ) from None


def check_host(host: str) -> str:
    """`host` without surrounding blanks (an IPv6 address without brackets) when it is a host name or an
    IP address, or "" (every interface); else ValueError: a URL or host:port would fail later, obscurely."""
    bare = host.strip()
    if bare.startswith("[") and bare.endswith("]"):  # an IPv6 address as written in a URL
        bare = bare[1:-1]
    try:
        return str(ipaddress.ip_address(bare))  # written the usual way: 0:0:0:0:0:0:0:0 is the wildcard ::
    except ValueError:
        pass
    if host == "" or (bare == host.strip() and len(bare) <= 253 and _HOST_NAME.fullmatch(bare)):
        return bare.lower()  # names are case-insensitive: LOCALHOST is loopback too
    raise ValueError(
        f"expected a host name or IP address (e.g. 127.0.0.1, ::1, memory.example.com), not a URL or host:port,"
        f" got {host!r}; give the port with --port"
    )


_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://(\[[^]]*\]|[^]:/?#@[]*)(?::([^:]*))?", re.IGNORECASE)


def check_allowed_host(entry: str) -> str:
    """An allowed Host value (`host`, `host:*` or `host:port`; IPv6 in brackets), else ValueError: an
    entry no Host header can equal (a URL, `*`) would refuse every request it was meant to let in."""
    if entry.startswith("["):
        base, closed, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
        shaped = bool(closed) and (not rest or port is not None)
    elif entry.count(":") == 1:
        (base, _, port), shaped = entry.partition(":"), True
    else:
        base, port, shaped = entry, None, True  # an IPv6 address without brackets has no port
    if shaped and _is_host(base) and (port is None or _is_port(port, wildcard=True)):
        return entry
    hint = " (a wildcard would let any site's pages in: name the hosts)" if "*" in base else ""
    raise ValueError(f"expected host, host:* (any port) or host:port, e.g. memory.example.com:*, got {entry!r}{hint}")


def check_allowed_origin(entry: str) -> str:
    """An allowed browser Origin (`scheme://host`, with `:port` or `:*`, no path), else ValueError: a
    browser sends exactly that form, so any other never matches."""
    match = _ORIGIN.fullmatch(entry)
    if match and _is_host(match[1].strip("[]")) and (match[2] is None or _is_port(match[2], wildcard=True)):
        return entry
    raise ValueError(f"expected scheme://host[:port], as a browser sends it (e.g. https://app.example), got {entry!r}")


def _is_host(name: str) -> bool:
    """Whether `name` is a host name or an IP address (not empty, not every interface)."""
    try:
        return check_host(name) != ""
    except ValueError:
        return False


def _is_port(port: str, *, wildcard: bool = False) -> bool:
    return (wildcard and port == "*") or (port.isdigit() and 1 <= int(port) <= 65535)


def shown_url(url: str) -> str:
    """The URL without any user:password part, for messages and logs."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def check_http_url(url: str) -> str:
    """`url` when it is an http:// or https:// URL with a host (and a port in range, if any); else ValueError."""
    parts = urlsplit(url)
    try:
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number, or out of range
        valid = False
    if not valid:
        raise ValueError(f"expected an http:// or https:// URL, got {shown_url(url)!r}")
    return url
