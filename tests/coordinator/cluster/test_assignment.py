"""Replica placement (coordinator/cluster/assignment.py): Kafka's documented example and properties."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.cluster.assignment import AssignmentError, Broker, assign_replicas, rack_alternated


def test_kafkas_documented_example_five_brokers_ten_partitions_three_replicas() -> None:
    # The table in the comment of Kafka's AdminUtils.assignReplicasToBrokers (start index 0,
    # initial shift 0): columns are brokers, rows the 1st/2nd/3rd replicas they hold.
    table = {
        0: ["p0 p5", "p4 p8", "p3 p7"],
        1: ["p1 p6", "p0 p9", "p4 p8"],
        2: ["p2 p7", "p1 p5", "p0 p9"],
        3: ["p3 p8", "p2 p6", "p1 p5"],
        4: ["p4 p9", "p3 p7", "p2 p6"],
    }
    got = assign_replicas([Broker(i) for i in range(5)], 10, 3, start=0, shift=0)
    for broker, rows in table.items():
        for position, row in enumerate(rows):
            for p in row.split():
                assert got[int(p[1:])][position] == broker, (p, position, broker, got)


def test_rack_alternated_order() -> None:
    brokers = [Broker(0, "r1"), Broker(1, "r1"), Broker(2, "r2"), Broker(3, "r2"), Broker(4, "r3"), Broker(5, "r1")]
    assert rack_alternated(brokers) == [0, 2, 4, 1, 3, 5]


@given(n=st.integers(1, 9), partitions=st.integers(1, 40), data=st.data())
def test_every_partition_gets_distinct_live_brokers_and_leaders_rotate(n: int, partitions: int, data) -> None:  # type: ignore[no-untyped-def]
    rf = data.draw(st.integers(1, n))
    start, shift = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    ids = data.draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    got = assign_replicas([Broker(i) for i in ids], partitions, rf, start=start, shift=shift)
    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    # Leaders round-robin: every n consecutive partitions have n different leaders.
    leaders = [got[p][0] for p in range(partitions)]
    for i in range(0, partitions - n + 1):
        assert len(set(leaders[i:i + n])) == n
    if partitions % n == 0:  # whole rounds: every broker holds the same number of replicas
        assert len(set(Counter(b for r in got.values() for b in r).values())) == 1


@given(racks=st.integers(1, 4), per_rack=st.integers(1, 3), partitions=st.integers(1, 30), data=st.data())
def test_rack_aware_spreads_every_partition_over_as_many_racks_as_it_can(racks, per_rack, partitions, data) -> None:  # type: ignore[no-untyped-def]
    brokers = [Broker(r * 10 + i, f"rack-{r}") for r in range(racks) for i in range(per_rack)]
    rf = data.draw(st.integers(1, len(brokers)))
    got = assign_replicas(brokers, partitions, rf, start=data.draw(st.integers(0, len(brokers) - 1)),
                          shift=data.draw(st.integers(0, len(brokers) - 1)))
    rack_of = {b.broker_id: b.rack for b in brokers}
    for replicas in got.values():
        assert len(set(replicas)) == rf
        assert len({rack_of[b] for b in replicas}) == min(rf, racks)


def test_continues_a_topic_for_create_partitions() -> None:
    brokers = [Broker(i) for i in range(3)]
    whole = assign_replicas(brokers, 6, 2, start=1, shift=2)
    tail = assign_replicas(brokers, 3, 2, first_partition=3, start=1, shift=2)
    assert tail == {p: whole[p] for p in (3, 4, 5)}


@pytest.mark.parametrize("brokers, partitions, rf, message, code", [
    ([Broker(1), Broker(2)], 1, 3, "Replication factor: 3 larger than available brokers: 2.", 38),
    ([Broker(1)], 1, 0, "Replication factor must be larger than 0.", 38),
    ([Broker(1)], 0, 1, "Number of partitions must be larger than 0.", 39),
    ([Broker(1, "r1"), Broker(2)], 1, 1, "Not all brokers have rack information", 39),
])
def test_refused_placements(brokers: list[Broker], partitions: int, rf: int, message: str, code: int) -> None:
    with pytest.raises(AssignmentError, match=message.replace(".", r"\.")) as info:
        assign_replicas(brokers, partitions, rf)
    assert info.value.error_code == code
