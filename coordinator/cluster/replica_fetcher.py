"""Followers fetch from leaders: one fetcher per leader broker, one connection, one Fetch request
for every partition this node follows there (Kafka's ``ReplicaFetcherThread``, as an asyncio task).

Per partition, on every new leader epoch (KAFKA-7164: even with the same leader), the follower
first asks the leader where their logs diverge — OffsetForLeaderEpoch with its own latest epoch
(KIP-101, KIP-279) — and truncates to that point, so it never keeps a record the leader does not
have. Then it fetches from its log end (Fetch v12 with ``replica_id`` = its broker id), appends
what comes keeping offsets and leader epochs, and sets its high watermark to min(leader's, own log
end) (Kafka's docs, https://kafka.apache.org/documentation/#replication; the fetch and truncation
steps are in
https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/server/AbstractFetcherThread.scala).

Errors: FENCED_LEADER_EPOCH (our epoch is old) parks the partition until its state znode moves
(the replica manager hands it a new epoch); NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH and
UNKNOWN_TOPIC_OR_PARTITION mean the leader has not applied the state we have yet, so the partition
is retried after ``replica.fetch.backoff.ms``, as is a lost connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from protocol.apis import ApiKey, request_class
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct
from storage.errors import InvalidBatchError
from storage.log import AppendResult

from ..security.node_client import NodeClientSecurity
from ..topics.partition_log import PartitionLog
from ..topics.replication_quota import ReplicationThrottle
from .node_client import CONNECTION_ERRORS, NodeConnection

__all__ = ["ReplicaFetcher", "FetchSettings"]

log = logging.getLogger("groupcoord.cluster.fetcher")

FETCH_VERSION = 12
EPOCH_VERSION = 3
MAX_TRUNCATION_ROUNDS = 10
#: Retry of a partition whose leader has not applied its leadership yet.
NOT_READY_RETRY_S = 0.05
#: How long a fetcher holding only throttled partitions waits for the rate to fall.
THROTTLE_PAUSE_S = 0.1


@dataclass(frozen=True, slots=True)
class FetchSettings:
    broker_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    backoff_s: float = 1.0
    socket_timeout_s: float = 30.0


@dataclass(slots=True)
class _Followed:
    plog: PartitionLog
    leader_epoch: int
    truncated: bool = False
    parked: bool = False
    #: Event-loop time before which the partition is not fetched (the leader was not ready).
    retry_at: float = 0.0


class ReplicaFetcher:
    def __init__(self, leader_id: int, endpoint: Callable[[], tuple[str, int] | None], settings: FetchSettings,
                 throttle: ReplicationThrottle | None = None, security: NodeClientSecurity | None = None) -> None:
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.settings = settings
        #: The follower's replication quota (KIP-73), shared by every fetcher of this node.
        self.throttle = throttle
        self.partitions: dict[tuple[str, int], _Followed] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection = NodeConnection(leader_id, endpoint, f"replica-fetcher-{settings.broker_id}",
                                          settings.socket_timeout_s, security)

    # --- membership (event loop) ------------------------------------------------------------------

    def follow(self, plog: PartitionLog, leader_epoch: int) -> None:
        self.partitions[(plog.topic, plog.partition)] = _Followed(plog, leader_epoch)
        self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def unfollow(self, topic: str, partition: int) -> None:
        self.partitions.pop((topic, partition), None)
        self._changed.set()

    async def stop(self) -> None:
        task = self._task
        if task is not None:
            # Cancel until it ends: on Python 3.11 ``asyncio.wait_for`` can swallow a cancellation
            # that lands while its inner wait completes (fixed in 3.12), and the loop then waits
            # for a change that never comes (found by tests/coordinator/cluster/test_group_fault_schedule.py:
            # a SIGTERMed node that never exited).
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=0.5)
            if not task.cancelled():
                task.exception()  # its ending is not news at shutdown
        self._close()

    def _close(self) -> None:
        self._connection.close()

    # --- the loop -----------------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            waiting = [f for f in self.partitions.values() if not f.parked]
            active = [f for f in waiting if f.retry_at <= now]
            if not active:
                self._changed.clear()
                if not self.partitions:
                    self._close()
                if waiting:
                    try:
                        await asyncio.wait_for(self._changed.wait(), min(f.retry_at for f in waiting) - now)
                    except TimeoutError:
                        pass
                else:
                    await self._changed.wait()
                continue
            try:
                await self._connect()
                for f in [f for f in active if not f.truncated]:
                    await self._truncate(f)
                ready = [f for f in self.partitions.values() if f.truncated and not f.parked and f.retry_at <= now]
                held = self._over_quota(ready)
                if held:
                    ready = [f for f in ready if f not in held]
                    if not ready:  # only throttled partitions, over the quota: let the rate fall
                        await self._pause(THROTTLE_PAUSE_S)
                        continue
                if ready:
                    await self._fetch_interruptibly(ready)
            except CONNECTION_ERRORS as exc:
                log.info("fetch from the leader failed; retrying",
                         extra={"leader": self.leader_id, "error": repr(exc)})
                self._close()
                await asyncio.sleep(self.settings.backoff_s)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher failed; retrying", extra={"leader": self.leader_id})
                self._close()
                await asyncio.sleep(self.settings.backoff_s)

    def _throttled(self, f: _Followed) -> bool:
        repl = f.plog.replication
        return (self.throttle is not None and repl is not None
                and self.throttle.follower_applies(f.plog.topic, f.plog.partition, repl.isr))

    def _over_quota(self, ready: list[_Followed]) -> list[_Followed]:
        """The throttled partitions of ``ready`` while the follower quota is exceeded (Kafka leaves
        them out of the fetch request until the rate falls)."""
        if self.throttle is None or not self.throttle.follower.exceeded():
            return []
        return [f for f in ready if self._throttled(f)]

    async def _pause(self, seconds: float) -> None:
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), seconds)
        except TimeoutError:
            pass

    async def _connect(self) -> None:
        await self._connection.connect()

    async def _call(self, api_key: int, version: int, request: KafkaRequest) -> KafkaResponse:
        return await self._connection.call(api_key, version, request)

    # --- truncation (KIP-101/279) ---------------------------------------------------------------------

    async def _truncate(self, f: _Followed) -> None:
        plog = f.plog
        cache = plog.log.leader_epochs
        for _ in range(MAX_TRUNCATION_ROUNDS):
            if self.partitions.get((plog.topic, plog.partition)) is not f:
                return
            asked = cache.latest_epoch
            if asked < 0:
                # No epochs known: an empty log, or one written before epochs; keep only what was
                # committed.
                await plog.truncate_to(plog.high_watermark)
                break
            cls = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
            request = cls(replica_id=self.settings.broker_id, topics=[cls.OffsetForLeaderTopic(
                topic=plog.topic, partitions=[cls.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=plog.partition, current_leader_epoch=f.leader_epoch, leader_epoch=asked)])])
            response = await self._call(ApiKey.OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, request)
            if self.partitions.get((plog.topic, plog.partition)) is not f:
                return  # unfollowed meanwhile (a newer epoch, or the replica reassigned away and closed)
            part = response.topics[0].partitions[0]
            if part.error_code != ErrorCode.NONE:
                self._on_error(f, part.error_code)
                return
            leader_epoch, leader_end = part.leader_epoch, part.end_offset
            if leader_end < 0:
                target = plog.high_watermark
            elif leader_epoch == asked:
                target = min(leader_end, plog.log_end_offset)
            else:
                mine, my_end = cache.end_offset_for(leader_epoch, plog.log_end_offset)
                if mine == leader_epoch:
                    target = min(leader_end, my_end)
                else:
                    # We have no entry for the leader's epoch: cut at the end of our own epoch
                    # before it, and ask again with that one.
                    await plog.truncate_to(min(my_end, plog.log_end_offset) if my_end >= 0 else plog.high_watermark)
                    continue
            if target < plog.log_end_offset:
                log.warning("follower log truncated to the leader's", extra={
                    "partition": f"{plog.topic}-{plog.partition}", "from": plog.log_end_offset, "to": target,
                    "leader": self.leader_id, "leader_epoch": f.leader_epoch})
            await plog.truncate_to(target)
            break
        f.truncated = True

    def _on_error(self, f: _Followed, error: int) -> None:
        name = ErrorCode(error).name if error in ErrorCode._value2member_map_ else str(error)
        where = {"partition": f"{f.plog.topic}-{f.plog.partition}", "leader": self.leader_id,
                 "leader_epoch": f.leader_epoch, "error": name}
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("leader has a newer epoch; waiting for the partition state", extra=where)
            f.parked = True
        else:
            # Expected for a moment after a leader change (the leader applies the new state a
            # few ms after us): retry soon, not after the full backoff, or the new leader waits
            # for this follower to acknowledge anything with min.insync.replicas > 1.
            log.debug("leader not ready for this follower; retrying", extra=where)
            f.retry_at = asyncio.get_running_loop().time() + min(self.settings.backoff_s, NOT_READY_RETRY_S)

    # --- fetching -------------------------------------------------------------------------------------

    async def _fetch_interruptibly(self, ready: list[_Followed]) -> None:
        """A fetch may wait at the leader up to ``replica.fetch.wait.max.ms``; a partition added
        meanwhile (a new leader epoch: a failover in progress) must not wait for it. The request
        in flight is abandoned — the connection closed, so no stale answer arrives later — and a
        new one sent at once."""
        self._changed.clear()
        fetch = asyncio.ensure_future(self._fetch(ready))
        # Whatever happens to this task, the fetch's outcome is consumed (no "exception never
        # retrieved" when it fails after being abandoned).
        fetch.add_done_callback(lambda f: f.cancelled() or f.exception())
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({fetch, changed}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            fetch.cancel()  # stop(): the fetcher ends; its connection is closed by stop()
            raise
        finally:
            changed.cancel()
        if not fetch.done():
            fetch.cancel()
            # Wait for the cancellation to land (a cancellation of this task propagates).
            await asyncio.wait({fetch})
            self._close()
            return
        fetch.result()

    async def _fetch(self, ready: list[_Followed]) -> None:
        cls = request_class(ApiKey.FETCH)
        by_topic: dict[str, list[KafkaStruct]] = {}
        sent: dict[tuple[str, int], tuple[_Followed, int]] = {}
        for f in ready:
            plog = f.plog
            offset = plog.log_end_offset
            sent[(plog.topic, plog.partition)] = (f, offset)
            by_topic.setdefault(plog.topic, []).append(cls.FetchTopic.FetchPartition(
                partition=plog.partition, current_leader_epoch=f.leader_epoch, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=plog.log_start_offset,
                partition_max_bytes=self.settings.partition_max_bytes))
        request = cls(replica_id=self.settings.broker_id, max_wait_ms=self.settings.max_wait_ms,
                      min_bytes=self.settings.min_bytes, max_bytes=self.settings.max_bytes, isolation_level=0,
                      session_id=0, session_epoch=-1,
                      topics=[cls.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                      forgotten_topics_data=[], rack_id="")
        # Wake early when the set of partitions changes, so a new epoch does not wait a long poll.
        response = await self._call(ApiKey.FETCH, FETCH_VERSION, request)
        # Every partition's append is queued before any is awaited: one wait for the I/O thread
        # per response, not one per partition in a row (the leader's high watermark, and so its
        # acks=all answers, wait for the next fetch, which waits for these appends).
        appended: list[tuple[_Followed, KafkaStruct, asyncio.Future[AppendResult] | None]] = []
        for topic in response.responses:
            for part in topic.partitions:
                entry = sent.get((topic.topic, part.partition_index))
                if entry is None:
                    continue
                f, offset = entry
                if self.partitions.get((topic.topic, part.partition_index)) is not f:
                    continue  # unfollowed or re-followed at a newer epoch meanwhile
                if part.error_code != ErrorCode.NONE:
                    if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        f.truncated = False  # find the divergence again
                    else:
                        self._on_error(f, part.error_code)
                    continue
                plog = f.plog
                records = part.records
                queued = None
                if records and plog.log_end_offset == offset:
                    if self.throttle is not None and self._throttled(f):
                        self.throttle.follower.record(len(records))
                    queued = plog.append_replicated(bytes(records))
                appended.append((f, part, queued))
        outcomes = await asyncio.gather(*(q for _f, _p, q in appended if q is not None), return_exceptions=True)
        failure: BaseException | None = None
        results = iter(outcomes)
        for f, part, queued in appended:
            plog = f.plog
            outcome = next(results) if queued is not None else None
            if isinstance(outcome, InvalidBatchError):
                # The log moved meanwhile (appends of our own leadership still landing after it
                # ended): find the divergence with the leader again.
                log.info("replicated batch no longer fits the log; truncating again",
                         extra={"partition": f"{plog.topic}-{plog.partition}", "reason": str(outcome)})
                f.truncated = False
                continue
            if isinstance(outcome, BaseException):
                failure = failure or outcome
                continue
            if plog.replication is not None:
                plog.replication.set_follower_high_watermark(part.high_watermark)
                # The leader's log start (raised by DeleteRecords or its retention): records
                # below it go here too, up to our high watermark (Kafka's ReplicaFetcherThread
                # .processPartitionData, maybeIncrementLogStartOffset); our next fetch reports it.
                start = min(part.log_start_offset, plog.replication.high_watermark)
                if start > plog.log_start_offset and not plog.log.closed:
                    await plog.log.advance_log_start_offset(start)
        if failure is not None:
            raise failure
