"""A FetchResponse encoder whose record sets may be references to bytes held elsewhere.

The general codec needs every record set as a Python ``bytes``. A broker serving a large read
should instead let the operating system copy file ranges to the socket (``sendfile``). This
encoder therefore produces a list of *parts*: ``bytes`` for everything it encodes, and the
caller's own :class:`RecordsRef` objects in the places where record bytes go. The caller writes
the parts in order, sending each ``RecordsRef`` however it likes.

FetchResponse layout (FetchResponse.json; v4-v11 classic, v12+ flexible, v13+ topic ids)::

    ThrottleTimeMs:int32 ErrorCode:int16 (v7+) SessionId:int32 (v7+)
    Responses: [ Topic:string (v<13) | TopicId:uuid (v13+)
                 Partitions: [ PartitionIndex:int32 ErrorCode:int16 HighWatermark:int64
                               LastStableOffset:int64 LogStartOffset:int64 (v5+)
                               AbortedTransactions: nullable [ProducerId:int64 FirstOffset:int64]
                               PreferredReadReplica:int32 (v11+)
                               Records:nullable bytes  <tagged fields (v12+)> ]
                 <tagged fields (v12+)> ]
    <tagged fields (v12+)>

Flexible versions use compact arrays/strings/bytes (unsigned varint length + 1, 0 = null). No
tagged fields are written: diverging epochs, leader changes and snapshots do not occur on a
single node that leads every partition forever.

Records, although the schema calls them nullable, are never written as null: Kafka's broker
answers a partition without data, an error partition included, with an empty record set
(``MemoryRecords.EMPTY``, length 0), and librdkafka (2.16 at least) rejects a null one as
``invalid MessageSetSize -1``, a parse failure of the whole response that it retries without
end, so the partition's error never reaches the application.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from .varints import encode_uvarint

__all__ = ["RecordsRef", "FileRange", "FetchPartitionData", "FetchTopicData", "encode_fetch_response", "parts_size",
           "MIN_VERSION", "MAX_VERSION"]

MIN_VERSION = 4
MAX_VERSION = 17
FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")


class FileRange:
    """``length`` bytes of an open binary file from ``position``, sent with ``sendfile``.

    The file object must not be used for positional I/O elsewhere: ``loop.sendfile`` moves its
    position. ``release`` (if given) is called once the range was sent or the send was abandoned.
    """

    __slots__ = ("file", "position", "length", "release")

    def __init__(self, file: BinaryIO, position: int, length: int, release: Callable[[], None] | None = None) -> None:
        self.file = file
        self.position = position
        self.length = length
        self.release = release


@dataclass(frozen=True, slots=True)
class RecordsRef:
    """Record bytes the encoder does not hold: ``length`` bytes described by ``source``, the bytes
    themselves or a :class:`FileRange` (the server sends those with ``sendfile``)."""

    length: int
    source: bytes | FileRange


@dataclass(slots=True)
class FetchPartitionData:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    #: Empty by default, never null on the wire (see the module docstring); ``None`` is still
    #: accepted and encoded as empty.
    records: bytes | RecordsRef | None = b""


@dataclass(slots=True)
class FetchTopicData:
    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[FetchPartitionData] = field(default_factory=list)




def _array_len(n: int | None, flexible: bool) -> bytes:
    if flexible:
        return encode_uvarint(0 if n is None else n + 1)
    return _I32.pack(-1 if n is None else n)


def _string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return encode_uvarint(0) if flexible else _I16.pack(-1)
    raw = s.encode("utf-8")
    return (encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def encode_fetch_response(version: int, correlation_id: int, topics: list[FetchTopicData], *,
                          throttle_time_ms: int = 0, error_code: int = 0, session_id: int = 0) -> list[bytes | RecordsRef]:
    """The whole response frame (size prefix and response header included) as parts."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"FetchResponse version {version} outside {MIN_VERSION}..{MAX_VERSION}")
    flexible = version >= FIRST_FLEXIBLE
    parts: list[bytes | RecordsRef] = []
    buf = bytearray()
    buf += _I32.pack(correlation_id)
    if flexible:
        buf += b"\x00"  # response header v1: no tagged fields
    buf += _I32.pack(throttle_time_ms)
    if version >= 7:
        buf += struct.pack(">hi", error_code, session_id)
    buf += _array_len(len(topics), flexible)
    for topic in topics:
        if version >= FIRST_TOPIC_ID:
            buf += (topic.topic_id or uuid.UUID(int=0)).bytes
        else:
            buf += _string(topic.name, flexible)
        buf += _array_len(len(topic.partitions), flexible)
        for p in topic.partitions:
            buf += _PARTITION_V4.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                buf += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            buf += _array_len(None if aborted is None else len(aborted), flexible)
            for producer_id, first_offset in aborted or ():
                buf += struct.pack(">qq", producer_id, first_offset)
                if flexible:
                    buf += b"\x00"
            if version >= 11:
                buf += _I32.pack(p.preferred_read_replica)
            # None is written as an empty record set, not null: see the module docstring.
            records = b"" if p.records is None else p.records
            length = records.length if isinstance(records, RecordsRef) else len(records)
            buf += encode_uvarint(length + 1) if flexible else _I32.pack(length)
            if isinstance(records, RecordsRef):
                parts.append(bytes(buf))
                parts.append(records)
                buf = bytearray()
            else:
                buf += records
            if flexible:
                buf += b"\x00"  # partition tagged fields
        if flexible:
            buf += b"\x00"  # topic tagged fields
    if flexible:
        buf += b"\x00"  # response tagged fields
    parts.append(bytes(buf))
    size = parts_size(parts)
    parts.insert(0, _I32.pack(size))
    return parts


def parts_size(parts: list[bytes | RecordsRef]) -> int:
    return sum(p.length if isinstance(p, RecordsRef) else len(p) for p in parts)
