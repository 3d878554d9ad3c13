"""Server CPU and memory from ``/proc``.

``/proc/<pid>/stat`` fields 14 and 15 (utime, stime) are the whole process: every thread, live or
already exited, in clock ticks (``SC_CLK_TCK``). ``thread_cpu_seconds`` sums
``/proc/<pid>/task/*/stat`` instead (live threads only) as a cross-check.
"""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _ticks(stat_path: str) -> int:
    with open(stat_path, "rb") as f:
        text = f.read()
    fields = text[text.rindex(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of the line)


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process, all threads."""
    return _ticks(f"/proc/{pid}/stat") / TICK


def thread_cpu_seconds(pid: int) -> float:
    """utime + stime summed over the live threads in ``/proc/<pid>/task``."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += _ticks(str(task / "stat"))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / TICK


def rss_bytes(pid: int) -> int:
    """VmRSS from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))
