"""``groupcoord dump-log --offsets-decoder`` on a __consumer_offsets partition written by the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    serialize,
)
from protocol.records import build_batch
from storage.log import Log
from storage.options import offsets_topic_options

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.asyncio
async def test_dump_log_prints_offsets_records_written_through_the_log(tmp_path: Path) -> None:
    log = Log.open(tmp_path, "__consumer_offsets", 7, offsets_topic_options())
    member = MemberMetadata("m-1", "client", "/127.0.0.1", 300000, 45000, b"sub", b"assign")
    records = [
        (GroupMetadataKey("g"), GroupMetadataValue("consumer", 3, "range", "m-1", 1700000000000, (member,))),
        (OffsetCommitKey("g", "orders", 0), OffsetCommitValue(42, "meta", 1700000000001, 5)),
        (OffsetCommitKey("g", "orders", 1), None),
    ]
    for key, value in records:
        await log.append(build_batch([serialize(key, value)], timestamp_ms=1700000000000))
    await log.close()
    out = subprocess.run([sys.executable, "-m", "coordinator", "dump-log", str(tmp_path / "__consumer_offsets-7"),
                          "--offsets-decoder"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "g::GroupMetadata(protocolType=consumer, generation=3, protocol=range, leader=m-1" in text
    assert "memberId=m-1" in text and "clientHost=/127.0.0.1" in text
    assert ("[g,orders,0]::OffsetAndMetadata(offset=42, leaderEpoch=Optional[5], metadata=meta, "
            "commitTimestamp=1700000000001, expireTimestamp=None)") in text
    assert "[g,orders,1]::null" in text


def _segment_dir(tmp_path: Path, batches: int, per_batch: int) -> Path:
    directory = tmp_path / "orders-0"
    directory.mkdir()
    data = b"".join(build_batch([(b"key-%d" % i, b"value" * 4) for i in range(per_batch)], timestamp_ms=1700000000000,
                                base_offset=b * per_batch) for b in range(batches))
    (directory / "00000000000000000000.log").write_bytes(data)
    return directory


@pytest.mark.parametrize("records, lines_read", [
    # About 2.5 MB of output, far past a pipe's buffer: a write fails while records are dumped.
    (20_000, 1),
    # Output small enough to stay in stdout's buffer until the exit flush, and a reader that
    # reads nothing: the final flush is the write that fails.
    (1, 0),
])
def test_dump_log_into_a_closed_pipe_exits_quietly(tmp_path: Path, records: int, lines_read: int) -> None:
    """`groupcoord dump-log PATH | head -n 1`: no BrokenPipeError traceback, exit 141 (SIGPIPE's
    shell status, see coordinator/cli.py)."""
    directory = _segment_dir(tmp_path, max(records // 100, 1), min(records, 100))
    proc = subprocess.Popen([sys.executable, "-m", "coordinator", "dump-log", str(directory)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = [proc.stdout.readline() for _ in range(lines_read)]
    proc.stdout.close()  # as head does after its line
    try:
        stderr = proc.stderr.read().decode(errors="replace")
        returncode = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert first == [f"Dumping {directory / '00000000000000000000.log'}\n".encode()][:lines_read]
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert stderr == "", stderr
    assert returncode == 141, (returncode, stderr)
