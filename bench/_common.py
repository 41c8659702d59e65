"""Helpers shared by the benchmark scripts: memory readings, percentiles, machine header, tables."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
from collections.abc import Sequence

import numpy as np


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _mib(status_key: str) -> float:
    """A /proc/self/status memory figure in MiB, or the peak RSS where /proc is missing."""
    kib = _status_kib(status_key)
    if kib is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        kib = peak // 1024 if sys.platform == "darwin" else peak
    return kib / 1024


def rss_mib() -> float:
    """Current resident set size of this process in MiB (VmRSS; peak RSS where /proc is missing)."""
    return _mib("VmRSS")


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB."""
    return _mib("VmHWM")


def reset_peak_rss() -> None:
    """Start peak_rss_mib() afresh from the current RSS (Linux; elsewhere the peak keeps counting)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        pass


def code_version() -> str:
    """Which code was measured: the commit, and whether mcp_memory/ had uncommitted changes."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", repo, "status", "--porcelain", "--", "mcp_memory"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "mcp_memory: unknown revision"
    return f"mcp_memory at {head}" + (f" + uncommitted changes in {len(dirty)} file(s)" if dirty else "")


def load_note() -> str:
    """The 1/5/15-minute load averages: other work on the machine skews every timing."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min, at the end of the run)"


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100, linear interpolation); NaN for no values."""
    return float(np.percentile(values, q)) if len(values) else float("nan")


def machine() -> str:
    """One line naming the machine the numbers come from."""
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, os.cpu_count()={os.cpu_count()}, "
        f"Python {platform.python_version()} ({platform.python_implementation()})"
    )


def ms(seconds: float) -> str:
    """Seconds as milliseconds text with sensible precision."""
    if seconds != seconds:  # NaN
        return "-"
    value = seconds * 1000
    if value < 1:
        return f"{value:.3f}"
    if value < 100:
        return f"{value:.2f}"
    return f"{value:.0f}"


def secs(seconds: float) -> str:
    """Seconds as text with sensible precision."""
    if seconds != seconds:
        return "-"
    return f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"


def ratio(naive: float | None, ours: float | None) -> str:
    """naive / ours as `12.3x`, or `-` when either side is missing."""
    if naive is None or ours is None or naive != naive or ours != ours or ours <= 0:
        return "-"
    value = naive / ours
    return f"{value:.0f}x" if value >= 100 else f"{value:.1f}x"


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], *, markdown: bool = False) -> str:
    """A plain-text table (right-aligned numbers, left-aligned first column), or a markdown one."""
    cells = [[str(c) for c in row] for row in rows]
    if markdown:
        lines = [f"**{title}**", "", "| " + " | ".join(headers) + " |"]
        lines.append("|" + "|".join([":---"] + ["---:"] * (len(headers) - 1)) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        parts = [v.ljust(widths[0]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(values)]
        return "  ".join(parts).rstrip()

    rule = "-" * len(line(list(headers)))
    out = [title, rule, line(list(headers)), rule, *(line(r) for r in cells), rule]
    return "\n".join(out) + "\n"
