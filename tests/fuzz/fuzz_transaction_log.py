"""``__transaction_state`` records (``protocol/transaction_log.py``), loaded into a transaction
shard (``coordinator/transactions/shard.py``) by the runtime's loader (``loader.replay_steps``).

Edge: whatever a ``__transaction_state`` partition's log (or a replica's copy, or a snapshot)
holds when the node loads it: keys and values of any version and content, in any order, in plain,
transactional and control batches.

Properties asserted on any bytes:

1. Decoding a key or a value returns one or raises ``MalformedRecordError`` /
   ``UnknownRecordVersion``; nothing else. What decodes re-encodes (at the version it was read
   at) to bytes that decode to the same record.
2. Loading a log of any records either reaches its end or stops with ``RecordReplayError``, whose
   message names the partition, the record's offset and its file, and whose cause is the
   shard's ``MalformedRecordError`` (a value that does not decode, or decodes to what no
   coordinator writes: an unknown ``TransactionStatus``, as Kafka's ``TransactionState.fromId``
   refuses). ``UnknownRecordVersion`` is skipped as the loader skips it.
3. A loaded shard serves: ``on_loaded``, then every request and timer of the coordinator, on each
   id it holds (InitProducerId with and without the producer, AddPartitionsToTxn and its
   VerifyOnly, EndTxn commit and abort, the completion of a decided transaction, the timeout abort
   and the id expiration after a long sleep, describe and list) returns an answer, and every record
   it writes encodes and replays — whatever the loaded epochs, timeouts, states and partitions.
4. The loaded state written as a snapshot (``snapshot_records``) loads into a fresh shard to the
   same state (each id's record as the shard would write it).

The first input byte picks the mode:

* ``KEY``, ``VALUE``: the rest is a key / a value (property 1).
* ``LOG``: records, each ``uint8 batch kind, uint16 key length, key, int32 value length (-1:
  tombstone), value``: kind 1 puts the record in a transactional batch, 2 and 3 are a COMMIT /
  ABORT control batch instead of the record (properties 2-4).
* ``OPS``: 8-byte operations, each one typed record of a few ids with values drawn from the edges
  (epochs around 0 and ``Short.MAX_VALUE``, every status, null, empty and odd partition lists,
  negative and huge timeouts and timestamps), so that random bytes are logs of valid records a
  coordinator could meet after a crash or a newer Kafka: properties 2-4.

Seeds are the records a real shard writes (``tests/coordinator/transactions/txn_test_context.py``:
commits, aborts, a fenced producer, a timeout, an expiry, an epoch rotation).
"""

from __future__ import annotations

import logging
import struct
import sys
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from coordinator.runtime.contract import CoordinatorResult
from coordinator.runtime.errors import RecordReplayError
from coordinator.runtime.loader import replay_steps
from coordinator.transactions.config import TransactionConfig
from coordinator.transactions.markers import MarkerJob
from coordinator.transactions.shard import TransactionHooks, TransactionShard
from protocol.records import ControlRecordType, Record, control_record, encode_batch
from protocol.transaction_log import (
    MalformedRecordError,
    TransactionLogKey,
    TransactionLogValue,
    UnknownRecordVersion,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    serialize,
)
from tests.fuzz.harness import Finding, quiet

NAME = "transaction_log"
INSTRUMENT = ("protocol.transaction_log", "coordinator.transactions.shard", "coordinator.transactions.metadata",
              "coordinator.transactions.timers", "coordinator.transactions.state", "coordinator.runtime.loader")

OURS = (MalformedRecordError, UnknownRecordVersion)
KEY, VALUE, LOG, OPS = range(4)
PLAIN, TRANSACTIONAL, COMMIT, ABORT = range(4)
_NOW_MS = 1_700_000_000_000
_PARTITION = "__transaction_state-0"
_FILE = "/data/__transaction_state-0/00000000000000000000.log"
_CONFIG = TransactionConfig()


# --- the shard ---------------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = _NOW_MS

    def now_ms(self) -> int:
        return self.now


class _Timer:
    """The shard's timers are scheduled at load; the harness runs them itself."""

    def __init__(self) -> None:
        self.keys: dict[str, Callable[[], Any]] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], Any], *, name: str = "timer") -> None:
        self.keys[key] = operation

    def cancel(self, key: str) -> None:
        self.keys.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.keys


class _Ids:
    def __init__(self) -> None:
        self.next = 5_000

    def __call__(self) -> int:
        self.next += 1
        return self.next


def _new_shard(jobs: list[MarkerJob] | None = None) -> TransactionShard:
    hooks = TransactionHooks(new_producer_id=_Ids(), prepared=(jobs.append if jobs is not None else lambda job: None))
    return TransactionShard(0, _CONFIG, _Clock(), _Timer(), hooks)


def _batches(records: Iterable[tuple[int, bytes, bytes | None]]) -> bytes:
    """The log a partition would hold: one batch per record, at consecutive offsets."""
    out = bytearray()
    for offset, (kind, key, value) in enumerate(records):
        if kind in (COMMIT, ABORT):
            marker = control_record(ControlRecordType.COMMIT if kind == COMMIT else ControlRecordType.ABORT, 3)
            out += encode_batch([marker], base_offset=offset, base_timestamp=_NOW_MS, producer_id=7,
                                producer_epoch=1, transactional=True, control=True)
        else:
            out += encode_batch([Record(0, 0, key, value)], base_offset=offset, base_timestamp=_NOW_MS,
                                producer_id=7 if kind == TRANSACTIONAL else -1,
                                producer_epoch=1 if kind == TRANSACTIONAL else -1,
                                base_sequence=0 if kind == TRANSACTIONAL else -1, transactional=kind == TRANSACTIONAL)
    return bytes(out)


def _load(log: bytes, jobs: list[MarkerJob] | None = None) -> TransactionShard | None:
    """Property 2: the shard the loader builds from ``log``, or None when a record failed the load."""
    shard = _new_shard(jobs)
    part = SimpleNamespace(shard=shard, where={"partition": _PARTITION})
    try:
        for _progress in replay_steps(part, UnknownRecordVersion, log, 0,  # type: ignore[arg-type]
                                      source=lambda _at: _FILE):
            pass
    except RecordReplayError as exc:
        message = str(exc)
        if f"{_PARTITION} at offset {exc.offset} ({_FILE})" not in message or exc.source != _FILE:
            raise Finding(f"a load error that does not say where: {message!r}") from exc
        if not isinstance(exc.__cause__, MalformedRecordError):
            raise Finding(f"a record failed the load with {exc.__cause__!r}, not MalformedRecordError: {message}") \
                from exc
        return None
    shard.on_loaded()
    return shard


def _hard_state(shard: TransactionShard) -> dict[str, bytes]:
    """Each id's record as the shard would write it (soft fields left out)."""
    return {txn_id: encode_value(meta.to_value()) for txn_id, meta in shard.transactions.items()}


def _apply(shard: TransactionShard, result: CoordinatorResult[Any]) -> Any:
    """As the runtime does: encode the records, replay them with their typed key, then
    ``on_appended``."""
    for key, value in result.records:
        raw_key, raw_value = serialize(key, value)
        shard.replay(raw_key, raw_value, key)
    if result.on_appended is not None:
        result.on_appended()
    return result.response


def _serve(shard: TransactionShard, jobs: list[MarkerJob]) -> None:
    """Property 3: every request and timer of the coordinator on every loaded id."""
    clock = shard.clock
    assert isinstance(clock, _Clock)
    shard.list_transactions(None, None)
    shard.list_transactions(frozenset(m.state for m in shard.transactions.values()),
                            frozenset(m.producer_id for m in shard.transactions.values()), 0)
    for txn_id in sorted(shard.transactions):
        meta = shard.transactions.get(txn_id)
        if meta is None:
            continue
        pid, epoch = meta.producer_id, meta.producer_epoch
        shard.describe(txn_id)
        shard.verify_partitions(txn_id, pid, epoch, [("t", 0), ("t", 1)])
        _apply(shard, shard.add_partitions(txn_id, pid, epoch, [("t", 0)]))
        _apply(shard, shard.add_partitions(txn_id, pid, epoch + 1, [("t", 1)]))
        _apply(shard, shard.end_transaction(txn_id, pid, epoch, True))
        _apply(shard, shard.end_transaction(txn_id, pid, epoch, False))
    while jobs:
        _apply(shard, shard.complete_transaction(jobs.pop()))
    for txn_id in sorted(shard.transactions):
        meta = shard.transactions.get(txn_id)
        if meta is None:
            continue
        _apply(shard, shard.init_producer_id(txn_id, 60_000, meta.producer_id, meta.producer_epoch))
        _apply(shard, shard.init_producer_id(txn_id, 60_000))
    _apply(shard, shard.init_producer_id("new-id", 1))
    # A long sleep: every Ongoing transaction times out, every idle id expires.
    clock.now += 10 * _CONFIG.id_expiration_ms
    for key in sorted(shard.timers.timer.keys):  # type: ignore[attr-defined]
        _apply(shard, shard.timers.timer.keys[key]())  # type: ignore[attr-defined]
    while jobs:
        _apply(shard, shard.complete_transaction(jobs.pop()))
    _apply(shard, shard.resend_markers())


def _check_log(records: list[tuple[int, bytes, bytes | None]]) -> None:
    jobs: list[MarkerJob] = []
    shard = _load(_batches(records), jobs)
    if shard is None:
        return
    state = _hard_state(shard)
    # Property 4: the loaded state's snapshot loads back to it.
    snapshot = [(PLAIN, key, value) for key, value in shard.snapshot_records()]
    again = _load(_batches(snapshot))
    if again is None:
        raise Finding("the snapshot of a loaded state does not load")
    if _hard_state(again) != state:
        raise Finding(f"loaded state snapshotted and loaded again became\n{_hard_state(again)!r}\nwas\n{state!r}")
    try:
        _serve(shard, jobs)
    except OURS as exc:
        raise Finding(f"a loaded shard wrote a record it cannot read back: {exc!r}") from exc


# --- the codecs --------------------------------------------------------------------------------


def _check_key(raw: bytes) -> None:
    try:
        key = decode_key(raw)
    except OURS:
        return
    again = decode_key(encode_key(key))
    if again != key:
        raise Finding(f"key re-encoded and decoded again: {again!r}, first decoded: {key!r}")


def _check_value(raw: bytes) -> None:
    try:
        value = decode_value(raw)
    except OURS:
        return
    (version,) = struct.unpack_from(">h", raw)
    again = decode_value(encode_value(value, version))
    if again != value:
        raise Finding(f"value re-encoded and decoded again: {again!r}, first decoded: {value!r}")


def _frame(kind: int, key: bytes, value: bytes | None) -> bytes:
    return (bytes([kind]) + struct.pack(">H", len(key)) + key
            + (struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value))


def _split_log(data: bytes) -> list[tuple[int, bytes, bytes | None]]:
    out: list[tuple[int, bytes, bytes | None]] = []
    pos = 0
    while pos + 7 <= len(data):
        kind = data[pos] % 4
        (klen,) = struct.unpack_from(">H", data, pos + 1)
        key = data[pos + 3 : pos + 3 + klen]
        pos += 3 + klen
        if pos + 4 > len(data):
            break
        (vlen,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if vlen < 0:
            out.append((kind, key, None))
            continue
        if pos + vlen > len(data):
            break
        out.append((kind, key, data[pos : pos + vlen]))
        pos += vlen
    return out


# --- OPS: typed records from a small alphabet ---------------------------------------------------

_IDS = ("t0", "t1", "t2")
_PIDS = (0, 1, 1000, 2**63 - 1, -1)
_EPOCHS = (0, 1, 2, 32765, 32766, 32767, -1, -32768)
_TIMEOUTS = (60_000, 1, 0, -1, 900_000, 2**31 - 1, -(2**31))
_TIMES = (_NOW_MS, -1, 0, _NOW_MS - 10**9, 2**63 - 1, -(2**63))
_TOPICS = ("t", "u", "", "t" * 300)
_OP_SIZE = 8


def _op_record(op: bytes) -> tuple[int, bytes, bytes | None]:
    """One 8-byte operation: kind (bits 0-1: the batch kind, bit 2: a tombstone, bit 3: value
    version 1), id, producer id, epoch, timeout, status (any byte), partitions, timestamps."""
    kind, ids, pid, epoch, timeout, status, parts, times = op
    key = TransactionLogKey(_IDS[ids % len(_IDS)])
    if kind & 4:
        return kind & 3, encode_key(key), None
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    if parts & 0x80:
        partitions = None
    else:
        partitions = tuple((_TOPICS[t], tuple(p - 1 for p in range(parts >> 4 & 7)))
                           for t in range(len(_TOPICS)) if parts >> t & 1)
    value = TransactionLogValue(
        _PIDS[pid % len(_PIDS)], _EPOCHS[epoch % len(_EPOCHS)], _TIMEOUTS[timeout % len(_TIMEOUTS)],
        status % 9 if status < 0xF0 else status - 0x100, partitions, _TIMES[times % len(_TIMES)],
        _TIMES[(times >> 4) % len(_TIMES)], previous_producer_id=_PIDS[pid >> 4 & 3],
        client_transaction_version=epoch >> 6)
    return kind & 3, encode_key(key), encode_value(value, 1 if kind & 8 else 0)


def _ops(data: bytes) -> list[tuple[int, bytes, bytes | None]]:
    return [_op_record(data[i : i + _OP_SIZE]) for i in range(0, len(data) - _OP_SIZE + 1, _OP_SIZE)]


# --- seeds -------------------------------------------------------------------------------------


def _scenario_log() -> list[tuple[bytes, bytes | None]]:
    """The records a real shard writes through a few flows."""
    from tests.coordinator.transactions.txn_test_context import TxnTestContext

    ctx = TxnTestContext()
    a = ctx.init("a")
    ctx.add("a", a.producer_id, a.producer_epoch, ("t", 0), ("t", 1), ("u", 3))
    ctx.end("a", a.producer_id, a.producer_epoch, True)
    ctx.complete_all()
    b = ctx.init("b", timeout_ms=1_000)
    ctx.add("b", b.producer_id, b.producer_epoch, ("t", 2))
    ctx.end("b", b.producer_id, b.producer_epoch, False)
    ctx.complete_all()
    ctx.add("b", b.producer_id, b.producer_epoch, ("t", 2))
    ctx.sleep(20_000)  # b times out: fenced and aborted
    ctx.complete_all()
    c = ctx.init("c")
    ctx.add("c", c.producer_id, c.producer_epoch, ("__consumer_offsets", 7))
    ctx.init("c")  # a new producer of c fences the ongoing transaction
    ctx.complete_all()
    ctx.init("c")
    ctx.end("a", a.producer_id, a.producer_epoch, True)  # a retry: nothing written
    ctx.sleep(_CONFIG.id_expiration_ms + _CONFIG.remove_expired_interval_ms)  # idle ids expire
    d = ctx.init("d")
    ctx.add("d", d.producer_id, d.producer_epoch, ("t", 0))
    return [serialize(key, value) for key, value in ctx.log]


def seeds() -> list[bytes]:
    log = _scenario_log()
    out = []
    for key in dict.fromkeys(k for k, _ in log):
        out.append(bytes([KEY]) + key)
    for value in dict.fromkeys(v for _, v in log if v is not None):
        out.append(bytes([VALUE]) + value)
        decoded = decode_value(value)
        out.append(bytes([VALUE]) + encode_value(decoded, 1))
    out.append(bytes([VALUE]) + encode_value(TransactionLogValue(5, 1, 100, 1, (("t", (0, 1)),), 1, 2, 4, 6, 2), 1))
    for i in range(0, len(log), 6):
        out.append(bytes([LOG]) + b"".join(_frame(PLAIN, k, v) for k, v in log[i : i + 6]))
    out.append(bytes([LOG]) + b"".join(_frame(PLAIN, k, v) for k, v in log))
    mixed = [_frame(i % 4, k, v) for i, (k, v) in enumerate(log[:8])]
    out.append(bytes([LOG]) + b"".join(mixed))
    # Typed records: an id through its states; then edges (exhausted epochs, odd timeouts).
    out.append(bytes([OPS]) + bytes([0, 0, 2, 0, 0, 0, 0x80, 0, 0, 0, 2, 0, 0, 1, 0x11, 0, 0, 0, 2, 0, 0, 2, 0x11,
                                     0, 0, 0, 2, 0, 0, 4, 0, 0]))
    out.append(bytes([OPS]) + bytes([8, 1, 1, 4, 1, 1, 0x23, 0x10, 0, 1, 1, 5, 2, 3, 0x31, 0x21, 4, 1, 0, 0, 0, 0,
                                     0, 0, 0, 2, 3, 7, 5, 7, 0x05, 0x53]))
    return out


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, rest = data[0] % 4, data[1:]
    with quiet(logging.CRITICAL):
        try:
            if mode == KEY:
                _check_key(rest)
            elif mode == VALUE:
                _check_value(rest)
            elif mode == LOG:
                _check_log(_split_log(rest))
            else:
                _check_log(_ops(rest))
        except OURS as exc:
            # A first decode's refusal is caught by the checks: one reaching here came from
            # decoding our own re-encoding.
            raise Finding(f"accepted bytes refused on a second decode: {exc!r}") from exc


if __name__ == "__main__":
    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
