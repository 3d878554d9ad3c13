"""Sequence checks, duplicates, epochs, truncation and snapshots of idempotent-producer state."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import ErrorCode
from protocol.records import BatchHeader, build_batch, read_batch_header
from storage.producer_state import Duplicate, ProducerStateManager


def header(pid: int = 7, epoch: int = 0, seq: int = 0, count: int = 1, base_offset: int = 0, ts: int = 1000,
           attributes: int = 0) -> BatchHeader:
    return BatchHeader(base_offset, 100, -1, 2, 0, attributes, count - 1, ts, ts, pid, epoch, seq, count)


def test_in_order_batches_are_accepted_and_a_gap_is_refused() -> None:
    state = ProducerStateManager()
    assert state.check(header(seq=0, count=3)) == ErrorCode.NONE
    state.update(header(seq=0, count=3), 0)
    assert state.check(header(seq=3, count=2)) == ErrorCode.NONE
    state.update(header(seq=3, count=2), 3)
    assert state.check(header(seq=6)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check(header(seq=4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_retried_batch_is_a_duplicate_with_the_original_offsets() -> None:
    state = ProducerStateManager()
    for i in range(5):
        state.update(header(seq=i * 2, count=2, ts=100 + i), 10 + i * 2)
    assert state.check(header(seq=4, count=2)) == Duplicate(14, 15, 102)
    # Only five batches are remembered: the sixth pushes out the first.
    state.update(header(seq=10, count=2), 20)
    assert state.check(header(seq=0, count=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs() -> None:
    state = ProducerStateManager()
    state.update(header(epoch=3, seq=0), 0)
    assert state.check(header(epoch=2, seq=1)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.check(header(epoch=4, seq=5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check(header(epoch=4, seq=0)) == ErrorCode.NONE
    state.update(header(epoch=4, seq=0), 1)
    assert state.producers[7].epoch == 4 and len(state.producers[7].batches) == 1


def test_unknown_producers_non_idempotent_and_control_batches_are_not_checked() -> None:
    state = ProducerStateManager()
    assert state.check(header(seq=42)) == ErrorCode.NONE
    assert state.check(header(pid=-1, seq=-1)) == ErrorCode.NONE
    state.update(header(pid=-1, seq=-1), 0)
    state.update(header(seq=0, attributes=0x20), 0)
    assert state.producers == {}


def test_sequence_wraps_at_int_max() -> None:
    state = ProducerStateManager()
    state.update(header(seq=2**31 - 2, count=2), 0)
    assert state.check(header(seq=0)) == ErrorCode.NONE


def test_truncation_forgets_batches_past_the_new_end() -> None:
    state = ProducerStateManager()
    state.update(header(seq=0, count=2), 0)
    state.update(header(seq=2, count=2), 2)
    state.truncate_to(2)
    assert state.check(header(seq=2, count=2)) == ErrorCode.NONE
    state.truncate_to(0)
    assert state.producers == {}


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(1, 5)), max_size=40))
def test_snapshot_round_trip_and_replay_agree(batches: list[tuple[int, int, int]]) -> None:
    live = ProducerStateManager()
    headers = []
    offset = 0
    seqs: dict[int, int] = {}
    for pid, epoch, count in batches:
        seq = seqs.get(pid, 0)
        h = header(pid=pid, epoch=epoch, seq=seq, count=count, base_offset=offset)
        live.update(h, offset)
        headers.append(h)
        seqs[pid] = seq + count
        offset += count
    restored, at = ProducerStateManager.from_snapshot(live.snapshot(offset))
    assert at == offset and restored.producers == live.producers
    replayed = ProducerStateManager()
    replayed.replay(headers)
    assert replayed.producers == live.producers


def test_damaged_snapshot_is_refused() -> None:
    state = ProducerStateManager()
    state.update(header(), 0)
    data = bytearray(state.snapshot(1))
    data[10] ^= 1
    with pytest.raises(ValueError):
        ProducerStateManager.from_snapshot(bytes(data))
    with pytest.raises(ValueError):
        ProducerStateManager.from_snapshot(bytes(data[:8]))


def test_remove_expired_spares_open_transactions() -> None:
    state = ProducerStateManager()
    for pid, ts, txn in ((1, 100, False), (2, 100, True), (3, 900, False)):
        batch = build_batch([(b"k", b"v")], timestamp_ms=ts, producer_id=pid, producer_epoch=0, base_sequence=0,
                            transactional=txn)
        state.update(read_batch_header(batch, 0), pid)
    assert state.remove_expired(1099, 1000) == []
    assert state.remove_expired(1100, 1000) == [1]
    assert state.remove_expired(10**9, 1000) == [3]
    assert set(state.producers) == {2} and state.has_open_transaction(2)
    assert state.last_records() == {2: (2, 0)}
