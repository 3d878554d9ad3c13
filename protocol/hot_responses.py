"""Hand-written encoders for the responses on the coordinator's hot paths: OffsetCommit (v2-9),
OffsetFetch (v1-9), Heartbeat (v0-4) and ConsumerGroupHeartbeat (v0-1).

Why: building kafka-python's generic message objects and encoding them through its schema walker
cost about 80 us of a 10-partition OffsetFetch answer, more than everything else the server does
for it (issue #6 profile). These are plain tuples with the same field names as the schema (so
handlers and tests read them the same way) and an ``encode(version=...)`` that writes the body
in one pass. ``tests/protocol/test_hot_responses.py`` checks every version against kafka-python's
decoder of Kafka's JSON schemas, which stays the reference.

Layouts (Kafka's ``OffsetCommitResponse.json``, ``OffsetFetchResponse.json``,
``HeartbeatResponse.json``, ``ConsumerGroupHeartbeatResponse.json``, flexible from v0): ``throttle_time_ms`` from v3 (Heartbeat v1); flexible (KIP-482:
compact strings/arrays, length + 1 as an unsigned varint, and an empty tagged-field section after
every struct) from OffsetCommit v8, OffsetFetch v6, Heartbeat v4.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from .varints import encode_uvarint

__all__ = [
    "CommitPartition", "CommitTopic", "OffsetCommitAnswer",
    "FetchPartition", "FetchTopic", "FetchGroup", "OffsetFetchAnswer",
    "HeartbeatAnswer",
    "AssignedTopicPartitions", "ConsumerGroupAssignment", "ConsumerGroupHeartbeatAnswer",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_COMMIT_PARTITION = struct.Struct(">ih")
_FETCH_OFFSET = struct.Struct(">iq")  # partition_index, committed_offset
_FETCH_OFFSET_EPOCH = struct.Struct(">iqi")




def _string(out: list[bytes], text: str, flexible: bool) -> None:
    raw = text.encode()
    out.append(encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw)))
    out.append(raw)


def _nullable_string(out: list[bytes], text: str | None, flexible: bool) -> None:
    if text is None:
        out.append(b"\x00" if flexible else b"\xff\xff")
    else:
        _string(out, text, flexible)


def _array_length(out: list[bytes], n: int, flexible: bool) -> None:
    out.append(encode_uvarint(n + 1) if flexible else _I32.pack(n))


# --- OffsetCommit ----------------------------------------------------------------------------


class CommitPartition(NamedTuple):
    partition_index: int
    error_code: int


class CommitTopic(NamedTuple):
    name: str
    partitions: list[CommitPartition]


class OffsetCommitAnswer(NamedTuple):
    topics: list[CommitTopic]
    throttle_time_ms: int = 0

    def encode(self, version: int) -> bytes:
        flexible = version >= 8
        out: list[bytes] = []
        if version >= 3:
            out.append(_I32.pack(self.throttle_time_ms))
        _array_length(out, len(self.topics), flexible)
        pack = _COMMIT_PARTITION.pack
        tail = b"\x00" if flexible else b""
        for topic in self.topics:
            _string(out, topic.name, flexible)
            _array_length(out, len(topic.partitions), flexible)
            out.extend(pack(p, e) + tail for p, e in topic.partitions)
            out.append(tail)
        out.append(tail)
        return b"".join(out)


# --- OffsetFetch -----------------------------------------------------------------------------


class FetchPartition(NamedTuple):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


class FetchTopic(NamedTuple):
    name: str
    partitions: list[FetchPartition]


class FetchGroup(NamedTuple):
    group_id: str
    topics: list[FetchTopic]
    error_code: int = 0


class OffsetFetchAnswer(NamedTuple):
    """v1-7: ``topics`` and ``error_code`` answer the one group; v8+: ``groups``."""

    topics: list[FetchTopic] | None = None
    error_code: int = 0
    groups: list[FetchGroup] | None = None
    throttle_time_ms: int = 0

    def encode(self, version: int) -> bytes:
        flexible = version >= 6
        out: list[bytes] = []
        if version >= 3:
            out.append(_I32.pack(self.throttle_time_ms))
        if version >= 8:
            groups = self.groups or []
            _array_length(out, len(groups), flexible)
            for group in groups:
                _string(out, group.group_id, flexible)
                self._topics(out, group.topics, version, flexible)
                out.append(_I16.pack(group.error_code))
                out.append(b"\x00")
        else:
            self._topics(out, self.topics or [], version, flexible)
            if version >= 2:
                out.append(_I16.pack(self.error_code))
        if flexible:
            out.append(b"\x00")
        return b"".join(out)

    @staticmethod
    def _topics(out: list[bytes], topics: list[FetchTopic], version: int, flexible: bool) -> None:
        with_epoch = version >= 5
        tail = b"\x00" if flexible else b""
        _array_length(out, len(topics), flexible)
        for topic in topics:
            _string(out, topic.name, flexible)
            _array_length(out, len(topic.partitions), flexible)
            for p, offset, epoch, metadata, error in topic.partitions:
                out.append(_FETCH_OFFSET_EPOCH.pack(p, offset, epoch) if with_epoch else _FETCH_OFFSET.pack(p, offset))
                _nullable_string(out, metadata, flexible)
                out.append(_I16.pack(error))
                out.append(tail)
            out.append(tail)


# --- Heartbeat -------------------------------------------------------------------------------


class HeartbeatAnswer(NamedTuple):
    error_code: int
    throttle_time_ms: int = 0

    def encode(self, version: int) -> bytes:
        if version == 0:
            return _I16.pack(self.error_code)
        body = _I32.pack(self.throttle_time_ms) + _I16.pack(self.error_code)
        return body + b"\x00" if version >= 4 else body


# --- ConsumerGroupHeartbeat (KIP-848) ---------------------------------------------------------


class AssignedTopicPartitions(NamedTuple):
    topic_id: uuid.UUID
    partitions: list[int]


class ConsumerGroupAssignment(NamedTuple):
    topic_partitions: list[AssignedTopicPartitions]


_I32_I32 = struct.Struct(">ii")


class ConsumerGroupHeartbeatAnswer(NamedTuple):
    """A member's heartbeat answered (every version is flexible). A steady member's answer (no
    assignment) is most of a consumer group's traffic: one heartbeat per member every
    ``group.consumer.heartbeat.interval.ms``."""

    error_code: int
    error_message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: ConsumerGroupAssignment | None = None
    throttle_time_ms: int = 0

    def encode(self, version: int) -> bytes:
        out = [_I32.pack(self.throttle_time_ms), _I16.pack(self.error_code)]
        _nullable_string(out, self.error_message, True)
        _nullable_string(out, self.member_id, True)
        out.append(_I32_I32.pack(self.member_epoch, self.heartbeat_interval_ms))
        if self.assignment is None:
            out.append(b"\xff")  # a null nullable struct: int8 -1
        else:
            out.append(b"\x01")
            topics = self.assignment.topic_partitions
            out.append(encode_uvarint(len(topics) + 1))
            for topic in topics:
                out.append(topic.topic_id.bytes)
                out.append(encode_uvarint(len(topic.partitions) + 1))
                out.append(struct.pack(f">{len(topic.partitions)}i", *topic.partitions))
                out.append(b"\x00")
            out.append(b"\x00")
        out.append(b"\x00")
        return b"".join(out)
