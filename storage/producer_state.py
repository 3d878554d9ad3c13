"""Idempotent- and transactional-producer state of one partition: which batches each producer id
last wrote, and which transactions are open here.

An idempotent producer (KIP-98) stamps each batch with its producer id, epoch and the sequence
number of its first record. The partition remembers, per producer, the last few batches it
appended, so that:

* a retried batch that was already appended is recognised and not written twice (Kafka answers
  it with success and the offsets of the original, and so do we);
* a gap in sequence numbers is refused with OUT_OF_ORDER_SEQUENCE_NUMBER;
* a batch from an older epoch is refused with INVALID_PRODUCER_EPOCH (the producer was fenced).

A transactional producer's first transactional batch here opens a transaction at its offset; the
transaction coordinator's marker (a control batch, COMMIT or ABORT) closes it. Until then the
transaction holds back the last stable offset (LSO): ``read_committed`` consumers read only below
the first offset of the earliest open transaction (Kafka's ``ProducerStateManager`` and
``ProducerAppendInfo``; KIP-98).

Rules:

1. ``check`` is pure: it decides, ``update`` records an appended batch. The caller checks, appends,
   then updates, under the partition's append order. Markers are checked by ``check_marker``
   (epoch not below the stored one, else INVALID_PRODUCER_EPOCH; coordinator epoch not below the
   stored one, else TRANSACTION_COORDINATOR_FENCED) and recorded by ``complete_txn``.
2. Only the last ``BATCHES_PER_PRODUCER`` (5) batches per producer are kept: a producer has at
   most five requests in flight per partition (``max.in.flight.requests.per.connection`` ≤ 5 is a
   precondition of idempotence), so a retry is always among them.
3. The state is derived from the log: every field comes from batch headers and markers. It
   survives restarts as a snapshot taken at a log offset plus a replay of the batches after that
   offset, and a snapshot past the log end (data lost in a crash) is discarded, never trusted.
4. A non-transactional batch from a producer with a transaction open here is refused with
   INVALID_TXN_STATE. A marker yields a ``CompletedTxn`` only if it closed an open transaction:
   a marker for a producer that wrote nothing here moves neither the LSO nor the ``.txnindex``.
5. A completed transaction stays *unreplicated* (it still holds the LSO back at its first offset)
   until the high watermark passes its marker: until then the marker may still be cut away (a
   follower truncated to a new leader's log) and the transaction reopen (Kafka's
   ``unreplicatedTxns``). ``first_unstable_offset`` is the smaller of the earliest open and the
   earliest unreplicated transaction's first offset.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import crc32c as _crc32c

from protocol.errors import ErrorCode
from protocol.records import BatchHeader, CorruptBatchError, read_end_txn_marker

from .errors import CorruptSnapshotError

__all__ = ["ProducerStateManager", "BatchMetadata", "ProducerEntry", "ProducerInfo", "CompletedTxn", "Duplicate",
           "BATCHES_PER_PRODUCER", "replay_segments"]

BATCHES_PER_PRODUCER = 5
NO_PRODUCER_ID = -1
INT32_MAX = 2**31 - 1
#: Batch attribute bits (``protocol.records``), inlined on the append path.
_TRANSACTIONAL = 0x10
_CONTROL = 0x20

_SNAPSHOT_MAGIC = b"GCPS"
_SNAPSHOT_VERSION = 2
_SNAPSHOT_HEAD = struct.Struct(">4shqI")  # magic, version, log offset, entry count
_ENTRY_V1 = struct.Struct(">qhB")  # producer id, epoch, batch count
#: producer id, epoch, coordinator epoch, last timestamp, open transaction's first offset, batch count
_ENTRY = struct.Struct(">qhiqqB")
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, max timestamp
_COUNT = struct.Struct(">I")
_TXN = struct.Struct(">qqq?")  # producer id, first offset, marker offset, aborted
_CRC = struct.Struct(">I")


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_PER_PRODUCER))
    #: Epoch of the transaction coordinator that wrote this producer's last marker (-1: none).
    coordinator_epoch: int = -1
    #: Largest timestamp of the producer's last batch or marker (-1: none).
    last_timestamp: int = -1
    #: First offset of the producer's open transaction here, -1 if none.
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None


class CompletedTxn(NamedTuple):
    """A transaction a marker closed (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    #: The marker's offset.
    last_offset: int
    is_aborted: bool


class ProducerInfo(NamedTuple):
    """One producer as DescribeProducers (KIP-664) reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The batch was appended before: answer with the original's offsets, append nothing."""

    first_offset: int
    last_offset: int
    max_timestamp: int


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    # Sequence numbers wrap from Integer.MAX_VALUE to 0.
    return next_seq == last_seq + 1 or (last_seq == INT32_MAX and next_seq == 0)


def _last_seq(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % (INT32_MAX + 1)


class ProducerStateManager:
    """Per-partition producer state. Not thread-safe: used under the partition's append order."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        #: producer id -> first offset of its open transaction (rule 4), for the LSO.
        self.ongoing: dict[int, int] = {}
        #: Completed transactions whose marker the high watermark has not passed (rule 5), in
        #: marker order.
        self.unreplicated: deque[CompletedTxn] = deque()
        #: min(ongoing.values()), recomputed only when the transaction holding it closes.
        self._first_ongoing: int | None = None
        self._first_ongoing_stale = False

    def check(self, header: BatchHeader) -> int | Duplicate:
        """``ErrorCode.NONE``, an error code to refuse the batch with, or a :class:`Duplicate`."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID or header.attributes & _CONTROL:
            return ErrorCode.NONE
        entry = self.producers.get(pid)
        if entry is None:
            # An unknown producer (new, or its state expired): accept any sequence, as Kafka does.
            return ErrorCode.NONE
        if header.producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if header.producer_epoch > entry.epoch:
            # A bumped epoch restarts the sequence at 0.
            if header.base_sequence != 0:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        else:
            last = _last_seq(header)
            for batch in entry.batches:
                if batch.first_seq == header.base_sequence and batch.last_seq == last:
                    return Duplicate(batch.first_offset, batch.last_offset, batch.max_timestamp)
            if entry.last_seq is not None and not _in_sequence(entry.last_seq, header.base_sequence):
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        if entry.current_txn_first_offset >= 0 and not header.attributes & _TRANSACTIONAL:
            return ErrorCode.INVALID_TXN_STATE  # rule 4 (ProducerAppendInfo.appendDataBatch)
        return ErrorCode.NONE

    def update(self, header: BatchHeader, base_offset: int) -> None:
        """Record a data batch appended at ``base_offset`` (its header's own base offset is
        ignored); a transactional one opens its producer's transaction if none is open. Control
        batches are ignored here: markers go through ``complete_txn``."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return
        attributes = header.attributes
        if attributes & _CONTROL:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = ProducerEntry(pid, header.producer_epoch)
            self.producers[pid] = entry
        elif header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.batches.append(BatchMetadata(header.base_sequence, _last_seq(header), base_offset,
                                           base_offset + header.last_offset_delta, header.max_timestamp))
        entry.last_timestamp = header.max_timestamp
        if attributes & _TRANSACTIONAL and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = base_offset
            self.ongoing[pid] = base_offset
            if self._first_ongoing is None and not self._first_ongoing_stale:
                self._first_ongoing = base_offset

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        """Whether a transaction marker may be written (rule 1; Kafka's ``appendEndTxnMarker``)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def complete_txn(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                     offset: int, timestamp: int) -> CompletedTxn | None:
        """Record a marker appended at ``offset``; the transaction it closed, if one was open (rule 4)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, producer_epoch)
            self.producers[producer_id] = entry
        elif producer_epoch != entry.epoch:
            entry.epoch = producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        if first < 0:
            return None
        entry.current_txn_first_offset = -1
        self._close(producer_id, first)
        txn = CompletedTxn(producer_id, first, offset, not commit)
        self.unreplicated.append(txn)
        return txn

    def _close(self, producer_id: int, first: int) -> None:
        del self.ongoing[producer_id]
        if first == self._first_ongoing:
            self._first_ongoing = None
            self._first_ongoing_stale = bool(self.ongoing)

    def first_ongoing_offset(self) -> int | None:
        """First offset of the earliest open transaction, None if none is open."""
        if self._first_ongoing_stale:
            self._first_ongoing = min(self.ongoing.values(), default=None)
            self._first_ongoing_stale = False
        return self._first_ongoing

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset a ``read_committed`` reader may not pass (rule 5), None if no
        transaction holds it back. Forgets completed transactions the high watermark passed."""
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()
        first = self.first_ongoing_offset()
        for txn in unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def has_open_transaction(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def entries(self) -> list[ProducerInfo]:
        """Every producer, as DescribeProducers reports them."""
        return [ProducerInfo(e.producer_id, e.epoch, -1 if e.last_seq is None else e.last_seq, e.last_timestamp,
                             e.coordinator_epoch, e.current_txn_first_offset) for e in self.producers.values()]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers without an open transaction whose last timestamp is at least
        ``expiration_ms`` before ``now_ms`` (``producer.id.expiration.ms``, Kafka's
        ``ProducerStateManager.removeExpiredProducers``); a producer with an open transaction here
        never expires, or the LSO would lose it. Returns their ids."""
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        return expired

    def last_records(self) -> dict[int, tuple[int, int]]:
        """producer id -> (last offset of its last data batch, -1 if none since its epoch began;
        its epoch): what the cleaner keeps of each producer (Kafka's
        ``lastRecordsOfActiveProducers``; ``storage.cleaner``)."""
        return {pid: (e.batches[-1].last_offset if e.batches else -1, e.epoch) for pid, e in self.producers.items()}

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Rebuild from data batch headers read from the log (their base offsets are the real
        ones); markers are replayed with ``complete_txn``."""
        for header in headers:
            self.update(header, header.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Forget batches, open transactions and completions at or above ``offset`` (the log was
        truncated there). A transaction whose marker was cut is not reopened: callers that cut
        markers rebuild the state from the log instead."""
        for pid in list(self.producers):
            entry = self.producers[pid]
            kept = [b for b in entry.batches if b.last_offset < offset]
            first = entry.current_txn_first_offset
            if first >= 0 and first >= offset:
                entry.current_txn_first_offset = -1
                self._close(pid, first)
            if not kept and entry.current_txn_first_offset < 0:
                del self.producers[pid]
            else:
                entry.batches = deque(kept, maxlen=BATCHES_PER_PRODUCER)
        while self.unreplicated and self.unreplicated[-1].last_offset >= offset:
            self.unreplicated.pop()

    # --- snapshots ------------------------------------------------------------------------------

    def snapshot(self, log_offset: int) -> bytes:
        """The state as of ``log_offset`` (the log end when taken), with a CRC over it."""
        parts = [_SNAPSHOT_HEAD.pack(_SNAPSHOT_MAGIC, _SNAPSHOT_VERSION, log_offset, len(self.producers))]
        for entry in self.producers.values():
            parts.append(_ENTRY.pack(entry.producer_id, entry.epoch, entry.coordinator_epoch, entry.last_timestamp,
                                     entry.current_txn_first_offset, len(entry.batches)))
            for b in entry.batches:
                parts.append(_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.max_timestamp))
        parts.append(_COUNT.pack(len(self.unreplicated)))
        for txn in self.unreplicated:
            parts.append(_TXN.pack(*txn))
        body = b"".join(parts)
        return body + _CRC.pack(_crc32c.crc32c(body))

    @classmethod
    def from_snapshot(cls, data: bytes) -> tuple[ProducerStateManager, int]:
        """Parse a snapshot (this version, or version 1 from before transactions); returns the
        state and the log offset it was taken at.

        Raises ``CorruptSnapshotError`` (a ValueError) when the bytes are not a whole, intact
        snapshot.
        """
        if len(data) < _SNAPSHOT_HEAD.size + _CRC.size:
            raise CorruptSnapshotError("snapshot truncated")
        body, (crc,) = data[:-_CRC.size], _CRC.unpack(data[-_CRC.size:])
        if _crc32c.crc32c(body) != crc:
            raise CorruptSnapshotError("snapshot CRC mismatch")
        magic, version, log_offset, count = _SNAPSHOT_HEAD.unpack_from(body, 0)
        if magic != _SNAPSHOT_MAGIC or version not in (1, _SNAPSHOT_VERSION):
            raise CorruptSnapshotError(f"not a producer state snapshot (magic {magic!r}, version {version})")
        state = cls()
        pos = _SNAPSHOT_HEAD.size
        try:
            for _ in range(count):
                if version == 1:
                    pid, epoch, n = _ENTRY_V1.unpack_from(body, pos)
                    entry = ProducerEntry(pid, epoch)
                    pos += _ENTRY_V1.size
                else:
                    pid, epoch, coordinator_epoch, last_ts, txn_first, n = _ENTRY.unpack_from(body, pos)
                    entry = ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch, last_timestamp=last_ts,
                                          current_txn_first_offset=max(txn_first, -1))
                    pos += _ENTRY.size
                for _ in range(n):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                if version == 1 and entry.batches:
                    entry.last_timestamp = entry.batches[-1].max_timestamp
                if pid in state.producers:
                    raise CorruptSnapshotError(f"producer {pid} listed twice")
                state.producers[pid] = entry
                if entry.current_txn_first_offset >= 0:
                    state.ongoing[pid] = entry.current_txn_first_offset
            if version > 1:
                (n,) = _COUNT.unpack_from(body, pos)
                pos += _COUNT.size
                for _ in range(n):
                    state.unreplicated.append(CompletedTxn(*_TXN.unpack_from(body, pos)))
                    pos += _TXN.size
        except struct.error:
            raise CorruptSnapshotError("snapshot truncated") from None
        if pos != len(body):
            raise CorruptSnapshotError("snapshot has trailing bytes")
        state._first_ongoing_stale = bool(state.ongoing)
        return state, log_offset


class _Segment(Protocol):
    def batches(self, start: int = 0, end: int | None = None, *,
                with_bytes: bool = True) -> Iterable[tuple[int, BatchHeader, bytes, int]]: ...

    def read_bytes(self, position: int, length: int) -> bytes: ...


def replay_segments(segments: Sequence[_Segment], high_watermark: int,
                    on_abort: Callable[[int, CompletedTxn, int], None] | None = None) -> ProducerStateManager:
    """The producer state of a log rebuilt from its segments (rule 3): every data batch header and
    every transaction marker, in offset order. Completed transactions whose marker is below
    ``high_watermark`` are dropped as the replay goes, so memory stays bounded by the transactions
    still unstable. ``on_abort(segment index, transaction, LSO at the abort)`` is told of each ABORT
    that closed a transaction: what its ``.txnindex`` entry holds (``txn_index.rebuild``)."""
    state = ProducerStateManager()
    unreplicated = state.unreplicated
    for i, seg in enumerate(segments):
        for pos, h, buf, off in seg.batches(with_bytes=False):
            if not h.attributes & _CONTROL:
                state.update(h, h.base_offset)
                continue
            if len(buf) - off < h.size:
                buf, off = seg.read_bytes(pos, h.size), 0
            try:
                marker = read_end_txn_marker(buf, off, h)
            except CorruptBatchError:
                marker = None  # recovery checked the CRC: not a marker we can act on
            if marker is None:
                continue  # emptied by the cleaner, or not a transaction marker
            done = state.complete_txn(h.producer_id, h.producer_epoch, marker[1], marker[0], h.base_offset,
                                      h.max_timestamp)
            if done is not None and done.is_aborted and on_abort is not None:
                first = state.first_ongoing_offset()
                on_abort(i, done, h.base_offset + 1 if first is None else first)
            while unreplicated and unreplicated[0].last_offset < high_watermark:
                unreplicated.popleft()
    return state
