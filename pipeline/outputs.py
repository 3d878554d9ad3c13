"""Where the pipeline's tables go: one Parquet directory per table under the output directory,
overwritten on every run, and one progress line per stage on stderr.

The tables are small next to the log they summarise (one row per group partition, commit or
generation), so each is written as a single file (``coalesce(1)``): easy to open with pandas,
DuckDB or ``spark.read.parquet`` and no directory of tiny part files. The output directory may
be a local path or any Hadoop URI the cluster can write (``hdfs://``, ``s3a://``).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["TABLES", "progress", "write_table", "table_path"]

#: Every table ``pipeline run`` writes, in the order it writes them, with what a row is.
TABLES: dict[str, str] = {
    "latest_offsets": "the compacted view: one row per (group, topic, partition) still committed - what OffsetFetch answers",
    "pending_offsets": "transactional offset commits (TxnOffsetCommit) whose transaction has no COMMIT or ABORT "
                       "marker yet: invisible to OffsetFetch",
    "commit_history": "every offset commit record with its commit time, the end offset then and the lag then",
    "commit_rate": "commits per group per one-minute window",
    "consumer_lag": "per committed partition: log end offset, committed offset, lag, lag in seconds",
    "partition_status": "Burrow-style status per committed partition over its last commits",
    "group_status": "each group's worst partition status, partitions, total and max lag",
    "generations": "one row per group generation: protocol, leader, members",
    "membership_changes": "members that joined and left at each generation",
    "consumer_group_epochs": "one row per group epoch of a KIP-848 consumer group: members, joins, leaves, "
                             "target assignment epoch",
    "consumer_member_epochs": "one row per KIP-848 member assignment record: member epoch, state, owned and "
                              "revoking partitions",
    "expired_offsets": "offsets removed by a tombstone (expiry, OffsetDelete, group deletion) or past their expiry time",
}


def progress(stage: str, detail: str = "", stream: TextIO | None = None) -> None:
    """One line per stage, ``pipeline: <stage>: <detail>``, flushed at once so long runs show
    where they are."""
    print(f"pipeline: {stage}{': ' + detail if detail else ''}", file=stream or sys.stderr, flush=True)


def table_path(out: str, name: str) -> str:
    return f"{out.rstrip('/')}/{name}"


def write_table(spark: SparkSession, df: DataFrame, out: str, name: str) -> DataFrame:
    """Write ``df`` as ``<out>/<name>`` (Parquet, overwrite, one file), report its row count and
    return the written table read back, so later stages start from the file and not from a
    recomputation of the plan."""
    started = time.monotonic()
    path = table_path(out, name)
    df.coalesce(1).write.mode("overwrite").parquet(path)
    written = spark.read.parquet(path)
    progress(name, f"{written.count():,} rows ({time.monotonic() - started:.1f} s)")
    return written
