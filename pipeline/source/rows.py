"""Rows of ``__consumer_offsets`` records as lists in ``schema.RAW_COLUMNS`` order, decoded with the
server's own codecs: the reference path of ``columns`` (see its docstring for the rules), the
fallback of the fast path for every batch or record it does not take, and the struct-based
group-metadata reader the fast path uses for the rare GroupMetadata record.

The classic records (key versions 0-2) go through ``protocol.consumer_offsets``, the KIP-848
consumer-group records (3-8 and 16) through ``protocol.consumer_group_records``.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Iterator, Sequence
from typing import TypedDict

import pyarrow as pa

from protocol.consumer_group_records import RECORD_TYPES as CONSUMER_GROUP_RECORD_TYPES
from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)
from protocol.consumer_group_records import decode_key as decode_consumer_group_key
from protocol.consumer_group_records import decode_value as decode_consumer_group_value
from protocol.consumer_offsets import (
    GroupMetadataValue,
    MalformedRecordError,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordVersion,
    decode_key,
    decode_value,
    key_version,
)
from protocol.records import (
    BatchBuffer,
    BatchHeader,
    CorruptBatchError,
    Record,
    decode_control_record,
    decode_records,
    iter_batch_positions,
)

from .schema import CONSUMER_GROUP, CONTROL, CORRUPT, GROUP_METADATA, OFFSET_COMMIT, RAW_COLUMNS, UNKNOWN


class MemberRow(TypedDict):
    """One element of the ``members`` column."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class SegmentContext:
    """What every row of one segment shares, and where its bytes are."""

    __slots__ = ("buf", "end", "lp", "seg_base", "verify_crc", "name", "schema")

    def __init__(self, buf: BatchBuffer, end: int, lp: int, seg_base: int, verify_crc: bool, name: str,
                 schema: pa.Schema) -> None:
        self.buf, self.end, self.lp, self.seg_base = buf, end, lp, seg_base
        self.verify_crc, self.name, self.schema = verify_crc, name, schema


# ---------------------------------------------------------------------------------------------
# The reference path: the server's codecs, one row (a list in RAW_COLUMNS order) per record

_COL = {name: i for i, name in enumerate(RAW_COLUMNS)}
_WIDTH = len(RAW_COLUMNS)
(_LP, _SEG, _OFF, _TS, _PID, _TXN, _CTL, _TYPE, _KV, _VV, _TOMB, _GROUP, _TOPIC, _PART, _COFF, _EPOCH, _META,
 _CTS, _ETS, _PTYPE, _GEN, _PROTO, _LEADER, _STS, _MEMBERS, _ERROR) = (
    _COL[c] for c in ("log_partition", "segment_base_offset", "offset", "batch_timestamp_ms", "producer_id",
                      "is_transactional", "is_control", "record_type", "key_version", "value_version",
                      "is_tombstone", "group_id", "topic", "partition", "committed_offset", "leader_epoch",
                      "commit_metadata", "commit_timestamp_ms", "expire_timestamp_ms", "protocol_type",
                      "generation", "protocol", "leader", "state_timestamp_ms", "members", "error"))
(_MEMBER, _GEPOCH, _SUBSCRIBED, _CMEMBER, _AEPOCH, _ASSIGNED, _MEPOCH, _PREV_MEPOCH, _MSTATE, _PENDING, _REGEX,
 _RESOLVED, _RVERSION, _RTS) = (
    _COL[c] for c in ("member_id", "group_epoch", "subscribed_topics", "consumer_member", "assignment_epoch",
                      "assigned_partitions", "member_epoch", "previous_member_epoch", "member_state",
                      "partitions_pending_revocation", "regular_expression", "resolved_topics",
                      "regex_metadata_version", "regex_resolved_ms"))
_CONTROL_TYPE = _COL["control_type"]
_I16 = struct.Struct(">h")


def _version_of(value: bytes | None) -> int | None:
    return _I16.unpack_from(value)[0] if value is not None and len(value) >= 2 else None


def _members(value: GroupMetadataValue) -> list[MemberRow]:
    return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
             "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout,
             "session_timeout_ms": m.session_timeout, "subscription": m.subscription, "assignment": m.assignment}
            for m in value.members]


def _base_row(ctx: SegmentContext, header: BatchHeader, record: Record) -> list[object]:
    """A row with the columns every record has (position, batch fields) filled in."""
    row: list[object] = [None] * _WIDTH
    row[_LP], row[_SEG], row[_OFF] = ctx.lp, ctx.seg_base, header.base_offset + record.offset_delta
    row[_TS], row[_PID] = record.timestamp(header), header.producer_id
    row[_TXN], row[_CTL] = header.is_transactional, header.is_control
    row[_TOMB] = record.value is None
    return row


def topic_id_string(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka prints it (``Uuid.toString()``: URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def _topic_partitions(values: tuple[TopicPartitions, ...]) -> list[dict[str, object]]:
    return [{"topic_id": topic_id_string(tp.topic_id), "partitions": list(tp.partitions)} for tp in values]


def _consumer_member(value: ConsumerGroupMemberMetadataValue) -> dict[str, object]:
    return {"instance_id": value.instance_id, "rack_id": value.rack_id, "client_id": value.client_id,
            "client_host": value.client_host, "subscribed_topic_names": list(value.subscribed_topic_names),
            "subscribed_topic_regex": value.subscribed_topic_regex, "rebalance_timeout_ms": value.rebalance_timeout_ms,
            "server_assignor": value.server_assignor, "classic_protocol": value.classic_member_metadata is not None}


def consumer_group_row(row: list[object], key: bytes, value: bytes | None) -> list[object]:
    """Fill ``row`` (a ``_base_row``) from a KIP-848 record. A value version the codec does not
    know gives an UNKNOWN row with the key's fields; bytes that do not parse raise
    MalformedRecordError, as for the classic records."""
    typed_key = decode_consumer_group_key(key)
    row[_TYPE], row[_KV], row[_GROUP] = CONSUMER_GROUP, key_version(key), typed_key.group_id
    if isinstance(typed_key, (ConsumerGroupMemberMetadataKey, ConsumerGroupTargetAssignmentMemberKey,
                              ConsumerGroupCurrentMemberAssignmentKey)):
        row[_MEMBER] = typed_key.member_id
    elif isinstance(typed_key, ConsumerGroupRegularExpressionKey):
        row[_REGEX] = typed_key.regular_expression
    try:
        typed_value = decode_consumer_group_value(typed_key, value)
    except UnknownRecordVersion as exc:
        row[_TYPE], row[_VV] = UNKNOWN, exc.version
        return row
    row[_VV] = _version_of(value)
    if isinstance(typed_value, ConsumerGroupMetadataValue):
        row[_GEPOCH] = typed_value.epoch
    elif isinstance(typed_value, ConsumerGroupPartitionMetadataValue):
        row[_SUBSCRIBED] = [{"topic_id": topic_id_string(t.topic_id), "topic_name": t.topic_name,
                             "num_partitions": t.num_partitions} for t in typed_value.topics]
    elif isinstance(typed_value, ConsumerGroupMemberMetadataValue):
        row[_CMEMBER] = _consumer_member(typed_value)
    elif isinstance(typed_value, ConsumerGroupTargetAssignmentMetadataValue):
        row[_AEPOCH] = typed_value.assignment_epoch
    elif isinstance(typed_value, ConsumerGroupTargetAssignmentMemberValue):
        row[_ASSIGNED] = _topic_partitions(typed_value.topic_partitions)
    elif isinstance(typed_value, ConsumerGroupCurrentMemberAssignmentValue):
        row[_MEPOCH], row[_PREV_MEPOCH] = typed_value.member_epoch, typed_value.previous_member_epoch
        row[_MSTATE] = typed_value.state
        row[_ASSIGNED] = _topic_partitions(typed_value.assigned_partitions)
        row[_PENDING] = _topic_partitions(typed_value.partitions_pending_revocation)
    elif isinstance(typed_value, ConsumerGroupRegularExpressionValue):
        row[_RESOLVED] = list(typed_value.topics)
        row[_RVERSION], row[_RTS] = typed_value.version, typed_value.timestamp
    return row


def record_row(ctx: SegmentContext, header: BatchHeader, record: Record, pos: int) -> list[object]:
    """One record as a row. Raises CorruptBatchError (at the batch's ``pos``) for a record the
    codec cannot parse; unknown versions are rows, not errors (rule 3)."""
    row = _base_row(ctx, header, record)
    offset = row[_OFF]
    key, value = record.key, record.value
    try:
        if header.is_control:
            # Transaction markers: key (version, ABORT/COMMIT), value (version, coordinator epoch).
            row[_TYPE] = CONTROL
            row[_KV], row[_CONTROL_TYPE] = decode_control_record(record)
            row[_VV] = _version_of(value)
            return row
        if key is None:
            raise MalformedRecordError("record without a key")
        if key_version(key) in CONSUMER_GROUP_RECORD_TYPES:
            return consumer_group_row(row, key, value)
        try:
            typed_key = decode_key(key)
        except UnknownRecordVersion as exc:
            row[_TYPE], row[_KV], row[_VV] = UNKNOWN, exc.version, _version_of(value)
            return row
        row[_KV] = key_version(key)
        if isinstance(typed_key, OffsetCommitKey):
            row[_GROUP], row[_TOPIC], row[_PART] = typed_key.group, typed_key.topic, typed_key.partition
        else:
            row[_GROUP] = typed_key.group
        try:
            typed_value = decode_value(typed_key, value)
        except UnknownRecordVersion as exc:
            row[_TYPE], row[_VV] = UNKNOWN, exc.version
            return row
        row[_VV] = _version_of(value)
        if isinstance(typed_value, OffsetCommitValue) or (typed_value is None and isinstance(typed_key, OffsetCommitKey)):
            row[_TYPE] = OFFSET_COMMIT
            if typed_value is not None:
                row[_COFF], row[_EPOCH], row[_META] = typed_value.offset, typed_value.leader_epoch, typed_value.metadata
                row[_CTS], row[_ETS] = typed_value.commit_timestamp, typed_value.expire_timestamp
        else:
            row[_TYPE] = GROUP_METADATA
            if isinstance(typed_value, GroupMetadataValue):
                row[_PTYPE], row[_GEN], row[_PROTO] = typed_value.protocol_type, typed_value.generation, typed_value.protocol
                row[_LEADER], row[_STS] = typed_value.leader, typed_value.current_state_timestamp
                row[_MEMBERS] = _members(typed_value)
    except MalformedRecordError as exc:
        raise CorruptBatchError(f"record at offset {offset}: {exc}", pos) from None
    except CorruptBatchError as exc:  # decode_control_record does not know the position
        raise CorruptBatchError(f"record at offset {offset}: {exc.reason}", pos) from None
    return row


def rows_of_batch(ctx: SegmentContext, pos: int) -> list[list[object]]:
    """Every row of the batch at ``pos``, or CorruptBatchError: a batch is atomic (rule 2)."""
    for _pos, header in iter_batch_positions(ctx.buf, pos, ctx.end):  # validates length and magic
        records = decode_records(ctx.buf, pos, header, check_crc=ctx.verify_crc)
        return [record_row(ctx, header, r, pos) for r in records]
    return []  # cut off: callers only pass complete batches


def corrupt_row(ctx: SegmentContext, exc: CorruptBatchError) -> list[object]:
    row: list[object] = [None] * _WIDTH
    # No offset: the bytes that would say it are the ones in doubt.
    row[_LP], row[_SEG], row[_OFF], row[_TYPE] = ctx.lp, ctx.seg_base, -1, CORRUPT
    row[_ERROR] = f"{ctx.name}: {exc.reason} at byte {exc.position}"
    return row


def reference_rows(ctx: SegmentContext, batch_rows: int) -> Iterator[list[list[object]]]:
    rows: list[list[object]] = []
    try:
        for pos, _header in iter_batch_positions(ctx.buf, 0, ctx.end):
            rows += rows_of_batch(ctx, pos)
            if len(rows) >= batch_rows:
                yield rows
                rows = []
    except CorruptBatchError as exc:
        rows.append(corrupt_row(ctx, exc))
    if rows:
        yield rows


def rows_to_batch(rows: Sequence[Sequence[object]], schema: pa.Schema) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) if rows else [()] * _WIDTH
    return pa.RecordBatch.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, schema, strict=True)],
                                      schema=schema)


# ---------------------------------------------------------------------------------------------
# Group metadata without the codec's objects (fast path only)
#
# A rebalance writes one GroupMetadata record; with a few members, decoding it through the codec's
# cursor and dataclasses costs as much as a hundred offset commits on the fast path. This reads the
# non-flexible versions 0-3 with struct calls straight into the row, and gives up (None) on
# anything else or anything odd, so that ``record_row`` decides. Tests compare the two.

_GM_INT32 = struct.Struct(">i")
_GM_INT64 = struct.Struct(">q")


def _gm_string(data: bytes, p: int, nullable: bool) -> tuple[str | None, int]:
    n = _I16.unpack_from(data, p)[0]
    p += 2
    if n < 0:
        if n == -1 and nullable:
            return None, p
        raise ValueError
    if p + n > len(data):
        raise ValueError
    return data[p:p + n].decode(), p + n


def _gm_bytes(data: bytes, p: int) -> tuple[bytes, int]:
    n = _GM_INT32.unpack_from(data, p)[0]
    p += 4
    if n < 0 or p + n > len(data):
        raise ValueError
    return data[p:p + n], p + n


def plain_group_metadata_row(ctx: SegmentContext, header: BatchHeader, record: Record) -> list[object] | None:
    key, value = record.key, record.value
    try:
        assert key is not None
        group, _ = _gm_string(key, 2, False)
        row = _base_row(ctx, header, record)
        row[_TYPE], row[_KV], row[_GROUP] = GROUP_METADATA, 2, group
        if value is None:
            return row
        version = _I16.unpack_from(value, 0)[0]
        if not 0 <= version <= 3:  # v4 is flexible: left to the codec
            return None
        row[_VV] = version
        row[_PTYPE], p = _gm_string(value, 2, False)
        row[_GEN] = _GM_INT32.unpack_from(value, p)[0]
        row[_PROTO], p = _gm_string(value, p + 4, True)
        row[_LEADER], p = _gm_string(value, p, True)
        if version >= 2:
            row[_STS] = _GM_INT64.unpack_from(value, p)[0]
            p += 8
        else:
            row[_STS] = -1
        count = _GM_INT32.unpack_from(value, p)[0]
        p += 4
        if count < 0 or count > len(value) - p:
            return None
        members = []
        for _ in range(count):
            member_id, p = _gm_string(value, p, False)
            instance_id, p = _gm_string(value, p, True) if version >= 3 else (None, p)
            client_id, p = _gm_string(value, p, False)
            client_host, p = _gm_string(value, p, False)
            if version >= 1:
                rebalance_timeout = _GM_INT32.unpack_from(value, p)[0]
                p += 4
            session_timeout = _GM_INT32.unpack_from(value, p)[0]
            subscription, p = _gm_bytes(value, p + 4)
            assignment, p = _gm_bytes(value, p)
            members.append({"member_id": member_id, "group_instance_id": instance_id, "client_id": client_id,
                            "client_host": client_host,
                            "rebalance_timeout_ms": rebalance_timeout if version >= 1 else session_timeout,
                            "session_timeout_ms": session_timeout, "subscription": subscription,
                            "assignment": assignment})
        row[_MEMBERS] = members
        return row
    except (ValueError, struct.error):  # UnicodeDecodeError is a ValueError
        return None

