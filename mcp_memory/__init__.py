"""mcp-memory: durable memory for AI agents over the Model Context Protocol."""

import os
from importlib.metadata import PackageNotFoundError, version

PARENT_PID = os.getppid()
"""The process that started this one, read first thing: a stdio server exits once it is gone, even
if it went while the server was still starting (transports.py)."""

try:
    __version__ = version("mcp-memory")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["PARENT_PID", "__version__"]
