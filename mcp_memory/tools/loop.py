"""Knowledge-loop tools: crystallize, consolidate, reflect; and asking the client's model (sampling).

Sampling goes through SDK resolvers, which run before a tool body. On protocol 2026-07-28 and later
the resolver returns a `Sample` request and the client answers it in a retry of the call; on older
protocols the resolver asks the client directly, with a timeout, and any refusal, error or timeout
means "no model text". Without model text the services use their rule-based results.
"""

from __future__ import annotations

import logging
import warnings
from typing import Annotated

import anyio
from mcp.server.mcpserver import Resolve, Sample
from mcp.server.mcpserver.tools import Tool
from mcp_types import CreateMessageResult, SamplingMessage, TextContent
from mcp_types.version import is_version_at_least
from pydantic import Field

from mcp_memory.models.loop import ConsolidateResult, CrystallizeResult, ReflectResult
from mcp_memory.tools._common import Ctx, Project, When, app_of, make_tool
from mcp_memory.tools.caller import project_of, restricted_to

logger = logging.getLogger(__name__)

_INPUT_REQUIRED_PROTOCOL = "2026-07-28"
_SYSTEM = "You help an AI agent keep a concise, factual memory of its work. Answer with plain text only."

SessionArg = Annotated[str | None, Field(max_length=128, description="One session; omit for every ended one.")]
ModelText = CreateMessageResult | str | None


def _samples(ctx: Ctx) -> bool:
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.sampling is not None


async def _ask(ctx: Ctx, prompt: str) -> Sample | str | None:
    """Ask the client's model: a `Sample` request on modern protocols, a direct request otherwise."""
    settings = app_of(ctx).settings
    messages = [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))]
    version = ctx.protocol_version
    if version is not None and is_version_at_least(version, _INPUT_REQUIRED_PROTOCOL):
        return Sample(messages, max_tokens=settings.sampling_max_tokens, system_prompt=_SYSTEM, temperature=0.2)
    try:
        with anyio.fail_after(settings.sampling_timeout_s), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sampling is deprecated in the 2026 protocol; older clients still use it
            result = await ctx.request_context.session.create_message(
                messages, max_tokens=settings.sampling_max_tokens, system_prompt=_SYSTEM, temperature=0.2
            )
    except Exception as exc:  # the client refused, failed or timed out: the rule-based path takes over
        logger.info("sampling unavailable, using the rule-based result: %r", exc)
        return None
    return _text(result)


def _text(answer: ModelText) -> str | None:
    """The text of the model's answer (None for no answer or a non-text one)."""
    if isinstance(answer, CreateMessageResult):
        content = answer.content
        text = content.text if isinstance(content, TextContent) else None
        return text.strip() if text and text.strip() else None
    return answer.strip() if isinstance(answer, str) and answer.strip() else None


async def _summary_from_model(
    ctx: Ctx, session_id: str | None, force: bool, project: str | None
) -> Sample | str | None:
    if session_id is None or not _samples(ctx):
        return None
    prompt = await app_of(ctx).summaries.sampling_prompt(await project_of(ctx, project), session_id, force)
    return None if prompt is None else await _ask(ctx, prompt)


async def _rules_from_model(
    ctx: Ctx, session_id: str | None, since: str | None, until: str | None, project: str | None
) -> Sample | str | None:
    if not _samples(ctx):
        return None
    try:
        prompt = await app_of(ctx).reflection.sampling_prompt(await project_of(ctx, project), session_id, since, until)
    except Exception:  # bad arguments are reported by the tool itself, with the field named
        return None
    return None if prompt is None else await _ask(ctx, prompt)


async def memory_crystallize(
    ctx: Ctx,
    session_id: SessionArg = None,
    force: Annotated[bool, Field(description="Summarise again even if the summary is up to date.")] = False,
    project: Project = None,
    model_text: Annotated[ModelText, Resolve(_summary_from_model)] = None,
) -> CrystallizeResult:
    """Summarise a session (or each ended one lacking a current summary): decisions, fixes, files, outcome."""
    return await app_of(ctx).summaries.crystallize(
        await project_of(ctx, project), session_id, force=force, model_summary=_text(model_text)
    )


async def memory_consolidate(
    ctx: Ctx,
    dry_run: Annotated[bool, Field(description="Report what would change, change nothing.")] = False,
    project: Project = None,
) -> ConsolidateResult:
    """Maintenance pass: merge duplicates, promote recurring facts, summarise, decay and prune; reports every change."""
    return await app_of(ctx).consolidation.consolidate(
        await project_of(ctx, project),
        dry_run=dry_run,
        progress=ctx.report_progress,
        restricted=await restricted_to(ctx),
    )


async def memory_reflect(
    ctx: Ctx,
    session_id: Annotated[str | None, Field(max_length=128, description="Reflect on this session.")] = None,
    since: When = None,
    until: When = None,
    project: Project = None,
    model_text: Annotated[ModelText, Resolve(_rules_from_model)] = None,
) -> ReflectResult:
    """Learn from a session or time window (default: last 7 days): anti-patterns, heuristics, contradictions."""
    return await app_of(ctx).reflection.reflect(
        await project_of(ctx, project), session_id=session_id, since=since, until=until, model_rules=_text(model_text)
    )


def loop_tools() -> list[Tool]:
    """The knowledge-loop tools."""
    return [
        make_tool(memory_crystallize, title="Summarise sessions", read_only=False, destructive=True, idempotent=True),
        make_tool(memory_consolidate, title="Consolidate memory", read_only=False, destructive=True),
        make_tool(memory_reflect, title="Reflect and learn", read_only=False, destructive=True),
    ]
