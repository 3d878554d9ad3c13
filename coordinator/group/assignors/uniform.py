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
move one at a time from a member to a less-loaded subscriber of the same topic while that subscriber
has at least two fewer partitions. The result is Kafka's "balanced" for such groups: no partition's
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
        for topic_id, p in held_parts[:count - quota[index]]:
            remaining = own[topic_id] - {p}
            if remaining:
                own[topic_id] = remaining
            else:
                del own[topic_id]
            taken[topic_id].discard(p)
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

    # Then move partitions to members at least two below a holder of a partition they subscribe to.
    # ceiling[t] bounds the load of the holders of t from above (exact after a fruitless look), so
    # most members are passed over without looking at any holder; a pass without a move ends it.
    in_order = {subscribed: sorted(subscribed, key=_by_value) for subscribed in set(subs.values())}
    ordered_subs = {member_id: in_order[subs[member_id]] for member_id in ids}
    holders: dict[uuid.UUID, set[str]] = {topic_id: set() for topic_id in topic_ids}
    for member_id in ids:
        for topic_id in owned[member_id]:
            holders[topic_id].add(member_id)
    moved = True
    while moved:
        moved = False
        ceiling = {topic_id: max((load[h] for h in held), default=0) for topic_id, held in holders.items()}
        highest = max(load.values())
        for member_id in sorted(ids, key=lambda m: (load[m], m)):
            wanted = ordered_subs[member_id]
            while wanted and load[member_id] + 2 <= highest:
                need = load[member_id] + 2
                donor, donor_topic, donor_load = "", None, -1
                for topic_id in wanted:
                    if ceiling[topic_id] < need:
                        continue
                    top = 0
                    for other in holders[topic_id]:
                        other_load = load[other]
                        if other_load > top:
                            top = other_load
                        if other_load >= need and (other_load > donor_load
                                                   or (other_load == donor_load and other < donor)):
                            donor, donor_topic, donor_load = other, topic_id, other_load
                    ceiling[topic_id] = top
                if donor_topic is None:
                    break
                given = owned[donor][donor_topic]
                p = _pick(given, donor_topic, rack_of[member_id], rack_of[donor], racks) if rack_aware else max(given)
                given.discard(p)
                if not given:
                    del owned[donor][donor_topic]
                    holders[donor_topic].discard(donor)
                owned[member_id].setdefault(donor_topic, set()).add(p)
                holders[donor_topic].add(member_id)
                load[donor] -= 1
                load[member_id] += 1
                for topic_id in owned[member_id]:
                    ceiling[topic_id] = max(ceiling[topic_id], load[member_id])
                moved = True
    return {member_id: {topic_id: frozenset(parts) for topic_id, parts in owned[member_id].items()}
            for member_id in ids}


def _top(heap: list[tuple[int, str]], load: dict[str, int]) -> str:
    """The least-loaded member of a heap whose stale entries (an older load) are dropped lazily."""
    while heap and heap[0][0] != load[heap[0][1]]:
        heapq.heappop(heap)
    return heap[0][1] if heap else ""


def _pick(parts: set[int], topic_id: uuid.UUID, to_rack: str | None, from_rack: str | None,
          racks: Callable[[uuid.UUID, int], tuple[str, ...]]) -> int:
    """The partition to move: rack-matched at its destination and not at its source first, then
    rack-matched at its destination, then the highest numbered."""
    def rank(p: int) -> tuple[bool, bool, int]:
        replicas = racks(topic_id, p)
        return (to_rack in replicas, from_rack not in replicas, p)
    return max(parts, key=rank)
