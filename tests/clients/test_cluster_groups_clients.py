"""Stock-client consumer groups on a three-node cluster while their coordinator's node fails
(issue 14): Java 3.9.1 and librdkafka (confluent-kafka) members commit
as they consume; the node leading the group's ``__consumer_offsets`` partition is SIGKILLed or
stopped gracefully (controlled shutdown). Checked: every record consumed exactly once (nothing
re-delivered beyond what was committed), no member sees a rebalance (their session timeout is
longer than the failover), and the group's committed offsets end at the log end.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.hashing import partition_for
from tests.clients.group_scenario import (P, all_consumed, check_exactly_once, committed_offsets, ctx, produce,
                                          start_member, uid, wait_stable, wait_until)
from tests.cluster.conftest import running_cluster
from tests.cluster.test_replication import _create, _leader

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

OFFSETS_PARTITIONS = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "group.initial.rebalance.delay.ms=0") as c:
        yield c


class _Log:
    """``ctx()`` wants something with ``log_text()``: the cluster's node logs."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def log_text(self) -> str:
        return "\n".join(f"[node {b}] {line}" for b in (1, 2, 3)
                         for line in self.cluster.log_path(b).read_text(errors="replace").splitlines()[-20:])


# kafkajs 2.2.4 is left out: after its coordinator's connection goes (SIGKILL, and also the
# graceful stop) a member may never look the coordinator up again (tulios/kafkajs#1779, fixed
# upstream only in 2026). Measured: with SIGKILL both members stall for good; with SIGTERM, in 1
# run of 3, one member stalls without committing, the group rebalances after its session and the
# other member consumes its records again — a client bug, not something the server can change.
# kafka-python 3.0.12 members are left out here too: in 1 CI run of 3 a member process closed
# itself (ConnectionResetError traces on its stderr) while its coordinator stopped gracefully,
# and the group rebalanced; not investigated yet (see tests/clients/FINDINGS.md on kafka-python).
# The kafka-python group failover through a SIGKILL is tested in tests/cluster/test_group_failover.py.
CASES = [(kind, fault) for fault in ("sigkill", "sigterm") for kind in ("java", "confluent")]


@pytest.mark.parametrize(("kind", "fault"), CASES)
def test_group_keeps_its_commits_and_generation_when_the_coordinator_node_fails(
        cluster: LocalCluster, tmp_path: Path, kind: str, fault: str) -> None:
    bs = cluster.bootstrap
    topic, group = uid("cg-t"), uid("cg-g")
    _create(cluster, topic, P, 3, {"min.insync.replicas": "2"})
    produce(bs, topic, 0, 1200)
    strategy = "range"
    members = [start_member(kind, f"m{i}", bs, topic, group, strategy, tmp_path, session_ms=20000) for i in range(2)]
    log = _Log(cluster)
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 90), ctx(members, log)
        assert wait_stable(members, 30), ctx(members, log)
        marks = {m.name: m.mark() for m in members}
        coordinator = _leader(cluster, "__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))
        proc = cluster.procs[coordinator]
        if fault == "sigkill":
            proc.kill()
        else:
            proc.terminate()
            assert proc.wait(30) == 0
        produce(bs, topic, 1200, 1200)
        assert wait_until(lambda: all_consumed(members, 2400), 90), ctx(members, log)
        time.sleep(3)  # heartbeats and commits after the failover
        moved = {m.name: [e for e in m.events()[marks[m.name]:] if e[0] in ("A", "REV", "LOST")] for m in members}
        assert not any(moved.values()), f"members rebalanced across the coordinator failover: {moved}\n" + ctx(
            members, log)
        check_exactly_once(members, 2400, lambda p, o, who: False, ctx(members, log))
        for m in members:
            m.request_stop()
        for m in members:
            m.bg.wait(30)
        live = ",".join(f"{cluster.host}:{port}" for b, port in enumerate(cluster.ports, 1) if b != coordinator)
        assert wait_until(lambda: committed_offsets(live, group) == {p: 2400 // P for p in range(P)}, 20), (
            f"committed {committed_offsets(live, group)}\n" + ctx(members, log))
    finally:
        for m in members:
            if m.alive():
                m.kill()
