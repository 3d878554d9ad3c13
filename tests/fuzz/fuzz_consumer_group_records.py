"""KIP-848 consumer-group records (``protocol/consumer_group_records.py``) and their replay into a
group shard (``coordinator/group/shard.py``, ``coordinator/group/consumer/replay.py``).

Edge: every consumer-group record (key versions 3-8 and 16) a ``__consumer_offsets`` partition's
log, a replica's copy of it or a snapshot hands to ``GroupCoordinatorShard.replay``, alone and in
any order, mixed with the classic records (OffsetCommit, GroupMetadata) of the same group ids.

Properties asserted on any bytes:

1. Decoding a key, or a key and its value, returns a value or raises ``MalformedRecordError`` /
   ``UnknownRecordVersion``; nothing else.
2. Whatever decodes re-encodes to bytes that decode to the same value: what the coordinator reads
   it can write back (a snapshot re-serialises loaded state).
3. Any sequence of records replays into a fresh shard either to its end or until a record raises
   ``MalformedRecordError`` or ``NotAConsumerGroupError`` (a consumer-group record of an id whose
   classic GroupMetadata is live: the load fails, as in Kafka); ``UnknownRecordVersion`` is
   skipped as the loader skips it. No other exception, whatever the order: a
   CurrentMemberAssignment for a member without MemberMetadata, a TargetAssignmentMember for an
   unknown group, tombstones before values, a classic record after a consumer group's records.
4. After a whole replay and ``on_loaded``, the shard's ``snapshot_records()`` replay into another
   fresh shard without error and give the same state: the consumer groups (every field their
   records determine), the classic groups' records and the committed offsets. Two departures
   only logs no coordinator writes can cause are tolerated, each described where it is
   (:func:`_claimed_twice`, :func:`_unrecorded`): the indexes of a group in which two members
   claimed one instance id or partition, and a group left with no record at all (created by a
   value, then every record tombstoned without the ConsumerGroupMetadata tombstone that ends a
   group in Kafka's order).

The first input byte picks the mode:

* ``KEY``: the rest is a record key (properties 1, 2).
* ``PAIR``: a two-byte key length, the key, then the value; an empty value is a tombstone.
* ``LOG``: records, each ``uint16 key length, key, int32 value length (-1: tombstone), value``,
  replayed in order (properties 1-4); a truncated last record is dropped.
* ``OPS``: 4-byte operations, each building one typed record from a small alphabet of group ids,
  member ids, instance ids, topics and regexes (:func:`_op_record`), so that random bytes are
  sequences of valid records of the same few groups and members: properties 3 and 4 on orders a
  real log may never hold, which random bytes in ``LOG`` mode rarely reach.

Seeds are the records a real shard writes: the consumer-group test context
(``tests/coordinator/group/consumer/context.py``) runs joins, a regex subscription, a static
member leaving and rejoining, fencing, a deleted group, offset commits and a classic group, and
its log is cut into seeds for every mode.
"""

from __future__ import annotations

import logging
import struct
import sys
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from coordinator.group.config import GroupConfig
from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.consumer.replay import NotAConsumerGroupError
from coordinator.group.coordinator_type import serialize_record
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.group.topics_image import StaticTopicsImage
from protocol import consumer_group_records as cgr
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MalformedRecordError,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordVersion,
)
from tests.fuzz.harness import Finding, quiet

NAME = "consumer_group_records"
INSTRUMENT = ("protocol.consumer_group_records", "protocol.consumer_offsets", "coordinator.group.shard",
              "coordinator.group.consumer", "coordinator.group.group_manager", "coordinator.group.offset_manager")

OURS = (MalformedRecordError, UnknownRecordVersion)
KEY, PAIR, LOG, OPS = range(4)
_NOW_MS = 1_700_000_000_000

# --- the shard ---------------------------------------------------------------------------------


class _Clock:
    def now_ms(self) -> int:
        return _NOW_MS


class _Timer:
    """Loading only schedules (session and rebalance timeouts, the expiry job); nothing runs them."""

    def __init__(self) -> None:
        self.keys: dict[str, Callable[[], Any]] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], Any], *, name: str = "timer") -> None:
        self.keys[key] = operation

    def cancel(self, key: str) -> None:
        self.keys.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.keys


def _new_shard() -> GroupCoordinatorShard:
    return GroupCoordinatorShard(GroupConfig(), _Clock(), _Timer(), topics=StaticTopicsImage())


def _claimed_twice(group: ConsumerGroup) -> bool:
    """Whether two members of the group claim one instance id or one partition (assigned or
    pending revocation). No coordinator writes such records; Kafka fails the load on the second
    (``ConsumerGroup.addPartitionEpochs``: "Cannot set the epoch of ... because the partition is
    still owned at epoch ..."), this shard takes them, and its indexes of static members and of
    partition owners then depend on the order the claims replayed in (even once the members no
    longer conflict), which a snapshot does not keep."""
    instances: set[str] = set()
    partitions: set[tuple[uuid.UUID, int]] = set()
    for member in group.members.values():
        if member.instance_id is not None:
            if member.instance_id in instances:
                return True
            instances.add(member.instance_id)
        for source in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, parts in source.items():
                for p in parts:
                    if (topic_id, p) in partitions:
                        return True
                    partitions.add((topic_id, p))
    return False


def _unrecorded(shard: GroupCoordinatorShard) -> set[str]:
    """Consumer groups no record describes any more: a value created them and tombstones, out of
    Kafka's order (which ends a group with its ConsumerGroupMetadata tombstone), took back every
    record but left the group. A snapshot writes nothing for them, so they do not come back;
    without them, the id is the Empty classic group of its offsets, if it has any."""
    return {gid for gid, g in shard.consumer_manager.groups.items()
            if not (g.has_epoch_record or g.has_assignment_record or g.members or g.target or g.regexes
                    or g.partition_metadata is not None)}


def _state(shard: GroupCoordinatorShard, claimed_twice: set[str], unrecorded: set[str]) -> tuple[object, ...]:
    """Everything the records determine: the consumer groups field by field (members compare
    whole, their assignment epochs included), the classic groups' records, the offsets, and which
    classic group ids a loaded shard serves. A group's indexes of static members and partition
    owners are compared only when no two of its members ever claimed the same
    (:func:`_claimed_twice`, ``claimed_twice``). Group ids in ``unrecorded`` are left out
    (:func:`_unrecorded`)."""
    consumer = {}
    for gid, g in shard.consumer_manager.groups.items():
        if gid in unrecorded:
            continue
        indexes = None if gid in claimed_twice else (dict(g.owners), dict(g.static_members))
        consumer[gid] = (g.group_epoch, g.metadata_hash, g.creation_time_ms, g.assignment_epoch, dict(g.members),
                         {m: dict(a) for m, a in g.target.items()}, indexes, dict(g.regexes),
                         g.partition_metadata, g.has_epoch_record, g.has_assignment_record)
    return consumer, sorted(set(shard.group_manager.groups) - unrecorded), shard.hard_state()


def _replay(records: Iterable[tuple[bytes, bytes | None]], claimed_twice: set[str] | None = None
            ) -> GroupCoordinatorShard | None:
    """Property 3: a fresh shard loaded from ``records``, or None when a record failed the load.
    Adds to ``claimed_twice`` the groups in which two members claimed one instance id or
    partition at some point of the replay."""
    shard = _new_shard()
    groups = shard.consumer_manager.groups
    for key, value in records:
        try:
            shard.replay(key, value)
        except UnknownRecordVersion:
            continue  # the loader skips it (coordinator/runtime/loader.py)
        except (MalformedRecordError, NotAConsumerGroupError):
            return None
        if claimed_twice is not None:
            claimed_twice.update(gid for gid, g in groups.items() if gid not in claimed_twice and _claimed_twice(g))
    shard.on_loaded()
    return shard


def _check_log(records: list[tuple[bytes, bytes | None]]) -> None:
    claimed_twice: set[str] = set()
    shard = _replay(records, claimed_twice)
    if shard is None:
        return
    unrecorded = _unrecorded(shard)
    state = _state(shard, claimed_twice, unrecorded)
    snapshot = list(shard.snapshot_records())
    # Property 4: what the shard writes for its state is read back without error, to that state.
    again = _new_shard()
    for key, value in snapshot:
        try:
            again.replay(key, value)
        except OURS as exc:
            raise Finding(f"a snapshot record of a loaded state does not replay: {exc!r} for {key!r}") from exc
    again.on_loaded()
    reloaded = _state(again, claimed_twice, unrecorded)
    if reloaded != state:
        raise Finding(f"loaded state snapshotted and replayed became\n{reloaded!r}\nwas\n{state!r}")


# --- the codecs --------------------------------------------------------------------------------


def _check_key(raw: bytes) -> None:
    try:
        key = cgr.decode_key(raw)
    except OURS:
        return
    again = cgr.decode_key(cgr.encode_key(key))
    if again != key:
        raise Finding(f"key re-encoded and decoded again: {again!r}, first decoded: {key!r}")


def _check_pair(key_raw: bytes, value_raw: bytes | None) -> None:
    try:
        key = cgr.decode_key(key_raw)
        value = cgr.decode_value(key, value_raw)
    except OURS:
        return
    if value is None:
        return
    again = cgr.decode_value(key, cgr.encode_value(value))
    if again != value:
        raise Finding(f"value re-encoded and decoded again: {again!r}, first decoded: {value!r}")
    # The shard's own decoding agrees with the codec: a record that decodes also replays.
    shard = _new_shard()
    shard.replay(key_raw, value_raw)


def _split_pair(data: bytes) -> tuple[bytes, bytes | None] | None:
    if len(data) < 2:
        return None
    (n,) = struct.unpack_from(">H", data)
    return data[2 : 2 + n], data[2 + n :] or None


def _frame(key: bytes, value: bytes | None) -> bytes:
    return (struct.pack(">H", len(key)) + key
            + (struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value))


def _split_log(data: bytes) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    pos = 0
    while pos + 6 <= len(data):
        (klen,) = struct.unpack_from(">H", data, pos)
        key = data[pos + 2 : pos + 2 + klen]
        pos += 2 + klen
        if pos + 4 > len(data):
            break
        (vlen,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if vlen < 0:
            out.append((key, None))
            continue
        if pos + vlen > len(data):
            break
        out.append((key, data[pos : pos + vlen]))
        pos += vlen
    return out


# --- OPS: typed records from a small alphabet ---------------------------------------------------

_GROUPS = ("g0", "g1", "g2")
_MEMBERS = ("m0", "m1", "m2", "m3")
_INSTANCES = (None, "i0", "i1")
_TOPIC_IDS = (uuid.UUID(int=1), uuid.UUID(int=2))
_TOPIC_NAMES = ("foo", "bar")
_REGEXES = (None, "fo.*", "b.*")
_OP_SIZE = 4
_OP_KINDS = 9


def _tps(mask: int, topic: int, epochs: int | None) -> tuple[cgr.TopicPartitions, ...]:
    parts = tuple(p for p in range(4) if mask >> p & 1)
    if not parts:
        return ()
    return (cgr.TopicPartitions(_TOPIC_IDS[topic % 2], parts,
                                None if epochs is None else tuple(epochs + p for p in parts)),)


def _op_record(op: bytes) -> tuple[object, object | None]:
    """One 4-byte operation: kind (bit 7: a tombstone), then group (bits 0-1) and member (bits
    2-3), then two parameter bytes ``a`` and ``b``."""
    kind, ids, a, b = op
    tombstone = bool(kind & 0x80)
    group = _GROUPS[(ids & 3) % len(_GROUPS)]
    member = _MEMBERS[ids >> 2 & 3]
    key: object
    value: object
    match kind % _OP_KINDS:
        case 0:
            key = cgr.ConsumerGroupMetadataKey(group)
            value = cgr.ConsumerGroupMetadataValue(a, b % 3, -1 if b & 0x80 else _NOW_MS)
        case 1:
            key = cgr.ConsumerGroupPartitionMetadataKey(group)
            value = cgr.ConsumerGroupPartitionMetadataValue(tuple(
                cgr.TopicMetadata(_TOPIC_IDS[t], _TOPIC_NAMES[t], a % 5,
                                  tuple(cgr.PartitionMetadata(p, ("r0",)) for p in range(b % 3)))
                for t in range(2) if b >> (4 + t) & 1))
        case 2:
            key = cgr.ConsumerGroupMemberMetadataKey(group, member)
            value = cgr.ConsumerGroupMemberMetadataValue(
                _INSTANCES[a % 3], "rack" if a & 4 else None, "client", "/127.0.0.1",
                tuple(n for t, n in enumerate(_TOPIC_NAMES) if b >> t & 1), _REGEXES[(b >> 2) % 3],
                30_000, "uniform" if a & 8 else None,
                cgr.ClassicMemberMetadata(10_000, (cgr.ClassicProtocol("range", b"\x00\x01"),)) if a & 16 else None)
        case 3:
            key = cgr.ConsumerGroupTargetAssignmentMetadataKey(group)
            value = cgr.ConsumerGroupTargetAssignmentMetadataValue(a)
        case 4:
            key = cgr.ConsumerGroupTargetAssignmentMemberKey(group, member)
            value = cgr.ConsumerGroupTargetAssignmentMemberValue(_tps(a, b, None) + _tps(a >> 4, b + 1, None))
        case 5:
            key = cgr.ConsumerGroupCurrentMemberAssignmentKey(group, member)
            value = cgr.ConsumerGroupCurrentMemberAssignmentValue(
                a % 8 - 2, a % 8 - 3, (0, 1, 2, 127, 5)[b % 5], _tps(a >> 3, b >> 3, None if b & 0x80 else a % 8),
                _tps(b >> 4, b >> 3 ^ 1, None))
        case 6:
            key = cgr.ConsumerGroupRegularExpressionKey(group, _REGEXES[1 + a % 2] or "")
            value = cgr.ConsumerGroupRegularExpressionValue(
                tuple(n for t, n in enumerate(_TOPIC_NAMES) if b >> t & 1), b >> 2, _NOW_MS)
        case 7:
            key = GroupMetadataKey(group)
            members = () if a & 1 == 0 else (MemberMetadata(
                member, "client", "/127.0.0.1", 30_000, 10_000, b"", b"", _INSTANCES[b % 3]),)
            value = GroupMetadataValue("consumer", a >> 1, "range" if members else None,
                                       member if members else None, _NOW_MS, members)
        case _:
            key = OffsetCommitKey(group, _TOPIC_NAMES[a % 2], b % 4)
            value = OffsetCommitValue(a * 256 + b, "", _NOW_MS)
    return key, None if tombstone else value


def _ops(data: bytes) -> list[tuple[bytes, bytes | None]]:
    return [serialize_record(*_op_record(data[i : i + _OP_SIZE]))
            for i in range(0, len(data) - _OP_SIZE + 1, _OP_SIZE)]


# --- seeds -------------------------------------------------------------------------------------


def _scenario_log() -> list[tuple[object, object | None]]:
    """The typed records a real shard writes through a few KIP-848 flows."""
    from tests.coordinator.group.consumer.context import ConsumerGroupTestContext

    ctx = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0))
    ctx.topics.create("foo", 4)
    ctx.topics.create("bar", 2)
    first = ctx.cg_heartbeat("g", "m1", topics=["foo", "bar"])
    ctx.cg_heartbeat("g", "m2", topics=["foo"], instance_id="i1", rack_id="r1", assignor="range")
    ctx.cg_heartbeat("g", "m3", regex="b.*", topics=None)
    ctx.cg_heartbeat("g", "m1", first.member_epoch, owned={"foo": [0, 1, 2, 3], "bar": [0, 1]})
    ctx.cg_heartbeat("g", "m2", -2, instance_id="i1")  # a static member leaves for a while
    ctx.cg_heartbeat("g", "m4", topics=["foo"], instance_id="i1")  # and comes back under a new id
    ctx.cg_heartbeat("g", "m3", -1)
    ctx.cg_heartbeat("h", "x1", topics=["bar"])
    ctx.commit_offsets("h", {("bar", 0): 5})
    ctx.cg_heartbeat("h", "x1", -1)
    ctx.delete_groups("h")
    ctx.commit_offsets("g", {("foo", 1): 7})
    ctx.stable_group("c", 1)
    ctx.commit_offsets("c", {("foo", 0): 3})
    ctx.sleep(60_000)  # sessions expire: members are fenced
    return list(ctx.log)


def seeds() -> list[bytes]:
    log = _scenario_log()
    raw = [serialize_record(k, v) for k, v in log]
    consumer = [(k, v) for k, v in raw if struct.unpack_from(">h", k)[0] in cgr.RECORD_TYPES]
    out = []
    for key in dict.fromkeys(k for k, _ in consumer):  # each key once
        out.append(bytes([KEY]) + key)
    for key, value in dict.fromkeys(consumer):
        out.append(bytes([PAIR]) + struct.pack(">H", len(key)) + key + (value or b""))
    # The log in pieces of a few records (mutations stay cheap), and whole.
    for i in range(0, len(raw), 8):
        out.append(bytes([LOG]) + b"".join(_frame(k, v) for k, v in raw[i : i + 8]))
    out.append(bytes([LOG]) + b"".join(_frame(k, v) for k, v in raw))
    shard = _replay(raw)
    assert shard is not None
    out.append(bytes([LOG]) + b"".join(_frame(k, v) for k, v in shard.snapshot_records()))
    # Typed operations: a member's records in Kafka's order, then out of order and tombstoned.
    out.append(bytes([OPS]) + bytes([0, 0, 1, 0, 2, 4, 1, 0x0D, 4, 4, 0x0F, 0, 3, 0, 1, 0, 5, 4, 0x79, 0, 8, 4, 1, 2]))
    out.append(bytes([OPS]) + bytes([5, 9, 0x39, 0, 4, 1, 0x11, 0, 0x82, 5, 0, 0, 6, 2, 1, 3, 7, 2, 3, 1]))
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, rest = data[0] % 4, data[1:]
    with quiet(logging.CRITICAL):
        try:
            if mode == KEY:
                _check_key(rest)
            elif mode == PAIR:
                pair = _split_pair(rest)
                if pair is not None:
                    _check_pair(*pair)
            elif mode == LOG:
                _check_log(_split_log(rest))
            else:
                _check_log(_ops(rest))
        except OURS as exc:
            # The checks catch a first decode's refusal themselves: one reaching here came from
            # decoding our own re-encoding (property 2) or replaying what decoded (property 3).
            raise Finding(f"accepted bytes refused on a second decode: {exc!r}") from exc


if __name__ == "__main__":
    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
