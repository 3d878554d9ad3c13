"""The range assignor: worked examples (Kafka's own among them), then properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.group.assignors import ASSIGNORS, GroupSpec, RangeAssignor
from tests.coordinator.group.assignors.worlds import (
    MISSING,
    T1,
    T2,
    T3,
    Topics,
    check_valid,
    group,
    member,
    shuffled,
    with_assignment,
    worlds,
)

range_assignor = RangeAssignor()
FEW = settings(max_examples=50, deadline=None)


def test_registered_under_its_name() -> None:
    assert ASSIGNORS["range"].name == "range"
    assert isinstance(ASSIGNORS["range"], RangeAssignor)


def test_co_partitioned_topics_get_the_same_ranges() -> None:
    # The example of Kafka's RangeAssignor javadoc: two members, two topics of three partitions.
    out = range_assignor.assign(group(m0=member({T1, T2}), m1=member({T1, T2})), Topics({T1: 3, T2: 3}))
    assert out == {"m0": {T1: {0, 1}, T2: {0, 1}}, "m1": {T1: {2}, T2: {2}}}


def test_each_topic_is_ranged_over_its_own_subscribers() -> None:
    spec = group(a=member({T1}), b=member({T1, T2}), c=member({T2}))
    out = range_assignor.assign(spec, Topics({T1: 3, T2: 4}))
    assert out == {"a": {T1: {0, 1}}, "b": {T1: {2}, T2: {0, 1}}, "c": {T2: {2, 3}}}


def test_more_members_than_partitions() -> None:
    spec = group(a=member({T1}), b=member({T1}), c=member({T1}))
    assert range_assignor.assign(spec, Topics({T1: 2})) == {"a": {T1: {0}}, "b": {T1: {1}}, "c": {}}


def test_missing_topics_and_the_current_assignment_are_ignored() -> None:
    spec = group(b=member({T1, MISSING}, {T1: {0, 1, 2}}), a=member({T1}, {T1: {3}}))
    assert range_assignor.assign(spec, Topics({T1: 4})) == {"a": {T1: {0, 1}}, "b": {T1: {2, 3}}}
    assert range_assignor.assign(GroupSpec({}), Topics({})) == {}


def test_a_joining_member_takes_its_place_in_member_id_order() -> None:
    """Kafka 4's range is not sticky: ranges follow the sorted member ids."""
    before = range_assignor.assign(group(a=member({T1}), c=member({T1})), Topics({T1: 6}))
    assert before == {"a": {T1: {0, 1, 2}}, "c": {T1: {3, 4, 5}}}
    spec = with_assignment(group(a=member({T1}), c=member({T1})), before)
    after = range_assignor.assign(GroupSpec({**spec.members, "b": member({T1})}), Topics({T1: 6}))
    assert after == {"a": {T1: {0, 1}}, "b": {T1: {2, 3}}, "c": {T1: {4, 5}}}


def kafka_order(spec: GroupSpec) -> list[str]:
    """Static members by instance id, then dynamic ones by member id (ASCII ids here)."""
    def key(m: str) -> tuple[bool, str, str]:
        instance = spec.members[m].instance_id
        return (instance is None, instance or "", m)
    return sorted(spec.members, key=key)


@FEW
@given(worlds(homogeneous=False, racks=False), st.integers(0, 2**32))
def test_valid_balanced_per_topic_contiguous_and_deterministic(world, seed) -> None:
    spec, topics = world
    out = range_assignor.assign(spec, topics)
    check_valid(spec, topics, out)
    order = kafka_order(spec)
    for t in (T1, T2, T3):
        subscribers = [m for m in order if t in spec.members[m].subscribed_topic_ids]
        sizes = [len(out[m].get(t, ())) for m in subscribers]
        if subscribers:
            assert max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes, reverse=True), "the larger ranges go to the first members"
        got = [p for m in subscribers for p in sorted(out[m].get(t, ()))]
        assert got == list(range(len(got))), "contiguous ranges in member order"
    assert range_assignor.assign(shuffled(spec, seed), topics) == out


def test_static_members_keep_their_ranges_across_a_rolling_restart() -> None:
    """Kafka's RangeAssignor javadoc: M0 (instance I0) and M1 (I1) come back as M3 and M2; ordered
    by member id they would swap ranges, ordered by instance id they keep them."""
    topics = Topics({T1: 3, T2: 3})
    before = range_assignor.assign(group(M0=member({T1, T2}, instance="I0"), M1=member({T1, T2}, instance="I1")),
                                   topics)
    assert before == {"M0": {T1: {0, 1}, T2: {0, 1}}, "M1": {T1: {2}, T2: {2}}}
    after = range_assignor.assign(group(M3=member({T1, T2}, before["M0"], instance="I0"),
                                        M2=member({T1, T2}, before["M1"], instance="I1")), topics)
    assert after == {"M3": before["M0"], "M2": before["M1"]}
    # The same members without instance ids: the ranges follow the member ids and swap.
    dynamic = range_assignor.assign(group(M3=member({T1, T2}), M2=member({T1, T2})), topics)
    assert dynamic == {"M2": before["M0"], "M3": before["M1"]}


@FEW
@given(st.permutations(range(4)), st.integers(0, 2**32))
def test_renaming_static_members_moves_nothing(new_order, seed) -> None:
    """Static members under any new member ids (any new member id order), heterogeneous
    subscriptions included: every instance keeps exactly its partitions."""
    subscriptions = [{T1, T2}, {T1}, {T1, T2}, {T2, T3}]
    topics = Topics({T1: 7, T2: 5, T3: 2})
    old_ids = [f"m{i}" for i in range(4)]
    before = range_assignor.assign(GroupSpec({old_ids[i]: member(subscriptions[i], instance=f"i{i}")
                                              for i in range(4)}), topics)
    new_ids = [f"m{new_order[i]}-restarted" for i in range(4)]
    renamed = GroupSpec({new_ids[i]: member(subscriptions[i], instance=f"i{i}") for i in range(4)})
    after = range_assignor.assign(shuffled(renamed, seed), topics)
    assert {i: after[new_ids[i]] for i in range(4)} == {i: before[old_ids[i]] for i in range(4)}


def test_static_members_come_before_dynamic_ones() -> None:
    # "a" sorts before every other id, but it is dynamic: the static members take the first ranges,
    # by instance id whatever their member ids.
    spec = group(a=member({T1}), z=member({T1}, instance="i1"), y=member({T1}, instance="i2"), b=member({T1}))
    out = range_assignor.assign(spec, Topics({T1: 8}))
    assert out == {"z": {T1: {0, 1}}, "y": {T1: {2, 3}}, "a": {T1: {4, 5}}, "b": {T1: {6, 7}}}


def test_instance_ids_in_javas_string_order() -> None:
    # Kafka compares instance ids with String.compareTo, by UTF-16 code unit: U+1F600 (D83D DE00)
    # comes before U+E000, where code point order puts it after.
    spec = group(m1=member({T1}, instance="\ue000"), m2=member({T1}, instance="\U0001f600"))
    assert range_assignor.assign(spec, Topics({T1: 2})) == {"m2": {T1: {0}}, "m1": {T1: {1}}}


@FEW
@given(worlds(homogeneous=False, racks=False))
def test_co_partitioning(world) -> None:
    """Topics with the same subscribers and the same partition count: each member holds the same
    partition numbers of each."""
    spec, topics = world
    out = range_assignor.assign(spec, topics)
    by_shape: dict = {}
    for t in (T1, T2, T3):
        subscribers = frozenset(m for m, s in spec.members.items() if t in s.subscribed_topic_ids)
        if subscribers and topics.num_partitions(t) > 0:
            by_shape.setdefault((subscribers, topics.num_partitions(t)), []).append(t)
    for (subscribers, _), same in by_shape.items():
        for m in subscribers:
            assert len({out[m].get(t, frozenset()) for t in same}) == 1
