"""The hand-written hot-path encoders against kafka-python's decoders of Kafka's JSON schemas,
for every version we advertise: what we write is what the schema reads back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import HeartbeatResponse, OffsetCommitResponse, OffsetFetchResponse

from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.consumer_group_messages import ConsumerGroupHeartbeatResponse
from protocol.hot_responses import (
    AssignedTopicPartitions,
    CommitPartition,
    CommitTopic,
    ConsumerGroupAssignment,
    ConsumerGroupHeartbeatAnswer,
    FetchGroup,
    FetchPartition,
    FetchTopic,
    HeartbeatAnswer,
    OffsetCommitAnswer,
    OffsetFetchAnswer,
)

names = st.text(min_size=0, max_size=12)
i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


def _versions(api: ApiKey) -> list[int]:
    low, high = SUPPORTED_VERSIONS[api]
    return list(range(low, high + 1))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("version", _versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_answer(version: int, data: st.DataObject) -> None:
    answer = OffsetCommitAnswer(data.draw(st.lists(st.builds(
        CommitTopic, names, st.lists(st.builds(CommitPartition, i32, i16), max_size=4)), max_size=3)),
        throttle_time_ms=data.draw(i32) if version >= 3 else 0)
    decoded = OffsetCommitResponse.decode(answer.encode(version=version), version=version)
    if version >= 3:
        assert decoded.throttle_time_ms == answer.throttle_time_ms
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in decoded.topics] == \
        [(t.name, [tuple(p) for p in t.partitions]) for t in answer.topics]


def _fetch_topics(data: st.DataObject, version: int) -> list[FetchTopic]:
    nullable = version < 6  # Kafka never writes a null metadata, but old versions may carry one
    return data.draw(st.lists(st.builds(FetchTopic, names, st.lists(st.builds(
        FetchPartition, i32, i64, i32 if version >= 5 else st.just(-1),
        (st.none() | names) if nullable else names, i16), max_size=4)), max_size=3))


def _decoded_topics(topics: list) -> list:
    return [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
                      for p in t.partitions]) for t in topics]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("version", _versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch_answer(version: int, data: st.DataObject) -> None:
    throttle = data.draw(i32) if version >= 3 else 0
    if version >= 8:
        groups = [FetchGroup(data.draw(names), _fetch_topics(data, version), data.draw(i16))
                  for _ in range(data.draw(st.integers(0, 3)))]
        answer = OffsetFetchAnswer(groups=groups, throttle_time_ms=throttle)
    else:
        answer = OffsetFetchAnswer(topics=_fetch_topics(data, version),
                                   error_code=data.draw(i16) if version >= 2 else 0, throttle_time_ms=throttle)
    decoded = OffsetFetchResponse.decode(answer.encode(version=version), version=version)
    if version >= 3:
        assert decoded.throttle_time_ms == throttle
    if version >= 8:
        assert [(g.group_id, _decoded_topics(g.topics), g.error_code) for g in decoded.groups] == \
            [(g.group_id, [(t.name, [tuple(p) for p in t.partitions]) for t in g.topics], g.error_code)
             for g in answer.groups or []]
    else:
        assert _decoded_topics(decoded.topics) == [(t.name, [tuple(p) for p in t.partitions])
                                                   for t in answer.topics or []]
        if version >= 2:
            assert decoded.error_code == answer.error_code


@pytest.mark.parametrize("version", _versions(ApiKey.HEARTBEAT))
@pytest.mark.parametrize("error", [0, 27, -1])
def test_heartbeat_answer(version: int, error: int) -> None:
    decoded = HeartbeatResponse.decode(HeartbeatAnswer(error, 7).encode(version=version), version=version)
    assert decoded.error_code == error
    if version >= 1:
        assert decoded.throttle_time_ms == 7


_R = ConsumerGroupHeartbeatResponse


@settings(max_examples=60, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("version", _versions(ApiKey.CONSUMER_GROUP_HEARTBEAT))
def test_consumer_group_heartbeat_answer(version: int, data: st.DataObject) -> None:
    """Byte for byte what the generic message class (our JSON definition) encodes."""
    topics = data.draw(st.none() | st.lists(st.builds(
        AssignedTopicPartitions, st.uuids(), st.lists(i32, max_size=6)), max_size=4))
    answer = ConsumerGroupHeartbeatAnswer(
        data.draw(i16), data.draw(st.none() | names), data.draw(st.none() | names), data.draw(i32), data.draw(i32),
        None if topics is None else ConsumerGroupAssignment(topics), data.draw(i32))
    generic = _R(version=version, throttle_time_ms=answer.throttle_time_ms, error_code=answer.error_code,
                 error_message=answer.error_message, member_id=answer.member_id, member_epoch=answer.member_epoch,
                 heartbeat_interval_ms=answer.heartbeat_interval_ms,
                 assignment=None if topics is None else _R.Assignment(topic_partitions=[
                     _R.Assignment.TopicPartitions(topic_id=t.topic_id, partitions=t.partitions) for t in topics]))
    assert answer.encode(version=version) == generic.encode(version=version)
