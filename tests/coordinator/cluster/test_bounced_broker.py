"""A node SIGKILLed and restarted before the controller saw it go (a "bounced" broker, KIP-380:
https://cwiki.apache.org/confluence/display/KAFKA/KIP-380%3A+Detect+outdated+control+requests+and+bounced+brokers+using+broker+generation).

Kafka's controller tells a bounce by the broker epoch, the czxid of ``/brokers/ids/<id>``: the same
id back with a newer one is handled as a failure then a startup, so every partition the broker
led gets a new leader epoch, and the restarted broker leads only what the controller gives it
afterwards — never a leadership it finds in ZooKeeper from its previous life.

The race is made certain rather than left to chance: the controller's node is SIGSTOPped (its
own session is long, so it survives the stop) while the victim's old session expires and the
restarted victim registers again, then resumed — the controller then sees only the new
registration of the same broker id, as a slow controller sometimes does.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.hashing import partition_for
from tests.coordinator.cluster.committer import Committer
from tests.coordinator.cluster.conftest import wait_for
from tests.coordinator.cluster.test_replication import _create, _read_all, _state, _zk

pytestmark = pytest.mark.timeout(240)

VICTIM = 3
#: The victim's session: short, so its old registration goes soon after the kill.
VICTIM_SESSION_MS = 4000
#: Every other node's: long enough that the SIGSTOPped controller keeps its session.
OTHERS_SESSION_MS = 30000
OFFSETS_PARTITIONS = 3
TOPIC = "bounce"


class _Cluster(LocalCluster):
    """Three nodes; the victim (node 3) starts last, so it is not the controller, and has the
    short session."""

    def node_args(self, broker_id: int, port: int) -> list[str]:
        session = VICTIM_SESSION_MS if broker_id == VICTIM else OTHERS_SESSION_MS
        return [*super().node_args(broker_id, port), "--set", f"zookeeper.session.timeout.ms={session}"]

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.zookeeper.start()
        try:
            for broker_id in (1, 2):
                self._start_node(broker_id, self.ports[broker_id - 1])
            for broker_id in (1, 2):
                self._wait_listening(broker_id, self.ports[broker_id - 1])
            self._start_node(VICTIM, self.ports[VICTIM - 1])
            self._wait_listening(VICTIM, self.ports[VICTIM - 1])
        except BaseException:
            self.stop()
            raise


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    from tests.conftest import free_ports

    c = _Cluster(tmp_path / "cluster", 3, free_ports(3), tick_time_ms=500,
                 settings=["replica.fetch.backoff.ms=200", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                           "group.initial.rebalance.delay.ms=0", "auto.leader.rebalance.enable=false"])
    c.start()
    try:
        yield c
    finally:
        for proc in c.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        c.stop()


def _led_by(zk: Any, topic: str, partitions: int, broker: int) -> int:
    return next(p for p in range(partitions) if _state(zk, topic, p)["leader"] == broker)


def _leading_epochs(cluster: LocalCluster, broker: int, since: int, partition: str) -> list[int]:
    """The leader epochs node ``broker`` logged starting to lead ``partition`` at, from byte ``since``."""
    with open(cluster.log_path(broker), "rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return [int(m.group(1)) for m in re.finditer(
        rf"msg=leading partition={re.escape(partition)} leader_epoch=(\d+)", text)]


def test_a_bounced_leader_is_failed_over_by_the_controller(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient

    zk = _zk(cluster)
    try:
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        assert controller != VICTIM
        _create(cluster, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        wait_for(lambda: all(zk.exists(f"/brokers/topics/{TOPIC}/partitions/{p}/state") for p in range(3)),
                 30, "the topic's partition states")
        data_p = _led_by(zk, TOPIC, 3, VICTIM)

        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=2**31 - 1,
                                 max_in_flight_requests_per_connection=1, request_timeout_ms=5000,
                                 metadata_max_age_ms=1000)
        acked: dict[tuple[int, int], bytes] = {}

        def produce(start: int, count: int) -> None:
            futures = [(producer.send(TOPIC, b"r%d" % i, partition=i % 3), b"r%d" % i)
                       for i in range(start, start + count)]
            for future, value in futures:
                meta = future.get(60)
                acked[(meta.partition, meta.offset)] = value

        produce(0, 300)

        # A group whose coordinator is the victim: the offsets partition it leads.
        wait_for(lambda: _coordinator_found(cluster), 30, "a group coordinator (creates the offsets topic)")
        wait_for(lambda: all(zk.exists(f"/brokers/topics/__consumer_offsets/partitions/{p}/state")
                             for p in range(OFFSETS_PARTITIONS)), 30, "the offsets topic's partition states")
        offsets_p = _led_by(zk, "__consumer_offsets", OFFSETS_PARTITIONS, VICTIM)
        group = next(g for g in (f"bounce-{i}" for i in range(1000))
                     if partition_for(g, OFFSETS_PARTITIONS) == offsets_p)
        member = Committer(cluster.bootstrap, group, TOPIC, max_poll_records=5, pause_s=0.05).__enter__()
        try:
            wait_for(lambda: member.total() > 30, 60, "commits acknowledged before the bounce")
            before = {p: _state(zk, t, p)["leader_epoch"] for t, p in (("__consumer_offsets", offsets_p), (TOPIC, data_p))}
            old_epochs = {"__consumer_offsets": before[offsets_p], TOPIC: before[data_p]}
            old_czxid = zk.exists(f"/brokers/ids/{VICTIM}").czxid

            # The bounce, unseen by the controller until the victim is registered again.
            cluster.procs[controller].send_signal(signal.SIGSTOP)
            try:
                cluster.procs[VICTIM].kill()
                cluster.procs[VICTIM].wait()
                log_start = cluster.log_path(VICTIM).stat().st_size
                cluster.restart(VICTIM)  # returns once it listens: registered again by then
                stat = zk.exists(f"/brokers/ids/{VICTIM}")
                assert stat is not None and stat.czxid > old_czxid, "the victim registered again"
            finally:
                cluster.procs[controller].send_signal(signal.SIGCONT)

            # The controller failed the bounced leader over: a new leader epoch in ZooKeeper.
            for topic, p in (("__consumer_offsets", offsets_p), (TOPIC, data_p)):
                wait_for(lambda t=topic, q=p: _state(zk, t, q)["leader_epoch"] > old_epochs[t], 30,
                         f"a new leader epoch of {topic}-{p} after the bounce")
            # The restarted node never led at an epoch from its previous life.
            for topic, p in (("__consumer_offsets", offsets_p), (TOPIC, data_p)):
                stale = [e for e in _leading_epochs(cluster, VICTIM, log_start, f"{topic}-{p}") if e <= old_epochs[topic]]
                assert not stale, f"node {VICTIM} led {topic}-{p} again at its old leader epoch {stale}"

            # The group keeps committing, and records keep being acknowledged.
            at_resume = member.total()
            wait_for(lambda: member.total() > at_resume + 30, 60, "commits acknowledged after the bounce")
            produce(300, 300)
        finally:
            member.stop()
        producer.close()
        last_acked = dict(member.acked)

        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
        try:
            committed = {tp.partition: om.offset for tp, om in admin.list_group_offsets(group)[group].items()}
        finally:
            admin.close()
        for p, offset in last_acked.items():
            assert committed.get(p, -1) >= offset, f"acknowledged commit of partition {p} at {offset} lost: {committed}"
        got = _read_all(cluster, TOPIC, 3, len(acked), timeout=60)
        missing = [k for k, v in acked.items() if got.get(k) != v]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    finally:
        zk.stop()
        zk.close()


def _coordinator_found(cluster: LocalCluster) -> bool:
    """One group lookup answered (the first FindCoordinator creates the offsets topic)."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10000)
    try:
        admin.describe_groups(["bounce-probe"])
        return True
    except KafkaError:
        return False
    finally:
        admin.close()
