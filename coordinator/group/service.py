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
import copy
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
    FetchPartition,
    FetchTopic,
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
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import (
    NO_AUTHORIZER,
    allowed,
    allowed_names,
    cluster_allowed,
    operations_of,
    operations_set,
)
from .consumer.validation import HeartbeatError, validate_heartbeat
from .responses import heartbeat_response, join_error, leave_response, sync_response
from .shard import GroupCoordinatorShard

__all__ = ["GroupService"]

E = ErrorCode
T = TypeVar("T")
TxnTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
TxnPartition = TxnTopic.TxnOffsetCommitResponsePartition
_Deleted = OffsetDeleteResponse.OffsetDeleteResponseTopic

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


def _with_topics(request: KafkaRequest, topics: list[KafkaStruct] | None) -> KafkaRequest:
    """``request`` naming only ``topics`` (the ones the principal may act on)."""
    narrowed = copy.copy(request)
    narrowed.topics = topics
    return narrowed


def _denied_topic_names(authorizer: Authorizer, ctx: RequestContext, operation: AclOperation,
                        names: list[str]) -> set[str]:
    return set(names) - allowed_names(authorizer, ctx, operation, ResourceType.TOPIC, names)


def _denied_topics(authorizer: Authorizer, ctx: RequestContext, operation: AclOperation,
                   topics: list[KafkaStruct]) -> set[str]:
    names = {t.name for t in topics}
    return names - allowed_names(authorizer, ctx, operation, ResourceType.TOPIC, names)


def _readable(authorizer: Authorizer, ctx: RequestContext, topics: list[KafkaStruct] | None
              ) -> list[KafkaStruct] | None:
    """The topics of an OffsetFetch the principal may DESCRIBE (None, all topics, stays None)."""
    if topics is None:
        return None
    names = allowed_names(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in topics])
    return [t for t in topics if t.name in names]


def _fetch_topics_checked(authorizer: Authorizer, ctx: RequestContext, requested: list[KafkaStruct] | None,
                          fetched: list[FetchTopic]) -> list[FetchTopic]:
    """An OffsetFetch group's topics with the denied ones put back as Kafka answers them
    (``OffsetFetchResponse.UNAUTHORIZED_PARTITION``: offset -1, TOPIC_AUTHORIZATION_FAILED), or,
    for the all-topics form, dropped."""
    if requested is None:
        names = allowed_names(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in fetched])
        return [t for t in fetched if t.name in names]
    by_name = {t.name: t for t in fetched}
    out = []
    for t in requested:
        got = by_name.get(t.name)
        if got is not None:
            out.append(got)
        else:
            out.append(FetchTopic(t.name, [FetchPartition(p, -1, -1, "", int(E.TOPIC_AUTHORIZATION_FAILED))
                                           for p in t.partition_indexes]))
    return out


def _txn_commit_error(request: KafkaRequest, v: int, error: int) -> KafkaResponse:
    return TxnOffsetCommitResponse(version=v, throttle_time_ms=0, topics=[
        TxnTopic(name=t.name, partitions=[TxnPartition(partition_index=x.partition_index, error_code=int(error))
                                          for x in t.partitions]) for t in request.topics])


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
                 consumer_assignors: tuple[str, ...] = ("uniform", "range"), *,
                 authorizer: Authorizer = NO_AUTHORIZER, node_id: int = 0) -> None:
        self.runtime = runtime
        #: This node's id (``node.id``), for the answers of the injected faults.
        self.node_id = node_id
        #: Every API checks what Kafka's KafkaApis checks, before it routes (coordinator/security/request_checks.py).
        self.authorizer = authorizer
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

    def _group_denied(self, ctx: RequestContext, group_id: str, operation: AclOperation = AclOperation.READ) -> bool:
        return self.authorizer.enabled and not allowed(self.authorizer, ctx, operation, ResourceType.GROUP, group_id)

    async def join_group(self, ctx: RequestContext, request: KafkaRequest) -> object:
        v = ctx.api_version
        if self._group_denied(ctx, request.group_id):
            return join_error(v, E.GROUP_AUTHORIZATION_FAILED, request.member_id or "")
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
        if self._group_denied(ctx, request.group_id):
            return sync_response(v, E.GROUP_AUTHORIZATION_FAILED)
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
        if self._group_denied(ctx, request.group_id):
            return heartbeat_response(v, E.GROUP_AUTHORIZATION_FAILED)
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
        if self._group_denied(ctx, request.group_id):
            return leave_response(v, E.GROUP_AUTHORIZATION_FAILED, [])
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
                      ) -> OffsetCommitAnswer | None | asyncio.Future[OffsetCommitAnswer | None] \
            | Awaitable[OffsetCommitAnswer]:
        v = ctx.api_version
        if self.authorizer.enabled:
            if self._group_denied(ctx, request.group_id):
                return _commit_error(request, v, E.GROUP_AUTHORIZATION_FAILED)
            denied = _denied_topics(self.authorizer, ctx, AclOperation.READ, request.topics)
            if denied:
                return self._offset_commit_some(ctx, request, denied)
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

    async def _offset_commit_some(self, ctx: RequestContext, request: KafkaRequest,
                                  denied: set[str]) -> OffsetCommitAnswer:
        """An OffsetCommit naming topics the principal may not READ: those answer
        TOPIC_AUTHORIZATION_FAILED on every partition and are not written; the rest are committed."""
        v = ctx.api_version
        kept = [t for t in request.topics if t.name not in denied]
        committed: dict[str, CommitTopic] = {}
        if kept:
            answer = self.offset_commit(ctx, _with_topics(request, kept))
            if not isinstance(answer, OffsetCommitAnswer):
                answer = await answer  # type: ignore[misc]  # a future of the write's answer
            assert answer is not None
            committed = {t.name: t for t in answer.topics}
        refused = _commit_error(_with_topics(request, [t for t in request.topics if t.name in denied]), v,
                                E.TOPIC_AUTHORIZATION_FAILED)
        committed.update({t.name: t for t in refused.topics})
        return OffsetCommitAnswer([committed[t.name] for t in request.topics if t.name in committed])

    def offset_fetch(self, ctx: RequestContext, request: KafkaRequest
                     ) -> OffsetFetchAnswer | asyncio.Future[OffsetFetchAnswer] | Awaitable[OffsetFetchAnswer]:
        v = ctx.api_version
        if self.authorizer.enabled:
            return self._offset_fetch_authorized(ctx, request)
        if v < 8:
            return self.offset_fetch_unchecked(ctx, request)
        return self._offset_fetch_groups(ctx, request)

    async def _offset_fetch_authorized(self, ctx: RequestContext, request: KafkaRequest) -> OffsetFetchAnswer:
        """OffsetFetch under an authorizer (KafkaApis ``handleOffsetFetchRequest``): DESCRIBE on
        each group (GROUP_AUTHORIZATION_FAILED for the group), then DESCRIBE on each topic. A named
        topic denied answers offset -1 with TOPIC_AUTHORIZATION_FAILED on its partitions; the
        all-topics form (null topics) leaves the denied topics out."""
        v = ctx.api_version
        checks = self.authorizer
        if v < 8:
            if self._group_denied(ctx, request.group_id, AclOperation.DESCRIBE):
                refused = int(E.GROUP_AUTHORIZATION_FAILED)
                # v1 has no group-level error: each requested partition carries it (Kafka's
                # OffsetFetchRequest.getErrorResponse).
                return OffsetFetchAnswer(topics=[] if v >= 2 or request.topics is None else [
                    FetchTopic(t.name, [FetchPartition(p, -1, -1, "", refused) for p in t.partition_indexes])
                    for t in request.topics], error_code=refused)
            answer = self.offset_fetch_unchecked(ctx, _with_topics(request, _readable(checks, ctx, request.topics)))
            if not isinstance(answer, OffsetFetchAnswer):
                answer = await answer
            if answer.error_code:
                return answer
            return answer._replace(topics=_fetch_topics_checked(checks, ctx, request.topics, answer.topics or []))
        groups = list(request.groups)
        denied = {g.group_id for g in groups if self._group_denied(ctx, g.group_id, AclOperation.DESCRIBE)}
        kept = [copy.copy(g) for g in groups if g.group_id not in denied]
        for g in kept:
            g.topics = _readable(checks, ctx, g.topics)
        fetched: dict[str, FetchGroup] = {}
        if kept:
            sub = copy.copy(request)
            sub.groups = kept
            answer = await self._offset_fetch_groups(ctx, sub)
            fetched = {g.group_id: g for g in answer.groups or []}
        out = []
        for g in groups:
            if g.group_id in denied:
                out.append(FetchGroup(g.group_id, [], int(E.GROUP_AUTHORIZATION_FAILED)))
                continue
            got = fetched[g.group_id]
            out.append(got if got.error_code else
                       got._replace(topics=_fetch_topics_checked(checks, ctx, g.topics, got.topics)))
        return OffsetFetchAnswer(groups=out)

    def offset_fetch_unchecked(self, ctx: RequestContext, request: KafkaRequest
                               ) -> OffsetFetchAnswer | asyncio.Future[OffsetFetchAnswer]:
        """OffsetFetch v1-7 of one group, past the authorization."""
        v = ctx.api_version
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
        answered once durable; its offsets stay pending until the producer's marker. Under an
        authorizer: WRITE on the transactional id, READ on the group, READ on each topic (KafkaApis
        ``handleTxnOffsetCommitRequest``)."""
        v = ctx.api_version
        denied: set[str] = set()
        if self.authorizer.enabled:
            if not allowed(self.authorizer, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
                return _txn_commit_error(request, v, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            if self._group_denied(ctx, request.group_id):
                return _txn_commit_error(request, v, E.GROUP_AUTHORIZATION_FAILED)
            denied = _denied_topics(self.authorizer, ctx, AclOperation.READ, request.topics)
            if denied:
                kept = [t for t in request.topics if t.name not in denied]
                refused = _txn_commit_error(_with_topics(request, [t for t in request.topics if t.name in denied]),
                                            v, E.TOPIC_AUTHORIZATION_FAILED)
                if not kept:
                    return refused
                answer = await self._txn_offset_commit(ctx, _with_topics(request, kept))
                answer.topics = list(answer.topics) + list(refused.topics)
                return answer
        return await self._txn_offset_commit(ctx, request)

    async def _txn_offset_commit(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
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
        return _txn_commit_error(request, v, error)

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
        """OffsetDelete; under an authorizer DELETE on the group, then READ on each topic (a denied
        topic answers TOPIC_AUTHORIZATION_FAILED on its partitions and keeps its offsets)."""
        v = ctx.api_version
        refused: list[KafkaStruct] = []
        if self.authorizer.enabled:
            if self._group_denied(ctx, request.group_id, AclOperation.DELETE):
                return OffsetDeleteResponse(version=v, error_code=int(E.GROUP_AUTHORIZATION_FAILED),
                                            throttle_time_ms=0, topics=[])
            denied = _denied_topics(self.authorizer, ctx, AclOperation.READ, request.topics)
            if denied:
                refused = [_Deleted(name=t.name, partitions=[
                    _Deleted.OffsetDeleteResponsePartition(partition_index=x.partition_index,
                                                           error_code=int(E.TOPIC_AUTHORIZATION_FAILED))
                    for x in t.partitions]) for t in request.topics if t.name in denied]
                request = _with_topics(request, [t for t in request.topics if t.name not in denied])
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if p is not None and not error:
            try:
                answer = await self._write(p, "delete-offsets", lambda s: s.delete_offsets(request, v))
            except NotActiveError as exc:
                error = _unserved(exc)
            else:
                assert answer is not None
                if refused and not answer.error_code:
                    answer.topics = list(answer.topics) + refused
                return answer
        return OffsetDeleteResponse(version=v, error_code=int(error), throttle_time_ms=0, topics=[])

    # --- admin --------------------------------------------------------------------------------

    async def describe_groups(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        """DescribeGroups; under an authorizer DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED in
        its entry), and the KIP-430 field from the authorizer."""
        v = ctx.api_version
        denied = self._groups_denied(ctx, request.groups, AclOperation.DESCRIBE)
        answers = await self._per_partition(
            [g for g in request.groups if g not in denied], lambda gid: gid,
            lambda p, subset: self.runtime.read(p, "describe-groups", lambda s: s.describe_groups(
                types.SimpleNamespace(groups=subset, include_authorized_operations=v >= 3 and request.include_authorized_operations), v)),
            lambda resp: {g.group_id: g for g in resp.groups},
            lambda gid, error: DescribeGroupsResponse.DescribedGroup(
                error_code=int(error), error_message=None, group_id=gid, group_state="", protocol_type="",
                protocol_data="", members=[], authorized_operations=None))
        for gid in denied:
            answers[gid] = DescribeGroupsResponse.DescribedGroup(
                error_code=int(E.GROUP_AUTHORIZATION_FAILED), error_message=None, group_id=gid, group_state="",
                protocol_type="", protocol_data="", members=[], authorized_operations=None)
        if self.authorizer.enabled:
            for described in answers.values():
                if described.authorized_operations is not None and not described.error_code:
                    described.authorized_operations = operations_set(
                        operations_of(self.authorizer, ctx, ResourceType.GROUP, described.group_id))
        return DescribeGroupsResponse(version=v, throttle_time_ms=0, groups=[answers[g] for g in request.groups])

    def _groups_denied(self, ctx: RequestContext, group_ids: list[str], operation: AclOperation) -> set[str]:
        if not self.authorizer.enabled:
            return set()
        return set(group_ids) - allowed_names(self.authorizer, ctx, operation, ResourceType.GROUP, group_ids)

    async def delete_groups(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        """DeleteGroups; under an authorizer DELETE on each group (GROUP_AUTHORIZATION_FAILED)."""
        v = ctx.api_version
        denied = self._groups_denied(ctx, request.groups_names, AclOperation.DELETE)
        answers = await self._per_partition(
            [g for g in request.groups_names if g not in denied], lambda gid: gid,
            lambda p, subset: self.runtime.write(p, "delete-groups", lambda s: s.delete_groups(
                types.SimpleNamespace(groups_names=subset), v)),
            lambda resp: {r.group_id: r for r in resp.results},
            lambda gid, error: DeleteGroupsResponse.DeletableGroupResult(group_id=gid, error_code=int(error)))
        for gid in denied:
            answers[gid] = DeleteGroupsResponse.DeletableGroupResult(
                group_id=gid, error_code=int(E.GROUP_AUTHORIZATION_FAILED))
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
        describable: Callable[[str], bool] | None = None
        if self.authorizer.enabled:
            # KafkaApis handleConsumerGroupHeartbeatRequest: READ on the group, then (Kafka 4.0,
            # KAFKA-18813) DESCRIBE on every subscribed topic name; a regex resolves for this
            # member to the topics it may DESCRIBE (the rules get the check as a predicate).
            if self._group_denied(ctx, request.group_id):
                return _heartbeat_error(v, E.GROUP_AUTHORIZATION_FAILED)
            names = request.subscribed_topic_names
            if names and _denied_topic_names(self.authorizer, ctx, AclOperation.DESCRIBE, names):
                return _heartbeat_error(v, E.TOPIC_AUTHORIZATION_FAILED)
            describable = partial(allowed, self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC)
        p = self.partition_of(request.group_id)
        error = self._error_for(p)
        if error:
            return self._heartbeat_refused(request, v, error)
        client_id, client_host = ctx.client_id or "", _client_host(ctx.peer)
        try:
            answer = self.runtime.write(p, "consumer-group-heartbeat",  # type: ignore[arg-type]  # p: no error
                                        (lambda s: s.consumer_group_heartbeat(request, v, client_id, client_host))
                                        if describable is None else
                                        (lambda s: s.consumer_group_heartbeat(request, v, client_id, client_host,
                                                                              describable)))
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
        denied = self._groups_denied(ctx, group_ids, AclOperation.DESCRIBE)
        for gid in group_ids:
            if gid in denied:
                answers[gid] = _described_error(gid, E.GROUP_AUTHORIZATION_FAILED)
            elif gid:
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
        if self.authorizer.enabled:
            self._check_described_topics(ctx, answers, include_operations)
        return ConsumerGroupDescribeResponse(version=v, throttle_time_ms=0, groups=[answers[g] for g in group_ids])

    def _check_described_topics(self, ctx: RequestContext, answers: dict[str, KafkaStruct],
                                include_operations: bool) -> None:
        """Kafka 4.0 (KAFKA-18813): a described group naming a topic the principal may not DESCRIBE
        (subscribed or assigned) answers TOPIC_AUTHORIZATION_FAILED instead of its members; the
        others carry their KIP-430 field from the authorizer."""
        for gid, described in answers.items():
            if described.error_code:
                continue
            names: set[str] = set()
            for m in described.members:
                names.update(m.subscribed_topic_names)
                for assignment in (m.assignment, m.target_assignment):
                    names.update(tp.topic_name for tp in assignment.topic_partitions if tp.topic_name)
            if _denied_topic_names(self.authorizer, ctx, AclOperation.DESCRIBE, sorted(names)):
                answers[gid] = _described_error(gid, E.TOPIC_AUTHORIZATION_FAILED)
            elif include_operations:
                described.authorized_operations = operations_of(self.authorizer, ctx, ResourceType.GROUP, gid)

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
        if self.authorizer.enabled and not cluster_allowed(self.authorizer, ctx, AclOperation.DESCRIBE):
            # KafkaApis handleListGroupsRequest: DESCRIBE on the cluster lists every group, else
            # only the groups the principal may DESCRIBE, silently.
            visible = allowed_names(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                    [g.group_id for g in listed])
            listed = [g for g in listed if g.group_id in visible]
        return ListGroupsResponse(version=v, throttle_time_ms=0, error_code=0, groups=listed)

    # --- injected faults (issue 35; off unless test.faults.enable: coordinator/faults/) --------

    def _coordinated(self, group_id: str) -> int:
        """The partition of ``group_id`` if this node serves it, else LookupError."""
        p = self.partition_of(group_id)
        if p is None or self.runtime.state(p) is not CoordinatorState.ACTIVE:
            raise LookupError(f"group '{group_id}' does not exist")
        return p

    async def _fault(self, group_id: str, name: str,
                     op: Callable[[GroupCoordinatorShard], CoordinatorResult[dict[str, object]]]) -> dict[str, object]:
        p = self._coordinated(group_id)
        try:
            answer = await self._write(p, name, op)
        except NotActiveError:
            raise LookupError(f"group '{group_id}' does not exist") from None
        assert answer is not None
        return answer

    async def force_rebalance(self, group_id: str) -> dict[str, object]:
        """Fault "rebalance": a classic group prepares a rebalance (its members rejoin into a new
        generation), a consumer group's epoch is bumped (a new target assignment, the members
        reconcile to it); ``group/fault_actions.py``. LookupError for a group not served here."""
        return await self._fault(group_id, "fault-rebalance", lambda s: s.fault_rebalance(group_id))

    async def kick_member(self, group_id: str, member: str | None) -> dict[str, object]:
        """Fault "kick-member": the member (a member id or a group.instance.id; None: the first
        by member id) is removed as its session expiry would remove it. LookupError for an
        unknown group or member."""
        return await self._fault(group_id, "fault-kick-member", lambda s: s.fault_kick_member(group_id, member))

    async def move_coordinator(self, group_id: str, load_ms: int, not_coordinator_ms: int) -> dict[str, object]:
        """Fault "move-coordinator" on one node: the group's partition stops being served
        (NOT_COORDINATOR, parked JoinGroups and SyncGroups answered so) for
        ``not_coordinator_ms``, then counts as loading (COORDINATOR_LOAD_IN_PROGRESS) for
        ``load_ms``, then is loaded again from its log, as a coordinator moving away and back
        would be. Answers once the partition is active again. The reload runs as the
        partition's load task (``_loads``): a shutdown, or a real resignation, cancels it."""
        p = self._coordinated(group_id)
        try:
            known = await self.runtime.read(p, "fault-move-coordinator", lambda s: s.holds_group(group_id))
        except NotActiveError:
            known = False
        if not known:
            raise LookupError(f"group '{group_id}' does not exist")
        if self.runtime.state(p) is not CoordinatorState.ACTIVE:
            raise LookupError(f"group '{group_id}' does not exist")
        self.resign(p, standby=False)
        reload = asyncio.ensure_future(self._reload(p, load_ms, not_coordinator_ms))
        self._loads[p] = reload
        # Shielded: a caller that goes away (its connection closed) does not leave the partition
        # unloaded for good.
        await asyncio.shield(reload)
        if self.runtime.state(p) is not CoordinatorState.ACTIVE:
            raise RuntimeError(f"__consumer_offsets-{p} did not load again (its log failed to replay)")
        return {"group": group_id, "partition": p, "from": self.node_id, "to": self.node_id}

    async def _reload(self, partition: int, load_ms: int, not_coordinator_ms: int) -> None:
        if not_coordinator_ms > 0:
            await self.runtime.sleep_ms(not_coordinator_ms)
        self.runtime.queue_loading([partition])
        if load_ms > 0:
            await self.runtime.sleep_ms(load_ms)
        await self.runtime.load(partition)

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
