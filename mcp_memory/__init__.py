"""mcp-memory: durable memory for AI agents over the Model Context Protocol."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mcp-memory")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
