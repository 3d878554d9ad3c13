"""Cross-check the KIP-848 message codecs against Apache Kafka's own generated Java classes.

``tests/java/ConsumerGroupMessagesCheck.java`` serializes ConsumerGroupHeartbeat and
ConsumerGroupDescribe requests and responses with kafka-clients 3.9.1, which knows version 0 of
both APIs only. Each message must decode with our codec to the values the Java program set, and
our codec must encode those values to the very same bytes. Without the jars or ``javac`` the test
fails, as tests/protocol/test_java_crosscheck.py does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.nullability import null_checker
from protocol.request_codec import body_decoder
from tests.protocol.test_java_crosscheck import JARS, REPO, _java_dir

SOURCE = REPO / "tests" / "java" / "ConsumerGroupMessagesCheck.java"
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


@pytest.fixture(scope="module")
def java_bytes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Name -> the v0 bytes Kafka's Java classes wrote."""
    java_dir = _java_dir()
    missing = [jar for jar in JARS if not (java_dir / jar).is_file()]
    if missing:
        pytest.fail(f"missing {', '.join(missing)} in {java_dir}: run tests/clients/setup_clients.sh", pytrace=False)
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        pytest.fail("javac/java not on PATH (Java 17 is expected)", pytrace=False)
    classpath = os.pathsep.join(str(java_dir / jar) for jar in JARS)
    classes: Path = tmp_path_factory.mktemp("consumer-group-messages-check")
    compiled = subprocess.run(
        [javac, "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(classes), str(SOURCE)],
        capture_output=True, text=True, timeout=180,
    )
    if compiled.returncode != 0:
        pytest.fail(f"javac failed:\n{compiled.stdout}\n{compiled.stderr}", pytrace=False)
    ran = subprocess.run(
        [java, "-cp", os.pathsep.join([str(classes), classpath]), "ConsumerGroupMessagesCheck"],
        capture_output=True, text=True, timeout=120,
    )
    if ran.returncode != 0:
        pytest.fail(f"ConsumerGroupMessagesCheck failed:\n{ran.stdout}\n{ran.stderr}", pytrace=False)
    lines = dict(line.split(" ", 1) for line in ran.stdout.splitlines() if line)
    return {name: bytes.fromhex(value) for name, value in lines.items()}


def _describe_assignment(field: str, *partitions: int) -> Any:
    # Assignment and TargetAssignment share a common struct but each field builds its own data
    # class (both named Assignment), and a value equals only one of its own class.
    cls = ConsumerGroupDescribeResponse.DescribedGroup.Member._struct.fields[field].data_class
    return cls(topic_partitions=[
        cls.TopicPartitions(topic_id=TOPIC_ID, topic_name="t1", partitions=list(partitions))])


def _expected() -> dict[str, Any]:
    """The values ConsumerGroupMessagesCheck.java sets, as our v0 messages."""
    heartbeat = ConsumerGroupHeartbeatResponse
    describe = ConsumerGroupDescribeResponse
    return {
        "heartbeat_request": ConsumerGroupHeartbeatRequest[0](
            group_id="grp", member_id="member-1", member_epoch=0, instance_id=None, rack_id="rack-a",
            rebalance_timeout_ms=300_000, subscribed_topic_names=["t1", "t2"], server_assignor="uniform",
            topic_partitions=[ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=TOPIC_ID, partitions=[0, 7])]),
        "heartbeat_request_nulls": ConsumerGroupHeartbeatRequest[0](group_id="grp", member_id="member-1",
                                                                    member_epoch=5),
        "heartbeat_response": heartbeat[0](
            throttle_time_ms=0, error_code=0, error_message=None, member_id="member-1", member_epoch=1,
            heartbeat_interval_ms=5000, assignment=heartbeat.Assignment(topic_partitions=[
                heartbeat.Assignment.TopicPartitions(topic_id=TOPIC_ID, partitions=[3])])),
        "describe_request": ConsumerGroupDescribeRequest[0](group_ids=["g1", "g2"], include_authorized_operations=True),
        "describe_response": describe[0](throttle_time_ms=0, groups=[describe.DescribedGroup(
            error_code=0, error_message=None, group_id="g1", group_state="Stable", group_epoch=4, assignment_epoch=4,
            assignor_name="uniform", authorized_operations=-(2**31), members=[describe.DescribedGroup.Member(
                member_id="m1", instance_id=None, rack_id=None, member_epoch=4, client_id="c1",
                client_host="/10.0.0.1", subscribed_topic_names=["t1"], subscribed_topic_regex=None,
                assignment=_describe_assignment("assignment", 0, 1),
                target_assignment=_describe_assignment("target_assignment", 0))])]),
    }


def test_every_java_message_is_checked(java_bytes: dict[str, bytes]) -> None:
    assert sorted(java_bytes) == sorted(_expected())


@pytest.mark.parametrize("name", sorted(_expected()))
def test_java_bytes_decode_and_encode_alike(java_bytes: dict[str, bytes], name: str) -> None:
    expected = _expected()[name]
    cls = type(expected)[None]
    data = java_bytes[name]
    if cls.is_request():
        decoded = body_decoder(cls, 0)(data)
        null_checker(cls, 0)(decoded)
    else:
        decoded = cls.decode(data, version=0)
    assert decoded == expected
    assert bytes(expected.encode(version=0)) == data


def test_java_nulls_stay_null(java_bytes: dict[str, bytes]) -> None:
    decoded = body_decoder(ConsumerGroupHeartbeatRequest, 0)(java_bytes["heartbeat_request_nulls"])
    assert (decoded.instance_id, decoded.rack_id, decoded.subscribed_topic_names, decoded.server_assignor,
            decoded.topic_partitions) == (None, None, None, None, None)
    assert decoded.rebalance_timeout_ms == -1
