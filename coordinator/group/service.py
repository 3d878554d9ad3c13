"""The group APIs on the wire: route each group to its ``__consumer_offsets`` partition, refuse work
for partitions that are loading or not ours, and run the shard's handlers through the runtime.

Routing is Kafka's: ``abs(java_hash(group_id)) % partitions of __consumer_offsets``. Answers for
a partition that is not served, as Kafka's classic coordinator gives them (``handleHeartbeat`` and
``handleSyncGroup`` of
https://github.com/apache/kafka/blob/3.9/core/src/main/scala/kafka/coordinator/group/GroupCoordinator.scala):

* loading: COORDINATOR_LOAD_IN_PROGRESS — except Heartbeat, answered NONE so the member keeps its
  session, and SyncGroup, answered REBALANCE_IN_PROGRESS so the member rejoins;
* not owned (or failed): NOT_COORDINATOR, so the client looks the coordinator up again.

Requests naming several groups (OffsetFetch v8+, DescribeGroups, DeleteGroups,
ConsumerGroupDescribe) are split by partition, run per partition and merged back in request order;
ListGroups asks every partition and fails whole with the error of any partition that cannot answer
(the new coordinator's rule).

KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) route the same way. The
shard checks a heartbeat's fields (``consumer/validation.py``: INVALID_REQUEST with the reason, or
UNSUPPORTED_ASSIGNOR); a heartbeat no shard takes is checked here by that same function before the
refusal is answered, since Kafka's ``GroupCoordinatorService`` checks the request before it routes it
(https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorService.java):
a bad request gets its reason whichever partition its group id hashes to. A refusal is the
response's error code with no member: loading answers COORDINATOR_LOAD_IN_PROGRESS (no blind NONE
as for the classic Heartbeat: a KIP-848 member learns its assignment from the answer), a write the
ISR refused COORDINATOR_NOT_AVAILABLE.

Transactions (KIP-98, KIP-447): TxnOffsetCommit (28) is a transactional write of the group's
partition (optionally verified first with the transaction coordinator, KIP-890), and
``complete_transaction`` writes a transaction's COMMIT or ABORT marker there for WriteTxnMarkers
(seam C4, docs/transactions.md).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol, TypeVar

from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.consumer import OffsetDeleteResponse
from kafka.protocol.producer import TxnOffsetCommitResponse

from protocol.apis import ApiKey
from protocol.consumer_group_messages import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse
from protocol.errors import ErrorCode
from protocol.hashing import partition_for
from protocol.hot_responses import (
    CommitPartition,
    CommitTopic,
    FetchGroup,
    HeartbeatAnswer,
    OffsetCommitAnswer,
    OffsetFetchAnswer,
)
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from .. import gc_policy
from ..context import Handler, RequestContext
from ..runtime.contract import CoordinatorResult, non_atomic
from ..runtime.errors import MarkerRefused, ProducerFenced, RecordTooLarge
from ..runtime.runtime import CoordinatorRuntime, CoordinatorState, NotActiveError, unanswered
from .consumer.validation import HeartbeatError, validate_heartbeat
from .responses import heartbeat_response, join_error, leave_response, sync_response
from .shard import GroupCoordinatorShard

__all__ = ["GroupService"]

E = ErrorCode
T = TypeVar("T")
TxnTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
TxnPartition = TxnTopic.TxnOffsetCommitResponsePartition

class NamedTopic(Protocol):
    """What the topic listener callbacks read of a topic (the topics wing's ``TopicInfo``, which
    this wing does not import)."""

    @property
    def name(self) -> str: ...


class TransactionVerifier(Protocol):
    """KIP-890 part 1 verification (the transaction coordinator's AddPartitionsToTxn v4 VerifyOnly;
    seam C3, docs/transactions.md, the same shape as the produce path's ``Verifier``): NONE for a
    partition in the producer's ongoing transaction, else why not."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]: ...


#: Group ids whose partition is remembered (a few MB at most).
_PARTITION_CACHE_SIZE = 100_000


def _commit_error(request: KafkaRequest, v: int, error: int) -> OffsetCommitAnswer:
    return OffsetCommitAnswer([CommitTopic(t.name, [CommitPartition(x.partition_index, int(error))
                                                    for x in t.partitions])
                               for t in request.topics])


def _discard(parked: asyncio.Future[T]) -> None:
    """A parked answer nobody awaits any more (the write before it failed, or the request's task
    was cancelled): its outcome is consumed, or asyncio logs an exception never retrieved (an
    unload fails it too) at level ERROR."""
    if not parked.cancel() and not parked.cancelled():
        parked.exception()


def _fetch_offsets(request: KafkaRequest, api_version: int, shard: GroupCoordinatorShard) -> OffsetFetchAnswer:
    return shard.fetch_offsets(request, api_version)


def _describe_consumer_groups(group_ids: list[str], api_version: int, include_authorized_operations: bool,
                              shard: GroupCoordinatorShard) -> list[KafkaStruct]:
    return shard.consumer_group_describe(group_ids, api_version, include_authorized_operations)


def _client_host(peer: str) -> str:
    # Kafka records a member's host as Java's InetAddress.toString(): "/1.2.3.4".
    host = peer.rsplit(":", 1)[0].strip("[]")
    return "/" + host


#: ConsumerGroupDescribe's AuthorizedOperations when not asked for (Integer.MIN_VALUE).
_NO_OPERATIONS = -(2**31)


def _heartbeat_error(v: int, error: int, message: str | None = None) -> KafkaResponse:
    return ConsumerGroupHeartbeatResponse(version=v, throttle_time_ms=0, error_code=int(error), error_message=message,
                                          member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)


def _described_error(group_id: str, error: int) -> KafkaStruct:
    return ConsumerGroupDescribeResponse.DescribedGroup(
        error_code=int(error), error_message=None, group_id=group_id, group_state="", group_epoch=0,
        assignment_epoch=0, assignor_name="", members=[], authorized_operations=_NO_OPERATIONS)


def _refusal(exc: NotActiveError) -> ErrorCode:
    """What a KIP-848 request answers when the runtime refuses its operation: Kafka's
    ``handleOperationException`` turns NOT_ENOUGH_REPLICAS and REQUEST_TIMED_OUT into
    COORDINATOR_NOT_AVAILABLE, records over max.message.bytes (MESSAGE_TOO_LARGE) into
    UNKNOWN_SERVER_ERROR, a partition that is not (or no longer) ours into NOT_COORDINATOR."""
    code = getattr(exc, "error_code", None)
    if code is None:
        return E.NOT_COORDINATOR
    return E.UNKNOWN_SERVER_ERROR if code == E.UNKNOWN_SERVER_ERROR else E.COORDINATOR_NOT_AVAILABLE


def _unserved(exc: NotActiveError) -> ErrorCode:
    """What a classic group API answers when the runtime refuses its operation: NOT_COORDINATOR
    (the client looks the coordinator up again), but UNKNOWN_SERVER_ERROR for records over
    max.message.bytes, which no other coordinator would take either (Kafka's
    handleOperationException answers MESSAGE_TOO_LARGE so)."""
    return E.UNKNOWN_SERVER_ERROR if isinstance(exc, RecordTooLarge) else E.NOT_COORDINATOR


class GroupService:
    def __init__(self, runtime: CoordinatorRuntime[GroupCoordinatorShard],
                 offsets_partitions: Callable[[], int | None],
                 consumer_assignors: tuple[str, ...] = ("uniform", "range")) -> None:
        self.runtime = runtime
        #: group.consumer.assignors: the ServerAssignor names a heartbeat may ask for.
        self.consumer_assignors = consumer_assignors
        #: The partition count of the offsets topic (``runtime.topic``), None while it does not
        #: exist. Asked, not imported: the topic registry belongs to the topics wing, which the
        #: group wing does not import (tests/test_layering.py).
        self.offsets_partitions = offsets_partitions
        self._loader: asyncio.Task[None] | None = None
        #: Cluster mode: the load of each partition this node became the leader of.
        self._loads: dict[int, asyncio.Future[None]] = {}
        self._partitions: dict[tuple[str, int], int] = {}
        #: Set by app.py when ``transaction.partition.verification.enable``: a TxnOffsetCommit of a
        #: producer with no pending offsets here is first checked with the transaction coordinator
        #: (Kafka's ``scheduleTransactionalWriteOperation``), so that a late commit of a
        #: transaction already ended is refused instead of staying pending with no marker to come.
        self.verifier: TransactionVerifier | None = None

    # --- becoming the coordinator -------------------------------------------------------------

    def load_all(self) -> None:
        """Load every ``__consumer_offsets`` partition in the background, one at a time (as
        Kafka's single-threaded loader does); each serves as soon as it is loaded."""
        count = self.offsets_partitions()
        if count is None:
            return

        self.runtime.queue_loading(range(count))

        async def run() -> None:
            for p in range(count):
                await self.runtime.load(p)
            # The loaded state lives as long as the process: keep it out of the cyclic GC's
            # full collections (see ``gc_policy``).
            gc_policy.freeze_long_lived()

        self._loader = asyncio.ensure_future(run())

    # --- cluster mode: coordinating where this node leads (issue 14) ------------------------------

    def become_coordinator(self, partition: int, leader_epoch: int) -> None:
        """This node now leads ``__consumer_offsets-<partition>`` at ``leader_epoch`` (Kafka's
        ``onElection``; the leader epoch is the coordinator epoch): load it, answering
        COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        task = self._loads.get(partition)
        if self.runtime.state(partition) is CoordinatorState.ACTIVE or (task is not None and not task.done()):
            # Still (or already becoming) the coordinator: a newer epoch of our own leadership
            # (the controller bumps it when it drops a dead replica from the ISR) changes nothing
            # the groups hold. Kafka skips the load the same way (the partition is already
            # owned); reloading would answer NOT_COORDINATOR to every member for nothing.
            return
        self._loads.pop(partition, None)
        self.runtime.queue_loading([partition])
        # A standby copy (the runtime's rule 6) is taken over: only the tail is replayed.
        self._loads[partition] = asyncio.ensure_future(self.runtime.load(partition))

    def resign(self, partition: int, *, standby: bool = True) -> None:
        """Another node leads the partition now (Kafka's ``onResignation``): stop at once, so a
        group never has two active coordinators; what waited fails with NOT_COORDINATOR. A
        follower then keeps a hot standby copy of the partition's state."""
        task = self._loads.pop(partition, None)
        if task is not None and not task.done():
            task.cancel()
        # A standby already following stays (``standby`` keeps it); one whose replica is going
        # away (reassigned off this node: ``standby=False``) goes before its log is deleted.
        if not standby or self.runtime.state(partition) is not CoordinatorState.STANDBY:
            self.runtime.unload(partition)
        if standby:
            self.runtime.standby(partition)

    def topic_created(self, info: NamedTopic) -> None:
        if info.name == self.runtime.topic:
            self.load_all()

    def topic_deleted(self, info: NamedTopic) -> None:
        # The committed offsets of a deleted topic go at once, in every group of every partition.
        for p in self.runtime.active_partitions():
            # Non-atomic as in Kafka (GroupCoordinatorShard.onPartitionsDeleted): tombstones that
            # may span batches rather than be refused for their size.
            unanswered(self.runtime.write(p, "on-partitions-deleted",
                                          lambda s: non_atomic(s.on_topics_deleted({info.name}))))

    def partitions_added(self, info: NamedTopic, old_count: int) -> None:
        pass

    def shutdown(self) -> None:
        if self._loader is not None:
            self._loader.cancel()
        for task in self._loads.values():
            task.cancel()
        self.runtime.unload_all()

    # --- routing ------------------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int | None:
        count = self.offsets_partitions()
        if count is None:
            return None
        # Every group request hashes its group id in Python (Java's String.hashCode): remember
        # the answers, keyed by the partition count too, and forget them all when too many.
        key = (group_id or "", count)
        partition = self._partitions.get(key)
        if partition is None:
            if len(self._partitions) >= _PARTITION_CACHE_SIZE:
                self._partitions.clear()
            partition = self._partitions[key] = partition_for(key[0], key[1])
        return partition

    def _error_for(self, partition: int | None) -> int:
        """NONE if ``partition`` serves requests, else the error to answer with (always one for
        None). The hot handlers (heartbeat, commit, offset fetch) rely on that to pass the partition
        on without a check mypy could follow: their ignore of ``arg-type`` says "p: no error"."""
        if partition is None:
            return E.NOT_COORDINATOR
        return self.runtime.serving_error(partition)

    async def _write(self, partition: int, name: str,
                     op: Callable[[GroupCoordinatorShard], CoordinatorResult[T]]) -> T | None:
        return await self.runtime.write(partition, name, op)

    @staticmethod
    def _or_not_coordinator(answer: asyncio.Future[T], fallback: Callable[[], T],
                            by_error: Callable[[int], T] | None = None) -> T | asyncio.Future[T]:
        """``answer``, or ``fallback()`` if the partition stops serving first. A future rather
        than a coroutine: the server answers futures without a task (the hot paths); and the
        answer itself when it is already there (a heartbeat with no write pending)."""
        if answer.done() and not answer.cancelled() and answer.exception() is None:
            return answer.result()
        out: asyncio.Future[T] = answer.get_loop().create_future()

        def done(f: asyncio.Future[T]) -> None:
            if out.done():
                return
            if f.cancelled():
                out.cancel()
                return
            exc = f.exception()
            if isinstance(exc, NotActiveError):
                code = getattr(exc, "error_code", None)
                out.set_result(by_error(code) if by_error is not None and code is not None else fallback())
            elif exc is not None:
                out.set_exception(exc)
            else:
                out.set_result(f.result())

        answer.add_done_callback(done)
        return out

    # --- membership ---------------------------------------------------------------------------

    async def join_group(self, ctx: RequestContext, request: KafkaRequest) -> object:
        v = ctx.api_version
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if error:
            return join_error(v, error, request.member_id or "")
        assert p is not None
        handle, parked = self.runtime.response_future(p)
        try:
            await self._write(p, "classic-group-join",
                              lambda s: s.join_group(request, v, ctx.client_id or "", _client_host(ctx.peer), handle))
            return await parked
        except NotActiveError as exc:
            return join_error(v, _unserved(exc), request.member_id or "")
        finally:
            _discard(parked)

    async def sync_group(self, ctx: RequestContext, request: KafkaRequest) -> object:
        v = ctx.api_version
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            error = E.REBALANCE_IN_PROGRESS
        if error:
            return sync_response(v, error)
        assert p is not None
        handle, parked = self.runtime.response_future(p)
        try:
            await self._write(p, "classic-group-sync", lambda s: s.sync_group(request, v, handle))
            return await parked
        except NotActiveError as exc:
            return sync_response(v, _unserved(exc))
        finally:
            _discard(parked)

    def heartbeat(self, ctx: RequestContext, request: KafkaRequest
                  ) -> HeartbeatAnswer | None | asyncio.Future[HeartbeatAnswer | None]:
        v = ctx.api_version
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            return heartbeat_response(v, E.NONE)
        if error:
            return heartbeat_response(v, error)
        try:
            answer = self.runtime.write(p, "classic-group-heartbeat",  # type: ignore[arg-type]  # p: no error
                                        lambda s: s.heartbeat(request, v))
        except NotActiveError as exc:
            return heartbeat_response(v, _unserved(exc))
        return self._or_not_coordinator(answer, lambda: heartbeat_response(v, E.NOT_COORDINATOR))

    async def leave_group(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if error:
            return leave_response(v, error, [])
        assert p is not None
        try:
            return await self._write(p, "classic-group-leave", lambda s: s.leave_group(request, v))
        except NotActiveError as exc:
            return leave_response(v, _unserved(exc), [])

    # --- offsets ------------------------------------------------------------------------------

    def offset_commit(self, ctx: RequestContext, request: KafkaRequest
                      ) -> OffsetCommitAnswer | None | asyncio.Future[OffsetCommitAnswer | None]:
        v = ctx.api_version
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if not error:
            try:
                answer = self.runtime.write(p, "commit-offset",  # type: ignore[arg-type]  # p: no error
                                            lambda s: s.commit_offsets(request, v))
            except NotActiveError as exc:
                # Kafka's maybeConvertOffsetCommitError: NOT_ENOUGH_REPLICAS → COORDINATOR_NOT_AVAILABLE.
                error = getattr(exc, "error_code", E.NOT_COORDINATOR)
            else:
                return self._or_not_coordinator(answer, lambda: _commit_error(request, v, E.NOT_COORDINATOR),
                                                lambda code: _commit_error(request, v, code))
        return _commit_error(request, v, error)

    def offset_fetch(self, ctx: RequestContext, request: KafkaRequest
                     ) -> OffsetFetchAnswer | asyncio.Future[OffsetFetchAnswer] | Awaitable[OffsetFetchAnswer]:
        v = ctx.api_version
        if v < 8:
            p = self.partition_of(request.group_id)
            error = self._error_for(p)
            if not error:
                try:
                    answer = self.runtime.read(p, "fetch-offsets",  # type: ignore[arg-type]  # p: no error
                                               lambda s: s.fetch_offsets(request, v))
                except NotActiveError:
                    error = E.NOT_COORDINATOR
                else:
                    return self._or_not_coordinator(
                        answer, lambda: OffsetFetchAnswer(topics=[], error_code=int(E.NOT_COORDINATOR)))
            return OffsetFetchAnswer(topics=[], error_code=int(error))
        return self._offset_fetch_groups(ctx, request)

    async def _offset_fetch_groups(self, ctx: RequestContext, request: KafkaRequest) -> OffsetFetchAnswer:
        v = ctx.api_version
        # v8+: several groups, possibly on several partitions.
        by_partition: dict[int | None, list[KafkaStruct]] = {}
        for g in request.groups:
            by_partition.setdefault(self.partition_of(g.group_id), []).append(g)
        answers: dict[str, FetchGroup] = {}
        reads: list[tuple[list[KafkaStruct], asyncio.Future[OffsetFetchAnswer]]] = []
        for p, groups in by_partition.items():
            error = self._error_for(p)
            if p is not None and not error:
                sub = types.SimpleNamespace(groups=groups, require_stable=request.require_stable)
                try:
                    reads.append((groups, self.runtime.read(p, "fetch-offsets", partial(_fetch_offsets, sub, v))))
                    continue
                except NotActiveError:
                    error = E.NOT_COORDINATOR
            for g in groups:
                answers[g.group_id] = FetchGroup(g.group_id, [], int(error))
        try:
            for groups, read in reads:  # the partitions' reads run at once; collect them in turn
                try:
                    answer = await read
                    assert answer.groups is not None  # a v8+ read answers per group (OffsetManager.fetch_offsets)
                    for fetched in answer.groups:
                        answers[fetched.group_id] = fetched
                except NotActiveError:
                    for g in groups:
                        answers[g.group_id] = FetchGroup(g.group_id, [], int(E.NOT_COORDINATOR))
        finally:
            # Cancelled midway (the connection went): the reads not awaited yet are consumed
            # all the same, or an unload failing them logs "never retrieved" at ERROR.
            for _groups, read in reads:
                _discard(read)
        return OffsetFetchAnswer(groups=[answers[g.group_id] for g in request.groups])

    async def txn_offset_commit(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        """TxnOffsetCommit v0-4 (KIP-98, KIP-447): a transactional write of the group's partition,
        answered once durable; its offsets stay pending until the producer's marker."""
        v = ctx.api_version
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if p is not None and not error and self.verifier is not None \
                and request.producer_id not in self.runtime.shard(p).offset_manager.pending:
            error = await self._verify(request, p)
            if not error:
                error = self._error_for(p)  # the partition may have moved meanwhile
        if p is not None and not error:
            try:
                answer = await self._write(p, "txn-commit-offset", lambda s: s.txn_commit_offsets(request, v))
                assert answer is not None
                return answer
            except ProducerFenced:
                error = E.INVALID_PRODUCER_EPOCH
            except NotActiveError as exc:
                error = _refusal(exc)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS and v < 2:
            # Clients before v2 do not retry COORDINATOR_LOAD_IN_PROGRESS here (KafkaApis
            # handleTxnOffsetCommitRequest).
            error = E.COORDINATOR_NOT_AVAILABLE
        return TxnOffsetCommitResponse(version=v, throttle_time_ms=0, topics=[
            TxnTopic(name=t.name, partitions=[TxnPartition(partition_index=x.partition_index, error_code=int(error))
                                              for x in t.partitions]) for t in request.topics])

    async def _verify(self, request: KafkaRequest, partition: int) -> int:
        """The verification's answer for the group's partition, as TxnOffsetCommit < v5 sends it
        (Kafka's AddPartitionsToTxnManager: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH and
        TRANSACTION_ABORTABLE INVALID_TXN_STATE for clients that predate them)."""
        assert self.verifier is not None
        target = (self.runtime.topic, partition)
        codes = await self.verifier.verify(request.transactional_id, request.producer_id, request.producer_epoch,
                                           [target])
        code = codes.get(target, E.NONE)
        if code == E.PRODUCER_FENCED:
            return E.INVALID_PRODUCER_EPOCH
        if code == E.TRANSACTION_ABORTABLE:
            return E.INVALID_TXN_STATE
        return code

    async def complete_transaction(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                                   commit: bool, coordinator_epoch: int) -> int:
        """Write a transaction's COMMIT or ABORT marker on ``__consumer_offsets-<partition>``
        (seam C4, docs/transactions.md: WriteTxnMarkers for the group coordinator's partitions; Kafka's
        ``GroupCoordinatorService.completeTransaction``): the pending offsets of the producer
        are stored or dropped, and the answer comes once the marker is durable. A partition not
        served here answers NOT_LEADER_OR_FOLLOWER, which the transaction coordinator retries
        (KafkaApis ``handleWriteTxnMarkersRequest`` maps the coordinator's errors so)."""
        if topic != self.runtime.topic:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        try:
            await self.runtime.complete_transaction(partition, producer_id, producer_epoch, commit, coordinator_epoch)
        except MarkerRefused as exc:
            return exc.error_code
        except NotActiveError:
            return E.NOT_LEADER_OR_FOLLOWER
        return E.NONE

    async def offset_delete(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if p is not None and not error:
            try:
                return await self._write(p, "delete-offsets", lambda s: s.delete_offsets(request, v))
            except NotActiveError as exc:
                error = _unserved(exc)
        return OffsetDeleteResponse(version=v, error_code=int(error), throttle_time_ms=0, topics=[])

    # --- admin --------------------------------------------------------------------------------

    async def describe_groups(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        answers = await self._per_partition(
            request.groups, lambda gid: gid,
            lambda p, subset: self.runtime.read(p, "describe-groups", lambda s: s.describe_groups(
                types.SimpleNamespace(groups=subset, include_authorized_operations=v >= 3 and request.include_authorized_operations), v)),
            lambda resp: {g.group_id: g for g in resp.groups},
            lambda gid, error: DescribeGroupsResponse.DescribedGroup(
                error_code=int(error), error_message=None, group_id=gid, group_state="", protocol_type="",
                protocol_data="", members=[], authorized_operations=None))
        return DescribeGroupsResponse(version=v, throttle_time_ms=0, groups=[answers[g] for g in request.groups])

    async def delete_groups(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        answers = await self._per_partition(
            request.groups_names, lambda gid: gid,
            lambda p, subset: self.runtime.write(p, "delete-groups", lambda s: s.delete_groups(
                types.SimpleNamespace(groups_names=subset), v)),
            lambda resp: {r.group_id: r for r in resp.results},
            lambda gid, error: DeleteGroupsResponse.DeletableGroupResult(group_id=gid, error_code=int(error)))
        return DeleteGroupsResponse(version=v, throttle_time_ms=0, results=[answers[g] for g in request.groups_names])

    async def _per_partition(self, items: list[str], group_of: Callable[[str], str],
                             run: Callable[[int, list[str]], Awaitable[KafkaResponse]],
                             unpack: Callable[[KafkaResponse], dict[str, KafkaStruct]],
                             failed: Callable[[str, int], KafkaStruct]) -> dict[str, KafkaStruct]:
        by_partition: dict[int | None, list[str]] = {}
        for item in items:
            by_partition.setdefault(self.partition_of(group_of(item)), []).append(item)
        answers: dict[str, KafkaStruct] = {}
        for p, subset in by_partition.items():
            error = self._error_for(p)
            if p is not None and not error:
                try:
                    answers.update(unpack(await run(p, subset)))
                    continue
                except NotActiveError as exc:
                    error = _unserved(exc)
            for item in subset:
                answers[item] = failed(item, error)
        return answers

    # --- KIP-848 consumer groups ---------------------------------------------------------------

    def consumer_group_heartbeat(self, ctx: RequestContext, request: KafkaRequest
                                 ) -> KafkaResponse | asyncio.Future[KafkaResponse]:
        v = ctx.api_version
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if error:
            return self._heartbeat_refused(request, v, error)
        client_id, client_host = ctx.client_id or "", _client_host(ctx.peer)
        try:
            answer = self.runtime.write(p, "consumer-group-heartbeat",  # type: ignore[arg-type]  # p: no error
                                        lambda s: s.consumer_group_heartbeat(request, v, client_id, client_host))
        except NotActiveError as exc:
            return self._heartbeat_refused(request, v, _refusal(exc))
        return self._or_not_coordinator(answer, lambda: self._heartbeat_refused(request, v, E.NOT_COORDINATOR),
                                        lambda code: self._heartbeat_refused(request, v, E.COORDINATOR_NOT_AVAILABLE))

    def _heartbeat_refused(self, request: KafkaRequest, v: int, error: int) -> KafkaResponse:
        """The answer to a heartbeat no shard takes: the shard's checks first (Kafka checks before
        it routes), else ``error``."""
        try:
            validate_heartbeat(request, v, self.consumer_assignors)
        except HeartbeatError as problem:
            return _heartbeat_error(v, problem.code, problem.message)
        return _heartbeat_error(v, error)

    async def consumer_group_describe(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        include_operations = bool(request.include_authorized_operations)
        group_ids: list[str] = list(request.group_ids)
        answers: dict[str, KafkaStruct] = {}
        by_partition: dict[int | None, list[str]] = {}
        for gid in group_ids:
            if gid:
                by_partition.setdefault(self.partition_of(gid), []).append(gid)
            else:  # Kafka's service answers an empty group id itself
                answers[gid] = _described_error(gid, E.INVALID_GROUP_ID)
        reads: list[tuple[list[str], asyncio.Future[list[KafkaStruct]]]] = []
        try:
            for p, subset in by_partition.items():
                error = self._error_for(p)
                if p is not None and not error:
                    try:
                        reads.append((subset, self.runtime.read(
                            p, "consumer-group-describe",
                            partial(_describe_consumer_groups, subset, v, include_operations))))
                        continue
                    except NotActiveError as exc:
                        error = _refusal(exc)
                for gid in subset:
                    answers[gid] = _described_error(gid, error)
            for subset, read in reads:  # the partitions' reads run at once; collect them in turn
                try:
                    for described in await read:
                        answers[described.group_id] = described
                except NotActiveError as exc:
                    for gid in subset:
                        answers[gid] = _described_error(gid, _refusal(exc))
        finally:
            for _subset, read in reads:
                _discard(read)
        return ConsumerGroupDescribeResponse(version=v, throttle_time_ms=0, groups=[answers[g] for g in group_ids])

    async def list_groups(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        v = ctx.api_version
        listed: list[KafkaStruct] = []
        error = E.NONE
        for p in range(self.offsets_partitions() or 0):
            state = self.runtime.state(p)
            if state is CoordinatorState.ACTIVE:
                try:
                    listed += (await self.runtime.read(p, "list-groups", lambda s: s.list_groups(request, v))).groups
                except NotActiveError:
                    continue
            elif state is CoordinatorState.LOADING:
                error = E.COORDINATOR_LOAD_IN_PROGRESS
        if error:
            return ListGroupsResponse(version=v, throttle_time_ms=0, error_code=int(error), groups=[])
        return ListGroupsResponse(version=v, throttle_time_ms=0, error_code=0, groups=listed)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.OFFSET_DELETE: self.offset_delete,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DELETE_GROUPS: self.delete_groups,
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self.consumer_group_heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self.consumer_group_describe,
        }
