"""KIP-848 consumer groups fail over like classic ones in a cluster (issue 31): the node leading a
group's ``__consumer_offsets`` partition is SIGKILLed and the hot standby on another node takes
the group over as it was — every member keeps its epoch and its assignment (no epoch bump, no
revocation, so no reassignment storm), every committed offset is there, and ConsumerGroupDescribe
answers the same group; a reconciliation under way (members told to revoke) carries on at the new
coordinator at the same group epoch. Also: a follower's hot standby holds the same consumer-group records as
the leader (both write them out as their snapshot when stopped gracefully), and the new
coordinator fences a member that stays silent one session after the takeover.

The members here are a small raw client (ConsumerGroupHeartbeat v1 and OffsetCommit v9 through
tests/wire_client.py), so the test sees exactly the epochs and assignments the coordinators
answer. Stock clients: test_consumer_group_failover_clients.py."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from coordinator.runtime.snapshot import read_snapshot
from protocol.apis import ApiKey
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from protocol.errors import ErrorCode
from protocol.hashing import partition_for
from protocol.records import decode_records, iter_batch_positions
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster, wait_for
from tests.coordinator.cluster.fault_tools import bad_log_lines
from tests.coordinator.cluster.test_replication import _create, _leader, _state, _zk
from tests.wire_client import WireClient

pytestmark = pytest.mark.timeout(180)

OFFSETS_PARTITIONS = 3
TOPIC = "events"
PARTITIONS = 6
GROUP = "kip848-failover"
#: Answers that mean "ask again" while the coordinator moves (Kafka's retriable coordinator errors).
RETRY = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}
#: The KIP-848 record types (key versions) a Stable consumer group writes: metadata (3), member
#: metadata (5), target assignment metadata (6) and member (7), current member assignment (8).
#: Not 4, ConsumerGroupPartitionMetadata, which the KIP-1101 metadata hash replaced.
CONSUMER_GROUP_RECORD_TYPES = {3, 5, 6, 7, 8}

Assignment = dict[str, frozenset[int]]  # topic id (str) -> partitions


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    # The members' session (45 s, Kafka's default) outlasts the failover (the nodes' 4 s ZooKeeper
    # session plus the takeover): nobody is fenced while the coordinator moves.
    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}") as c:
        yield c


@dataclass
class RawMember:
    """One consumer-group member as a client keeps it: its id, epoch and assignment."""

    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    assignment: Assignment = field(default_factory=dict)
    conn: WireClient | None = None

    def heartbeat(self, full: bool = True) -> Any:
        """A full heartbeat (subscription, rebalance timeout and owned partitions, as a client sends
        after joining or after its coordinator changed) or a light one (every optional field null:
        nothing changed). The member takes any assignment answered at once (it consumes nothing)."""
        assert self.conn is not None
        TP = ConsumerGroupHeartbeatRequest[1].TopicPartitions
        owned = [TP(topic_id=uuid.UUID(t), partitions=sorted(ps)) for t, ps in sorted(self.assignment.items())]
        request = ConsumerGroupHeartbeatRequest[1](
            group_id=GROUP, member_id=self.member_id, member_epoch=self.epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000 if full else -1, subscribed_topic_names=[TOPIC] if full else None,
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=owned if full else None)
        response = self.conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)
        if response.error_code == ErrorCode.NONE:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.assignment = _assignment(response.assignment.topic_partitions)
        return response


def _assignment(topic_partitions: Any) -> Assignment:
    return {str(tp.topic_id): frozenset(tp.partitions) for tp in topic_partitions if tp.partitions}


def _find_coordinator(cluster: LocalCluster, via: int) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator for GROUP, asked of node ``via``."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    with WireClient(cluster.host, cluster.ports[via - 1]) as c:
        answer = c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
            version=4, key_type=0, coordinator_keys=[GROUP])).coordinators[0]
    return int(answer.error_code), int(answer.node_id)


def _describe(conn: WireClient) -> dict[str, Any]:
    """ConsumerGroupDescribe v1 of GROUP as plain data, members in member-id order."""
    response = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest[1](
        group_ids=[GROUP], include_authorized_operations=False))
    group = response.groups[0].to_dict()
    group["members"] = sorted(group["members"], key=lambda m: m["member_id"])
    for m in group["members"]:
        for key in ("assignment", "target_assignment"):
            m[key] = {str(tp["topic_id"]): sorted(tp["partitions"]) for tp in m[key]["topic_partitions"]
                      if tp["partitions"]}
    return dict(group)


def _coordinator(cluster: LocalCluster) -> int | None:
    """The group's coordinator as a running node answers FindCoordinator, or None (not yet)."""
    for node, proc in sorted(cluster.procs.items()):
        if proc.poll() is None:
            try:
                code, found = _find_coordinator(cluster, node)
            except OSError:
                continue
            return found if code == 0 and cluster.procs[found].poll() is None else None
    return None


def _connect(cluster: LocalCluster, members: list[RawMember]) -> int:
    """Connect every member to the group's coordinator; returns its node."""
    node = wait_for(lambda: _coordinator(cluster), SESSION_MS / 1000 + 30, "a coordinator for the group")
    for m in members:
        if m.conn is not None:
            m.conn.close()
        m.conn = WireClient(cluster.host, cluster.ports[node - 1], timeout=30)
    return int(node)


def _settle(cluster: LocalCluster, members: list[RawMember], timeout: float = 60) -> tuple[int, dict[str, Any]]:
    """Heartbeat every member until the group is Stable: every member at the assignment epoch,
    holding its target assignment, and the members' assignments covering every partition once.
    Returns the coordinator's node and the group as it described it then. (Right after the
    offsets topic is created its leadership may still move once: the members follow it.)"""
    node = _connect(cluster, members)
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        answers = [m.heartbeat() for m in members]
        if any(a.error_code in RETRY for a in answers):
            time.sleep(0.2)
            node = _connect(cluster, members)
            continue
        assert all(a.error_code == ErrorCode.NONE for a in answers), answers
        last = _describe(members[0].conn)  # type: ignore[arg-type]
        held = sorted(p for m in members for ps in m.assignment.values() for p in ps)
        if (last["error_code"] == 0 and last["group_state"] == "Stable" and held == list(range(PARTITIONS))
                and all(d["member_epoch"] == last["assignment_epoch"] == m.epoch
                        and d["assignment"] == d["target_assignment"]
                        == {t: sorted(ps) for t, ps in m.assignment.items()}
                        for m, d in zip(sorted(members, key=lambda m: m.member_id), last["members"], strict=True))):
            return node, last
        time.sleep(0.2)
    raise AssertionError(f"the group did not settle within {timeout} s: {last}; members {members}")


def _commit(m: RawMember, offsets: dict[int, int]) -> None:
    """OffsetCommit v9 as the member (its id and epoch, KIP-848), every partition acknowledged."""
    from kafka.protocol.consumer import OffsetCommitRequest

    assert m.conn is not None
    T = OffsetCommitRequest[9].OffsetCommitRequestTopic
    request = OffsetCommitRequest[9](
        group_id=GROUP, generation_id_or_member_epoch=m.epoch, member_id=m.member_id, group_instance_id=None,
        topics=[T(name=TOPIC, partitions=[T.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=f"m{o}")
            for p, o in sorted(offsets.items())])])
    response = m.conn.request(ApiKey.OFFSET_COMMIT, 9, request)
    codes = {p.partition_index: p.error_code for t in response.topics for p in t.partitions}
    assert codes == {p: 0 for p in offsets}, codes


def _fetch_committed(conn: WireClient) -> dict[int, tuple[int, str]]:
    from kafka.protocol.consumer import OffsetFetchRequest

    G = OffsetFetchRequest[9].OffsetFetchRequestGroup
    response = conn.request(ApiKey.OFFSET_FETCH, 9, OffsetFetchRequest[9](
        require_stable=True, groups=[G(group_id=GROUP, member_id=None, member_epoch=-1, topics=None)]))
    group = response.groups[0]
    assert group.error_code == 0, group
    return {p.partition_index: (p.committed_offset, p.metadata) for t in group.topics for p in t.partitions
            if t.name == TOPIC}


def _stable_group_with_commits(cluster: LocalCluster) -> tuple[list[RawMember], int, dict[str, Any],
                                                                    dict[int, tuple[int, str]]]:
    """Three members joined, Stable, each partition's offset committed by its owner. Returns the
    members (connected to the coordinator), the coordinator's node, its description of the group
    and the committed offsets (partition -> (offset, metadata))."""
    _create(cluster, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    members = [RawMember() for _ in range(3)]
    found, described = _settle(cluster, members)
    assert found == _leader(cluster, "__consumer_offsets", partition_for(GROUP, OFFSETS_PARTITIONS))
    committed: dict[int, tuple[int, str]] = {}
    for i, m in enumerate(members):
        offsets = {p: 100 * (i + 1) + p for ps in m.assignment.values() for p in ps}
        _commit(m, offsets)
        committed.update({p: (o, f"m{o}") for p, o in offsets.items()})
    assert sorted(committed) == list(range(PARTITIONS))
    return members, found, described, committed


def test_members_keep_their_epochs_and_assignments_when_the_coordinator_is_sigkilled(cluster: LocalCluster) -> None:
    members, old, before, committed = _stable_group_with_commits(cluster)
    assert _fetch_committed(members[0].conn) == committed  # type: ignore[arg-type]
    epochs = {m.member_id: m.epoch for m in members}
    assignments = {m.member_id: dict(m.assignment) for m in members}
    for m in members:
        m.conn.close()  # type: ignore[union-attr]
    killed = time.monotonic()
    cluster.procs[old].kill()
    live = [b for b in (1, 2, 3) if b != old]

    def moved() -> int | None:
        try:
            code, node = _find_coordinator(cluster, live[0])
        except OSError:
            return None
        return node if code == 0 and node != old else None

    new = wait_for(moved, SESSION_MS / 1000 + 20, "FindCoordinator naming another node")
    assert new in live
    # Each member's next heartbeat goes to the new coordinator with the epoch it had: accepted,
    # same epoch, same assignment (answered in full, as for any full heartbeat).
    answered_at = None
    for m in members:
        m.conn = WireClient(cluster.host, cluster.ports[new - 1], timeout=30)
        had = dict(m.assignment)
        deadline = time.monotonic() + 30
        while True:
            response = m.heartbeat()
            if response.error_code not in RETRY or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        answered_at = answered_at or time.monotonic()
        assert response.error_code == ErrorCode.NONE, response
        assert response.member_epoch == epochs[m.member_id], (response, epochs)
        assert response.assignment is not None and _assignment(response.assignment.topic_partitions) == had, \
            (response, had)
    served = answered_at - killed  # type: ignore[operator]
    # A light heartbeat (nothing changed) is answered with no new assignment and the same epoch:
    # nothing was revoked, nothing is pending.
    for m in members:
        response = m.heartbeat(full=False)
        assert (response.error_code, response.member_epoch, response.assignment) == (0, epochs[m.member_id], None), \
            response
        assert m.assignment == assignments[m.member_id]
    assert _fetch_committed(members[0].conn) == committed  # type: ignore[arg-type]
    after = _describe(members[0].conn)  # type: ignore[arg-type]
    assert after == before, f"described before the kill:\n{before}\nafter:\n{after}"
    print(f"consumer group served again {served:.2f} s after the coordinator's SIGKILL "
          f"(node {old} -> node {new}, ZooKeeper session {SESSION_MS} ms)")
    # The new coordinator took the group over from its hot standby (runtime rule 6).
    partition = partition_for(GROUP, OFFSETS_PARTITIONS)
    loaded = [line for line in cluster.log_path(new).read_text().splitlines()
              if "coordinator partition loaded" in line and f"partition=__consumer_offsets-{partition} " in line]
    assert loaded and "from_standby=True" in loaded[-1], loaded
    assert not bad_log_lines(cluster, live)
    for m in members:
        m.conn.close()  # type: ignore[union-attr]


def test_a_reconciliation_in_progress_carries_on_at_the_new_coordinator(cluster: LocalCluster) -> None:
    """The coordinator dies while a third member joins and the two others have been told to
    revoke partitions they have not yet given up: the new coordinator describes the group exactly
    as it was (members mid-revocation, the target assignment), and the reconciliation finishes
    there at the same group epoch (no new target assignment)."""
    _create(cluster, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    first = [RawMember(), RawMember()]
    old, _ = _settle(cluster, first)
    joining = RawMember(conn=WireClient(cluster.host, cluster.ports[old - 1], timeout=30))
    assert joining.heartbeat().error_code == 0
    conn = first[0].conn
    assert conn is not None

    def target_computed() -> bool:
        assert joining.heartbeat().error_code == 0
        d = _describe(conn)
        return bool(d["assignment_epoch"] == d["group_epoch"])

    wait_for(target_computed, 30, "the target assignment with the joining member")
    for m in first:  # told to revoke; they do not answer again before the kill
        assert m.heartbeat().error_code == 0
    before = _describe(conn)
    assert any(d["assignment"] != d["target_assignment"] for d in before["members"]), \
        f"no reconciliation in progress to carry over: {before}"
    members = [*first, joining]
    for m in members:
        m.conn.close()  # type: ignore[union-attr]
        m.conn = None
    cluster.procs[old].kill()
    cluster.procs[old].wait()
    new = _connect(cluster, members)
    assert new != old

    def described() -> dict[str, Any] | None:
        d = _describe(members[0].conn)  # type: ignore[arg-type]
        return None if d["error_code"] in RETRY else d

    after = wait_for(described, 30, "the new coordinator describing the group")
    assert after == before, f"described before the kill:\n{before}\nafter:\n{after}"
    _node, settled = _settle(cluster, members)
    assert (settled["group_epoch"], settled["assignment_epoch"]) == (before["group_epoch"], before["group_epoch"]), \
        (before, settled)
    assert {d["member_id"]: d["assignment"] for d in settled["members"]} == \
        {d["member_id"]: d["target_assignment"] for d in before["members"]}, (before, settled)
    for m in members:
        m.conn.close()  # type: ignore[union-attr]


def _snapshot_records(cluster: LocalCluster, node: int, partition: int) -> tuple[int, list[tuple[bytes, bytes]]]:
    snap = read_snapshot(cluster.directory / f"node-{node}" / f"__consumer_offsets-{partition}")
    assert snap is not None, f"node {node} wrote no snapshot of __consumer_offsets-{partition}"
    records = [(r.key, r.value) for pos, header in iter_batch_positions(snap.batches)
               for r in decode_records(snap.batches, pos, header)]
    return snap.offset, records  # type: ignore[return-value]


def test_a_followers_standby_holds_the_leaders_consumer_group_state(tmp_path: Path) -> None:
    """The followers' hot standbys replay the consumer group's records as they are replicated;
    stopped gracefully, every node writes the state it holds for the offsets partition as its
    snapshot (a leader its own, a follower its standby's): the followers' equal the leader's,
    record for record, at the same log offset. ``offsets.snapshot.min.records=1``: a stopping
    node snapshots a standby only once it replayed that many records since its last snapshot
    (docs/cluster.md, "Restarts")."""
    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "offsets.snapshot.min.records=1") as cluster:
        _compare_standbys_with_the_leader(cluster)


def _compare_standbys_with_the_leader(cluster: LocalCluster) -> None:
    members, leader, _before, _committed = _stable_group_with_commits(cluster)
    for m in members:
        m.conn.close()  # type: ignore[union-attr]
    partition = partition_for(GROUP, OFFSETS_PARTITIONS)
    followers = [b for b in (1, 2, 3) if b != leader]
    zk = _zk(cluster)
    try:
        assert sorted(_state(zk, "__consumer_offsets", partition)["isr"]) == [1, 2, 3]
    finally:
        zk.stop()
        zk.close()
    # Let the followers learn the high watermark past the last commit (a standby replays committed
    # records only): a fetch round or two (replica.fetch.wait.max.ms is 500).
    time.sleep(2)
    for node in (*followers, leader):  # the leader last, so it never hands the partition over
        proc = cluster.procs[node]
        proc.terminate()
        assert proc.wait(60) == 0, f"node {node} exited with {proc.returncode}"
    leader_offset, leader_records = _snapshot_records(cluster, leader, partition)
    kinds = {int.from_bytes(key[:2], "big") for key, _ in leader_records}
    assert CONSUMER_GROUP_RECORD_TYPES <= kinds, kinds
    for node in followers:
        offset, records = _snapshot_records(cluster, node, partition)
        assert offset == leader_offset, (node, offset, leader_offset)
        assert sorted(records) == sorted(leader_records), \
            f"node {node}'s standby differs from the leader's state: " \
            f"only the standby's {set(records) - set(leader_records)}, only the leader's " \
            f"{set(leader_records) - set(records)}"


def test_the_new_coordinator_fences_a_silent_member_one_session_after_the_takeover(tmp_path: Path) -> None:
    """Session timers come back with the group: a member that never heartbeats the new
    coordinator is fenced one session (6 s here) after the takeover — not at once, as a session
    counted from its last heartbeat to the dead node would be, and not never — and its
    partitions go to the members that kept heartbeating, at a new epoch."""
    from tests.clients.group_consumer_protocol import CONSUMER_PROTOCOL_SERVER
    from tests.clients.group_consumer_protocol import SESSION_MS as MEMBER_SESSION_MS

    settings = [f"{k}={v}" for k, v in CONSUMER_PROTOCOL_SERVER.items()]
    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         *settings) as cluster:
        members, old, _before, _committed = _stable_group_with_commits(cluster)
        silent, *alive = members
        epochs = {m.member_id: m.epoch for m in members}
        for m in members:
            m.conn.close()  # type: ignore[union-attr]
            m.conn = None
        cluster.procs[old].kill()
        live = [b for b in (1, 2, 3) if b != old]

        def moved() -> int | None:
            try:
                code, node = _find_coordinator(cluster, live[0])
            except OSError:
                return None
            return node if code == 0 and node != old else None

        new = wait_for(moved, SESSION_MS / 1000 + 20, "FindCoordinator naming another node")
        for m in alive:
            m.conn = WireClient(cluster.host, cluster.ports[new - 1], timeout=30)
        taken_over = None
        fenced = None
        deadline = time.monotonic() + SESSION_MS / 1000 + MEMBER_SESSION_MS / 1000 + 20
        while time.monotonic() < deadline:
            answers = [m.heartbeat() for m in alive]
            if any(a.error_code in RETRY for a in answers):
                time.sleep(0.05)
                continue
            assert all(a.error_code == 0 for a in answers), answers
            taken_over = taken_over or time.monotonic()
            described = _describe(alive[0].conn)  # type: ignore[arg-type]
            ids = [d["member_id"] for d in described["members"]]
            if fenced is None and silent.member_id not in ids:
                fenced = time.monotonic()
            held = sorted(p for m in alive for ps in m.assignment.values() for p in ps)
            if fenced is not None and held == list(range(PARTITIONS)) and described["group_state"] == "Stable":
                break
            time.sleep(0.3)
        assert taken_over is not None, "the new coordinator never answered the members"
        assert fenced is not None, f"the silent member was never fenced: {_describe(alive[0].conn)}"  # type: ignore[arg-type]
        after = fenced - taken_over
        print(f"silent member fenced {after:.2f} s after the new coordinator first answered (session "
              f"{MEMBER_SESSION_MS} ms)")
        # Heartbeats answered every 0.3 s or so: the fencing is seen within that of the expiry.
        assert MEMBER_SESSION_MS / 1000 - 1.5 <= after <= MEMBER_SESSION_MS / 1000 + 3, after
        assert held == list(range(PARTITIONS)), [m.assignment for m in alive]
        assert all(m.epoch > epochs[m.member_id] for m in alive), (epochs, [m.epoch for m in alive])
        for m in alive:
            m.conn.close()  # type: ignore[union-attr]
