"""Group coordinator failover and cluster commit throughput (issue 14 benchmarks).

Kept in one file (~1100 lines): a benchmark is one command, and its workloads share one harness
(servers, load, result table) that no other module uses.

One invocation, one machine: a real ZooKeeper (the machine's installation, tickTime 2000 ms) and
three node processes (``LocalCluster``, ``zookeeper.session.timeout.ms=6000``,
``auto.leader.rebalance.enable=false`` so no preferred-leader election moves a leader between
measurements, ``group.initial.rebalance.delay.ms=0``), the same settings as ``cluster_bench.py``;
``__consumer_offsets`` has its defaults there: 50 partitions, RF 3, min.insync.replicas 2.

1. takeover (SIGKILL): the offsets partition P of a probe group is filled with committed offsets
   (first 10 k, then 1 M: many groups whose ids hash to P, each committing every partition of a
   ``fill`` topic in one OffsetCommit request, generation -1, i.e. simple/empty groups; the fill
   time is reported). Then, per event: wait until P's ISR (state znode) has all three nodes, SIGKILL
   the node leading P, and run a client that retries FindCoordinator (rotating over the three
   bootstrap nodes) + OffsetCommit of the probe group every 5 ms; the takeover time is signal →
   the first OffsetCommit answered NONE by a node other than the killed one. Also recorded:
   signal → the new leader in the state znode (polled every 20 ms), and the successor's log line
   ``coordinator partition loaded … from_standby=…`` (load seconds, offsets replayed). Then the
   killed node is restarted and the script waits until it is back in P's ISR.
2. takeover (SIGTERM, controlled shutdown): the same, with SIGTERM.
3. throughput: OffsetCommit storm (simple commits of 10 partitions per request, 1,000 groups over
   all 50 offsets partitions) from ``bench/loadgen`` (pre-encoded frames, several connections per
   process, a bounded number of requests in flight per connection), against one node in
   single-node mode, 3 nodes with ``offsets.topic.replication.factor=1``, and 3 nodes with RF 3.
   Three loader processes in every configuration; in the clusters each process drives the groups
   whose coordinator is one node. Reported: commits (requests) per second, server CPU per commit
   (utime+stime of every node process from ``/proc/<pid>/stat`` over the measured window), the
   loaders' CPU and ZooKeeper's.

Run: ``.venv/bin/python bench/group_failover_bench.py [--quick] [--kills N] [--terms N]
[--only takeover,throughput] [--rounds N] [--settle S] [--rolling] [--profile] [--diagnose-hangs]``
(defaults: 20 SIGKILLs and 10 SIGTERMs per size, 3 throughput rounds; ``--quick``: 3, 2, 1).
``--profile`` samples node 1 with py-spy in the last throughput round and ``--diagnose-hangs``
dumps the asyncio tasks of a node that does not exit after SIGTERM; both need py-spy in the bench
cache (``pip install --target ~/.cache/groupcoord-bench/pyspy py-spy``) for the native stacks.
Fresh directories under /tmp, free loopback ports; every process started is stopped at the end
(also on errors and Ctrl-C); evidence of a hang is kept in /tmp/gc-failover-hang-*.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import queue as queue_mod
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(REPO), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from cluster_bench import (
    SESSION_MS,
    TICK_MS,
    SingleNode,
    Zk,
    cpu_seconds,
    free_ports,
    machine_info,
    node_log_lines,
    wait_for,
)
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from loadgen import messages
from loadgen.stats import Result, percentiles
from loadgen.storm import Spec, run_process

from coordinator.cluster.local_cluster import LocalCluster
from protocol.apis import ApiKey
from protocol.client import decode_response, encode_request
from protocol.hashing import partition_for

OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 50
FILL_TOPIC = "fill"
COMMIT_V = 8  # OffsetCommit
FETCH_V = 7  # OffsetFetch (one group, topics list)
FIND_V = 3  # FindCoordinator (one key)
RETRY_S = 0.005
POST_S = 5.0  # after the takeover, keep committing this long and report the longest gap
FIND_TIMEOUT_S = 2.0  # the client's timeout for FindCoordinator (answered at once by a live node)
COMMIT_TIMEOUT_S = 10.0  # for OffsetCommit: longer than offsets.commit.timeout.ms (5 s)
STOP_WAIT_S = 30.0  # a node given SIGTERM must exit within this (LocalCluster's own stop timeout)
PYSPY = Path.home() / ".cache" / "groupcoord-bench" / "pyspy"  # pip install --target (diagnostics only)
BASE_SETTINGS = [f"zookeeper.session.timeout.ms={SESSION_MS}", "auto.leader.rebalance.enable=false",
                 "group.initial.rebalance.delay.ms=0"]


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# a minimal blocking wire client


class Wire:
    def __init__(self, host: str, port: int, timeout: float = 15.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, api: int, version: int, message: Any) -> None:
        self.cid += 1
        self.sock.sendall(encode_request(api, version, self.cid, message, client_id="failover-bench"))

    def send_frame(self, frame: bytes) -> None:
        self.cid += 1
        self.sock.sendall(frame[:8] + struct.pack(">i", self.cid) + frame[12:])

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            buf += chunk
        return bytes(buf)

    def receive(self, api: int, version: int) -> Any:
        size = struct.unpack(">i", self._exact(4))[0]
        return decode_response(api, version, self._exact(size))[1]

    def request(self, api: int, version: int, message: Any) -> Any:
        self.send(api, version, message)
        return self.receive(api, version)


def find_request(group: str) -> Any:
    return FindCoordinatorRequest(version=FIND_V, key=group, key_type=0)


def commit_request(group: str, topic: str, partitions: range, base: int) -> Any:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        version=COMMIT_V, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1,
        topics=[T(name=topic, partitions=[P(partition_index=p, committed_offset=base + p, committed_leader_epoch=-1,
                                             committed_metadata="") for p in partitions])])


def commit_errors(response: Any) -> set[int]:
    return {int(p.error_code) for t in response.topics for p in t.partitions}


def groups_in_partition(prefix: str, partition: int, count: int, start: int = 0) -> list[str]:
    out: list[str] = []
    i = start
    while len(out) < count:
        name = f"{prefix}-{i}"
        if partition_for(name, OFFSETS_PARTITIONS) == partition:
            out.append(name)
        i += 1
    return out


# ---------------------------------------------------------------------------------------------
# 1 + 2: takeover


class Client:
    """The committing client: connections by node id, FindCoordinator rotating over the bootstrap
    nodes, OffsetCommit to the node it names."""

    def __init__(self, cluster: LocalCluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self.conns: dict[tuple[str, int], Wire] = {}
        self.next_node = 0
        self.offset = 0
        self.attempts = 0
        self.errors: dict[str, int] = {}
        self.commit_sent = 0.0
        #: (start, seconds, what) of every request or connection attempt that took over 0.1 s
        self.slow: list[tuple[float, float, str]] = []

    def conn(self, host: str, port: int, timeout: float) -> Wire:
        c = self.conns.get((host, port))
        if c is None:
            c = Wire(host, port, timeout=timeout)
            self.conns[(host, port)] = c
        return c

    def drop(self, host: str, port: int) -> None:
        c = self.conns.pop((host, port), None)
        if c is not None:
            c.close()

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()

    def _slow(self, started: float, what: str) -> None:
        took = time.monotonic() - started
        if took > 0.1:
            self.slow.append((started, took, what))

    def _note(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1

    def attempt(self) -> int | None:
        """One FindCoordinator + OffsetCommit; the node id that acknowledged the commit, or None."""
        self.attempts += 1
        port = self.cluster.ports[self.next_node % len(self.cluster.ports)]
        self.next_node += 1
        host = self.cluster.host
        asked = self.cluster.ports.index(port) + 1
        started = time.monotonic()
        try:
            c = self.conn(host, port, FIND_TIMEOUT_S)
            c.sock.settimeout(FIND_TIMEOUT_S)
            r = c.request(ApiKey.FIND_COORDINATOR, FIND_V, find_request(self.group))
        except OSError as exc:
            self.drop(host, port)
            self._note(f"find@{asked}: {type(exc).__name__}")
            self._slow(started, f"FindCoordinator to node {asked}: {type(exc).__name__}")
            return None
        self._slow(started, f"FindCoordinator to node {asked}: error {r.error_code}, coordinator {r.node_id}")
        if r.error_code:
            self._note(f"find@{asked}: error {r.error_code}")
            return None
        node, chost, cport = int(r.node_id), r.host, int(r.port)
        self.offset += 1
        self.commit_sent = time.monotonic()
        try:
            c = self.conn(chost, cport, COMMIT_TIMEOUT_S)
            c.sock.settimeout(COMMIT_TIMEOUT_S)
            resp = c.request(ApiKey.OFFSET_COMMIT, COMMIT_V,
                             commit_request(self.group, FILL_TOPIC, range(1), self.offset))
        except OSError as exc:
            self.drop(chost, cport)
            self._note(f"commit@{node}: {type(exc).__name__}")
            self._slow(self.commit_sent, f"OffsetCommit to node {node}: {type(exc).__name__}")
            return None
        errs = commit_errors(resp)
        self._slow(self.commit_sent, f"OffsetCommit to node {node}: errors {sorted(errs)}")
        if errs == {0}:
            return node
        self._note(f"commit@{node}: error {sorted(errs)}")
        return None


def isr_of(zk: Zk, partition: int, topic: str = OFFSETS) -> list[int]:
    try:
        return list(zk.state(topic, partition)["isr"])
    except Exception:  # noqa: BLE001  (a znode not written yet)
        return []


def fill(cluster: LocalCluster, zk: Zk, partition: int, groups: list[str], first_index: int, fill_partitions: int,
         depth: int = 8) -> float:
    """Commit every partition of the fill topic for each group (one request per group), pipelined
    on one connection to P's coordinator; seconds taken. Retries the whole batch on a coordinator
    error (never expected: no failover runs during the fill)."""
    leader = int(zk.state(OFFSETS, partition)["leader"])
    c = Wire(cluster.host, cluster.ports[leader - 1], timeout=60)
    t0 = time.monotonic()
    try:
        frames = [encode_request(ApiKey.OFFSET_COMMIT, COMMIT_V, 0,
                                 commit_request(g, FILL_TOPIC, range(fill_partitions), 1_000_000 + 1000 * i),
                                 client_id="failover-bench-fill")
                  for i, g in enumerate(groups, start=first_index)]
        inflight = 0
        sent = 0
        done = 0
        while done < len(frames):
            while sent < len(frames) and inflight < depth:
                c.send_frame(frames[sent])
                sent += 1
                inflight += 1
            resp = c.receive(ApiKey.OFFSET_COMMIT, COMMIT_V)
            inflight -= 1
            errs = commit_errors(resp)
            if errs != {0}:
                raise RuntimeError(f"fill commit #{done}: errors {sorted(errs)}")
            done += 1
            if done % 1000 == 0:
                log(f"fill: {done}/{len(frames)} requests ({done * fill_partitions:,} offsets)")
    finally:
        c.close()
    return time.monotonic() - t0


def check_offsets(cluster: LocalCluster, node: int, groups: list[str], fill_partitions: int, all_groups: list[str]) -> None:
    """OffsetFetch every fill partition of some groups from ``node``: the committed values."""
    from kafka.protocol.consumer import OffsetFetchRequest

    T = OffsetFetchRequest.OffsetFetchRequestTopic
    c = Wire(cluster.host, cluster.ports[node - 1], timeout=30)
    try:
        for g in groups:
            i = all_groups.index(g)
            r = c.request(ApiKey.OFFSET_FETCH, FETCH_V, OffsetFetchRequest(
                version=FETCH_V, group_id=g, topics=[T(name=FILL_TOPIC, partition_indexes=list(range(fill_partitions)))],
                require_stable=False))
            got = {p.partition_index: p.committed_offset for p in r.topics[0].partitions}
            want = {p: 1_000_000 + 1000 * i + p for p in range(fill_partitions)}
            if r.error_code or got != want:
                bad = [p for p in want if got.get(p) != want[p]][:5]
                raise RuntimeError(f"node {node}: group {g} offsets wrong (error {r.error_code}), e.g. partitions {bad}: "
                                   f"{[(p, got.get(p), want[p]) for p in bad]}")
    finally:
        c.close()


class LeaderWatch(threading.Thread):
    """Polls P's state znode every 20 ms; the monotonic time the leader first differs from ``old``."""

    def __init__(self, zk: Zk, partition: int, old: int, epoch: int) -> None:
        super().__init__(daemon=True)
        self.zk, self.partition, self.old, self.epoch = zk, partition, old, epoch
        self.seen: tuple[float, int] | None = None
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set() and self.seen is None:
            try:
                s = self.zk.state(OFFSETS, self.partition)
            except Exception:  # noqa: BLE001  (a lost connection: poll again)
                s = None
            if s is not None and int(s["leader_epoch"]) > self.epoch and int(s["leader"]) not in (-1, self.old):
                self.seen = (time.monotonic(), int(s["leader"]))
                return
            time.sleep(0.02)


_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def loaded_lines(cluster: LocalCluster, node: int, partition: int, wall_from: float, wall_to: float) -> list[dict[str, Any]]:
    """The node's ``coordinator partition loaded`` lines for the partition in the interval, oldest first."""
    lines = node_log_lines(cluster, wall_from, wall_to,
                           rf"coordinator partition loaded.*partition={OFFSETS}-{partition} ")
    out = []
    for line in lines:
        if not line.startswith(f"node-{node}:"):
            continue
        fields = {k: v.strip('"') for k, v in _FIELD.findall(line.split(":", 1)[1])}
        ts = datetime.strptime(fields["ts"].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
        out.append({"ts": ts, "seconds": float(fields.get("seconds", "nan")),
                    "from_offset": int(fields.get("from_offset", -1)), "log_end": int(fields.get("log_end", -1)),
                    "from_standby": fields.get("from_standby") == "True"})
    return out


def cluster_settled(zk: Zk) -> bool:
    """No under-replicated partition (every ISR as long as its replica list) and no replica still
    warming (``/admin/warming_replicas`` empty): what a rolling restart waits for before it stops
    the next broker (Kafka's operations docs: UnderReplicatedPartitions back to 0)."""
    from coordinator.cluster.znodes import BROKER_TOPICS, WARMING_REPLICAS, decode_topic, topic_path

    c = zk.client
    if c.exists(WARMING_REPLICAS) and c.get_children(WARMING_REPLICAS):
        return False
    for topic in c.get_children(BROKER_TOPICS):
        path = topic_path(topic)
        assignment = decode_topic(path, c.get(path)[0])
        for p, replicas in assignment.partitions.items():
            if len(isr_of(zk, p, topic)) < len(replicas):
                return False
    return True


def one_takeover(cluster: LocalCluster, zk: Zk, partition: int, group: str, hard: bool,
                 settle: float = 0.0, rolling: bool = False) -> dict[str, Any]:
    wait_for(lambda: len(isr_of(zk, partition)) == 3, 300, f"{OFFSETS}-{partition} ISR of three", 0.1)
    state = zk.state(OFFSETS, partition)
    leader, epoch = int(state["leader"]), int(state["leader_epoch"])
    client = Client(cluster, group)
    try:
        # the current coordinator serves the probe group before the event
        wait_for(lambda: client.attempt() == leader, 60, f"a commit acknowledged by node {leader}", RETRY_S)
        watch = LeaderWatch(zk, partition, leader, epoch)
        watch.start()
        proc = cluster.procs[leader]
        client.attempts = 0
        client.errors = {}
        client.slow = []
        exited: list[float] = []
        wall0 = time.time()
        t0 = time.monotonic()
        if hard:
            proc.kill()
        else:
            proc.terminate()
        reaper = threading.Thread(target=lambda: (proc.wait(), exited.append(time.monotonic())), daemon=True)
        reaper.start()
        old_acks = 0
        deadline = t0 + SESSION_MS / 1000 + 90
        while True:
            node = client.attempt()
            now = time.monotonic()
            if node is not None and node != leader:
                t_ack, successor = now, node
                sent_to_ack = now - client.commit_sent
                break
            if node == leader:
                old_acks += 1  # SIGTERM: the old coordinator may still answer before handing over
            if now > deadline:
                raise TimeoutError(f"no commit acknowledged by a new coordinator within {now - t0:.0f} s "
                                   f"(errors {client.errors})")
            time.sleep(RETRY_S)
        attempts, errors = client.attempts, dict(client.errors)
        slow = [(a - t0, b, w) for a, b, w in client.slow]
        # Availability right after the takeover: keep committing for POST_S; the longest stretch
        # without an acknowledged commit (a second outage, e.g. a reload at a new leader epoch).
        acks = [t_ack]
        post_errors: dict[str, int] = {}
        client.errors = post_errors
        while time.monotonic() < t_ack + POST_S:
            if client.attempt() is not None:
                acks.append(time.monotonic())
            else:
                time.sleep(RETRY_S)
        acks.append(max(acks[-1], t_ack + POST_S) if len(acks) > 1 else t_ack + POST_S)
        post_gap = max(b - a for a, b in itertools.pairwise(acks))
    finally:
        client.close()
    wall_ack = wall0 + (t_ack - t0)
    watch.join(5)
    watch.stop_event.set()
    hang = None
    reaper.join(max(0.0, t0 + STOP_WAIT_S - time.monotonic()))
    if reaper.is_alive():  # a graceful stop that does not end: keep evidence, then SIGKILL
        hang = keep_hang_evidence(cluster, leader, proc.pid)
        proc.kill()
        reaper.join(30)
    rc = proc.wait(30)
    exit_s = (exited[0] if exited else time.monotonic()) - t0
    # The load that served the first acknowledged commit is the last one before it; later ones in
    # the window after it are reloads (a new leader epoch for the same leader).
    lines = loaded_lines(cluster, successor, partition, wall0 - 0.05, wall_ack + POST_S + 0.5)
    before = [d for d in lines if d["ts"] <= wall_ack + 0.002]
    loaded = before[-1] if before else (lines[0] if lines else None)
    reloads = [d for d in lines if d is not loaded and d["ts"] > wall_ack]
    result = {"hard": hard, "leader": leader, "successor": successor, "epoch": epoch,
              "takeover_s": t_ack - t0, "zk_s": (watch.seen[0] - t0) if watch.seen else float("nan"),
              "attempts": attempts, "errors": errors, "old_acks": old_acks, "rc": rc, "exit_s": exit_s,
              "sent_to_ack_s": sent_to_ack, "post_gap_s": post_gap, "post_errors": post_errors,
              "wall0": wall0, "wall_ack": wall_ack, "loaded": loaded, "hang": hang,
              "reloads": reloads, "slow": slow}
    if loaded is not None:
        result["loaded_s"] = loaded["ts"] - wall0
    cluster.restart(leader)
    wait_for(lambda: leader in isr_of(zk, partition), 300, f"node {leader} back in the ISR of {OFFSETS}-{partition}", 0.1)
    result["rejoin_s"] = time.monotonic() - t0
    if rolling:
        wait_for(lambda: cluster_settled(zk), 300, "no under-replicated partition and no warming replica", 0.2)
        result["settled_s"] = time.monotonic() - t0
    if settle:
        time.sleep(settle)
    return result


#: ``--diagnose-hangs``: a sitecustomize put on the nodes' PYTHONPATH (the server's code is not
#: touched) so SIGUSR1 makes a node write every asyncio task's stack to ``<data dir>/../tasks-<pid>.txt``.
TASK_DUMP_HOOK = r"""
import os
import signal


def _dump_tasks(_sig, frame):
    import asyncio
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    path = os.path.join(os.environ.get("GFB_TASK_DUMP_DIR", "/tmp"), f"tasks-{os.getpid()}.txt")
    with open(path, "w") as f:
        for task in asyncio.all_tasks(loop):
            f.write(f"=== {task!r}\n")
            task.print_stack(limit=40, file=f)
        f.write("=== interrupted frame\n")
        import traceback
        traceback.print_stack(frame, file=f)


signal.signal(signal.SIGUSR1, _dump_tasks)
"""


def install_task_dump_hook(tmp: Path) -> Path:
    hook = tmp / "diag-hook"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(TASK_DUMP_HOOK)
    dumps = tmp / "task-dumps"
    dumps.mkdir(exist_ok=True)
    os.environ["PYTHONPATH"] = f"{hook}{os.pathsep}{os.environ['PYTHONPATH']}" if os.environ.get("PYTHONPATH") else str(hook)
    os.environ["GFB_TASK_DUMP_DIR"] = str(dumps)
    return dumps


def keep_hang_evidence(cluster: LocalCluster, broker_id: int, pid: int) -> str:
    """A node still running STOP_WAIT_S after SIGTERM: its Python stacks (py-spy, if installed in
    the bench cache) and every node's log, kept outside the temporary directory."""
    where = Path(tempfile.mkdtemp(prefix=f"gc-failover-hang-node{broker_id}-"))
    dumps = os.environ.get("GFB_TASK_DUMP_DIR")
    if dumps:
        os.kill(pid, signal.SIGUSR1)
        time.sleep(1.0)
        src = Path(dumps) / f"tasks-{pid}.txt"
        if src.exists():
            shutil.copy(src, where / "asyncio-tasks.txt")
    spy = PYSPY / "bin" / "py-spy"
    if spy.exists():
        env = {**os.environ, "PYTHONPATH": str(PYSPY)}
        dump = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60, env=env,
                              check=False)
        (where / "py-spy-dump.txt").write_text(dump.stdout + dump.stderr)
    for b in cluster.procs:
        try:
            shutil.copy(cluster.log_path(b), where / f"node-{b}.log")
        except FileNotFoundError:
            pass
    log(f"node {broker_id} still running {STOP_WAIT_S:.0f} s after SIGTERM: evidence in {where}; SIGKILLing it")
    return str(where)


def describe(r: dict[str, Any]) -> str:
    ld = r.get("loaded")
    load = (f"loaded {ld['seconds']:.3f} s from_standby={ld['from_standby']} replayed "
            f"{ld['log_end'] - ld['from_offset']:,} records (from {ld['from_offset']:,} to {ld['log_end']:,})"
            if ld else "no load line found")
    return (f"{'SIGKILL' if r['hard'] else 'SIGTERM'} node {r['leader']} -> {r['successor']}: takeover "
            f"{r['takeover_s']:.3f} s, new leader in ZK {r['zk_s']:.3f} s, load line {r.get('loaded_s', float('nan')):.3f} s, "
            f"{load}; {r['attempts']} attempts, "
            f"errors {r['errors']}; successful commit sent→acked {r['sent_to_ack_s']:.3f} s; longest gap in the "
            f"{POST_S:g} s after {r['post_gap_s']:.3f} s {r['post_errors'] or ''}; back in ISR after {r['rejoin_s']:.1f} s"
            f"{'; DID NOT EXIT after SIGTERM: ' + r['hang'] if r.get('hang') else ''}"
            + "".join(f"; slow client step at {a:.2f} s: {w} took {b:.2f} s" for a, b, w in r.get("slow", []))
            + "".join(f"; RELOADED {d['ts'] - r['wall0']:.2f} s after the signal: {d['seconds']:.3f} s, "
                      f"from_standby={d['from_standby']}, {d['log_end'] - d['from_offset']:,} records"
                      for d in r.get("reloads", [])))


def run_takeover(tmp: Path, args: argparse.Namespace, out: list[str]) -> None:
    cluster = LocalCluster(tmp / "takeover", 3, free_ports(3), tick_time_ms=args.tick_ms, settings=list(BASE_SETTINGS))
    zk: Zk | None = None
    results: list[dict[str, Any]] = []
    sizes: list[tuple[str, int, int, float]] = []  # label, offsets, groups, fill seconds
    try:
        cluster.start()
        log(f"takeover: cluster up in {tmp / 'takeover'} ({cluster.bootstrap})")
        from cluster_bench import create_topic

        create_topic(cluster.bootstrap, FILL_TOPIC, args.fill_partitions, 1, 1)
        zk = Zk(cluster.zookeeper.connect)
        probe = "failover-probe"
        partition = partition_for(probe, OFFSETS_PARTITIONS)
        client = Client(cluster, probe)
        try:  # creates __consumer_offsets (FindCoordinator), waits until the probe group is served
            wait_for(lambda: client.attempt() is not None, 120, "a first commit of the probe group", 0.1)
        finally:
            client.close()
        log(f"takeover: probe group {probe!r} is in {OFFSETS}-{partition}")
        fill_groups: list[str] = []
        for label, total in (("10 k", args.small), ("1 M", args.large)):
            want = total // args.fill_partitions
            new = groups_in_partition("filler", partition, want - len(fill_groups),
                                      start=0 if not fill_groups else int(fill_groups[-1].split("-")[1]) + 1)
            wait_for(lambda: len(isr_of(zk, partition)) == 3, 300, "full ISR before the fill", 0.1)
            log(f"takeover: filling {len(new)} groups x {args.fill_partitions} partitions")
            seconds = fill(cluster, zk, partition, new, len(fill_groups), args.fill_partitions)
            fill_groups += new
            offsets = len(fill_groups) * args.fill_partitions
            sizes.append((label, offsets, len(fill_groups), seconds))
            log(f"takeover: {OFFSETS}-{partition} holds {offsets:,} committed offsets of {len(fill_groups)} groups "
                f"(+ the probe group); this fill took {seconds:.1f} s ({len(new) * args.fill_partitions / seconds:,.0f} offsets/s)")
            for hard, n in ((True, args.kills), (False, args.terms)):
                for k in range(n):
                    r = one_takeover(cluster, zk, partition, probe, hard, args.settle, args.rolling)
                    r["size"] = label
                    results.append(r)
                    log(f"takeover [{label}] #{k + 1}: {describe(r)}")
            # every offset of a few groups, read back from the current coordinator
            leader = int(zk.state(OFFSETS, partition)["leader"])
            sample = [fill_groups[0], fill_groups[len(fill_groups) // 2], fill_groups[-1]]
            check_offsets(cluster, leader, sample, args.fill_partitions, fill_groups)
            log(f"takeover [{label}]: offsets of {sample} read back from node {leader}: all correct")
    finally:
        if zk is not None:
            zk.close()
        cluster.stop()
    report_takeover(cluster, results, sizes, args, out)


def report_takeover(cluster: LocalCluster, results: list[dict[str, Any]], sizes: list[tuple[str, int, int, float]],
                    args: argparse.Namespace, out: list[str]) -> None:
    out.append(f"### Coordinator takeover ({OFFSETS}: {OFFSETS_PARTITIONS} partitions, RF 3, min.insync.replicas 2; "
               f"zookeeper.session.timeout.ms={SESSION_MS}, ZooKeeper tickTime {args.tick_ms} ms; the client retries "
               f"FindCoordinator + OffsetCommit every {RETRY_S * 1000:.0f} ms; next event once the restarted node is "
               f"back in the partition's ISR{', every ISR full and no replica warming' if args.rolling else ''}"
               f"{f' + {args.settle:g} s' if args.settle else ''})\n")
    out.append("Fill (simple groups, one OffsetCommit of every partition of a "
               f"{args.fill_partitions}-partition topic per group, 8 requests in flight, to the partition's leader; "
               "each commit acknowledged once the ISR has it):\n")
    for label, offsets, ngroups, seconds in sizes:
        out.append(f"* {label}: {offsets:,} offsets in {ngroups} groups of one offsets partition; this step's fill took "
                   f"{seconds:.1f} s")
    out.append("")
    out.append("| offsets in the partition | event | n | signal → first commit acked by the new coordinator p50 / max (s) "
               "| min (s) | signal → new leader in ZK p50 / max (s) | signal → `coordinator partition loaded` p50 / max (s) "
               "| load time p50 / max (s) | from_standby | records replayed p50 / max "
               f"| the acked commit: sent → acked p50 / max (s) | longest gap between acked commits in the {POST_S:g} s after, "
               "p50 / max (s) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, *_ in sizes:
        for hard, name in ((True, "SIGKILL"), (False, "SIGTERM")):
            rs = [r for r in results if r["size"] == label and r["hard"] == hard]
            if not rs:
                continue
            ts = [r["takeover_s"] for r in rs]
            zs = [r["zk_s"] for r in rs]
            ls = [r["loaded_s"] for r in rs if "loaded_s" in r]
            lds = [r["loaded"] for r in rs if r.get("loaded")]
            secs = [d["seconds"] for d in lds]
            replayed = [d["log_end"] - d["from_offset"] for d in lds]
            standby = sum(1 for d in lds if d["from_standby"])

            def pm(v: list[float], fmt: str = ".3f") -> str:
                return f"{statistics.median(v):{fmt}} / {max(v):{fmt}}" if v else "—"

            out.append(f"| {label} | {name} | {len(rs)} | **{pm(ts)}** | {min(ts):.3f} | {pm(zs)} | {pm(ls)} | {pm(secs)} | "
                       f"{standby} of {len(lds)} True | {pm([float(x) for x in replayed], ',.0f')} | "
                       f"{pm([r['sent_to_ack_s'] for r in rs])} | {pm([r['post_gap_s'] for r in rs])} |")
    out.append("")
    out.append("Per event (s, `K`ill/`T`erm old→new, takeover, `s`=from standby / `L`=loaded from the log): " + "; ".join(
        f"[{r['size']}] {'K' if r['hard'] else 'T'}{r['leader']}→{r['successor']} {r['takeover_s']:.2f}"
        f"{'s' if r.get('loaded') and r['loaded']['from_standby'] else 'L'}" for r in results))
    reloaded = [r for r in results if r.get("reloads")]
    if reloaded:
        out.append(f"\n**Reloads after the takeover** (the new coordinator loaded the partition again within "
                   f"{POST_S:g} s of its first acknowledged commit) in {len(reloaded)} of {len(results)} events:")
        for r in reloaded:
            for d in r["reloads"]:
                out.append(f"* [{r['size']}] {'SIGKILL' if r['hard'] else 'SIGTERM'} {r['leader']}→{r['successor']}: "
                           f"{d['ts'] - r['wall0']:.2f} s after the signal, load {d['seconds']:.3f} s, "
                           f"from_standby={d['from_standby']}, {d['log_end'] - d['from_offset']:,} records replayed; "
                           f"longest commit gap in the {POST_S:g} s after the takeover {r['post_gap_s']:.2f} s")
    not_standby = [r for r in results if r.get("loaded") and not r["loaded"]["from_standby"]]
    for r in not_standby[:3]:
        out.append(f"\nNot from standby: {describe(r)}")
    terms = [r for r in results if not r["hard"]]
    slow_terms = [r for r in terms if r.get("slow")]
    if slow_terms:
        out.append(f"\nSIGTERM events where one client request or connection attempt took over 0.1 s before the "
                   f"takeover ({len(slow_terms)} of {len(terms)}):")
        for r in slow_terms:
            out.append(f"* [{r['size']}] T{r['leader']}→{r['successor']} takeover {r['takeover_s']:.2f} s: " + "; ".join(
                f"at {a:.2f} s {w} took {b:.2f} s" for a, b, w in r["slow"]))
    if terms:
        out.append(f"\nSIGTERM: the node exited {statistics.median([r['exit_s'] for r in terms]):.2f} s after the signal "
                   f"(median), exit codes {sorted({r['rc'] for r in terms})}; commits the old coordinator still "
                   f"acknowledged after the signal: {sum(r['old_acks'] for r in terms)}.")
    hangs = [r for r in results if r.get("hang")]
    if hangs:
        out.append(f"\n**{len(hangs)} of {len(terms)} SIGTERMed nodes did not exit within {STOP_WAIT_S:.0f} s** "
                   f"(SIGKILLed then; stacks and logs kept: {', '.join(r['hang'] for r in hangs)}).")
    rejoin = [r["rejoin_s"] for r in results]
    if rejoin:
        out.append(f"\nThe stopped node back in the ISR (from the signal, restart included): p50 "
                   f"{statistics.median(rejoin):.1f} s, max {max(rejoin):.1f} s.")
    errs: dict[str, int] = {}
    for r in results:
        for k, v in r["errors"].items():
            errs[k] = errs.get(k, 0) + v
    out.append(f"\nClient attempts that failed, by kind, over all events: {errs}.")
    out.append("")


# ---------------------------------------------------------------------------------------------
# 3: throughput


def _worker(spec: Spec, q: mp.Queue) -> None:  # type: ignore[type-arg]
    try:
        q.put(run_process(spec))
    except BaseException as e:  # noqa: BLE001
        r = Result()
        r.failures.append(f"loader process failed: {e!r}")
        q.put(r)


def start_profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy (bench cache, ``pip install --target``) sampling one node over the window."""
    spy = PYSPY / "bin" / "py-spy"
    if not spy.exists():
        return None
    return subprocess.Popen([str(spy), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "100",
                             "--nonblocking", "--format", "raw", "--output", str(out)],
                            env={**os.environ, "PYTHONPATH": str(PYSPY)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


#: Where a node's samples go, first match wins (a substring of any frame of the stack).
PROFILE_CATEGORIES = [
    ("hot standby: replaying replicated records (`CoordinatorRuntime._follow_log`)", "_follow_log"),
    ("follower side: replica fetcher (fetch, append_replicated)", "cluster/replica_fetcher.py"),
    ("leader side: answering followers' Fetch", "topics/fetch.py"),
    ("OffsetCommit handling (`GroupService.offset_commit`: records, append, answer)", "offset_commit"),
    ("other request parsing / dispatch / answering (server, protocol)", "server/server.py"),
    ("storage I/O thread (write, fsync)", "storage/io_worker.py"),
    ("ZooKeeper client threads (kazoo)", "kazoo/"),
]


def profile_categories(path: Path) -> list[tuple[str, float]]:
    totals = {name: 0 for name, _ in PROFILE_CATEGORIES}
    other = 0
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        for name, needle in PROFILE_CATEGORIES:
            if needle in stack:
                totals[name] += n
                break
        else:
            other += n
    if not total:
        return []
    return [(name, v * 100 / total) for name, v in totals.items()] + [("everything else", other * 100 / total)]


def summarize_profile(path: Path, top: int = 12) -> list[tuple[str, float, float]]:
    """(function, inclusive %, self %) of the hottest functions in a py-spy raw (collapsed) file."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = [f.strip() for f in stack.split(";")]
        names = []
        for f in frames:
            m = re.match(r"(.*?) \((.*?):\d+\)$", f)
            names.append(f"{m.group(1)} ({m.group(2).split('/main/')[-1].split('/gc-head/')[-1]})" if m else f)
        for name in set(names):
            inclusive[name] = inclusive.get(name, 0) + n
        own[names[-1]] = own.get(names[-1], 0) + n
    if not total:
        return []
    boring = ("asyncio/", "runpy", "<module>", "threading.py", "selectors.py", "cli.py", "__main__")
    rows = [(k, v * 100 / total, own.get(k, 0) * 100 / total) for k, v in inclusive.items()
            if not any(b in k for b in boring)]
    rows.sort(key=lambda r: -r[1])
    return rows[:top]


def storm(specs: list[Spec], server_pids: list[int], zk_pid: int | None,
          profile: tuple[int, Path] | None = None) -> dict[str, Any]:
    """Run one loader process per spec, all starting together; merged result and CPU of the
    servers (summed) and ZooKeeper over the measured window."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start_at = time.time() + 2.0
    specs = [replace(s, start_at=start_at) for s in specs]
    warmup, seconds = specs[0].warmup, specs[0].seconds
    procs = [ctx.Process(target=_worker, args=(s, q), daemon=True) for s in specs]
    for p in procs:
        p.start()
    try:
        window = start_at + warmup
        time.sleep(max(0.0, window - time.time()))
        per0 = [cpu_seconds(p) for p in server_pids]
        zk0 = cpu_seconds(zk_pid) if zk_pid else 0.0
        t0 = time.perf_counter()
        spy = start_profile(profile[0], seconds, profile[1]) if profile else None
        time.sleep(max(0.0, window + seconds - time.time()))
        per1 = [cpu_seconds(p) for p in server_pids]
        zk1 = cpu_seconds(zk_pid) if zk_pid else 0.0
        wall = time.perf_counter() - t0
        merged = Result()
        got = 0
        deadline = time.monotonic() + 120
        while got < len(procs):
            try:
                merged.merge(q.get(timeout=1.0))
                got += 1
            except queue_mod.Empty:
                if any(p.exitcode not in (None, 0) for p in procs) or time.monotonic() > deadline:
                    merged.failures.append(f"{len(procs) - got} loader processes gave no result")
                    break
        if spy is not None:
            spy.wait(60)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.terminate()
                p.join(5)
    per = [b - a for a, b in zip(per0, per1, strict=True)]
    lat = percentiles(merged.latencies_us)
    return {"requests": merged.requests, "seconds": seconds, "wall": wall, "rps": merged.requests / seconds,
            "server_cpu": sum(per), "per_node_cpu": per, "zk_cpu": zk1 - zk0, "client_cpu": merged.loader_cpu_s,
            "errors": merged.errors, "error_kinds": merged.error_kinds, "failures": merged.failures[:5],
            "p50": lat[0.5], "p99": lat[0.99]}


def wait_groups_served(host: str, port: int, groups: list[str], topic: str, timeout: float = 120) -> None:
    """OffsetFetch answers without a coordinator error for every group at this node."""
    fv = 7
    c = Wire(host, port, timeout=30)
    deadline = time.monotonic() + timeout
    pending = list(groups)
    try:
        while pending:
            still = []
            for g in pending:
                c.send_frame(messages.fetch_frame(fv, g, topic, 1))
            for g in pending:
                r = c.receive(ApiKey.OFFSET_FETCH, fv)
                if set(messages.error_codes(r)) - {0}:
                    still.append(g)
            pending = still
            if pending:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(pending)} groups not served at port {port}")
                time.sleep(0.1)
    finally:
        c.close()


def coordinators(host: str, port: int, groups: list[str], timeout: float = 120) -> dict[str, int]:
    """Group -> coordinator node id (FindCoordinator, retried until every group has one)."""
    c = Wire(host, port, timeout=30)
    out: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(out) < len(groups):
            for g in groups:
                if g in out:
                    continue
                r = c.request(ApiKey.FIND_COORDINATOR, FIND_V, find_request(g))
                if r.error_code == 0:
                    out[g] = int(r.node_id)
            if len(out) < len(groups):
                if time.monotonic() > deadline:
                    raise TimeoutError("FindCoordinator kept failing")
                time.sleep(0.2)
    finally:
        c.close()
    return out


def throughput_specs(targets: list[tuple[int, list[str]]], host: str, args: argparse.Namespace) -> list[Spec]:
    """One loader process per (port, groups) target."""
    v = 9  # OffsetCommit v9: what the coordinator bench's loader negotiates with this server
    specs = []
    for port, gs in targets:
        frames = [messages.commit_frame(v, g, "bench", args.commit_partitions) for g in gs]
        specs.append(Spec(host, port, ApiKey.OFFSET_COMMIT, v, frames, items_per_request=args.commit_partitions,
                          connections=args.connections, depth=args.depth, warmup=args.warmup, seconds=args.seconds))
    return specs


def run_throughput(tmp: Path, args: argparse.Namespace, out: list[str]) -> None:
    groups = [f"tp-group-{i}" for i in range(args.groups)]
    rows: list[tuple[str, dict[str, Any], str]] = []
    for rnd in range(1, args.rounds + 1):
        for config in args.tp_configs:
            run_one_config(tmp / f"round-{rnd}", config, groups, args, rows, rnd)
    report_throughput(rows, args, out)


def run_one_config(tmp: Path, config: str, groups: list[str], args: argparse.Namespace,
                   rows: list[tuple[str, dict[str, Any], str]], rnd: int) -> None:
    from cluster_bench import create_topic

    profile = args.profile and rnd == args.rounds  # the last round only
    if config == "single":
        node = SingleNode(tmp / "tp-single")
        try:
            node.start()
            create_topic(node.bootstrap, "bench", args.commit_partitions, 1, 1)
            coordinators("127.0.0.1", node.port, groups[:1])
            wait_groups_served("127.0.0.1", node.port, groups, "bench")
            parts = [groups[i::args.processes] for i in range(args.processes)]
            specs = throughput_specs([(node.port, p) for p in parts], "127.0.0.1", args)
            log(f"throughput: single node, {len(specs)} loader processes")
            prof = (node.proc.pid, tmp / "profile-single.txt") if profile else None
            r = storm(specs, [node.proc.pid], None, prof)
            if prof and prof[1].exists():
                r["profile"] = summarize_profile(prof[1])
                r["profile_split"] = profile_categories(prof[1])
        finally:
            node.stop()
        rows.append(("1 node (single-node mode)", r, "fsync before ack (single-node __consumer_offsets)"))
    else:
        rf = 1 if config == "rf1" else 3
        cluster = LocalCluster(tmp / f"tp-{config}", 3, free_ports(3), tick_time_ms=TICK_MS,
                               settings=[*BASE_SETTINGS, f"offsets.topic.replication.factor={rf}"])
        try:
            cluster.start()
            create_topic(cluster.bootstrap, "bench", args.commit_partitions, 1, 1)
            owner = coordinators(cluster.host, cluster.ports[0], groups)
            by_node = {b: [g for g in groups if owner[g] == b] for b in (1, 2, 3)}
            for b, gs in by_node.items():
                if gs:
                    wait_groups_served(cluster.host, cluster.ports[b - 1], gs, "bench")
            # loader processes: args.processes in all, dealt out to the nodes by their share of groups
            targets: list[tuple[int, list[str]]] = []
            for b in (1, 2, 3):
                mine = [i for i in range(args.processes) if i % 3 == b - 1]
                for j in range(len(mine)):
                    if by_node[b][j::len(mine)]:
                        targets.append((cluster.ports[b - 1], by_node[b][j::len(mine)]))
            specs = throughput_specs(targets, cluster.host, args)
            log(f"throughput: 3 nodes, offsets RF {rf}, groups per coordinator "
                f"{ {b: len(gs) for b, gs in by_node.items()} }, {len(specs)} loader processes")
            pids = [cluster.procs[b].pid for b in (1, 2, 3)]
            prof = (pids[0], tmp / f"profile-{config}-node1.txt") if profile else None
            r = storm(specs, pids, cluster.zookeeper.proc.pid if cluster.zookeeper.proc else None, prof)
            if prof and prof[1].exists():
                r["profile"] = summarize_profile(prof[1])
                r["profile_split"] = profile_categories(prof[1])
            r["groups_per_node"] = {b: len(gs) for b, gs in by_node.items()}
        finally:
            cluster.stop()
        rows.append((f"3 nodes, offsets RF {rf}", r,
                     "min.insync.replicas 1" if rf == 1 else "min.insync.replicas 2 (acked once the ISR has it)"))
    log(f"throughput: {rows[-1][0]}: {r['rps']:,.0f} commits/s, server CPU {r['server_cpu'] / max(r['requests'], 1) * 1e6:.0f} "
        f"µs/commit, per node {[round(x / r['seconds'], 2) for x in r['per_node_cpu']]} cores, client "
        f"{r['client_cpu'] / r['seconds']:.2f} cores, errors {r['errors']} {r['error_kinds']} {r['failures']}")
    r["round"] = rnd
    r["load"] = os.getloadavg()[0]


def report_throughput(rows: list[tuple[str, dict[str, Any], str]], args: argparse.Namespace, out: list[str]) -> None:
    out.append(f"### Commit throughput (OffsetCommit of {args.commit_partitions} partitions per request, simple groups, "
               f"{args.groups} groups over all {OFFSETS_PARTITIONS} offsets partitions; {args.processes} loader processes "
               f"× {args.connections} connections × {args.depth} in flight; {args.warmup:g} s warm-up, "
               f"{args.seconds:g} s measured)\n")
    out.append("| round | configuration | commits/s | × one node (same round) | server CPU µs / commit | "
               "server cores (per node) | ZooKeeper cores | loader cores | latency p50 / p99 (ms) | 1-min load avg after | errors |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r, _note in rows:
        s = r["seconds"]
        base = next((b["rps"] for n, b, _ in rows if n.startswith("1 node") and b["round"] == r["round"]), None)
        ratio = f"{r['rps'] / base:.2f}×" if base else "—"
        out.append(f"| {r['round']} | {name} | {r['rps']:,.0f} | {ratio} | {r['server_cpu'] / max(r['requests'], 1) * 1e6:,.0f} | "
                   f"{r['server_cpu'] / s:.2f} ({', '.join(f'{x / s:.2f}' for x in r['per_node_cpu'])}) | "
                   f"{r['zk_cpu'] / s:.2f} | {r['client_cpu'] / s:.2f} | {r['p50']:.1f} / {r['p99']:.1f} | {r['load']:.1f} | "
                   f"{r['errors']}{' ' + str(r['error_kinds']) if r['error_kinds'] else ''}"
                   f"{' failures: ' + '; '.join(r['failures']) if r['failures'] else ''} |")
    out.append("")
    if args.rounds > 1:
        names = list(dict.fromkeys(n for n, _, _ in rows))
        for n in names:
            rs = [r for m, r, _ in rows if m == n]
            ratios = []
            for r in rs:
                base = next((b["rps"] for m, b, _ in rows if m.startswith("1 node") and b["round"] == r["round"]), None)
                if base:
                    ratios.append(r["rps"] / base)
            out.append(f"* {n}: median over {len(rs)} rounds {statistics.median([r['rps'] for r in rs]):,.0f} commits/s, "
                       f"{statistics.median([r['server_cpu'] / max(r['requests'], 1) * 1e6 for r in rs]):,.0f} µs server "
                       f"CPU / commit, × one node {statistics.median(ratios):.2f} (per round: "
                       f"{', '.join(f'{x:.2f}' for x in ratios)})")
        out.append("")
    seen = set()
    for name, r, note in rows:
        if name in seen:
            continue
        seen.add(name)
        extra = f", groups per coordinator {r['groups_per_node']}" if "groups_per_node" in r else ""
        out.append(f"* {name}: {note}{extra}.")
    out.append("")
    for name, r, _note in rows:
        if r.get("profile"):
            out.append(f"py-spy profile (round {r['round']}, {'node 1 of ' if not name.startswith('1 node') else ''}{name}, 100 Hz over the "
                       f"measured window, active threads only): hottest functions, inclusive % / self % of samples\n")
            out.append("| where the samples are (first match) | % of samples |")
            out.append("|---|---|")
            for cat, share in r.get("profile_split", []):
                out.append(f"| {cat} | {share:.1f} |")
            out.append("")
            out.append("| function | inclusive % | self % |")
            out.append("|---|---|---|")
            for fn, inc, own in r["profile"]:
                out.append(f"| `{fn}` | {inc:.1f} | {own:.1f} |")
            out.append("")


# ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="takeover,throughput")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--kills", type=int, default=None, help="SIGKILLs per size (default 20, --quick 3)")
    parser.add_argument("--terms", type=int, default=None, help="SIGTERMs per size (default 10, --quick 2)")
    parser.add_argument("--small", type=int, default=10_000, help="offsets of the small case")
    parser.add_argument("--large", type=int, default=1_000_000, help="offsets of the large case")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="extra seconds to wait after the restarted node is back in the ISR (default 0)")
    parser.add_argument("--rolling", action="store_true",
                        help="also wait, before the next event, until no partition is under-replicated and no replica "
                             "warming, as a rolling restart does")
    parser.add_argument("--fill-partitions", type=int, default=100, help="partitions of the fill topic (RF 1)")
    parser.add_argument("--tp-configs", default="single,rf1,rf3")
    parser.add_argument("--rounds", type=int, default=None, help="throughput rounds (default 3, --quick 1)")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--commit-partitions", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--warmup", type=float, default=None)
    parser.add_argument("--profile", action="store_true",
                        help="py-spy (if installed in the bench cache) on node 1 of each configuration during the window")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (node logs)")
    # ZooKeeper expires a session on its tick: between the session timeout and one tick later.
    # With the default 2,000 ms tick the takeover bound (session + 0.5 s) holds only for kills
    # early in a tick; 500 ms shows the server's share against a finer clock.
    parser.add_argument("--tick-ms", type=int, default=TICK_MS, help="ZooKeeper tickTime of the takeover cluster")
    parser.add_argument("--diagnose-hangs", action="store_true",
                        help="nodes get a SIGUSR1 handler (sitecustomize) that dumps their asyncio tasks; a node "
                             "that does not exit after SIGTERM is asked for the dump before it is SIGKILLed")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - {"takeover", "throughput"}:
        parser.error(f"unknown: {only - {'takeover', 'throughput'}}")
    args.kills = args.kills if args.kills is not None else (3 if args.quick else 20)
    args.terms = args.terms if args.terms is not None else (2 if args.quick else 10)
    args.seconds = args.seconds or (3.0 if args.quick else 10.0)
    args.warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 2.0)
    args.tp_configs = args.tp_configs.split(",")
    args.rounds = args.rounds or (1 if args.quick else 3)

    def on_signal(sig: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    load0 = os.getloadavg()
    header = [f"Machine: {machine_info()}.",
              (f"Command: `.venv/bin/python bench/group_failover_bench.py {' '.join(sys.argv[1:])}`, "
               f"started {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average (1/5/15 min) at start "
               f"{load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f}."), ""]
    out: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="gc-failover-bench-"))
    began = time.monotonic()
    if args.diagnose_hangs:
        install_task_dump_hook(tmp)
    try:
        if "throughput" in only:
            run_throughput(tmp, args, out)
        if "takeover" in only:
            run_takeover(tmp, args, out)
    finally:
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    header[1] += (f" Total {time.monotonic() - began:.0f} s; load average at the end "
                  f"{load1[0]:.2f} / {load1[1]:.2f} / {load1[2]:.2f}.")
    print("\n".join(header + out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
