"""Operations tools: diagnose, export, import."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from mcp_memory.models.results import DiagnoseResult, ExportResult, ImportResult
from mcp_memory.tools._common import Ctx, Project, app_of, make_tool
from mcp_memory.tools.caller import project_of, restricted_to

FilePath = Annotated[
    str | None,
    Field(
        max_length=4_096,
        description="File on the server's disk (if the server allows it); best absolute: a relative path "
        "starts at the server's working folder, ~ at its user's home.",
    ),
]


async def memory_diagnose(ctx: Ctx) -> DiagnoseResult:
    """Check health: schema version, record counts, integrity, index consistency and search latency."""
    return await app_of(ctx).diagnosis.diagnose(only=await restricted_to(ctx))


async def memory_export(
    ctx: Ctx,
    all_projects: Annotated[bool, Field(description="Export every project instead of one.")] = False,
    path: FilePath = None,
    overwrite: Annotated[
        bool, Field(description="Replace an earlier export at path (a file that is not an export is never replaced).")
    ] = False,
    project: Project = None,
) -> ExportResult:
    """Export memory as versioned JSON (inline, or to a file), for backup or moving between machines."""
    only = await restricted_to(ctx)
    if all_projects and only is not None:
        raise ToolError(f"all_projects: this connection may only export project {only!r}")
    projects = None if all_projects else [await project_of(ctx, project)]
    return await app_of(ctx).operations.export(projects, path, overwrite, progress=ctx.report_progress)


async def memory_import(
    ctx: Ctx,
    document: Annotated[
        dict[str, Any] | None, Field(description="An export document as returned by memory_export.")
    ] = None,
    path: FilePath = None,
    restore_forgotten: Annotated[
        bool,
        Field(
            description="Bring back the document's records even if this database or the document's source "
            "forgot them (restoring a backup on purpose). Without it, what either side forgot stays forgotten."
        ),
    ] = False,
) -> ImportResult:
    """Import a memory_export document; safe to repeat (existing records are kept unless the import is newer)."""
    return await app_of(ctx).operations.import_(
        document,
        path,
        only_project=await restricted_to(ctx),
        progress=ctx.report_progress,
        restore_forgotten=restore_forgotten,
    )


def operations_tools() -> list[Tool]:
    """The operations tools."""
    return [
        make_tool(memory_diagnose, title="Diagnose memory health", read_only=True),
        # destructive: an export may overwrite a file (overwrite=true); an import deletes what the
        # document's copy forgot and replaces rows with the document's newer ones
        make_tool(memory_export, title="Export memory", read_only=False, destructive=True, idempotent=True),
        make_tool(memory_import, title="Import memory", read_only=False, destructive=True, idempotent=True),
    ]
