"""``fail``'s answers: for every failable API and every version we serve, the error response
encodes, decodes with kafka-python's decoder of Kafka's schemas, carries the error in every
error field and echoes what the request named."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from coordinator.faults.error_responses import FAILABLE_APIS, error_response
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, request_class, response_class
from protocol.errors import ErrorCode

ERROR = ErrorCode.REBALANCE_IN_PROGRESS


def _sample(fields: Any, version: int) -> dict[str, object]:
    """A request with one entry in every array: strings 'x-<field>', ints 3."""
    values: dict[str, object] = {}
    for field in fields:
        if not field.for_version_q(version):
            continue
        if field.is_struct_array():
            values[field.name] = [field.data_class(**_sample(list(field.fields.values()), version))]
        elif field.is_array():
            inner = field._type_str[2:]
            values[field.name] = [f"x-{field.name}"] if inner == "string" else [3]
        elif field._type_str == "string":
            values[field.name] = f"x-{field.name}"
        elif field._type_str == "uuid":
            values[field.name] = uuid.UUID(int=7)
        elif field._type_str in ("int8", "int16", "int32", "int64"):
            values[field.name] = 3
    return values


def _errors(obj: Any, fields: Any, version: int, out: list[int]) -> list[int]:
    """Every error field's value in ``obj``, walking its schema."""
    for field in fields:
        if not field.for_version_q(version):
            continue
        value = getattr(obj, field.name)
        if field.name.endswith("error_code"):
            out.append(value)
        elif field.is_struct_array():
            for item in value or ():
                _errors(item, list(field.fields.values()), version, out)
    return out


CASES = [(api, version) for api in sorted(FAILABLE_APIS)
         for version in range(SUPPORTED_VERSIONS[api][0], SUPPORTED_VERSIONS[api][1] + 1)]


@pytest.mark.parametrize(("api", "version"), CASES, ids=[f"{a.name}-v{v}" for a, v in CASES])
def test_error_response_round_trips_with_the_error_everywhere(api: ApiKey, version: int) -> None:
    req_cls = request_class(api)
    request = req_cls(version=version, **_sample(req_cls._struct._fields, version))
    response = error_response(api, version, request, ERROR)
    decoded = response_class(api).decode(response.encode(version=version), version=version)
    errors = _errors(decoded, response_class(api)._struct._fields, version, [])
    assert errors and set(errors) == {ERROR}


def test_offset_commit_echoes_topics_and_partitions() -> None:
    req_cls = request_class(ApiKey.OFFSET_COMMIT)
    topic = req_cls.OffsetCommitRequestTopic
    request = req_cls(version=8, group_id="g", topics=[
        topic(name="t", partitions=[topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=5),
                                    topic.OffsetCommitRequestPartition(partition_index=2, committed_offset=5)])])
    decoded = response_class(ApiKey.OFFSET_COMMIT).decode(
        error_response(ApiKey.OFFSET_COMMIT, 8, request, ERROR).encode(version=8), version=8)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in decoded.topics] == \
        [("t", [(0, ERROR), (2, ERROR)])]


def test_offset_fetch_v8_groups_and_v4_find_coordinator_keys() -> None:
    req_cls = request_class(ApiKey.OFFSET_FETCH)
    group = req_cls.OffsetFetchRequestGroup
    request = req_cls(version=8, groups=[group(group_id="g1", topics=[
        group.OffsetFetchRequestTopics(name="t", partition_indexes=[1, 4])]), group(group_id="g2", topics=None)])
    decoded = response_class(ApiKey.OFFSET_FETCH).decode(
        error_response(ApiKey.OFFSET_FETCH, 8, request, ERROR).encode(version=8), version=8)
    assert [g.group_id for g in decoded.groups] == ["g1", "g2"]
    assert [(p.partition_index, p.committed_offset) for p in decoded.groups[0].topics[0].partitions] == [(1, -1), (4, -1)]
    find = request_class(ApiKey.FIND_COORDINATOR)(version=4, key_type=0, coordinator_keys=["a", "b"])
    decoded = response_class(ApiKey.FIND_COORDINATOR).decode(
        error_response(ApiKey.FIND_COORDINATOR, 4, find, ERROR).encode(version=4), version=4)
    assert [(c.key, c.node_id, c.error_code) for c in decoded.coordinators] == [("a", -1, ERROR), ("b", -1, ERROR)]
