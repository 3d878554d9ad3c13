"""A KIP-848 consumer group of stock consumers (``group.protocol=consumer``: Java 3.9.1 and
confluent-kafka / librdkafka 2.16) on a three-node cluster while the node coordinating it is
SIGKILLed (issue 31): the group moves to the hot standby on another node and goes on as it was. Checked: every record produced is consumed,
none twice beyond what was uncommitted at the kill, no member sees its assignment change (no
revocation, no new assignment: the members keep their epochs), each member's committed offsets
only grow, the new coordinator holds at least every commit acknowledged before the kill, and the
group's committed offsets end at the log end. Printed: how long after the kill the new coordinator
described the group as Stable, and how long until a member's next acknowledged commit.

The raw-client version (exact epochs and assignments): test_consumer_group_failover.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.apis import ApiKey
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest
from protocol.hashing import partition_for
from tests.clients.group_consumer_protocol import CONSUMER_PROTOCOL_SERVER
from tests.clients.group_scenario import (
    P,
    all_consumed,
    check_exactly_once,
    committed_offsets,
    ctx,
    produce,
    start_member,
    uid,
    wait_stable,
    wait_until,
)
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster
from tests.coordinator.cluster.test_replication import _create, _leader
from tests.wire_client import WireClient

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

OFFSETS_PARTITIONS = 3
#: The members' session on the server: well above the failover (the nodes' 4 s ZooKeeper session
#: plus the takeover), so the new coordinator never fences a member that was waiting for it.
MEMBER_SESSION_MS = 20000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    settings = {**CONSUMER_PROTOCOL_SERVER, "group.consumer.session.timeout.ms": str(MEMBER_SESSION_MS)}
    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         *(f"{k}={v}" for k, v in settings.items())) as c:
        yield c


class _Log:
    """What ``ctx()`` reads of a server: the tails of the nodes' logs."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def log_text(self) -> str:
        return "\n".join(f"[node {b}] {line}" for b in (1, 2, 3)
                         for line in self.cluster.log_path(b).read_text(errors="replace").splitlines()[-20:])


def _stable_at(cluster: LocalCluster, node: int, group: str) -> bool:
    """Node ``node`` describes ``group`` as Stable (ConsumerGroupDescribe v1)."""
    try:
        with WireClient(cluster.host, cluster.ports[node - 1], timeout=5) as c:
            described = c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest[1](
                group_ids=[group], include_authorized_operations=False)).groups[0]
    except OSError:
        return False
    return bool(described.error_code == 0 and described.group_state == "Stable")


def _commit_sequences_grow(members: list) -> list[str]:  # type: ignore[type-arg]
    """Per member and partition, the offsets its acknowledged commits reported, in order: a
    commit going backwards is listed."""
    bad = []
    for m in members:
        last: dict[int, int] = {}
        for tag, rest in m.events():
            if tag == "C":
                p, o = map(int, rest.split())
                if o < last.get(p, -1):
                    bad.append(f"{m.name}: partition {p} committed {o} after {last[p]}")
                last[p] = o
    return bad


@pytest.mark.parametrize("kind", ["java", "confluent"])
def test_consumer_group_fails_over_without_a_rebalance(cluster: LocalCluster, tmp_path: Path, kind: str) -> None:
    bs = cluster.bootstrap
    topic, group = uid("kip848-fo-t"), uid("kip848-fo-g")
    _create(cluster, topic, P, 3, {"min.insync.replicas": "2"})
    produce(bs, topic, 0, 1200)
    members = [start_member(kind, f"m{i}", bs, topic, group, "consumer", tmp_path) for i in range(2)]
    log = _Log(cluster)
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 90), ctx(members, log)
        assert wait_stable(members, 30), ctx(members, log)
        coordinator = _leader(cluster, "__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))
        assert _stable_at(cluster, coordinator, group), ctx(members, log)
        marks = {m.name: m.mark() for m in members}
        acked: dict[int, int] = {}
        for m in members:
            for p, o in m.commits().items():
                acked[p] = max(acked.get(p, 0), o)
        killed = time.monotonic()
        cluster.procs[coordinator].kill()
        live = [b for b in (1, 2, 3) if b != coordinator]
        assert wait_until(lambda: any(_stable_at(cluster, b, group) for b in live), SESSION_MS / 1000 + 20, 0.05), \
            "no other node serves the group\n" + ctx(members, log)
        served = time.monotonic() - killed
        # New records after the kill (their partitions' leaders may be moving too): the members'
        # next commits go to the new coordinator.
        produce(bs, topic, 1200, 1200)
        assert wait_until(lambda: any(tag == "C" for m in members for tag, _ in m.events()[marks[m.name]:]),
                          60, 0.05), "no commit acknowledged after the kill\n" + ctx(members, log)
        committing = time.monotonic() - killed
        assert wait_until(lambda: all_consumed(members, 2400), 90), ctx(members, log)
        time.sleep(2)  # heartbeats and commits after the failover

        # No acknowledged commit lost.
        live_bs = ",".join(f"{cluster.host}:{cluster.ports[b - 1]}" for b in live)
        got = committed_offsets(live_bs, group)
        assert all(got.get(p, -1) >= o for p, o in acked.items()), (got, acked)
        # No reassignment: no member's assignment changed across the failover.
        moved = {m.name: [e for e in m.events()[marks[m.name]:] if e[0] in ("A", "REV", "LOST")] for m in members}
        assert not any(moved.values()), f"assignment changes across the coordinator failover: {moved}\n" + \
            ctx(members, log)

        # Every record consumed; twice only if it was past the last acknowledged commit at the kill.
        def uncommitted_at_kill(p: int, o: int, who: list[str]) -> bool:
            return o >= acked.get(p, 0)

        check_exactly_once(members, 2400, uncommitted_at_kill, ctx(members, log))
        assert not _commit_sequences_grow(members), _commit_sequences_grow(members)
        for m in members:
            m.request_stop()
        for m in members:
            assert m.bg.wait(30) is not None, f"{m.name} did not stop\n{ctx(members, log)}"
        want = {p: 2400 // P for p in range(P)}
        assert wait_until(lambda: committed_offsets(live_bs, group) == want, 20, 0.5), \
            f"committed {committed_offsets(live_bs, group)}, want {want}\n{ctx(members, log)}"
        dupes = len([1 for m in members for _ in m.records()]) - 2400
        print(f"{kind} group.protocol=consumer: the new coordinator described the group Stable {served:.2f} s after the "
              f"SIGKILL of node {coordinator}; first acknowledged commit after {committing:.2f} s; "
              f"{dupes} records consumed twice")
    finally:
        for m in members:
            m.bg.stop()
