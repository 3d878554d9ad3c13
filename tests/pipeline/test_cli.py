"""The documented local commands, as a user types them: ``groupcoord pipeline run`` (the console
script) and ``python -m pipeline run``, each a fresh process that starts its own Spark on the
``--master`` it is given, reads a log written by the server's writer and leaves tables and a report."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, serialize
from protocol.records import build_batch
from storage.log import Log
from storage.options import offsets_topic_options

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TABLES = ("latest_offsets", "pending_offsets", "commit_history", "commit_rate", "consumer_lag", "partition_status", "group_status",
          "generations", "membership_changes", "consumer_group_epochs", "consumer_member_epochs", "expired_offsets")


def _write_log(data: Path) -> None:
    async def go() -> None:
        for p in range(2):
            log = Log.open(data, "__consumer_offsets", p, offsets_topic_options())
            await log.append(build_batch([serialize(OffsetCommitKey(f"g{p}", "t", q), OffsetCommitValue(10 * p + q))
                                          for q in range(3)], timestamp_ms=1_000))
            await log.close()
        log = Log.open(data, "__consumer_offsets", 1, offsets_topic_options())
        await log.append(build_batch([serialize(GroupMetadataKey("g1"), None)], timestamp_ms=1_500))
        await log.close()

    asyncio.run(go())


def _env() -> dict[str, str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)  # not under spark-submit
    return env


@pytest.mark.parametrize("command", ["console-script", "python-m"])
def test_the_local_command_runs_the_job(tmp_path: Path, command: str) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    _write_log(data)
    head = ([str(Path(sys.executable).with_name("groupcoord")), "pipeline"] if command == "console-script"
            else [sys.executable, "-m", "pipeline"])
    proc = subprocess.run([*head, "run", "--data-dir", str(data), "--out", str(out), "--master", "local[1]",
                           "--now", "2000", "--conf", "spark.ui.enabled=false"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=280)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    lines = [line for line in output.splitlines() if line.startswith("pipeline: ")]
    assert lines[0].startswith("pipeline: start: ") and lines[0].endswith("master local[1]"), lines
    assert "pipeline: read: 7 records (group_metadata 1, offset_commit 6; 1 tombstones)" in lines
    assert any(line.startswith("pipeline: done: ") for line in lines)
    assert " INFO " not in output  # Spark's chatter is turned down from the JVM's first line
    for table in TABLES:
        assert list((out / table).glob("*.parquet")), table
    assert "- Groups with committed offsets: 2; committed partitions: 6\n" in (out / "report.md").read_text()
    assert (out / "report.html").stat().st_size > 1000


def test_a_missing_data_directory_is_refused_before_spark_starts(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--data-dir", str(tmp_path / "nope"),
                           "--out", str(tmp_path / "out")], env=_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"groupcoord pipeline: {tmp_path / 'nope'} is not a directory"
