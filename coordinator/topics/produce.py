"""Produce (api key 0, v3+): validate one batch per partition, check producer state, append.

Order of checks per partition, after Kafka's ``ReplicaManager.appendRecords`` and
``LogValidator``: the topic and partition exist and may be written by clients; the bytes are one
whole magic-2 batch (Produce v3+ carries exactly one); its size is within ``max.message.bytes``;
its CRC holds; it is not a control batch (only the transaction coordinator writes markers, through
WriteTxnMarkers); a batch with a producer id has a sequence; its records decode and their offset
deltas run 0..n-1; on a compacted topic every record has a key; the producer's sequence, epoch and
transaction state fit (``storage/producer_state.py``).
A refused partition gets its error and nothing is appended; the others proceed.

Transactions (KIP-98): a request carrying a transactional batch must name its ``transactional_id``,
else the whole request is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's
``KafkaApis.handleProduceRequest`` does; a transactional batch needs a producer id. A
non-transactional batch of a producer with a transaction open on the partition gets
INVALID_TXN_STATE from the producer state. KIP-890 part 1 verification
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-890%3A+Transactions+Server-Side+Defense): the
first transactional batch of a producer on a partition — no transaction of it open there — is
appended only once the transaction coordinator (``verifier``, the :class:`Verifier` app.py sets)
confirms the partition was added to the transaction; later batches rely on the producer state.
Without a verifier (``transaction.partition.verification.enable=false``) nothing is asked.

The broker's own changes to an accepted batch: the base offset (not covered by the CRC), the
partition leader epoch (not covered either) and, for ``message.timestamp.type=LogAppendTime``
topics, the timestamp type bit and max timestamp (covered: the CRC is recomputed). A topic with a
``compression.type`` other than ``producer`` has its batches re-encoded with that codec.

Durability: the response waits until the appends are durable under the log's flush policy. With
acks=0 nothing is answered, but the data is still appended. In cluster mode a partition is
written only on its leader (NOT_LEADER_OR_FOLLOWER elsewhere), and acks=all also waits until the
ISR has the batch — the high watermark passes it — as Kafka's DelayedProduce does
(reference/cluster_replication.md §3.5): refused with NOT_ENOUGH_REPLICAS before the append while
the ISR is below ``min.insync.replicas``, NOT_ENOUGH_REPLICAS_AFTER_APPEND if it fell below while
waiting, REQUEST_TIMED_OUT after the request's timeout, NOT_LEADER_OR_FOLLOWER if leadership moved.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
import time
from collections.abc import Awaitable
from typing import Protocol

from kafka.protocol.producer import ProduceResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct
from protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptBatchError,
    compute_crc,
    decode_records,
    encode_batch,
    read_batch_header,
)
from protocol.responses import CloseConnection
from storage.errors import LogClosedError
from storage.producer_state import Duplicate

from ..context import Handler, RequestContext
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed
from .log_manager import LogManager
from .partition_log import PartitionLog
from .replication import NotLeader

__all__ = ["ProduceApis", "Verifier"]

log = logging.getLogger("groupcoord.produce")

_PARTITION_LEADER_EPOCH_OFFSET = 12
_MAGIC_OFFSET = 16
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35
_CRC = struct.Struct(">I")
_I32 = struct.Struct(">i")
#: The attributes' low byte (the transactional bit is there): a request can be scanned for
#: transactional batches without parsing their headers.
_ATTRIBUTES_LOW = _ATTRIBUTES_OFFSET + 1

#: Produce v11 is the last version before KIP-890's TRANSACTION_ABORTABLE reaches clients.
_ABORTABLE_SINCE_VERSION = 11
#: Verification errors a producer would not retry, turned into one it does. NOT_ENOUGH_REPLICAS
#: makes every client retry the produce without a metadata refresh (KAFKA-15459, KAFKA-16386:
#: https://github.com/apache/kafka/pull/14378, https://github.com/apache/kafka/pull/15559).
_RETRIABLE_VERIFICATION_ERRORS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


class Verifier(Protocol):
    """KIP-890 part 1: asks the transaction coordinator whether partitions are in a transaction."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Per partition: NONE if it is in the ongoing transaction, TRANSACTION_ABORTABLE if not;
        or an error of the whole transaction (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
        CONCURRENT_TRANSACTIONS, ...) for each — AddPartitionsToTxn v4 ``VerifyOnly`` semantics."""
        ...


def verification_error(error: int, version: int) -> int:
    """A verification outcome as a Produce partition error (Kafka's AddPartitionsToTxnManager
    and ReplicaManager: a fenced producer sees INVALID_PRODUCER_EPOCH; clients before Produce v11
    do not know TRANSACTION_ABORTABLE and get INVALID_TXN_STATE; retriable coordinator errors
    become NOT_ENOUGH_REPLICAS)."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < _ABORTABLE_SINCE_VERSION:
        return ErrorCode.INVALID_TXN_STATE
    if error in _RETRIABLE_VERIFICATION_ERRORS:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return error


class _Unverified:
    """A validated transactional batch waiting for the verifier before its append."""

    __slots__ = ("result", "plog", "batch", "header", "prior", "done")

    def __init__(self, result: KafkaStruct, plog: PartitionLog, batch: bytearray, header: BatchHeader,
                 prior: asyncio.Future[None] | None) -> None:
        self.result = result
        self.plog = plog
        self.batch = batch
        self.header = header
        #: The producer's previous batch on this partition, undecided when this one arrived
        #: (its ``done``): this one is decided after it (see ``ProduceApis._verifying``).
        self.prior = prior
        #: Resolved once this batch is appended or refused.
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


def _fail(result: KafkaStruct, error: int, message: str | None) -> None:
    result.error_code = error
    result.error_message = message
    result.base_offset = -1


class _Refused(Exception):
    def __init__(self, error: int, message: str | None = None, record_errors: list[tuple[int, str]] | None = None) -> None:
        self.error = error
        self.message = message
        #: (record index in the batch, message): Produce v8+ ``record_errors`` (KIP-467).
        self.record_errors = record_errors or []


class ProduceApis:
    def __init__(self, logs: LogManager, *, authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.logs = logs
        #: WRITE on each topic, and on the transactional id of transactional batches (KafkaApis
        #: handleProduceRequest).
        self.authorizer = authorizer
        #: KIP-890 verification (set by app.py); None: transactional batches are not verified.
        self.verifier: Verifier | None = None
        #: (topic, partition, producer id) → the last of its batches not yet decided (appended
        #: or refused) since one needed verification; every later transactional batch of the
        #: producer there queues behind it, so they are decided in arrival order.
        #: A producer pipelines its requests (up to 5 in flight): the next batch of the
        #: transaction can arrive while the first is being verified. Checked at once, its
        #: sequence would look out of order (the first is not appended yet), an error
        #: librdkafka treats as fatal; so it waits for the earlier batch, then is appended in
        #: order (Kafka's AddPartitionsToTxnManager keeps one verification per transactional id
        #: and answers the earlier one NETWORK_EXCEPTION, which the client retries).
        self._verifying: dict[tuple[str, int, int], _Unverified] = {}
        #: The tasks deciding unverified batches (``produce``).
        self._deciding: set[asyncio.Future[None]] = set()

    def produce(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse | None | Awaitable[KafkaResponse]:
        version = ctx.api_version
        acks = request.acks
        pending: list[tuple[KafkaStruct, Awaitable[None] | None]] = []
        unverified: list[_Unverified] = []
        topics_out = []
        # Kafka refuses the whole request when a transactional batch comes without a
        # transactional id (KafkaApis.handleProduceRequest); one byte per partition tells.
        checks = self.authorizer.enabled
        txn_refused = (request.transactional_id is None or checks) and any(
            part.records is not None and len(part.records) > _ATTRIBUTES_LOW
            and part.records[_ATTRIBUTES_LOW] & TRANSACTIONAL_MASK
            for topic in request.topic_data for part in topic.partition_data)
        if txn_refused and request.transactional_id is not None:
            # With an authorizer, transactional batches need WRITE on the transactional id; the
            # whole request is refused otherwise.
            txn_refused = not allowed(self.authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                      request.transactional_id)
        for topic in request.topic_data:
            parts_out = []
            info = self.logs.topic_info(topic.name if version < 13 else None, getattr(topic, "topic_id", None))
            # Authorization before existence: a denied name never tells whether it exists (v13+
            # names topics by id, and an unknown id has no name to check).
            name = topic.name if version < 13 else (info.name if info is not None else None)
            topic_denied = checks and name is not None and not allowed(
                self.authorizer, ctx, AclOperation.WRITE, ResourceType.TOPIC, name)
            for part in topic.partition_data:
                result = ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                    index=part.index, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                    record_errors=[], error_message=None)
                parts_out.append(result)
                try:
                    if topic_denied and not txn_refused:
                        raise _Refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if acks not in (-1, 0, 1):
                        raise _Refused(ErrorCode.INVALID_REQUIRED_ACKS)
                    if txn_refused:
                        raise _Refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                       "a transactional batch needs the request's transactional id"
                                       if request.transactional_id is None else None)
                    if info is None:
                        raise _Refused(ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    if info.internal:
                        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {info.name}")
                    plog = self.logs.get(info.name, part.index)
                    if plog is None:
                        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    if not plog.is_leader:
                        raise _Refused(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                       f"This server is not the leader for partition {info.name}-{part.index}")
                    isr_size = 1 if plog.replication is None else len(plog.replication.isr)
                    if acks == -1 and isr_size < plog.config.min_insync_replicas:
                        raise _Refused(ErrorCode.NOT_ENOUGH_REPLICAS,
                                       f"The size of the current ISR {isr_size} is insufficient to satisfy the "
                                       f"min.isr requirement of {plog.config.min_insync_replicas}")
                    appended = self._append(plog, part.records, result)
                    if isinstance(appended, _Unverified):
                        unverified.append(appended)
                        continue
                    wait, end = appended
                    if acks == -1 and plog.replication is not None:
                        wait = self._replicated(plog, wait, end, result, request.timeout_ms)
                    pending.append((result, wait))
                except _Refused as refused:
                    result.error_code = refused.error
                    result.error_message = refused.message
                    result.record_errors = [
                        ProduceResponse.TopicProduceResponse.PartitionProduceResponse.BatchIndexAndErrorMessage(
                            batch_index=i, batch_index_error_message=m) for i, m in refused.record_errors]
                except Exception:
                    log.exception("produce failed", extra={"peer": ctx.peer})
                    result.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
            topics_out.append(ProduceResponse.TopicProduceResponse(
                name=topic.name, topic_id=getattr(topic, "topic_id", None), partition_responses=parts_out))
        response = ProduceResponse(version=version, responses=topics_out, throttle_time_ms=0)
        if unverified:
            # The decisions run in a task of their own, not in the request's: a connection
            # closing (its requests cancelled, some before their first step) must not leave a
            # batch undecided, nor release it before the batches ahead of it are decided —
            # the producer's next batches here wait for it. Kafka, too, handles every request it
            # has read, whatever becomes of the connection.
            verifier = self.verifier
            assert verifier is not None and request.transactional_id is not None  # as ``_append`` found
            decided = asyncio.ensure_future(self._decide(ctx, request, verifier, request.transactional_id,
                                                         unverified, pending))
            self._deciding.add(decided)  # held: the loop keeps only weak references to tasks
            decided.add_done_callback(self._deciding.discard)
            return self._verify_then_append(request, response, pending, decided)
        waits = [w for _, w in pending if w is not None]
        if acks == 0:
            for w in waits:
                asyncio.ensure_future(self._log_failure(w))
            return _acks0_outcome(response)
        if not waits:
            return response
        return self._respond_when_durable(response, pending)

    async def _decide(self, ctx: RequestContext, request: KafkaRequest, verifier: Verifier, transactional_id: str,
                      unverified: list[_Unverified], pending: list[tuple[KafkaStruct, Awaitable[None] | None]]) -> None:
        """KIP-890: ask the verifier about the partitions whose producer has no transaction open
        there and append those it confirms, each after the producer's earlier batches there."""
        by_producer: dict[tuple[int, int], list[_Unverified]] = {}
        for item in unverified:
            by_producer.setdefault((item.header.producer_id, item.header.producer_epoch), []).append(item)
        await self._verify(ctx, request, verifier, transactional_id, by_producer, pending)

    async def _verify_then_append(self, request: KafkaRequest, response: KafkaResponse,
                                  pending: list[tuple[KafkaStruct, Awaitable[None] | None]],
                                  decided: asyncio.Future[None]) -> KafkaResponse | None:
        """Wait for the decisions on the request's unverified batches, then answer as ``produce``
        does."""
        try:
            await asyncio.shield(decided)
        except BaseException:
            # Cancelled (the connection went): the decisions go on; close the ISR waits they
            # leave, which nobody will await.
            decided.add_done_callback(lambda task: _close_waits(task, pending))
            raise
        if request.acks == 0:
            for _, w in pending:
                if w is not None:
                    asyncio.ensure_future(self._log_failure(w))
            return _acks0_outcome(response)
        return await self._respond_when_durable(response, pending)

    async def _verify(self, ctx: RequestContext, request: KafkaRequest, verifier: Verifier, transactional_id: str,
                      by_producer: dict[tuple[int, int], list[_Unverified]],
                      pending: list[tuple[KafkaStruct, Awaitable[None] | None]]) -> None:
        # Kafka also guards the append against an ABORT marker landing between the coordinator's
        # answer and the append (KIP-890's VerificationGuard); here the append follows the answer
        # in the next step of the event loop, leaving that window to a marker request read in the
        # same step.
        try:
            for (producer_id, producer_epoch), items in by_producer.items():
                await self._verify_producer(ctx, request, verifier, transactional_id, producer_id, producer_epoch,
                                            items, pending)
        finally:
            for items in by_producer.values():
                for item in items:
                    self._release(item)

    def _release(self, item: _Unverified) -> None:
        if not item.done.done():
            item.done.set_result(None)
        key = (item.plog.topic, item.plog.partition, item.header.producer_id)
        if self._verifying.get(key) is item:
            del self._verifying[key]

    async def _verify_producer(self, ctx: RequestContext, request: KafkaRequest, verifier: Verifier,
                               transactional_id: str, producer_id: int, producer_epoch: int,
                               items: list[_Unverified],
                               pending: list[tuple[KafkaStruct, Awaitable[None] | None]]) -> None:
        if any(item.prior is not None for item in items):
            # After the producer's earlier batches here.
            priors = [item.prior for item in items if item.prior is not None]
            # Not bounded: every batch is decided by a task that runs to its end (``produce``)
            # and the verifier bounds its own calls (cluster/txn_verifier.py's timeout), while
            # giving up on an earlier batch would decide this one before it.
            await asyncio.wait(priors)
        # A batch whose earlier one opened the transaction needs no verification of its own.
        ask = [item for item in items if not item.plog.has_open_transaction(producer_id)]
        targets = [(item.plog.topic, item.plog.partition) for item in ask]
        outcome: dict[tuple[str, int], int] = {}
        if ask:
            try:
                outcome = await verifier.verify(transactional_id, producer_id, producer_epoch, targets)
            except Exception:
                log.exception("transaction verification failed", extra={"peer": ctx.peer})
        for item in items:
            target = (item.plog.topic, item.plog.partition)
            error = (verification_error(outcome.get(target, ErrorCode.NETWORK_EXCEPTION), ctx.api_version)
                     if item in ask else ErrorCode.NONE)
            if error != ErrorCode.NONE:
                _fail(item.result, error, "Partition was not added to the transaction"
                      if error in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE) else None)
                continue
            try:
                if not item.plog.is_leader:  # leadership moved while the coordinator answered
                    raise _Refused(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                # Re-checked: other appends may have changed the producer's state meanwhile.
                wait, end = self._append_checked(item.plog, item.batch, item.header, item.result)
            except _Refused as refused:
                _fail(item.result, refused.error, refused.message)
                continue
            except Exception:
                log.exception("produce failed", extra={"peer": ctx.peer})
                _fail(item.result, ErrorCode.UNKNOWN_SERVER_ERROR, None)
                continue
            if request.acks == -1 and item.plog.replication is not None:
                wait = self._replicated(item.plog, wait, end, item.result, request.timeout_ms)
            pending.append((item.result, wait))

    async def _respond_when_durable(self, response: KafkaResponse,
                                    pending: list[tuple[KafkaStruct, Awaitable[None] | None]]) -> KafkaResponse:
        try:
            for result, wait in pending:
                if wait is None:
                    continue
                try:
                    await wait
                except LogClosedError as exc:
                    # The partition's log was closed under the queued append: its topic deleted
                    # (or moved away, or the server stopping). Ordinary, not a storage failure:
                    # the client is told this node does not lead it, refreshes its metadata and
                    # retries or learns the topic is gone (issue 22: a DeleteTopics racing a
                    # produce in the live fuzzer logged an ERROR here).
                    log.info("append to a closed log", extra={"reason": str(exc)})
                    result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    result.base_offset = -1
                    result.error_message = str(exc)
                except Exception as exc:  # the log could not make it durable (disk full, I/O error)
                    log.error("append failed", extra={"reason": str(exc)})
                    result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                    result.base_offset = -1
                    result.error_message = str(exc)
            return response
        finally:
            # Cancelled (the connection went): the later partitions' ISR waits were never started;
            # close them, or Python warns of coroutines never awaited. Their appends stand.
            for _result, wait in pending:
                if inspect.iscoroutine(wait):
                    wait.close()

    @staticmethod
    async def _replicated(plog: PartitionLog, durable: Awaitable[None], end: int, result: KafkaStruct,
                          timeout_ms: int) -> None:
        """acks=all in cluster mode: after the local append, wait for the ISR (module docstring)."""
        await durable
        replication = plog.replication
        assert replication is not None
        try:
            await asyncio.wait_for(replication.wait_for(end), max(timeout_ms, 1) / 1000.0)
        except NotLeader:
            _fail(result, ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership moved before the ISR had the batch")
            return
        except TimeoutError:
            _fail(result, ErrorCode.REQUEST_TIMED_OUT, "the ISR did not have the batch within the request timeout")
            return
        if len(replication.isr) < plog.config.min_insync_replicas:
            _fail(result, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                  f"the ISR shrank to {len(replication.isr)}, below min.insync.replicas "
                  f"{plog.config.min_insync_replicas}, while the batch was replicated")

    @staticmethod
    async def _log_failure(wait: Awaitable[None]) -> None:
        try:
            await wait
        except LogClosedError as exc:  # its topic deleted meanwhile (see _respond_when_durable)
            log.info("append to a closed log (acks=0)", extra={"reason": str(exc)})
        except Exception as exc:
            log.error("append failed (acks=0)", extra={"reason": str(exc)})

    def _append(self, plog: PartitionLog, records: bytes | None,
                result: KafkaStruct) -> tuple[Awaitable[None], int] | _Unverified:
        """Validate and queue one batch: (local durability, the batch's end offset); or, for a
        transactional batch that needs KIP-890 verification first, the batch to verify."""
        batch = self._validate(plog, records)
        header = read_batch_header(batch, 0)
        if header.is_transactional and self.verifier is not None:
            key = (plog.topic, plog.partition, header.producer_id)
            # An earlier batch of the producer here still undecided: this one goes behind it even
            # when the transaction is open by now. The earlier one may be appended already while
            # the batches queued behind it have not had their turn yet (each resumes in a later
            # step of the event loop); checked at once, this one would overtake them and get
            # OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to a transactional librdkafka producer.
            earlier = self._verifying.get(key) if self._verifying else None
            if earlier is not None:
                # Checked once the earlier batch is decided (``_append_checked``).
                item = _Unverified(result, plog, batch, header, earlier.done)
                self._verifying[key] = item
                return item
            if not plog.has_open_transaction(header.producer_id):
                outcome = plog.producers.check(header)
                if isinstance(outcome, Duplicate):
                    return self._duplicate(plog, outcome, result)
                if outcome != ErrorCode.NONE:
                    raise _Refused(outcome)
                item = _Unverified(result, plog, batch, header, None)
                self._verifying[key] = item
                return item
        return self._append_checked(plog, batch, header, result)

    @staticmethod
    def _duplicate(plog: PartitionLog, outcome: Duplicate, result: KafkaStruct) -> tuple[Awaitable[None], int]:
        # A retry of a batch already appended: success with the original offsets, nothing
        # written again (Kafka skips the duplicate silently the same way).
        result.base_offset = outcome.first_offset
        result.log_start_offset = plog.log_start_offset
        return plog.wait_durable(outcome.last_offset + 1), outcome.last_offset + 1

    def _append_checked(self, plog: PartitionLog, batch: bytearray, header: BatchHeader,
                        result: KafkaStruct) -> tuple[Awaitable[None], int]:
        """Check the producer state and queue a validated batch."""
        outcome = plog.producers.check(header)
        if isinstance(outcome, Duplicate):
            return self._duplicate(plog, outcome, result)
        if outcome != ErrorCode.NONE:
            raise _Refused(outcome)
        # Every accepted batch carries the current leader epoch, which consumers use to validate
        # their position after a leader change (KIP-101/KIP-320).
        _I32.pack_into(batch, _PARTITION_LEADER_EPOCH_OFFSET, plog.leader_epoch)
        if plog.config.log_append_time:
            now = int(time.time() * 1000)
            batch[_ATTRIBUTES_OFFSET + 1] |= TIMESTAMP_TYPE_MASK
            struct.pack_into(">q", batch, _MAX_TIMESTAMP_OFFSET, now)
            _CRC.pack_into(batch, 17, compute_crc(batch, 0, len(batch)))
            result.log_append_time_ms = now
            # The log indexes and retains by the header it is handed: give it the rewritten one.
            header = read_batch_header(batch, 0)
        base_offset, durable = plog.append_batch(batch, header)
        result.base_offset = base_offset
        result.log_start_offset = plog.log_start_offset
        return durable, base_offset + header.last_offset_delta + 1

    def _validate(self, plog: PartitionLog, records: bytes | None) -> bytearray:
        if not records or len(records) < LOG_OVERHEAD + 5:
            raise _Refused(ErrorCode.CORRUPT_MESSAGE, "no record batch")
        if records[_MAGIC_OFFSET] != MAGIC_V2:
            raise _Refused(ErrorCode.INVALID_RECORD,
                           f"Produce requests from version 3 on only carry magic 2 batches, got magic {records[_MAGIC_OFFSET]}")
        if len(records) < BATCH_HEADER_SIZE:
            raise _Refused(ErrorCode.CORRUPT_MESSAGE, "batch shorter than its header")
        try:
            header = read_batch_header(records, 0)
        except CorruptBatchError as exc:
            raise _Refused(ErrorCode.CORRUPT_MESSAGE, exc.reason) from None
        if header.size > len(records):
            raise _Refused(ErrorCode.CORRUPT_MESSAGE, "batch truncated")
        if header.size < len(records):
            raise _Refused(ErrorCode.INVALID_RECORD, "Produce requests carry exactly one record batch")
        if header.size > plog.config.max_message_bytes:
            raise _Refused(ErrorCode.MESSAGE_TOO_LARGE,
                           f"batch of {header.size} bytes exceeds max.message.bytes {plog.config.max_message_bytes}")
        if compute_crc(records, 0, header.size) != header.crc:
            raise _Refused(ErrorCode.CORRUPT_MESSAGE, "CRC mismatch")
        # Kafka's LogValidator.validateBatch for client appends.
        if header.is_control:
            raise _Refused(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise _Refused(ErrorCode.INVALID_RECORD, f"Invalid sequence number {header.base_sequence} in record batch "
                                                     f"with producerId {header.producer_id}")
        if header.is_transactional and header.producer_id < 0:
            raise _Refused(ErrorCode.INVALID_RECORD, "a transactional batch needs a producer id")
        try:
            decoded = decode_records(records, 0, header, check_crc=False)
        except CorruptBatchError as exc:
            raise _Refused(ErrorCode.CORRUPT_MESSAGE, exc.reason) from None
        if not decoded or len(decoded) != header.records_count or header.last_offset_delta != len(decoded) - 1 or any(
                r.offset_delta != i for i, r in enumerate(decoded)):
            raise _Refused(ErrorCode.INVALID_RECORD, "record offset deltas must run 0..count-1")
        config = plog.config
        bad: list[tuple[int, str]] = []
        if plog.log.options.cleanup_policy == "compact":
            # Compaction keeps the last record per key, so a record without one cannot be kept or
            # replaced: Kafka's LogValidator refuses it (INVALID_RECORD, naming each record). The
            # records were decoded above, a compressed batch included, so only compacted topics
            # pay for this loop.
            refusal = f"Compacted topic cannot accept message without key in topic partition {plog.topic}-{plog.partition}"
            bad = [(i, refusal) for i, record in enumerate(decoded) if record.key is None]
        timestamp_refused = False
        if not config.log_append_time and (config.timestamp_before_max_ms < 2**63 - 1
                                           or config.timestamp_after_max_ms < 2**63 - 1):
            # KIP-937: CreateTime records too far from the append time are refused, naming them.
            now = int(time.time() * 1000)
            for i, record in enumerate(decoded):
                ts = record.timestamp(header)
                if ts < now - config.timestamp_before_max_ms or ts > now + config.timestamp_after_max_ms:
                    timestamp_refused = True
                    bad.append((i, (f"Timestamp {ts} of message with offset {i} is out of range. The timestamp "
                                    f"should be within [{now - config.timestamp_before_max_ms}, "
                                    f"{now + config.timestamp_after_max_ms}]")))
        if bad:
            # Kafka checks each record's key, then its timestamp, and reports every record error;
            # a timestamp error makes the partition's error INVALID_TIMESTAMP, else it is
            # INVALID_RECORD with the first three errors in the message
            # (LogValidator.processRecordErrors, https://github.com/apache/kafka/blob/trunk/storage/
            # src/main/java/org/apache/kafka/storage/internals/log/LogValidator.java).
            bad.sort(key=lambda e: e[0])
            if timestamp_refused:
                raise _Refused(ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
                               bad)
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in bad[:3])
            raise _Refused(ErrorCode.INVALID_RECORD,
                           f"One or more records have been rejected due to {len(bad)} record errors in total, and "
                           f"only showing the first three errors at most: [{shown}]", bad)
        target = plog.config.compression
        if target is not None and target != header.compression:
            # Kafka re-compresses when the topic names a codec other than the producer's.
            return bytearray(encode_batch(
                decoded, base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp,
                compression=target, producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence, transactional=header.is_transactional))
        return bytearray(records)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.PRODUCE: self.produce}


def _close_waits(decided: asyncio.Future[None], pending: list[tuple[KafkaStruct, Awaitable[None] | None]]) -> None:
    if not decided.cancelled() and decided.exception() is not None:
        log.error("produce failed after its request was cancelled", exc_info=decided.exception())
    for _result, wait in pending:
        if inspect.iscoroutine(wait):
            wait.close()


def _acks0_outcome(response: KafkaResponse) -> CloseConnection | None:
    """acks=0 is never answered; a partition refused closes the connection instead (Kafka's
    KafkaApis.handleProduceRequest), the one way such a producer learns to refresh its metadata."""
    for topic in response.responses:
        for part in topic.partition_responses:
            if part.error_code:
                return CloseConnection(f"acks=0 produce to {topic.name or topic.topic_id}-{part.index} failed with "
                                       f"{ErrorCode(part.error_code).name}")
    return None
