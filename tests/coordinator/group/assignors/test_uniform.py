"""The uniform assignor: worked examples, then properties over generated groups."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.group.assignors import ASSIGNORS, GroupSpec, MemberSpec, UniformAssignor
from tests.coordinator.group.assignors.worlds import (
    MISSING,
    T1,
    T2,
    Topics,
    check_valid,
    group,
    homogeneous_least_moves,
    member,
    moved,
    owners,
    shuffled,
    size,
    with_assignment,
    worlds,
)

uniform = UniformAssignor()
FEW = settings(max_examples=50, deadline=None)


def test_registered_under_its_name() -> None:
    assert ASSIGNORS["uniform"].name == "uniform"
    assert isinstance(ASSIGNORS["uniform"], UniformAssignor)


def test_fresh_group_gets_contiguous_balanced_runs() -> None:
    out = uniform.assign(group(a=member({T1}), b=member({T1}), c=member({T1})), Topics({T1: 7}))
    assert out == {"a": {T1: {0, 1, 2}}, "b": {T1: {3, 4}}, "c": {T1: {5, 6}}}


def test_partitions_of_several_topics_are_counted_together() -> None:
    out = uniform.assign(group(a=member({T1, T2}), b=member({T1, T2})), Topics({T1: 3, T2: 2}))
    assert out == {"a": {T1: {0, 1, 2}}, "b": {T2: {0, 1}}}


def test_a_joining_member_takes_the_highest_partitions_of_the_fullest() -> None:
    spec = group(a=member({T1}, {T1: {0, 1, 2, 3}}), b=member({T1}, {T1: {4, 5, 6, 7}}), c=member({T1}))
    assert uniform.assign(spec, Topics({T1: 8})) == {"a": {T1: {0, 1, 2}}, "b": {T1: {4, 5, 6}}, "c": {T1: {3, 7}}}


def test_a_leaving_member_moves_only_its_partitions() -> None:
    spec = group(a=member({T1}, {T1: {0, 1, 2}}), b=member({T1}, {T1: {3, 4}}))
    assert uniform.assign(spec, Topics({T1: 7})) == {"a": {T1: {0, 1, 2, 5}}, "b": {T1: {3, 4, 6}}}


def test_what_cannot_be_kept_is_dropped() -> None:
    spec = group(
        a=member({T1, MISSING}, {T1: {0, 9}, T2: {0}, MISSING: {0}}),  # 9 no longer exists, T2 not subscribed
        b=member({T1}, {T1: {0, 1}}),  # 0 is a's as well: the smaller member id keeps it
        c=member({MISSING}),  # subscribes only to a topic that does not exist
    )
    out = uniform.assign(spec, Topics({T1: 4, T2: 1}))
    assert out == {"a": {T1: {0, 2}}, "b": {T1: {1, 3}}, "c": {}}


def test_no_members_and_no_topics() -> None:
    assert uniform.assign(GroupSpec({}), Topics({})) == {}
    assert uniform.assign(group(a=member(set()), b=member({MISSING})), Topics({})) == {"a": {}, "b": {}}
    assert uniform.assign(group(a=member({T1}, {T1: {0}})), Topics({T1: 0})) == {"a": {}}


def test_racks_choose_the_member_for_a_fresh_partition() -> None:
    topics = Topics({T1: 4}, {(T1, 0): ("r1",), (T1, 1): ("r1",), (T1, 2): ("r2",), (T1, 3): ("r2",)})
    spec = group(a=member({T1}, rack="r2"), b=member({T1}, rack="r1"))
    assert uniform.assign(spec, topics.without_racks()) == {"a": {T1: {0, 1}}, "b": {T1: {2, 3}}}
    assert uniform.assign(spec, topics) == {"a": {T1: {2, 3}}, "b": {T1: {0, 1}}}


def test_racks_never_move_a_kept_partition() -> None:
    topics = Topics({T1: 4}, {(T1, 0): ("r1",), (T1, 1): ("r1",), (T1, 2): ("r2",), (T1, 3): ("r2",)})
    spec = group(a=member({T1}, {T1: {0, 1}}, rack="r2"), b=member({T1}, {T1: {2, 3}}, rack="r1"))
    assert uniform.assign(spec, topics) == {"a": {T1: {0, 1}}, "b": {T1: {2, 3}}}


def test_a_member_over_quota_gives_up_rack_mismatched_partitions_first() -> None:
    topics = Topics({T1: 4}, {(T1, 0): ("r1",), (T1, 1): ("r2",), (T1, 2): ("r1",), (T1, 3): ("r2",)})
    spec = group(a=member({T1}, {T1: {0, 1, 2, 3}}, rack="r1"), b=member({T1}, rack="r2"))
    assert uniform.assign(spec, topics) == {"a": {T1: {0, 2}}, "b": {T1: {1, 3}}}
    assert uniform.assign(spec, topics.without_racks()) == {"a": {T1: {0, 1}}, "b": {T1: {2, 3}}}


def test_the_larger_quota_stays_with_the_member_whose_extra_partition_is_rack_matched() -> None:
    # 4 partitions, 3 members: one keeps 2. a and b hold 2 each; b's are in its rack, a's are not.
    topics = Topics({T1: 4}, {(T1, p): ("r2",) for p in range(4)})
    spec = group(a=member({T1}, {T1: {0, 1}}, rack="r1"), b=member({T1}, {T1: {2, 3}}, rack="r2"),
                 c=member({T1}, rack="r1"))
    assert uniform.assign(spec, topics.without_racks()) == {"a": {T1: {0, 1}}, "b": {T1: {2}}, "c": {T1: {3}}}
    assert uniform.assign(spec, topics) == {"a": {T1: {0}}, "b": {T1: {2, 3}}, "c": {T1: {1}}}


def test_the_extra_partition_goes_where_its_rack_is() -> None:
    # 10 partitions, 3 members: one gets 4. All replicas are in r0, where b and c are.
    topics = Topics({T1: 10}, {(T1, p): ("r0",) for p in range(10)})
    spec = group(a=member({T1}, rack="r1"), b=member({T1}, rack="r0"), c=member({T1}, rack="r0"))
    out = uniform.assign(spec, topics)
    assert sorted(map(size, out.values())) == [3, 3, 4]
    assert size(out["a"]) == 3, "7 partitions rack-matched, the most possible"


def test_heterogeneous_fills_the_least_loaded_subscriber() -> None:
    spec = group(a=member({T1}), b=member({T1, T2}), c=member({T2}))
    out = uniform.assign(spec, Topics({T1: 4, T2: 2}))
    assert out == {"a": {T1: {0, 2}}, "b": {T1: {1, 3}}, "c": {T2: {0, 1}}}


def test_heterogeneous_moves_partitions_to_balance() -> None:
    # c holds all of T1; a can only take T1, b takes T2 as well.
    spec = group(a=member({T1}), b=member({T1, T2}), c=member({T1}, {T1: {0, 1, 2, 3, 4, 5}}))
    out = uniform.assign(spec, Topics({T1: 6, T2: 3}))
    check_valid(spec, Topics({T1: 6, T2: 3}), out)
    assert out["c"][T1] <= {0, 1, 2, 3, 4, 5} and sorted(map(size, out.values())) == [3, 3, 3]
    assert out["b"] == {T2: {0, 1, 2}}, "b's load is made of T2; nothing of T1 needs to move there"


def test_heterogeneous_ties_go_to_the_rack_matched_member() -> None:
    topics = Topics({T1: 2, T2: 1}, {(T1, 0): ("r1",), (T1, 1): ("r2",)})
    spec = group(a=member({T1}, rack="r2"), b=member({T1}, rack="r1"), c=member({T2}, rack="r1"))
    assert uniform.assign(spec, topics.without_racks()) == {"a": {T1: {0}}, "b": {T1: {1}}, "c": {T2: {0}}}
    assert uniform.assign(spec, topics) == {"a": {T1: {1}}, "b": {T1: {0}}, "c": {T2: {0}}}


# -- properties ------------------------------------------------------------------------------------

def _balanced_heterogeneous(spec: GroupSpec, out: dict[str, dict]) -> None:
    """Kafka's balance for heterogeneous groups: no partition's owner has two more than a member
    that subscribes to its topic."""
    loads = {m: size(a) for m, a in out.items()}
    for (t, _), owner in owners(out).items():
        for m, s in spec.members.items():
            if t in s.subscribed_topic_ids:
                assert loads[owner] <= loads[m] + 1, (owner, m, t)


@FEW
@given(worlds(homogeneous=True, racks=False), st.integers(0, 2**32))
def test_homogeneous_is_valid_balanced_and_deterministic(world, seed) -> None:
    spec, topics = world
    out = uniform.assign(spec, topics)
    check_valid(spec, topics, out)
    sizes = [size(out[m]) for m, s in spec.members.items() if s.subscribed_topic_ids - {MISSING}]
    assert max(sizes, default=0) - min(sizes, default=0) <= 1
    assert uniform.assign(shuffled(spec, seed), topics) == out


@FEW
@given(worlds(homogeneous=False, racks=True), st.integers(0, 2**32))
def test_heterogeneous_is_valid_balanced_and_deterministic(world, seed) -> None:
    spec, topics = world
    out = uniform.assign(spec, topics)
    check_valid(spec, topics, out)
    _balanced_heterogeneous(spec, out)
    assert uniform.assign(shuffled(spec, seed), topics) == out


@FEW
@given(worlds(homogeneous=False, racks=True))
def test_an_assignment_is_kept_as_it_is(world) -> None:
    """Stickiness: handed its own answer back, the assignor changes nothing."""
    spec, topics = world
    out = uniform.assign(spec, topics)
    assert uniform.assign(with_assignment(spec, out), topics) == out


@FEW
@given(worlds(homogeneous=True, racks=True), st.booleans())
def test_one_join_moves_the_fewest_partitions(world, racked) -> None:
    spec, topics = world
    if not racked:
        topics = topics.without_racks()
    before = uniform.assign(spec, topics)
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    joined = GroupSpec({**with_assignment(spec, before).members, "zz-new": MemberSpec("r1", subscribed, {})})
    after = uniform.assign(joined, topics)
    check_valid(joined, topics, after)
    total = sum(max(topics.num_partitions(t), 0) for t in subscribed)
    assert moved(before, after) == homogeneous_least_moves(before, list(joined.members), total)
    # Whoever joins (first or last in member id order), the count is the same.
    first = GroupSpec({"a-new": MemberSpec(None, subscribed, {}), **with_assignment(spec, before).members})
    assert moved(before, uniform.assign(first, topics)) == moved(before, after)


@FEW
@given(worlds(homogeneous=True, racks=True), st.data())
def test_one_leave_moves_only_the_leavers_partitions(world, data) -> None:
    spec, topics = world
    before = uniform.assign(spec, topics)
    leaver = data.draw(st.sampled_from(sorted(spec.members)))
    rest = GroupSpec({m: s for m, s in with_assignment(spec, before).members.items() if m != leaver})
    after = uniform.assign(rest, topics)
    check_valid(rest, topics, after)
    assert moved(before, after) == size(before[leaver])
    for m in rest.members:
        for t, ps in before[m].items():
            assert ps <= after[m][t]


@FEW
@given(worlds(homogeneous=True, racks=True))
def test_exactly_minimal_movement_from_any_current_assignment(world) -> None:
    """From an arbitrary (even invalid) current assignment, balanced with the fewest moves."""
    spec, topics = world
    out = uniform.assign(spec, topics)
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    valid_before = _cleaned(spec, topics)
    total = sum(max(topics.num_partitions(t), 0) for t in subscribed)
    if total:
        assert moved(valid_before, out) == homogeneous_least_moves(valid_before, list(spec.members), total)


def _cleaned(spec: GroupSpec, topics: Topics) -> dict[str, dict]:
    """What each member may keep of its current assignment (the smaller member id wins a partition)."""
    seen: set = set()
    out: dict[str, dict] = {}
    for m in sorted(spec.members):
        s = spec.members[m]
        out[m] = {}
        for t, ps in s.assignment.items():
            if t in s.subscribed_topic_ids:
                mine = {p for p in ps if 0 <= p < topics.num_partitions(t) and (t, p) not in seen}
                seen.update((t, p) for p in mine)
                if mine:
                    out[m][t] = frozenset(mine)
    return out


@FEW
@given(worlds(homogeneous=True, racks=True))
def test_racks_never_change_balance_or_stickiness(world) -> None:
    spec, topics = world
    with_racks = uniform.assign(spec, topics)
    without = uniform.assign(spec, topics.without_racks())
    assert sorted(map(size, with_racks.values())) == sorted(map(size, without.values()))
    cleaned = _cleaned(spec, topics)
    assert moved(cleaned, with_racks) == moved(cleaned, without)


@FEW
@given(worlds(homogeneous=False, racks=True))
def test_heterogeneous_racks_keep_the_balance(world) -> None:
    spec, topics = world
    out = uniform.assign(spec, topics)
    _balanced_heterogeneous(spec, out)
    _balanced_heterogeneous(spec, uniform.assign(spec, topics.without_racks()))


def _max_matching(edges: list[list[int]]) -> int:
    """Kuhn's augmenting paths: the most left nodes matched to distinct right nodes."""
    owner: dict[int, int] = {}

    def augment(j: int, seen: set[int]) -> bool:
        for k in edges[j]:
            if k not in seen:
                seen.add(k)
                if k not in owner or augment(owner[k], seen):
                    owner[k] = j
                    return True
        return False

    return sum(augment(j, set()) for j in range(len(edges)))


def _most_rack_matches(spec: GroupSpec, topics: Topics) -> int:
    """Brute force: the most rack-matched partitions of any balanced assignment (every choice of
    the members with the larger quota, then a maximum bipartite matching of partitions to slots)."""
    ids = sorted(spec.members)
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    parts = [(t, p) for t in sorted(subscribed) for p in range(max(topics.num_partitions(t), 0))]
    minimum, extras = divmod(len(parts), len(ids))
    best = 0
    for bigger in itertools.combinations(range(len(ids)), extras):
        slots = [i for i in range(len(ids)) for _ in range(minimum + (i in bigger))]
        edges = [[k for k, i in enumerate(slots) if spec.members[ids[i]].rack_id in topics.racks(*tp)] for tp in parts]
        best = max(best, _max_matching(edges))
    return best


@settings(max_examples=40, deadline=None)
@given(worlds(homogeneous=True, racks=True, max_members=5, prior=False))
def test_a_fresh_assignment_matches_racks_as_often_as_possible(world) -> None:
    spec, topics = world
    out = uniform.assign(spec, topics)
    matched = sum(1 for m, a in out.items() for t, ps in a.items() for p in ps
                  if spec.members[m].rack_id in topics.racks(t, p))
    assert matched == _most_rack_matches(spec, topics)


@settings(max_examples=40, deadline=None)
@given(worlds(homogeneous=True, racks=True, max_members=5))
def test_partitions_that_move_are_rack_matched_as_often_as_possible(world) -> None:
    """From any current assignment: with what each member kept and how many it got fixed, no other
    placement of the partitions that moved matches more of them to their new owner's rack."""
    spec, topics = world
    out = uniform.assign(spec, topics)
    before = _cleaned(spec, topics)
    owner_before = owners(before)
    ids = sorted(spec.members)
    fresh = sorted(tp for tp, m in owners(out).items() if owner_before.get(tp) != m)
    slots = [m for m in ids for _ in range(sum(1 for tp in fresh if owners(out)[tp] == m))]
    edges = [[k for k, m in enumerate(slots) if spec.members[m].rack_id in topics.racks(*tp)] for tp in fresh]
    matched = sum(1 for tp in fresh if spec.members[owners(out)[tp]].rack_id in topics.racks(*tp))
    assert matched == _max_matching(edges)


@FEW
@given(worlds(homogeneous=False, racks=True, prior=False), st.data())
def test_heterogeneous_balances_away_from_a_hoarder(world, data) -> None:
    """One member holds every partition of the topics it subscribes to: the rest of the group
    takes its share from it (each partition moving at most once)."""
    spec, topics = world
    hoarder = data.draw(st.sampled_from(sorted(spec.members)))
    mine = {t: frozenset(range(topics.num_partitions(t))) for t in spec.members[hoarder].subscribed_topic_ids
            if topics.num_partitions(t) > 0}
    spec = with_assignment(spec, {hoarder: mine})
    out = uniform.assign(spec, topics)
    check_valid(spec, topics, out)
    _balanced_heterogeneous(spec, out)
    for t, ps in out[hoarder].items():
        assert ps <= mine[t], "the hoarder only gives"
