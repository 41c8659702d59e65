"""mcp-memory: durable memory for AI agents over the Model Context Protocol."""

import os

PARENT_PID = os.getppid()
"""The process that started this one, read first thing: a stdio server exits once it is gone, even
if it went while the server was still starting (transports.py)."""

__all__ = ["PARENT_PID", "__version__"]


def __getattr__(name: str) -> str:
    """`__version__`, read from the installed metadata when first asked for: importing
    importlib.metadata takes a while, and the command's first moments must stay short (launch.py)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("mcp-memory")
    except PackageNotFoundError:  # running from a source tree that was never installed
        found = "0.0.0+source"
    globals()["__version__"] = found
    return found
