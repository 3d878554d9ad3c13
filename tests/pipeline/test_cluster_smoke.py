"""The same entry point under ``spark-submit`` on Spark's ``local-cluster`` master, which starts
separate executor JVMs and Python workers as a real cluster would: the package and its native
dependencies must reach them, and the code must not override the submitted master."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, serialize
from protocol.records import build_batch
from storage.log import Log
from storage.options import offsets_topic_options

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_spark_submit_on_a_local_cluster(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def write() -> None:
        for p in range(3):
            log = Log.open(data, "__consumer_offsets", p, offsets_topic_options())
            await log.append(build_batch([serialize(OffsetCommitKey(f"g{p}", "t", q), OffsetCommitValue(100 * p + q))
                                          for q in range(4)], timestamp_ms=1_000))
            await log.close()

    asyncio.run(write())
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    before = set((spark_home / "work").glob("app-*")) if (spark_home / "work").exists() else set()
    try:
        proc = subprocess.run(
            [str(spark_home / "bin" / "spark-submit"), "--master", "local-cluster[2,1,1024]",
             "--driver-java-options", f"-Dlog4j2.configurationFile={REPO / 'pipeline' / 'log4j2.properties'}",
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.ui.enabled=false",
             str(REPO / "pipeline" / "jobs" / "run.py"), "run", "--data-dir", str(data), "--out", str(tmp_path / "out"),
             "--now", "2000"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    finally:
        for app in set((spark_home / "work").glob("app-*")) - before if (spark_home / "work").exists() else ():
            shutil.rmtree(app, ignore_errors=True)
    output = proc.stdout + proc.stderr  # spark-submit may hand the driver's stderr to stdout
    assert proc.returncode == 0, output[-4000:]
    assert "pipeline: latest_offsets: 12 rows" in output
    assert " INFO " not in output  # Spark's chatter is turned down
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Groups with committed offsets: 3; committed partitions: 12" in report
