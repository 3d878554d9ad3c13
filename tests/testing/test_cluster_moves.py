"""Which replica the ``move-coordinator`` fault hands a coordinator partition to on a cluster
(coordinator/cluster/coordinator_moves.py): pure, no cluster."""

from __future__ import annotations

from coordinator.cluster.coordinator_moves import move_target


def test_the_first_other_live_in_sync_replica_in_assignment_order() -> None:
    assert move_target((2, 3, 1), isr=(1, 2, 3), leader=2, live=frozenset({1, 2, 3})) == 3
    assert move_target((1, 2, 3), isr=(1, 2, 3), leader=3, live=frozenset({1, 2, 3})) == 1


def test_replicas_out_of_sync_or_down_are_passed_over() -> None:
    assert move_target((1, 2, 3), isr=(1, 3), leader=1, live=frozenset({1, 2, 3})) == 3
    assert move_target((1, 2, 3), isr=(1, 2, 3), leader=1, live=frozenset({1, 3})) == 3


def test_warm_replicas_before_warming_ones_but_a_warming_one_rather_than_none() -> None:
    live = frozenset({1, 2, 3})
    assert move_target((1, 2, 3), isr=(1, 2, 3), leader=1, live=live, warming=frozenset({2})) == 3
    assert move_target((1, 2, 3), isr=(1, 2, 3), leader=1, live=live, warming=frozenset({2, 3})) == 2


def test_none_when_the_leader_is_the_last_in_sync_replica() -> None:
    assert move_target((1, 2, 3), isr=(1,), leader=1, live=frozenset({1, 2, 3})) is None
    assert move_target((1,), isr=(1,), leader=1, live=frozenset({1})) is None
