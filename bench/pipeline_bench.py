"""Pipeline benchmark (issue #7): records per second through the ``consumer_offsets`` data source
for a 2-million-record log, and the wall time of the whole job on it.

    .venv/bin/python bench/pipeline_bench.py [--records 2000000]

The log is written with the server's own writer (storage.Log + the record codec): commits of
1-10 partitions per batch, as the coordinator writes one batch per OffsetCommit, over 20,000
groups and 50 ``__consumer_offsets`` partitions, with a GroupMetadata record per 100 commits.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

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


def generate(root: Path, records: int, seed: int = 7) -> int:
    rnd = random.Random(seed)
    groups = [f"group-{i:05d}" for i in range(20_000)]
    member = MemberMetadata("member-1", "client", "/10.0.0.1", 30000, 10000, b"s" * 20, b"a" * 40)

    async def go() -> int:
        logs = {p: Log.open(root, "__consumer_offsets", p, offsets_topic_options().with_(flush_policy="none"))
                for p in range(PARTITIONS)}
        pending: dict[int, list[bytes]] = {}
        written = 0
        ts = 1_763_800_000_000
        while written < records:
            g = rnd.choice(groups)
            n = rnd.randint(1, 10)
            items = [(encode_key(OffsetCommitKey(g, f"topic-{rnd.randint(0, 4)}", p)),
                      encode_value(OffsetCommitValue(rnd.randint(0, 10**9), "", ts + written)))
                     for p in range(n)]
            if written % 100 < n:
                items.append((encode_key(GroupMetadataKey(g)),
                              encode_value(GroupMetadataValue("consumer", written, "range", "member-1", ts, (member,)))))
            pending.setdefault(partition_for(g, PARTITIONS), []).append(build_batch(items, timestamp_ms=ts + written))
            written += len(items)
            if sum(len(v) for v in pending.values()) >= 5000:
                await asyncio.gather(*[logs[p].append(b) for p, b in pending.items()])
                pending.clear()
        await asyncio.gather(*[logs[p].append(b) for p, b in pending.items()])
        for log in logs.values():
            await log.close()
        return written

    return asyncio.run(go())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pipeline-bench-"))
    data = work / "data"
    t = time.perf_counter()
    written = generate(data, args.records)
    size = sum(p.stat().st_size for p in data.glob("__consumer_offsets-*/*.log"))
    print(f"generated {written:,} records, {size / 2**20:.0f} MiB in {time.perf_counter() - t:.1f} s", flush=True)

    from pipeline.source.reader import arrow_schema, list_segments, read_segment

    schema = arrow_schema()
    t = time.perf_counter()
    rows = sum(b.num_rows for s in list_segments(data) for b in read_segment(s, schema))
    parse = time.perf_counter() - t
    print(f"parse to Arrow, 1 core, no Spark: {rows:,} rows in {parse:.2f} s = {rows / parse:,.0f} rows/s", flush=True)

    from pipeline.cli import run_job
    from pipeline.session import build_session

    spark = build_session("local[2]", conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    reads = []
    for i in range(4):  # the first run pays the one-time Python worker and data source warm-ups
        t = time.perf_counter()
        spark.read.format("consumer_offsets").load(str(data)).write.format("noop").mode("overwrite").save()
        reads.append(time.perf_counter() - t)
        print(f"  data source -> noop, run {i + 1}: {reads[-1]:.2f} s", flush=True)
    best = min(reads[1:])
    print(f"data source, local[2], best warm run: {rows:,} rows in {best:.2f} s = {rows / best:,.0f} rows/s", flush=True)
    t = time.perf_counter()
    run_job(spark, str(data), str(work / "out"), now_ms=1_763_900_000_000)
    job = time.perf_counter() - t
    print(f"full job (all tables + report) on the warm session: {job:.1f} s", flush=True)
    spark.stop()
    print(f"| {rows:,} records, {size / 2**20:.0f} MiB | parse {rows / parse:,.0f} rows/s (1 core) | "
          f"data source {rows / best:,.0f} rows/s (local[2], warm) | full job {job:.1f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
