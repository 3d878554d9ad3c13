"""The handler wrapper: every Kafka request passes the lasting faults in force before its real
handler. With none in force the cost is one attribute check per request.

What each fault does to a request it matches:

- ``fail``: answered with the error in every error field (error_responses.py); the handler is not
  called. An acks=0 Produce gets no answer; its connection is closed, as Kafka does when an
  acks=0 produce fails (``handleProduceRequest`` in
  https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/KafkaApis.scala).
- ``delay``: the handler is called after ``ms``; the server keeps answers in request order per
  connection, so later requests on that connection wait too.
- ``pause-heartbeats``: Heartbeat and ConsumerGroupHeartbeat wait until the pause ends or is
  cleared, then reach the handler (which by then may say UNKNOWN_MEMBER_ID: the session ran on).
- ``leader-unavailable``: Metadata is answered by the handler, then the partition shows leader -1
  and LEADER_NOT_AVAILABLE; a Produce, Fetch, ListOffsets or OffsetForLeaderEpoch naming the
  partition is answered as a whole with NOT_LEADER_OR_FOLLOWER for each partition it names. Kafka
  would answer the other partitions normally; splicing one answer into the handler's (Fetch's is
  encoded bytes) is not worth it for a test fault: the client refreshes its metadata, sees the
  one partition leaderless, and retries the others at once.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse
from protocol.responses import CloseConnection

from ..context import Handler, RequestContext
from .error_responses import error_response
from .registry import Registry
from .spec import Delay, Fail, LeaderUnavailable, PauseHeartbeats

__all__ = ["wrap_handlers", "request_groups", "request_topic_partitions"]

#: A topic's name from its id (None: unknown here).
TopicName = Callable[[uuid.UUID], str | None]

_HEARTBEATS = frozenset({ApiKey.HEARTBEAT, ApiKey.CONSUMER_GROUP_HEARTBEAT})
#: The requests a leaderless partition refuses (Kafka's replica manager answers them only at a leader).
_LEADER_APIS = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH})


def request_groups(api_key: int, request: KafkaRequest) -> list[str]:
    """The group ids a request names."""
    if api_key == ApiKey.FIND_COORDINATOR:
        if getattr(request, "key_type", 0) != 0:  # 1 is a transactional id
            return []
        keys = getattr(request, "coordinator_keys", None)
        return list(keys) if keys else [request.key] if getattr(request, "key", None) else []
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return list(request.groups or ())
    if api_key == ApiKey.CONSUMER_GROUP_DESCRIBE:
        return list(request.group_ids or ())
    if api_key == ApiKey.DELETE_GROUPS:
        return list(request.groups_names or ())
    if api_key == ApiKey.OFFSET_FETCH and getattr(request, "groups", None):
        return [g.group_id for g in request.groups]
    group = getattr(request, "group_id", None)
    return [group] if isinstance(group, str) else []


def request_topic_partitions(api_key: int, request: KafkaRequest,
                             topic_name: TopicName | None = None) -> Iterable[tuple[str, int | None]]:
    """(topic, partition) pairs a request names; partition None where it names the topic only.
    ``topic_name`` resolves the topic ids of Fetch v13+, which carries no names."""
    if api_key == ApiKey.PRODUCE:
        for topic in request.topic_data or ():
            for part in topic.partition_data or ():
                yield topic.name, part.index
    elif api_key == ApiKey.FETCH:
        for topic in request.topics or ():
            name = topic.topic
            if not name and topic_name is not None and getattr(topic, "topic_id", None) is not None:
                name = topic_name(topic.topic_id) or ""
            for part in topic.partitions or ():
                yield name, part.partition
    elif api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
        for topic in request.topics or ():
            for part in topic.partitions or ():
                yield topic.topic, part.partition
    elif api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        for txn in getattr(request, "transactions", None) or ():
            for topic in txn.topics or ():
                yield topic.name, None
        for topic in getattr(request, "v3_and_below_topics", None) or ():
            yield topic.name, None
    else:
        for topic in getattr(request, "topics", None) or ():
            name = getattr(topic, "name", None)
            if isinstance(name, str):
                yield name, None


def _matches(fault: Fail | Delay | PauseHeartbeats, api_key: int, request: KafkaRequest,
             topic_name: TopicName | None) -> bool:
    if fault.group is not None and fault.group not in request_groups(api_key, request):
        return False
    topic = getattr(fault, "topic", None)
    if topic is not None and all(name != topic for name, _ in request_topic_partitions(api_key, request, topic_name)):
        return False
    return True


def _names_partition(fault: LeaderUnavailable, api_key: int, request: KafkaRequest,
                     topic_name: TopicName | None) -> bool:
    return any(name == fault.topic and part == fault.partition
               for name, part in request_topic_partitions(api_key, request, topic_name))


def _answer_error(ctx: RequestContext, request: KafkaRequest, error: int) -> object:
    if ctx.api_key == ApiKey.PRODUCE and request.acks == 0:
        return CloseConnection(f"acks=0 produce failed with {ErrorCode(error).name} (test fault)")
    return error_response(ApiKey(ctx.api_key), ctx.api_version, request, error)


async def _after(wait: Awaitable[object], handler: Handler, ctx: RequestContext, request: KafkaRequest) -> object:
    """The handler's answer once ``wait`` is done (a delay's sleep, a pause's end)."""
    await wait
    result = handler(ctx, request)
    return await result if inspect.isawaitable(result) else result


def _leaderless(response: KafkaResponse, faults: list[LeaderUnavailable]) -> KafkaResponse:
    for topic in response.topics or ():
        for part in topic.partitions or ():
            if any(f.topic == topic.name and f.partition == part.partition_index for f in faults):
                part.error_code = ErrorCode.LEADER_NOT_AVAILABLE
                part.leader_id = -1
    return response


async def _metadata_after(result: Awaitable[KafkaResponse], faults: list[LeaderUnavailable]) -> KafkaResponse:
    return _leaderless(await result, faults)


def _faulted(registry: Registry, api_key: ApiKey, handler: Handler, topic_name: TopicName | None) -> Handler:
    def handle(ctx: RequestContext, request: KafkaRequest) -> object:
        if not registry.active:
            return handler(ctx, request)
        leaderless: list[LeaderUnavailable] = []
        for fault in registry.current():
            spec = fault.spec
            if isinstance(spec, Fail):
                if spec.api == api_key and _matches(spec, api_key, request, topic_name):
                    registry.use(fault)
                    return _answer_error(ctx, request, spec.error)
            elif isinstance(spec, Delay):
                if spec.api == api_key and _matches(spec, api_key, request, topic_name):
                    registry.use(fault)
                    return _after(asyncio.sleep(spec.ms / 1000.0), handler, ctx, request)
            elif isinstance(spec, PauseHeartbeats):
                if api_key in _HEARTBEATS and _matches(spec, api_key, request, topic_name):
                    return _after(fault.released.wait(), handler, ctx, request)
            elif api_key == ApiKey.METADATA:
                leaderless.append(spec)
            elif api_key in _LEADER_APIS and _names_partition(spec, api_key, request, topic_name):
                return _answer_error(ctx, request, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        result = handler(ctx, request)
        if leaderless:
            if inspect.isawaitable(result):
                return _metadata_after(result, leaderless)
            return _leaderless(result, leaderless)
        return result

    return handle


def wrap_handlers(registry: Registry, handlers: dict[ApiKey, Handler],
                  topic_name: TopicName | None = None) -> dict[ApiKey, Handler]:
    return {key: _faulted(registry, ApiKey(key), handler, topic_name) for key, handler in handlers.items()}
