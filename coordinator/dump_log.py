"""``groupcoord dump-log PATH [--offsets-decoder | --transaction-log-decoder]``: print a log.

The counterpart of Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``): an operator's view of what
is on disk, read straight from the segment bytes with ``protocol.records`` so that it works on a
log the storage engine refuses to open. PATH is one ``.log`` segment, one ``.txnindex`` file or a
partition directory, whose ``*.log`` files are dumped in base-offset order, each followed by its
``.txnindex`` when it has one.

Output, one line per batch and one per record::

    Dumping /data/__consumer_offsets-12/00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1
        producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
        deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1000 size: 130 magic: 2
        compresscodec: none crc: 2431287752 isvalid: true            (one line in reality)
    | offset: 0 CreateTime: 1000 keySize: 13 valueSize: 26 sequence: -1 headerKeys: []

With ``--offsets-decoder`` every record of ``__consumer_offsets`` gets a second line, ``|   ``
followed by what Kafka's ``OffsetsMessageFormatter``/``GroupMetadataMessageFormatter`` would
print for it::

    [group,topic,partition]::OffsetAndMetadata(offset=5, leaderEpoch=Optional[3], metadata=,
        commitTimestamp=1000, expireTimestamp=None)
    [group,topic,partition]::null                                      (a tombstone)
    group::GroupMetadata(protocolType=consumer, generation=1, protocol=range, leader=m1,
        currentStateTimestamp=Optional[1000], members=[MemberMetadata(memberId=m1, ...)])
    group::null

Transactions (KIP-98): a batch line tells ``isTransactional`` and ``isControl``; the record of a
control batch ends with the marker it holds, ``endTxnMarker: COMMIT coordinatorEpoch: 3`` (or
ABORT), as kafka-dump-log prints it. A ``.txnindex`` file (the segment's aborted transactions)
prints one line per entry, Kafka's too::

    version: 0 producerId: 7 firstOffset: 0 lastOffset: 2 lastStableOffset: 3

The KIP-848 consumer-group records (record types 3-8 and 16) are printed as Kafka 4.0's
``GroupMetadataMessageFormatter`` prints them, one compact JSON object of key and value whose
field names are the schemas' in camelCase, topic ids in ``Uuid.toString`` form (URL-safe base64,
no padding), bytes in base64, and a tagged field only when set
(https://github.com/apache/kafka/blob/4.0/tools/src/main/java/org/apache/kafka/tools/consumer/GroupMetadataMessageFormatter.java)::

    {"key":{"version":3,"data":{"groupId":"g"}},"value":{"version":0,"data":{"epoch":5}}}
    {"key":{"version":5,"data":{"groupId":"g","memberId":"m"}},"value":null}   (a tombstone)

Optional fields are shown the way those Kafka formatters show them, so output can be compared
with a real broker's: ``Optional[N]``/``Optional.empty`` for the leader epoch, current-state
timestamp and group instance id (Java ``Optional``), ``Some(N)``/``None`` for the expire timestamp
(a Scala ``Option`` in Kafka's ``OffsetAndMetadata``). Member subscription and assignment are
shown as sizes, not bytes.

With ``--transaction-log-decoder`` every record of ``__transaction_state`` gets a second line,
``|   `` followed by its key and payload as Kafka 3.x's kafka-dump-log prints them
(``TransactionLog.formatRecordKeyAndValue``,
https://github.com/apache/kafka/blob/3.9/core/src/main/scala/kafka/coordinator/transaction/TransactionLog.scala)::

    key: transaction_metadata::transactionalId=tx payload: producerId:1000,producerEpoch:0,
        state=Ongoing,partitions=[orders-0,orders-1],txnLastUpdateTimestamp=1000,txnTimeoutMs=60000
    key: transaction_metadata::transactionalId=tx payload: <DELETE>     (a tombstone: an expired id)

``state`` is the state's Kafka name (Empty, Ongoing, PrepareCommit, ...); ``partitions`` are
``topic-partition`` in the record's order (Kafka's is a set's) and ``[]`` in Empty, whose record
carries none. A key version other than 0 prints ``key: unknown::version=N`` and no payload, as
Kafka's does. Kafka 4's Java kafka-dump-log prints these records as JSON instead; we keep the
3.x lines, as ``--offsets-decoder`` keeps the offsets formatters' lines. Neither decoder is chosen
from the directory name: without an option a record shows only its sizes, as in Kafka.

Exit code 0 when every file was read to its end; 1 when some batch was corrupt (its file is
abandoned at that batch, after a line naming the file and byte position) or a file ends in an
incomplete batch (a torn write); 2 when PATH holds nothing to dump. The command (``cli.py``)
exits 141, without a traceback, when the reader of its output goes away (``dump-log PATH | head``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from protocol import consumer_group_records, transaction_log
from protocol.compression import Compression
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MalformedRecordError,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordVersion,
    deserialize,
)
from protocol.records import (
    DELETE_HORIZON_MASK,
    BatchHeader,
    ControlRecordType,
    CorruptBatchError,
    Record,
    compute_crc,
    decode_control_record,
    decode_records,
    iter_batch_positions,
)

from .transactions.state import TransactionState

__all__ = ["dump_log", "format_offsets_record", "format_transaction_log_record"]

_LOG_SUFFIX = ".log"
_TXN_INDEX_SUFFIX = ".txnindex"
#: A ``.txnindex`` entry: int16 version, int64 producerId, firstOffset, lastOffset (the ABORT
#: marker), lastStableOffset (Kafka's AbortedTxn).
_ABORTED_TXN = struct.Struct(">hqqqq")


#: What a decoder makes of one record's key and value: the text after ``|   ``.
RecordFormatter = Callable[[bytes | None, bytes | None], str]


def dump_log(path: Path, offsets_decoder: bool, out: TextIO, *, transaction_log_decoder: bool = False) -> int:
    """Dump a segment file or every segment of a partition directory to ``out``; see the module
    docstring for the format and exit codes. ``offsets_decoder`` wins over ``transaction_log_decoder``
    (Kafka's order; the command line refuses both)."""
    path = Path(path)
    decoder: RecordFormatter | None = (format_offsets_record if offsets_decoder
                                       else format_transaction_log_record if transaction_log_decoder else None)
    if path.is_dir():
        files = sorted(path.glob("*" + _LOG_SUFFIX), key=_base_offset_order)
        if not files:
            out.write(f"No {_LOG_SUFFIX} files in {path}\n")
            return 2
    elif path.is_file():
        if path.name.endswith(_TXN_INDEX_SUFFIX):
            return 0 if _dump_txn_index(path, out) else 1
        files = [path]
    else:
        out.write(f"No such file or directory: {path}\n")
        return 2
    status = 0
    for file in files:
        if not _dump_file(file, decoder, out):
            status = 1
        index = file.with_name(file.name[: -len(_LOG_SUFFIX)] + _TXN_INDEX_SUFFIX)
        if path.is_dir() and index.exists() and not _dump_txn_index(index, out):
            status = 1
    return status


def _dump_txn_index(file: Path, out: TextIO) -> bool:
    """Dump one ``.txnindex``; False if it is not whole entries."""
    out.write(f"Dumping {file}\n")
    try:
        buf = file.read_bytes()
    except OSError as exc:
        out.write(f"Cannot read {file}: {exc.strerror or exc}\n")
        return False
    whole = len(buf) - len(buf) % _ABORTED_TXN.size
    for pos in range(0, whole, _ABORTED_TXN.size):
        version, producer_id, first, last, stable = _ABORTED_TXN.unpack_from(buf, pos)
        out.write(f"version: {version} producerId: {producer_id} firstOffset: {first} lastOffset: {last} "
                  f"lastStableOffset: {stable}\n")
    if whole < len(buf):
        out.write(f"Incomplete entry in {file} at byte position {whole}: {len(buf) - whole} trailing bytes "
                  f"do not form a whole {_ABORTED_TXN.size}-byte entry\n")
        return False
    return True


def _base_offset_order(file: Path) -> tuple[int, str]:
    # Segment names are 20-digit base offsets; anything else sorts after them, by name.
    stem = file.name[: -len(_LOG_SUFFIX)]
    return (int(stem), "") if stem.isdigit() else (2**63, file.name)


def _dump_file(file: Path, decoder: RecordFormatter | None, out: TextIO) -> bool:
    """Dump one segment; False if it held a corrupt or incomplete batch."""
    out.write(f"Dumping {file}\n")
    try:
        buf = file.read_bytes()
    except OSError as exc:
        out.write(f"Cannot read {file}: {exc.strerror or exc}\n")
        return False
    stem = file.name[: -len(_LOG_SUFFIX)] if file.name.endswith(_LOG_SUFFIX) else ""
    if stem.isdigit():
        out.write(f"Log starting offset: {int(stem)}\n")
    end = 0
    try:
        for pos, header in iter_batch_positions(buf):
            crc_ok = compute_crc(buf, pos, header.size) == header.crc
            out.write(_batch_line(pos, header, crc_ok) + "\n")
            if not crc_ok:
                raise CorruptBatchError("CRC mismatch", pos)
            for record in decode_records(buf, pos, header, check_crc=False):
                out.write(_record_line(record, header) + "\n")
                if decoder is not None and not header.is_control:
                    out.write("|   " + decoder(record.key, record.value) + "\n")
            end = pos + header.size
    except CorruptBatchError as exc:
        out.write(f"Corrupt batch in {file} at byte position {exc.position}: {exc.reason}; "
                  f"stopped reading this file\n")
        return False
    if end < len(buf):
        out.write(f"Incomplete batch in {file} at byte position {end}: "
                  f"{len(buf) - end} trailing bytes do not form a whole batch\n")
        return False
    return True


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _batch_line(pos: int, h: BatchHeader, crc_ok: bool) -> str:
    # Field names and order follow kafka-dump-log.sh, so the two outputs can be compared by eye.
    last_sequence = -1 if h.base_sequence < 0 else (h.base_sequence + h.last_offset_delta) & 0x7FFFFFFF
    horizon = (f"OptionalLong[{h.base_timestamp}]" if h.attributes & DELETE_HORIZON_MASK
               else "OptionalLong.empty")
    time_type = "LogAppendTime" if h.log_append_time else "CreateTime"
    try:
        codec = Compression(h.compression).name.lower()
    except ValueError:
        codec = f"unknown({h.compression})"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_flag(h.is_transactional)} isControl: {_flag(h.is_control)} "
        f"deleteHorizonMs: {horizon} position: {pos} {time_type}: {h.max_timestamp} size: {h.size} "
        f"magic: {h.magic} compresscodec: {codec} crc: {h.crc} isvalid: {_flag(crc_ok)}"
    )


def _record_line(record: Record, h: BatchHeader) -> str:
    sequence = -1 if h.base_sequence < 0 else (h.base_sequence + record.offset_delta) & 0x7FFFFFFF
    time_type = "LogAppendTime" if h.log_append_time else "CreateTime"
    line = (
        f"| offset: {record.offset(h)} {time_type}: {record.timestamp(h)} "
        f"keySize: {_size(record.key)} valueSize: {_size(record.value)} sequence: {sequence} "
        f"headerKeys: [{', '.join(k for k, _ in record.headers)}]"
    )
    if h.is_control:
        try:
            _version, kind = decode_control_record(record)
        except CorruptBatchError as exc:
            return f"{line} controlRecord: undecodable ({exc.reason})"
        try:
            name = ControlRecordType(kind).name
        except ValueError:
            name = f"UNKNOWN({kind})"
        if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            epoch = _marker_epoch(record.value)
            return f"{line} endTxnMarker: {name} coordinatorEpoch: {epoch}"
        return f"{line} controlType: {name}"
    return line


def _marker_epoch(value: bytes | None) -> str:
    # EndTransactionMarker value: int16 version + int32 coordinator epoch (KIP-98).
    if value is None or len(value) < 6:
        return "undecodable"
    return str(int.from_bytes(value[2:6], "big", signed=True))


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _optional(value: object) -> str:
    return "Optional.empty" if value is None else f"Optional[{value}]"


def format_offsets_record(key: bytes | None, value: bytes | None) -> str:
    """One ``__consumer_offsets`` record the way Kafka's offsets formatters print it.

    Records this module cannot decode (share-group record types, garbage) get a short description
    instead; this never raises for bad bytes.
    """
    if key is None:
        return "undecodable: record has a null key"
    if len(key) >= 2 and int.from_bytes(key[:2], "big", signed=True) in consumer_group_records.RECORD_TYPES:
        return _format_consumer_group_record(key, value)
    try:
        typed_key, typed_value = deserialize(key, value)
    except UnknownRecordVersion as exc:
        return f"unknown record type: {exc} ({len(key)}-byte key, skipped as a loader would)"
    except MalformedRecordError as exc:
        return f"undecodable: {exc}"
    if isinstance(typed_key, OffsetCommitKey):
        prefix = f"[{typed_key.group},{typed_key.topic},{typed_key.partition}]::"
        if typed_value is None:
            return prefix + "null"
        assert isinstance(typed_value, OffsetCommitValue)
        return prefix + _format_offset(typed_value)
    assert isinstance(typed_key, GroupMetadataKey)
    prefix = f"{typed_key.group}::"
    if typed_value is None:
        return prefix + "null"
    assert isinstance(typed_value, GroupMetadataValue)
    return prefix + _format_group(typed_value)


def format_transaction_log_record(key: bytes | None, value: bytes | None) -> str:
    """One ``__transaction_state`` record as Kafka 3.x's kafka-dump-log prints it (module
    docstring); never raises for bad bytes."""
    if key is None:
        return "undecodable: record has a null key"
    try:
        typed_key = transaction_log.decode_key(key)
    except transaction_log.UnknownRecordVersion as exc:
        return f"key: unknown::version={exc.version}"
    except transaction_log.MalformedRecordError as exc:
        return f"undecodable: {exc}"
    line = f"key: transaction_metadata::transactionalId={typed_key.transactional_id} payload: "
    if value is None:
        return line + "<DELETE>"
    try:
        v = transaction_log.decode_value(value)
    except (transaction_log.UnknownRecordVersion, transaction_log.MalformedRecordError) as exc:
        return line + f"undecodable: {exc}"
    try:
        state = TransactionState(v.transaction_status)
    except ValueError:
        name = f"unknown({v.transaction_status})"
        partitions = v.transaction_partitions or ()
    else:
        name = state.kafka_name
        # Kafka's reader adds no partitions to an Empty id, whatever the record holds.
        partitions = () if state is TransactionState.EMPTY else v.transaction_partitions or ()
    listed = ",".join(f"{topic}-{p}" for topic, ids in partitions for p in ids)
    return line + (
        f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},state={name},partitions=[{listed}],"
        f"txnLastUpdateTimestamp={v.transaction_last_update_timestamp_ms},txnTimeoutMs={v.transaction_timeout_ms}"
    )


def _format_offset(v: OffsetCommitValue) -> str:
    epoch = _optional(None if v.leader_epoch < 0 else v.leader_epoch)
    expire = "None" if v.expire_timestamp is None else f"Some({v.expire_timestamp})"
    return (
        f"OffsetAndMetadata(offset={v.offset}, leaderEpoch={epoch}, metadata={v.metadata}, "
        f"commitTimestamp={v.commit_timestamp}, expireTimestamp={expire})"
    )


def _format_group(v: GroupMetadataValue) -> str:
    members = ", ".join(
        f"MemberMetadata(memberId={m.member_id}, groupInstanceId={_optional(m.group_instance_id)}, "
        f"clientId={m.client_id}, clientHost={m.client_host}, rebalanceTimeoutMs={m.rebalance_timeout}, "
        f"sessionTimeoutMs={m.session_timeout}, subscription={len(m.subscription)} bytes, "
        f"assignment={len(m.assignment)} bytes)"
        for m in v.members
    )
    state_ts = _optional(None if v.current_state_timestamp < 0 else v.current_state_timestamp)
    return (
        f"GroupMetadata(protocolType={v.protocol_type}, generation={v.generation}, "
        f"protocol={v.protocol}, leader={v.leader}, currentStateTimestamp={state_ts}, "
        f"members=[{members}])"
    )


def _format_consumer_group_record(key: bytes, value: bytes | None) -> str:
    try:
        typed_key = consumer_group_records.decode_key(key)
        typed_value = consumer_group_records.decode_value(typed_key, value)
    except UnknownRecordVersion as exc:
        return f"unknown record type: {exc} ({len(key)}-byte key, skipped as a loader would)"
    except MalformedRecordError as exc:
        return f"undecodable: {exc}"
    record: dict[str, object] = {"key": {"version": int.from_bytes(key[:2], "big"), "data": _json(typed_key)}}
    if value is None or typed_value is None:
        record["value"] = None
    else:
        record["value"] = {"version": int.from_bytes(value[:2], "big", signed=True), "data": _json(typed_value)}
    # Jackson's ObjectNode.toString: no spaces, non-ASCII characters as they are.
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


#: The tagged fields of the KIP-848 records and their defaults (``consumer_group_records``).
_TAGGED_DEFAULTS: dict[str, object] = {"classic_member_metadata": None, "metadata_hash": 0, "creation_time_ms": -1,
                                       "assignment_epochs": None}


def _json(item: object) -> object:
    """A record dataclass as Kafka's generated JsonConverter writes it."""
    if isinstance(item, uuid.UUID):
        return base64.urlsafe_b64encode(item.bytes).rstrip(b"=").decode()
    if isinstance(item, bytes):
        return base64.b64encode(item).decode()
    if isinstance(item, tuple):
        return [_json(x) for x in item]
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        out: dict[str, object] = {}
        for field in dataclasses.fields(item):
            v = getattr(item, field.name)
            if field.name in _TAGGED_DEFAULTS and v == _TAGGED_DEFAULTS[field.name]:
                continue  # a tagged field, written only when not at its default
            head, *rest = field.name.split("_")
            out[head + "".join(part.title() for part in rest)] = _json(v)
        return out
    return item
