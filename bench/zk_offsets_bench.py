"""ZooKeeper-era offsets (issue 36): what each path costs, beside its Kafka-storage equivalent. One command::

    .venv/bin/python bench/zk_offsets_bench.py                   # commit, mirror, files, groups (~5 minutes)
    .venv/bin/python bench/zk_offsets_bench.py --only big        # zk-offsets on 10,000 groups (~6 minutes)
    .venv/bin/python bench/zk_offsets_bench.py --only commit,mirror --seconds 1
    .venv/bin/python bench/zk_offsets_bench.py --only files --estate 100 --too-big 20000

One ZooKeeper (``coordinator.cluster.local_zookeeper.LocalZooKeeper``, the machine's installation, tickTime
2000 ms, its defaults otherwise: the transaction log fsynced) and one ``groupcoord serve`` node with
``zookeeper.connect`` (chroot ``/bench``, ``offsets.topic.num.partitions=1``, durable commits: fsync before the
answer, the default), ``offsets.zookeeper.mirror.groups=mirrored*``, each on a free loopback port; topics
``bench`` (10 partitions) and ``wide`` (100). Every measurement runs ``--runs`` times (default 2), the runs of
the two sides of a comparison interleaved, and each run is reported.

Workloads:

- ``commit``: one client (tests/wire_client.py framing, kafka-python's protocol classes) sending OffsetCommit
  one at a time, waiting for each answer, for ``--seconds`` per run: v0 (ZooKeeper storage: the node writes
  each partition's znode, one ZooKeeper write per partition, as Kafka 0.8.2-2.x did) against v8 and v9 (the
  ``__consumer_offsets`` log), 1 and 10 partitions per request, a simple commit (generation -1, no member)
  whose offsets grow by one each request. Latency per request (send to answer) p50 / p99, and commits/s.
- ``mirror``: the same v8 loop for a group the mirror covers (``mirrored-g``) and one it does not; after the
  last answer, the mirror's lag: how many commits ZooKeeper's znode was behind at that moment, and the time
  until it held the last committed offset (the bench's own kazoo client polling it), and how many ZooKeeper
  writes the mirror made of the last partition's znode in the run (its ``version`` before and after).
- ``files``: ``groupcoord zk-offsets export`` and ``import`` as processes (interpreter start included; the
  ``--help`` row is that start alone) on an estate of ``--estate`` groups x 10 partitions: import into an
  empty chroot (every znode created; ``--transaction-per-group``, as 10,000 new offsets are more than one
  ZooKeeper transaction carries), import over the estate (every znode set) as one transaction (the default)
  and with ``--transaction-per-group``, export;
  beside them the Kafka-storage equivalents on as many groups committed to the node:
  ``groups --reset-offsets --all-groups --all-topics --to-current --export`` (every committed offset as CSV) and
  ``groups --reset-offsets --from-file F --all-groups --execute``. Then ``import`` of one group with
  each of ``--too-big`` partitions (one ZooKeeper transaction), around ZooKeeper's ~1 MB request
  limit (``jute.maxbuffer``), and what it did.
  ``zk-offsets migrate --execute`` of one group of 100 partitions both ways (to-kafka, to-zookeeper), with the
  dry run, and beside it ``groups --reset-offsets --group G --topic wide --to-offset N --execute``.
- ``big`` (not in the default run: its runs take minutes): ``zk-offsets`` import and export as in ``files``
  on ``--big-estate`` groups x 10.
- ``groups``: ``groupcoord groups --zookeeper ZK/bench --list`` and ``--describe --group G`` on the ``--estate``
  ZooKeeper-era groups, beside ``--bootstrap-server`` ``--list`` / ``--describe --group G`` on as many groups
  kept in Kafka storage (wall time of the process).

No peer runs here: there is no Kafka 2.x broker on this machine to measure against.
Uses fresh directories under /tmp; everything is stopped and removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(HERE), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import peers  # noqa: E402
from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402
from kafka.protocol.consumer import OffsetCommitRequest  # noqa: E402
from kafka.protocol.metadata import FindCoordinatorRequest  # noqa: E402

from coordinator.cluster.local_zookeeper import LocalZooKeeper  # noqa: E402
from protocol.apis import ApiKey  # noqa: E402
from protocol.client import decode_response  # noqa: E402
from tests.conftest import wait_for  # noqa: E402
from tests.wire_client import WireClient  # noqa: E402

ALL = ("commit", "mirror", "files", "groups", "big")
DEFAULT = ("commit", "mirror", "files", "groups")
CHROOT = "/bench"
CT = OffsetCommitRequest.OffsetCommitRequestTopic
CP = CT.OffsetCommitRequestPartition


def machine() -> str:
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[:1]
    return (f"nproc {os.cpu_count()}, {model}, Linux {platform.release()}, CPython {platform.python_version()}, "
            f"{java[0] if java else 'java ?'}, ZooKeeper {Path('/usr/share/java/zookeeper.jar').resolve().name}")


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]


# --- the node, ZooKeeper, raw OffsetCommit --------------------------------------------------------


def commit_request(version: int, group: str, topic: str, partitions: int, offset: int) -> Any:
    if version == 0:
        return OffsetCommitRequest(version=0, group_id=group, topics=[CT(name=topic, partitions=[
            CP(partition_index=p, committed_offset=offset, committed_metadata="") for p in range(partitions)])])
    return OffsetCommitRequest(version=version, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, topics=[CT(name=topic, partitions=[
                                   CP(partition_index=p, committed_offset=offset, committed_leader_epoch=-1,
                                      committed_metadata="") for p in range(partitions)])])


class Committer:
    """One connection; ``commit`` sends one OffsetCommit, waits for its answer and checks every partition."""

    def __init__(self, host: str, port: int) -> None:
        self.client = WireClient(host, port, timeout=60)
        self.client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def commit(self, version: int, group: str, topic: str, partitions: int, offset: int) -> float:
        request = commit_request(version, group, topic, partitions, offset)
        started = time.perf_counter()
        self.client.send(ApiKey.OFFSET_COMMIT, version, request)
        body = self.client.read_frame()
        took = time.perf_counter() - started
        _, answer = decode_response(ApiKey.OFFSET_COMMIT, version, body)
        errors = [p.error_code for t in answer.topics for p in t.partitions if p.error_code]
        if errors or sum(len(t.partitions) for t in answer.topics) != partitions:
            raise RuntimeError(f"OffsetCommit v{version} of {group}: errors {errors[:3]}")
        return took

    def close(self) -> None:
        self.client.close()


class Bench:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.zk = LocalZooKeeper(work / "zk", tick_time_ms=2000)
        self.zk.start()
        self.zk_connect = self.zk.connect + CHROOT
        self.node = peers.start_groupcoord(work / "node" / "data", {
            "zookeeper.connect": self.zk_connect, "broker.id": "1", "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0",
            "offsets.zookeeper.mirror.groups": "mirrored*"})
        self.bootstrap = f"{self.node.host}:{self.node.port}"
        from kazoo.client import KazooClient
        # Not chrooted: the files workload writes estates into chroots beside the node's.
        self.kazoo = KazooClient(hosts=self.zk.connect, timeout=10.0)
        self.kazoo.start(timeout=10)
        self.kafka_estate = False  # the --estate groups committed in Kafka storage yet?
        self.committer = Committer(self.node.host, self.node.port)
        with WireClient(self.node.host, self.node.port, timeout=30) as client:
            for topic, partitions in (("bench", 10), ("wide", 100)):
                made = client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(version=5, timeout_ms=15000,
                    validate_only=False, topics=[CreateTopicsRequest.CreatableTopic(
                        name=topic, num_partitions=partitions, replication_factor=1, assignments=[],
                        configs=[])])).topics[0]
                assert made.error_code == 0, made

            def ready(version: int, topic: str, partitions: int) -> bool:
                if version:
                    found = client.request(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(
                        version=1, key="warm", key_type=0))
                    if found.error_code:
                        return False
                try:
                    self.committer.commit(version, "warm", topic, partitions, 0)
                    return True
                except RuntimeError:
                    return False

            for topic, partitions in (("bench", 10), ("wide", 100)):
                wait_for(lambda t=topic, n=partitions: ready(0, t, n), 30, f"v0 commits to {topic}")
                wait_for(lambda t=topic, n=partitions: ready(8, t, n), 60, f"v8 commits to {topic}")
        self.offset = 1  # every commit of the bench carries a new, larger offset

    def next_offset(self) -> int:
        self.offset += 1
        return self.offset

    def stop(self) -> None:
        self.committer.close()
        self.kazoo.stop()
        self.kazoo.close()
        self.node.stop()
        self.zk.stop()

    def cli(self, *args: str, ok: bool = True, timeout: float = 600) -> tuple[float, subprocess.CompletedProcess[str]]:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True,
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=timeout)
        took = time.perf_counter() - started
        if ok and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:4])} ... exited {done.returncode}: {done.stderr[-800:]}")
        return took, done

    def kafka_groups(self, prefix: str, groups: int, topic: str, partitions: int, offset: int) -> None:
        """``groups`` groups with ``partitions`` offsets each in Kafka storage: v8 commits, 200 in flight."""
        with WireClient(self.node.host, self.node.port, timeout=60) as client:
            sent = got = 0
            while got < groups:
                while sent < groups and sent - got < 200:
                    client.send(ApiKey.OFFSET_COMMIT, 8, commit_request(
                        8, f"{prefix}{sent:05d}", topic, partitions, offset))
                    sent += 1
                _, answer = decode_response(ApiKey.OFFSET_COMMIT, 8, client.read_frame())
                assert all(p.error_code == 0 for t in answer.topics for p in t.partitions), answer
                got += 1


# --- (a) and (b): commits ---------------------------------------------------------------------------


def commit_loop(b: Bench, version: int, group: str, partitions: int, seconds: float) -> dict[str, Any]:
    for _ in range(20):  # warm-up: the group loaded, the znodes there
        b.committer.commit(version, group, "bench", partitions, b.next_offset())
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds
    last = 0
    while time.perf_counter() < deadline:
        last = b.next_offset()
        latencies.append(b.committer.commit(version, group, "bench", partitions, last))
    wall = time.perf_counter() - started
    return {"requests": len(latencies), "p50_ms": pct(latencies, 50) * 1000, "p99_ms": pct(latencies, 99) * 1000,
            "commits_s": len(latencies) / wall, "last": last}


def fmt_commit(r: dict[str, Any]) -> str:
    return f"{r['p50_ms']:.2f} / {r['p99_ms']:.2f} ms, {r['commits_s']:,.0f}/s"


def commit_workload(b: Bench, runs: int, seconds: float) -> list[str]:
    cells = [(v, n) for n in (1, 10) for v in (0, 8, 9)]
    results: dict[tuple[int, int], list[dict[str, Any]]] = {c: [] for c in cells}
    for run in range(runs):
        for version, partitions in cells:
            group = "zk-g" if version == 0 else "kafka-g"
            r = commit_loop(b, version, group, partitions, seconds)
            results[(version, partitions)].append(r)
            print(f"  commit run {run + 1} v{version} x{partitions}: {fmt_commit(r)} ({r['requests']} requests)",
                  flush=True)
    lines = [f"(a) OffsetCommit, one client, one request at a time, {seconds:g} s per run; p50 / p99 latency, "
             "commits/s (a commit = one request)", "",
             "| storage | version | partitions/request | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " |",
             "|---|---|---|" + "---|" * runs]
    for version, partitions in cells:
        storage = "ZooKeeper (/consumers znodes)" if version == 0 else "Kafka (__consumer_offsets)"
        lines.append(f"| {storage} | v{version} | {partitions} | "
                     + " | ".join(fmt_commit(r) for r in results[(version, partitions)]) + " |")
    return lines


def mirror_path(group: str, partitions: int) -> str:
    return f"{CHROOT}/consumers/{group}/offsets/bench/{partitions - 1}"


def znode_version(b: Bench, path: str) -> int:
    """How many times the znode was set (-1: absent)."""
    stat = b.kazoo.exists(path)
    return -1 if stat is None else stat.version


def mirror_lag(b: Bench, group: str, partitions: int, last: int, stopped: float) -> tuple[int, float]:
    """(commits behind at the client's stop, ms until ZooKeeper holds the last offset)."""
    path = mirror_path(group, partitions)
    seen = int(b.kazoo.get(path)[0])
    behind = last - seen
    while seen != last:
        if time.perf_counter() - stopped > 60:
            raise TimeoutError(f"the mirror did not reach {last} in 60 s ({seen})")
        time.sleep(0.001)
        seen = int(b.kazoo.get(path)[0])
    return behind, (time.perf_counter() - stopped) * 1000


def mirror_workload(b: Bench, runs: int, seconds: float) -> list[str]:
    cells = [(g, n) for n in (1, 10) for g in ("kafka-g", "mirrored-g")]
    results: dict[tuple[str, int], list[dict[str, Any]]] = {c: [] for c in cells}
    for run in range(runs):
        for group, partitions in cells:
            version = znode_version(b, mirror_path(group, partitions))
            r = commit_loop(b, 8, group, partitions, seconds)
            stopped = time.perf_counter()
            if group.startswith("mirrored"):
                r["behind"], r["lag_ms"] = mirror_lag(b, group, partitions, r["last"], stopped)
                # A znode created in the run has version 0 after its first write.
                r["writes"] = znode_version(b, mirror_path(group, partitions)) - version
            results[(group, partitions)].append(r)
            extra = (f", mirror {r['behind']} commits / {r['lag_ms']:.0f} ms behind, {r['writes']} ZooKeeper "
                     "writes" if "behind" in r else "")
            print(f"  mirror run {run + 1} {group} x{partitions}: {fmt_commit(r)}{extra}", flush=True)
    lines = [f"(b) OffsetCommit v8, one client, one request at a time, {seconds:g} s per run, mirrored group "
             "(offsets.zookeeper.mirror.groups) or not; p50 / p99, commits/s; the mirror's lag when the client "
             "stops: commits ZooKeeper was behind, and ms until it held the last offset; ZooKeeper writes of the "
             "last partition's znode in the run", "",
             "| group | partitions/request | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " |",
             "|---|---|" + "---|" * runs]
    for group, partitions in cells:
        cell = []
        for r in results[(group, partitions)]:
            text = fmt_commit(r)
            if "behind" in r:
                text += f"; lag {r['behind']} commits, {r['lag_ms']:.0f} ms; {r['writes']:,} writes"
            cell.append(text)
        label = "mirrored" if group.startswith("mirrored") else "not mirrored"
        lines.append(f"| {label} | {partitions} | " + " | ".join(cell) + " |")
    return lines


# --- (c): export, import, migrate -----------------------------------------------------------------


def estate_file(path: Path, prefix: str, groups: int, partitions: int = 10, topic: str = "bench",
                offset: int = 5) -> Path:
    with open(path, "w") as f:
        for g in range(groups):
            for p in range(partitions):
                f.write(f"/consumers/{prefix}{g:05d}/offsets/{topic}/{p}:{offset + p}\n")
    return path


def kafka_csv(path: Path, prefix: str, groups: int, offset: int) -> Path:
    with open(path, "w") as f:
        for g in range(groups):
            for p in range(10):
                f.write(f"{prefix}{g:05d},bench,{p},{offset + p}\n")
    return path


class Rows:
    """A table's rows, each printed as it comes."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, list[str]]] = []

    def add(self, label: str, times: list[float]) -> None:
        self.rows.append((label, [f"{t:.2f} s" for t in times]))
        print(f"  {label}: {', '.join(f'{t:.2f} s' for t in times)}", flush=True)

    def table(self, title: str, runs: int) -> list[str]:
        return ([title, "", "| command | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " |",
                 "|---|" + "---|" * runs] + [f"| {label} | " + " | ".join(cells) + " |" for label, cells in self.rows])


def zk_estate(b: Bench, work: Path, size: int, runs: int, rows: Rows) -> None:
    """zk-offsets import (into an empty chroot, then over it) and export of ``size`` groups x 10."""
    f = estate_file(work / f"estate-{size}.txt", "estate-", size)
    # Each run into an empty chroot of its own (holding nothing but the estate, so export reads just it).
    roots = [f"/estate-{size}-{i}" for i in range(runs)]
    creates, updates, per_group_updates, exports = [], [], [], []
    for root in roots:
        b.kazoo.ensure_path(root)
        # 10,000 new offsets do not fit in one ZooKeeper transaction (jute.maxbuffer): group by group.
        took, done = b.cli("zk-offsets", "--zookeeper", b.zk.connect + root, "import", "--input-file", str(f),
                           "--transaction-per-group")
        assert f"Imported {size * 10} offsets of {size} groups" in done.stdout, done.stdout + done.stderr[-300:]
        creates.append(took)
    for root in roots:
        took, done = b.cli("zk-offsets", "--zookeeper", b.zk.connect + root, "import", "--input-file", str(f))
        assert f"Imported {size * 10} offsets of {size} groups" in done.stdout, done.stdout + done.stderr[-300:]
        updates.append(took)
    for root in roots:
        per_group_updates.append(b.cli("zk-offsets", "--zookeeper", b.zk.connect + root, "import", "--input-file",
                                       str(f), "--transaction-per-group")[0])
    for i, root in enumerate(roots):
        out = work / f"export-{size}-{i}.txt"
        took, done = b.cli("zk-offsets", "--zookeeper", b.zk.connect + root, "export", "--output-file", str(out))
        assert out.read_text() == f.read_text(), done.stdout
        exports.append(took)
    mb = f.stat().st_size / 1e6
    rows.add(f"zk-offsets import --transaction-per-group, {size:,} groups x 10 ({mb:.2f} MB file), every znode "
             "created", creates)
    rows.add(f"zk-offsets import (one transaction), {size:,} groups x 10, over the existing znodes (set)", updates)
    rows.add(f"zk-offsets import --transaction-per-group, {size:,} groups x 10, over the existing znodes (set)",
             per_group_updates)
    rows.add(f"zk-offsets export, {size:,} groups x 10", exports)


def too_big(b: Bench, work: Path, partitions: int) -> str:
    """``import`` of one group of ``partitions`` partitions, into a chroot of its own: what happens."""
    root = f"/huge-{partitions}"
    b.kazoo.ensure_path(root)
    f = estate_file(work / f"huge-{partitions}.txt", "huge-", 1, partitions=partitions)
    took, done = b.cli("zk-offsets", "--zookeeper", b.zk.connect + root, "--timeout-ms", "10000",
                       "import", "--input-file", str(f), ok=False, timeout=180)
    parent = f"{root}/consumers/huge-00000/offsets/bench"
    written = len(b.kazoo.get_children(parent)) if b.kazoo.exists(parent) else 0
    said = (done.stdout.strip() or done.stderr.strip()).splitlines() or [""]
    note = (f"one group of {partitions:,} partitions ({f.stat().st_size / 1e6:.2f} MB file): exit "
            f"{done.returncode} after {took:.1f} s, {written:,} offset znodes written; it said: `{said[-1][:300]}`")
    print(f"  import of one group: {note}", flush=True)
    return note


def files_workload(b: Bench, runs: int, estate: int, too_big_sizes: list[int]) -> list[str]:
    work = b.work / "files"
    work.mkdir()
    rows = Rows()
    rows.add("`python -m coordinator zk-offsets --help` (interpreter and imports alone)",
             [b.cli("zk-offsets", "--help")[0] for _ in range(runs)])
    zk_estate(b, work, estate, runs, rows)
    b.kafka_groups("kestate-", estate, "bench", 10, 3)
    b.kafka_estate = True
    kexports, kimports = [], []
    for _ in range(runs):
        took, done = b.cli("groups", "--bootstrap-server", b.bootstrap, "--reset-offsets", "--all-groups",
                           "--all-topics", "--to-current", "--export", "--timeout", "60000")
        assert done.stdout.count("kestate-") == estate * 10, done.stdout[-300:]
        kexports.append(took)
    for i in range(runs):
        csv = kafka_csv(work / f"kafka-{i}.csv", "kestate-", estate, 100 + i)
        took, done = b.cli("groups", "--bootstrap-server", b.bootstrap, "--reset-offsets", "--from-file",
                           str(csv), "--all-groups", "--execute", "--timeout", "60000")
        assert done.stdout.count("kestate-") == estate * 10, done.stdout[-300:]
        kimports.append(took)
    rows.add(f"Kafka storage: groups --reset-offsets --all-groups --all-topics --to-current --export, "
             f"{estate:,} groups x 10", kexports)
    rows.add(f"Kafka storage: groups --reset-offsets --from-file --all-groups --execute, {estate:,} groups x 10",
             kimports)
    notes = [too_big(b, work, n) for n in too_big_sizes]

    # migrate --execute of one group of 100 partitions, both ways; the dry run; Kafka's reset beside them.
    from kazoo.client import KazooClient

    from coordinator.cluster.zk_consumers import ZkConsumers
    chrooted = KazooClient(hosts=b.zk_connect, timeout=10.0)
    chrooted.start(timeout=10)
    zk = ZkConsumers(chrooted)
    plans, to_kafka, to_zk, resets = [], [], [], []
    for i in range(runs):
        group = f"mig-{i}"
        zk.set_offsets(group, {("wide", p): 50 + p for p in range(100)})
        took, done = b.cli("zk-offsets", "--zookeeper", b.zk_connect, "migrate", "--group", group,
                           "--bootstrap-server", b.bootstrap)
        assert done.stdout.count(" moves\n") == 100, done.stdout[-500:]
        plans.append(took)
        took, done = b.cli("zk-offsets", "--zookeeper", b.zk_connect, "migrate", "--group", group,
                           "--bootstrap-server", b.bootstrap, "--execute")
        assert "Moved 100 offset(s)" in done.stdout, done.stdout
        to_kafka.append(took)
        back = f"back-{i}"
        b.kafka_groups(back + "-", 1, "wide", 100, 70)
        took, done = b.cli("zk-offsets", "--zookeeper", b.zk_connect, "migrate", "--group", back + "-00000",
                           "--bootstrap-server", b.bootstrap, "--direction", "to-zookeeper", "--execute")
        assert "Moved 100 offset(s)" in done.stdout, done.stdout
        to_zk.append(took)
        took, done = b.cli("groups", "--bootstrap-server", b.bootstrap, "--reset-offsets", "--group", group,
                           "--topic", "wide", "--to-offset", "60", "--execute")
        resets.append(took)
    chrooted.stop()
    chrooted.close()
    rows.add("zk-offsets migrate (dry run), one group of 100 partitions", plans)
    rows.add("zk-offsets migrate --execute to-kafka, one group of 100 partitions", to_kafka)
    rows.add("zk-offsets migrate --execute --direction to-zookeeper, one group of 100 partitions", to_zk)
    rows.add("Kafka storage: groups --reset-offsets --group G --topic wide --to-offset N --execute (100 partitions)",
             resets)
    return (rows.table("(c) the zk-offsets tool and its Kafka-storage equivalents, each a process (wall time, "
                       "interpreter start included)", runs)
            + [""] + [f"- import past the limit? {note}" for note in notes])


def big_workload(b: Bench, runs: int, big_estate: int) -> list[str]:
    work = b.work / "big"
    work.mkdir()
    rows = Rows()
    zk_estate(b, work, big_estate, runs, rows)
    return rows.table(f"(c') zk-offsets on {big_estate:,} groups x 10, a process (wall time)", runs)


# --- (d): groups --zookeeper ----------------------------------------------------------------------


def groups_workload(b: Bench, runs: int, estate: int) -> list[str]:
    # The estate in the node's chroot, where the brokers that --describe asks for log ends are registered.
    f = estate_file(b.work / "estate-groups.txt", "estate-", estate)
    b.cli("zk-offsets", "--zookeeper", b.zk_connect, "import", "--input-file", str(f))
    if not b.kafka_estate:
        b.kafka_groups("kestate-", estate, "bench", 10, 3)
    cells: dict[str, list[float]] = {}
    middle = f"{estate // 2:05d}"
    commands = {
        "--zookeeper ZK --list": ["--zookeeper", b.zk_connect, "--list"],
        f"--zookeeper ZK --describe --group estate-{middle}": ["--zookeeper", b.zk_connect, "--describe",
                                                               "--group", f"estate-{middle}"],
        "--bootstrap-server B --list": ["--bootstrap-server", b.bootstrap, "--list"],
        f"--bootstrap-server B --describe --group kestate-{middle}": ["--bootstrap-server", b.bootstrap,
                                                                      "--describe", "--group", f"kestate-{middle}"],
    }
    for _ in range(runs):
        for label, args in commands.items():
            took, done = b.cli("groups", *args)
            if "--list" in args:
                assert done.stdout.count("estate-") >= estate, done.stdout[-300:]
            else:
                assert done.stdout.count("bench") >= 10, done.stdout
            cells.setdefault(label, []).append(took)
    for label, times in cells.items():
        print(f"  groups {label}: {', '.join(f'{t:.2f} s' for t in times)}", flush=True)
    return ([f"(d) groupcoord groups, {estate:,} groups of 10 partitions on each side, a process (wall time)", "",
             "| command | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " |", "|---|" + "---|" * runs]
            + [f"| groups {label} | " + " | ".join(f"{t:.2f} s" for t in times) + " |" for label, times in cells.items()])


# --- main -----------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description="ZooKeeper-era offsets benchmark (issue 36).")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(ALL)}")
    ap.add_argument("--runs", type=int, default=2, help="runs of every measurement (default 2)")
    ap.add_argument("--seconds", type=float, default=2.0, help="commit, mirror: seconds per run (default 2)")
    ap.add_argument("--estate", type=int, default=1000, help="groups of 10 partitions for files, groups")
    ap.add_argument("--big-estate", type=int, default=10_000, help="groups of 10 partitions for big")
    ap.add_argument("--too-big", default="10000,11000",
                    help="files: partitions of one imported group, around ZooKeeper's ~1 MB request limit")
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w] or list(DEFAULT)
    for w in only:
        if w not in ALL:
            ap.error(f"unknown workload {w!r}; choose from {', '.join(ALL)}")
    tree = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {machine()}; tree {tree}"
          f"{' (modified)' if dirty else ''}; load {load()}", flush=True)
    print("command: python bench/zk_offsets_bench.py " + " ".join(sys.argv[1:]), flush=True)
    work = Path(tempfile.mkdtemp(prefix="zk-offsets-bench-"))
    started = time.perf_counter()
    out: list[str] = []
    b = Bench(work)
    try:
        if "commit" in only:
            out += commit_workload(b, args.runs, args.seconds) + [""]
        if "mirror" in only:
            out += mirror_workload(b, args.runs, args.seconds) + [""]
        if "files" in only:
            out += files_workload(b, args.runs, args.estate, [int(n) for n in args.too_big.split(",") if n]) + [""]
        if "groups" in only:
            out += groups_workload(b, args.runs, args.estate) + [""]
        if "big" in only:
            out += big_workload(b, args.runs, args.big_estate) + [""]
    finally:
        b.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"total {time.perf_counter() - started:.0f} s; load after {load()}")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
