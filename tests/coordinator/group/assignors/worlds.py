"""Topics, groups and checks shared by the assignor tests."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from hypothesis import strategies as st

from coordinator.group.assignors import Assignment, GroupSpec, MemberSpec

#: Topic ids in a fixed order; the last one never exists.
T1, T2, T3, MISSING = (uuid.UUID(int=i) for i in (1, 2, 3, 99))
RACKS = ("r1", "r2", "r3")


@dataclass
class Topics:
    """A TopicDescriber held in memory that counts its calls."""

    counts: dict[uuid.UUID, int]
    replica_racks: dict[tuple[uuid.UUID, int], tuple[str, ...]] = field(default_factory=dict)

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        return self.counts.get(topic_id, -1)

    def racks(self, topic_id: uuid.UUID, partition: int) -> tuple[str, ...]:
        return self.replica_racks.get((topic_id, partition), ())

    def without_racks(self) -> Topics:
        return Topics(dict(self.counts))


def member(topics: set[uuid.UUID] | frozenset[uuid.UUID], assignment: Mapping[uuid.UUID, set[int]] | None = None,
           rack: str | None = None, instance: str | None = None) -> MemberSpec:
    return MemberSpec(rack, frozenset(topics), {t: frozenset(ps) for t, ps in (assignment or {}).items()}, instance)


def group(**members: MemberSpec) -> GroupSpec:
    return GroupSpec(dict(members))


def with_assignment(spec: GroupSpec, assigned: dict[str, Assignment]) -> GroupSpec:
    return GroupSpec({m: MemberSpec(s.rack_id, s.subscribed_topic_ids, assigned.get(m, {}), s.instance_id)
                      for m, s in spec.members.items()})


def shuffled(spec: GroupSpec, seed: int) -> GroupSpec:
    """The same group with every dict built in another order."""
    rng = random.Random(seed)
    ids = list(spec.members)
    rng.shuffle(ids)
    out = {}
    for m in ids:
        s = spec.members[m]
        topics = list(s.assignment.items())
        rng.shuffle(topics)
        out[m] = MemberSpec(s.rack_id, frozenset(s.subscribed_topic_ids), dict(topics), s.instance_id)
    return GroupSpec(out)


def size(assignment: Assignment) -> int:
    return sum(len(ps) for ps in assignment.values())


def owners(assigned: dict[str, Assignment]) -> dict[tuple[uuid.UUID, int], str]:
    out: dict[tuple[uuid.UUID, int], str] = {}
    for m, assignment in assigned.items():
        for t, ps in assignment.items():
            for p in ps:
                assert (t, p) not in out, f"{t}-{p} given to {out[(t, p)]} and {m}"
                out[(t, p)] = m
    return out


def check_valid(spec: GroupSpec, topics: Topics, assigned: dict[str, Assignment]) -> None:
    """An entry for every member; every partition of a topic with a subscriber given exactly once,
    to a subscriber, and nothing else given."""
    assert set(assigned) == set(spec.members)
    given = owners(assigned)
    expected = set()
    for s in spec.members.values():
        for t in s.subscribed_topic_ids:
            expected.update((t, p) for p in range(max(topics.num_partitions(t), 0)))
    assert set(given) == expected
    for (t, _), m in given.items():
        assert t in spec.members[m].subscribed_topic_ids
    for assignment in assigned.values():
        assert all(ps for ps in assignment.values()), "no empty topic entries"


def moved(before: dict[str, Assignment], after: dict[str, Assignment]) -> int:
    """Partitions owned before whose owner changed (a member that left loses all of its own)."""
    after_owner = owners(after)
    return sum(1 for tp, m in owners(before).items() if after_owner.get(tp) != m)


def homogeneous_least_moves(before: dict[str, Assignment], remaining: list[str], total: int) -> int:
    """The fewest partitions any balanced assignment of ``total`` partitions over ``remaining``
    must move away from their owners in ``before``."""
    minimum, extras = divmod(total, len(remaining))
    held = [size(before.get(m, {})) for m in remaining]
    keepable = sum(min(h, minimum) for h in held) + min(extras, sum(1 for h in held if h > minimum))
    return sum(size(a) for a in before.values()) - keepable


@st.composite
def worlds(draw: st.DrawFn, *, homogeneous: bool, racks: bool, max_members: int = 7,
           prior: bool = True) -> tuple[GroupSpec, Topics]:
    """A group and its topics: up to 3 topics of 0-12 partitions (plus a subscribed topic that
    does not exist), up to ``max_members`` members, some static (their instance ids in another
    order than their member ids), maybe racks, maybe an arbitrary (even invalid) current assignment."""
    counts = {t: draw(st.integers(0, 12)) for t in (T1, T2, T3)[:draw(st.integers(1, 3))]}
    replica_racks = {}
    if racks:
        for t, n in counts.items():
            for p in range(n):
                replica_racks[(t, p)] = tuple(sorted(draw(st.sets(st.sampled_from(RACKS), max_size=2))))
    topics = Topics(counts, replica_racks)
    names = sorted(counts)
    shared = frozenset(draw(st.sets(st.sampled_from([*names, MISSING]), min_size=1)))
    members = {}
    for i in range(draw(st.integers(1, max_members))):
        subscribed = shared if homogeneous else frozenset(draw(st.sets(st.sampled_from([*names, MISSING]))))
        assignment: Assignment = {}
        if prior:
            for t in draw(st.sets(st.sampled_from([*names, MISSING]), max_size=2)):
                ps = draw(st.sets(st.integers(0, 13), max_size=5))
                if ps:
                    assignment[t] = frozenset(ps)
        rack = draw(st.sampled_from((None, *RACKS))) if racks else None
        instance = f"i{max_members - i}" if draw(st.booleans()) else None
        members[f"m{i}"] = MemberSpec(rack, subscribed, assignment, instance)
    return GroupSpec(members), topics
