"""The transaction APIs on the wire: route each transactional id to its ``__transaction_state``
partition, refuse work for partitions that are loading or not ours, run the shard's handlers
through the runtime, and send the markers of decided transactions.

Routing is Kafka's: ``abs(java_hash(transactional_id)) % transaction.state.log.num.partitions``
(``TransactionStateManager.partitionFor``). Served: InitProducerId (22; without a transactional id
it goes to the idempotent path, ``topics/producer_ids.py``), AddPartitionsToTxn (24: v0-3 from
producers, v4-5 batched from brokers, with VerifyOnly, KIP-890 part 1), AddOffsetsToTxn (25),
EndTxn (26, v0-4), DescribeTransactions (65) and ListTransactions (66, KIP-664), and the
``verify`` of seam C3 (docs/transactions.md) for the produce path. PRODUCER_FENCED (KIP-588) is answered
INVALID_PRODUCER_EPOCH to the versions before it (InitProducerId < 4, the three others < 2), as
``KafkaApis`` does.

A partition that is not served answers COORDINATOR_LOAD_IN_PROGRESS while it loads and
NOT_COORDINATOR otherwise; an append the runtime refused maps as Kafka's
``appendTransactionToLog`` does: NOT_ENOUGH_REPLICAS and a timeout are COORDINATOR_NOT_AVAILABLE,
records too large UNKNOWN_SERVER_ERROR, a partition no longer ours NOT_COORDINATOR.

**Coordinator epoch.** Every marker carries one; a data partition refuses a marker whose epoch is
below the highest it saw for the producer (TRANSACTION_COORDINATOR_FENCED). In cluster mode it is
the ``__transaction_state`` partition's leader epoch (``become_coordinator``), as in Kafka. On a
single node there is no leader epoch, so the node keeps a counter in its data directory
(``COORDINATOR_EPOCH_FILE``), raised by one and made durable at every start before anything is
loaded (``next_node_coordinator_epoch``): a restarted node never sends a smaller epoch than its
previous life did.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Protocol, TypeVar

from kafka.protocol.admin import DescribeTransactionsResponse, ListTransactionsResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
)

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.hashing import partition_for
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..context import Handler, RequestContext
from ..data_dir import atomic_write
from ..runtime.contract import CoordinatorResult
from ..runtime.errors import RecordTooLarge
from ..runtime.runtime import CoordinatorRuntime, CoordinatorState, NotActiveError, unanswered
from ..security.acl import CLUSTER_NAME, AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed, allowed_names
from .config import TransactionConfig
from .coordinator_type import TRANSACTION_STATE
from .marker_channel import MarkerChannel, MarkerOutcome
from .markers import MarkerJob, MarkerWriter
from .metadata import TopicPartition, TransactionMetadata
from .shard import InitResult, TransactionHooks, TransactionShard
from .state import TransactionState

__all__ = ["TransactionService", "ProducerIds", "next_node_coordinator_epoch", "COORDINATOR_EPOCH_FILE"]

E = ErrorCode
T = TypeVar("T")
log = logging.getLogger("groupcoord.transactions")

#: The single node's coordinator epoch, one integer; raised at every start.
COORDINATOR_EPOCH_FILE = "transaction_coordinator_epoch"
#: The offsets topic, where AddOffsetsToTxn adds the group's partition (group/ names it too).
CONSUMER_OFFSETS = "__consumer_offsets"
#: Versions before KIP-588's PRODUCER_FENCED: they get INVALID_PRODUCER_EPOCH instead.
_FENCED_FROM = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2,
                ApiKey.END_TXN: 2}
#: How long a Complete write waits before it retries an ISR below min.insync.replicas.
_COMPLETE_RETRY_MS = 100
#: How long an AddPartitionsToTxn / AddOffsetsToTxn that finds the id's previous transaction
#: still writing its markers waits for its Complete (queued: the add's own answer waits for
#: durability past it) before answering CONCURRENT_TRANSACTIONS.
#: Clients retry that answer only after a backoff — 20 ms in the Java producer
#: (``TransactionManager``'s ADD_PARTITIONS_RETRY_BACKOFF_MS, KAFKA-5477:
#: https://issues.apache.org/jira/browse/KAFKA-5477) and in librdkafka as measured here — while
#: in a cluster the markers and the Complete take two replicated writes (a few ms) after EndTxn
#: is answered, so the next transaction's first add nearly always arrives in between. Waiting no
#: longer than that backoff never delays a client more than the retry would.
CONCURRENT_WAIT_MS = 20


async def _sleep_ms(ms: int) -> None:
    await asyncio.sleep(ms / 1000)


def next_node_coordinator_epoch(data_dir: Path) -> int:
    """The coordinator epoch of this start of a single node: one more than the last start's,
    durable before it is used."""
    path = data_dir / COORDINATOR_EPOCH_FILE
    previous = -1
    if path.exists():
        text = path.read_text(encoding="utf-8", errors="replace").strip()
        try:
            previous = int(text)
        except ValueError:
            from ..config import ConfigError
            raise ConfigError(f"{path}: expected an integer, found {text[:40]!r}") from None
    epoch = previous + 1
    atomic_write(path, f"{epoch}\n".encode())
    return epoch


class ProducerIds(Protocol):
    """What the service needs of ``topics/producer_ids.ProducerIdManager``."""

    claim_block: Callable[[], tuple[int, int]] | None

    @property
    def exhausted(self) -> bool: ...

    async def refill(self) -> None: ...

    def next_id(self) -> int: ...


class NamedTopic(Protocol):
    @property
    def name(self) -> str: ...


def _describe(transactional_id: str, shard: TransactionShard) -> TransactionMetadata | None:
    return shard.describe(transactional_id)


def _fenced(api: ApiKey, version: int, error: int) -> int:
    if error == E.PRODUCER_FENCED and version < _FENCED_FROM[api]:
        return E.INVALID_PRODUCER_EPOCH
    return error


def _refused(exc: NotActiveError) -> int:
    """An append the runtime refused (Kafka's ``appendTransactionToLog`` error mapping)."""
    if isinstance(exc, RecordTooLarge):
        return E.UNKNOWN_SERVER_ERROR
    if getattr(exc, "error_code", None) is not None:
        return E.COORDINATOR_NOT_AVAILABLE  # NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT
    return E.NOT_COORDINATOR


class TransactionService:
    def __init__(self, runtime: CoordinatorRuntime[TransactionShard], hooks: TransactionHooks,
                 config: TransactionConfig, state_partitions: Callable[[], int | None],
                 offsets_partitions: Callable[[], int], producer_ids: ProducerIds, idempotent_init: Handler,
                 *, marker_writer: MarkerWriter | None = None,
                 partition_exists: Callable[[str, int], bool] = lambda topic, partition: True,
                 node_coordinator_epoch: int = 0, ensure_topic: Callable[[], object] = lambda: None,
                 marker_retry_backoff_ms: int = 100, concurrent_wait_ms: int = CONCURRENT_WAIT_MS,
                 sleep_ms: Callable[[int], Awaitable[None]] | None = None,
                 authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.runtime = runtime
        #: WRITE (DESCRIBE to look up) on the transactional id, then what each API adds
        #: (KafkaApis; coordinator/security/request_checks.py). Brokers' AddPartitionsToTxn v4+ needs CLUSTER_ACTION.
        self.authorizer = authorizer
        self.config = config
        #: The partition count of ``__transaction_state``, None while it does not exist.
        self.state_partitions = state_partitions
        #: The partition count of ``__consumer_offsets`` (AddOffsetsToTxn's routing).
        self.offsets_partitions = offsets_partitions
        self.producer_ids = producer_ids
        self.idempotent_init = idempotent_init
        self.partition_exists = partition_exists
        #: Creates ``__transaction_state`` when first needed (FindCoordinator does it too).
        self.ensure_topic = ensure_topic
        self.node_coordinator_epoch = node_coordinator_epoch
        #: Cluster mode: the leader epoch of each partition this node leads.
        self._leader_epochs: dict[int, int] = {}
        self.marker_retry_backoff_ms = marker_retry_backoff_ms
        self.marker_writer = marker_writer
        #: Pauses between marker retries (tests hand in a stepping clock's).
        self.sleep_ms = sleep_ms or _sleep_ms
        self._loader: asyncio.Task[None] | None = None
        self._loads: dict[int, asyncio.Future[None]] = {}
        self._marker_tasks: set[asyncio.Future[None]] = set()
        #: Per id whose decided transaction is finishing: resolved once its Complete is queued.
        self._finishing: dict[str, asyncio.Future[None]] = {}
        self.concurrent_wait_ms = concurrent_wait_ms
        hooks.new_producer_id = producer_ids.next_id
        hooks.prepared = self._on_prepared

    # --- becoming the coordinator -------------------------------------------------------------

    def load_all(self) -> None:
        """Single node: load every ``__transaction_state`` partition in the background."""
        count = self.state_partitions()
        if count is None or self._loader is not None:
            return
        self.runtime.queue_loading(range(count))

        async def run() -> None:
            await self.runtime.logs.wait_opened(self.runtime.topic)
            for p in range(count):
                await self.runtime.load(p)

        self._loader = asyncio.ensure_future(run())

    def become_coordinator(self, partition: int, leader_epoch: int) -> None:
        """Cluster mode: this node leads ``__transaction_state-<partition>`` at ``leader_epoch``,
        the coordinator epoch its markers carry (Kafka's ``onElection``)."""
        previous = self._leader_epochs.get(partition)
        self._leader_epochs[partition] = leader_epoch
        task = self._loads.get(partition)
        if self.runtime.state(partition) is CoordinatorState.ACTIVE:
            if previous is not None and previous != leader_epoch:
                # A newer epoch of our own leadership: the decided transactions' markers go out
                # again under it (Kafka reloads the partition with the new coordinator epoch).
                try:
                    unanswered(self.runtime.write(partition, "resend-markers", lambda s: s.resend_markers()))
                except NotActiveError:
                    pass
            return
        if task is not None and not task.done():
            return
        self.runtime.queue_loading([partition])
        self._loads[partition] = asyncio.ensure_future(self.runtime.load(partition))

    def resign(self, partition: int, *, standby: bool = True) -> None:
        """Cluster mode: another node leads the partition now; its marker jobs stop at their next
        retry (``_still_ours``) and a Complete they would write is refused (NOT_COORDINATOR)."""
        self._leader_epochs.pop(partition, None)
        task = self._loads.pop(partition, None)
        if task is not None and not task.done():
            task.cancel()
        if not standby or self.runtime.state(partition) is not CoordinatorState.STANDBY:
            self.runtime.unload(partition)
        if standby:
            self.runtime.standby(partition)

    def coordinator_epoch(self, partition: int) -> int:
        return self._leader_epochs.get(partition, self.node_coordinator_epoch)

    # topics/ listener (single node)
    def topic_created(self, info: NamedTopic) -> None:
        if info.name == self.runtime.topic:
            self.load_all()

    def topic_deleted(self, info: NamedTopic) -> None:
        pass

    def partitions_added(self, info: NamedTopic, old_count: int) -> None:
        pass

    def shutdown(self) -> None:
        if self._loader is not None:
            self._loader.cancel()
        for task in self._loads.values():
            task.cancel()
        for job in list(self._marker_tasks):
            job.cancel()
        self.runtime.unload_all()

    # --- routing ------------------------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int | None:
        count = self.state_partitions()
        if count is None:
            self.ensure_topic()
            count = self.state_partitions()
            if count is None:
                return None
        return partition_for(transactional_id, count)

    def _error_for(self, partition: int | None) -> int:
        if partition is None:
            return E.COORDINATOR_NOT_AVAILABLE
        return self.runtime.serving_error(partition)

    async def _write(self, partition: int, name: str,
                     op: Callable[[TransactionShard], CoordinatorResult[T]]) -> tuple[int, object]:
        """(NONE, the operation's response), or (the error of a refused append, None)."""
        try:
            return E.NONE, await self.runtime.write(partition, name, op)
        except NotActiveError as exc:
            return _refused(exc), None

    @staticmethod
    async def _wait_written(written: Awaitable[object]) -> tuple[int, object]:
        """``_write``'s answer for a write already queued."""
        try:
            return E.NONE, await written
        except NotActiveError as exc:
            return _refused(exc), None

    # --- markers ------------------------------------------------------------------------------

    def _on_prepared(self, job: MarkerJob) -> None:
        """A decision of ``job.partition`` is durable: send its markers, then complete it."""
        txn_id = job.transactional_id
        #: Resolved once the Complete is queued (or the job ended without one): adds waiting on
        #: the id may go then (``_add``).
        completing: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._finishing[txn_id] = completing
        task = asyncio.ensure_future(self._finish(job, self.coordinator_epoch(job.partition), completing))
        self._marker_tasks.add(task)
        task.add_done_callback(self._marker_tasks.discard)

        def forget(_task: asyncio.Future[None]) -> None:
            if not completing.done():
                completing.set_result(None)
            if self._finishing.get(txn_id) is completing:
                del self._finishing[txn_id]
        task.add_done_callback(forget)

    def _still_ours(self, partition: int) -> bool:
        """Whether ``partition`` is served here. A job of an earlier load (or an earlier epoch of
        the same leadership) may go on: its markers carry an epoch no higher than the current
        one's, and its Complete is written only if the id is still in the state it decided."""
        return self.runtime.state(partition) is CoordinatorState.ACTIVE

    async def _finish(self, job: MarkerJob, epoch: int, completing: asyncio.Future[None] | None = None) -> None:
        writer = self.marker_writer
        where = {"transactional_id": job.transactional_id, "producer_id": job.producer_id,
                 "producer_epoch": job.producer_epoch, "commit": job.commit}
        if writer is None:
            log.error("no marker writer: the transaction stays prepared", extra=where)
            return
        channel = MarkerChannel(writer, self.partition_exists, self.sleep_ms, self.marker_retry_backoff_ms)
        while True:
            try:
                outcome = await channel.send(job, epoch, lambda: self._still_ours(job.partition))
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("writing transaction markers failed; retrying", extra=where)
                await self.sleep_ms(self.marker_retry_backoff_ms * 10)
                if not self._still_ours(job.partition):
                    return
        if outcome is not MarkerOutcome.COMPLETE:
            return
        while self._still_ours(job.partition):
            try:
                written = self.runtime.write(job.partition, "complete-transaction",
                                             lambda s: s.complete_transaction(job))
            except NotActiveError as exc:
                error = _refused(exc)
            else:
                # The Complete is replayed into the shard now (runtime rule 2): an add queued after
                # it sees the id completed and is answered only once its own record — after the
                # Complete in the log — is durable, so it may go without waiting for this one.
                if completing is not None and not completing.done():
                    completing.set_result(None)
                error, _ = await self._wait_written(written)
            if error != E.COORDINATOR_NOT_AVAILABLE:
                return  # written, or the partition is no longer ours: its new owner finishes
            await self.sleep_ms(_COMPLETE_RETRY_MS)

    async def wait_markers(self) -> None:
        """Until no marker job runs (tests)."""
        while self._marker_tasks:
            await asyncio.gather(*list(self._marker_tasks), return_exceptions=True)

    # --- InitProducerId -----------------------------------------------------------------------

    def init_producer_id(self, ctx: RequestContext, request: KafkaRequest) -> object:
        if request.transactional_id is None:
            return self.idempotent_init(ctx, request)  # it checks IDEMPOTENT_WRITE itself
        if self._txn_denied(ctx, request.transactional_id):
            return InitProducerIdResponse(version=ctx.api_version, throttle_time_ms=0,
                                          error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                                          producer_epoch=-1)
        return self._init_transactional(ctx, request)

    def _txn_denied(self, ctx: RequestContext, transactional_id: str,
                    operation: AclOperation = AclOperation.WRITE) -> bool:
        return self.authorizer.enabled and not allowed(self.authorizer, ctx, operation,
                                                       ResourceType.TRANSACTIONAL_ID, transactional_id)

    async def _init_transactional(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version

        def answer(error: int, pid: int = -1, epoch: int = -1) -> KafkaResponse:
            return InitProducerIdResponse(version=v, throttle_time_ms=0,
                                          error_code=_fenced(ApiKey.INIT_PRODUCER_ID, v, error),
                                          producer_id=pid, producer_epoch=epoch)

        txn_id: str = request.transactional_id
        expected_pid, expected_epoch = (request.producer_id, request.producer_epoch) if v >= 3 else (-1, -1)
        if txn_id == "" or (expected_pid == -1) != (expected_epoch == -1):
            return answer(E.INVALID_REQUEST)
        timeout = request.transaction_timeout_ms
        if timeout <= 0 or timeout > self.config.max_timeout_ms:
            return answer(E.INVALID_TRANSACTION_TIMEOUT)
        p = self.partition_of(txn_id)
        error = self._error_for(p)
        if error:
            return answer(error)
        assert p is not None
        ids = self.producer_ids
        if ids.claim_block is not None and ids.exhausted:
            try:
                await ids.refill()
            except Exception:
                return answer(E.COORDINATOR_NOT_AVAILABLE)
        error, result = await self._write(
            p, "init-producer-id", lambda s: s.init_producer_id(txn_id, timeout, expected_pid, expected_epoch))
        if error or not isinstance(result, InitResult):
            return answer(error or E.UNKNOWN_SERVER_ERROR)
        return answer(result.error, result.producer_id, result.producer_epoch)

    # --- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------------------------

    async def _add(self, txn_id: str, pid: int, epoch: int, partitions: list[TopicPartition]) -> int:
        if txn_id == "":
            return E.INVALID_REQUEST
        p = self.partition_of(txn_id)
        error = self._error_for(p)
        if error:
            return error
        assert p is not None
        error, result = await self._write(p, "add-partitions-to-txn",
                                          lambda s: s.add_partitions(txn_id, pid, epoch, partitions))
        finishing = self._finishing.get(txn_id)
        if result == E.CONCURRENT_TRANSACTIONS and finishing is not None and self.concurrent_wait_ms > 0:
            # The previous transaction's markers are on their way: wait (bounded) until its
            # Complete is queued and try once more rather than send the client into its backoff
            # (CONCURRENT_WAIT_MS says why).
            await asyncio.wait({finishing}, timeout=self.concurrent_wait_ms / 1000)
            error, result = await self._write(p, "add-partitions-to-txn",
                                              lambda s: s.add_partitions(txn_id, pid, epoch, partitions))
        return error or (result if isinstance(result, int) else E.UNKNOWN_SERVER_ERROR)

    async def _verify(self, txn_id: str, pid: int, epoch: int,
                      partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        p = self.partition_of(txn_id) if txn_id else None
        error = E.INVALID_REQUEST if not txn_id else self._error_for(p)
        if not error:
            assert p is not None
            try:
                return await self.runtime.read(p, "verify-partitions-in-txn",
                                               lambda s: s.verify_partitions(txn_id, pid, epoch, partitions))
            except NotActiveError as exc:
                error = _refused(exc)
        return {tp: error for tp in partitions}

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Contract C3 (KIP-890 part 1): AddPartitionsToTxn v4 VerifyOnly for the produce path."""
        return await self._verify(transactional_id, producer_id, producer_epoch, partitions)

    def _unknown(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: E.UNKNOWN_TOPIC_OR_PARTITION for tp in partitions if not self.partition_exists(*tp)}

    async def _add_one(self, v: int, txn_id: str, pid: int, epoch: int, partitions: list[TopicPartition],
                       denied: frozenset[str] = frozenset()) -> dict[TopicPartition, int]:
        """One client transaction (v0-3): partitions of ``denied`` topics (TOPIC_AUTHORIZATION_FAILED)
        and unknown ones fail and the others are not attempted; otherwise the coordinator's one
        outcome goes to every partition."""
        unknown: dict[TopicPartition, int] = {tp: E.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp[0] in denied}
        unknown.update(self._unknown([tp for tp in partitions if tp[0] not in denied]))
        if unknown:
            return {tp: unknown.get(tp, E.OPERATION_NOT_ATTEMPTED) for tp in partitions}
        error = _fenced(ApiKey.ADD_PARTITIONS_TO_TXN, v, await self._add(txn_id, pid, epoch, partitions))
        return {tp: error for tp in partitions}

    @staticmethod
    def _topic_results(results: dict[TopicPartition, int]) -> list[KafkaStruct]:
        by_topic: dict[str, list[KafkaStruct]] = {}
        for (topic, partition), error in results.items():
            by_topic.setdefault(topic, []).append(
                AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                    partition_index=partition, partition_error_code=int(error)))
        return [AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
                for name, parts in by_topic.items()]

    @staticmethod
    def _partitions(topics: list[KafkaStruct]) -> list[TopicPartition]:
        return [(t.name, p) for t in topics for p in t.partitions]

    async def add_partitions_to_txn(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        if v <= 3:
            txn_id = request.v3_and_below_transactional_id
            partitions = self._partitions(request.v3_and_below_topics)
            if self._txn_denied(ctx, txn_id):
                results: dict[TopicPartition, int] = {
                    tp: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in partitions}
            else:
                results = await self._add_one(v, txn_id, request.v3_and_below_producer_id,
                                              request.v3_and_below_producer_epoch, partitions,
                                              self._unwritable(ctx, partitions))
            return AddPartitionsToTxnResponse(version=v, throttle_time_ms=0,
                                              results_by_topic_v3_and_below=self._topic_results(results))
        if self.authorizer.enabled and not allowed(self.authorizer, ctx, AclOperation.CLUSTER_ACTION,
                                                   ResourceType.CLUSTER, CLUSTER_NAME):
            # v4+ comes from brokers only (KIP-890).
            return AddPartitionsToTxnResponse(version=v, throttle_time_ms=0,
                                              error_code=E.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
        answers = []
        for txn in request.transactions:
            partitions = self._partitions(txn.topics)
            if txn.verify_only:
                results = await self._verify(txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions)
            else:
                results = await self._add_one(v, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                              partitions)
            answers.append(AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=self._topic_results(results)))
        return AddPartitionsToTxnResponse(version=v, throttle_time_ms=0, error_code=E.NONE,
                                          results_by_transaction=answers)

    def _unwritable(self, ctx: RequestContext, partitions: list[TopicPartition]) -> frozenset[str]:
        """The topics a client may not add to its transaction: those without WRITE, and internal
        ones whatever the ACLs (KafkaApis handleAddPartitionsToTxnRequest)."""
        if not self.authorizer.enabled:
            return frozenset()
        names = {t for t, _ in partitions}
        candidates = {t for t in names if t not in (CONSUMER_OFFSETS, TRANSACTION_STATE)}
        return frozenset(names - allowed_names(self.authorizer, ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                               candidates))

    async def add_offsets_to_txn(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        denial = (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if self._txn_denied(ctx, request.transactional_id)
                  else E.GROUP_AUTHORIZATION_FAILED if self.authorizer.enabled and not allowed(
                      self.authorizer, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id)
                  else E.NONE)
        if denial:
            return AddOffsetsToTxnResponse(version=v, throttle_time_ms=0, error_code=denial)
        # The group's partition of __consumer_offsets joins the transaction, so the marker reaches
        # the offsets TxnOffsetCommit writes there (Kafka's handleAddOffsetsToTxnRequest).
        offsets_partition = (CONSUMER_OFFSETS, partition_for(request.group_id, self.offsets_partitions()))
        error = await self._add(request.transactional_id, request.producer_id, request.producer_epoch,
                                [offsets_partition])
        return AddOffsetsToTxnResponse(version=v, throttle_time_ms=0,
                                       error_code=_fenced(ApiKey.ADD_OFFSETS_TO_TXN, v, error))

    # --- EndTxn -------------------------------------------------------------------------------

    async def end_txn(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version

        def answer(error: int) -> KafkaResponse:
            return EndTxnResponse(version=v, throttle_time_ms=0, error_code=_fenced(ApiKey.END_TXN, v, error))

        txn_id: str = request.transactional_id
        if self._txn_denied(ctx, txn_id):
            return answer(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if txn_id == "":
            return answer(E.INVALID_REQUEST)
        p = self.partition_of(txn_id)
        error = self._error_for(p)
        if error:
            return answer(error)
        assert p is not None
        commit = bool(request.committed)
        error, result = await self._write(
            p, "end-transaction",
            lambda s: s.end_transaction(txn_id, request.producer_id, request.producer_epoch, commit))
        return answer(error or (result if isinstance(result, int) else E.UNKNOWN_SERVER_ERROR))

    # --- DescribeTransactions, ListTransactions (KIP-664) -------------------------------------

    async def describe_transactions(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        Described = DescribeTransactionsResponse.TransactionState
        states = []
        for txn_id in request.transactional_ids:
            p = self.partition_of(txn_id) if txn_id else None
            error = E.INVALID_REQUEST if not txn_id else self._error_for(p)
            if self._txn_denied(ctx, txn_id, AclOperation.DESCRIBE):
                error = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            meta: TransactionMetadata | None = None
            if not error:
                assert p is not None
                try:
                    meta = await self.runtime.read(p, "describe-transactions", partial(_describe, txn_id))
                except NotActiveError:
                    error = E.NOT_COORDINATOR
                if not error and meta is None:
                    error = E.TRANSACTIONAL_ID_NOT_FOUND
            if error or meta is None:
                states.append(Described(error_code=int(error), transactional_id=txn_id, transaction_state="",
                                        transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                                        producer_epoch=-1, topics=[]))
                continue
            topics: dict[str, list[int]] = {}
            for topic, partition in sorted(meta.partitions):
                topics.setdefault(topic, []).append(partition)
            if self.authorizer.enabled:  # only the topics the principal may DESCRIBE are shown
                shown = allowed_names(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, list(topics))
                topics = {t: ps for t, ps in topics.items() if t in shown}
            states.append(Described(
                error_code=0, transactional_id=txn_id, transaction_state=meta.state.kafka_name,
                transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
                producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                topics=[Described.TopicData(topic=t, partitions=ps) for t, ps in topics.items()]))
        return DescribeTransactionsResponse(version=ctx.api_version, throttle_time_ms=0, transaction_states=states)

    async def list_transactions(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        unknown: list[str] = []
        wanted: set[TransactionState] = set()
        for name in request.state_filters or []:
            state = TransactionState.by_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted.add(state)
        states = frozenset(wanted) if request.state_filters else None
        pids = frozenset(request.producer_id_filters) if request.producer_id_filters else None
        duration = request.duration_filter if v >= 1 else -1
        count = self.state_partitions() or 0
        error = E.NONE
        listed: list[TransactionMetadata] = []
        for p in range(count):
            served = self.runtime.state(p)
            if served is CoordinatorState.LOADING:
                error = E.COORDINATOR_LOAD_IN_PROGRESS
                continue
            if served is not CoordinatorState.ACTIVE:
                continue
            if states is not None and not wanted:
                continue  # only unknown state names: nothing matches
            try:
                found = await self.runtime.read(p, "list-transactions",
                                                lambda s: s.list_transactions(states, pids, duration))
            except NotActiveError:
                continue
            listed.extend(m for m in found if m.state is not TransactionState.DEAD
                          and not self._txn_denied(ctx, m.transactional_id, AclOperation.DESCRIBE))
        Listed = ListTransactionsResponse.TransactionState
        return ListTransactionsResponse(
            version=v, throttle_time_ms=0, error_code=int(error), unknown_state_filters=unknown,
            transaction_states=[] if error else [
                Listed(transactional_id=m.transactional_id, producer_id=m.producer_id,
                       transaction_state=m.state.kafka_name) for m in listed])

    def handlers(self) -> dict[ApiKey, Handler]:
        return {
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            ApiKey.END_TXN: self.end_txn,
            ApiKey.DESCRIBE_TRANSACTIONS: self.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.list_transactions,
        }

