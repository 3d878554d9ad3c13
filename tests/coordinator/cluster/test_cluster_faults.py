"""Faults around the cluster's coordination: ZooKeeper restarted, the controller SIGKILLed together
with the leaders it held, a follower whose log tail was torn by a crash (§9 scenarios 4, 7, 11),
a node cut off from ZooKeeper for part of its session."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.cluster.znodes import BrokerRegistration
from coordinator.cluster.zookeeper import ZooKeeper
from tests.coordinator.cluster.conftest import chroot_for, running_cluster, wait_for
from tests.coordinator.cluster.test_replication import SESSION_MS, _create, _leader, _read_all, _state, _zk
from tests.coordinator.cluster.test_replication import cluster as cluster  # noqa: F401  (the fixture)

#: The session of the ZooKeeper-restart test's nodes: long enough that a restart on a loaded
#: machine (a JVM starting slowly, then each node's next reconnect attempt) fits in it.
RESTART_SESSION_MS = 10000


@pytest.fixture
def restart_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", "replica.lag.time.max.ms=10000",
                         f"zookeeper.session.timeout.ms={RESTART_SESSION_MS}") as c:
        yield c


def _metadata_controller(cluster: LocalCluster, broker: int) -> int:
    from kafka.protocol.metadata import MetadataRequest

    from protocol.apis import ApiKey
    from tests.wire_client import WireClient

    with WireClient(cluster.host, cluster.ports[broker - 1]) as c:
        return int(c.request(ApiKey.METADATA, 9, MetadataRequest(version=9, topics=[], allow_auto_topic_creation=False,
                                                                 include_topic_authorized_operations=False)).controller_id)


def _sessions(zk: Any) -> dict[str, int]:
    """The session (ephemeral owner) of each node's registration."""
    return {b: int(zk.get(f"/brokers/ids/{b}")[1].ephemeralOwner) for b in zk.get_children("/brokers/ids")}


def test_zookeeper_restarted_within_the_session_timeout_changes_no_leader(restart_cluster: LocalCluster) -> None:
    """ZooKeeper down for less than the session timeout: the sessions survive (SUSPENDED then
    CONNECTED), no leadership moves, leaders keep acknowledging acks=all writes meanwhile, and
    Metadata says the controller is unknown while a node is cut off. A node that nonetheless lost
    its session (a loaded machine) is a bounced broker: then its leaderships must move instead."""
    from kafka import KafkaProducer

    cluster = restart_cluster
    _create(cluster, "zkdown", 1, 3, {"min.insync.replicas": "2"})
    zk = _zk(cluster)
    before = _state(zk, "zkdown", 0)
    sessions = _sessions(zk)
    zk.stop()
    zk.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", request_timeout_ms=5000)
    producer.send("zkdown", b"before", partition=0).get(timeout=20)
    cluster.zookeeper.stop()
    try:
        # Acknowledged while ZooKeeper is away: replication needs no ZooKeeper.
        assert producer.send("zkdown", b"during", partition=0).get(timeout=10).offset == 1
        leader = before["leader"]
        wait_for(lambda: _metadata_controller(cluster, leader) == -1, RESTART_SESSION_MS / 1000,
                 "Metadata: controller unknown")
    finally:
        time.sleep(0.5)
        cluster.zookeeper.start()
    zk = _zk(cluster)
    try:
        wait_for(lambda: _metadata_controller(cluster, before["leader"]) > 0, 20, "Metadata: controller known again")
        assert producer.send("zkdown", b"after", partition=0).get(timeout=20).offset == 2
        after = _state(zk, "zkdown", 0)  # read before the sessions: a move it shows follows an expiry
        wait_for(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"], RESTART_SESSION_MS / 1000 + 20,
                 "every node registered")
        expired = sorted(b for b, s in _sessions(zk).items() if s != sessions[b])
        if not expired:
            assert (after["leader"], after["leader_epoch"]) == (before["leader"], before["leader_epoch"])
        else:
            # The premise failed: a node did not reach the restarted ZooKeeper within its session.
            # CI saw this before the nodes retried about once a second (see
            # test_a_node_cut_off_from_zookeeper_retries_about_once_a_second_and_keeps_its_session),
            # and it still can: a connection that reaches the restarting server before it has
            # created its database is refused but never closed (ZOOKEEPER-5051, an NPE on that
            # close: https://github.com/apache/zookeeper/pull/2391), so the client waits its
            # connect timeout for an answer (the session timeout over the number of servers, in
            # ZooKeeper's own client too), and by then the session the server restored at
            # start-up has expired. The node registers again with a new broker epoch: under
            # KIP-380 that is a bounced broker, which Kafka's controller handles as a failure then
            # a startup (processBrokerChange), so its leaderships move and the leader epoch grows
            # (https://cwiki.apache.org/confluence/display/KAFKA/KIP-380%3A+Detect+outdated+control+requests+and+bounced+brokers+using+broker+generation).
            wait_for(lambda: _state(zk, "zkdown", 0)["leader_epoch"] > before["leader_epoch"], 20,
                     f"a new leader epoch after the sessions of {expired} expired")
    finally:
        zk.stop()
        zk.close()
        producer.close()
    assert sorted(_read_all(cluster, "zkdown", 1, 3).values()) == [b"after", b"before", b"during"]


def test_sigkill_of_the_controller_elects_another_and_its_partitions_get_leaders(cluster: LocalCluster) -> None:  # noqa: F811
    """Exactly one controller afterwards, /controller_epoch + 1, and the partitions the dead node
    led are led again by ISR members at a new leader epoch."""
    _create(cluster, "ctl", 3, 3, {"min.insync.replicas": "2"})
    zk = _zk(cluster)
    try:
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        epoch = int(zk.get("/controller_epoch")[0])
        led = {p: _state(zk, "ctl", p) for p in range(3) if _state(zk, "ctl", p)["leader"] == controller}
        assert led, "the test needs the controller to lead a partition (assignment is round-robin)"
        cluster.procs[controller].kill()
        def new_controller() -> bool:
            from kazoo.exceptions import NoNodeError

            try:  # the znode may go between a check and a read (the dead node's session expiring)
                return json.loads(zk.get("/controller")[0])["brokerid"] != controller
            except NoNodeError:
                return False

        wait_for(new_controller, SESSION_MS / 1000 + 15, "a new controller")
        assert int(zk.get("/controller_epoch")[0]) == epoch + 1
        for p, old in led.items():
            wait_for(lambda p=p: _state(zk, "ctl", p)["leader"] not in (controller, -1), 15, f"a new leader for ctl-{p}")
            new = _state(zk, "ctl", p)
            assert new["leader"] in old["isr"] and new["leader_epoch"] == old["leader_epoch"] + 1
            assert controller not in new["isr"]
            assert new["controller_epoch"] == epoch + 1
    finally:
        zk.stop()
        zk.close()


def test_a_follower_with_a_torn_log_tail_recovers_and_converges(cluster: LocalCluster) -> None:  # noqa: F811
    """SIGKILL a follower, tear the tail of its active segment (a crash mid-write), restart: it
    recovers to its last whole batch, fetches the rest, rejoins the ISR, and holds the same bytes
    as the leader."""
    from kafka import KafkaProducer

    _create(cluster, "torn", 1, 3, {"min.insync.replicas": "2"})
    leader = _leader(cluster, "torn", 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    for i in range(500):
        producer.send("torn", b"r%d" % i, partition=0)
    producer.flush(30)
    directory = cluster.directory / f"node-{follower}" / "torn-0"

    def log_bytes(broker: int) -> bytes:
        d = cluster.directory / f"node-{broker}" / "torn-0"
        return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))

    wait_for(lambda: log_bytes(follower) == log_bytes(leader), 20, "the follower caught up")
    cluster.procs[follower].kill()
    cluster.procs[follower].wait()
    segment = sorted(directory.glob("*.log"))[-1]
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 37)  # a torn last batch
    for i in range(500, 700):
        producer.send("torn", b"r%d" % i, partition=0)
    producer.flush(30)
    producer.close()
    cluster.restart(follower)
    zk = _zk(cluster)
    try:
        wait_for(lambda: follower in _state(zk, "torn", 0)["isr"], 40, "the follower back in the ISR")
    finally:
        zk.stop()
        zk.close()
    wait_for(lambda: log_bytes(follower) == log_bytes(leader), 20, "identical logs")
    values = _read_all(cluster, "torn", 1, 700)
    assert sorted(values) == [(0, o) for o in range(700)]


class _Gate:
    """A TCP gate between a ZooKeeper client and the server. Open, it forwards; shut, it cuts the
    connections through it and drops each new one at once: a network partition from ZooKeeper,
    with every attempt the client makes to reach it noted (monotonic time, let through)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.attempts: list[tuple[float, bool]] = []
        self._open = True
        self._lock = threading.Lock()
        self._through: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.attempts.append((time.monotonic(), self._open))
                if not self._open:
                    conn.close()
                    continue
                upstream = socket.create_connection(self.target)
                self._through += [conn, upstream]
            for src, dst in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_RDWR)

    def shut(self) -> None:
        with self._lock:
            self._open = False
            through, self._through = self._through, []
        for s in through:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def open(self) -> None:
        with self._lock:
            self._open = True

    def close(self) -> None:
        self.listener.close()
        self.shut()


def test_a_node_cut_off_from_zookeeper_retries_about_once_a_second_and_keeps_its_session(
        zookeeper: LocalZooKeeper, request: pytest.FixtureRequest) -> None:
    """Cut off from ZooKeeper for 9 s of a 20 s session, a node tries to reach it again at least
    about once a second, as ZooKeeper's own client does, and so is back in the same session with
    the same registration (broker epoch): no bounce (KIP-380). With kazoo's default backoff the
    pauses had doubled to 3.2 and 6.4 s by then, long enough for a session to time out on a
    ZooKeeper already back (the CI failure of the ZooKeeper-restart test above)."""
    from kazoo.client import KazooState

    gate = _Gate(("127.0.0.1", zookeeper.port))
    zk = ZooKeeper(f"127.0.0.1:{gate.port}{chroot_for(request)}", session_timeout_ms=20000,
                   connection_timeout_ms=10000)
    states: list[str] = []
    zk.client.add_listener(states.append)
    try:
        zk.start()
        zk.register(BrokerRegistration(1, "127.0.0.1", 9092))
        session, czxid = zk.session_id, zk.client.get("/brokers/ids/1")[1].czxid
        gate.shut()
        cut = time.monotonic()
        # The partition lasts a set time: that is the fault, not a wait for something to happen.
        # 9 s: kazoo's default pauses (0.1 s doubling, ±40 %) reach the 6.4 s one by then.
        time.sleep(9.0)
        gate.open()
        wait_for(lambda: zk.client.state == KazooState.CONNECTED and any(ok for t, ok in gate.attempts if t > cut),
                 15, "connected again through the gate")
        tried = [cut]
        for t, ok in gate.attempts:
            if t > cut:
                tried.append(t)
                if ok:
                    break
        pauses = [round(b - a, 2) for a, b in itertools.pairwise(tried)]
        # Under 1 s each (0.7 s ±40 %); 3.5 s leaves room for a loaded machine stalling a thread.
        # kazoo's default cannot pass: its first six attempts all come within 9 s (0.1 … 3.2 s,
        # each +40 % at most: 8.8 s), so the seventh pause, 6.4 s -40 % = 3.84 s at least, is here.
        assert max(pauses) < 3.5, pauses
        assert KazooState.LOST not in states, states
        assert zk.session_id == session
        assert zk.client.get("/brokers/ids/1")[1].czxid == czxid
    finally:
        zk.close()
        gate.close()
