"""The transaction shard, step by step (reference: Kafka's TransactionCoordinatorTest and the
records of each step, https://github.com/apache/kafka/blob/3.9/core/src/test/scala/unit/kafka/coordinator/transaction/TransactionCoordinatorTest.scala):
every answer and every record written, for each step of a transaction and each error."""

from __future__ import annotations

import pytest

from coordinator.transactions.config import TransactionConfig
from coordinator.transactions.shard import InitResult
from coordinator.transactions.state import EPOCH_EXHAUSTED, TransactionState
from protocol.errors import ErrorCode as E
from protocol.transaction_log import TransactionLogValue

from .txn_test_context import TxnTestContext

S = TransactionState
T0 = 1_000_000
P0, P1, OFFS = ("orders", 0), ("orders", 1), ("__consumer_offsets", 17)


def ongoing(ctx: TxnTestContext, txn: str = "t") -> tuple[int, int]:
    r = ctx.init(txn)
    assert r.error == E.NONE
    assert ctx.add(txn, r.producer_id, r.producer_epoch, P0) == E.NONE
    return r.producer_id, r.producer_epoch


# --- InitProducerId ---------------------------------------------------------------------------


def test_init_unknown_id_writes_empty_with_new_pid_epoch_0() -> None:
    ctx = TxnTestContext()
    assert ctx.init("t", 30_000) == InitResult(E.NONE, 1000, 0)
    assert ctx.written() == [("t", TransactionLogValue(1000, 0, 30_000, 0, None, T0, -1))]


def test_init_again_bumps_the_epoch_and_takes_the_new_timeout() -> None:
    ctx = TxnTestContext()
    ctx.init("t")
    ctx.clock.now += 5
    assert ctx.init("t", 45_000) == InitResult(E.NONE, 1000, 1)
    assert ctx.written() == [("t", TransactionLogValue(1000, 1, 45_000, 0, None, T0 + 5, -1))]


def test_init_after_complete_commit_bumps_the_epoch() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx)
    ctx.end("t", pid, epoch, True)
    ctx.complete_all()
    assert ctx.state("t") is S.COMPLETE_COMMIT
    assert ctx.init("t") == InitResult(E.NONE, pid, epoch + 1)
    assert ctx.written()[0][1].transaction_partitions is None


def test_init_with_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    ctx = TxnTestContext()
    ctx.init("t")
    ctx.shard.transactions["t"] = ctx.shard.transactions["t"].to(S.EMPTY, T0, producer_epoch=EPOCH_EXHAUSTED)
    assert ctx.init("t") == InitResult(E.NONE, 1001, 0)
    assert ctx.written() == [("t", TransactionLogValue(1001, 0, 60_000, 0, None, T0, -1))]
    assert ctx.shard.transactions["t"].previous_producer_id == 1000


def test_kip360_retry_after_rotation_gets_the_same_answer() -> None:
    ctx = TxnTestContext()
    ctx.init("t")
    ctx.shard.transactions["t"] = ctx.shard.transactions["t"].to(S.EMPTY, T0, producer_epoch=EPOCH_EXHAUSTED)
    first = ctx.init("t", pid=1000, epoch=EPOCH_EXHAUSTED)
    assert first == InitResult(E.NONE, 1001, 0)
    # The response was lost; the producer asks again with its old id and epoch.
    assert ctx.init("t", pid=1000, epoch=EPOCH_EXHAUSTED) == first
    assert ctx.allocated == [1000, 1001]


def test_init_with_expected_epoch() -> None:
    ctx = TxnTestContext()
    ctx.init("t")
    assert ctx.init("t", pid=1000, epoch=0) == InitResult(E.NONE, 1000, 1)
    # A retry of that request (lastProducerEpoch 0): the same epoch, not another bump.
    assert ctx.init("t", pid=1000, epoch=0) == InitResult(E.NONE, 1000, 1)
    # An epoch that is neither current nor last: fenced, nothing written.
    ctx.init("t", pid=1000, epoch=1)
    ctx.last_records = []
    assert ctx.init("t", pid=1000, epoch=0) == InitResult(E.PRODUCER_FENCED)
    assert ctx.last_records == []


def test_init_with_another_producer_id_is_fenced() -> None:
    ctx = TxnTestContext()
    ctx.init("t")
    assert ctx.init("t", pid=999, epoch=0) == InitResult(E.PRODUCER_FENCED)
    assert ctx.last_records == []


def test_init_while_ongoing_fences_aborts_and_answers_concurrent_transactions() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx)
    ctx.clock.now += 10
    assert ctx.init("t") == InitResult(E.CONCURRENT_TRANSACTIONS)
    # PrepareAbort under the bumped epoch, the partitions kept for the markers.
    assert ctx.written() == [("t", TransactionLogValue(pid, epoch + 1, 60_000, 3, (("orders", (0,)),), T0 + 10, T0))]
    (job,) = ctx.jobs
    assert (job.producer_id, job.producer_epoch, job.commit, job.partitions) == (pid, epoch + 1, False, {P0})
    # Until the markers are written, the retry is told to wait.
    assert ctx.init("t") == InitResult(E.CONCURRENT_TRANSACTIONS)
    ctx.complete_all()
    assert ctx.written() == [("t", TransactionLogValue(pid, epoch + 1, 60_000, 5, (), T0 + 10, T0))]
    # The retry: Empty at epoch + 2.
    assert ctx.init("t") == InitResult(E.NONE, pid, epoch + 2)
    # The old producer is fenced everywhere.
    assert ctx.add("t", pid, epoch, P1) == E.PRODUCER_FENCED
    assert ctx.end("t", pid, epoch, True) == E.PRODUCER_FENCED


def test_init_while_prepared_is_concurrent_transactions_and_writes_nothing() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx)
    ctx.end("t", pid, epoch, True)
    assert ctx.init("t") == InitResult(E.CONCURRENT_TRANSACTIONS)
    assert ctx.last_records == []


# --- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------


def test_first_add_writes_ongoing_with_start_time_then_union() -> None:
    ctx = TxnTestContext()
    r = ctx.init("t")
    ctx.clock.now += 3
    assert ctx.add("t", r.producer_id, 0, P0) == E.NONE
    assert ctx.written() == [("t", TransactionLogValue(1000, 0, 60_000, 1, (("orders", (0,)),), T0 + 3, T0 + 3))]
    ctx.clock.now += 4
    assert ctx.add("t", r.producer_id, 0, P1, OFFS) == E.NONE
    assert ctx.written() == [("t", TransactionLogValue(
        1000, 0, 60_000, 1, (("__consumer_offsets", (17,)), ("orders", (0, 1))), T0 + 7, T0 + 3))]
    # All present already: NONE and no record.
    assert ctx.add("t", r.producer_id, 0, P0, P1) == E.NONE
    assert ctx.last_records == []


@pytest.mark.parametrize(("pid", "epoch", "error"), [
    (999, 0, E.INVALID_PRODUCER_ID_MAPPING), (1000, 1, E.PRODUCER_FENCED)])
def test_add_producer_errors(pid: int, epoch: int, error: int) -> None:
    ctx = TxnTestContext()
    ctx.init("t")
    assert ctx.add("t", pid, epoch, P0) == error
    assert ctx.last_records == []
    assert ctx.add("unknown", 1000, 0, P0) == E.INVALID_PRODUCER_ID_MAPPING


def test_add_while_prepared_is_concurrent_transactions() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx)
    ctx.end("t", pid, epoch, False)
    assert ctx.add("t", pid, epoch, P1) == E.CONCURRENT_TRANSACTIONS
    assert ctx.last_records == []
    ctx.complete_all()
    assert ctx.add("t", pid, epoch, P1) == E.NONE  # the next transaction
    assert ctx.written()[0][1].transaction_partitions == (("orders", (1,)),)


def test_verify_only() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx)
    v = ctx.shard.verify_partitions
    assert v("t", pid, epoch, [P0, P1]) == {P0: E.NONE, P1: E.TRANSACTION_ABORTABLE}
    assert v("t", pid + 1, epoch, [P0]) == {P0: E.INVALID_PRODUCER_ID_MAPPING}
    assert v("t", pid, epoch + 1, [P0]) == {P0: E.PRODUCER_FENCED}
    assert v("nope", pid, epoch, [P0]) == {P0: E.INVALID_PRODUCER_ID_MAPPING}
    ctx.end("t", pid, epoch, True)
    assert v("t", pid, epoch, [P0]) == {P0: E.CONCURRENT_TRANSACTIONS}
    ctx.complete_all()
    assert v("t", pid, epoch, [P0]) == {P0: E.TRANSACTION_ABORTABLE}


# --- EndTxn -----------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_writes_prepare_answers_then_complete_after_markers(commit: bool) -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx)
    ctx.add("t", pid, epoch, OFFS)
    ctx.clock.now += 20
    assert ctx.end("t", pid, epoch, commit) == E.NONE
    parts = (("__consumer_offsets", (17,)), ("orders", (0,)))
    assert ctx.written() == [("t", TransactionLogValue(pid, epoch, 60_000, 2 if commit else 3, parts, T0 + 20, T0))]
    (job,) = ctx.jobs
    assert (job.commit, job.partitions, job.partition) == (commit, {P0, OFFS}, 7)
    ctx.clock.now += 5
    ctx.complete_all()
    assert ctx.written() == [("t", TransactionLogValue(pid, epoch, 60_000, 4 if commit else 5, (), T0 + 25, T0))]
    # A retried EndTxn of the same outcome: NONE; of the other: INVALID_TXN_STATE.
    assert ctx.end("t", pid, epoch, commit) == E.NONE
    assert ctx.end("t", pid, epoch, not commit) == E.INVALID_TXN_STATE
    assert ctx.last_records == []


@pytest.mark.parametrize(("prepared_commit", "commit", "error"), [
    (True, True, E.CONCURRENT_TRANSACTIONS), (True, False, E.INVALID_TXN_STATE),
    (False, True, E.INVALID_TXN_STATE), (False, False, E.CONCURRENT_TRANSACTIONS)])
def test_end_while_prepared(prepared_commit: bool, commit: bool, error: int) -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx)
    ctx.end("t", pid, epoch, prepared_commit)
    assert ctx.end("t", pid, epoch, commit) == error
    assert ctx.last_records == []


def test_end_errors() -> None:
    ctx = TxnTestContext()
    r = ctx.init("t")
    assert ctx.end("t", r.producer_id, 0, True) == E.INVALID_TXN_STATE  # Empty
    assert ctx.end("t", r.producer_id, 0, False) == E.INVALID_TXN_STATE
    assert ctx.end("t", r.producer_id + 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert ctx.end("t", r.producer_id, 3, True) == E.PRODUCER_FENCED
    assert ctx.end("x", r.producer_id, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert ctx.last_records == []


def test_complete_of_a_stale_job_writes_nothing() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx)
    ctx.end("t", pid, epoch, True)
    (job,) = ctx.jobs
    ctx.complete(job)
    ctx.complete(job)
    assert ctx.last_records == []


# --- timers -----------------------------------------------------------------------------------


def test_timeout_aborts_under_a_bumped_epoch() -> None:
    ctx = TxnTestContext(TransactionConfig(abort_timed_out_interval_ms=10_000))
    r = ctx.init("t", timeout_ms=15_000)
    ctx.add("t", r.producer_id, 0, P0)
    ctx.sleep(10_000)
    assert ctx.state("t") is S.ONGOING  # 10 s < 15 s
    ctx.sleep(10_000)
    assert ctx.state("t") is S.PREPARE_ABORT
    assert ctx.written() == [("t", TransactionLogValue(r.producer_id, 1, 15_000, 3, (("orders", (0,)),),
                                                       T0 + 20_000, T0))]
    (job,) = ctx.jobs
    assert (job.producer_epoch, job.commit) == (1, False)
    ctx.complete_all()
    assert ctx.state("t") is S.COMPLETE_ABORT
    assert ctx.end("t", r.producer_id, 0, True) == E.PRODUCER_FENCED


def test_expired_ids_get_tombstones_and_then_invalid_mapping() -> None:
    ctx = TxnTestContext(TransactionConfig(id_expiration_ms=100_000, remove_expired_interval_ms=60_000))
    r = ctx.init("idle")
    pid, epoch = ongoing(ctx, "busy")
    ctx.init("busy2", timeout_ms=900_000)
    ctx.add("busy2", 1002, 0, P0)
    ctx.sleep(120_000)
    # "busy" timed out (60 s) at 70 s and was aborted; its Complete waits for the markers.
    assert [(t, v and v.transaction_status) for t, v in ctx.written()] == [("busy", 3), ("idle", None)]
    assert ctx.state("idle") is None and ctx.state("busy2") is S.ONGOING
    assert ctx.add("idle", r.producer_id, 0, P0) == E.INVALID_PRODUCER_ID_MAPPING


# --- loading ----------------------------------------------------------------------------------


def test_reload_resends_markers_of_prepared_transactions_only() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx, "a")
    ctx.end("a", pid, epoch, True)
    ongoing(ctx, "b")
    before = ctx.hard_state()
    ctx.reload()
    assert ctx.hard_state() == before
    (job,) = ctx.jobs
    assert (job.transactional_id, job.commit) == ("a", True)
    ctx.complete_all()
    assert ctx.state("a") is S.COMPLETE_COMMIT and ctx.state("b") is S.ONGOING


def test_snapshot_records_rebuild_the_same_state() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx, "a")
    ctx.init("b")
    records = list(ctx.shard.snapshot_records())
    fresh = TxnTestContext()
    for key, value in records:
        fresh.shard.replay(key, value)
    assert fresh.hard_state() == ctx.hard_state()


def test_unknown_value_version_raises_what_the_loader_skips() -> None:
    from protocol.transaction_log import TransactionLogKey, UnknownRecordVersion, encode_key

    ctx = TxnTestContext()
    with pytest.raises(UnknownRecordVersion):
        ctx.shard.replay(encode_key(TransactionLogKey("t")), b"\x00\x05" + bytes(40))


def test_list_and_describe() -> None:
    ctx = TxnTestContext()
    ongoing(ctx, "a")
    ctx.init("b")
    ctx.clock.now += 1000
    listed = ctx.shard.list_transactions(frozenset({S.ONGOING}), None)
    assert [m.transactional_id for m in listed] == ["a"]
    assert [m.transactional_id for m in ctx.shard.list_transactions(None, frozenset({1001}))] == ["b"]
    assert [m.transactional_id for m in ctx.shard.list_transactions(None, None, 500)] == ["a"]
    assert ctx.shard.list_transactions(None, None, 1000) == []
    meta = ctx.shard.describe("a")
    assert meta is not None and meta.state.kafka_name == "Ongoing" and meta.partitions == {P0}


def test_resend_markers_hands_over_every_prepared_transaction_again() -> None:
    ctx = TxnTestContext()
    pid, epoch = ongoing(ctx, "a")
    ctx.end("a", pid, epoch, False)
    ongoing(ctx, "b")
    ctx.jobs.clear()
    ctx.run(ctx.shard.resend_markers())
    assert [(j.transactional_id, j.commit) for j in ctx.jobs] == [("a", False)]
    assert ctx.last_records == []
