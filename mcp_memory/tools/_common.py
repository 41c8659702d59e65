"""What every tool module shares: argument types with limits, error translation, project resolution."""

from __future__ import annotations

import functools
import json
import re
import types
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, ParamSpec, TypeVar, Union, get_args, get_origin

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import ErrorDetails

from mcp_memory.context import AppContext
from mcp_memory.errors import MCPMemoryError
from mcp_memory.privacy import redacted
from mcp_memory.services.compress import CONCEPT_CHARS, FILE_CHARS

P = ParamSpec("P")
R = TypeVar("R")

Ctx = Context[AppContext, Any]

Project = Annotated[
    str | None,
    Field(max_length=128, description="Project namespace; omit to use the server's configured project."),
]
Limit = Annotated[int, Field(ge=1, le=100, description="Maximum number of results (1-100).")]
Offset = Annotated[int, Field(ge=0, le=1_000_000, description="Results to skip, for paging.")]
Query = Annotated[
    str,
    Field(min_length=1, max_length=2_000, description="Plain-text question or keywords (no query syntax)."),
]
Title = Annotated[str | None, Field(max_length=300, description="Short title; extracted from the content if omitted.")]
Ref = Annotated[
    str | None,
    Field(max_length=500, description="Your own reference for this record (message id, transcript line, URL)."),
]
OccurredAt = Annotated[
    str | None,
    Field(
        max_length=40,
        description=(
            "When it happened (ISO-8601 date or date-time; without an offset, in the database's time zone), "
            "for past history; default now."
        ),
    ),
]
When = Annotated[
    str | None,
    Field(max_length=40, description="ISO-8601 date or date-time; without an offset, in the database's time zone."),
]
SessionId = Annotated[
    str | None,
    Field(
        max_length=128,
        description="Session id; omit to use the current session (one is started if needed). A name of your own "
        "is 1-128 ASCII letters, digits and . _ : @ -, starting with a letter or digit.",
    ),
]
AgentId = Annotated[str | None, Field(max_length=128, description="Which agent is writing; default from settings.")]
Concepts = Annotated[
    list[Annotated[str, Field(max_length=CONCEPT_CHARS)]] | None,
    Field(max_length=50, description="Key concepts or tags; extracted if omitted."),
]
Files = Annotated[
    list[Annotated[str, Field(max_length=FILE_CHARS)]] | None,
    Field(max_length=200, description="File paths involved; extracted if omitted."),
]
Ids = Annotated[list[Annotated[str, Field(min_length=1, max_length=128)]], Field(max_length=100)]
Importance = Annotated[float, Field(allow_inf_nan=False, ge=0.0, le=1.0, description="0 (trivia) to 1 (critical).")]


def app_of(ctx: Ctx) -> AppContext:
    """The application context of the running server."""
    return ctx.request_context.lifespan_context


def tool_annotations(
    title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False
) -> ToolAnnotations:
    """MCP tool annotations; mcp-memory never reaches outside its own database (closed world)."""
    return ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive if not read_only else None,
        idempotent_hint=idempotent if not read_only else None,
        open_world_hint=False,
    )


def domain_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Turn our domain errors into tool errors whose message the model reads and acts on."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except MCPMemoryError as exc:
            raise ToolError(str(exc)) from exc

    return wrapper


def _holds_structure(annotation: Any) -> bool:
    """Whether a field of this type can take a list, a mapping or an object (else it takes text or a number)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _holds_structure(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(_holds_structure(arg) for arg in get_args(annotation))
    kind = origin or annotation
    return isinstance(kind, type) and issubclass(kind, (BaseModel, Sequence, Mapping, set)) and kind is not str


class TextSafeMetadata(FuncMetadata):
    """Argument and result handling tuned for a model reading the result.

    Arguments: the SDK parses any string argument that looks like JSON unless the field is exactly
    `str`, so an optional text field given "null" became None (project "null" wrote to the default
    project) and one given '{"a": 1}' was refused. Only fields that take lists or objects are parsed
    here (some clients send those as JSON text).

    Results: the text copy of a structured result is compact JSON (the SDK indents it, which costs
    a model about a third more tokens for the same value) without what carries nothing (see
    `readable`); the structured content stays whole, as its schema says.
    """

    def convert_result(self, result: Any) -> Any:
        converted = super().convert_result(result)
        if isinstance(converted, CallToolResult) and converted.structured_content is not None and not self.wrap_output:
            text = json.dumps(readable(converted.structured_content), ensure_ascii=False, separators=(",", ":"))
            converted = converted.model_copy(update={"content": [TextContent(type="text", text=text)]})
        return converted

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        structured = _structured_fields(self.arg_model)
        parsed = super().pre_parse_json({k: v for k, v in data.items() if k in structured})
        return {key: parsed.get(key, value) for key, value in data.items()}


@functools.cache
def _structured_fields(arg_model: type[BaseModel]) -> frozenset[str]:
    """The arguments of a tool that take lists or objects; worked out once per tool, as walking the
    annotations cost about 40 µs on every call, twice (checked, then run)."""
    fields = arg_model.model_fields
    return frozenset(f.alias or name for name, f in fields.items() if _holds_structure(f.annotation))


def readable(value: Any) -> Any:
    """A result as the model reads it: nulls and empty lists and objects left out (each field's
    default), and a hit's snippet left out when it only repeats the title.

    A search answer is mostly short hits, where these made up about a third of the text.
    """
    if isinstance(value, list):
        return [readable(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: readable(item) for key, item in value.items() if item is not None and item != [] and item != {}}
    if "title" in out and out.get("snippet") == out["title"]:
        del out["snippet"]
    return out


def text_safe(meta: FuncMetadata) -> TextSafeMetadata:
    """The same argument model, with text fields kept as text."""
    return TextSafeMetadata(
        arg_model=meta.arg_model, output_schema=meta.output_schema, output_model=meta.output_model,
        wrap_output=meta.wrap_output,
    )  # fmt: skip


_ARGUMENTS: dict[str, FuncMetadata] = {}
"""Argument models of every registered tool, by name (the tool functions are module-level)."""
_NUMERIC: dict[str, frozenset[str]] = {}
"""The arguments of each tool that take only a number (a JSON true or false is refused there)."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


async def check_arguments(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: refuse unknown arguments and report invalid ones briefly, naming the field.

    The SDK silently drops unknown arguments (so a typo like `sesion_id` would go unnoticed) and its
    validation messages echo part of the rejected value, which may be the start of a secret.
    """
    if ctx.method == "tools/call" and ctx.params:
        name = ctx.params.get("name")
        meta = _ARGUMENTS.get(name) if isinstance(name, str) else None
        arguments = ctx.params.get("arguments") or {}
        if meta is not None and isinstance(arguments, dict):
            problem = _argument_problem(meta, arguments, _NUMERIC.get(str(name), frozenset()))
            if problem:
                return tool_error(str(name), problem)
    return await call_next(ctx)


def tool_error(name: str, problem: str) -> CallToolResult:
    """A failed tool call's result, worded as the SDK words errors raised by tools."""
    text = f"Error executing tool {name}: {problem}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _argument_problem(
    meta: FuncMetadata, arguments: dict[str, Any], numeric: frozenset[str] = frozenset()
) -> str | None:
    fields = meta.arg_model.model_fields
    known = {f.alias or n for n, f in fields.items()}
    unknown = sorted(set(arguments) - known)
    if unknown:
        valid = f"valid arguments are {', '.join(sorted(known))}" if known else "this takes no arguments"
        return f"{_shown_name(unknown[0])}: unknown argument; {valid}"
    # pydantic would read JSON true as 1: `limit: true` is a mistake to name, not one result
    if flag := next((n for n in sorted(numeric) if isinstance(arguments.get(n), bool)), None):
        return f"{flag}: must be a number, not {json.dumps(arguments[flag])}"
    try:
        meta.arg_model.model_validate(meta.pre_parse_json(arguments))
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in err['loc'])}: {_wording(err)}" for err in exc.errors()[:3]]
        return "; ".join(problems)
    return None


def _shown_name(name: str) -> str:
    """An unknown argument's name as an error may show it: a plain identifier as it is, anything else
    with secrets redacted, cut short and quoted, so it can neither leak a token nor break the line."""
    cleaned = redacted(name)
    if cleaned == name and _IDENTIFIER.fullmatch(name):
        return name
    return json.dumps(cleaned if len(cleaned) <= 64 else cleaned[:63] + "…", ensure_ascii=False)


def _is_numeric(schema: Mapping[str, Any]) -> bool:
    """Whether a JSON Schema property takes a number (or null) and nothing else."""
    types = {schema.get("type"), *(option.get("type") for option in schema.get("anyOf", ()))} - {None, "null"}
    return bool(types) and types <= {"integer", "number"}


def _wording(err: ErrorDetails) -> str:
    """Pydantic's message for one problem, without the names of our Python classes in it."""
    if err["type"] == "model_type":
        return "must be an object of named fields"
    if err["type"] == "extra_forbidden":
        return "unknown field"
    return err["msg"]


def make_tool(
    fn: Callable[..., Awaitable[Any]],
    *,
    title: str,
    read_only: bool,
    destructive: bool = False,
    idempotent: bool = False,
) -> Tool:
    """A tool from a function: name = function name, description = first docstring paragraph.

    Tools are built once per process and shared by every server instance (schema generation is
    the expensive part of starting a server).
    """
    tool = Tool.from_function(
        domain_errors(fn),
        name=fn.__name__,
        title=title,
        description=(fn.__doc__ or "").strip().split("\n\n")[0].replace("\n", " "),
        annotations=tool_annotations(title, read_only=read_only, destructive=destructive, idempotent=idempotent),
    )
    tool.fn_metadata = text_safe(tool.fn_metadata)
    tool.parameters["additionalProperties"] = False  # as check_arguments enforces
    _ARGUMENTS[tool.name] = tool.fn_metadata
    _NUMERIC[tool.name] = frozenset(n for n, p in tool.parameters.get("properties", {}).items() if _is_numeric(p))
    return tool
