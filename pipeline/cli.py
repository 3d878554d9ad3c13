"""``groupcoord pipeline run`` / ``python -m pipeline run``: read a data directory's
``__consumer_offsets`` log with Spark and write the analytics as Parquet plus a report.

Outputs under ``--out`` (one Parquet directory each, see ``outputs.TABLES``): ``latest_offsets``,
``pending_offsets``, ``commit_history``, ``commit_rate``, ``consumer_lag``, ``partition_status``, ``group_status``,
``generations``, ``membership_changes``, ``consumer_group_epochs``, ``consumer_member_epochs``,
``expired_offsets``; and ``report.html`` plus
``report.md`` in ``--report`` (default: ``--out`` when that is a local directory). Progress goes
to stderr, one line per stage with its row count; Spark's own logging is turned down to warnings.

Run as plain Python it starts Spark on ``--master`` (default ``local[*]``); under
``spark-submit`` (``pipeline/jobs/run.py``) the submitted master and resources apply unchanged.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from .outputs import progress, write_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .report import GroupRow, ReportData

__all__ = ["main", "run_job", "preflight", "PreflightError"]


class JobResult(TypedDict):
    """What ``run_job`` returns: the report's figures, for callers and tests."""

    totals: dict[str, int]
    groups: list[GroupRow]
    churn: list[tuple[str, int, int, int]]
    report: ReportData


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


class PreflightError(RuntimeError):
    """The executors cannot run the job: the package does not import there, or the data
    directory is not visible at the same path."""


def preflight(spark: SparkSession, data_dir: str) -> list[tuple[str, int, str, bool]]:
    """Before reading anything, ask the executors' Python workers (one task per default
    parallelism slot) what they are: host, process id, where ``pipeline`` imports from, and
    whether ``data_dir`` is a directory there. Fails with a readable message instead of a
    Java stack trace halfway through the job; reports the answers as a progress line."""
    sc = spark.sparkContext
    slots = max(int(sc.defaultParallelism), 1)

    def probe(_rows: Iterable[int]) -> Iterator[tuple[str, int, str, bool]]:
        import os
        import socket

        try:
            import coordinator.lag.burrow  # noqa: F401  (what burrow_status's UDF needs)
            import pipeline.source.columns  # noqa: F401  (what the read tasks need)

            where = os.path.dirname(os.path.dirname(pipeline.source.columns.__file__))
        except ImportError as exc:
            where = f"ImportError: {exc}"
        yield socket.gethostname(), os.getpid(), where, os.path.isdir(data_dir)

    workers = sorted(set(sc.parallelize(range(slots), slots).mapPartitions(probe).collect()))
    broken = sorted({w[2] for w in workers if w[2].startswith("ImportError")})
    if broken:
        raise PreflightError("executors cannot import the pipeline package (ship it with --py-files or install "
                             f"it on every node): {broken[0]}")
    blind = sorted({w[0] for w in workers if not w[3]})
    if blind:
        raise PreflightError(f"the data directory {data_dir} is not visible on executor host(s) {', '.join(blind)}: "
                             "put it on storage every executor mounts at the same path")
    progress("executors", f"{len({w[1] for w in workers})} Python worker process(es) on "
                          f"{len({w[0] for w in workers})} host(s); pipeline imported from "
                          f"{', '.join(sorted({w[2] for w in workers}))}; data dir visible")
    return workers


def run_job(spark: SparkSession, data_dir: str, out: str, *, end_offsets_file: str | None = None,
            now_ms: int | None = None, lag_window: int = 10, rate_window: str = "1 minute",
            report_dir: str | None = None, offsets_retention_minutes: int = 10_080) -> JobResult:
    """The whole job on an existing session; returns the small collected results (the report's
    inputs, also used by the tests)."""
    from pyspark.sql import functions as F

    from . import transforms as T
    from .report import MAX_SERIES, ReportData, group_lag_series, write_report
    from .source.end_offsets import end_offset_history, end_offsets_from_data_dir, end_offsets_from_file
    from .source.schema import CONSUMER_GROUP, CORRUPT, GROUP_METADATA, OFFSET_COMMIT

    started = time.monotonic()
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    progress("start", f"data dir {data_dir}, out {out}, master {spark.sparkContext.master}")
    preflight(spark, data_dir)
    raw = spark.read.format("consumer_offsets").load(data_dir).cache()
    by_type = raw.groupBy("record_type").agg(F.count("*").alias("n"),
                                             F.sum(F.col("is_tombstone").cast("int")).alias("tombstones")).collect()
    counts = {r["record_type"]: r["n"] for r in by_type}
    tombstones = sum(r["tombstones"] or 0 for r in by_type)
    progress("read", f"{sum(counts.values()):,} records "
                     f"({', '.join(f'{k} {v:,}' for k, v in sorted(counts.items()))}; {tombstones:,} tombstones)")
    corrupt = ([r["error"] for r in raw.where(F.col("record_type") == CORRUPT).select("error").collect()]
               if counts.get(CORRUPT) else [])
    for error in corrupt:
        progress("corrupt batch", error)

    if end_offsets_file:
        ends = end_offsets_from_file(end_offsets_file)
        history_rows: list[tuple[str, int, int, int]] = []
    else:
        ends = end_offsets_from_data_dir(data_dir)
        history_rows = end_offset_history(data_dir)
    end_df = spark.createDataFrame(ends, "topic STRING, partition INT, log_end_offset LONG")
    end_history = spark.createDataFrame(history_rows, "topic STRING, partition INT, end_offset LONG, "
                                                      "batch_max_timestamp_ms LONG")
    progress("end offsets", f"{len(ends):,} partitions, {len(history_rows):,} batches"
                            + (f" from {end_offsets_file}" if end_offsets_file else ""))

    latest = write_table(spark, T.latest_offsets(raw), out, "latest_offsets")
    write_table(spark, T.pending_offsets(raw), out, "pending_offsets")
    with_lag = write_table(spark, T.lag_at_commits(T.commit_history(raw), end_history), out, "commit_history")
    rate = write_table(spark, T.commit_rate(raw, rate_window), out, "commit_rate")
    lag = write_table(spark, T.consumer_lag(latest, end_df, end_history, now_ms), out, "consumer_lag")
    partition_status = write_table(spark, T.burrow_status(with_lag, lag, now_ms, lag_window), out, "partition_status")
    group_status = write_table(spark, T.group_status(partition_status), out, "group_status")
    generations = write_table(spark, T.group_generations(raw), out, "generations")
    changes = write_table(spark, T.membership_changes(generations), out, "membership_changes")
    group_epochs = write_table(spark, T.consumer_group_epochs(raw), out, "consumer_group_epochs")
    write_table(spark, T.consumer_member_epochs(raw), out, "consumer_member_epochs")
    expired = write_table(spark, T.expired_offsets(raw, now_ms, offsets_retention_minutes * 60_000), out, "expired_offsets")

    # The report's inputs: small collects (one row per group, generation or shown commit).
    order = {s: i for i, s in enumerate(T.BURROW_ORDER)}
    groups = sorted(((r["group_id"], r["status"], r["burrow_status"], r["partitions"], r["total_lag"], r["max_lag"])
                     for r in group_status.collect()), key=lambda g: (-order.get(g[1], 0), -(g[4] or 0), g[0]))
    shown = [g[0] for g in sorted(groups, key=lambda g: (-(g[4] or 0), g[0]))[:MAX_SERIES]]
    lag_points = [(r["group_id"], r["topic"], r["partition"], r["commit_timestamp_ms"], r["lag_then"])
                  for r in with_lag.where(F.col("group_id").isin(shown)).collect()]
    rate_series: dict[str, list[tuple[int, int]]] = {}
    for r in rate.collect():
        rate_series.setdefault(r["group_id"], []).append((int(r["window_start"].timestamp() * 1000), r["commits"]))
    churn = [(r["group_id"], r["generations"], int(r["joins"]), int(r["leaves"])) for r in changes.groupBy("group_id").agg(
        F.count("*").alias("generations"), F.sum(F.size("joined")).alias("joins"),
        F.sum(F.size("left")).alias("leaves")).orderBy(F.desc("generations"), "group_id").collect()]
    bad = sorted(((r["group_id"], r["topic"], r["partition"], r["status"], r["lag"])
                  for r in partition_status.where(F.col("status") != "OK").collect()),
                 key=lambda p: (-order.get(p[3], 0), p[0], p[1], p[2]))
    expired_counts = [(r["group_id"], r["kind"], r["n"]) for r in expired.groupBy("group_id", "kind")
                      .agg(F.count("*").alias("n")).orderBy("group_id", "kind").collect()]
    totals = {"records": sum(counts.values()), "offset_commit": counts.get(OFFSET_COMMIT, 0),
              "group_metadata": counts.get(GROUP_METADATA, 0), "consumer_group": counts.get(CONSUMER_GROUP, 0),
              "tombstones": tombstones,
              "corrupt": counts.get(CORRUPT, 0), "groups": latest.select("group_id").distinct().count(),
              "offsets": latest.count(), "total_lag": int(lag.agg(F.sum("lag")).collect()[0][0] or 0),
              "generations": generations.count(), "group_epochs": group_epochs.count(), "expired": expired.count()}
    lag_series = group_lag_series(lag_points)
    for group, _status, _burrow, _partitions, total_lag, _max_lag in groups:
        series = lag_series.get(group)
        if series and total_lag is not None and now_ms > series[-1][0]:
            series.append((now_ms, int(total_lag)))  # where it stands now (a stopped group's lag keeps growing)
    data = ReportData(data_dir, now_ms, totals, groups, lag_series, rate_series, churn, bad, expired_counts, corrupt)
    raw.unpersist()
    if report_dir is None and _is_local(out):
        report_dir = out.removeprefix("file://")
    if report_dir is not None:
        html_path, md_path = write_report(data, Path(report_dir))
        progress("report", f"{html_path} and {md_path.name}")
    progress("done", f"{time.monotonic() - started:.1f} s")
    return {"totals": totals, "groups": groups, "churn": churn, "report": data}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="groupcoord pipeline", description="Offsets analytics on Spark.")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="analyse a data directory's __consumer_offsets log")
    run.add_argument("--data-dir", required=True,
                     help="the groupcoord data directory (on a cluster: the same path must be readable by every executor)")
    run.add_argument("--out", required=True, help="output directory for the Parquet tables (local path or Hadoop URI)")
    run.add_argument("--report", help="directory for report.html and report.md (default: --out, when it is local)")
    run.add_argument("--end-offsets", help="JSON/CSV of topic,partition,log_end_offset, when the topics' logs "
                                           "are not in --data-dir")
    run.add_argument("--master", help="Spark master when run as plain Python (default local[*]); ignored under "
                                      "spark-submit, whose --master applies")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                     help="extra Spark setting; repeatable (under spark-submit, prefer its own --conf)")
    run.add_argument("--now", type=int, help="evaluation time in epoch ms (default: now), for reproducible reports")
    run.add_argument("--lag-window", type=int, default=10,
                     help="commits per partition the Burrow-style evaluation looks at (default 10)")
    run.add_argument("--rate-window", default="1 minute", help="commit rate bucket (default '1 minute')")
    run.add_argument("--offsets-retention-minutes", type=int, default=10_080,
                     help="the coordinator's offsets.retention.minutes, for the offsets that are due to expire "
                          "(default 10080, Kafka's)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        print(f"groupcoord pipeline: {data_dir} is not a directory", file=sys.stderr)
        return 2
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"groupcoord pipeline: --conf needs KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        conf[key] = value
    from .session import build_session

    spark = build_session(args.master, conf)
    try:
        run_job(spark, str(data_dir.resolve()), args.out, end_offsets_file=args.end_offsets, now_ms=args.now,
                lag_window=args.lag_window, rate_window=args.rate_window, report_dir=args.report,
                offsets_retention_minutes=args.offsets_retention_minutes)
    except PreflightError as exc:
        print(f"groupcoord pipeline: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
