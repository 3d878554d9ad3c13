"""OffsetCommit v0 and OffsetFetch v0 served from ZooKeeper, as Kafka 0.8.2–2.x brokers in ZooKeeper mode did.

Version 0 of both APIs is the ZooKeeper-era storage: the offset lives in ``/consumers/<group>/offsets/<topic>/<partition>``
as a plain decimal (coordinator/cluster/zk_consumers.py). Kafka's ``KafkaApis.handleOffsetCommitRequest`` and
``handleOffsetFetchRequest`` (https://github.com/apache/kafka/blob/2.8/core/src/main/scala/kafka/server/KafkaApis.scala):

- any broker serves v0: no coordinator check, no generation or member check;
- commit: group READ, topic READ (0.9+), the topic must exist (UNKNOWN_TOPIC_OR_PARTITION), metadata longer than
  ``offset.metadata.max.bytes`` is OFFSET_METADATA_TOO_LARGE, otherwise set-or-create the znode; the metadata is
  not stored;
- fetch: group DESCRIBE, topic DESCRIBE; a missing znode or partition answers offset -1, metadata "",
  UNKNOWN_TOPIC_OR_PARTITION.

Kafka 4.0 removed these versions (KIP-896, https://cwiki.apache.org/confluence/display/KAFKA/KIP-896), and has no
ZooKeeper: a node of ours without ``zookeeper.connect`` advertises Kafka 4's ranges and never reaches this module
(protocol/apis.py ``ZOOKEEPER_MODE_VERSIONS``). Newer versions go to the group coordinator as before.

With ``offsets.zookeeper.mirror.groups`` (docs/configuration.md) the acknowledged OffsetCommits (v1+) of the groups
it names are also written to ZooKeeper, like the Scala consumer's ``dual.commit.enabled`` did from the client side:
after the commit is durable (the answer is only given then), off the request path, on one thread. The queue is
coalesced (``MirrorQueue``): only a partition's newest offset matters to ZooKeeper's readers, so commits
acknowledged while an earlier write is under way merge, per group, into one write of each partition's latest
offset (one ZooKeeper transaction per group). ZooKeeper cannot keep up with a fast committer one write per
commit (bench/RESULTS.md, "ZooKeeper-era offsets": ~450 writes/s of one partition), so a queue of every commit
grew without bound; merged, it holds at most one offset per partition, and each partition's znode still follows
the commits in their order, skipping the intermediate ones. A failure is a log line, never a failed commit. At a
clean stop the writes still queued are made before the node's ZooKeeper session ends (``close``, a bounded
wait): a commit acknowledged just before the stop reaches ZooKeeper too.

kazoo's calls block: each request's ZooKeeper work runs on an executor, off the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections.abc import Callable

from kafka.protocol.consumer import OffsetCommitResponse, OffsetFetchResponse
from kazoo.exceptions import KazooException

from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from protocol.hot_responses import OffsetCommitAnswer
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..config import parse_group_patterns
from ..context import Handler, RequestContext
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import allowed
from .zk_consumers import TransactionTooLarge, ZkConsumerError, ZkConsumers

__all__ = ["ZkOffsetApis", "MirrorQueue", "MIRROR_FLUSH_S"]

log = logging.getLogger("groupcoord.cluster.zk_offsets")

_CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_CommitPartition = _CommitTopic.OffsetCommitResponsePartition
_FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_FetchPartition = _FetchTopic.OffsetFetchResponsePartition

#: How long a stopping node waits for its queued mirror writes: a ZooKeeper that answers takes
#: milliseconds per write; one that does not must not hold the stop for long (what is left is logged).
MIRROR_FLUSH_S = 5.0


class MirrorQueue:
    """The mirror's writes waiting for ZooKeeper, coalesced: per group, each partition's newest offset.

    ``put`` (on the event loop, for an acknowledged commit) merges into the pending offsets under a lock and
    wakes the writer; the writer thread takes everything pending at once and writes each group's offsets
    in one transaction (``ZkConsumers.set_offsets``), one group after another, while the next commits
    collect. One writer, and a batch taken only after the previous one is written, so a partition's znode
    takes its commits' offsets in acknowledgement order (some skipped, none reordered)."""

    def __init__(self, consumers: ZkConsumers) -> None:
        self.consumers = consumers
        self._cond = threading.Condition()
        self._pending: dict[str, dict[tuple[str, int], int]] = {}
        self._in_flight = 0  # offsets taken by the writer and not yet written
        self._closed = False
        self._thread: threading.Thread | None = None
        #: ZooKeeper transactions made (one per group of a batch, more when one is split): the bench's count.
        self.writes = 0

    def put(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        with self._cond:
            if self._closed:
                return
            self._pending.setdefault(group, {}).update(offsets)  # the newest acknowledged commit wins
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="zk-offsets-mirror", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                batch, self._pending = self._pending, {}
                self._in_flight = sum(len(o) for o in batch.values())
            for group, offsets in batch.items():
                if self._closed:
                    break  # the stop gave up waiting (close counted these): the session is going
                self._write(group, offsets)
            with self._cond:
                self._in_flight = 0
                self._cond.notify_all()

    def _write(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        try:
            self.consumers.set_offsets(group, offsets)
            self.writes += 1
        except TransactionTooLarge as exc:
            # Merged commits of many partitions can exceed one ZooKeeper request where each commit did
            # not: halves, each still all or nothing.
            items = sorted(offsets.items())
            if len(items) < 2:
                log.warning("offset commit not mirrored to zookeeper", extra={"group": group, "error": repr(exc)})
                return
            half = len(items) // 2
            self._write(group, dict(items[:half]))
            self._write(group, dict(items[half:]))
        except Exception as exc:  # the writer thread must outlive any one failure: a log line
            log.warning("offset commit not mirrored to zookeeper", extra={"group": group, "error": repr(exc)})

    def close(self, timeout: float) -> int:
        """Wait at most ``timeout`` seconds for everything queued to be written, then stop the writer;
        the number of offsets left unwritten (queued, or in a write still under way)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    break
                self._cond.wait(left)
            unwritten = self._in_flight + sum(len(o) for o in self._pending.values())
            self._pending = {}
            self._closed = True
            self._cond.notify_all()
        return unwritten


class ZkOffsetApis:
    """Wraps the group coordinator's OffsetCommit / OffsetFetch handlers: version 0 here, the rest to them."""

    def __init__(self, consumers: ZkConsumers, partition_count: Callable[[str], int], *, metadata_max_bytes: int,
                 authorizer: Authorizer, mirror_groups: str = "") -> None:
        self.consumers = consumers
        #: The topic's partitions in the cluster's view (0: no such topic).
        self.partition_count = partition_count
        self.metadata_max_bytes = metadata_max_bytes
        self.authorizer = authorizer
        self._mirror_names, self._mirror_prefixes = parse_group_patterns(mirror_groups)
        #: The mirrored commits waiting for ZooKeeper, coalesced (written in order on one thread).
        self.mirror_queue = MirrorQueue(consumers)

    def mirrors(self, group: str) -> bool:
        """Is ``group`` named by ``offsets.zookeeper.mirror.groups``?"""
        return group in self._mirror_names or (bool(self._mirror_prefixes) and group.startswith(self._mirror_prefixes))

    def wrap(self, handlers: dict[ApiKey, Handler]) -> None:
        """Put the v0 dispatch in front of ``handlers``' OffsetCommit and OffsetFetch."""
        commit, fetch = handlers[ApiKey.OFFSET_COMMIT], handlers[ApiKey.OFFSET_FETCH]

        def offset_commit(ctx: RequestContext, request: KafkaRequest) -> object:
            if ctx.api_version == 0:
                return self.offset_commit_v0(ctx, request)
            answer = commit(ctx, request)
            if (self._mirror_names or self._mirror_prefixes) and self.mirrors(request.group_id):
                return self._mirrored(request, answer)
            return answer

        def offset_fetch(ctx: RequestContext, request: KafkaRequest) -> object:
            return self.offset_fetch_v0(ctx, request) if ctx.api_version == 0 else fetch(ctx, request)

        handlers[ApiKey.OFFSET_COMMIT] = offset_commit
        handlers[ApiKey.OFFSET_FETCH] = offset_fetch

    def _denied(self, ctx: RequestContext, operation: AclOperation, kind: ResourceType, name: str) -> bool:
        return self.authorizer.enabled and not allowed(self.authorizer, ctx, operation, kind, name)

    def _exists(self, topic: str, partition: int) -> bool:
        return 0 <= partition < self.partition_count(topic)

    # --- OffsetCommit v0 ---------------------------------------------------------------------------

    async def offset_commit_v0(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        group = request.group_id
        group_denied = self._denied(ctx, AclOperation.READ, ResourceType.GROUP, group)
        errors: dict[tuple[str, int], int] = {}
        writes: list[tuple[str, int, int]] = []
        for topic in request.topics:
            topic_denied = self._denied(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
            for part in topic.partitions:
                key = (topic.name, part.partition_index)
                if group_denied:
                    errors[key] = E.GROUP_AUTHORIZATION_FAILED
                elif topic_denied:
                    errors[key] = E.TOPIC_AUTHORIZATION_FAILED
                elif not self._exists(*key):
                    errors[key] = E.UNKNOWN_TOPIC_OR_PARTITION
                elif part.committed_metadata is not None and len(part.committed_metadata) > self.metadata_max_bytes:
                    errors[key] = E.OFFSET_METADATA_TOO_LARGE
                else:
                    writes.append((topic.name, part.partition_index, part.committed_offset))
        if writes:
            loop = asyncio.get_running_loop()
            written = await loop.run_in_executor(None, self._write, group, writes)
            errors.update(written)
        return OffsetCommitResponse(version=0, topics=[
            _CommitTopic(name=t.name, partitions=[
                _CommitPartition(partition_index=p.partition_index, error_code=int(errors[(t.name, p.partition_index)]))
                for p in t.partitions])
            for t in request.topics])

    def _write(self, group: str, writes: list[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
        """Each partition written on its own, as Kafka did (one failure does not stop the others)."""
        out: dict[tuple[str, int], int] = {}
        for topic, partition, offset in writes:
            try:
                self.consumers.set_offset(group, topic, partition, offset)
                out[(topic, partition)] = E.NONE
            except (KazooException, ZkConsumerError) as exc:
                log.warning("offset commit v0 to zookeeper failed", extra={
                    "group": group, "topic": topic, "partition": partition, "error": repr(exc)})
                out[(topic, partition)] = E.UNKNOWN_SERVER_ERROR
        return out

    # --- the mirror of Kafka commits -----------------------------------------------------------------

    async def _mirrored(self, request: KafkaRequest, answer: object) -> object:
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, OffsetCommitAnswer):
            acknowledged = {(t.name, p.partition_index) for t in answer.topics for p in t.partitions
                            if p.error_code == E.NONE}
            offsets = {(t.name, p.partition_index): p.committed_offset for t in request.topics for p in t.partitions
                       if (t.name, p.partition_index) in acknowledged}
            if offsets:
                self.mirror_queue.put(request.group_id, offsets)
        return answer

    def close(self, timeout: float = MIRROR_FLUSH_S) -> None:
        """Write the queued mirror writes (waiting at most ``timeout`` seconds), then stop the mirror's thread.
        Called when the node no longer takes requests and before its ZooKeeper session ends; what is still
        unwritten after the wait is dropped, and the log says how many offsets."""
        unwritten = self.mirror_queue.close(timeout)
        if unwritten:
            log.warning("offset commits not mirrored to zookeeper: the stop did not wait longer",
                        extra={"offsets": unwritten, "waited_s": timeout})

    # --- OffsetFetch v0 ----------------------------------------------------------------------------

    async def offset_fetch_v0(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        group = request.group_id
        topics = request.topics or []  # v0 always names its partitions
        group_denied = self._denied(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group)
        asks: list[tuple[str, int]] = []
        answers: dict[tuple[str, int], tuple[int, int]] = {}
        for topic in topics:
            topic_denied = self._denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
            for partition in topic.partition_indexes:
                key = (topic.name, partition)
                if group_denied:
                    answers[key] = (-1, E.GROUP_AUTHORIZATION_FAILED)
                elif topic_denied:
                    answers[key] = (-1, E.TOPIC_AUTHORIZATION_FAILED)
                elif not self._exists(*key):
                    answers[key] = (-1, E.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    asks.append(key)
        if asks:
            loop = asyncio.get_running_loop()
            answers.update(await loop.run_in_executor(None, self._read, group, asks))
        return OffsetFetchResponse(version=0, topics=[
            _FetchTopic(name=t.name, partitions=[
                _FetchPartition(partition_index=p, committed_offset=answers[(t.name, p)][0], metadata="",
                                error_code=int(answers[(t.name, p)][1]))
                for p in t.partition_indexes])
            for t in topics])

    def _read(self, group: str, asks: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, partition in asks:
            try:
                offset = self.consumers.get_offset(group, topic, partition)
            except (KazooException, ZkConsumerError) as exc:
                log.warning("offset fetch v0 from zookeeper failed", extra={
                    "group": group, "topic": topic, "partition": partition, "error": repr(exc)})
                out[(topic, partition)] = (-1, E.UNKNOWN_SERVER_ERROR)
                continue
            out[(topic, partition)] = (-1, E.UNKNOWN_TOPIC_OR_PARTITION) if offset is None else (offset, E.NONE)
        return out
