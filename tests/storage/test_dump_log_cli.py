"""``groupcoord dump-log --offsets-decoder`` on a __consumer_offsets partition written by the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from protocol.consumer_offsets import (
    GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitKey, OffsetCommitValue, serialize,
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
