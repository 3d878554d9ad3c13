"""Producer-state snapshots (``storage/producer_state.py``): the file a partition keeps so that a
restart need not rescan the log's batch headers to know each idempotent producer's last batches.

Properties asserted on any bytes:

1. ``ProducerStateManager.from_snapshot`` returns ``(state, log offset)`` or raises
   ``CorruptSnapshotError`` (the loader then rebuilds the state from the log); nothing else.
2. An accepted state snapshots again to bytes that load to the same state and offset.
3. The loaded state answers ``check`` for batches of its producers (duplicates, sequence gaps,
   epochs, sequence wrap-around) with an error code or a ``Duplicate``, and takes ``update``,
   transaction markers (``check_marker``, ``complete_txn``), ``first_unstable_offset`` and
   ``truncate_to``, without raising.

The snapshot ends in a CRC, so random bytes rarely get past it: if bit 0 of the first input byte
is set, the CRC of the rest is recomputed before parsing, so mutations reach the layout checks.
"""

from __future__ import annotations

import crc32c

from protocol.records import MAGIC_V2, BatchHeader
from storage.errors import CorruptSnapshotError
from storage.producer_state import Duplicate, ProducerStateManager
from tests.fuzz.harness import Finding

NAME = "producer_snapshot"
INSTRUMENT = ("storage.producer_state",)

FIX_CRC = 1
_INT32_MAX = 2**31 - 1
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1


def _header(pid: int, epoch: int, seq: int, count: int, base_offset: int = 0, attributes: int = 0) -> BatchHeader:
    return BatchHeader(base_offset, 100, 0, MAGIC_V2, 0, attributes, count - 1, 0, 1000, pid, epoch, seq, count)


def seeds() -> list[bytes]:
    """Snapshots the manager writes: empty, one producer, several with full histories and a
    sequence about to wrap."""
    out = [bytes([0]) + ProducerStateManager().snapshot(0)]
    state = ProducerStateManager()
    state.update(_header(1000, 0, 0, 3), 0)
    out.append(bytes([FIX_CRC]) + state.snapshot(3))
    offset = 3
    for i in range(7):
        state.update(_header(2000, 1, i * 2, 2), offset)
        offset += 2
    state.update(_header(3000, 5, _INT32_MAX - 1, 4), offset)
    out.append(bytes([0]) + state.snapshot(offset + 4))
    # Transactions: one open, one completed above the high watermark.
    state.update(_header(4000, 0, 0, 2, attributes=0x10), offset + 4)
    state.update(_header(5000, 0, 0, 1, attributes=0x10), offset + 6)
    state.complete_txn(5000, 0, 3, False, offset + 7, 2000)
    out.append(bytes([FIX_CRC]) + state.snapshot(offset + 8))
    return out


def _fix_crc(data: bytes) -> bytes:
    if len(data) < 4:
        return data
    body = data[:-4]
    return body + crc32c.crc32c(body).to_bytes(4, "big")


def one_input(data: bytes) -> None:
    if not data:
        return
    raw = _fix_crc(data[1:]) if data[0] & FIX_CRC else data[1:]
    try:
        state, offset = ProducerStateManager.from_snapshot(raw)
    except CorruptSnapshotError:
        return
    try:
        again, again_offset = ProducerStateManager.from_snapshot(state.snapshot(offset))
    except CorruptSnapshotError as exc:
        raise Finding(f"a loaded state's own snapshot does not load: {exc}") from exc
    if again_offset != offset or again.producers != state.producers:
        raise Finding(f"snapshot round trip changed the state: {again.producers} != {state.producers}")
    # Property 3, on the first few producers (a snapshot may list thousands).
    for entry in list(state.producers.values())[:4]:
        last = entry.last_seq
        sequences = {0, _INT32_MAX} | ({last, (last + 1) % (_INT32_MAX + 1)} if last is not None else set())
        for epoch in (entry.epoch - 1, entry.epoch, entry.epoch + 1):
            for seq in sequences:
                if _INT16_MIN <= epoch <= _INT16_MAX and 0 <= seq <= _INT32_MAX:
                    _verdict(state, _header(entry.producer_id, epoch, seq, 2))
        for batch in list(entry.batches)[:2]:
            # A retry of a batch the state remembers is a duplicate of the first one it lists
            # with those sequence numbers (for the producer ids a batch can carry).
            if entry.producer_id >= 0 and 0 <= batch.first_seq <= _INT32_MAX and 0 <= batch.last_seq <= _INT32_MAX:
                count = (batch.last_seq - batch.first_seq) % (_INT32_MAX + 1) + 1
                verdict = _verdict(state, _header(entry.producer_id, entry.epoch, batch.first_seq, count))
                first = next(b for b in entry.batches if (b.first_seq, b.last_seq) == (batch.first_seq, batch.last_seq))
                if verdict != Duplicate(first.first_offset, first.last_offset, first.max_timestamp):
                    raise Finding(f"a retry of {batch} got {verdict!r}")
        state.update(_header(entry.producer_id, entry.epoch, 0, 1, attributes=0x10), offset)
        if state.check_marker(entry.producer_id, entry.epoch, entry.coordinator_epoch) == 0:
            state.complete_txn(entry.producer_id, entry.epoch, entry.coordinator_epoch, False, offset + 1, 0)
    state.first_unstable_offset(offset)
    state.truncate_to(offset // 2)


def _verdict(state: ProducerStateManager, header: BatchHeader) -> object:
    verdict = state.check(header)
    if not isinstance(verdict, (int, Duplicate)):
        raise Finding(f"check({header}) answered {verdict!r}")
    return verdict


if __name__ == "__main__":
    import sys

    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
