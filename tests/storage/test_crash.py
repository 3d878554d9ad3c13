"""A real crash: SIGKILL a process in the middle of a stream of durable appends, then reopen."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from storage import Log, LogOptions

from .helpers import all_records

WRITER = Path(__file__).with_name("crash_writer.py")


@pytest.mark.asyncio
@pytest.mark.parametrize("acks_before_kill", [300, 3000])
async def test_sigkill_mid_stream_loses_no_acknowledged_append(tmp_path: Path, acks_before_kill: int) -> None:
    proc = subprocess.Popen([sys.executable, str(WRITER), str(tmp_path)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    acked: dict[int, bytes] = {}
    for line in proc.stdout:
        offset, value = line.split()
        acked[int(offset)] = value
        if len(acked) >= acks_before_kill:
            break
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate()
    for line in rest.split(b"\n")[:-1]:  # only complete lines were acknowledged
        offset, value = line.split()
        acked[int(offset)] = value
    assert proc.returncode == -signal.SIGKILL
    log = Log.open(tmp_path, "crash", 0, LogOptions(segment_bytes=32 * 1024))
    present = {o: v for o, _k, v in all_records(log)}
    missing = [o for o in acked if present.get(o) != acked[o]]
    assert not missing, f"{len(missing)} acknowledged appends lost, e.g. {missing[:5]}"
    assert log.log_end_offset >= max(acked) + 1
    assert sorted(present) == list(range(log.log_end_offset))  # a prefix, no holes
    await log.close()
