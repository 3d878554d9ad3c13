"""Kafka's answer to a request that failed as a whole: the API's response with one error in every
error field, echoing what the request named (topics, partitions, groups, coordinator keys), as
Kafka's ``getErrorResponse`` does for each API (each request class of
https://github.com/apache/kafka/tree/trunk/clients/src/main/java/org/apache/kafka/common/requests).

Built by walking the response's schema (kafka-python's classes, generated from Kafka's JSON
message schemas) beside the request's: a response array is filled from the request array it
answers (same name, or the one ``_ARRAYS`` names), an identity field (topic name, partition index,
group id, ...) is copied, every field whose name ends in ``error_code`` gets the error, and the
offsets, epochs and ids Kafka leaves unknown in an error answer are -1.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.apis import ApiKey, response_class
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaSchemaField

__all__ = ["FAILABLE_APIS", "error_response"]

#: The APIs a ``fail`` fault may answer (their error answers are checked for every version in
#: tests/coordinator/faults/test_error_responses.py).
FAILABLE_APIS: frozenset[ApiKey] = frozenset({
    ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP, ApiKey.FIND_COORDINATOR, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.TXN_OFFSET_COMMIT, ApiKey.PRODUCE, ApiKey.FETCH,
    ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.END_TXN,
    ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.OFFSET_DELETE, ApiKey.DELETE_GROUPS,
})

#: Response field → the request field it answers, where the names differ (per API). Array
#: elements that are plain values (``PartitionIndexes``, ``CoordinatorKeys``, ``Groups`` of
#: DescribeGroups) fill the first identity field of the response's struct.
_ARRAYS: dict[ApiKey, dict[str, str]] = {
    ApiKey.OFFSET_FETCH: {"partitions": "partition_indexes"},
    ApiKey.PRODUCE: {"responses": "topic_data", "partition_responses": "partition_data"},
    ApiKey.FETCH: {"responses": "topics", "partition_index": "partition"},
    ApiKey.FIND_COORDINATOR: {"coordinators": "coordinator_keys"},
    ApiKey.CONSUMER_GROUP_DESCRIBE: {"groups": "group_ids"},
    ApiKey.DELETE_GROUPS: {"results": "groups_names"},
    ApiKey.ADD_PARTITIONS_TO_TXN: {"results_by_topic_v3_and_below": "v3_and_below_topics",
                                   "results_by_partition": "partitions", "results_by_transaction": "transactions",
                                   "topic_results": "topics"},
}

#: Fields that say which thing an entry is about: copied from the request.
_IDENTITY = frozenset({"name", "topic", "topic_id", "partition_index", "index", "partition", "group_id", "member_id",
                       "group_instance_id", "key", "transactional_id"})
#: Fields an error answer leaves unknown (Kafka's INVALID_OFFSET, NO_PARTITION_LEADER, ... are -1).
_UNKNOWN = frozenset({"committed_offset", "committed_leader_epoch", "base_offset", "log_append_time_ms",
                      "log_start_offset", "high_watermark", "last_stable_offset", "preferred_read_replica",
                      "timestamp", "offset", "leader_epoch", "end_offset", "producer_id", "producer_epoch",
                      "generation_id", "node_id", "port", "controller_id"})


def error_response(api_key: ApiKey, version: int, request: KafkaRequest, error: int) -> KafkaResponse:
    """``api_key``'s response at ``version`` answering ``request`` with ``error`` everywhere."""
    cls = response_class(api_key)
    aliases = _ARRAYS.get(api_key, {})
    values = _struct_values(cls._struct._fields, version, request, int(error), aliases)
    return cls(version=version, **values)


def _fields(field: KafkaSchemaField) -> Sequence[KafkaSchemaField]:
    """A struct array's fields, in schema order (kafka-python keeps them by name)."""
    fields = field.fields
    return list(fields.values()) if isinstance(fields, dict) else list(fields)


def _struct_values(fields: Sequence[KafkaSchemaField], version: int, source: object, error: int,
                   aliases: dict[str, str]) -> dict[str, object]:
    values: dict[str, object] = {}
    for field in fields:
        if not field.for_version_q(version):
            continue
        name = field.name
        if name.endswith("error_code"):
            values[name] = error
        elif field.is_struct_array():
            items = _source(source, name, aliases)
            if isinstance(items, (list, tuple)):
                values[name] = [_element(field, version, item, error, aliases) for item in items]
        elif name in _IDENTITY:
            found = _source(source, name, aliases)
            if found is not None:
                values[name] = found
        elif name in _UNKNOWN:
            values[name] = -1
    return values


def _source(source: object, name: str, aliases: dict[str, str]) -> object:
    if source is None or isinstance(source, (int, str, bytes)):
        return None
    found = getattr(source, name, None)
    if found is None and name in aliases:
        found = getattr(source, aliases[name], None)
    return found


def _element(field: KafkaSchemaField, version: int, item: object, error: int, aliases: dict[str, str]) -> object:
    if isinstance(item, (int, str)):
        # A plain value in the request (a partition index, a group id): it names the entry.
        first = next(f.name for f in _fields(field) if f.name in _IDENTITY and f.for_version_q(version))
        values = _struct_values(_fields(field), version, None, error, aliases)
        values[first] = item
    else:
        values = _struct_values(_fields(field), version, item, error, aliases)
    return field.data_class(**values)
