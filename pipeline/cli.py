"""``groupcoord pipeline run`` / ``python -m pipeline run``: read a data directory's
``__consumer_offsets`` log with Spark and write the analytics as Parquet plus a report.

Outputs under ``--out``: ``latest_offsets``, ``commit_history``, ``commit_rate``, ``consumer_lag``,
``partition_status``, ``group_status``, ``generations``, ``membership_changes``,
``expired_offsets`` (Parquet directories), ``report.html`` and ``report.md``. Progress goes to
stderr as one line per stage with its row count.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "run_job"]


def _progress(stage: str, detail: str = "") -> None:
    print(f"pipeline: {stage}{': ' + detail if detail else ''}", file=sys.stderr, flush=True)


def run_job(spark: Any, data_dir: str, out: str, *, end_offsets_file: str | None = None,
            now_ms: int | None = None, lag_window: int = 10) -> dict[str, Any]:
    """The whole job on an existing session; returns the small collected results (also used by
    the tests)."""
    from pyspark.sql import functions as F

    from . import transforms as T
    from .report import ReportData, write_report
    from .source.end_offsets import end_offset_history, end_offsets_from_data_dir, end_offsets_from_file
    from .source.schema import CORRUPT, GROUP_METADATA, OFFSET_COMMIT

    started = time.monotonic()
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    outdir = Path(out)
    raw = spark.read.format("consumer_offsets").load(data_dir).cache()
    counts = {r["record_type"]: r["n"] for r in raw.groupBy("record_type").agg(F.count("*").alias("n")).collect()}
    tombstones = raw.where(F.col("is_tombstone")).count()
    _progress("read", f"{sum(counts.values()):,} records {counts}")
    corrupt = [r["error"] for r in raw.where(F.col("record_type") == CORRUPT).select("error").collect()]

    if end_offsets_file:
        ends = end_offsets_from_file(end_offsets_file)
        history_rows: list[tuple[str, int, int, int]] = []
    else:
        ends = end_offsets_from_data_dir(data_dir)
        history_rows = end_offset_history(data_dir)
    end_df = spark.createDataFrame(ends, "topic STRING, partition INT, log_end_offset LONG")
    end_history = spark.createDataFrame(history_rows, "topic STRING, partition INT, end_offset LONG, "
                                                      "batch_max_timestamp_ms LONG")
    _progress("end offsets", f"{len(ends):,} partitions, {len(history_rows):,} batches")

    def write(name: str, df: Any) -> Any:
        df.coalesce(1).write.mode("overwrite").parquet(str(outdir / name))
        n = spark.read.parquet(str(outdir / name)).count()
        _progress(name, f"{n:,} rows")
        return spark.read.parquet(str(outdir / name))

    latest = write("latest_offsets", T.latest_offsets(raw))
    history = write("commit_history", T.commit_history(raw))
    write("commit_rate", T.commit_rate(raw))
    lag = write("consumer_lag", T.consumer_lag(latest, end_df))
    with_lag = T.lag_at_commits(history, end_history).cache()
    partition_status = write("partition_status", T.burrow_status(with_lag, lag, now_ms, lag_window))
    group_status = write("group_status", T.group_status(partition_status))
    generations = write("generations", T.group_generations(raw))
    changes = write("membership_changes", T.membership_changes(generations))
    expired = write("expired_offsets", T.expired_offsets(raw, now_ms))

    order = {s: i for i, s in enumerate(T.BURROW_ORDER)}
    groups = sorted(((r["group_id"], r["status"], r["burrow_status"], r["partitions"], r["total_lag"], r["max_lag"])
                     for r in group_status.collect()), key=lambda g: (-order.get(g[1], 0), -(g[4] or 0), g[0]))
    lag_series: dict[str, list[tuple[int, int]]] = {}
    for r in (with_lag.groupBy("group_id", "commit_timestamp_ms").agg(F.sum("lag_then").alias("lag"))
              .orderBy("commit_timestamp_ms").collect()):
        lag_series.setdefault(r["group_id"], []).append((r["commit_timestamp_ms"], int(r["lag"])))
    rate_series: dict[str, list[tuple[int, int]]] = {}
    for r in spark.read.parquet(str(outdir / "commit_rate")).collect():
        rate_series.setdefault(r["group_id"], []).append((int(r["window_start"].timestamp() * 1000), r["commits"]))
    churn = [(r["group_id"], r["generations"], r["joins"], r["leaves"]) for r in changes.groupBy("group_id").agg(
        F.count("*").alias("generations"), F.sum(F.size("joined")).alias("joins"),
        F.sum(F.size("left")).alias("leaves")).orderBy(F.desc("generations"), "group_id").collect()]
    totals = {"records": sum(counts.values()), "offset_commit": counts.get(OFFSET_COMMIT, 0),
              "group_metadata": counts.get(GROUP_METADATA, 0), "tombstones": tombstones,
              "corrupt": counts.get(CORRUPT, 0), "groups": latest.select("group_id").distinct().count(),
              "offsets": latest.count(), "total_lag": int(lag.agg(F.sum("lag")).collect()[0][0] or 0),
              "generations": generations.count(), "expired": expired.count()}
    html_path, md_path = write_report(ReportData(data_dir, now_ms, totals, groups, lag_series, rate_series, churn,
                                                 corrupt), outdir)
    _progress("report", f"{html_path} and {md_path.name} in {time.monotonic() - started:.1f} s")
    return {"totals": totals, "groups": groups, "churn": churn}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="groupcoord pipeline", description="Offsets analytics on Spark.")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="analyse a data directory's __consumer_offsets log")
    run.add_argument("--data-dir", required=True, help="the groupcoord data directory (executors must see it)")
    run.add_argument("--out", required=True, help="output directory (local path or any Hadoop URI)")
    run.add_argument("--end-offsets", help="JSON/CSV of topic,partition,log_end_offset, when the topics' logs "
                                           "are not in --data-dir")
    run.add_argument("--master", help="Spark master when run as plain Python (default local[*]); under "
                                      "spark-submit its --master applies")
    run.add_argument("--now", type=int, help="evaluation time in epoch ms (default: now), for reproducible reports")
    args = ap.parse_args(argv)
    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        print(f"groupcoord pipeline: {data_dir} is not a directory", file=sys.stderr)
        return 2
    from .session import build_session

    spark = build_session(args.master)
    try:
        run_job(spark, str(data_dir.resolve()), args.out, end_offsets_file=args.end_offsets, now_ms=args.now)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
