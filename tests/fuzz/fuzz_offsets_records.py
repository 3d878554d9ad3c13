"""``__consumer_offsets`` record keys and values (``protocol/consumer_offsets.py``).

Edge: every key and value a coordinator partition's log (or a replica's copy of it, or a snapshot)
hands to ``replay``, for both classic record types (OffsetCommit, GroupMetadata) at every key and
value version, including the flexible v4 values with tagged fields.

Properties asserted on any bytes:

1. Decoding returns a value or raises ``MalformedRecordError`` / ``UnknownRecordVersion`` (the
   loader skips the second and fails the load on the first, as Kafka does); nothing else.
2. The hot-path decoders the shard uses (``decode_offset_commit_key``, ``offset_commit_fields``)
   agree with the reference reader on every input: same value, or both refuse. They exist only
   for speed, so any difference is a bug in one of them.
3. Whatever decodes re-encodes at the same version to bytes that decode to the same value: what
   the coordinator reads it can write back (a snapshot of loaded state re-serialises it).

The first input byte picks the decoder: a key, an OffsetCommit value, a GroupMetadata value, or a
key/value pair (two-byte key length, then key, then value; an empty remainder is a tombstone).
"""

from __future__ import annotations

import struct
import sys

from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MalformedRecordError,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordVersion,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_key,
    decode_offset_commit_value,
    deserialize,
    encode_key,
    encode_value,
    offset_commit_fields,
)
from tests.fuzz.harness import Finding

NAME = "offsets_records"
INSTRUMENT = ("protocol.consumer_offsets",)

#: The decoders' own errors: property 1 allows these and nothing else.
OURS = (MalformedRecordError, UnknownRecordVersion)

KEY, OFFSET_VALUE, GROUP_VALUE, PAIR = range(4)
_MAX_VALUE_VERSION = 4


def _pair(key: bytes, value: bytes | None) -> bytes:
    return struct.pack(">H", len(key)) + key + (value or b"")


def seeds() -> list[bytes]:
    """The module's own encodings of every record type at every version, each framed for the mode
    that decodes it."""
    keys = [OffsetCommitKey("group-1", "topic", 3), OffsetCommitKey("", "t", 0), GroupMetadataKey("été")]
    # Version 0 of the OffsetCommit key has the same layout as 1; encode_key writes 1.
    v0_key = b"\x00\x00" + encode_key(keys[0])[2:]
    offsets = [OffsetCommitValue(100, "md", 1000, 5), OffsetCommitValue(7, "", -1, -1, 2000)]
    members = (
        MemberMetadata("m-1", "client", "/10.0.0.1", 30_000, 10_000, b"\x00\x01sub", b"\x00\x01asg", "inst"),
        MemberMetadata("m-2", "client", "/10.0.0.2", 30_000, 10_000, b"", b"", None),
    )
    groups = [GroupMetadataValue("consumer", 3, "range", "m-1", 12345, members),
              GroupMetadataValue("", 0, None, None)]
    out = [bytes([KEY]) + encode_key(k) for k in keys] + [bytes([KEY]) + v0_key]
    for version in range(_MAX_VALUE_VERSION + 1):
        for o in offsets:
            raw = encode_value(o, version)
            out.append(bytes([OFFSET_VALUE]) + raw)
            out.append(bytes([PAIR]) + _pair(encode_key(keys[0]), raw))
        for g in groups:
            raw = encode_value(g, version)
            out.append(bytes([GROUP_VALUE]) + raw)
            out.append(bytes([PAIR]) + _pair(encode_key(keys[2]), raw))
    out.append(bytes([PAIR]) + _pair(encode_key(keys[1]), None))  # tombstone
    # A flexible value with a tagged field, which a reader must skip.
    tagged = encode_value(offsets[0], 4)[:-1] + b"\x01\x05\x02hi"
    out.append(bytes([OFFSET_VALUE]) + tagged)
    return out


def _same(again: object, value: object) -> None:
    if again != value:
        raise Finding(f"re-encoded and decoded again: {again!r}, first decoded: {value!r}")


def _value_version(raw: bytes) -> int:
    return struct.unpack_from(">h", raw)[0]


def _check_key(raw: bytes) -> None:
    try:
        key = decode_key(raw)
    except OURS as exc:
        # Property 2: the hot path refuses what the reference refuses (a GroupMetadata key is
        # refused by it as "not an OffsetCommit key", also MalformedRecordError).
        try:
            fast = decode_offset_commit_key(raw)
        except OURS:
            return
        raise Finding(f"decode_offset_commit_key accepted {fast!r}; decode_key raised {exc!r}") from None
    if isinstance(key, OffsetCommitKey):
        fast = decode_offset_commit_key(raw)
        if fast != (key.group, key.topic, key.partition):
            raise Finding(f"decode_offset_commit_key gave {fast!r}, decode_key {key!r}")
    else:
        try:
            fast = decode_offset_commit_key(raw)
        except MalformedRecordError:
            pass
        else:
            raise Finding(f"decode_offset_commit_key accepted a GroupMetadata key as {fast!r}")
    # Property 3 (encode_key writes OffsetCommit keys at version 1, the same layout as 0).
    _same(decode_key(encode_key(key)), key)


def _check_offset_value(raw: bytes) -> None:
    try:
        value = decode_offset_commit_value(raw)
    except OURS as exc:
        try:
            fast = offset_commit_fields(raw)
        except OURS:
            return
        raise Finding(f"offset_commit_fields accepted {fast!r}; the reader raised {exc!r}") from None
    fields = (value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp)
    fast = offset_commit_fields(raw)
    if fast != fields:
        raise Finding(f"offset_commit_fields gave {fast!r}, the reader {fields!r}")
    _same(decode_offset_commit_value(encode_value(value, _value_version(raw))), value)


def _check_group_value(raw: bytes) -> None:
    try:
        value = decode_group_metadata_value(raw)
    except OURS:
        return
    _same(decode_group_metadata_value(encode_value(value, _value_version(raw))), value)


def _check_pair(data: bytes) -> None:
    if len(data) < 2:
        return
    (n,) = struct.unpack_from(">H", data)
    key, value = data[2 : 2 + n], data[2 + n :] or None
    try:
        typed_key, typed_value = deserialize(key, value)
    except OURS:
        return
    expected = type(None) if value is None else OffsetCommitValue if isinstance(typed_key, OffsetCommitKey) \
        else GroupMetadataValue
    if not isinstance(typed_value, expected):
        raise Finding(f"key {typed_key!r} came with a value {typed_value!r}")


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, rest = data[0] % 4, data[1:]
    try:
        if mode == KEY:
            _check_key(rest)
        elif mode == OFFSET_VALUE:
            _check_offset_value(rest)
        elif mode == GROUP_VALUE:
            _check_group_value(rest)
        else:
            _check_pair(rest)
    except OURS as exc:
        # The checks catch the first decoder's refusal themselves; one reaching here came from a
        # hot path refusing what the reference accepted (property 2) or from decoding our own
        # re-encoding (property 3).
        raise Finding(f"accepted bytes refused on a second decode: {exc!r}") from exc


if __name__ == "__main__":
    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
