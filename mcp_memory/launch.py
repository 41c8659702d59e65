"""Where the `mcp-memory` command starts: the console script and `python -m mcp_memory`.

Ctrl-C or SIGTERM may come at any moment of start-up: while Python imports the SDK (seconds of it,
in code that may turn an interrupt into an error of its own) or while the database opens. Until a
transport listens for them itself, they are noted here rather than raised, and start-up stops
cleanly at its next safe point (see `stop_noted`). This module imports nothing heavy, so that this
holds from the first moment.
"""

from __future__ import annotations

import signal
from types import FrameType

_noted: list[int] = []


def _note(signum: int, frame: FrameType | None) -> None:
    _noted.append(signum)


def stop_noted() -> int | None:
    """The first SIGINT or SIGTERM received while starting, if one was."""
    return _noted[0] if _noted else None


def main() -> int:
    """Entry point of the `mcp-memory` command."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _note)
    from mcp_memory.cli import main as run  # after the handlers: importing it takes a while

    return run()
