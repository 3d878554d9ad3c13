"""Keys and values of the records in ``__transaction_state``, byte for byte Kafka's.

One record per transactional id: the key names the id, the value is the id's whole transaction
metadata after a transition; a null value (tombstone) deletes the id (KIP-98; the schemas are
``TransactionLogKey.json`` and ``TransactionLogValue.json`` of
https://github.com/apache/kafka/tree/trunk/transaction-coordinator/src/main/resources/common/message).

* **Key**: int16 version 0, then ``TransactionalId`` as a non-flexible string (int16 length +
  UTF-8). Other key versions raise :class:`UnknownRecordVersion`; the loader skips them.
* **Value**: int16 version, 0 or 1 (1 is flexible: compact strings and arrays, and tagged fields
  at the end of every struct). Fields in order: ``ProducerId`` int64, ``ProducerEpoch`` int16,
  ``TransactionTimeoutMs`` int32, ``TransactionStatus`` int8, ``TransactionPartitions`` nullable
  array of ``{Topic string, PartitionIds []int32}`` (null in Empty), ``TransactionLastUpdateTimestampMs``
  int64, ``TransactionStartTimestampMs`` int64. Version 1's tagged fields: 0 ``PreviousProducerId``
  int64, 1 ``NextProducerId`` int64 (both default -1), 2 ``ClientTransactionVersion`` int16
  (default 0).

We write value version 0, what Kafka writes while the ``transaction.version`` feature is below 1
(``TransactionLog.valueToBytes``); we do not advertise that feature. Version 1 is read, so a
log written by a newer Kafka loads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .consumer_offsets import MalformedRecordError, RecordReader, UnknownRecordVersion
from .varints import encode_uvarint

__all__ = ["TransactionLogKey", "TransactionLogValue", "TransactionPartitions", "encode_key", "decode_key",
           "encode_value", "decode_value", "serialize", "UnknownRecordVersion", "MalformedRecordError",
           "KEY_VERSION", "VALUE_VERSION"]

KEY_VERSION = 0
#: The value version we write (non-flexible); 1 is read too.
VALUE_VERSION = 0
_MAX_VALUE_VERSION = 1
_FLEXIBLE_FROM = 1

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

#: ``TransactionPartitions``: (topic, partition ids) in the order written; None is the null of Empty.
TransactionPartitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    #: ``TransactionStatus``: the state's byte id (coordinator/transactions/state.py).
    transaction_status: int
    #: None: the null array Kafka writes for Empty.
    transaction_partitions: TransactionPartitions | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    #: Tagged fields of version 1 (never written in version 0; read back as their defaults).
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_key(key: TransactionLogKey) -> bytes:
    raw = key.transactional_id.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"transactional id of {len(raw)} bytes does not fit an int16 length")
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def decode_key(data: bytes | bytearray | memoryview) -> TransactionLogKey:
    data = bytes(data)
    if len(data) < 2:
        raise MalformedRecordError("a key needs its int16 version")
    (version,) = _I16.unpack_from(data, 0)
    if version != KEY_VERSION:
        raise UnknownRecordVersion("transaction log key", version)
    reader = RecordReader(data, 2)
    return TransactionLogKey(reader.string())


def _string(out: bytearray, s: str, flexible: bool) -> None:
    raw = s.encode("utf-8")
    if flexible:
        out += encode_uvarint(len(raw) + 1)
    else:
        if len(raw) > 0x7FFF:
            raise ValueError(f"topic of {len(raw)} bytes does not fit an int16 length")
        out += _I16.pack(len(raw))
    out += raw


def _array_length(out: bytearray, n: int, flexible: bool) -> None:
    """An array's length; -1 is null."""
    out += encode_uvarint(n + 1) if flexible else _I32.pack(n)


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    """``value`` as version ``version`` (0, or 1 with the tagged fields that differ from their
    defaults, in tag order as Kafka's generated writers put them)."""
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise ValueError(f"no transaction log value version {version}")
    flexible = version >= _FLEXIBLE_FROM
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.transaction_timeout_ms)
    out += _I8.pack(value.transaction_status)
    partitions = value.transaction_partitions
    if partitions is None:
        _array_length(out, -1, flexible)
    else:
        _array_length(out, len(partitions), flexible)
        for topic, ids in partitions:
            _string(out, topic, flexible)
            _array_length(out, len(ids), flexible)
            for p in ids:
                out += _I32.pack(p)
            if flexible:
                out.append(0)  # the entry's tagged fields: none
    out += _I64.pack(value.transaction_last_update_timestamp_ms)
    out += _I64.pack(value.transaction_start_timestamp_ms)
    if flexible:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != -1:
            tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != -1:
            tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
        out += encode_uvarint(len(tags))
        for tag, data in tags:
            out += encode_uvarint(tag) + encode_uvarint(len(data)) + data
    return bytes(out)


class _ValueReader(RecordReader):
    def string(self) -> str:
        value = super().string()
        # Kafka's generated readers refuse a string over 32,767 bytes in the compact form too
        # ("string field Topic had invalid length"), so no value we load holds a topic that
        # version 0, the one we write, could not.
        if len(value) > 0x7FFF // 4 and len(value.encode("utf-8")) > 0x7FFF:
            raise MalformedRecordError(f"string of {len(value.encode('utf-8'))} bytes, more than 32767")
        return value

    def int8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def nullable_array_length(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.int32()


def decode_value(data: bytes | bytearray | memoryview) -> TransactionLogValue:
    data = bytes(data)
    if len(data) < 2:
        raise MalformedRecordError("a value needs its int16 version")
    (version,) = _I16.unpack_from(data, 0)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise UnknownRecordVersion("transaction log value", version)
    r = _ValueReader(data, 2, flexible=version >= _FLEXIBLE_FROM)
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout_ms = r.int32()
    status = r.int8()
    count = r.nullable_array_length()
    partitions: TransactionPartitions | None
    if count < 0:
        if count != -1:
            raise MalformedRecordError(f"array length {count}")
        partitions = None
    else:
        entries = []
        for _ in range(count):
            topic = r.string()
            ids = tuple(r.int32() for _ in range(r.array_length()))
            r.tagged_fields()
            entries.append((topic, ids))
        partitions = tuple(entries)
    last_update = r.int64()
    start = r.int64()
    previous, following, client_version = -1, -1, 0
    if r.flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            field = _ValueReader(r._take(r.uvarint()))
            if tag == _TAG_PREVIOUS_PRODUCER_ID:
                previous = field.int64()
            elif tag == _TAG_NEXT_PRODUCER_ID:
                following = field.int64()
            elif tag == _TAG_CLIENT_TRANSACTION_VERSION:
                client_version = field.int16()
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, status, partitions, last_update, start,
                               previous, following, client_version)


def serialize(key: object, value: object) -> tuple[bytes, bytes | None]:
    """Key and value bytes of a record of the transaction shard (``RecordSerde.serialize``)."""
    if not isinstance(key, TransactionLogKey):
        raise TypeError(f"not a transaction log key: {key!r}")
    if value is None:
        return encode_key(key), None
    if not isinstance(value, TransactionLogValue):
        raise TypeError(f"not a transaction log value: {value!r}")
    return encode_key(key), encode_value(value)
