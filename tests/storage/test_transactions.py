"""Transactions in a data partition (KIP-98): producer state, markers, the LSO and the ``.txnindex``."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.topics import partition_log
from coordinator.topics.partition_log import PRODUCER_SNAPSHOT, PartitionConfig, PartitionLog, load_producer_state
from protocol.errors import ErrorCode
from protocol.records import (
    BatchHeader,
    ControlRecordType,
    build_batch,
    decode_control_record,
    decode_records,
    encode_end_txn_marker,
    read_batch_header,
    read_end_txn_marker,
)
from storage import Log, LogOptions
from storage.producer_state import CompletedTxn, Duplicate, ProducerStateManager
from storage.txn_index import ENTRY_SIZE, AbortedTxn, decode_entries
from tests.storage.helpers import all_batches

OPTS = LogOptions(segment_bytes=100_000, index_interval_bytes=100, flush_policy="none", file_delete_delay_ms=0)
CONFIG = PartitionConfig(max_message_bytes=1 << 20, log_append_time=False, compression=None)


def data(pid: int = -1, epoch: int = -1, seq: int = -1, n: int = 1, *, txn: bool = False) -> bytearray:
    return bytearray(build_batch([(b"k%d" % i, b"v") for i in range(n)], timestamp_ms=1000, producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq, transactional=txn))


def open_plog(tmp_path: Path, options: LogOptions = OPTS) -> PartitionLog:
    storage = Log.open(tmp_path, "t", 0, options)
    return PartitionLog("t", 0, storage, CONFIG, load_producer_state(storage))


async def append(plog: PartitionLog, batch: bytearray) -> int:
    base, durable = plog.append_batch(batch, read_batch_header(batch, 0))
    await durable
    return base


async def marker(plog: PartitionLog, pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    out = plog.append_marker(pid, epoch, commit, coordinator_epoch, 2000)
    assert not isinstance(out, int), out
    await out[1]
    return out[0]


# --- control batch codec ----------------------------------------------------------------------


def test_control_batch_layout() -> None:
    batch = encode_end_txn_marker(42, 3, False, 7, 1234, base_offset=9, partition_leader_epoch=5)
    h = read_batch_header(batch, 0)
    assert (h.base_offset, h.partition_leader_epoch, h.magic, h.attributes) == (9, 5, 2, 0x30)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count, h.last_offset_delta) == (42, 3, -1, 1, 0)
    assert (h.base_timestamp, h.max_timestamp) == (1234, 1234)
    (record,) = decode_records(batch, 0, h)
    assert record.key == b"\x00\x00\x00\x00"  # version 0, ABORT = 0
    assert record.value == b"\x00\x00\x00\x00\x00\x07"  # version 0, coordinator epoch 7
    assert decode_control_record(record) == (0, ControlRecordType.ABORT)
    assert read_end_txn_marker(batch) == (False, 7)
    commit = encode_end_txn_marker(42, 3, True, 8, 1234)
    assert decode_records(commit, 0)[0].key == b"\x00\x00\x00\x01"
    assert read_end_txn_marker(commit) == (True, 8)


def test_an_empty_control_batch_is_no_marker() -> None:
    empty = build_batch([], timestamp_ms=1, producer_id=1, producer_epoch=0, transactional=True, control=True)
    assert read_end_txn_marker(empty) is None


# --- producer state -----------------------------------------------------------------------------


def header(pid: int, seq: int, base: int, *, txn: bool, epoch: int = 0, count: int = 1) -> BatchHeader:
    return BatchHeader(base, 100, -1, 2, 0, 0x10 if txn else 0, count - 1, 1000, 1000, pid, epoch, seq, count)


def test_transactional_batches_open_and_markers_close() -> None:
    state = ProducerStateManager()
    state.update(header(1, 0, 10, txn=True, count=2), 10)
    state.update(header(1, 2, 12, txn=True), 12)  # still the transaction opened at 10
    state.update(header(2, 0, 13, txn=True), 13)
    assert state.ongoing == {1: 10, 2: 13}
    assert state.first_unstable_offset(100) == 10
    assert state.check(header(1, 3, 0, txn=False)) == ErrorCode.INVALID_TXN_STATE
    assert state.check(header(1, 3, 0, txn=True)) == ErrorCode.NONE
    done = state.complete_txn(1, 0, 5, False, 14, 3000)
    assert done == CompletedTxn(1, 10, 14, True)
    entry = state.producers[1]
    assert (entry.coordinator_epoch, entry.last_timestamp, entry.current_txn_first_offset) == (5, 3000, -1)
    # Unreplicated until the high watermark passes the marker (Kafka's unreplicatedTxns).
    assert state.first_unstable_offset(14) == 10
    assert state.first_unstable_offset(15) == 13
    assert state.check(header(1, 3, 0, txn=False)) == ErrorCode.NONE
    # A marker for a producer without an open transaction completes nothing.
    assert state.complete_txn(1, 0, 5, True, 15, 3000) is None
    assert state.complete_txn(3, 0, 5, True, 16, 3000) is None
    assert state.complete_txn(2, 0, 5, True, 17, 3000) == CompletedTxn(2, 13, 17, False)
    assert state.first_unstable_offset(18) is None


def test_marker_epoch_checks() -> None:
    state = ProducerStateManager()
    assert state.check_marker(1, 0, 0) == ErrorCode.NONE  # unknown producer
    state.update(header(1, 0, 0, txn=True, epoch=4), 0)
    state.complete_txn(1, 4, 6, True, 1, 0)
    assert state.check_marker(1, 3, 9) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.check_marker(1, 4, 5) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert state.check_marker(1, 4, 6) == ErrorCode.NONE
    assert state.check_marker(1, 5, 7) == ErrorCode.NONE


def test_snapshot_carries_transactions() -> None:
    state = ProducerStateManager()
    state.update(header(1, 0, 0, txn=True), 0)
    state.update(header(2, 0, 1, txn=True), 1)
    state.complete_txn(2, 0, 3, False, 2, 99)
    again, at = ProducerStateManager.from_snapshot(state.snapshot(3))
    assert at == 3 and again.producers == state.producers
    assert again.ongoing == {1: 0} and list(again.unreplicated) == [CompletedTxn(2, 1, 2, True)]
    assert again.first_unstable_offset(2) == 0


def test_version_1_snapshots_still_load() -> None:
    import crc32c

    body = struct.pack(">4shqI", b"GCPS", 1, 5, 1) + struct.pack(">qhB", 7, 2, 1) + struct.pack(">iiqqq", 0, 4, 0, 4, 77)
    state, at = ProducerStateManager.from_snapshot(body + struct.pack(">I", crc32c.crc32c(body)))
    assert at == 5 and state.producers[7].last_seq == 4 and state.producers[7].last_timestamp == 77
    assert state.ongoing == {}


# --- the partition ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_lso_markers_and_the_txnindex(tmp_path: Path) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(n=2))  # 0-1, plain
    t1 = await append(plog, data(1, 0, 0, 2, txn=True))  # 2-3
    assert plog.has_open_transaction(1) and not plog.has_open_transaction(2)
    assert plog.last_stable_offset == 2
    t2 = await append(plog, data(2, 0, 0, txn=True))  # 4
    await append(plog, data(n=1))  # 5
    assert plog.last_stable_offset == 2
    assert await marker(plog, 1, commit=False, coordinator_epoch=3) == 6
    assert plog.last_stable_offset == t2 == 4
    assert await marker(plog, 2, commit=True) == 7
    assert plog.last_stable_offset == plog.high_watermark == 8
    assert plog.aborted_transactions(0, 8) == [(1, t1)]
    assert plog.aborted_transactions(7, 8) == []  # the abort's marker is below the fetch
    assert plog.aborted_transactions(0, 2) == []  # the read ends before the transaction
    # The .txnindex holds the abort only, in Kafka's 34-byte layout; LSO at abort = txn 2's start.
    raw = (tmp_path / "t-0" / f"{0:020d}.txnindex").read_bytes()
    assert len(raw) == ENTRY_SIZE == 34
    assert raw == struct.pack(">hqqqq", 0, 1, 2, 6, 4)
    infos = {p.producer_id: p for p in plog.producer_entries()}
    assert infos[1].coordinator_epoch == 3 and infos[1].current_txn_start_offset == -1
    assert infos[1].last_sequence == 1 and infos[2].last_timestamp == 2000
    await plog.close()


@pytest.mark.asyncio
async def test_the_lso_is_never_below_the_log_start(tmp_path: Path) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(1, 0, 0, txn=True))  # 0
    await append(plog, data(n=3))  # 1-3
    assert plog.last_stable_offset == 0
    await plog.log.advance_log_start_offset(2)  # DeleteRecords
    assert plog.last_stable_offset == 2
    await plog.close()


@pytest.mark.asyncio
async def test_marker_refusals_and_markers_for_unknown_producers(tmp_path: Path) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(1, 2, 0, txn=True))
    assert plog.append_marker(1, 1, False, 0, 0) == ErrorCode.INVALID_PRODUCER_EPOCH
    await marker(plog, 1, commit=True, epoch=2, coordinator_epoch=4)
    assert plog.append_marker(1, 2, False, 3, 0) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # A marker for a producer that wrote nothing here: no entry, the LSO follows the HW.
    await marker(plog, 9, commit=False)
    assert plog.last_stable_offset == plog.high_watermark == 3
    assert plog.aborted_transactions(0, 3) == []
    assert not (tmp_path / "t-0" / f"{0:020d}.txnindex").exists()
    await plog.close()


@pytest.mark.asyncio
async def test_lso_holds_until_the_marker_is_written(tmp_path: Path) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(1, 0, 0, txn=True))
    out = plog.append_marker(1, 0, False, 0, 0)
    assert not isinstance(out, int)
    # Queued, not written: a read_committed reader must not see the aborted batch as stable.
    assert plog.last_stable_offset == 0 and plog.aborted_transactions(0, 1) == []
    await out[1]
    assert plog.last_stable_offset == 2 and plog.aborted_transactions(0, 2) == [(1, 0)]
    await plog.close()


@pytest.mark.asyncio
async def test_state_and_index_survive_clean_and_unclean_restarts(tmp_path: Path) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(1, 0, 0, txn=True))  # 0
    await append(plog, data(2, 0, 0, txn=True))  # 1
    await marker(plog, 1, commit=False)  # 2
    await append(plog, data(3, 0, 0, txn=True))  # 3
    await plog.close()
    assert (tmp_path / "t-0" / PRODUCER_SNAPSHOT).exists()
    plog = open_plog(tmp_path)  # from the snapshot
    assert plog.last_stable_offset == 1 and plog.aborted_transactions(0, 4) == [(1, 0)]
    await marker(plog, 2, commit=False)  # 4: LSO at abort = txn 3's start
    await plog.log.flush()
    plog.log.abort()  # a crash: no snapshot, the active segment is rescanned
    index = tmp_path / "t-0" / f"{0:020d}.txnindex"
    index.write_bytes(index.read_bytes()[:40])  # damaged past the first entry
    plog = open_plog(tmp_path)
    assert plog.log.load_result.rescanned_from == 0
    assert decode_entries(index.read_bytes()) == [AbortedTxn(1, 0, 2, 1), AbortedTxn(2, 1, 4, 3)]
    assert plog.last_stable_offset == 3 and plog.has_open_transaction(3)
    assert plog.aborted_transactions(0, 5) == [(1, 0), (2, 1)]
    await plog.close()


@pytest.mark.asyncio
async def test_truncation_reopens_and_drops_index_entries(tmp_path: Path) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(1, 0, 0, txn=True))  # 0
    await marker(plog, 1, commit=False)  # 1
    await append(plog, data(2, 0, 0, txn=True))  # 2
    await marker(plog, 2, commit=False)  # 3
    await plog.truncate_to(3)
    assert plog.has_open_transaction(2) and plog.last_stable_offset == 2
    assert plog.aborted_transactions(0, 3) == [(1, 0)]
    assert decode_entries((tmp_path / "t-0" / f"{0:020d}.txnindex").read_bytes()) == [AbortedTxn(1, 0, 1, 2)]
    await plog.close()


@pytest.mark.asyncio
async def test_entries_follow_their_marker_across_rolls_and_retention(tmp_path: Path) -> None:
    options = LogOptions(segment_bytes=400, index_interval_bytes=100, flush_policy="none", file_delete_delay_ms=0,
                         retention_bytes=0)
    plog = open_plog(tmp_path, options)
    first = await append(plog, data(1, 0, 0, 3, txn=True))
    while len(plog.log.segments) < 2:
        await append(plog, data(n=2))
    abort_at = await marker(plog, 1, commit=False)
    second = plog.log.segments[-1]
    assert second.base_offset <= abort_at and second.txn_index.entries == [AbortedTxn(1, first, abort_at, abort_at + 1)]
    assert plog.log.segments[0].txn_index.entries == []
    # Collection starts at the segment holding the fetch offset; the entry is in a later one.
    assert plog.aborted_transactions(first, abort_at + 1) == [(1, first)]
    await plog.log.roll()
    await append(plog, data(n=1))
    assert await plog.log.apply_retention() >= 2
    assert not second.txn_index.path.exists()
    await plog.close()


@pytest.mark.asyncio
async def test_follower_replay_keeps_txn_state_and_index(tmp_path: Path) -> None:
    leader = open_plog(tmp_path / "a")
    await append(leader, data(1, 0, 0, txn=True))
    await append(leader, data(2, 0, 0, txn=True))
    await marker(leader, 1, commit=False)
    copy = leader.log.read(0, 1 << 20)
    follower = open_plog(tmp_path / "b")
    follower.replicate(1, 0)
    await follower.append_replicated(copy)
    assert follower.has_open_transaction(2) and not follower.has_open_transaction(1)
    assert follower.log.collect_aborted_txns(0, 3) == [(1, 0)]
    # In cluster mode the LSO never passes the high watermark, and a completed transaction whose
    # marker the HW has not passed still holds it back.
    repl = follower.replication
    assert repl is not None
    repl.high_watermark = 2
    assert follower.last_stable_offset == 0
    repl.high_watermark = 3
    assert follower.last_stable_offset == 1
    await asyncio.gather(leader.close(), follower.close())


@pytest.mark.asyncio
@pytest.mark.parametrize("commit", [True, False])
async def test_coordinator_built_control_batches_go_through_append_batch(tmp_path: Path, commit: bool) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(5, 1, 0, txn=True))
    await append(plog, encode_end_txn_marker(5, 1, commit, 2, 0))
    assert not plog.has_open_transaction(5)
    assert plog.aborted_transactions(0, 2) == ([] if commit else [(5, 0)])
    await plog.close()


# --- property: random interleavings against a model ---------------------------------------------

_OPS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["txn", "txn", "plain", "commit", "abort"]),
                          st.integers(1, 3)), max_size=30)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, bounds=st.tuples(st.integers(0, 60), st.integers(0, 60)))
def test_random_interleavings_match_a_model(tmp_path_factory: pytest.TempPathFactory,
                                            ops: list[tuple[int, str, int]], bounds: tuple[int, int]) -> None:
    root = tmp_path_factory.mktemp("txn")
    asyncio.run(_interleave(root, ops, bounds))


async def _interleave(root: Path, ops: list[tuple[int, str, int]], bounds: tuple[int, int]) -> None:
    options = LogOptions(segment_bytes=300, index_interval_bytes=100, flush_policy="none", file_delete_delay_ms=0)
    plog = open_plog(root, options)
    seqs = dict.fromkeys(range(4), 0)
    ongoing: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    end = 0
    for pid, kind, n in ops:
        if kind in ("txn", "plain"):
            batch = data(pid, 0, seqs[pid], n, txn=kind == "txn")
            verdict = plog.producers.check(read_batch_header(batch, 0))
            if kind == "plain" and pid in ongoing:
                assert verdict == ErrorCode.INVALID_TXN_STATE
                continue
            assert verdict == ErrorCode.NONE
            assert await append(plog, batch) == end
            seqs[pid] += n
            if kind == "txn":
                ongoing.setdefault(pid, end)
            end += n
        else:
            assert await marker(plog, pid, commit=kind == "commit") == end
            first = ongoing.pop(pid, None)
            if first is not None and kind == "abort":
                aborted.append(AbortedTxn(pid, first, end, min(ongoing.values(), default=end + 1)))
            end += 1
        assert plog.last_stable_offset == min(ongoing.values(), default=end)
        assert {p for p in range(4) if plog.has_open_transaction(p)} == set(ongoing)

    def expected(fetch: int, upper: int) -> list[tuple[int, int]]:
        hits = [a for a in aborted if a.last_offset >= fetch and a.first_offset < upper]
        return [(a.producer_id, a.first_offset) for a in sorted(hits, key=lambda a: a.first_offset)]

    fetch, upper = min(bounds), max(bounds)
    assert plog.aborted_transactions(0, end) == expected(0, end)
    if fetch < end:
        assert plog.aborted_transactions(fetch, upper) == expected(fetch, upper)
    assert [e for s in plog.log.segments for e in s.txn_index.entries] == aborted
    # A crash that loses every .txnindex and the recovery point: all rebuilt from the batches.
    plog.log.abort()
    for path in (root / "t-0").iterdir():
        if path.suffix == ".txnindex" or path.name == "recovery-point-offset-checkpoint":
            path.unlink()
    plog = open_plog(root, options)
    assert [e for s in plog.log.segments for e in s.txn_index.entries] == aborted
    assert plog.last_stable_offset == min(ongoing.values(), default=end)
    assert plog.aborted_transactions(0, end) == expected(0, end)
    await plog.close()


# --- the cleaner (Kafka's LogCleaner on transactions) --------------------------------------------


def keyed(key: bytes, value: bytes, pid: int = -1, seq: int = -1, *, txn: bool = False) -> bytearray:
    return bytearray(build_batch([(key, value)], timestamp_ms=1000, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                 base_sequence=seq, transactional=txn))


def _compacted(tmp_path: Path, now: list[int]) -> PartitionLog:
    options = LogOptions(segment_bytes=100_000, index_interval_bytes=100, flush_policy="none", file_delete_delay_ms=0,
                         cleanup_policy="compact", delete_retention_ms=1000)
    storage = Log.open(tmp_path, "t", 0, options, clock=lambda: now[0])
    return PartitionLog("t", 0, storage, CONFIG, load_producer_state(storage))


def _contents(plog: PartitionLog) -> list[tuple[int, bool, bytes | None]]:
    """(offset, is control, value) of every record left."""
    out = []
    for h, raw in all_batches(plog.log):
        for r in decode_records(raw, 0, h):
            out.append((h.base_offset + r.offset_delta, h.is_control, None if h.is_control else r.value))
    return out


@pytest.mark.asyncio
async def test_cleaner_drops_aborted_data_then_its_marker_after_the_horizon(tmp_path: Path) -> None:
    now = [10_000]
    plog = _compacted(tmp_path, now)
    await append(plog, keyed(b"a", b"v1"))  # 0
    await append(plog, keyed(b"a", b"aborted", 1, 0, txn=True))  # 1
    await marker(plog, 1, commit=False)  # 2
    await plog.log.roll()
    await append(plog, keyed(b"b", b"x"))  # 3, active
    assert await plog.log.clean(force=True, max_offset=plog.last_stable_offset) is not None
    # The aborted record is gone and never shadowed v1; its marker and index entry stay this pass.
    assert _contents(plog) == [(0, False, b"v1"), (2, True, None), (3, False, b"x")]
    assert plog.aborted_transactions(0, 4) == [(1, 1)]
    # Next pass: no data of the transaction left, so the marker becomes a tombstone-like batch.
    await plog.log.clean(force=True, max_offset=plog.last_stable_offset)
    assert _contents(plog) == [(0, False, b"v1"), (2, True, None), (3, False, b"x")]
    assert plog.aborted_transactions(0, 4) == []
    assert not (tmp_path / "t-0" / f"{0:020d}.txnindex").exists()
    now[0] += 1001  # past delete.retention.ms
    await plog.log.clean(force=True, max_offset=plog.last_stable_offset)
    assert _contents(plog) == [(0, False, b"v1"), (3, False, b"x")]
    await plog.close()


@pytest.mark.asyncio
async def test_cleaner_never_passes_the_lso_and_keeps_a_commit_while_its_data_remains(tmp_path: Path) -> None:
    now = [10_000]
    plog = _compacted(tmp_path, now)
    await append(plog, keyed(b"c", b"in txn", 2, 0, txn=True))  # 0: open
    await append(plog, keyed(b"c", b"y"))  # 1
    await plog.log.roll()
    await append(plog, keyed(b"c", b"z"))  # 2
    await plog.log.roll()
    assert plog.last_stable_offset == 0
    assert await plog.log.clean(force=True, max_offset=plog.last_stable_offset) is None
    assert [o for o, _c, _v in _contents(plog)] == [0, 1, 2]
    await marker(plog, 2, commit=True)  # 3
    await plog.log.roll()
    await append(plog, keyed(b"d", b"w"))  # 4, active
    await plog.log.clean(force=True, max_offset=plog.last_stable_offset)
    # Superseded records go (the committed one too); the COMMIT stays: a batch of it was seen.
    assert _contents(plog) == [(2, False, b"z"), (3, True, None), (4, False, b"w")]
    await plog.log.clean(force=True, max_offset=plog.last_stable_offset)
    assert (3, True, None) in _contents(plog)  # stamped, within the horizon
    now[0] += 1001
    await plog.log.clean(force=True, max_offset=plog.last_stable_offset)
    assert _contents(plog) == [(2, False, b"z"), (4, False, b"w")]
    await plog.close()


@pytest.mark.asyncio
async def test_a_txnindex_of_an_unknown_version_is_rebuilt_and_orphans_are_dropped(tmp_path: Path) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(1, 0, 0, txn=True))  # 0
    await marker(plog, 1, commit=False)  # 1
    await plog.log.roll()
    await append(plog, data(n=1))  # 2
    await plog.close()
    directory = tmp_path / "t-0"
    index = directory / f"{0:020d}.txnindex"
    assert index.read_bytes() == struct.pack(">hqqqq", 0, 1, 0, 1, 2)
    index.write_bytes(struct.pack(">hqqqq", 1, 1, 0, 1, 2))  # a version this reader does not know
    orphan = directory / f"{99:020d}.txnindex"
    orphan.write_bytes(b"")
    plog = open_plog(tmp_path)  # a clean shutdown: nothing rescanned, yet the index is rebuilt
    assert plog.log.load_result.rescanned_from is None
    assert any("txnindex" in r for r in plog.log.load_result.repairs)
    assert index.read_bytes() == struct.pack(">hqqqq", 0, 1, 0, 1, 2)
    assert not orphan.exists()
    assert plog.aborted_transactions(0, 3) == [(1, 0)]
    await plog.close()


async def _restart_rebuilding(plog: PartitionLog, tmp_path: Path, now: list[int]) -> PartitionLog:
    """Close, drop the producer snapshot and reopen: the state is rebuilt from the log alone."""
    await plog.close()
    (tmp_path / "t-0" / PRODUCER_SNAPSHOT).unlink()
    return _compacted(tmp_path, now)


@pytest.mark.asyncio
@pytest.mark.parametrize("keep", [True, False])
async def test_cleaner_keeps_the_last_batch_of_an_active_producer_empty(tmp_path: Path, keep: bool) -> None:
    now = [10_000]
    plog = _compacted(tmp_path, now)
    await append(plog, keyed(b"a", b"v1", 7, 0))  # 0: producer 7's first batch
    await append(plog, keyed(b"b", b"v1", 7, 1))  # 1: its last batch
    await append(plog, keyed(b"a", b"v2"))  # 2
    await append(plog, keyed(b"b", b"v2"))  # 3
    await plog.log.roll()
    await append(plog, keyed(b"c", b"x"))  # 4, active
    if keep:
        assert await plog.clean(force=True) is not None
    else:  # the storage-level pass without the active producers: what rule (1) prevents
        assert await plog.log.clean(force=True, max_offset=plog.last_stable_offset) is not None
    assert _contents(plog) == [(2, False, b"v2"), (3, False, b"v2"), (4, False, b"x")]
    batches = [(h.base_offset, h.records_count, h.producer_id, h.base_sequence) for h, _raw in all_batches(plog.log)]
    if keep:  # batch 0 went, batch 1 stays without its record
        assert batches == [(1, 0, 7, 1), (2, 1, -1, -1), (3, 1, -1, -1), (4, 1, -1, -1)]
        empty = all_batches(plog.log)[0][1]
        await plog.clean(force=True)  # a later pass keeps it as it is
        assert all_batches(plog.log)[0][1] == empty
    plog = await _restart_rebuilding(plog, tmp_path, now)
    retry = keyed(b"b", b"v1", 7, 1)
    outcome = plog.producers.check(read_batch_header(retry, 0))
    if keep:
        assert outcome == Duplicate(1, 1, 1000)  # the retry answers with the original's offset
        assert plog.producers.check(read_batch_header(keyed(b"d", b"v", 7, 3), 0)) == (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        assert await append(plog, keyed(b"d", b"v", 7, 2)) == 5  # the next sequence
    else:
        assert outcome == ErrorCode.NONE  # forgotten: the retry would be written twice
    await plog.close()


@pytest.mark.asyncio
async def test_cleaner_keeps_an_aborted_last_batch_and_so_its_marker(tmp_path: Path) -> None:
    now = [10_000]
    plog = _compacted(tmp_path, now)
    await append(plog, keyed(b"a", b"aborted", 8, 0, txn=True))  # 0
    await marker(plog, 8, commit=False)  # 1
    await plog.log.roll()
    await append(plog, keyed(b"c", b"x"))  # 2, active
    for _ in range(2):
        now[0] += 1001  # past any delete horizon
        await plog.clean(force=True)
        # The aborted record is gone; its batch stays empty, so the ABORT marker and its index
        # entry stay too (data of the transaction is still found, as in Kafka).
        assert _contents(plog) == [(1, True, None), (2, False, b"x")]
        assert plog.aborted_transactions(0, 3) == [(8, 0)]
    plog = await _restart_rebuilding(plog, tmp_path, now)
    assert not plog.has_open_transaction(8) and plog.last_stable_offset == 3
    assert plog.producers.check(read_batch_header(keyed(b"a", b"aborted", 8, 0, txn=True), 0)) == Duplicate(0, 0, 1000)
    # Once the producer moves on, the empty batch is no longer its last: it goes, then (a pass
    # that finds no data of the transaction, then the horizon) the marker.
    await append(plog, keyed(b"e", b"v", 8, 1))  # 3
    await plog.log.roll()
    for _ in range(2):
        await plog.clean(force=True)
        assert [h.base_offset for h, _raw in all_batches(plog.log)] == [1, 2, 3]
    now[0] += 1001
    await plog.clean(force=True)
    assert [h.base_offset for h, _raw in all_batches(plog.log)] == [2, 3]
    await plog.close()


@pytest.mark.asyncio
async def test_cleaner_keeps_the_last_marker_of_a_producer_without_data_since(tmp_path: Path) -> None:
    now = [10_000]
    plog = _compacted(tmp_path, now)
    await append(plog, keyed(b"a", b"v1", 9, 0))  # 0
    await marker(plog, 9, commit=True, epoch=1)  # 1: a newer epoch, no data of it here
    await append(plog, keyed(b"a", b"v2"))  # 2
    await plog.log.roll()
    await append(plog, keyed(b"c", b"x"))  # 3, active
    assert plog.producers.last_records() == {9: (-1, 1)}
    for _ in range(3):
        await plog.clean(force=True)
        now[0] += 1001
    # Past the horizon the marker's record goes, but its batch stays, empty (Kafka's RETAIN_EMPTY).
    batches = [(h.base_offset, h.is_control, h.records_count, h.producer_epoch) for h, _raw in all_batches(plog.log)]
    assert batches == [(1, True, 0, 1), (2, False, 1, -1), (3, False, 1, -1)]
    await plog.close()


@pytest.mark.asyncio
async def test_an_unclean_restart_reads_the_log_once_for_the_txnindex_and_producer_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = open_plog(tmp_path)
    await append(plog, data(1, 0, 0, txn=True))  # 0
    await append(plog, data(2, 0, 0))  # 1: idempotent
    await plog.log.roll()
    await append(plog, data(3, 0, 0, txn=True))  # 2: still open at the crash
    await marker(plog, 1, commit=False)  # 3
    await append(plog, data(2, 0, 1))  # 4
    await plog.log.flush()
    plog.log.abort()  # a crash: the segment holding the marker is rescanned

    def second_pass(*_args: object) -> ProducerStateManager:
        raise AssertionError("the log was replayed a second time")

    with monkeypatch.context() as patched:
        patched.setattr(partition_log, "_rebuild_producer_state", second_pass)
        plog = open_plog(tmp_path)
    assert plog.log.load_result.rescanned_from is not None
    assert plog.aborted_transactions(0, 5) == [(1, 0)]
    assert plog.last_stable_offset == 2 and plog.has_open_transaction(3) and not plog.has_open_transaction(1)
    retry = data(2, 0, 1)
    assert plog.producers.check(read_batch_header(retry, 0)) == Duplicate(4, 4, 1000)
    # The same state a replay of its own builds.
    assert plog.producers.snapshot(5) == partition_log._rebuild_producer_state(plog.log).snapshot(5)
    # Handed over once; and only for the high watermark recovery used.
    assert plog.log.take_replayed_producers(None) is None
    await plog.close()
