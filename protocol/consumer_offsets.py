"""Keys and values of the classic records in ``__consumer_offsets``.

Kept whole (~500 lines) while it holds the two classic record types and the primitive reader and
writer they share; the KIP-848 records are to go in a module of their own beside it.

Every record key is ``int16 version`` followed by a key struct, and the key version doubles as the
record type; a value is ``int16 version`` followed by a value struct, and a null value is a
tombstone (Kafka ``GroupCoordinatorRecordSerde``,
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorRecordSerde.java;
the record schemas: https://github.com/apache/kafka/tree/trunk/group-coordinator/src/main/resources/common/message).
This module knows the two record types of the classic protocol:

=========  ======================  =====================================================
key ver.   key                     value
=========  ======================  =====================================================
0, 1       OffsetCommitKey         OffsetCommitValue v0-v4 (v3 written, v1 with expiry)
2          GroupMetadataKey        GroupMetadataValue v0-v4 with MemberMetadata (v3 written)
=========  ======================  =====================================================

Other key versions (3-15 and later: KIP-848 consumer groups, KIP-932 share groups) raise
:class:`UnknownRecordVersion`, which a loader catches to skip the record with a warning, as Kafka
does for records "left over from an aborted upgrade".

Primitive encodings (Kafka protocol guide, "Protocol Primitive Types"): int16/32/64 big-endian;
``string`` = int16 length + UTF-8 (-1 = null where nullable); ``bytes`` = int32 length + data;
arrays = int32 count. Version 4 of both values is *flexible* (KIP-482, made so by KIP-915 so that
later changes are tagged fields an older broker can skip): strings, bytes and arrays carry an
unsigned varint of length + 1 (0 = null), and every struct ends with a tagged-field section
(unsigned varint count, then tag, size, data for each). We write no tagged fields and skip the
ones we read, since none are defined for these versions.

Bytes after the last field of a non-flexible struct are ignored, as Kafka's generated readers do.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .varints import VarintError, encode_uvarint, read_uvarint

__all__ = [
    "OFFSET_COMMIT_KEY_VERSION",
    "GROUP_METADATA_KEY_VERSION",
    "UnknownRecordVersion",
    "MalformedRecordError",
    "OffsetCommitKey",
    "GroupMetadataKey",
    "OffsetCommitValue",
    "MemberMetadata",
    "GroupMetadataValue",
    "RecordKey",
    "RecordValue",
    "encode_key",
    "decode_key",
    "encode_value",
    "decode_value",
    "decode_offset_commit_value",
    "decode_group_metadata_value",
    "serialize",
    "deserialize",
    "key_version",
    "decode_offset_commit_key",
    "offset_commit_fields",
    "OffsetCommitFields",
    "RecordReader",
    "RecordWriter",
]

#: Key version written for offset commits; 0 has the same layout and is still read.
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
#: Value versions a current broker writes (MetadataVersion.offsetCommitValueVersion and
#: groupMetadataValueVersion at IBP >= 2.3); version 1 is used for commits that carry an expiry.
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
_MAX_VALUE_VERSION = 4
_FLEXIBLE_FROM = 4


class UnknownRecordVersion(ValueError):
    """A key or value version this module does not know; loaders skip such records."""

    def __init__(self, what: str, version: int) -> None:
        super().__init__(f"unknown {what} version {version}")
        self.what = what
        self.version = version


class MalformedRecordError(ValueError):
    """Key or value bytes that do not parse as the version they claim."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset. ``leader_epoch`` -1 = unknown (v3+ only); ``expire_timestamp`` exists
    only in v1, written when a client asked for a retention time (OffsetCommit v2-v4)."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member of a classic group. ``subscription`` holds the member's metadata for the chosen
    protocol only; ``assignment`` what the leader gave it in SyncGroup.

    Version 0 has no rebalance timeout; reading it we use the session timeout, as Kafka's
    loader does. ``group_instance_id`` (KIP-345) exists from v3.
    """

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A classic group after a rebalance (or its creation). ``current_state_timestamp`` (KIP-211,
    v2+) is -1 when unknown."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = ()


RecordKey = OffsetCommitKey | GroupMetadataKey
RecordValue = OffsetCommitValue | GroupMetadataValue


# ---------------------------------------------------------------------------------------------
# Reading

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Reader:
    """A cursor over one key or value; every read checks bounds and raises MalformedRecordError."""

    __slots__ = ("data", "pos", "flexible")

    def __init__(self, data: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.data = data
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise MalformedRecordError(f"needs {n} bytes at {self.pos}, {len(self.data) - self.pos} left")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def _fixed(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise MalformedRecordError(f"truncated at byte {self.pos}")
        (value,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return int(value)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except VarintError as exc:
            raise MalformedRecordError(str(exc)) from None
        return value

    def _length(self, wide: bool) -> int:
        """Length of a string (int16) or bytes/array (int32); compact forms in flexible versions."""
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        n = self._length(wide=False)
        if n < 0:
            if n != -1:
                raise MalformedRecordError(f"string length {n}")
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedRecordError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise MalformedRecordError("null in a non-nullable string")
        return value

    def bytes_(self) -> bytes:
        n = self._length(wide=True)
        if n < 0:
            raise MalformedRecordError("null in a non-nullable bytes field")
        return self._take(n)

    def array_length(self) -> int:
        n = self._length(wide=True)
        if n < 0:
            raise MalformedRecordError("null in a non-nullable array")
        return n

    def tagged_fields(self) -> None:
        """Skip a struct's tagged fields: none are defined for these versions."""
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


def _version(data: bytes | bytearray | memoryview, what: str) -> tuple[bytes, int]:
    data = bytes(data)
    if len(data) < 2:
        raise MalformedRecordError(f"{what} shorter than its 2-byte version")
    return data, _I16.unpack_from(data)[0]


def decode_key(data: bytes | bytearray | memoryview) -> RecordKey:
    """Decode a record key. Raises UnknownRecordVersion for record types other than the classic
    two, MalformedRecordError for bytes that do not parse."""
    data, version = _version(data, "key")
    r = _Reader(data, 2)
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.string())
    raise UnknownRecordVersion("record key", version)


# --- hot paths -------------------------------------------------------------------------------
# Loading a partition decodes every OffsetCommit key in its log, and the offsets cache keeps each
# value as the bytes the log holds (see ``coordinator/group/offset_manager.py``), decoding them on
# read. These two functions do that for the layouts a broker writes with straight ``struct``
# calls, and hand anything else (older versions, flexible v4, malformed bytes) to the general
# reader above, which stays the reference: tests check both agree on every version.

_KEY_HEAD = struct.Struct(">hh")
_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length

#: (offset, leader_epoch, metadata, commit_timestamp, expire_timestamp) of an OffsetCommitValue.
OffsetCommitFields = tuple[int, int, str, int, "int | None"]


def key_version(data: bytes) -> int:
    """The record type of a key: 0/1 offset commit, 2 group metadata, others unknown here."""
    if len(data) < 2:
        raise MalformedRecordError("key shorter than its 2-byte version")
    version: int = _I16.unpack_from(data)[0]
    return version


def decode_offset_commit_key(data: bytes) -> tuple[str, str, int]:
    """``(group, topic, partition)`` of an OffsetCommit key (version 0 or 1)."""
    try:
        version, glen = _KEY_HEAD.unpack_from(data)
        if version in (0, 1) and glen >= 0:
            p = 4 + glen
            tlen = _I16.unpack_from(data, p)[0]
            q = p + 2 + tlen
            if tlen >= 0 and len(data) >= q + 4:
                return data[4:p].decode(), data[p + 2:q].decode(), _I32.unpack_from(data, q)[0]
    except (struct.error, UnicodeDecodeError):
        pass
    key = decode_key(data)  # raises the precise error
    if not isinstance(key, OffsetCommitKey):
        raise MalformedRecordError("not an OffsetCommit key")
    return key.group, key.topic, key.partition


def offset_commit_fields(data: bytes) -> OffsetCommitFields:
    """The fields of an OffsetCommitValue, without building the dataclass."""
    if len(data) >= 24 and data[0] == 0 and data[1] == OFFSET_COMMIT_VALUE_VERSION:
        _v, offset, leader_epoch, mlen = _V3_HEAD.unpack_from(data)
        if 0 <= mlen <= len(data) - 24:
            try:
                metadata = data[16:16 + mlen].decode()
            except UnicodeDecodeError:
                raise MalformedRecordError("OffsetCommitValue metadata is not UTF-8") from None
            return offset, leader_epoch, metadata, _I64.unpack_from(data, 16 + mlen)[0], None
    value = decode_offset_commit_value(data)
    return value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp


def decode_offset_commit_value(data: bytes | bytearray | memoryview) -> OffsetCommitValue:
    data, version = _version(data, "value")
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise UnknownRecordVersion("OffsetCommitValue", version)
    r = _Reader(data, 2, flexible=version >= _FLEXIBLE_FROM)
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else None
    r.tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def _read_member(r: _Reader, version: int) -> MemberMetadata:
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout = r.int32() if version >= 1 else None
    session_timeout = r.int32()
    subscription = r.bytes_()
    assignment = r.bytes_()
    r.tagged_fields()
    if rebalance_timeout is None:
        rebalance_timeout = session_timeout
    return MemberMetadata(
        member_id, client_id, client_host, rebalance_timeout, session_timeout, subscription, assignment, instance_id
    )


def decode_group_metadata_value(data: bytes | bytearray | memoryview) -> GroupMetadataValue:
    data, version = _version(data, "value")
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise UnknownRecordVersion("GroupMetadataValue", version)
    r = _Reader(data, 2, flexible=version >= _FLEXIBLE_FROM)
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else -1
    count = r.array_length()
    # Each member takes at least 22 bytes; a count beyond that is garbage, not a huge group.
    if count > len(data) - r.pos:
        raise MalformedRecordError(f"member count {count} cannot fit")
    members = tuple(_read_member(r, version) for _ in range(count))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp, members)


def decode_value(key: RecordKey, data: bytes | bytearray | memoryview | None) -> RecordValue | None:
    """Decode the value that goes with ``key``; ``None`` (a tombstone) stays ``None``."""
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return decode_offset_commit_value(data)
    return decode_group_metadata_value(data)


def deserialize(
    key: bytes | bytearray | memoryview, value: bytes | bytearray | memoryview | None
) -> tuple[RecordKey, RecordValue | None]:
    """Key and value bytes of one record to typed values (``None`` value = tombstone)."""
    typed_key = decode_key(key)
    return typed_key, decode_value(typed_key, value)


# ---------------------------------------------------------------------------------------------
# Writing


class _Writer:
    __slots__ = ("out", "flexible")

    def __init__(self, version: int, flexible: bool = False) -> None:
        self.out = bytearray(_I16.pack(version))
        self.flexible = flexible

    def int32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        self.out += encode_uvarint(v)

    def _length(self, n: int, wide: bool) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        elif wide:
            self.out += _I32.pack(n)
        else:
            if n > 0x7FFF:
                raise ValueError(f"string of {n} bytes does not fit an int16 length")
            self.out += _I16.pack(n)

    def string(self, s: str | None) -> None:
        if s is None:
            self._length(-1, wide=False)
            return
        raw = s.encode("utf-8")
        self._length(len(raw), wide=False)
        self.out += raw

    def bytes_(self, b: bytes) -> None:
        self._length(len(b), wide=True)
        self.out += b

    def tagged_fields(self) -> None:
        if self.flexible:
            self.out.append(0)  # no tagged fields


#: The primitive reader and writer, for the KIP-848 records in ``consumer_group_records``.
RecordReader = _Reader
RecordWriter = _Writer


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        group = key.group.encode()
        topic = key.topic.encode()
        if len(group) > 0x7FFF or len(topic) > 0x7FFF:
            raise ValueError("group or topic does not fit an int16 length")
        return b"".join((_KEY_HEAD.pack(OFFSET_COMMIT_KEY_VERSION, len(group)), group,
                         _I16.pack(len(topic)), topic, _I32.pack(key.partition)))
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return bytes(w.out)


def _encode_offset_commit_value(value: OffsetCommitValue, version: int | None) -> bytes:
    if version is None:
        version = OFFSET_COMMIT_VALUE_VERSION if value.expire_timestamp is None else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    if version == OFFSET_COMMIT_VALUE_VERSION:  # the one every commit writes: one pack
        metadata = value.metadata.encode()
        if len(metadata) <= 0x7FFF:
            return b"".join((_V3_HEAD.pack(version, value.offset, value.leader_epoch, len(metadata)), metadata,
                             _I64.pack(value.commit_timestamp)))
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise UnknownRecordVersion("OffsetCommitValue", version)
    w = _Writer(version, flexible=version >= _FLEXIBLE_FROM)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(-1 if value.expire_timestamp is None else value.expire_timestamp)
    w.tagged_fields()
    return bytes(w.out)


def _encode_group_metadata_value(value: GroupMetadataValue, version: int | None) -> bytes:
    if version is None:
        version = GROUP_METADATA_VALUE_VERSION
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise UnknownRecordVersion("GroupMetadataValue", version)
    w = _Writer(version, flexible=version >= _FLEXIBLE_FROM)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w._length(len(value.members), wide=True)
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tagged_fields()
    w.tagged_fields()
    return bytes(w.out)


def encode_value(value: RecordValue, version: int | None = None) -> bytes:
    """Encode a value at ``version``, by default the one a current broker writes.

    Fields the chosen version lacks are dropped, as Kafka does for its "ignorable" fields (all of
    the version-dependent ones here are).
    """
    if isinstance(value, OffsetCommitValue):
        return _encode_offset_commit_value(value, version)
    return _encode_group_metadata_value(value, version)


def serialize(key: RecordKey, value: RecordValue | None) -> tuple[bytes, bytes | None]:
    """Record key and value bytes; ``value=None`` makes a tombstone."""
    return encode_key(key), None if value is None else encode_value(value)
