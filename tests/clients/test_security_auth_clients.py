"""Every stock client authenticates to one node (tests/clients/security_io.py): over SASL_SSL with
SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN,
and over SSL with a client certificate (``ssl.client.auth=required``), producing and consuming.
The certificate's subject DN is the principal: ``sec-topic`` has ACLs for alice's DN (and for the
SASL users), none for bob's, so bob's certificate is refused the topic. A wrong password and an
unknown user fail alike, with Kafka's generic message (SASL_AUTHENTICATION_FAILED; for SCRAM it
names only the mechanism; docs/security.md)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.security.acl import AclOperation, ResourceType
from tests.clients.security_io import PASSWORDS, SecureNode, acl, dn, generic_failure
from tests.clients.tools import run_java, run_kcat, run_node

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]
TOPIC = "sec-topic"

#: tag -> (mechanism or None for a client certificate, user, password)
LOGINS = {
    "scram512": ("SCRAM-SHA-512", "alice", PASSWORDS["alice"]),
    "scram256": ("SCRAM-SHA-256", "alice", PASSWORDS["alice"]),
    "plain": ("PLAIN", "bob", PASSWORDS["bob"]),
    "mtls": (None, "alice", ""),
}
#: tag -> (mechanism, user, password): each must fail with GENERIC_FAILURE
FAILURES = {
    "bad_password": ("SCRAM-SHA-512", "alice", "not-her-password"),
    "unknown_user": ("SCRAM-SHA-512", "nobody", PASSWORDS["alice"]),
    "plain_bad_password": ("PLAIN", "bob", "not-his-password"),
    "plain_unknown_user": ("PLAIN", "nobody", PASSWORDS["bob"]),
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    acls = [acl(principal, AclOperation.ALL, ResourceType.TOPIC, TOPIC)
            for principal in ("User:alice", "User:bob", f"User:{dn('alice')}")]
    node = SecureNode(tmp_path_factory.mktemp("sec-auth"), acls=acls)
    yield node
    node.stop()


def _expect(results: dict[str, str], tags: list[str]) -> None:
    """Each login tag "ok"; each failure tag the generic message of its mechanism, and the same
    text for the wrong password as for the unknown user."""
    for tag in tags:
        if tag in LOGINS:
            assert results[tag] == "ok", (tag, results)
        else:
            assert results[tag] == generic_failure(FAILURES[tag][0]), (tag, results)


def _server_message(text: str) -> str:
    """The server's error message inside a client's error text (they add prefixes and timings)."""
    found = re.search(r"Authentication failed(: Invalid username or password| during authentication due to "
                      r"invalid credentials with SASL mechanism [A-Z0-9-]+)", text)
    return found.group(0) if found else text


# ------------------------------------------------------------------------------ Java


def test_java(node: SecureNode, tmp_path: Path) -> None:
    def props(tag: str, mechanism: str | None, user: str, password: str, listener: str = "SASL_SSL") -> str:
        listener = "SSL" if mechanism is None else listener
        path = node.java_properties(tmp_path / f"{tag}.properties", mechanism=mechanism, user=user,
                                    password=password, listener=listener)
        return f"{tag}={path}"

    logins = [props(tag, *login) for tag, login in LOGINS.items()]
    logins.append(props("mtls_bob", None, "bob", ""))
    probes = [props(tag, *failure) for tag, failure in FAILURES.items()]
    result = run_java("SecClient", ["cases", TOPIC, *(f"roundtrip:{case}" for case in logins),
                                    *(f"probe:{case}" for case in probes)], timeout=90).check().kv()
    results = {tag: "ok" for tag in LOGINS if result.get(f"{tag}.ok") == "true"}
    results.update({tag: result.get(f"{tag}.error", "") for tag in LOGINS if tag not in results})
    for tag in FAILURES:
        error = result.get(f"{tag}.error", "")
        assert error.startswith("org.apache.kafka.common.errors.SaslAuthenticationException: "), (tag, error)
        results[tag] = error.partition(": ")[2]
    _expect(results, [*LOGINS, *FAILURES])
    # bob's certificate authenticates (he is User:CN=bob,OU=eng,O=Example) but no ACL names him.
    assert result["mtls_bob.error"].startswith("org.apache.kafka.common.errors.TopicAuthorizationException"), result


# ------------------------------------------------------------------------------ confluent-kafka


def _confluent_roundtrip(conf: dict[str, str], tag: str) -> str:
    from confluent_kafka import Consumer, KafkaException, Producer

    errors: list[str] = []
    conf = {**conf, "error_cb": lambda e: errors.append(str(e))}
    producer = Producer(conf)
    delivered: list[object] = []
    producer.produce(TOPIC, value=tag.encode(), on_delivery=lambda err, _m: delivered.append(err))
    if producer.flush(20) or len(delivered) != 1 or delivered[0] is not None:
        return f"not delivered: {delivered!r} {errors!r}"
    consumer = Consumer({**conf, "group.id": f"sec-confluent-{tag}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return str(msg.error())
            if msg.value() == tag.encode():
                consumer.commit(msg, asynchronous=False)
                return "ok"
        return f"timeout {errors}"
    except KafkaException as e:
        return str(e)
    finally:
        consumer.close()


def _confluent_failure(conf: dict[str, str]) -> str:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[str] = []
    admin = AdminClient({**conf, "error_cb": lambda e: errors.append(str(e))})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=1.5)
    deadline = time.monotonic() + 5
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)  # serves error_cb
    auth = [e for e in errors if "SASL authentication error" in e]
    assert auth, errors
    return _server_message(auth[0])


def test_confluent_kafka(node: SecureNode) -> None:
    results = {tag: _confluent_roundtrip(node.librdkafka(mechanism=m, user=u, password=p,
                                                         listener="SSL" if m is None else "SASL_SSL"), tag)
               for tag, (m, u, p) in LOGINS.items()}
    results.update({tag: _confluent_failure(node.librdkafka(mechanism=m, user=u, password=p))
                    for tag, (m, u, p) in FAILURES.items()})
    _expect(results, [*LOGINS, *FAILURES])
    denied = _confluent_roundtrip(node.librdkafka(mechanism=None, user="bob", listener="SSL"), "mtls_bob")
    assert "TOPIC_AUTHORIZATION_FAILED" in denied or "Topic authorization failed" in denied, denied


# ------------------------------------------------------------------------------ kcat


def _kcat_args(conf: dict[str, str]) -> list[str]:
    args = ["-b", conf.pop("bootstrap.servers")]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    return args


def test_kcat(node: SecureNode, tmp_path: Path) -> None:
    """kcat (its own librdkafka 2.0.2): produce then read back with each login; bad logins fail -L."""
    for tag in ("scram512", "scram256", "plain", "mtls"):
        mechanism, user, password = LOGINS[tag]
        args = _kcat_args(node.librdkafka(mechanism=mechanism, user=user, password=password,
                                          listener="SSL" if mechanism is None else "SASL_SSL"))
        value = f"kcat-{tag}"
        (tmp_path / "in").write_text(value + "\n")
        run_kcat([*args, "-P", "-t", TOPIC, "-p", "0", str(tmp_path / "in")]).check()
        read = run_kcat([*args, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%s\n"]).check()
        assert value in read.stdout.split(), read.describe()
    texts = {}
    for tag in ("bad_password", "unknown_user"):
        mechanism, user, password = FAILURES[tag]
        done = run_kcat([*_kcat_args(node.librdkafka(mechanism=mechanism, user=user, password=password)),
                         "-L", "-m", "2"])
        assert done.returncode != 0, done.describe()
        texts[tag] = _server_message(done.stderr)
    _expect(texts, ["bad_password", "unknown_user"])


# ------------------------------------------------------------------------------ kafka-python


def _kafka_python_roundtrip(options: dict[str, object], tag: str) -> str:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError

    try:
        producer = KafkaProducer(**options, max_block_ms=10000)
        try:
            producer.send(TOPIC, tag.encode()).get(timeout=10)
        finally:
            producer.close()
        consumer = KafkaConsumer(TOPIC, group_id=f"sec-kafka-python-{tag}", auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=20000, **options)
        try:
            for message in consumer:
                if message.value == tag.encode():
                    consumer.commit()
                    return "ok"
            return "timeout"
        finally:
            consumer.close()
    except KafkaError as e:
        return f"{type(e).__name__}: {e}"


def _kafka_python_failure(options: dict[str, object], caplog: pytest.LogCaptureFixture) -> str:
    """kafka-python retries a failed bootstrap until its timeout and then raises a timeout: the
    server's error reaches the user in its log line (``Bootstrap connection ... failed: [Error 58]``).
    kafka-python 3.0.12 drops a response that arrives in the same read as the end of the stream
    (``KafkaTransport._read_from_sock`` aborts on the EOF before handing over the bytes read with it),
    and the node, like Kafka, closes right after the answer: some attempts end in "socket
    disconnected" instead, so this tries until one shows the server's answer."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaTimeoutError

    caplog.clear()
    for _ in range(5):
        with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
            KafkaAdminClient(**options, bootstrap_timeout_ms=1500).close()
        answers = {_server_message(r.getMessage()) for r in caplog.records
                   if "[Error 58] SaslAuthenticationFailedError" in r.getMessage()}
        if answers:
            break
    assert len(answers) == 1, caplog.text
    return answers.pop()


def test_kafka_python(node: SecureNode, caplog: pytest.LogCaptureFixture) -> None:
    results = {tag: _kafka_python_roundtrip(node.kafka_python(mechanism=m, user=u, password=p,
                                                              listener="SSL" if m is None else "SASL_SSL"), tag)
               for tag, (m, u, p) in LOGINS.items()}
    results.update({tag: _kafka_python_failure(node.kafka_python(mechanism=m, user=u, password=p), caplog)
                    for tag, (m, u, p) in FAILURES.items() if m != "PLAIN"})
    _expect(results, [*LOGINS, "bad_password", "unknown_user"])
    denied = _kafka_python_roundtrip(node.kafka_python(mechanism=None, user="bob", listener="SSL"), "mtls_bob")
    assert denied.startswith("TopicAuthorizationFailedError"), denied


# ------------------------------------------------------------------------------ aiokafka


async def _aiokafka_roundtrip(options: dict[str, object], tag: str) -> str:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(**options)
    await producer.start()
    try:
        await producer.send_and_wait(TOPIC, tag.encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(TOPIC, group_id=f"sec-aiokafka-{tag}", auto_offset_reset="earliest",
                                enable_auto_commit=False, **options)
    await consumer.start()
    try:
        async with asyncio.timeout(20):
            async for message in consumer:
                if message.value == tag.encode():
                    await consumer.commit()
                    return "ok"
    finally:
        await consumer.stop()
    return "no record"


async def _aiokafka_failure(options: dict[str, object], caplog: pytest.LogCaptureFixture) -> str:
    """aiokafka raises "Unable to bootstrap" and logs the server's error (``[Error 58] ...``)."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    caplog.clear()
    producer = AIOKafkaProducer(**options, request_timeout_ms=5000)
    try:
        with caplog.at_level(logging.ERROR, logger="aiokafka"), pytest.raises(KafkaConnectionError):
            await producer.start()
    finally:
        await producer.stop()
    failures = {_server_message(r.getMessage()) for r in caplog.records if "[Error 58] SaslAuthenticationFailed" in r.getMessage()}
    assert len(failures) == 1, caplog.text
    return failures.pop()


def test_aiokafka(node: SecureNode, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> dict[str, str]:
        results = {}
        for tag in ("scram512", "scram256", "plain", "mtls"):
            m, u, p = LOGINS[tag]
            results[tag] = await _aiokafka_roundtrip(
                node.aiokafka(mechanism=m, user=u, password=p, listener="SSL" if m is None else "SASL_SSL"), tag)
        for tag in ("bad_password", "unknown_user"):
            m, u, p = FAILURES[tag]
            results[tag] = await _aiokafka_failure(node.aiokafka(mechanism=m, user=u, password=p), caplog)
        return results

    _expect(asyncio.run(main()), ["scram512", "scram256", "plain", "mtls", "bad_password", "unknown_user"])


# ------------------------------------------------------------------------------ kafkajs


def test_kafkajs(node: SecureNode, tmp_path: Path) -> None:
    cases = []
    for tag, (m, u, p) in LOGINS.items():
        cases.append({"tag": tag, "mode": "roundtrip",
                      **node.kafkajs(mechanism=m, user=u, password=p, listener="SSL" if m is None else "SASL_SSL")})
    for tag in ("bad_password", "unknown_user", "plain_bad_password"):
        m, u, p = FAILURES[tag]
        cases.append({"tag": tag, "mode": "probe", **node.kafkajs(mechanism=m, user=u, password=p)})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    done = run_node("sec_client.js", [TOPIC, str(tmp_path / "cases.json")], timeout=90).check()
    raw = done.json()
    results = {tag: value if value == "ok" else _server_message(value["error"]) for tag, value in raw.items()}
    _expect(results, [case["tag"] for case in cases])
