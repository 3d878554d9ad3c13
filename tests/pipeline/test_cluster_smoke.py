"""The same entry point under ``spark-submit`` on Spark's ``local-cluster`` master, which starts a
standalone master, workers and separate executor JVMs with their own Python workers, as a real
cluster would: the code must keep the submitted master, the package must reach the executors
(here as a ``--py-files`` zip, which executors put first on their path), and Spark's INFO
chatter must stay out of the output."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from protocol.consumer_offsets import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    serialize,
)
from protocol.records import build_batch
from storage.log import Log
from storage.options import offsets_topic_options

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
FAST_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def _package_zip(dest: Path) -> Path:
    """What USAGE.md tells a cluster user to build: the pure-Python packages the job imports."""
    with zipfile.ZipFile(dest, "w") as z:
        for package in ("pipeline", "protocol", "storage", "coordinator/lag"):
            for path in sorted((REPO / package).rglob("*.py")):
                z.write(path, path.relative_to(REPO).as_posix())
        z.write(REPO / "coordinator" / "__init__.py", "coordinator/__init__.py")
    return dest


def test_spark_submit_on_a_local_cluster(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def write() -> None:
        for p in range(3):
            log = Log.open(data, "__consumer_offsets", p, offsets_topic_options())
            records = [serialize(OffsetCommitKey(f"g{p}", "t", q), OffsetCommitValue(100 * p + q)) for q in range(4)]
            await log.append(build_batch(records, timestamp_ms=1_000))
            await log.close()
        log = Log.open(data, "__consumer_offsets", 0, offsets_topic_options())
        await log.append(build_batch([serialize(GroupMetadataKey("g0"), None)], timestamp_ms=1_500))
        await log.close()

    asyncio.run(write())
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    work = spark_home / "work"  # local-cluster's worker dirs land here, whatever SPARK_WORKER_DIR says
    env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    before = set(work.glob("app-*")) if work.exists() else set()
    try:
        proc = subprocess.run(
            [str(spark_home / "bin" / "spark-submit"), "--master", "local-cluster[2,1,1024]",
             "--driver-java-options", f"-Dlog4j2.configurationFile={REPO / 'pipeline' / 'log4j2.properties'} {FAST_JVM}",
             "--conf", f"spark.executor.extraJavaOptions={FAST_JVM}",
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.ui.enabled=false",
             "--conf", "spark.sql.shuffle.partitions=2",
             "--py-files", str(_package_zip(tmp_path / "pipeline.zip")),
             str(REPO / "pipeline" / "jobs" / "run.py"), "run", "--data-dir", str(data), "--out", str(tmp_path / "out"),
             "--now", "2000"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    finally:
        for app in (set(work.glob("app-*")) - before) if work.exists() else ():
            shutil.rmtree(app, ignore_errors=True)
    output = proc.stdout + proc.stderr  # spark-submit hands the driver's stderr to its stdout
    assert proc.returncode == 0, output[-4000:]
    lines = [line for line in output.splitlines() if line.startswith("pipeline: ")]
    # The submitted master was kept, and two executor processes imported the shipped zip.
    assert lines[0].startswith("pipeline: start: ") and lines[0].endswith("master local-cluster[2,1,1024]")
    executors = lines[1]
    assert executors.startswith("pipeline: executors: 2 Python worker process(es) on 1 host(s); pipeline imported from ")
    assert executors.count("pipeline.zip/pipeline") == 1 and executors.endswith("; data dir visible"), executors
    assert "pipeline: read: 13 records (group_metadata 1, offset_commit 12; 1 tombstones)" in lines
    assert any(line.startswith("pipeline: latest_offsets: 12 rows (") for line in lines)
    assert " INFO " not in output  # Spark's chatter is turned down
    report = (tmp_path / "out" / "report.md").read_text()
    assert "- Groups with committed offsets: 3; committed partitions: 12\n" in report
