"""The transaction coordinator of one ``__transaction_state`` partition.

Kafka's ``TransactionCoordinator`` and ``TransactionStateManager`` (the classic TV0/TV1 flow of
https://github.com/apache/kafka/tree/3.9/core/src/main/scala/kafka/coordinator/transaction),
on the records-first runtime (``coordinator/runtime/runtime.py``).

Theory of operation. Each handler validates a request against the metadata of its transactional
id and returns a ``CoordinatorResult``: the record of the transition (the whole new metadata, as
Kafka writes it) and the answer. The runtime appends the record, replays it with ``replay`` — the
only code that changes the metadata, the same that loads the partition — and answers once it is
durable. So "append first, then apply" holds as in Kafka's ``prepareTransitionTo`` /
``completeTransitionTo``; and since the runtime replays a record as it queues it, before the next
operation runs, no transition is ever half done between two operations: Kafka's in-memory
``pendingState`` (answered CONCURRENT_TRANSACTIONS) has nothing left to cover but the time a
decided transaction waits for its markers, which is its PrepareCommit/PrepareAbort state and is
answered CONCURRENT_TRANSACTIONS as Kafka does. PrepareEpochFence is likewise never visible: the
fence and its PrepareAbort are one operation.

Once a PrepareCommit/PrepareAbort record is durable (``on_appended``; at load, for every id left in
one, ``on_loaded``) the shard hands a :class:`MarkerJob` to ``hooks.prepared``; the service sends
the markers and then runs :meth:`TransactionShard.complete_transaction`, which writes
CompleteCommit/CompleteAbort.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from protocol.errors import ErrorCode
from protocol.transaction_log import TransactionLogKey, decode_key, decode_value, encode_key, encode_value

from ..runtime.contract import EMPTY_RESULT, Clock, CoordinatorResult, Record, Timer
from .config import TransactionConfig
from .markers import MarkerJob
from .metadata import TopicPartition, TransactionMetadata
from .state import EPOCH_EXHAUSTED, MAX_EPOCH, TransactionState
from .timers import TransactionTimers

__all__ = ["TransactionShard", "TransactionHooks", "InitResult"]

E = ErrorCode
S = TransactionState
log = logging.getLogger("groupcoord.transactions")


class InitResult(NamedTuple):
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


def _no_jobs(job: MarkerJob) -> None:
    pass


def _no_producer_ids() -> int:
    raise RuntimeError("no producer id source")


@dataclass(slots=True)
class TransactionHooks:
    """What the shard is handed by its service (set after the runtime is built)."""

    #: Allocates a producer id (``topics/producer_ids.ProducerIdManager.next_id``; the service
    #: makes sure a block is there first in cluster mode).
    new_producer_id: Callable[[], int] = _no_producer_ids
    #: A decision is durable: send its markers, then complete it.
    prepared: Callable[[MarkerJob], None] = _no_jobs


class TransactionShard:
    """One partition's transactional ids. Call only from the partition's serial executor."""

    def __init__(self, partition: int, config: TransactionConfig, clock: Clock, timer: Timer,
                 hooks: TransactionHooks | None = None) -> None:
        self.partition = partition
        self.config = config
        self.clock = clock
        self.hooks = hooks or TransactionHooks()
        #: Hard state: the last record of every id.
        self.transactions: dict[str, TransactionMetadata] = {}
        #: Soft fields of a transition this shard just wrote, applied by its replay.
        self._soft: dict[str, tuple[int, int]] = {}
        self.timers = TransactionTimers(self, timer)

    # --- replay and loading -------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None, written: object = None) -> None:
        """Apply one record as the log holds it (value None: tombstone). Raises
        UnknownRecordVersion for key or value versions we do not know (the loader skips them)."""
        txn_id = written.transactional_id if isinstance(written, TransactionLogKey) else decode_key(key).transactional_id
        soft = self._soft.pop(txn_id, (-1, -1)) if written is not None else (-1, -1)
        if value is None:
            self.transactions.pop(txn_id, None)
            return
        self.transactions[txn_id] = TransactionMetadata.from_value(txn_id, decode_value(value), *soft)

    def on_loaded(self) -> None:
        """Start the timers; every decided transaction gets its markers sent again (Kafka's
        ``loadTransactionsForTxnTopicPartition``): this is how a restarted coordinator finishes
        what it decided. Ongoing ones are left to their timeout."""
        self.timers.start()
        for meta in self.transactions.values():
            if meta.state.preparing:
                self.hooks.prepared(self._job(meta))

    def snapshot_records(self) -> Iterator[tuple[bytes, bytes]]:
        for txn_id, meta in self.transactions.items():
            yield encode_key(TransactionLogKey(txn_id)), encode_value(meta.to_value())

    # The runtime's transactional records (seam C4, docs/transactions.md): ``__transaction_state`` is written
    # only in plain batches, so these never see anything.

    def replay_transactional(self, offset: int, producer_id: int, producer_epoch: int, key: bytes,
                             value: bytes | None, written: object = None) -> None:
        pass

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        pass

    def snapshot_transactional_records(self) -> Iterable[tuple[int, int, int, bytes, bytes | None]]:
        return ()

    # --- writing ------------------------------------------------------------------------------

    def record(self, meta: TransactionMetadata) -> Record:
        """The record of the transition to ``meta`` (its soft fields wait for its replay)."""
        self._soft[meta.transactional_id] = (meta.last_producer_epoch, meta.previous_producer_id)
        return TransactionLogKey(meta.transactional_id), meta.to_value()

    def _job(self, meta: TransactionMetadata) -> MarkerJob:
        return MarkerJob(self.partition, meta.transactional_id, meta.producer_id, meta.producer_epoch,
                         meta.state is S.PREPARE_COMMIT, meta.partitions)

    def send_markers_of(self, decided: Iterable[TransactionMetadata]) -> Callable[[], None]:
        """An ``on_appended``: once the Prepare records are durable, their markers go out."""
        jobs = [self._job(meta) for meta in decided]

        def send() -> None:
            for job in jobs:
                self.hooks.prepared(job)
        return send

    def fence_and_abort(self, meta: TransactionMetadata, now_ms: int) -> TransactionMetadata:
        """An Ongoing transaction aborted by the coordinator (a new InitProducerId, a timeout):
        the epoch goes up by one first, so the old producer is fenced (Kafka's
        ``prepareFenceProducerEpoch``, then ``endTransaction(ABORT, isFromClient = false)``)."""
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH else meta.producer_epoch
        return meta.to(S.PREPARE_ABORT, now_ms, producer_epoch=epoch, last_producer_epoch=-1)

    # --- InitProducerId -----------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = -1,
                         expected_epoch: int = -1) -> CoordinatorResult[InitResult]:
        """InitProducerId with a transactional id (Kafka's ``handleInitProducerId``; the service
        checked the id, the timeout and the v3+ pair). ``expected_*`` -1: none given."""
        now = self.clock.now_ms()
        meta = self.transactions.get(transactional_id)
        if meta is None:
            pid = self.hooks.new_producer_id()
            new = TransactionMetadata(transactional_id, pid, 0, timeout_ms, S.EMPTY, frozenset(), -1, now)
            return CoordinatorResult([self.record(new)], InitResult(E.NONE, pid, 0))
        expected = expected_producer_id != -1
        # KIP-360: a producer naming its id is fenced unless the id is the current one, or the
        # previous one with an exhausted epoch (a retry after a rotation it never heard of).
        if expected and not (meta.producer_epoch == -1 or expected_producer_id == meta.producer_id
                             or (expected_producer_id == meta.previous_producer_id
                                 and expected_epoch >= EPOCH_EXHAUSTED)):
            return CoordinatorResult(response=InitResult(E.PRODUCER_FENCED))
        if meta.state.preparing:
            return CoordinatorResult(response=InitResult(E.CONCURRENT_TRANSACTIONS))
        if meta.state is S.ONGOING:
            # Abort the transaction first, under a bumped epoch the client never sees; its retry
            # (once CompleteAbort is written) bumps the epoch again.
            fenced = self.fence_and_abort(meta, now)
            return CoordinatorResult([self.record(fenced)], InitResult(E.CONCURRENT_TRANSACTIONS),
                                     on_appended=self.send_markers_of([fenced]))
        if meta.epoch_exhausted and (not expected or expected_epoch == meta.producer_epoch):
            pid = self.hooks.new_producer_id()
            new = meta.to(S.EMPTY, now, producer_id=pid, producer_epoch=0, timeout_ms=timeout_ms,
                          partitions=frozenset(), start_ms=-1,
                          last_producer_epoch=meta.producer_epoch if expected else -1,
                          previous_producer_id=meta.producer_id)
            return CoordinatorResult([self.record(new)], InitResult(E.NONE, pid, 0))
        # Kafka's prepareIncrementProducerEpoch.
        if not expected:
            epoch, last = meta.producer_epoch + 1, -1
        elif (meta.producer_epoch == -1 or expected_epoch == meta.producer_epoch) and not meta.epoch_exhausted:
            epoch, last = meta.producer_epoch + 1, meta.producer_epoch
        elif expected_epoch == meta.last_producer_epoch:
            epoch, last = meta.producer_epoch, meta.last_producer_epoch  # a retry: the same answer
        else:
            return CoordinatorResult(response=InitResult(E.PRODUCER_FENCED))
        new = meta.to(S.EMPTY, now, producer_epoch=epoch, last_producer_epoch=last, timeout_ms=timeout_ms,
                      partitions=frozenset(), start_ms=-1)
        return CoordinatorResult([self.record(new)], InitResult(E.NONE, new.producer_id, epoch))

    # --- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------------------------

    def _check_producer(self, meta: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> int:
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return E.NONE

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> CoordinatorResult[int]:
        """AddPartitionsToTxn v0-3 (and AddOffsetsToTxn, with the group's offsets partition):
        one outcome for the whole request (Kafka's ``handleAddPartitionsToTransaction``)."""
        meta = self.transactions.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error:
            return CoordinatorResult(response=error)
        assert meta is not None
        if meta.state.preparing:
            return CoordinatorResult(response=E.CONCURRENT_TRANSACTIONS)
        added = frozenset(partitions)
        if meta.state is S.ONGOING and added <= meta.partitions:
            return CoordinatorResult(response=E.NONE)  # nothing new: no write
        now = self.clock.now_ms()
        start = meta.start_ms if meta.state is S.ONGOING else now
        new = meta.to(S.ONGOING, now, partitions=meta.partitions | added, start_ms=start)
        return CoordinatorResult([self.record(new)], E.NONE)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ VerifyOnly (KIP-890 part 1; Kafka's
        ``handleVerifyPartitionsInTransaction``): a read. NONE for a partition in the
        transaction, TRANSACTION_ABORTABLE for one that is not; a producer error for all."""
        wanted = list(partitions)
        meta = self.transactions.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if not error and meta is not None and meta.state.preparing:
            error = E.CONCURRENT_TRANSACTIONS
        if error:
            return {tp: error for tp in wanted}
        assert meta is not None
        inside = meta.partitions if meta.state is S.ONGOING else frozenset()
        return {tp: E.NONE if tp in inside else E.TRANSACTION_ABORTABLE for tp in wanted}

    # --- EndTxn and completion ----------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool) -> CoordinatorResult[int]:
        """EndTxn v0-4 (Kafka's ``endTransaction``, TV0/TV1): NONE right after the Prepare record
        is durable; the markers follow."""
        meta = self.transactions.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error:
            return CoordinatorResult(response=error)
        assert meta is not None
        state = meta.state
        if state is S.ONGOING:
            decided = meta.to(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, self.clock.now_ms())
            return CoordinatorResult([self.record(decided)], E.NONE, on_appended=self.send_markers_of([decided]))
        if state is S.PREPARE_COMMIT:
            return CoordinatorResult(response=E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE)
        if state is S.PREPARE_ABORT:
            return CoordinatorResult(response=E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS)
        if state is S.COMPLETE_COMMIT:
            return CoordinatorResult(response=E.NONE if commit else E.INVALID_TXN_STATE)  # a retry
        if state is S.COMPLETE_ABORT:
            return CoordinatorResult(response=E.INVALID_TXN_STATE if commit else E.NONE)
        return CoordinatorResult(response=E.INVALID_TXN_STATE)  # Empty

    def complete_transaction(self, job: MarkerJob) -> CoordinatorResult[None]:
        """Every marker of ``job`` is written: CompleteCommit/CompleteAbort, with no partitions
        (Kafka's ``prepareComplete``). Nothing if the id moved on meanwhile (expired, reloaded
        and completed by another job)."""
        meta = self.transactions.get(job.transactional_id)
        deciding = S.PREPARE_COMMIT if job.commit else S.PREPARE_ABORT
        if (meta is None or meta.state is not deciding or meta.producer_id != job.producer_id
                or meta.producer_epoch != job.producer_epoch):
            return EMPTY_RESULT
        done = meta.to(S.COMPLETE_COMMIT if job.commit else S.COMPLETE_ABORT, self.clock.now_ms(),
                       partitions=frozenset())
        return CoordinatorResult([self.record(done)])

    def resend_markers(self) -> CoordinatorResult[None]:
        """Send the markers of every decided transaction again (a newer coordinator epoch)."""
        decided = [meta for meta in self.transactions.values() if meta.state.preparing]
        return CoordinatorResult(on_appended=self.send_markers_of(decided)) if decided else EMPTY_RESULT

    # --- introspection (KIP-664) --------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def list_transactions(self, states: frozenset[TransactionState] | None, producer_ids: frozenset[int] | None,
                          min_duration_ms: int = -1) -> list[TransactionMetadata]:
        """ListTransactions: ``states``/``producer_ids`` None match all; ``min_duration_ms`` >= 0
        keeps transactions running longer than that (v1, KIP-994)."""
        now = self.clock.now_ms()
        return [meta for meta in self.transactions.values()
                if (states is None or meta.state in states)
                and (producer_ids is None or meta.producer_id in producer_ids)
                and (min_duration_ms < 0 or (meta.start_ms >= 0 and now - meta.start_ms > min_duration_ms))]
