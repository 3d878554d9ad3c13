"""The two periodic operations of a transaction shard (Kafka's ``TransactionStateManager``
schedules both, https://github.com/apache/kafka/blob/3.9/core/src/main/scala/kafka/coordinator/transaction/TransactionStateManager.scala):

* every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (10 s) each Ongoing
  transaction older than its timeout is aborted under a bumped epoch, which fences its producer
  (``abortTimedOutTransactions``);
* every ``transaction.remove.expired.transaction.cleanup.interval.ms`` (1 h) each id in Empty or
  Complete* idle longer than ``transactional.id.expiration.ms`` gets a tombstone
  (``removeExpiredTransactionalIds``); its producer then gets INVALID_PRODUCER_ID_MAPPING.

Both are runtime timer operations: their records go through the runtime like any write (and may
span batches: a cleanup is non-atomic).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from protocol.transaction_log import TransactionLogKey

from ..runtime.contract import EMPTY_RESULT, Clock, CoordinatorResult, Record, Timer
from .config import TransactionConfig
from .metadata import TransactionMetadata
from .state import TransactionState

__all__ = ["TransactionTimers", "ABORT_TIMER_KEY", "EXPIRE_TIMER_KEY"]

ABORT_TIMER_KEY = "abort-timed-out-transactions"
EXPIRE_TIMER_KEY = "remove-expired-transactional-ids"
S = TransactionState


class TimedShard(Protocol):
    """What the timers use of ``shard.TransactionShard``."""

    config: TransactionConfig
    clock: Clock
    transactions: dict[str, TransactionMetadata]

    def fence_and_abort(self, meta: TransactionMetadata, now_ms: int) -> TransactionMetadata: ...

    def record(self, meta: TransactionMetadata) -> Record: ...

    def send_markers_of(self, decided: Iterable[TransactionMetadata]) -> Callable[[], None]: ...


class TransactionTimers:
    def __init__(self, shard: TimedShard, timer: Timer) -> None:
        self.shard = shard
        self.timer = timer

    def start(self) -> None:
        config = self.shard.config
        self.timer.schedule(ABORT_TIMER_KEY, config.abort_timed_out_interval_ms, self.abort_timed_out,
                            name=ABORT_TIMER_KEY)
        self.timer.schedule(EXPIRE_TIMER_KEY, config.remove_expired_interval_ms, self.remove_expired,
                            name=EXPIRE_TIMER_KEY)

    def abort_timed_out(self) -> CoordinatorResult[None]:
        shard = self.shard
        self.timer.schedule(ABORT_TIMER_KEY, shard.config.abort_timed_out_interval_ms, self.abort_timed_out,
                            name=ABORT_TIMER_KEY)
        now = shard.clock.now_ms()
        aborted = [shard.fence_and_abort(meta, now) for meta in shard.transactions.values()
                   if meta.state is S.ONGOING and meta.start_ms + meta.timeout_ms < now]
        if not aborted:
            return EMPTY_RESULT
        return CoordinatorResult([shard.record(meta) for meta in aborted], on_appended=shard.send_markers_of(aborted))

    def remove_expired(self) -> CoordinatorResult[None]:
        shard = self.shard
        self.timer.schedule(EXPIRE_TIMER_KEY, shard.config.remove_expired_interval_ms, self.remove_expired,
                            name=EXPIRE_TIMER_KEY)
        horizon = shard.clock.now_ms() - shard.config.id_expiration_ms
        records: list[Record] = [(TransactionLogKey(txn_id), None) for txn_id, meta in shard.transactions.items()
                                 if meta.state.expirable and meta.last_update_ms <= horizon]
        return CoordinatorResult(records) if records else EMPTY_RESULT
