"""Pipeline benchmark (issue #7): how fast the ``consumer_offsets`` data source reads a
2-million-record ``__consumer_offsets`` log.

    .venv/bin/python bench/pipeline_bench.py [--records 2000000] [--data DIR] [--full-job]

1. Writes the log with the server's own writer (``storage.Log`` + the record codec) into a temp
   data directory (or reuses ``--data``): 50 ``__consumer_offsets`` partitions, 20,000 groups, one
   batch of 1-10 OffsetCommit records (key v1, value v3) per commit as the coordinator writes
   them, and about one GroupMetadata batch (1-5 members) per 100 commit records, as a rebalance
   writes one.
2. Parse alone, one core, no Spark: ``columns.parse_segment`` over every segment (fast path, the
   default; best of three after a warm-up run), and the codec-only reference path over the first
   three segments.
3. Through Spark, ``local[2]``: ``spark.read.format("consumer_offsets").load(dir)`` into the
   ``noop`` sink; one warm-up run (JVM JIT, Python worker start, data source lookup), then seven
   runs, reported as median and best (the machine is shared; runs vary by 10-20%).
4. ``--full-job``: also time the whole pipeline job (``pipeline.cli.run_job``: every table and
   the report) on the warm session; ``time_full_job`` does that for other callers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from protocol.consumer_offsets import (  # noqa: E402
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from protocol.hashing import partition_for  # noqa: E402
from protocol.records import build_batch  # noqa: E402
from storage.log import Log  # noqa: E402
from storage.options import offsets_topic_options  # noqa: E402

PARTITIONS = 50
GROUPS = 20_000
TS = 1_763_800_000_000


def generate(root: Path, records: int, seed: int = 7) -> int:
    """Write about ``records`` records; returns how many were written."""
    rnd = random.Random(seed)
    groups = [f"group-{i:05d}" for i in range(GROUPS)]
    topics = [f"topic-{i}" for i in range(20)]

    def group_metadata(g: str, generation: int) -> bytes:
        members = tuple(MemberMetadata(f"consumer-{i}-{generation}", f"client-{i}", f"/10.0.{i}.1", 300000, 45000,
                                       b"\x00\x01" + b"s" * 30, b"\x00\x01" + b"a" * 50)
                        for i in range(rnd.randint(1, 5)))
        return encode_value(GroupMetadataValue("consumer", generation, "range", members[0].member_id, TS, members))

    async def go() -> int:
        options = offsets_topic_options().with_(flush_policy="none")
        logs = {p: Log.open(root, "__consumer_offsets", p, options) for p in range(PARTITIONS)}
        pending: dict[int, list[bytes]] = {}
        written = queued = 0
        next_rebalance = 100
        while written < records:
            g = rnd.choice(groups)
            topic = rnd.choice(topics)
            n = min(rnd.randint(1, 10), records - written)
            now = TS + written
            items = [(encode_key(OffsetCommitKey(g, topic, p)), encode_value(OffsetCommitValue(rnd.randrange(10**9), "", now)))
                     for p in range(n)]
            batches = [build_batch(items, timestamp_ms=now)]
            written += n
            if written >= next_rebalance and written < records:
                batches.append(build_batch([(encode_key(GroupMetadataKey(g)), group_metadata(g, written))], timestamp_ms=now))
                written += 1
                next_rebalance += 100
            pending.setdefault(partition_for(g, PARTITIONS), []).extend(batches)
            queued += len(batches)
            if queued >= 5000:
                await asyncio.gather(*[logs[p].append(b) for p, b in pending.items()])
                pending.clear()
                queued = 0
        await asyncio.gather(*[logs[p].append(b) for p, b in pending.items()])
        for log in logs.values():
            await log.close()
        return written

    return asyncio.run(go())


def parse_rate(data: Path, *, fast: bool = True, max_files: int | None = None) -> tuple[int, float]:
    """(rows, seconds) to parse the segments to Arrow batches on this core, no Spark."""
    from pipeline.source.columns import arrow_schema, parse_segment
    from pipeline.source.datasource import list_segments

    arrow_schema()  # (imports and schema conversion outside the timing)
    segments = list_segments(data)[:max_files]
    start = time.perf_counter()
    rows = sum(b.num_rows for s in segments for b in parse_segment(s.path, s.log_partition, s.base_offset, s.size, fast=fast))
    return rows, time.perf_counter() - start


def spark_read_times(spark: Any, data: Path, runs: int = 7) -> tuple[float, list[float], int]:
    """(warm-up seconds, timed runs, input partitions) of the data source into the noop sink."""
    def once() -> float:
        start = time.perf_counter()
        spark.read.format("consumer_offsets").load(str(data)).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - start

    warm_up = once()
    times = [once() for _ in range(runs)]
    partitions = spark.read.format("consumer_offsets").load(str(data)).rdd.getNumPartitions()
    return warm_up, times, partitions


def time_full_job(spark: Any, data: Path, out: Path) -> float:
    """Seconds for the whole pipeline job (``pipeline.cli.run_job``) on a warm session."""
    from pipeline.cli import run_job

    start = time.perf_counter()
    run_job(spark, str(data), str(out), now_ms=TS + 10**9)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--data", type=Path, help="reuse (or create) this data directory instead of a temp one")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--full-job", action="store_true", help="also time the whole pipeline job")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pipeline-bench-"))
    data = args.data or work / "data"
    try:
        if not list(data.glob("__consumer_offsets-*/*.log")):
            start = time.perf_counter()
            written = generate(data, args.records)
            print(f"generated {written:,} records in {time.perf_counter() - start:.1f} s", flush=True)
        size = sum(p.stat().st_size for p in data.glob("__consumer_offsets-*/*.log"))
        files = len(list(data.glob("__consumer_offsets-*/*.log")))

        # Warm, like Spark's reused Python workers: a first run (imports, first touch of the
        # files), then the best of three.
        parse_rate(data)
        runs = [parse_rate(data) for _ in range(3)]
        rows, parse = min(runs, key=lambda r: r[1])
        print(f"parse, fast path, 1 core: {rows:,} rows; runs {', '.join(f'{t:.2f}' for _, t in runs)} s; "
              f"best {rows / parse:,.0f} rows/s", flush=True)
        ref_rows, ref = parse_rate(data, fast=False, max_files=3)
        print(f"parse, codec path only, 1 core: {ref_rows:,} rows in {ref:.2f} s = {ref_rows / ref:,.0f} rows/s", flush=True)

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pipeline.session import build_session

        spark = build_session(args.master, conf={"spark.ui.enabled": "false"}, log_level="ERROR")
        warm_up, times, partitions = spark_read_times(spark, data)
        best, median = min(times), statistics.median(times)
        print(f"data source -> noop, {args.master}, {partitions} input partitions: warm-up {warm_up:.2f} s, "
              f"runs {', '.join(f'{t:.2f}' for t in times)} s; best {rows / best:,.0f} rows/s, "
              f"median {rows / median:,.0f} rows/s", flush=True)
        job = time_full_job(spark, data, work / "out") if args.full_job else None
        spark.stop()

        print()
        print(f"| records | log | parse, fast path, 1 core, best of 3 | parse, codec path, 1 core | data source -> noop, "
              f"{args.master}, {len(times)} warm runs: median (best) | full job |")
        print("|---|---|---|---|---|---|")
        print(f"| {rows:,} | {size / 2**20:.0f} MiB, {files} files | {rows / parse:,.0f} rows/s ({parse:.2f} s) "
              f"| {ref_rows / ref:,.0f} rows/s | {rows / median:,.0f} ({rows / best:,.0f}) rows/s, {median:.2f} s ({best:.2f} s); warm-up run {warm_up:.1f} s "
              f"| {f'{job:.1f} s' if job is not None else 'not run (--full-job)'} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
