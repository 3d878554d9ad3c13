"""Stock-client consumer groups on a three-node cluster while their coordinator's node fails
(issue 14): Java 3.9.1, librdkafka (confluent-kafka) and kafka-python 3.0.12 members commit as
they consume; the node leading the group's ``__consumer_offsets`` partition is SIGKILLed, stopped
gracefully (controlled shutdown), or SIGSTOPped past its ZooKeeper session and resumed (it must
come back as a follower). Checked: the new coordinator holds every acknowledged commit, every
record consumed exactly once (nothing re-delivered beyond what was committed), no member sees a
rebalance (their session timeout is longer than the failover), and the group's committed offsets
end at the log end.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.hashing import partition_for
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
from tests.coordinator.cluster.test_replication import _create, _leader, _state, _zk

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
# other member consumes its records again. In its source (2.2.4): the consumer looks its
# coordinator up only when it (re)joins (ConsumerGroup[JOIN] -> cluster.findGroupCoordinator);
# heartbeats go to that Broker object, which reconnects to the same address, and commits ask
# cluster.findBroker for the same node id. A refused or closed connection is a plain retriable
# KafkaJSConnectionError that the runner retries against the same node; only a
# REBALANCE_IN_PROGRESS / NOT_COORDINATOR / ILLEGAL_GENERATION answer (isRebalancing) makes it
# rejoin and so find the new coordinator. A node that is gone cannot answer any of those.
# kafka-python 3.0.12 runs again since its member retries what poll() lets out (group_member.py:
# a retriable KafkaConnectionError from ensure_coordinator_ready_async when FindCoordinator and
# the Metadata refresh both go to the stopping node; that ended the member in 1 run of 4, and
# the retry path was taken, and passed, in 2 of 15 SIGTERM runs since). Left: its known hang in
# group formation (tests/clients/FINDINGS.md: a member stops heartbeating after a rebalance and
# its session expires), seen once here in 30 runs of its cases, before any fault.
CASES = [(kind, fault) for fault in ("sigkill", "sigterm", "sigstop") for kind in ("java", "confluent", "kafka-python")]

#: The members' session: longer than any failover here (the SIGSTOP one included), so a member is
#: never expired by the coordinator it moves to.
MEMBER_SESSION_MS = 20000


def _committed_or_none(bootstrap: str, group: str) -> dict[int, int] | None:
    """OffsetFetch, or None while the group has no reachable coordinator (mid-failover)."""
    try:
        return committed_offsets(bootstrap, group)
    except Exception:  # noqa: BLE001 - any client error here means "not yet"
        return None


def _stop_past_the_session(cluster: LocalCluster, node: int, offsets_partition: int, log: _Log,
                           members: list) -> float:  # type: ignore[type-arg]
    """SIGSTOP ``node`` until its ZooKeeper session has expired and another node leads the group's
    offsets partition; SIGCONT it; wait until it is back as a follower (registered again, in the
    partition's ISR, not its leader). Returns how long it was stopped."""
    zk = _zk(cluster)
    proc = cluster.procs[node]
    try:
        proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            moved = wait_until(lambda: _state(zk, "__consumer_offsets", offsets_partition)["leader"]
                               not in (node, -1), SESSION_MS / 1000 + 12, 0.2)
        finally:
            proc.send_signal(signal.SIGCONT)
            stopped_for = time.monotonic() - stopped
        assert moved, f"no new leader for __consumer_offsets-{offsets_partition} while node {node} was stopped\n" + \
            ctx(members, log)

        def follower_again() -> bool:
            state = _state(zk, "__consumer_offsets", offsets_partition)
            return bool(zk.exists(f"/brokers/ids/{node}")) and state["leader"] != node and node in state["isr"]

        assert wait_until(follower_again, 40, 0.5), (
            f"node {node} not back as a follower of __consumer_offsets-{offsets_partition}: "
            f"{_state(zk, '__consumer_offsets', offsets_partition)}\n" + ctx(members, log))
        assert proc.poll() is None, f"node {node} exited after SIGCONT\n" + ctx(members, log)
        return stopped_for
    finally:
        zk.stop()
        zk.close()


@pytest.mark.parametrize(("kind", "fault"), CASES)
def test_group_keeps_its_commits_and_generation_when_the_coordinator_node_fails(
        cluster: LocalCluster, tmp_path: Path, kind: str, fault: str) -> None:
    bs = cluster.bootstrap
    topic, group = uid("cg-t"), uid("cg-g")
    _create(cluster, topic, P, 3, {"min.insync.replicas": "2"})
    produce(bs, topic, 0, 1200)
    strategy = "range"
    members = [start_member(kind, f"m{i}", bs, topic, group, strategy, tmp_path, session_ms=MEMBER_SESSION_MS)
               for i in range(2)]
    log = _Log(cluster)
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 90), ctx(members, log)
        assert wait_stable(members, 30), ctx(members, log)
        marks = {m.name: m.mark() for m in members}
        offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
        coordinator = _leader(cluster, "__consumer_offsets", offsets_partition)
        proc = cluster.procs[coordinator]
        if fault == "sigkill":
            proc.kill()
        elif fault == "sigterm":
            proc.terminate()
            assert proc.wait(30) == 0, ctx(members, log)
        else:
            # Why no member rebalances (the count asserted below is 0, every run): the node is
            # stopped until its ZooKeeper session (SESSION_MS, 4 s) has expired and another node
            # leads the group's offsets partition: 3.5-7 s (the session counts from the node's
            # last ping, up to a third of a session before the SIGSTOP), asserted below to stay
            # 8 s under the members' session (20 s). While it is stopped its connections stay
            # open, so the members' heartbeats to it get neither an answer nor an error, and no
            # client gives up on it before the SIGCONT: Java after session.timeout.ms without a
            # heartbeat answer or request.timeout.ms (30 s), librdkafka after session.timeout.ms
            # or socket.timeout.ms (60 s), kafka-python after session_timeout_ms or
            # request_timeout_ms (40 s in group_member.py). No coordinator expires a member
            # either: the new one gives every loaded member a fresh session when it takes the
            # partition over, and the stopped one's clock for them is within the session too.
            # Resumed, the old node answers what waited in its sockets (as the coordinator it
            # still believes it is for the moment until it sees its session expired, then
            # NOT_COORDINATOR), and the members find the new coordinator with their generation
            # intact. Nothing is produced while the node is stopped, so no member has a commit
            # in flight to it: a commit blocked there would hold up the member's poll loop and
            # make the count depend on when it was sent.
            stopped_for = _stop_past_the_session(cluster, coordinator, offsets_partition, log, members)
            print(f"node {coordinator} stopped for {stopped_for:.1f} s")
            assert stopped_for < MEMBER_SESSION_MS / 1000 - 8, (
                f"stopped for {stopped_for:.1f} s: too close to the members' session for the no-rebalance "
                f"expectation\n" + ctx(members, log))
        # No acknowledged commit lost: the new coordinator answers at least what the members
        # were told was committed before the failure.
        acked: dict[int, int] = {}
        for m in members:
            for p, o in m.commits().items():
                acked[p] = max(acked.get(p, 0), o)
        live = ",".join(f"{cluster.host}:{port}" for b, port in enumerate(cluster.ports, 1)
                        if fault == "sigstop" or b != coordinator)
        got: dict[int, int] = {}

        def holds_acked() -> bool:
            now = _committed_or_none(live, group)
            if now is None:
                return False
            got.clear()
            got.update(now)
            return all(got.get(p, -1) >= o for p, o in acked.items())

        assert wait_until(holds_acked, 40, 0.5), f"after the failover committed {got}, acknowledged {acked}\n" + \
            ctx(members, log)
        produce(bs, topic, 1200, 1200)
        assert wait_until(lambda: all_consumed(members, 2400), 90), ctx(members, log)
        time.sleep(3)  # heartbeats and commits after the failover
        # Rebalances counted as the assignment-change lines after the mark: 0 expected for
        # every fault (see the SIGSTOP comment above for why that holds there too).
        moved = {m.name: [e for e in m.events()[marks[m.name]:] if e[0] in ("A", "REV", "LOST")] for m in members}
        rebalances = sum(1 for evs in moved.values() for e in evs if e[0] == "A")
        assert not any(moved.values()), (f"{rebalances} rebalance(s) across the coordinator failover, 0 "
                                         f"expected: {moved}\n" + ctx(members, log))
        check_exactly_once(members, 2400, lambda p, o, who: False, ctx(members, log))
        for m in members:
            m.request_stop()
        for m in members:
            m.bg.wait(30)
        assert wait_until(lambda: committed_offsets(live, group) == {p: 2400 // P for p in range(P)}, 20), (
            f"committed {committed_offsets(live, group)}\n" + ctx(members, log))
    finally:
        ctx(members, log)
        for m in members:
            if m.alive():
                m.kill()
