"""A randomized schedule of coordinator faults against consumer groups committing, with a
Jepsen-style checker (issue 14, item 5).

A real cluster (ZooKeeper and three node processes; ``__consumer_offsets`` with 3 partitions,
replication factor 3, min.insync.replicas 2 as cluster mode sets it) holds a topic of 4
partitions (RF 3, min ISR 2) that one idempotent acks=all producer fills all along. Consumer
groups of two kafka-python members each (threads, range assignor, manual commits) consume it and
commit, after every poll, the offset after the last record they processed of each partition:

* three *long-session* groups (``session.timeout.ms`` 20 s, far above the failover time: the 4 s
  ZooKeeper session plus election and takeover, about 5 s), one per ``__consumer_offsets``
  partition, so every node coordinates one of them;
* one *short-session* group (6 s, the broker's minimum, about the failover time): it may
  rebalance when its coordinator fails, which exercises the "new owner starts from the committed
  offset" path; its rebalances are reported, not asserted.

Meanwhile faults chosen by ``random.Random(seed)`` hit the node coordinating a randomly chosen
group (the leader of its ``__consumer_offsets`` partition), one at a time, each after the cluster
is healthy again (three brokers registered, every ISR full):

* ``kill``: SIGKILL, wait until ZooKeeper shows a new leader of the partition, restart 0.5-2 s later;
* ``stop``: SIGSTOP past the ZooKeeper session: stopped until ZooKeeper shows a new leader, then
  0.5-1.5 s more, then SIGCONT. A *zombie probe* (``ZombieProbe``: a probe group on the same
  offsets partition, wire client) commits through the node before the stop, sends it more commits
  and an OffsetFetch while it is stopped, and commits through the new coordinator meanwhile: the
  resumed node must answer no commit NONE and no committed offset older than the new
  coordinator's. It must come back as a follower (registered, in the ISR, not the leader);
* ``term``: SIGTERM (controlled shutdown), exit status 0, restart;
* ``zookeeper``: ZooKeeper stopped for 1-3 s and started again (same port and data);
* ``reassign``: the group's ``__consumer_offsets`` partition moved off its coordinator's node and
  back, as an operator would with kafka-reassign-partitions (AlterPartitionReassignments to the
  controller, ListPartitionReassignments until done): first to the other two replicas in a seeded
  order (the first of them that is in the ISR takes the leadership over; the node that lost the
  replica must delete its log), then back to three replicas with the old coordinator last (it
  replays the partition from scratch as a follower; the leadership stays where it moved). Each
  move must finish within 60 s, the first with the leadership off the old node.

The first five faults are the five kinds in a seeded order, each run even if the duration is
over by then, so the short CI run has each. An observer thread reads every group's committed offsets (FindCoordinator + OffsetFetch, wire
client) a few times a second all along. The checker (group_checker.py; the workload is in
group_workload.py), once the faults are over and every group
committed up to the log end:

(a) acknowledged commits: (a1) each group's final committed offset per partition is at least the
    highest offset whose commit was acknowledged; (a2) committed offsets never go backwards across
    the observer's reads; (a3) no read made after a commit's acknowledgement shows less than it (an
    acknowledged commit lost, even if a later commit covered it up); (a4) a node stopped past its
    session answers no zombie probe commit NONE, no probe OffsetFetch with a stale offset, and comes
    back as a follower; (a5) every reassignment finished, moved the leadership off the old
    coordinator, and the node that lost the replica deleted its log;
(b) duplicates: (b1) a group processes a record twice only at or above the highest commit that
    was acknowledged before the re-reading member got the partition; (b2) within one assignment a
    member's offsets of a partition strictly increase (no rewind without a rebalance);
(c) nothing skipped: every record of the final log processed by every group, with its value;
(d) rebalances (``on_partitions_assigned`` / ``on_partitions_lost`` calls after the groups were
    stable): a long-session group's rebalance whose possible causes (the faults started in the
    session + 15 s before it) are only SIGKILLs, SIGTERMs and reassignments (graceful: 0 rebalances
    expected), or none, fails the test; after a stop
    (a member's request stuck on the stopped node may outlast its session at the new coordinator)
    or a ZooKeeper restart, for the short-session group, and when the expired member's own client
    had no successful heartbeat since before those faults (a kafka-python hang, sampled from the
    client's heartbeat state), they are counted and reported;
(e) no node exited on its own, SIGTERM exits with 0, no ``level=ERROR`` / traceback in a node's log,
    no member thread crashed.

Seed and duration as in ``test_fault_schedule.py``: the default seed is fixed (CI replays the same
choices; the timings are the machine's). By hand::

    GROUPCOORD_FAULT_SEED=7 GROUPCOORD_FAULT_SECONDS=600 .venv/bin/python -m pytest -s tests/coordinator/cluster/test_group_fault_schedule.py

The coordinator-kill count ("50 randomized coordinator kills", acknowledged commits lost: goal 0):
``GROUPCOORD_FAULT_KILLS=50`` replaces the schedule by that many SIGKILLs of the coordinator of a
randomly chosen group, whatever the duration, and prints a ``RESULT`` line.

``GROUPCOORD_MEMBER_LOG=1`` writes the members' kafka-python coordinator log (joins, heartbeats
and their answers, coordinator lookups; DEBUG) to ``members.log`` in the cluster directory.

Other mixes by hand: ``GROUPCOORD_FAULT_KINDS`` (comma-separated, default all five) restricts the
kinds drawn, and ``GROUPCOORD_FAULT_COUNT`` runs that many faults instead of a duration, e.g.
twenty reassignments, or a reassignment-and-kill mix for ten minutes::

    GROUPCOORD_FAULT_KINDS=reassign GROUPCOORD_FAULT_COUNT=20 .venv/bin/python -m pytest -s tests/coordinator/cluster/test_group_fault_schedule.py
    GROUPCOORD_FAULT_KINDS=reassign,kill GROUPCOORD_FAULT_SECONDS=600 .venv/bin/python -m pytest -s tests/coordinator/cluster/test_group_fault_schedule.py
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.hashing import partition_for
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster
from tests.coordinator.cluster.fault_tools import (
    FaultLog,
    move_partition,
    poll,
)
from tests.coordinator.cluster.group_checker import ScheduleRun, check
from tests.coordinator.cluster.group_workload import (
    GROUPS,
    KINDS,
    LONG_GROUPS,
    LONG_SESSION_MS,
    MEMBERS_PER_GROUP,
    MOVE_TIMEOUT_S,
    NODES,
    OFFSETS_PARTITIONS,
    OFFSETS_TOPIC,
    PARTITIONS,
    PROBE_GROUPS,
    SHORT_GROUPS,
    SHORT_SESSION_MS,
    TOPIC,
    Fault,
    History,
    Member,
    Observer,
    OffsetReader,
    Producer,
    Zk,
    ZombieProbe,
    is_stopped,
    log_members,
    now_s,
    read_log,
)
from tests.coordinator.cluster.test_replication import _create

SECONDS = float(os.environ.get("GROUPCOORD_FAULT_SECONDS", "40"))
SEED = int(os.environ.get("GROUPCOORD_FAULT_SEED") or 14)
KILLS = int(os.environ.get("GROUPCOORD_FAULT_KILLS") or 0)
#: The kinds drawn (GROUPCOORD_FAULT_KINDS; GROUPCOORD_FAULT_KILLS: SIGKILLs only).
CHOSEN = ("kill",) if KILLS else tuple(k.strip() for k in os.environ.get("GROUPCOORD_FAULT_KINDS", ",".join(KINDS))
                                       .split(",") if k.strip())
#: A number of faults instead of a duration (GROUPCOORD_FAULT_COUNT, or GROUPCOORD_FAULT_KILLS).
COUNT = KILLS or int(os.environ.get("GROUPCOORD_FAULT_COUNT") or 0)

pytestmark = pytest.mark.timeout(int(COUNT * 45 + 300 if COUNT else SECONDS + 200))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "group.initial.rebalance.delay.ms=0", "replica.lag.time.max.ms=10000") as c:
        yield c




def test_random_coordinator_faults_lose_no_acknowledged_commit(cluster: LocalCluster) -> None:
    unknown = sorted(set(CHOSEN) - set(KINDS))
    if unknown or not CHOSEN:
        pytest.fail(f"GROUPCOORD_FAULT_KINDS: {unknown or 'none'} not among {KINDS}", pytrace=False)
    if KILLS:
        replay = f"GROUPCOORD_FAULT_KILLS={KILLS}"
    else:
        replay = (f"GROUPCOORD_FAULT_KINDS={','.join(CHOSEN)} " if CHOSEN != KINDS else "") + \
            (f"GROUPCOORD_FAULT_COUNT={COUNT}" if COUNT else f"GROUPCOORD_FAULT_SECONDS={SECONDS:g}")
    log = FaultLog(SEED, replay)
    rng = random.Random(SEED)
    if os.environ.get("GROUPCOORD_MEMBER_LOG"):
        log_members(Path(cluster.directory) / "members.log")
    print(f"\ngroup fault schedule seed={SEED} {replay} (GROUPCOORD_FAULT_SEED, GROUPCOORD_FAULT_SECONDS, "
          f"GROUPCOORD_FAULT_KILLS, GROUPCOORD_FAULT_KINDS, GROUPCOORD_FAULT_COUNT); kinds {CHOSEN}; "
          f"groups long={LONG_GROUPS} short={SHORT_GROUPS} probes={PROBE_GROUPS}")
    _create(cluster, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    zk = Zk(cluster)
    history = History()
    stop_load, stop_members, stop_observer = threading.Event(), threading.Event(), threading.Event()
    producer = Producer(cluster, stop_load, log)
    members = [Member(cluster, g, f"{g}/m{i}", LONG_SESSION_MS if g in LONG_GROUPS else SHORT_SESSION_MS,
                      history, stop_members, log) for g in GROUPS for i in range(MEMBERS_PER_GROUP)]
    observer = Observer(cluster, history, stop_observer)
    faults: list[Fault] = []
    probes: list[tuple[Fault, ZombieProbe, bool]] = []  # (fault, probe, leader changed before SIGCONT)
    unexpected_exits: list[str] = []
    not_follower: list[str] = []
    bad_moves: list[str] = []  # (a5)
    probe_value = 0
    baseline = 0
    try:
        # The offsets topic exists (created once three nodes are up) and every group has a coordinator.
        reader = OffsetReader(cluster)
        try:
            assert poll(lambda: len(reader.coordinators(GROUPS + list(PROBE_GROUPS.values()))) == len(GROUPS) + 3, 60), \
                f"no coordinator for every group within 60 s\n{log.text()}"
        finally:
            reader.close()
        assert poll(zk.healthy, 60), f"ISRs never full after creation\n{log.text()}"
        leaders = {p: zk.leader(OFFSETS_TOPIC, p) for p in range(OFFSETS_PARTITIONS)}
        log(f"cluster up; {OFFSETS_TOPIC} leaders {leaders}")
        producer.start()
        observer.start()
        for m in members:
            m.start()

        def sample_heartbeats() -> None:
            while not stop_members.wait(0.1):
                for m in members:
                    m.sample_heartbeat()

        threading.Thread(target=sample_heartbeats, name="heartbeat-sampler", daemon=True).start()

        # Stable: every member assigned, every group committing, no assignment for 3 s.
        def stable() -> bool:
            with history.lock:
                last = max((a[0] for a in history.assignments), default=now_s())
                assigned = {a[2] for a in history.assignments if a[3].startswith("assigned")}
            committing = all(any(history.highest_acked(g, p) > 0 for p in range(PARTITIONS)) for g in GROUPS)
            return len(assigned) == len(members) and committing and now_s() - last > 3

        assert poll(stable, 90), \
            f"groups not stable within 90 s: {history.assignments}\n{log.text()}"
        with history.lock:
            baseline = len(history.assignments)
        log(f"groups stable: {baseline} assignments; producer acked {producer.acked}; commits acked {history.ack_count()}")

        expected_down: int | None = None

        def check_exits() -> None:
            for b, code in cluster.exited():
                if b != expected_down:
                    note = f"node {b} EXITED on its own with {code}"
                    if note not in unexpected_exits:
                        unexpected_exits.append(note)
                        log(note)

        # Each chosen kind once first, in a seeded order (all of them even past the duration).
        first_kinds = ["kill"] * KILLS if KILLS else rng.sample(CHOSEN, len(CHOSEN))
        end = now_s() + SECONDS
        while (len(faults) < COUNT) if COUNT else (first_kinds or now_s() < end):
            check_exits()
            assert not unexpected_exits, f"{unexpected_exits}\n{log.text()}"
            if not poll(lambda: zk.live_brokers() == set(NODES), 60):
                check_exits()
                raise AssertionError(f"brokers registered: {sorted(zk.live_brokers())}, not all three within 60 s; "
                                     f"{unexpected_exits}\n{log.text()}")
            healthy = poll(zk.healthy, 30)
            if not healthy:
                log("ISRs not full after 30 s; faulting anyway (this fault's rebalances are not asserted)")
            time.sleep(rng.uniform(1.0, 3.0))
            if not COUNT and not first_kinds and now_s() >= end:
                break
            kind = first_kinds.pop(0) if first_kinds else rng.choice(CHOSEN)
            group = rng.choice(GROUPS)
            partition = partition_for(group, OFFSETS_PARTITIONS)
            node = zk.leader(OFFSETS_TOPIC, partition)
            if kind != "zookeeper" and node not in NODES:
                log(f"no leader of {OFFSETS_TOPIC}-{partition} in ZooKeeper ({node}); fault skipped")
                continue
            before = zk.state(OFFSETS_TOPIC, partition) or {}
            fault = Fault(kind, None if kind == "zookeeper" else node, group, now_s(), not healthy)
            faults.append(fault)
            acked = history.ack_count()
            n = len(faults)
            if kind == "kill":
                assert node is not None
                log(f"#{n} SIGKILL node {node}, coordinator of {group} ({OFFSETS_TOPIC}-{partition}); commits acked {acked}")
                expected_down = node
                cluster.procs[node].kill()
                cluster.procs[node].wait()
                moved = poll(lambda node=node, partition=partition: zk.leader(OFFSETS_TOPIC, partition) not in (node, None),
                             SESSION_MS / 1000 + 20)
                log(f"#{n} {OFFSETS_TOPIC}-{partition} leader now {zk.leader(OFFSETS_TOPIC, partition)}"
                    + ("" if moved else " (NOT moved within the session + 20 s)"))
                time.sleep(rng.uniform(0.5, 2.0))
                cluster.restart(node)
                expected_down = None
                log(f"#{n} node {node} restarted")
            elif kind == "stop":
                assert node is not None
                probe_value += 1000
                probe = ZombieProbe(cluster, node, PROBE_GROUPS[partition], history, log, probe_value)
                probing = probe.commit_before()
                log(f"#{n} SIGSTOP node {node}, coordinator of {group} ({OFFSETS_TOPIC}-{partition}, leader epoch "
                    f"{before.get('leader_epoch')}); commits acked {acked}; probe {'armed' if probing else 'NOT armed'}")
                proc = cluster.procs[node]
                proc.send_signal(signal.SIGSTOP)
                poll(lambda proc=proc: is_stopped(proc.pid), 5, 0.01)
                if probing:
                    probe.send_while_stopped(after_new_leader=False)
                moved = poll(lambda node=node, partition=partition: zk.leader(OFFSETS_TOPIC, partition) not in (node, None),
                             SESSION_MS / 1000 + 20)
                new_leader = zk.leader(OFFSETS_TOPIC, partition)
                log(f"#{n} {OFFSETS_TOPIC}-{partition} leader now {new_leader}"
                    + ("" if moved else " (NOT moved within the session + 20 s)"))
                pause = rng.uniform(0.5, 1.5)
                if moved and probing:
                    assert new_leader is not None
                    resumed_at = now_s() + pause
                    probe.commit_through_new_leader(new_leader)
                    probe.send_while_stopped(after_new_leader=True)
                    pause = max(0.0, resumed_at - now_s())
                time.sleep(pause)
                proc.send_signal(signal.SIGCONT)
                fault.resumed = now_s()
                log(f"#{n} SIGCONT node {node}")
                if probing:
                    probe.collect()
                    log(f"#{n} probe answers from node {node}: {probe.answers}")
                    probes.append((fault, probe, moved))
                else:
                    probe.close()

                def follows(node: int = node, partition: int = partition) -> bool:
                    s = zk.state(OFFSETS_TOPIC, partition)
                    return (node in zk.live_brokers() and s is not None and node in s["isr"]
                            and s["leader"] != node)

                if moved and not poll(follows, 40):
                    note = (f"#{n}: node {node} not back as a follower of {OFFSETS_TOPIC}-{partition} 40 s after "
                            f"SIGCONT: {zk.state(OFFSETS_TOPIC, partition)}, registered {sorted(zk.live_brokers())}")
                    not_follower.append(note)
                    log(note)
                elif moved:
                    log(f"#{n} node {node} follows again: {zk.state(OFFSETS_TOPIC, partition)}")
            elif kind == "term":
                assert node is not None
                log(f"#{n} SIGTERM node {node}, coordinator of {group} ({OFFSETS_TOPIC}-{partition}); commits acked {acked}")
                expected_down = node
                started = now_s()
                cluster.procs[node].terminate()
                try:
                    code = cluster.procs[node].wait(60)
                except subprocess.TimeoutExpired:
                    tail = "\n".join(cluster.log_path(node).read_text(errors="replace").splitlines()[-8:])
                    raise AssertionError(f"node {node} did not exit within 60 s of SIGTERM; its log ends:\n"
                                         f"{tail}\n{log.text()}") from None
                log(f"#{n} node {node} exited with {code} after {now_s() - started:.1f}s; "
                    f"{OFFSETS_TOPIC}-{partition} leader {zk.leader(OFFSETS_TOPIC, partition)}; restart")
                if code != 0:
                    unexpected_exits.append(f"node {node} exited with {code} after SIGTERM")
                cluster.restart(node)
                expected_down = None
                log(f"#{n} node {node} restarted")
            elif kind == "reassign":
                assert node is not None
                replicas = zk.replicas(OFFSETS_TOPIC, partition) or []
                away = [b for b in replicas if b != node]
                rng.shuffle(away)
                log(f"#{n} reassign {OFFSETS_TOPIC}-{partition} (coordinator of {group}) from {replicas} to {away}, "
                    f"off its leader {node}; commits acked {acked}")
                started = now_s()
                problem = move_partition(cluster, zk, OFFSETS_TOPIC, partition, away, MOVE_TIMEOUT_S)
                new_leader = zk.leader(OFFSETS_TOPIC, partition)
                log(f"#{n} " + (problem or f"moved after {now_s() - started:.1f}s: {zk.state(OFFSETS_TOPIC, partition)}"))
                if problem is not None:
                    raise AssertionError(f"(a5) #{n}: {problem}\n{log.text()}")
                if new_leader not in away:
                    bad_moves.append(f"#{n}: {OFFSETS_TOPIC}-{partition} moved to {away} but led by {new_leader}")
                stray = cluster.directory / f"node-{node}" / f"{OFFSETS_TOPIC}-{partition}"
                if not poll(lambda stray=stray: not stray.exists(), 20):
                    bad_moves.append(f"#{n}: node {node} kept its replica {stray} 20 s after it was moved off it")
                back = away + [node]
                started = now_s()
                problem = move_partition(cluster, zk, OFFSETS_TOPIC, partition, back, MOVE_TIMEOUT_S)
                log(f"#{n} back to {back}: " + (problem or f"done after {now_s() - started:.1f}s: "
                                                           f"{zk.state(OFFSETS_TOPIC, partition)}"))
                if problem is not None:
                    raise AssertionError(f"(a5) #{n}: {problem}\n{log.text()}")
            else:
                pause = rng.uniform(1.0, 3.0)
                port, data = cluster.zookeeper.port, cluster.zookeeper.data_dir
                log(f"#{n} stop ZooKeeper for {pause:.1f}s; commits acked {acked}")
                cluster.zookeeper.stop()
                time.sleep(pause)
                cluster.zookeeper.start()
                assert (cluster.zookeeper.port, cluster.zookeeper.data_dir) == (port, data)
                log(f"#{n} ZooKeeper started again")
            fault.end = now_s()

        log(f"faults over: {[f.kind for f in faults]}; commits acked {history.ack_count()}")
        check_exits()
        assert not unexpected_exits, f"{unexpected_exits}\n{log.text()}"
        assert poll(zk.healthy, 60), f"cluster not healthy 60 s after the last fault\n{log.text()}"
        # Load stops; every group must commit up to the log end (liveness after the faults).
        stop_load.set()
        producer.join(120)
        assert not producer.is_alive(), f"producer did not stop\n{log.text()}"
        final_log = read_log(cluster)
        ends = {p: len(final_log[p]) for p in range(PARTITIONS)}
        log(f"load stopped: end offsets {ends}")

        def caught_up() -> bool:
            return all(history.highest_acked(g, p) >= ends[p] for g in GROUPS for p in range(PARTITIONS))

        if not poll(caught_up, 90):
            behind = {g: {p: history.highest_acked(g, p) for p in range(PARTITIONS)} for g in GROUPS}
            raise AssertionError(f"groups did not commit up to the log end {ends} within 90 s: {behind}; "
                                 f"member crashes {[m.crash for m in members if m.crash]}\n{log.text()}")
        log(f"every group committed up to the end; commits acked {history.ack_count()}")
        with history.lock:
            rebalances = list(history.assignments[baseline:])
    finally:
        stop_load.set()
        stop_members.set()
        for m in members:
            m.join(30)
        stop_observer.set()
        observer.join(30)
        zk.close()

    # The final committed offsets, from the coordinators, with every member gone.
    reader = OffsetReader(cluster, timeout=10.0)
    final: dict[str, dict[int, int]] = {}
    try:
        every = GROUPS + list(PROBE_GROUPS.values())
        poll(lambda: final.update({g: v[2] for g, v in reader.fetch(every).items()}) or len(final) == len(every), 60, 0.5)
    finally:
        reader.close()

    check(ScheduleRun(SEED, cluster, log, history, producer, observer, members, faults, probes, not_follower,
                      bad_moves, rebalances, ends, final_log, final))
