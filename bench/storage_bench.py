"""Storage engine benchmarks: group-committed durable appends, raw append throughput, recovery
scan and compaction speed.

Run: ``.venv/bin/python bench/storage_bench.py [--quick]`` from the repo root. Each case prints one
line; results are recorded (with machine and date) in ``bench/RESULTS.md`` under "Storage".
Batches are encoded before the clock starts: the codec is not what is measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol.records import build_batch  # noqa: E402
from storage import Log, LogOptions  # noqa: E402
from storage.files import RECOVERY_POINT_FILE  # noqa: E402

VALUE = b"v" * 80  # with a ~12-byte key and record overhead: ~100-byte records


def record_batch(n: int, start: int, keys: int | None = None) -> bytes:
    return build_batch(
        [(b"key-%08d" % ((start + i) % keys if keys else start + i), VALUE) for i in range(n)], timestamp_ms=1_000_000)


async def durable_appends(root: Path, appenders: int, per_batch: int, seconds: float) -> None:
    durable_appends.runs = getattr(durable_appends, "runs", 0) + 1  # type: ignore[attr-defined]
    log = Log.open(root, f"durable{durable_appends.runs}", 0,  # type: ignore[attr-defined]
                   LogOptions(flush_policy="fsync", segment_bytes=100 << 20))
    payloads = [record_batch(per_batch, i * per_batch) for i in range(256)]
    done = 0
    stop = time.perf_counter() + seconds

    async def appender(n: int) -> None:
        nonlocal done
        i = n
        while time.perf_counter() < stop:
            await log.append(payloads[i % 256])
            done += per_batch
            i += appenders

    t0 = time.perf_counter()
    await asyncio.gather(*[appender(n) for n in range(appenders)])
    dt = time.perf_counter() - t0
    size = log.size_bytes
    await log.close()
    print(f"durable append (fsync before ack), {appenders} appenders, {per_batch} record(s)/batch: "
          f"{done / dt:,.0f} records/s, {size / dt / 1e6:.1f} MB/s, {done:,} records in {dt:.2f}s")


async def sequential_appends(root: Path, batch_records: int, batches_per_call: int, total_mb: int) -> None:
    log = Log.open(root, f"seq{batch_records}x{batches_per_call}", 0, LogOptions(flush_policy="none"))
    one = record_batch(batch_records, 0)
    call = [one] * batches_per_call
    call_bytes = len(one) * batches_per_call
    calls = max(1, total_mb * 1_000_000 // call_bytes)
    t0 = time.perf_counter()
    for _ in range(calls):
        await log.append(call)
    dt = time.perf_counter() - t0
    await log.close()
    print(f"sequential append, no fsync, {len(one)}-byte batches x{batches_per_call} per call: "
          f"{calls * call_bytes / dt / 1e6:,.0f} MB/s ({calls * call_bytes / 1e6:,.0f} MB in {dt:.2f}s)")


async def recovery_scan(root: Path, batch_records: int, total_mb: int) -> None:
    log = Log.open(root, f"rec{batch_records}", 0, LogOptions(flush_policy="none", segment_bytes=64 << 20))
    one = record_batch(batch_records, 0)
    call = [one] * max(1, (1 << 20) // len(one))
    while log.size_bytes < total_mb * 1_000_000:
        await log.append(call)
    await log.flush()
    size = log.size_bytes
    log.abort()
    d = root / f"rec{batch_records}-0"
    os.unlink(d / RECOVERY_POINT_FILE)  # no checkpoint: every segment is rescanned
    for p in d.glob("*.index"):
        p.unlink()
    t0 = time.perf_counter()
    log = Log.open(root, f"rec{batch_records}", 0, LogOptions(flush_policy="none", segment_bytes=64 << 20))
    dt = time.perf_counter() - t0
    scanned = log.load_result.scanned_bytes
    await log.close()
    print(f"recovery scan (CRC + offsets + index rebuild, page cache warm), {len(one)}-byte batches: "
          f"{scanned / dt / 1e6:,.0f} MB/s ({scanned / 1e6:,.0f} of {size / 1e6:,.0f} MB in {dt:.2f}s)")


async def compaction(root: Path, batch_records: int, keys: int, total_mb: int) -> None:
    opts = LogOptions(flush_policy="none", segment_bytes=16 << 20, cleanup_policy="compact")
    log = Log.open(root, f"compact{batch_records}", 0, opts)
    n = 0
    while log.size_bytes < total_mb * 1_000_000:
        await log.append([record_batch(batch_records, n + i * batch_records, keys) for i in range(64)])
        n += 64 * batch_records
    await log.roll()
    dirty = log.size_bytes
    t0 = time.perf_counter()
    result = await log.clean(force=True)
    dt = time.perf_counter() - t0
    assert result is not None
    await log.close()
    print(f"compaction, {batch_records} record(s)/batch, {keys:,} keys, {n:,} records: {dirty / dt / 1e6:,.1f} MB/s "
          f"of dirty log ({dirty / 1e6:,.0f} MB -> {result.bytes_written / 1e6:,.1f} MB in {dt:.2f}s)")


def fsync_latency_us(root: Path) -> float:
    """Median write(4 KiB)+fsync latency: the floor under any fsync-before-ack number."""
    fd = os.open(root / "fsync-probe", os.O_CREAT | os.O_WRONLY, 0o644)
    samples = []
    try:
        for _ in range(200):
            t = time.perf_counter()
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
            samples.append(time.perf_counter() - t)
    finally:
        os.close(fd)
    samples.sort()
    return samples[len(samples) // 2] * 1e6


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--dir", default=None, help="where to put the logs (default: a temp dir)")
    args = ap.parse_args()
    q = args.quick
    root = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir))
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  python {sys.version.split()[0]}  cpus {os.cpu_count()}  "
          f"load {os.getloadavg()[0]:.2f}  fsync {fsync_latency_us(root):.0f} us  dir {root}")
    try:
        for _ in range(1 if q else 3):  # noisy on a shared 2-core VM: report every run
            await durable_appends(root, 64, 1, 2 if q else 5)
        await durable_appends(root, 64, 10, 2 if q else 5)
        await sequential_appends(root, 160, 1, 100 if q else 500)
        await sequential_appends(root, 160, 64, 200 if q else 1000)
        await recovery_scan(root, 160, 100 if q else 500)
        await recovery_scan(root, 10, 50 if q else 200)
        await recovery_scan(root, 1, 20 if q else 100)
        await compaction(root, 10, 10_000, 20 if q else 50)
        await compaction(root, 100, 10_000, 20 if q else 50)
        await compaction(root, 1, 10_000, 10 if q else 30)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
