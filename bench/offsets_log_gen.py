"""Generate a ``__consumer_offsets`` log directly with the storage engine, for the restart-and-load
and memory-per-offset measurements of ``bench/coordinator_bench.py`` (issue 6).

The log looks like one a running groupcoord would have written: ``rounds`` rounds in which every
group commits all its ``partitions`` partitions of topic ``bench`` in one request (one record
batch of ``partitions`` records per commit, as the server writes them), offsets
``round * 1000 + partition``. So the log holds ``groups * partitions * rounds`` records and
``groups * partitions`` live offsets; the last round's values are the ones that must be served.

The data directory is laid out by groupcoord itself (``meta.properties``, topic registry,
``__consumer_offsets-N`` directories): the generator starts the server once on it with
``offsets.topic.num.partitions``, creates the topic, stops it, then appends the batches with
``storage.log.Log`` (no fsync per append; one flush at the end), many batches per append.

Results are cached under ``~/.cache/groupcoord-bench/offsets-g<groups>-p<partitions>-r<rounds>-n<N>``
(a ``generated.json`` marker says it is complete); a cache older than 5 days is regenerated, since
the commit timestamps would start to approach offset expiry.

    .venv/bin/python bench/offsets_log_gen.py --groups 100000 --partitions 10 --rounds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import peers  # noqa: E402

TOPIC = "bench"
OFFSETS_PARTITIONS = 50
MAX_AGE_S = 5 * 86400
#: Bytes of batches per Log.append call.
APPEND_BYTES = 8 << 20


def group_name(i: int) -> str:
    return f"consumer-group-{i:06d}"


def expected_offset(rounds: int, partition: int) -> int:
    """The committed offset of ``partition`` after the last round."""
    return (rounds - 1) * 1000 + partition


def cache_dir(groups: int, partitions: int, rounds: int, offsets_partitions: int = OFFSETS_PARTITIONS) -> Path:
    return peers.CACHE / f"offsets-g{groups}-p{partitions}-r{rounds}-n{offsets_partitions}"


def probes(groups: int, offsets_partitions: int = OFFSETS_PARTITIONS) -> dict[int, str]:
    """One known group per ``__consumer_offsets`` partition (the first that hashes there)."""
    from protocol.hashing import partition_for

    out: dict[int, str] = {}
    for i in range(groups):
        name = group_name(i)
        out.setdefault(partition_for(name, offsets_partitions), name)
        if len(out) == offsets_partitions:
            break
    return out


def layout(data_dir: Path, partitions: int, offsets_partitions: int) -> None:
    """Let groupcoord create the data directory: meta.properties, the registry, the partitions."""
    from loadgen.groups import prepare_offsets
    from loadgen.wire import negotiate

    server = peers.start_groupcoord(data_dir, {"offsets.topic.num.partitions": str(offsets_partitions)},
                                    log=data_dir.parent / "layout-server.log")
    try:
        versions = negotiate(server.versions)
        asyncio.run(prepare_offsets(server.host, server.port, versions, TOPIC, partitions,
                                    list(probes(1000, offsets_partitions).values()), commit=False))
    finally:
        rc = server.stop()
    if rc != 0:
        raise RuntimeError(f"layout server exited with {rc}; see {server.log}")
    for p in range(offsets_partitions):
        d = data_dir / f"__consumer_offsets-{p}"
        if not d.is_dir():
            raise RuntimeError(f"groupcoord did not create {d}")
        for f in d.glob("*.snapshot"):
            f.unlink()


def write_log(data_dir: Path, groups: int, partitions: int, rounds: int, offsets_partitions: int) -> int:
    from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
    from protocol.hashing import partition_for
    from protocol.records import build_batch
    from storage.log import Log
    from storage.options import offsets_topic_options

    options = offsets_topic_options().with_(flush_policy="none")
    names = [group_name(i) for i in range(groups)]
    where = [partition_for(n, offsets_partitions) for n in names]
    by_partition: dict[int, list[int]] = {}
    for i, p in enumerate(where):
        by_partition.setdefault(p, []).append(i)
    keys = [[encode_key(OffsetCommitKey(n, TOPIC, q)) for q in range(partitions)] for n in names]
    base_ts = int(time.time() * 1000) - rounds * 1000
    written = 0

    async def write() -> None:
        nonlocal written
        logs = {p: Log.open(data_dir, "__consumer_offsets", p, options) for p in range(offsets_partitions)}
        for r in range(rounds):
            ts = base_ts + r * 1000
            values = [encode_value(OffsetCommitValue(offset=r * 1000 + q, commit_timestamp=ts))
                      for q in range(partitions)]
            for p, members in by_partition.items():
                pending: list[bytes] = []
                size = 0
                for i in members:
                    k = keys[i]
                    batch = build_batch([(k[q], values[q]) for q in range(partitions)], timestamp_ms=ts)
                    pending.append(batch)
                    size += len(batch)
                    if size >= APPEND_BYTES:
                        await logs[p].append(pending)
                        pending, size = [], 0
                if pending:
                    await logs[p].append(pending)
                written += len(members) * partitions
            print(f"    round {r + 1}/{rounds}: {written:,} records", flush=True)
        for log in logs.values():
            await log.flush()
            await log.close()

    asyncio.run(write())
    return written


def generate(groups: int, partitions: int, rounds: int, offsets_partitions: int = OFFSETS_PARTITIONS,
             force: bool = False) -> tuple[Path, dict]:
    """The cached data directory for these parameters (generated if missing/stale) and its marker."""
    key = cache_dir(groups, partitions, rounds, offsets_partitions)
    marker = key / "generated.json"
    if marker.exists() and not force:
        info = json.loads(marker.read_text())
        if time.time() - info["created"] < MAX_AGE_S:
            return key / "data", info
    shutil.rmtree(key, ignore_errors=True)
    key.mkdir(parents=True)
    t0 = time.perf_counter()
    print(f"  generating {groups * partitions * rounds:,} records ({groups:,} groups x {partitions} partitions x "
          f"{rounds} rounds) into {key} ...", flush=True)
    layout(key / "data", partitions, offsets_partitions)
    records = write_log(key / "data", groups, partitions, rounds, offsets_partitions)
    size = sum(f.stat().st_size for f in (key / "data").rglob("*.log"))
    info = {"groups": groups, "partitions": partitions, "rounds": rounds, "offsets_partitions": offsets_partitions,
            "records": records, "live_offsets": groups * partitions, "log_bytes": size,
            "records_per_batch": partitions, "created": time.time(),
            "seconds": round(time.perf_counter() - t0, 1)}
    marker.write_text(json.dumps(info, indent=1))
    print(f"  generated {records:,} records, {size / 2**20:,.0f} MiB in {info['seconds']} s", flush=True)
    return key / "data", info


def main() -> int:
    ap = argparse.ArgumentParser(description="Generate a cached __consumer_offsets log for the coordinator bench.")
    ap.add_argument("--groups", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=10, help="partitions per group (records per commit batch)")
    ap.add_argument("--rounds", type=int, default=10, help="commits per offset")
    ap.add_argument("--offsets-partitions", type=int, default=OFFSETS_PARTITIONS)
    ap.add_argument("--force", action="store_true", help="regenerate even if cached")
    args = ap.parse_args()
    path, info = generate(args.groups, args.partitions, args.rounds, args.offsets_partitions, args.force)
    print(path)
    print(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
