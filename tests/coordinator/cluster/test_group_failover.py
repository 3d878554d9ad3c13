"""The group coordinator follows its offsets partition's leadership (issue 14, first steps): a
consumer group committing while the coordinator's node is SIGKILLed keeps every acknowledged
commit, a stable group goes through the failover without a rebalance, and the new coordinator
takes over its hot-standby state instead of loading the partition's log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.hashing import partition_for
from tests.coordinator.cluster.committer import Committer
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster, wait_for
from tests.coordinator.cluster.test_replication import _create, _leader, _state, _zk

pytestmark = pytest.mark.timeout(240)

OFFSETS_PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "group.initial.rebalance.delay.ms=0") as c:
        yield c


def test_commits_survive_sigkill_of_the_coordinator_without_a_rebalance(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient

    _create(cluster, "events", 2, 3, {"min.insync.replicas": "2"})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    for i in range(4000):
        producer.send("events", b"%d" % i, partition=i % 2)
    producer.flush(30)
    producer.close()

    group = "failover-group"
    member = Committer(cluster.bootstrap, group, "events").__enter__()
    acked, assigned, failures = member.acked, member.assigned, member.failures
    try:
        wait_for(lambda: sum(acked.values()) > 300, 60, "commits acknowledged before the kill")
        coordinator = _leader(cluster, "__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))
        at_kill = dict(acked)
        killed = time.monotonic()
        cluster.procs[coordinator].kill()
        wait_for(lambda: sum(acked.values()) > sum(at_kill.values()) + 200, SESSION_MS / 1000 + 40,
                 "commits acknowledged by the new coordinator")
        resumed = time.monotonic() - killed
    finally:
        member.stop()
    print(f"commits acknowledged again {resumed:.2f} s after the coordinator's SIGKILL; "
          f"{len(failures)} commit errors; rebalances {len(assigned)}")
    admin = KafkaAdminClient(bootstrap_servers=",".join(
        f"{cluster.host}:{p}" for b, p in enumerate(cluster.ports, 1) if b != coordinator))
    try:
        committed = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    got = {tp.partition: meta.offset for tp, meta in committed.items()}
    # The consumer stopped after its last acknowledged commit: what the group holds is exactly it.
    assert got == acked, (got, acked)
    assert len(assigned) == 1, f"{len(assigned)} assignments: the failover caused a rebalance"
    zk = _zk(cluster)
    partition = partition_for(group, OFFSETS_PARTITIONS)
    try:
        state = _state(zk, "__consumer_offsets", partition)
        assert state["leader"] != coordinator
    finally:
        zk.stop()
        zk.close()
    # Hot standby (runtime rule 6): the new coordinator took over the state it had replayed as a
    # follower, replaying at most the tail, not the partition's whole log.
    loaded = [line for line in cluster.log_path(state["leader"]).read_text().splitlines()
              if "coordinator partition loaded" in line and f"partition=__consumer_offsets-{partition} " in line]
    assert loaded and "from_standby=True" in loaded[-1], loaded
    fields = dict(item.split("=", 1) for item in loaded[-1].split() if "=" in item)
    assert int(fields["from_offset"]) > 0, loaded[-1]


def test_a_commit_is_never_acknowledged_without_two_replicas(cluster: LocalCluster) -> None:
    """__consumer_offsets has min.insync.replicas=2 in cluster mode: with one of its followers
    dead the other still makes commits durable; with both dead the leader refuses commits
    (COORDINATOR_NOT_AVAILABLE), and answers NONE again once a follower is back in the ISR."""
    from kafka.protocol.consumer import OffsetCommitRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from protocol.apis import ApiKey
    from protocol.errors import ErrorCode
    from tests.wire_client import WireClient

    _create(cluster, "t", 1, 3, {})
    group = "isr-group"
    partition = partition_for(group, OFFSETS_PARTITIONS)
    C = OffsetCommitRequest.OffsetCommitRequestTopic

    def find(c: WireClient) -> Any:
        return c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
            version=4, key_type=0, coordinator_keys=[group])).coordinators[0]

    def commit(c: WireClient, offset: int) -> int:
        req = OffsetCommitRequest(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, topics=[C(name="t", partitions=[
                                      C.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                     committed_leader_epoch=-1, committed_metadata="")])])
        return int(c.request(ApiKey.OFFSET_COMMIT, 8, req).topics[0].partitions[0].error_code)

    with WireClient(cluster.host, cluster.ports[0]) as c:
        wait_for(lambda: find(c).error_code == 0, 30, "the offsets topic and a coordinator")
    zk = _zk(cluster)
    try:
        config = zk.get("/config/topics/__consumer_offsets")[0]
        assert b'"min.insync.replicas":"2"' in config, config
        coordinator = _leader(cluster, "__consumer_offsets", partition)
        followers = [b for b in (1, 2, 3) if b != coordinator]
        with WireClient(cluster.host, cluster.ports[coordinator - 1], timeout=30) as c:
            wait_for(lambda: commit(c, 1) == ErrorCode.NONE, 30, "a first commit")
            cluster.procs[followers[0]].kill()
            wait_for(lambda: followers[0] not in _state(zk, "__consumer_offsets", partition)["isr"],
                     SESSION_MS / 1000 + 15, "the first follower out of the ISR")
            wait_for(lambda: commit(c, 2) == ErrorCode.NONE, 10, "a commit with two replicas in the ISR")
            cluster.procs[followers[1]].kill()
            wait_for(lambda: _state(zk, "__consumer_offsets", partition)["isr"] == [coordinator],
                     SESSION_MS / 1000 + 15, "the ISR down to the leader")
            wait_for(lambda: commit(c, 3) == ErrorCode.COORDINATOR_NOT_AVAILABLE, 10,
                     "commits refused below min.insync.replicas")
            cluster.restart(followers[1])
            wait_for(lambda: commit(c, 4) == ErrorCode.NONE, 40, "commits acknowledged with a follower back")
    finally:
        zk.stop()
        zk.close()
