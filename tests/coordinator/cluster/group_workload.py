"""The workload of the group fault schedule (tests/coordinator/cluster/test_group_fault_schedule.py): consumer
group members, the producer, the observer and the zombie probe, and the shared history they
record for the checker (tests/coordinator/cluster/group_checker.py)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.cluster.local_cluster import LocalCluster
from protocol.apis import ApiKey
from protocol.hashing import partition_for
from tests.coordinator.cluster.fault_tools import (
    FaultLog,
    ZkReader,
)
from tests.wire_client import WireClient

#: The fault kinds the schedule draws from.
KINDS = ("kill", "stop", "term", "zookeeper", "reassign")
TOPIC = "orders"
PARTITIONS = 4
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 3
NODES = (1, 2, 3)
LONG_SESSION_MS = 20000
SHORT_SESSION_MS = 6000
MEMBERS_PER_GROUP = 2
#: How long each of a reassignment's two moves may take.
MOVE_TIMEOUT_S = 60.0


def names(prefix: str, partitions: list[int]) -> list[str]:
    """A group name per wanted ``__consumer_offsets`` partition: ``<prefix>-<n>`` for the first n
    that hashes there."""
    names = []
    for want in partitions:
        n = 0
        while partition_for(f"{prefix}-{n}", OFFSETS_PARTITIONS) != want or f"{prefix}-{n}" in names:
            n += 1
        names.append(f"{prefix}-{n}")
    return names


LONG_GROUPS = names("long", list(range(OFFSETS_PARTITIONS)))
SHORT_GROUPS = names("short", [0])
GROUPS = LONG_GROUPS + SHORT_GROUPS
PROBE_GROUPS = {p: name for p, name in zip(range(OFFSETS_PARTITIONS), names("probe", list(range(OFFSETS_PARTITIONS))), strict=True)}


def now_s() -> float:
    return time.monotonic()


class Zk(ZkReader):
    def healthy(self) -> bool:
        return self.full_isr([(TOPIC, PARTITIONS), (OFFSETS_TOPIC, OFFSETS_PARTITIONS)], NODES)


def is_stopped(pid: int) -> bool:
    """The process is in state T (stopped), so nothing sent to it from now on is read before SIGCONT."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except OSError:
        return False


# --- the history ---------------------------------------------------------------------------


@dataclass
class Read:
    t: float
    member: str
    offset: int
    value: bytes
    assigned_at: float  # when the member's current assignment (of this partition) began


@dataclass
class Ack:
    t_sent: float
    t_acked: float  # recorded after the client returned: the acknowledgement happened before it
    offset: int
    who: str


@dataclass
class Observation:
    t_sent: float  # the OffsetFetch left after this
    node: int
    offset: int


@dataclass
class Fault:
    kind: str
    node: int | None
    group: str | None
    start: float
    degraded: bool  # the ISRs were not full when it started: a rebalance after it is not asserted
    end: float = 0.0
    resumed: float | None = None  # stop: when SIGCONT was sent


@dataclass
class History:
    lock: threading.Lock = field(default_factory=threading.Lock)
    reads: dict[tuple[str, int], list[Read]] = field(default_factory=lambda: defaultdict(list))
    acks: dict[tuple[str, int], list[Ack]] = field(default_factory=lambda: defaultdict(list))
    commit_failures: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    observations: dict[tuple[str, int], list[Observation]] = field(default_factory=lambda: defaultdict(list))
    # (time, group, member, what): every on_partitions_assigned / on_partitions_lost call
    assignments: list[tuple[float, str, str, str]] = field(default_factory=list)

    def read(self, group: str, partition: int, r: Read) -> None:
        with self.lock:
            self.reads[(group, partition)].append(r)

    def acked(self, group: str, offsets: dict[int, int], t_sent: float, who: str) -> None:
        t = now_s()
        with self.lock:
            for p, o in offsets.items():
                self.acks[(group, p)].append(Ack(t_sent, t, o, who))

    def observed(self, group: str, partition: int, o: Observation) -> None:
        with self.lock:
            self.observations[(group, partition)].append(o)

    def acked_before(self, group: str, partition: int, t: float) -> int:
        """The highest offset whose commit was acknowledged (recorded) before ``t``."""
        return max((a.offset for a in self.acks.get((group, partition), []) if a.t_acked < t), default=-1)

    def highest_acked(self, group: str, partition: int) -> int:
        with self.lock:
            return max((a.offset for a in self.acks.get((group, partition), [])), default=-1)

    def ack_count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acks.values())


# --- the members ---------------------------------------------------------------------------


class Member(threading.Thread):
    """A kafka-python group member: poll, record what it processed, commit it synchronously."""

    def __init__(self, cluster: LocalCluster, group: str, name: str, session_ms: int, history: History,
                 stop: threading.Event, log: FaultLog) -> None:
        super().__init__(name=name, daemon=True)
        self.cluster, self.group, self.session_ms = cluster, group, session_ms
        self.history, self.stop_event, self.log = history, stop, log
        self.assigned_at: dict[int, float] = {}
        self.poll_errors: list[str] = []
        self.crash: str | None = None
        self.commits = 0
        #: Times (monotonic, as ``now_s``) of the client's successful heartbeats, sampled from its
        #: heartbeat state: the checker's evidence that a member was silent.
        self.heartbeats: list[float] = []

        self.consumer: Any = None

    def sample_heartbeat(self) -> None:
        """Note kafka-python's own time of its last successful heartbeat (``time.monotonic()``, set
        by its IO thread; read here from the sampler thread, so a main thread blocked in a commit
        does not hide heartbeats)."""
        heard = self.consumer._coordinator.heartbeat.last_receive if self.consumer is not None else float("-inf")
        if heard > (self.heartbeats[-1] if self.heartbeats else float("-inf")):
            self.heartbeats.append(heard)

    def last_heartbeat_before(self, t: float) -> float | None:
        return max((h for h in self.heartbeats if h <= t), default=None)

    def run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.structs import OffsetAndMetadata

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                for tp in revoked:
                    member.assigned_at.pop(tp.partition, None)

            def on_partitions_assigned(self, assigned: Any) -> None:
                t = now_s()
                for tp in assigned:
                    member.assigned_at[tp.partition] = t
                parts = sorted(tp.partition for tp in assigned)
                with member.history.lock:
                    member.history.assignments.append((t, member.group, member.name, f"assigned {parts}"))

            def on_partitions_lost(self, lost: Any) -> None:
                for tp in lost:
                    member.assigned_at.pop(tp.partition, None)
                parts = sorted(tp.partition for tp in lost)
                with member.history.lock:
                    member.history.assignments.append((now_s(), member.group, member.name, f"lost {parts}"))

        try:
            # request_timeout_ms below the session: a request stuck on a stopped node gives up in
            # time to find the new coordinator before the session ends.
            consumer = KafkaConsumer(bootstrap_servers=self.cluster.bootstrap, group_id=self.group,
                                     client_id=self.name, enable_auto_commit=False, auto_offset_reset="earliest",
                                     session_timeout_ms=self.session_ms, heartbeat_interval_ms=1000,
                                     request_timeout_ms=min(10000, self.session_ms - 1000), retry_backoff_ms=100,
                                     metadata_max_age_ms=2000, max_poll_records=50, fetch_max_wait_ms=200,
                                     partition_assignment_strategy=[RangePartitionAssignor])
            # Metadata for the topic before joining: a kafka-python 3.0.12 group leader that
            # assigns without it gives itself an empty assignment and rejoins, which can hang it
            # (below, and tests/clients/FINDINGS.md).
            deadline = now_s() + 30
            while not consumer.partitions_for_topic(TOPIC) and now_s() < deadline:
                time.sleep(0.1)
            consumer.subscribe([TOPIC], listener=Listener())
        except Exception as exc:
            self.crash = f"{self.name} did not start: {exc!r}"
            return
        try:
            self.consumer = consumer
            while not self.stop_event.is_set():
                try:
                    # Long enough for a rebalance to finish inside one poll(): a kafka-python
                    # 3.0.12 leader whose rejoin is in flight when poll() times out can finish
                    # it unseen and never heartbeat again (FINDINGS.md). Records come every
                    # fetch.max.wait (200 ms) anyway, so this only matters while rebalancing.
                    batch = consumer.poll(timeout_ms=3000)
                except Exception as exc:  # reported, not fatal: the member goes on as an application would
                    self.poll_errors.append(repr(exc))
                    if len(self.poll_errors) <= 3:
                        self.log(f"{self.name}: poll raised {exc!r}")
                    time.sleep(0.2)
                    continue
                if not batch:
                    continue
                t = now_s()
                offsets = {}
                for tp, records in batch.items():
                    since = self.assigned_at.get(tp.partition, -1.0)
                    for r in records:
                        self.history.read(self.group, tp.partition, Read(t, self.name, r.offset, r.value, since))
                    offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
                t_sent = now_s()
                try:
                    consumer.commit(offsets)
                except Exception as exc:  # not acknowledged: it may or may not have been kept
                    failures = self.history.commit_failures[self.group]
                    failures.append(f"{self.name}: {exc!r}")
                    continue
                self.commits += 1
                self.history.acked(self.group, {tp.partition: om.offset for tp, om in offsets.items()},
                                   t_sent, self.name)
        except Exception as exc:
            self.crash = f"{self.name} crashed: {exc!r}"
        finally:
            try:
                consumer.close(autocommit=False)
            except Exception:
                pass


class Producer(threading.Thread):
    """One idempotent acks=all producer, round robin over the partitions, ~150 records/s."""

    def __init__(self, cluster: LocalCluster, stop: threading.Event, log: FaultLog) -> None:
        super().__init__(name="producer", daemon=True)
        self.cluster, self.stop_event, self.log = cluster, stop, log
        self.acked = 0
        self.failed = 0
        self.crash: str | None = None

    def run(self) -> None:
        from kafka import KafkaProducer

        try:
            producer = KafkaProducer(bootstrap_servers=self.cluster.bootstrap, acks="all", enable_idempotence=True,
                                     retries=2**31 - 1, request_timeout_ms=5000, retry_backoff_ms=100,
                                     metadata_max_age_ms=2000, delivery_timeout_ms=60000, linger_ms=5)
        except Exception as exc:
            self.crash = f"producer did not start: {exc!r}"
            return
        seq = 0
        try:
            while not self.stop_event.is_set():
                window = []
                for _ in range(2 * PARTITIONS):
                    window.append(producer.send(TOPIC, b"r%d" % seq, partition=seq % PARTITIONS))
                    seq += 1
                for future in window:
                    try:
                        future.get(timeout=90)
                        self.acked += 1
                    except Exception as exc:
                        self.failed += 1
                        if self.failed <= 3:
                            self.log(f"producer: not acknowledged: {exc!r}")
                time.sleep(0.05)
        except Exception as exc:
            self.crash = f"producer crashed: {exc!r}"
        finally:
            producer.close(timeout=10)


# --- reading committed offsets with the wire client ------------------------------------------


class OffsetReader:
    """FindCoordinator + OffsetFetch for many groups, through short-timeout wire connections."""

    def __init__(self, cluster: LocalCluster, timeout: float = 2.0) -> None:
        self.cluster, self.timeout = cluster, timeout
        self.conns: dict[int, WireClient] = {}
        self.turn = 0

    def _conn(self, node: int) -> WireClient:
        if node not in self.conns:
            self.conns[node] = WireClient(self.cluster.host, self.cluster.ports[node - 1], timeout=self.timeout)
        return self.conns[node]

    def _drop(self, node: int) -> None:
        conn = self.conns.pop(node, None)
        if conn is not None:
            conn.close()

    def coordinators(self, groups: list[str]) -> dict[str, int]:
        from kafka.protocol.metadata import FindCoordinatorRequest

        self.turn += 1
        for i in range(len(NODES)):
            node = NODES[(self.turn + i) % len(NODES)]
            try:
                resp = self._conn(node).request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                    version=4, key_type=0, coordinator_keys=groups))
            except Exception:
                self._drop(node)
                continue
            return {c.key: c.node_id for c in resp.coordinators if c.error_code == 0}
        return {}

    def fetch(self, groups: list[str]) -> dict[str, tuple[float, int, dict[int, int]]]:
        """``group -> (time sent, answering node, {partition: committed offset})`` for the groups
        that were answered without an error."""
        from kafka.protocol.consumer import OffsetFetchRequest

        G = OffsetFetchRequest.OffsetFetchRequestGroup
        by_node: dict[int, list[str]] = defaultdict(list)
        for g, node in self.coordinators(groups).items():
            by_node[node].append(g)
        out = {}
        for node, gs in by_node.items():
            t_sent = now_s()
            try:
                resp = self._conn(node).request(ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(
                    version=8, require_stable=True, groups=[G(group_id=g, topics=None) for g in gs]))
            except Exception:
                self._drop(node)
                continue
            for g in resp.groups:
                if g.error_code != 0:
                    continue
                out[g.group_id] = (t_sent, node, {p.partition_index: p.committed_offset for t in g.topics
                                                  if t.name == TOPIC for p in t.partitions
                                                  if p.error_code == 0 and p.committed_offset >= 0})
        return out

    def close(self) -> None:
        for node in list(self.conns):
            self._drop(node)


class Observer(threading.Thread):
    """Reads every group's committed offsets all along."""

    def __init__(self, cluster: LocalCluster, history: History, stop: threading.Event) -> None:
        super().__init__(name="observer", daemon=True)
        self.cluster, self.history, self.stop_event = cluster, history, stop
        self.rounds = 0
        self.crash: str | None = None

    def run(self) -> None:
        reader = OffsetReader(self.cluster)
        groups = GROUPS + list(PROBE_GROUPS.values())
        try:
            while not self.stop_event.is_set():
                for g, (t_sent, node, offsets) in reader.fetch(groups).items():
                    for p, o in offsets.items():
                        self.history.observed(g, p, Observation(t_sent, node, o))
                self.rounds += 1
                self.stop_event.wait(0.25)
        except Exception as exc:
            self.crash = f"observer crashed: {exc!r}"
        finally:
            reader.close()


# --- the zombie probe ----------------------------------------------------------------------


class ZombieProbe:
    """A probe group (simple consumer: generation -1, no member) on the offsets partition of a
    node about to be stopped. With the base value B:

    * B+1 committed through the node while it leads (acknowledged);
    * SIGSTOP; B+3 sent to the stopped node on the same connection;
    * once ZooKeeper shows a new leader: B+2 committed through the new coordinator (acknowledged;
      lower than the zombie's, so a zombie acknowledgement would also be a lost commit for
      (a1)), then B+4 and an OffsetFetch sent to the stopped node;
    * SIGCONT; the stopped node's answers are read: no commit may be answered NONE, and the fetch
      may not answer a committed offset below B+2 (a read from a log it no longer leads)."""

    def __init__(self, cluster: LocalCluster, node: int, group: str, history: History, log: FaultLog,
                 base: int) -> None:
        self.cluster, self.node, self.group, self.history, self.log = cluster, node, group, history, log
        self.base = base
        self.conn: WireClient | None = None
        # (correlation id, "commit <offset>" or "fetch", sent after the new leader, time sent)
        self.pending: list[tuple[int, str, bool, float]] = []
        self.answers: list[tuple[str, bool, str]] = []  # (what, sent after the new leader, answer)
        self.new_leader_ack: int | None = None

    def _commit_request(self, offset: int) -> Any:
        from kafka.protocol.consumer import OffsetCommitRequest

        C = OffsetCommitRequest.OffsetCommitRequestTopic
        return OffsetCommitRequest(version=8, group_id=self.group, generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=[C(name=TOPIC, partitions=[
                                       C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                      committed_leader_epoch=-1,
                                                                      committed_metadata="probe")])])

    def _commit_through(self, node: int, offset: int, deadline_s: float, keep: bool) -> bool:
        """Commit ``offset`` through ``node`` until answered NONE (True) or NOT_COORDINATOR / the
        deadline (False); ``keep``: the connection stays open as ``self.conn``."""
        from protocol.errors import ErrorCode

        deadline = now_s() + deadline_s
        conn = None
        try:
            while now_s() < deadline:
                try:
                    if conn is None:
                        conn = WireClient(self.cluster.host, self.cluster.ports[node - 1], timeout=10)
                    t_sent = now_s()
                    resp = conn.request(ApiKey.OFFSET_COMMIT, 8, self._commit_request(offset))
                    code = resp.topics[0].partitions[0].error_code
                except Exception as exc:
                    self.log(f"probe {self.group}: commit of {offset} through node {node} failed: {exc!r}")
                    if conn is not None:
                        conn.close()
                        conn = None
                    time.sleep(0.2)
                    continue
                if code == ErrorCode.NONE:
                    self.history.acked(self.group, {0: offset}, t_sent, f"probe via node {node}")
                    if keep:
                        self.conn, conn = conn, None
                    return True
                if code == ErrorCode.NOT_COORDINATOR and keep:
                    return False
                time.sleep(0.2)  # loading, or the new coordinator not known everywhere yet
            return False
        finally:
            if conn is not None:
                conn.close()

    def commit_before(self) -> bool:
        """B+1 through the node while it still leads; False if it cannot (no probe then)."""
        return self._commit_through(self.node, self.base + 1, 10, keep=True)

    def send_while_stopped(self, after_new_leader: bool) -> None:
        from kafka.protocol.consumer import OffsetFetchRequest

        assert self.conn is not None
        if not after_new_leader:
            correlation = self.conn.send(ApiKey.OFFSET_COMMIT, 8, self._commit_request(self.base + 3))
            self.pending.append((correlation, f"commit {self.base + 3}", False, now_s()))
            return
        correlation = self.conn.send(ApiKey.OFFSET_COMMIT, 8, self._commit_request(self.base + 4))
        self.pending.append((correlation, f"commit {self.base + 4}", True, now_s()))
        t_sent = now_s()
        correlation = self.conn.send(ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(
            version=8, require_stable=True,
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=self.group, topics=None)]))
        self.pending.append((correlation, "fetch", True, t_sent))

    def commit_through_new_leader(self, node: int) -> None:
        """B+2 through the new coordinator while the old one is stopped."""
        if self._commit_through(node, self.base + 2, 20, keep=False):
            self.new_leader_ack = self.base + 2
        else:
            self.log(f"probe {self.group}: no acknowledged commit through the new leader {node} within 20 s")

    def collect(self, timeout: float = 30.0) -> None:
        """The stopped node's answers, once it runs again."""
        from protocol.client import decode_response
        from protocol.errors import ErrorCode

        def name(code: int) -> str:
            return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)

        assert self.conn is not None
        self.conn.sock.settimeout(timeout)
        for correlation, what, after, t_sent in self.pending:
            api = ApiKey.OFFSET_FETCH if what == "fetch" else ApiKey.OFFSET_COMMIT
            try:
                got, resp = decode_response(api, 8, self.conn.read_frame())
                assert got == correlation, (got, correlation)
                if what == "fetch":
                    g = resp.groups[0]
                    offsets = [p.committed_offset for t in g.topics for p in t.partitions if p.error_code == 0]
                    answer = name(g.error_code) + (f" committed={offsets[0]}" if g.error_code == 0 and offsets else "")
                    if g.error_code == 0 and offsets:
                        self.history.observed(self.group, 0, Observation(t_sent, self.node, offsets[0]))
                else:
                    answer = name(resp.topics[0].partitions[0].error_code)
                    if answer == "NONE":
                        self.history.acked(self.group, {0: int(what.split()[1])}, t_sent, f"ZOMBIE node {self.node}")
            except Exception as exc:
                answer = f"no answer ({exc!r})"
            self.answers.append((what, after, answer))
        self.close()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# --- helpers for the end --------------------------------------------------------------------


def read_log(cluster: LocalCluster, timeout: float = 60.0) -> dict[int, dict[int, bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, request_timeout_ms=20000)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    try:
        consumer.assign(tps)
        ends = {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
        consumer.seek_to_beginning()
        log: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
        deadline = now_s() + timeout
        while now_s() < deadline and any(consumer.position(tp) < ends[tp.partition] for tp in tps):
            for tp, records in consumer.poll(timeout_ms=500).items():
                for r in records:
                    log[tp.partition][r.offset] = r.value
        for p in range(PARTITIONS):
            assert sorted(log[p]) == list(range(ends[p])), f"p{p}: could not read offsets 0..{ends[p]} back"
        return log
    finally:
        consumer.close()


def resumed_note(faults: list[Fault], o: Observation, log: FaultLog) -> str:
    """For a message: the answering node had just been resumed from SIGSTOP."""
    for f in faults:
        if f.kind == "stop" and f.node == o.node and f.resumed is not None and 0 <= o.t_sent - f.resumed < 10:
            return f"; node {o.node} had been resumed from SIGSTOP {o.t_sent - f.resumed:.2f} s before"
        if f.kind == "stop" and f.node == o.node and f.resumed is not None and f.start <= o.t_sent < f.resumed:
            return f"; node {o.node} was SIGSTOPped then (read sent while it was stopped)"
    return ""


# --- the test -------------------------------------------------------------------------------


def log_members(path: Path) -> None:
    """GROUPCOORD_MEMBER_LOG=1: kafka-python's coordinator at DEBUG (joins, heartbeats, their
    answers, coordinator lookups) to ``members.log`` in the cluster directory, one line per event
    with the thread (member, or its heartbeat thread), to follow a member through a fault."""
    import logging

    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s"))
    logging.getLogger("kafka").addHandler(handler)
    logging.getLogger("kafka").setLevel(logging.INFO)
    for name in ("kafka.coordinator", "kafka.client"):
        logging.getLogger(name).setLevel(logging.DEBUG)
