"""Golden request frames recorded from stock clients, fed through :class:`ServerConnection`.

``/work/shared/data/client_request_frames.jsonl`` holds one request per line (``frame_hex`` is the
frame without its size prefix) from librdkafka (confluent-kafka-python), the Java client,
kafka-python, aiokafka and KafkaJS. A frame whose api and version we serve must decode into
``RequestReceived`` with the recorded key, version and client id, and re-encode to the very same
bytes; any other frame must end the connection (or, for ApiVersions above our maximum, get its
own event).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from protocol.apis import SUPPORTED_VERSIONS, ApiKey, is_flexible
from protocol.connection import ServerConnection
from protocol.events import NEED_DATA, ProtocolViolation, RequestReceived, UnsupportedApiVersions
from tests.protocol.test_roundtrip import reencode

# Recorded from the stock clients talking to a Kafka-compatible broker (shared/data, copied here so
# the decoder tests run from any clone).
FRAMES_PATH = Path(__file__).resolve().parent / "golden" / "client_request_frames.jsonl"

FRAMES: list[dict[str, Any]] = [
    json.loads(line) for line in FRAMES_PATH.read_text().splitlines() if line.strip()
]


def _served(api_key: int, api_version: int) -> bool:
    try:
        key = ApiKey(api_key)
    except ValueError:
        return False
    if key not in SUPPORTED_VERSIONS:
        return False
    low, high = SUPPORTED_VERSIONS[key]
    return low <= api_version <= high


def _id(record: dict[str, Any]) -> str:
    return f"{record['api_key']}v{record['api_version']}-{record['client_id']}"


SERVED = [r for r in FRAMES if _served(r["api_key"], r["api_version"])]
NOT_SERVED = [r for r in FRAMES if not _served(r["api_key"], r["api_version"])]


def _feed(record: dict[str, Any]) -> tuple[bytes, object, ServerConnection]:
    payload = bytes.fromhex(record["frame_hex"])
    conn = ServerConnection()
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    return payload, conn.next_event(), conn


def _body_offset(payload: bytes, api_key: int, api_version: int) -> int:
    """Where the body starts: after header v1, or header v2 (with its tagged-field section)."""
    (client_id_len,) = struct.unpack_from(">h", payload, 8)
    pos = 10 + max(client_id_len, 0)
    if is_flexible(api_key, api_version):
        assert payload[pos] == 0, "recorded clients send no header tagged fields"
        pos += 1
    return pos


def test_data_set_is_not_empty_and_covers_the_core_apis() -> None:
    assert len(FRAMES) > 100
    served_keys = {r["api_key"] for r in SERVED}
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA} <= served_keys


@pytest.mark.parametrize("record", SERVED, ids=[_id(r) for r in SERVED])
def test_served_frame_decodes(record: dict[str, Any]) -> None:
    payload, event, conn = _feed(record)
    assert isinstance(event, RequestReceived), event
    assert event.api_key == record["api_key"]
    assert event.api_version == record["api_version"]
    assert event.client_id == record["client_id"]
    assert event.correlation_id == struct.unpack_from(">i", payload, 4)[0]
    assert event.size == len(payload)
    assert event.request.version == record["api_version"]
    # golden bytes: the decoded request encodes back to exactly what the client sent
    offset = _body_offset(payload, record["api_key"], record["api_version"])
    assert reencode(event.request, record["api_version"]) == payload[offset:]
    assert conn.next_event() is NEED_DATA
    assert conn.buffered == 0
    _check_sensible_fields(record, event.request)


# What each client calls itself in ApiVersions v3+ (KIP-511 ClientSoftwareName).
SOFTWARE_NAMES = {
    "rdkafka": "confluent-kafka-python",
    "kafka-python-3.0.12": "kafka-python",
    "consumer-mixed-g-fd30e9ae-1": "apache-kafka-java",
}


def _check_sensible_fields(record: dict[str, Any], request: Any) -> None:
    api_key, version = record["api_key"], record["api_version"]
    if api_key == ApiKey.API_VERSIONS:
        if version >= 3:
            assert request.client_software_name
            assert request.client_software_version
            expected = SOFTWARE_NAMES.get(record["client_id"])
            if expected is not None:
                assert request.client_software_name == expected
    elif api_key == ApiKey.METADATA:
        if request.topics is not None:
            for topic in request.topics:
                assert topic.name, topic
        assert request.allow_auto_topic_creation in (True, False)
    elif api_key == ApiKey.FIND_COORDINATOR:
        keys = request.coordinator_keys if version >= 4 else [request.key]
        assert keys and all(keys), request
        assert request.key_type in (0, 1)
    elif api_key == ApiKey.CREATE_TOPICS:
        assert request.topics and all(t.name for t in request.topics), request
    elif api_key in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
                     ApiKey.OFFSET_COMMIT):
        assert request.group_id, request
    elif api_key == ApiKey.OFFSET_FETCH:
        assert request.groups if version >= 8 else request.group_id, request


def test_api_versions_v3_carries_client_software_name() -> None:
    records = [r for r in SERVED if r["api_key"] == ApiKey.API_VERSIONS and r["api_version"] >= 3]
    assert records, "the data set has ApiVersions v3/v4 frames"
    names = set()
    for record in records:
        _, event, _ = _feed(record)
        assert isinstance(event, RequestReceived)
        names.add(event.request.client_software_name)
    assert {"confluent-kafka-python", "kafka-python", "apache-kafka-java"} <= names


def test_all_served_frames_pipelined_on_one_connection() -> None:
    stream = b"".join(
        struct.pack(">i", len(p)) + p for p in (bytes.fromhex(r["frame_hex"]) for r in SERVED)
    )
    conn = ServerConnection()
    conn.receive_data(stream)
    events = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
    assert [(e.api_key, e.api_version, e.client_id) for e in events] == [
        (r["api_key"], r["api_version"], r["client_id"]) for r in SERVED
    ]


@pytest.mark.parametrize("record", NOT_SERVED, ids=[_id(r) for r in NOT_SERVED])
def test_frame_outside_the_table_is_refused(record: dict[str, Any]) -> None:
    payload, event, conn = _feed(record)
    api_key, version = record["api_key"], record["api_version"]
    if api_key == ApiKey.API_VERSIONS and version > SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]:
        assert event == UnsupportedApiVersions(
            version, struct.unpack_from(">i", payload, 4)[0], record["client_id"]
        )
        return
    assert isinstance(event, ProtocolViolation), event
    if api_key not in ApiKey._value2member_map_:
        assert f"unknown api key {api_key}" in event.reason
    else:
        assert str(api_key) in event.reason or ApiKey(api_key).name in event.reason
    assert conn.next_event() == event
