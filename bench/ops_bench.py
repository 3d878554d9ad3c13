"""Cost of the operator tools (issue 34): /metrics, the lag monitor, the commit path with them on,
and ``groupcoord groups --describe --all-groups``. One command::

    .venv/bin/python bench/ops_bench.py                          # everything (~6 minutes)
    .venv/bin/python bench/ops_bench.py --only scrape,sample     # in-process parts (~2 minutes)
    .venv/bin/python bench/ops_bench.py --only commit --pairs 3
    .venv/bin/python bench/ops_bench.py --only describe

Workloads:

- ``scrape`` and ``sample`` (in process, the pieces as ``app.py`` wires them: a real
  ``GroupCoordinatorShard`` loaded by replaying OffsetCommit records, ``StateView``,
  ``LagMonitor``, ``register_metrics`` and the HTTP listener): 10,000 classic groups of 10
  committed partitions (100,000 offsets), 1,000 topics of 10 partitions, 10 groups reading each
  topic. The partitions are stand-ins with a high watermark and no records on disk (time lag from
  the lookup tables, as in bench/state_view_bench.py).
  ``scrape``: GET /metrics over HTTP by curl (its ``time_total``: the server's render and the
  transfer; the server's CPU is this process's): the very first one (every group's lines rendered), the
  first after each of 3 later samples with a tenth of the groups committing (median), 20 more
  between samples (median, p99); then ``MetricsExposition.render()`` alone and the registry's
  collectors alone (what is computed at every scrape).
  ``sample``: process CPU (``time.process_time``, every thread) of one lag sample and of the
  first scrape after it, with 1 %, 10 % and 100 % of the groups committing between two samples
  (their topic's high watermark moves by 100 and they commit up to it), the other groups idle
  and caught up — or, the ``lagging`` rows, idle 50 behind (their lag in seconds grows and
  Burrow's rules can turn with time, so they are evaluated every sample). Median of 5 samples
  after 3 warm-up samples.
- ``commit``: server CPU per OffsetCommit (bench/coordinator_bench.py's commit storm and its
  measure, utime+stime of the server process over the window ÷ requests) with the HTTP listener
  and the lag monitor on (``http.listen``, defaults otherwise: a lag sample every 10 s; /metrics
  scraped every 5 s during the window) and off. Runs alternate off, on, off, on … on a fresh
  server each, so drift of the shared machine lands on both sides; the median of each side.
- ``describe``: ``groupcoord groups --describe --all-groups`` against a node with 10,000 groups
  (each a commit on one of 8 partitions, no members), in process (``groups_cli.run``, twice) and
  as a process (interpreter start included).

The "before" numbers of bench/RESULTS.md: this file copied into a checkout of the earlier commit
and run there (it imports the coordinator, and starts servers, from the tree it sits in).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import io
import json
import os
import platform
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(HERE), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

GROUPS = 10_000
PARTITIONS = 10
GROUPS_PER_TOPIC = 10
T0 = 1_700_000_000_000
ALL = ("scrape", "sample", "commit", "describe")


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


# --- in-process node: shard, view, lag monitor, metrics -----------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def now_ms(self) -> int:
        return self.now


class _NoTimer:
    def schedule(self, *args: Any, **kwargs: Any) -> None:
        pass

    def cancel(self, key: str) -> None:
        pass


class _Partition:
    replication = None
    is_leader = True

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.log_start_offset = 0
        self.high_watermark = self.last_stable_offset = 1_000


class _Logs:
    def __init__(self, topics: int) -> None:
        self.hosted = [_Partition(f"topic-{t}", p) for t in range(topics) for p in range(PARTITIONS)]
        self.by_tp = {(p.topic, p.partition): p for p in self.hosted}

    def partitions(self) -> list[_Partition]:
        return self.hosted

    def get(self, topic: str, partition: int) -> None:
        return None  # no records on disk: time lag from the lookup tables


class _Runtime:
    topic = "__consumer_offsets"
    load_seconds: dict[int, float] = {0: 1.0}

    def __init__(self, shard: Any) -> None:
        self.shard = shard

    def hosted(self) -> list[tuple[int, Any, Any]]:
        from coordinator.runtime.errors import CoordinatorState
        return [(0, CoordinatorState.ACTIVE, self.shard)]

    def standby_lag(self) -> dict[int, int]:
        return {}

    def state(self, partition: int) -> Any:
        from coordinator.runtime.errors import CoordinatorState
        return CoordinatorState.ACTIVE


class Node:
    """10,000 groups of 10 partitions, each group reading one topic of 10 partitions with 9 others."""

    def __init__(self, groups: int, lagging_idle: bool) -> None:
        from prometheus_client import CollectorRegistry

        from coordinator.config import load_config
        from coordinator.group.config import GroupConfig
        from coordinator.group.shard import GroupCoordinatorShard
        from coordinator.ops.context import OpsContext
        from coordinator.ops.lag_monitor import LagMonitor
        from coordinator.ops.metrics import register_metrics
        from coordinator.ops.state_view import StateView

        self.groups = groups
        self.topics = max(groups // GROUPS_PER_TOPIC, 1)
        self.clock = _Clock()
        self.shard = GroupCoordinatorShard(GroupConfig(), self.clock, _NoTimer())  # type: ignore[arg-type]
        self.logs = _Logs(self.topics)
        #: Idle groups sit this far behind the high watermark (0: caught up).
        self.behind = 50 if lagging_idle else 0
        for g in range(groups):
            self._commit(g, 1_000 - self.behind)
        self.shard.on_loaded()
        gc.collect()
        gc.freeze()
        self.view = StateView(runtime=_Runtime(self.shard), logs=self.logs, node_id=0)  # type: ignore[arg-type]
        self.monitor = LagMonitor(self.view, self.clock.now_ms)
        self.ctx = OpsContext(config=load_config(), view=self.view, lag=self.monitor, readiness=None,  # type: ignore[arg-type]
                              handlers={}, registry=CollectorRegistry(), cluster_id="bench", node_id=0,
                              clock_ms=self.clock.now_ms)
        register_metrics(self.ctx)

    def _commit(self, g: int, offset: int) -> None:
        from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, serialize
        topic = f"topic-{g // GROUPS_PER_TOPIC}"
        for p in range(PARTITIONS):
            self.shard.replay(*serialize(OffsetCommitKey(f"group-{g}", topic, p), OffsetCommitValue(
                offset=offset, metadata="", commit_timestamp=self.clock.now, leader_epoch=-1)))

    def step(self, fraction: float, step: int) -> None:
        """10 s pass; ``fraction`` of the groups (whole topics) get records and commit up to them."""
        self.clock.now += 10_000
        topics = max(int(self.topics * fraction), 1)
        first = (step * topics) % self.topics
        for t in range(first, first + topics):
            t %= self.topics
            for p in range(PARTITIONS):
                part = self.logs.by_tp[(f"topic-{t}", p)]
                part.high_watermark = part.last_stable_offset = part.high_watermark + 100
            end = self.logs.by_tp[(f"topic-{t}", 0)].high_watermark
            for g in range(t * GROUPS_PER_TOPIC, (t + 1) * GROUPS_PER_TOPIC):
                self._commit(g, end)


def scrape_workload(groups: int, repeats: int) -> dict[str, Any]:
    from coordinator.ops.http_listener import start_http

    node = Node(groups, lagging_idle=False)

    async def run() -> dict[str, Any]:
        listener = await start_http(node.ctx, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{listener.port}/metrics"
        try:
            async def get() -> tuple[float, float, int]:
                # curl in its own process, as Prometheus would scrape: the wall time is the
                # server's render and the transfer; the CPU is this process's (the server's).
                cpu = time.process_time()
                proc = await asyncio.create_subprocess_exec(
                    "curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total} %{size_download}", url,
                    stdout=asyncio.subprocess.PIPE)
                out, _ = await proc.communicate()
                code, total, size = out.decode().split()
                assert code == "200", code
                return float(total), time.process_time() - cpu, int(size)

            node.step(0.1, 0)
            node.monitor.sample(node.clock.now)
            cold_wall, cold_cpu, size = await get()
            # Steady state: a tenth of the groups committed since the last sample.
            after: list[tuple[float, float, int]] = []
            for step in range(1, 4):
                node.step(0.1, step)
                node.monitor.sample(node.clock.now)
                after.append(await get())
            first_wall = statistics.median(a[0] for a in after)
            first_cpu = statistics.median(a[1] for a in after)
            walls: list[float] = []
            for _ in range(repeats):
                walls.append((await get())[0])
            renders: list[float] = []
            for _ in range(repeats):
                started = time.perf_counter()
                assert node.ctx.metrics is not None
                await node.ctx.metrics.render()
                renders.append(time.perf_counter() - started)
            # A coordinator-metrics collect alone (the part computed at every scrape).
            from prometheus_client.exposition import generate_latest
            registry_times: list[float] = []
            for _ in range(repeats):
                started = time.perf_counter()
                generate_latest(node.ctx.registry)
                registry_times.append(time.perf_counter() - started)
        finally:
            await listener.stop()
        return {"series_bytes": size, "first_scrape_ms": _ms(cold_wall), "first_scrape_cpu_ms": _ms(cold_cpu),
                "first_after_sample_ms": _ms(first_wall),
                "first_after_sample_cpu_ms": _ms(first_cpu), "scrape_median_ms": _ms(statistics.median(walls)),
                "scrape_p99_ms": _ms(_p99(walls)), "render_median_ms": _ms(statistics.median(renders)),
                "render_p99_ms": _ms(_p99(renders)), "registry_median_ms": _ms(statistics.median(registry_times)),
                "repeats": repeats}

    return asyncio.run(run())


def sample_workload(groups: int, fractions: list[float], samples: int = 5, warmup: int = 3) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for lagging in (False, True):
        node = Node(groups, lagging_idle=lagging)

        async def run(node: Node = node, lagging: bool = lagging) -> None:
            assert node.ctx.metrics is not None
            for fraction in fractions:
                for step in range(warmup):
                    node.step(fraction, step)
                    node.monitor.sample(node.clock.now)
                    await node.ctx.metrics.render()
                sample_cpu: list[float] = []
                render_cpu: list[float] = []
                for step in range(warmup, warmup + samples):
                    node.step(fraction, step)
                    cpu = time.process_time()
                    node.monitor.sample(node.clock.now)
                    sample_cpu.append(time.process_time() - cpu)
                    cpu = time.process_time()
                    await node.ctx.metrics.render()
                    render_cpu.append(time.process_time() - cpu)
                rows.append({"idle": "lagging" if lagging else "caught up", "committing": fraction,
                             "sample_cpu_ms": _ms(statistics.median(sample_cpu)),
                             "first_scrape_cpu_ms": _ms(statistics.median(render_cpu)),
                             "per_10s_cpu_pct": round((statistics.median(sample_cpu) + statistics.median(render_cpu))
                                                      / 10.0 * 100, 2)})

        asyncio.run(run())
        del node
        gc.unfreeze()
        gc.collect()
    return rows


# --- commit path with the HTTP listener and lag monitor on vs off --------------------------


def commit_workload(pairs: int, seconds: float) -> dict[str, Any]:
    import coordinator_bench as cb
    import peers

    args = argparse.Namespace(quick=False, seconds=seconds, warmup=2.0, processes=2, connections=8, depth=8,
                              partitions=10, groups=1000, members=100, rate=5000.0)
    cfg = cb.Config(args)
    # off: no HTTP listener; hooks: the listener (so the request, fsync and commit hooks count)
    # with no lag sample in the window and no scrape, i.e. what the metrics add to each commit;
    # on: the listener, a lag sample every 10 s (the default) and a scrape every 5 s.
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "hooks": [], "on": []}
    for i in range(pairs):
        for side in runs:
            settings = dict(cb.GROUPCOORD_SETTINGS)
            http_port = peers.free_port()
            if side != "off":
                settings["http.listen"] = f"127.0.0.1:{http_port}"
            if side == "hooks":
                settings["lag.sample.interval.ms"] = "3600000"
            server = peers.start_groupcoord(cfg.work / f"commit-{side}-{i}" / "data", settings)
            stop = threading.Event()
            scrapes: list[float] = []

            def scraper(port: int = http_port, stop: threading.Event = stop, scrapes: list[float] = scrapes) -> None:
                while not stop.wait(5.0):
                    started = time.perf_counter()
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
                        resp.read()
                    scrapes.append(time.perf_counter() - started)

            thread = threading.Thread(target=scraper, daemon=True) if side == "on" else None
            try:
                if thread is not None:
                    thread.start()
                row = cb.offsets_workload("commit", cfg, server)
            finally:
                stop.set()
                if thread is not None:
                    thread.join(timeout=60)
                server.stop()
            row["scrapes"] = len(scrapes)
            runs[side].append(row)
            print(f"  commit {side} #{i}: {row['cpu_ms_per_1000']} ms CPU / 1,000 requests, "
                  f"{row['requests_per_s']:,} requests/s, {len(scrapes)} scrapes, errors {row['errors']}", flush=True)
    off = statistics.median(r["cpu_ms_per_1000"] for r in runs["off"])
    hooks = statistics.median(r["cpu_ms_per_1000"] for r in runs["hooks"])
    on = statistics.median(r["cpu_ms_per_1000"] for r in runs["on"])
    return {"runs": runs, "off_cpu_ms_per_1000": round(off, 2), "hooks_cpu_ms_per_1000": round(hooks, 2),
            "on_cpu_ms_per_1000": round(on, 2), "hooks_overhead_pct": round((hooks - off) / off * 100, 2),
            "overhead_pct": round((on - off) / off * 100, 2),
            "off_requests_per_s": round(statistics.median(r["requests_per_s"] for r in runs["off"])),
            "on_requests_per_s": round(statistics.median(r["requests_per_s"] for r in runs["on"]))}


# --- groupcoord groups --describe --all-groups -------------------------------------------


def _commit_frame(i: int) -> bytes:
    from protocol.apis import ApiKey, request_class
    from protocol.client import encode_request
    C = request_class(ApiKey.OFFSET_COMMIT)
    T = C.OffsetCommitRequestTopic
    request = C(version=8, group_id=f"group-{i:05d}", generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, retention_time_ms=-1, topics=[T(name="bench", partitions=[
                    T.OffsetCommitRequestPartition(partition_index=i % 8, committed_offset=0,
                                                   committed_leader_epoch=-1, commit_timestamp=-1,
                                                   committed_metadata="")])])
    return encode_request(ApiKey.OFFSET_COMMIT, 8, i, request)


def describe_workload(groups: int) -> dict[str, Any]:
    import peers

    from coordinator.groups_cli import run
    from coordinator.tools.group_admin import GroupAdmin

    work = Path(tempfile.mkdtemp(prefix="ops-bench-describe-"))
    server = peers.start_groupcoord(work / "data", {"group.initial.rebalance.delay.ms": "0"})
    bootstrap = f"{server.host}:{server.port}"
    try:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic("bench", 8, 1)])
        admin.close()
        names = [f"group-{i:05d}" for i in range(groups)]
        with GroupAdmin(bootstrap) as ga:
            ga.find_coordinators(names)  # creates __consumer_offsets
        # Pipelined OffsetCommit without a member (a simple consumer), 200 in flight.
        sock = socket.create_connection((server.host, server.port))
        sent = got = 0
        while got < groups:
            while sent < groups and sent - got < 200:
                sock.sendall(_commit_frame(sent))
                sent += 1
            header = b""
            while len(header) < 4:
                header += sock.recv(4 - len(header))
            (size,) = struct.unpack(">i", header)
            body = b""
            while len(body) < size:
                body += sock.recv(size - len(body))
            got += 1
        sock.close()
        in_process: list[float] = []
        described = 0
        for _ in range(2):
            out, err = io.StringIO(), io.StringIO()
            started = time.perf_counter()
            rc = run(["--bootstrap-server", bootstrap, "--describe", "--all-groups"], out, err)
            in_process.append(time.perf_counter() - started)
            assert rc == 0, err.getvalue()[-500:]
            # One header line per group's table (a group without members has one too, after
            # Kafka's "has no active members" notice).
            described = out.getvalue().count("GROUP ")
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "coordinator", "groups", "--bootstrap-server", bootstrap,
                               "--describe", "--all-groups"], capture_output=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        as_process = time.perf_counter() - started
        assert proc.returncode == 0, proc.stderr[-500:]
    finally:
        server.stop()
    return {"groups": groups, "described": described, "in_process_s": [round(s, 2) for s in in_process],
            "as_process_s": round(as_process, 2)}


# --- main -----------------------------------------------------------------------------------


def tree_state() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
    except OSError:
        rev = ""
    return rev or str(REPO)


def main() -> int:
    ap = argparse.ArgumentParser(description="Operator tools benchmark (issue 34).")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(ALL)}")
    ap.add_argument("--groups", type=int, default=GROUPS, help="groups (10 partitions each) for scrape/sample")
    ap.add_argument("--repeats", type=int, default=20, help="scrapes measured after the first")
    ap.add_argument("--fractions", default="0.01,0.1,1", help="fractions of groups committing between samples")
    ap.add_argument("--pairs", type=int, default=3, help="commit: alternating off/on runs")
    ap.add_argument("--seconds", type=float, default=8.0, help="commit: measured window per run")
    ap.add_argument("--describe-groups", type=int, default=10_000)
    ap.add_argument("--json", default="", help="also write the results here")
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w] or list(ALL)
    for w in only:
        if w not in ALL:
            ap.error(f"unknown workload {w!r}; choose from {', '.join(ALL)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    u = platform.uname()
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} vCPUs, {u.machine}, Linux {u.release}, Python {platform.python_version()}",
        "load_before": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "tree": tree_state(), "command": "python bench/ops_bench.py " + " ".join(sys.argv[1:])}
    print(f"{results['machine']}; tree {results['tree']}; load {results['load_before']}", flush=True)
    if "scrape" in only:
        results["scrape"] = scrape_workload(args.groups, args.repeats)
        print("scrape:", json.dumps(results["scrape"]), flush=True)
    if "sample" in only:
        results["sample"] = sample_workload(args.groups, [float(f) for f in args.fractions.split(",")])
        for row in results["sample"]:
            print("sample:", json.dumps(row), flush=True)
    if "commit" in only:
        results["commit"] = commit_workload(args.pairs, args.seconds)
        print("commit:", json.dumps({k: v for k, v in results["commit"].items() if k != "runs"}), flush=True)
    if "describe" in only:
        results["describe"] = describe_workload(args.describe_groups)
        print("describe:", json.dumps(results["describe"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
