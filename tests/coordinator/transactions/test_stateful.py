"""A hypothesis state machine over one transaction shard: producers with a few transactional ids
init, add partitions, end transactions (with or without their markers done), time passes (the
timeout abort, the id expiration) and the partition crashes and reloads.

Checked after every step:

* every transition replayed is one Kafka allows (``state.VALID_PREVIOUS``), whatever wrote it;
* a (producer id, epoch) pair handed to a producer is never handed out again, and epochs of one
  producer id never go down; no producer id is allocated twice; no epoch reaches 32767 in an answer;
* replaying every record written so far into a fresh shard rebuilds the same hard state;
* every transaction in PrepareCommit/PrepareAbort has its markers on their way (a job).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.transactions.config import TransactionConfig
from coordinator.transactions.shard import InitResult
from coordinator.transactions.state import MAX_EPOCH, TransactionState, is_valid_transition
from protocol.errors import ErrorCode as E
from protocol.transaction_log import serialize

from .txn_test_context import TxnTestContext

IDS = ("a", "b", "c")
PARTS = (("t", 0), ("t", 1), ("__consumer_offsets", 3))


class TransactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = TxnTestContext(TransactionConfig(abort_timed_out_interval_ms=5_000, id_expiration_ms=200_000,
                                                    remove_expired_interval_ms=50_000))
        #: What each id's producer believes it holds.
        self.producers: dict[str, tuple[int, int]] = {}
        self.handed_out: set[tuple[int, int]] = set()
        self.last_epoch: dict[int, int] = {}
        self._watch_replays()

    def _watch_replays(self) -> None:
        shard = self.ctx.shard
        replay = shard.replay

        def checked(key: bytes, value: bytes | None, written: object = None) -> None:
            from protocol.transaction_log import decode_key, decode_value

            txn_id = decode_key(key).transactional_id
            old = shard.transactions.get(txn_id)
            if value is not None:
                new = TransactionState(decode_value(value).transaction_status)
                assert is_valid_transition(None if old is None else old.state, new), (txn_id, old, new)
                meta = decode_value(value)
                previous = self.last_epoch.get(meta.producer_id, -1)
                assert meta.producer_epoch >= previous, "an epoch went down"
                self.last_epoch[meta.producer_id] = meta.producer_epoch
            else:
                assert old is not None and old.state.expirable
            replay(key, value, written)

        shard.replay = checked  # type: ignore[method-assign]

    def _answered(self, txn_id: str, result: InitResult) -> None:
        if result.error == E.NONE:
            pair = (result.producer_id, result.producer_epoch)
            assert result.producer_epoch < MAX_EPOCH
            if self.producers.get(txn_id) != pair:  # a retry gets the same pair back
                assert pair not in self.handed_out, f"{pair} handed out twice"
            self.handed_out.add(pair)
            self.producers[txn_id] = pair

    @rule(txn_id=st.sampled_from(IDS), with_epoch=st.booleans(), timeout=st.sampled_from([10_000, 60_000]))
    def init(self, txn_id: str, with_epoch: bool, timeout: int) -> None:
        pid, epoch = self.producers.get(txn_id, (-1, -1)) if with_epoch else (-1, -1)
        self._answered(txn_id, self.ctx.init(txn_id, timeout, pid, epoch))

    @rule(txn_id=st.sampled_from(IDS), parts=st.lists(st.sampled_from(PARTS), min_size=1, max_size=3))
    def add(self, txn_id: str, parts: list[tuple[str, int]]) -> None:
        pid, epoch = self.producers.get(txn_id, (5, 0))
        error = self.ctx.add(txn_id, pid, epoch, *parts)
        if error == E.NONE:
            meta = self.ctx.shard.transactions[txn_id]
            assert meta.state is TransactionState.ONGOING and set(parts) <= meta.partitions

    @rule(txn_id=st.sampled_from(IDS), commit=st.booleans())
    def end(self, txn_id: str, commit: bool) -> None:
        pid, epoch = self.producers.get(txn_id, (5, 0))
        before = self.ctx.shard.transactions.get(txn_id)
        error = self.ctx.end(txn_id, pid, epoch, commit)
        if error == E.NONE and before is not None and before.state is TransactionState.ONGOING:
            assert self.ctx.state(txn_id) is (TransactionState.PREPARE_COMMIT if commit
                                              else TransactionState.PREPARE_ABORT)

    @rule()
    def markers_done(self) -> None:
        self.ctx.complete_all()

    @rule(ms=st.sampled_from([1_000, 7_000, 70_000]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)

    @rule()
    def crash_and_reload(self) -> None:
        self.ctx.reload()
        self._watch_replays()

    @rule(txn_id=st.sampled_from(IDS))
    def exhaust_epoch(self, txn_id: str) -> None:
        """Jump an Empty id's epoch near exhaustion (as if many inits had happened): rotation."""
        from coordinator.runtime.contract import CoordinatorResult

        meta = self.ctx.shard.transactions.get(txn_id)
        if meta is not None and meta.state is TransactionState.EMPTY and meta.producer_epoch < 32_764:
            worn = meta.to(TransactionState.EMPTY, self.ctx.clock.now, producer_epoch=32_764)
            self.ctx.run(CoordinatorResult([self.ctx.shard.record(worn)]))
            self.producers[txn_id] = (meta.producer_id, 32_764)

    @invariant()
    def replay_rebuilds_the_same_state(self) -> None:
        fresh = TxnTestContext()
        for key, value in self.ctx.log:
            fresh.shard.replay(*serialize(key, value))
        assert fresh.hard_state() == self.ctx.hard_state()

    @invariant()
    def prepared_transactions_have_marker_jobs(self) -> None:
        waiting = {job.transactional_id for job in self.ctx.jobs}
        for txn_id, meta in self.ctx.shard.transactions.items():
            if meta.state.preparing:
                assert txn_id in waiting

    @invariant()
    def producer_ids_allocated_once(self) -> None:
        assert len(self.ctx.allocated) == len(set(self.ctx.allocated))


TransactionMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
test_transaction_state_machine = TransactionMachine.TestCase
