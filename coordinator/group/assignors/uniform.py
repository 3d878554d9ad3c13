"""The uniform assignor: balanced, sticky and rack-aware (Kafka's ``UniformAssignor``).

KIP-848's default server-side assignor
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol,
"Assignors"). Kafka builds the assignment one of two ways, by the shape of the subscriptions
(``UniformHomogeneousAssignmentBuilder`` and ``UniformHeterogeneousAssignmentBuilder`` in
group-coordinator/src/main/java/org/apache/kafka/coordinator/group/assignor/); so does this module.
Priorities, in order: balance, then stickiness, then rack locality.

Only topics that exist count: a subscribed topic id whose partition count is -1 (or 0) is ignored,
and a partition of a member's current assignment that no longer exists, or whose topic the member
no longer subscribes to, is dropped. When two members' current assignments name the same
partition, the member with the smaller id keeps it.

**Homogeneous groups** (every member with a non-empty subscription subscribes to the same existing
topics; members subscribing to nothing get nothing and are not counted):

* Balance: with P partitions and N members every member gets P // N or P // N + 1 partitions.
* Stickiness, exact: the number of partitions that change owner is the least any balanced
  assignment allows — a member keeps min(held, quota) of what it holds, and the P % N larger
  quotas go first to members that hold more than P // N. So one member joining moves only the
  minimum number of partitions, and a member leaving moves only the partitions it had.
* Racks, when members and partition replicas carry racks: a partition a member keeps is never moved
  for locality (stickiness first), and racks never change the partition counts. A member over its
  quota gives up rack-mismatched partitions before rack-matched ones; when more members hold over
  P // N than there are larger quotas, those go first to members whose one more partition is
  rack-matched (choosing otherwise never raises the rack-matched total, and movement stays minimal
  either way). Every partition that moves (new ones, those of members that left, those given up to
  restore balance) goes to a member whose rack holds one of its replicas wherever possible: given
  the partitions kept, the number of moving partitions placed rack-matched is the largest any
  balanced assignment allows, the P % N larger quotas not yet taken included (a maximum flow from
  the partitions' rack sets to the racks' free quota). In particular a group assigned from scratch
  gets as many rack-matched partitions as any balanced assignment can have. Kafka's uniform builders
  do not use racks yet (KAFKA-17747, https://issues.apache.org/jira/browse/KAFKA-17747).

**Heterogeneous groups**: the current assignment is kept, then each unassigned partition goes to the
least-loaded member subscribed to its topic (topics with fewer subscribers first), then partitions
move one at a time, from the most loaded member to the least loaded subscriber of a topic it holds,
while that subscriber has at least two fewer partitions. The result is Kafka's "balanced" for such groups: no partition's
owner holds two or more partitions more than another member subscribed to its topic (so members with
equal subscriptions differ by at most one). Racks break ties only: among equally loaded candidates
the rack-matched member gets the partition, and a move prefers a partition rack-matched at its
destination and not at its source.

The output is deterministic: members are visited in member id order, topics in topic id order,
partitions in number order, so the dict order of the input never shows.
"""

from __future__ import annotations

import heapq
import operator
import uuid
from collections.abc import Callable, Iterable

from coordinator.group.assignors.spec import Assignment, GroupSpec, MemberSpec, PartitionAssignorError, TopicDescriber

__all__ = ["UniformAssignor"]

#: A run of partitions of one topic, in ascending order.
_Segment = tuple[uuid.UUID, list[int]]
#: Topic ids sort as UUIDs do (by their 128-bit value), without calling uuid.UUID.__lt__ in Python.
_by_value = operator.attrgetter("int")


class UniformAssignor:
    name = "uniform"

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        members = group.members
        ids = sorted(members)
        # Set algebra on the subscriptions reuses the hashes the frozensets hold: a topic id hashes
        # in Python code (uuid.UUID.__hash__), so it is looked up once per topic, not per member.
        subscriptions = {members[member_id].subscribed_topic_ids for member_id in ids}
        counts: dict[uuid.UUID, int] = {}
        for topic_id in frozenset[uuid.UUID]().union(*subscriptions):
            count = topics.num_partitions(topic_id)
            if count > 0:
                counts[topic_id] = count
        existing = frozenset(counts)
        effective = {subscribed: subscribed if subscribed <= existing else subscribed & existing
                     for subscribed in subscriptions}
        subs = {member_id: effective[members[member_id].subscribed_topic_ids] for member_id in ids}
        shapes = set(subs.values())
        shapes.discard(frozenset())
        if not shapes:
            return {member_id: {} for member_id in ids}
        if len(shapes) == 1:
            (topic_set,) = shapes
            subscribers = [member_id for member_id in ids if subs[member_id]]
            assigned = _assign_homogeneous(subscribers, members, sorted(topic_set, key=_by_value), counts, topics)
        else:
            assigned = _assign_heterogeneous(ids, members, subs, counts, topics)
        return {member_id: assigned.get(member_id, {}) for member_id in ids}


class _Pool:
    """Partitions handed out in order, a slice at a time (no per-partition objects)."""

    __slots__ = ("_segments", "_index", "_offset", "left")

    def __init__(self, segments: Iterable[_Segment]) -> None:
        self._segments = [(topic_id, parts) for topic_id, parts in segments if parts]
        self._index = 0
        self._offset = 0
        self.left = sum(len(parts) for _, parts in self._segments)

    def take(self, count: int) -> list[_Segment]:
        """The next ``count`` partitions (fewer when fewer are left)."""
        out: list[_Segment] = []
        count = min(count, self.left)
        self.left -= count
        while count > 0:
            topic_id, parts = self._segments[self._index]
            chunk = parts[self._offset:self._offset + count]
            out.append((topic_id, chunk))
            count -= len(chunk)
            self._offset += len(chunk)
            if self._offset == len(parts):
                self._index += 1
                self._offset = 0
        return out

    def rest(self) -> list[_Segment]:
        out = []
        for index in range(self._index, len(self._segments)):
            topic_id, parts = self._segments[index]
            out.append((topic_id, parts[self._offset:] if index == self._index else parts))
        return out


def _keep_current(spec: MemberSpec, subscribed: frozenset[uuid.UUID], counts: dict[uuid.UUID, int],
                  taken: dict[uuid.UUID, set[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """The part of a member's current assignment it may keep: subscribed, existing, not already
    claimed by a member visited before it. Marks what it keeps in ``taken``."""
    kept: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, parts in spec.assignment.items():
        if not parts or topic_id not in subscribed:
            continue
        claimed = taken[topic_id]
        if not claimed.isdisjoint(parts):
            parts = frozenset(parts - claimed)
            if not parts:
                continue
        count = counts[topic_id]
        if min(parts) < 0 or max(parts) >= count:
            parts = frozenset(p for p in parts if 0 <= p < count)
            if not parts:
                continue
        claimed.update(parts)
        kept[topic_id] = parts
    return kept


def _matches_at_least(own: Assignment, rack: str | None, wanted: int, topics: TopicDescriber) -> bool:
    """Whether at least ``wanted`` of the partitions in ``own`` have a replica in ``rack``."""
    if rack is None:
        return False
    for topic_id, parts in own.items():
        for p in parts:
            if rack in topics.racks(topic_id, p):
                wanted -= 1
                if wanted == 0:
                    return True
    return False


def _free(topic_ids: Iterable[uuid.UUID], counts: dict[uuid.UUID, int],
          taken: dict[uuid.UUID, set[int]]) -> list[_Segment]:
    out: list[_Segment] = []
    for topic_id in topic_ids:
        count, claimed = counts[topic_id], taken[topic_id]
        if not claimed:
            out.append((topic_id, list(range(count))))
        elif len(claimed) < count:
            out.append((topic_id, sorted(set(range(count)).difference(claimed))))
    return out


def _assign_homogeneous(ids: list[str], members: dict[str, MemberSpec], topic_ids: list[uuid.UUID],
                        counts: dict[uuid.UUID, int], topics: TopicDescriber) -> dict[str, Assignment]:
    subscribed = frozenset(topic_ids)
    total = sum(counts[topic_id] for topic_id in topic_ids)
    minimum, extras = divmod(total, len(ids))
    taken: dict[uuid.UUID, set[int]] = {topic_id: set() for topic_id in topic_ids}
    kept = [_keep_current(members[member_id], subscribed, counts, taken) for member_id in ids]
    held = [sum(map(len, own.values())) for own in kept]

    # The larger quotas go to members holding more than the minimum: each keeps one more partition.
    # When there are more such members than larger quotas, those for whom that one more partition
    # is rack-matched come first (a member gives up mismatched partitions first, below).
    rack_of = [members[member_id].rack_id for member_id in ids]
    quota = [minimum] * len(ids)
    over = [index for index, count in enumerate(held) if count > minimum]
    if len(over) > extras > 0 and any(rack_of[index] is not None for index in over):
        over.sort(key=lambda index: not _matches_at_least(kept[index], rack_of[index], minimum + 1, topics))
    for index in over[:extras]:
        quota[index] += 1
    extras -= min(extras, len(over))

    # Members over quota give partitions back: rack-mismatched first, then the highest numbered.
    for index, count in enumerate(held):
        if count <= quota[index]:
            continue
        own = kept[index]
        held_parts = [(topic_id, p) for topic_id in sorted(own, key=_by_value) for p in sorted(own[topic_id])]
        held_parts.reverse()
        rack = rack_of[index]
        if rack is not None:
            held_parts.sort(key=lambda tp: rack in topics.racks(tp[0], tp[1]))  # stable: mismatched first
        given_up: dict[uuid.UUID, list[int]] = {}
        for topic_id, p in held_parts[:count - quota[index]]:
            given_up.setdefault(topic_id, []).append(p)
        for topic_id, parts in given_up.items():
            remaining = own[topic_id].difference(parts)
            if remaining:
                own[topic_id] = remaining
            else:
                del own[topic_id]
            taken[topic_id].difference_update(parts)
        held[index] = quota[index]

    room = [quota[index] - held[index] for index in range(len(ids))]
    # Members that may still take one of the `extras` larger quotas left.
    may_extra = [quota[index] == minimum for index in range(len(ids))] if extras else [False] * len(ids)
    free = _free(topic_ids, counts, taken)
    new: list[list[_Segment]] = [[] for _ in ids]

    if any(rack is not None for rack in rack_of) and free:
        free, extras = _place_rack_matched(free, rack_of, room, may_extra, extras, new, topics)

    for index in range(len(ids)):
        if extras == 0:
            break
        if may_extra[index]:
            room[index] += 1
            extras -= 1
    pool = _Pool(free)
    for index, space in enumerate(room):
        if space > 0:
            new[index].extend(pool.take(space))
    if pool.left:
        raise PartitionAssignorError("partitions were left unassigned")

    out: dict[str, Assignment] = {}
    for index, member_id in enumerate(ids):
        own = kept[index]
        for topic_id, parts in new[index]:
            current = own.get(topic_id)
            own[topic_id] = frozenset(parts) if current is None else current.union(parts)
        out[member_id] = own
    return out


def _place_rack_matched(free: list[_Segment], rack_of: list[str | None], room: list[int], may_extra: list[bool],
                        extras: int, new: list[list[_Segment]], topics: TopicDescriber) -> tuple[list[_Segment], int]:
    """Give as many free partitions as possible to members in a rack holding one of their
    replicas, within each member's room (and the ``extras`` one-partition extensions, at most one
    per member in ``may_extra``). A maximum flow: partitions grouped by the set of member racks
    holding their replicas -> racks (room of their members) -> sink, with the extensions through
    one shared node. Returns the partitions left and the extensions left; fills ``new``."""
    racks = sorted({rack for index, rack in enumerate(rack_of)
                    if rack is not None and (room[index] > 0 or may_extra[index])})
    if not racks:
        return free, extras
    member_racks = frozenset(racks)
    classes: dict[frozenset[str], dict[uuid.UUID, list[int]]] = {}
    unmatched: dict[uuid.UUID, list[int]] = {}
    for topic_id, parts in free:
        for p in parts:
            key = member_racks.intersection(topics.racks(topic_id, p))
            if key:
                classes.setdefault(key, {}).setdefault(topic_id, []).append(p)
            else:
                unmatched.setdefault(topic_id, []).append(p)
    if not classes:
        return free, extras
    keys = sorted(classes, key=sorted)
    rack_node = {rack: 3 + len(keys) + j for j, rack in enumerate(racks)}
    source, sink, extension = 0, 1, 2
    size = 3 + len(keys) + len(racks)
    capacity = [[0] * size for _ in range(size)]
    for k, key in enumerate(keys):
        count = sum(map(len, classes[key].values()))
        capacity[source][3 + k] = count
        for rack in key:
            capacity[3 + k][rack_node[rack]] = count
    rack_members: dict[str, list[int]] = {rack: [] for rack in racks}
    for index, member_rack in enumerate(rack_of):
        if member_rack is not None and member_rack in rack_members:
            rack_members[member_rack].append(index)
            capacity[rack_node[member_rack]][sink] += room[index]
            capacity[rack_node[member_rack]][extension] += may_extra[index]
    capacity[extension][sink] = extras
    flow = _max_flow(capacity, source, sink)

    pools = [_Pool(sorted(classes[key].items())) for key in keys]
    for rack in racks:
        node = rack_node[rack]
        widen = flow[node][extension]
        extras -= widen
        for index in rack_members[rack]:
            if widen == 0:
                break
            if may_extra[index]:
                may_extra[index] = False
                room[index] += 1
                widen -= 1
        mine: dict[uuid.UUID, list[int]] = {}
        for k in range(len(keys)):
            if flow[3 + k][node] > 0:
                for topic_id, parts in pools[k].take(flow[3 + k][node]):
                    mine.setdefault(topic_id, []).extend(parts)
        pool = _Pool((topic_id, sorted(mine[topic_id])) for topic_id in sorted(mine))
        for index in rack_members[rack]:
            if room[index] > 0 and pool.left:
                got = min(room[index], pool.left)
                room[index] -= got
                new[index].extend(pool.take(got))
    for k in range(len(keys)):
        for topic_id, parts in pools[k].rest():
            unmatched.setdefault(topic_id, []).extend(parts)
    return [(topic_id, sorted(unmatched[topic_id])) for topic_id in sorted(unmatched)], extras


def _max_flow(capacity: list[list[int]], source: int, sink: int) -> list[list[int]]:
    """Edmonds-Karp on a dense graph of a few nodes (one per rack set and per rack)."""
    size = len(capacity)
    flow = [[0] * size for _ in range(size)]
    while True:
        parent = [-1] * size
        parent[source] = source
        queue = [source]
        for u in queue:
            if parent[sink] != -1:
                break
            row, used = capacity[u], flow[u]
            for v in range(size):
                if parent[v] == -1 and row[v] - used[v] > 0:
                    parent[v] = u
                    queue.append(v)
        if parent[sink] == -1:
            return flow
        bottleneck, v = -1, sink
        while v != source:
            u = parent[v]
            spare = capacity[u][v] - flow[u][v]
            bottleneck = spare if bottleneck < 0 else min(bottleneck, spare)
            v = u
        v = sink
        while v != source:
            u = parent[v]
            flow[u][v] += bottleneck
            flow[v][u] -= bottleneck
            v = u


def _assign_heterogeneous(ids: list[str], members: dict[str, MemberSpec], subs: dict[str, frozenset[uuid.UUID]],
                          counts: dict[uuid.UUID, int], topics: TopicDescriber) -> dict[str, Assignment]:
    topic_ids = sorted(frozenset[uuid.UUID]().union(*subs.values()), key=_by_value)
    subscribers: dict[uuid.UUID, list[str]] = {topic_id: [] for topic_id in topic_ids}
    for member_id in ids:
        for topic_id in subs[member_id]:
            subscribers[topic_id].append(member_id)
    taken: dict[uuid.UUID, set[int]] = {topic_id: set() for topic_id in topic_ids}
    owned: dict[str, dict[uuid.UUID, set[int]]] = {}
    load: dict[str, int] = {}
    for member_id in ids:
        kept = _keep_current(members[member_id], subs[member_id], counts, taken)
        owned[member_id] = {topic_id: set(parts) for topic_id, parts in kept.items()}
        load[member_id] = sum(map(len, kept.values()))
    rack_of = {member_id: members[member_id].rack_id for member_id in ids}
    rack_aware = any(rack is not None for rack in rack_of.values())
    racks: Callable[[uuid.UUID, int], tuple[str, ...]] = topics.racks

    # Unassigned partitions, most constrained topics first, each to its least-loaded subscriber.
    for topic_id, parts in _free(sorted(topic_ids, key=lambda t: len(subscribers[t])), counts, taken):
        candidates = subscribers[topic_id]
        heap = [(load[member_id], member_id) for member_id in candidates]
        heapq.heapify(heap)
        by_rack: dict[str, list[tuple[int, str]]] = {}
        if rack_aware:
            for member_id in candidates:
                rack = rack_of[member_id]
                if rack is not None:
                    by_rack.setdefault(rack, []).append((load[member_id], member_id))
            for entries in by_rack.values():
                heapq.heapify(entries)
        for p in parts:
            chosen = _top(heap, load)
            if by_rack and rack_of[chosen] not in (replicas := racks(topic_id, p)):
                least = load[chosen]
                matched = [m for rack in replicas if rack in by_rack
                           for m in (_top(by_rack[rack], load),) if m and load[m] == least]
                if matched:
                    chosen = min(matched)
            owned[chosen].setdefault(topic_id, set()).add(p)
            load[chosen] += 1
            heapq.heappush(heap, (load[chosen], chosen))
            rack = rack_of[chosen]
            if rack is not None and rack in by_rack:
                heapq.heappush(by_rack[rack], (load[chosen], chosen))

    # Then balance: the most loaded member gives a partition to the least loaded subscriber of a
    # topic it holds, while that one has at least two fewer. Taking from the top down sends
    # partitions straight from where there are most to where there are fewest instead of passing
    # them along; a run without a move proves the balance (a member found with nobody to give to
    # is set aside for the rest of a run, and looked at again in the next).
    ordered = {subscribed: sorted(subscribed, key=_by_value) for subscribed in set(subs.values())}
    # Per topic, its subscribers by load (built when first needed; entries of an older load are
    # dropped as they surface).
    lightest: dict[uuid.UUID, list[tuple[int, str]]] = {}

    def lightest_of(topic_id: uuid.UUID) -> list[tuple[int, str]]:
        heap = lightest.get(topic_id)
        if heap is None:
            heap = lightest[topic_id] = [(load[member_id], member_id) for member_id in subscribers[topic_id]]
            heapq.heapify(heap)
        return heap

    picker = _Picker(racks, rack_aware)
    moved = True
    while moved:
        moved = False
        # Loads only rise from the lowest during a run: nobody at most one above it can give.
        floor = min(load[member_id] for member_id in ids if subs[member_id])
        heaviest = [(-load[member_id], member_id) for member_id in ids if load[member_id] > floor + 1]
        heapq.heapify(heaviest)
        while heaviest:
            negative, donor = heapq.heappop(heaviest)
            if -negative != load[donor]:
                continue
            if load[donor] <= floor + 1:
                break
            receiver, receiver_topic = "", None
            for topic_id in sorted(owned[donor], key=_by_value):
                candidate = _top(lightest_of(topic_id), load)
                if load[candidate] + 2 <= load[donor] and (
                        receiver_topic is None or (load[candidate], candidate) < (load[receiver], receiver)):
                    receiver, receiver_topic = candidate, topic_id
            if receiver_topic is None:
                continue
            given = owned[donor][receiver_topic]
            p = picker.pick(given, donor, receiver_topic, rack_of[receiver], rack_of[donor])
            given.discard(p)
            if not given:
                del owned[donor][receiver_topic]
            owned[receiver].setdefault(receiver_topic, set()).add(p)
            picker.received(receiver, receiver_topic)
            load[donor] -= 1
            load[receiver] += 1
            moved = True
            for member_id in (donor, receiver):
                for topic_id in ordered[subs[member_id]]:
                    built = lightest.get(topic_id)
                    if built is not None:
                        heapq.heappush(built, (load[member_id], member_id))
                heapq.heappush(heaviest, (-load[member_id], member_id))
    return {member_id: {topic_id: frozenset(parts) for topic_id, parts in owned[member_id].items()}
            for member_id in ids}


def _top(heap: list[tuple[int, str]], load: dict[str, int]) -> str:
    """The least-loaded member of a heap whose stale entries (an older load) are dropped lazily."""
    while heap and heap[0][0] != load[heap[0][1]]:
        heapq.heappop(heap)
    return heap[0][1] if heap else ""


class _Picker:
    """Which partition a member gives up: rack-matched at its destination and not at its source
    first, then rack-matched at its destination, then the highest numbered. The order of a
    member's partitions of a topic is sorted once per destination rack and consumed while the
    member only gives (a member receiving a partition of the topic has it sorted again), so a run
    of moves from one member costs a sort, not a scan per move."""

    __slots__ = ("_racks", "_rack_aware", "_orders")

    def __init__(self, racks: Callable[[uuid.UUID, int], tuple[str, ...]], rack_aware: bool) -> None:
        self._racks = racks
        self._rack_aware = rack_aware
        self._orders: dict[tuple[str, uuid.UUID], dict[str | None, list[int]]] = {}

    def pick(self, parts: set[int], member_id: str, topic_id: uuid.UUID, to_rack: str | None,
             from_rack: str | None) -> int:
        if not self._rack_aware:
            to_rack = None
        by_rack = self._orders.setdefault((member_id, topic_id), {})
        order = by_rack.get(to_rack)
        if order is None:
            if to_rack is None:
                order = sorted(parts)
            else:
                racks = self._racks

                def rank(p: int) -> tuple[bool, bool, int]:
                    replicas = racks(topic_id, p)
                    return (to_rack in replicas, from_rack not in replicas, p)

                order = sorted(parts, key=rank)
            by_rack[to_rack] = order
        while order[-1] not in parts:  # given up already, through another destination's order
            order.pop()
        return order.pop()

    def received(self, member_id: str, topic_id: uuid.UUID) -> None:
        self._orders.pop((member_id, topic_id), None)
