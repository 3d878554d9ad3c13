"""The cluster wing's pure choices that decide how fast a takeover is: ``plan_partition``, the
controller's choice of a partition's next state — here the warm-replica preference
(cluster/warming.py): among the ISR members the rules allow, one whose state is still warming
comes last, and the preferred replica waits until it is warm — and ``next_to_apply``, the order
in which a node applies the partition states it sees."""

from __future__ import annotations

from coordinator.cluster.plan import bounced_replicas, plan_partition
from coordinator.cluster.znodes import PartitionState, decode_warming_replica, warming_replica_name

REPLICAS = (1, 2, 3)
LIVE = frozenset(REPLICAS)


def _state(leader: int, isr: tuple[int, ...] = REPLICAS) -> PartitionState:
    return PartitionState(leader, 7, isr, 1)


def _plan(state: PartitionState, live: frozenset[int] = LIVE, **kw: object) -> PartitionState | None:
    return plan_partition(REPLICAS, state, live, unclean=False, preferred=False, controller_epoch=2, **kw)  # type: ignore[arg-type]


def test_a_controlled_shutdown_hands_leadership_to_a_warm_replica() -> None:
    assert _plan(_state(1), shutting_down=frozenset({1})).leader == 2  # type: ignore[union-attr]
    moved = _plan(_state(1), shutting_down=frozenset({1}), warming=frozenset({2}))
    assert moved is not None and moved.leader == 3 and moved.leader_epoch == 8 and moved.isr == (2, 3)
    # Every other candidate warming: the usual order (never waiting for warmth).
    assert _plan(_state(1), shutting_down=frozenset({1}), warming=frozenset({2, 3})).leader == 2  # type: ignore[union-attr]


def test_a_dead_leader_is_replaced_by_a_warm_isr_member() -> None:
    live = frozenset({2, 3})
    assert _plan(_state(1), live).leader == 2  # type: ignore[union-attr]
    assert _plan(_state(1), live, warming=frozenset({2})).leader == 3  # type: ignore[union-attr]
    # Warm but out of the ISR is no candidate: the warming ISR member leads.
    assert _plan(_state(1, (1, 2)), live, warming=frozenset({2})).leader == 2  # type: ignore[union-attr]
    # A shutting-down node still comes after a warming one.
    assert _plan(_state(1), live, warming=frozenset({2}), shutting_down=frozenset({3})).leader == 2  # type: ignore[union-attr]


def test_the_preferred_replica_takes_leadership_back_only_when_warm() -> None:
    def preferred(warming: frozenset[int]) -> PartitionState | None:
        return plan_partition(REPLICAS, _state(2), LIVE, unclean=False, preferred=True, controller_epoch=2,
                              warming=warming)

    assert preferred(frozenset()).leader == 1  # type: ignore[union-attr]
    assert preferred(frozenset({1})) is None  # stays with the warm leader for now
    assert preferred(frozenset({3})).leader == 1  # type: ignore[union-attr]


def test_a_bounced_broker_is_failed_then_started_again() -> None:
    """KIP-380: a broker registered again (a newer broker epoch, its czxid) after the state was
    written (its mzxid) is handled as failed first, then as usual once a newer state is written."""
    led = PartitionState(3, 7, REPLICAS, 1, zk_version=4, mzxid=100)
    # Broker 3's epoch is newer than the state: it bounced. Brokers 1 and 2 did not.
    epochs = {1: 10, 2: 20, 3: 150}
    assert bounced_replicas(led, epochs) == {3}
    assert bounced_replicas(led, {**epochs, 3: 90}) == frozenset()
    assert bounced_replicas(PartitionState(3, 7, REPLICAS, 1), epochs) == frozenset()  # not read from ZooKeeper
    # Seen bounced by the controller: counted even in a state written after its new registration.
    assert bounced_replicas(led, {**epochs, 3: 90}, frozenset({3, 4})) == {3}
    assert bounced_replicas(PartitionState(1, 7, (1, 2), 1, mzxid=100), epochs, frozenset({3})) == frozenset()
    # Its leadership moves, with a new leader epoch, and it leaves the ISR.
    failed = _plan(led, bounced=frozenset({3}))
    assert failed is not None and failed.leader == 1 and failed.leader_epoch == 8 and failed.isr == (1, 2)
    # A bounced follower leaves the ISR, the leader stays.
    followed = _plan(PartitionState(1, 7, REPLICAS, 1, mzxid=100), bounced=frozenset({3}))
    assert followed is not None and followed.leader == 1 and followed.leader_epoch == 8 and followed.isr == (1, 2)
    # The last ISR member, leaderless since it went: nothing to fail, so it is elected as it starts.
    alone = PartitionState(-1, 7, (3,), 1, mzxid=100)
    assert bounced_replicas(alone, epochs) == {3}
    started = _plan(alone, bounced=frozenset({3}))
    assert started is not None and started.leader == 3 and started.leader_epoch == 8
    # The only ISR member leading: no leader while it is failed, elected again on the next pass.
    only = _plan(PartitionState(3, 7, (3,), 1, mzxid=100), bounced=frozenset({3}))
    assert only is not None and only.leader == -1 and only.isr == (3,)


def test_warming_replica_names_round_trip_and_foreign_names_are_ignored() -> None:
    for broker, topic, partition in ((1, "__consumer_offsets", 49), (12, "a.b-c_d", 0), (3, "x", 1234)):
        assert decode_warming_replica(warming_replica_name(broker, topic, partition)) == (broker, topic, partition)
    for name in ("", "1", "1:t", "x:t:1", "1:t:y", "1::3", ":t:3", "1:t:-1"):
        assert decode_warming_replica(name) is None


def test_a_node_applies_its_leaderships_then_partitions_it_already_hosts_then_new_ones() -> None:
    """A node restarted a moment ago has every partition to open; a new leader of a partition it
    already follows in the ISR (whose commits wait for this node's fetches) comes before them."""
    from coordinator.cluster.replica_manager import next_to_apply

    dirty = {("fill", 7), ("__consumer_offsets", 9), ("__consumer_offsets", 1), ("fill", 2)}
    hosted = {("__consumer_offsets", 9), ("fill", 7)}
    order = []
    while dirty:
        key = next_to_apply(dirty, lambda k: k == ("fill", 2), lambda k: k in hosted)
        dirty.discard(key)
        order.append(key)
    assert order == [("fill", 2), ("__consumer_offsets", 9), ("fill", 7), ("__consumer_offsets", 1)]
