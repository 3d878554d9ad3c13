"""Znode values as Kafka's ZooKeeper mode writes them, and bad ones read as a clear error."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.cluster.znodes import (
    BrokerRegistration,
    ZnodeError,
    decode_broker,
    decode_cluster_id,
    encode_broker,
    encode_cluster_id,
)


def test_broker_registration_has_kafkas_v5_fields() -> None:
    value = json.loads(encode_broker(BrokerRegistration(3, "h1", 9092, "r1", 1700000000000)))
    assert value == {"version": 5, "host": "h1", "port": 9092, "jmx_port": -1, "timestamp": "1700000000000",
                     "endpoints": ["PLAINTEXT://h1:9092"], "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                     "features": {}, "rack": "r1"}
    # No rack: the field is absent, as Kafka writes it.
    assert "rack" not in json.loads(encode_broker(BrokerRegistration(3, "h1", 9092)))


def test_reads_a_registration_written_by_kafka() -> None:
    # The example of reference/cluster_replication.md §1.1: two listeners, the PLAINTEXT one wins.
    data = (b'{"version":5,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1700000000000",'
            b'"endpoints":["REPL://h1:9093","PLAINTEXT://h1:9092"],'
            b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","REPL":"PLAINTEXT"},"rack":"r1","features":{}}')
    assert decode_broker("/brokers/ids/3", data) == BrokerRegistration(
        3, "h1", 9092, "r1", 1700000000000, (("REPL", "h1", 9093), ("PLAINTEXT", "h1", 9092)),
        (("PLAINTEXT", "PLAINTEXT"), ("REPL", "PLAINTEXT")))
    # A v2 registration (0.9 era): host and port only.
    v2 = b'{"version":2,"host":"old","port":9092,"jmx_port":-1,"timestamp":"1"}'
    assert decode_broker("/brokers/ids/1", v2) == BrokerRegistration(1, "old", 9092, None, 1)


def test_round_trip() -> None:
    reg = BrokerRegistration(7, "10.0.0.7", 19092, None, 123)
    decoded = decode_broker("/brokers/ids/7", encode_broker(reg))
    assert decoded == BrokerRegistration(7, "10.0.0.7", 19092, None, 123, (("PLAINTEXT", "10.0.0.7", 19092),),
                                         (("PLAINTEXT", "PLAINTEXT"),))
    assert decoded.endpoint_for("PLAINTEXT") == ("10.0.0.7", 19092) and decoded.endpoint_for("SSL") is None


def test_every_listener_is_registered_and_read_back() -> None:
    # Kafka's /brokers/ids/<id>: every listener in endpoints, and their protocols
    # (reference/security.md §1: Metadata answers with the endpoints of the request's listener).
    reg = BrokerRegistration(2, "h2", 9092, None, 5, (("PLAINTEXT", "h2", 9092), ("SASL_SSL", "::1", 9093)),
                             (("PLAINTEXT", "PLAINTEXT"), ("SASL_SSL", "SASL_SSL")))
    value = json.loads(encode_broker(reg))
    assert value["endpoints"] == ["PLAINTEXT://h2:9092", "SASL_SSL://[::1]:9093"]
    assert value["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    decoded = decode_broker("/brokers/ids/2", encode_broker(reg))
    assert decoded == reg
    assert decoded.endpoint_for("SASL_SSL") == ("::1", 9093)


@pytest.mark.parametrize("data, message", [
    (b"", "is empty"),
    (b"{not json", "is not JSON"),
    (b"[1,2]", "expected an object"),
    (b"[" * 100_000, "is not JSON"),
    (b'{"host":"h","port":1,"jmx_port":-1}', "version is None"),
    (b'{"version":9,"host":"h","port":1,"jmx_port":-1}', "registration version 9"),
    (b'{"version":4,"host":"h","port":1}', "jmx_port is None"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["SSL://h:1"],"host":null,"port":-1}', "no PLAINTEXT endpoint"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://h:x"]}', "has no port"),
    (b'{"version":4,"jmx_port":-1,"host":"h","port":1,"endpoints":5}', "endpoints is 5, not a list"),
    (b'{"version":4,"jmx_port":-1,"host":"h","port":1,"endpoints":"PLAINTEXT://h:1"}', "not a list"),
    (b'{"version":4,"jmx_port":-1,"host":"h","port":1,"rack":5}', "rack is 5"),
    (b'{"version":4,"jmx_port":-1,"host":"h","port":1,"timestamp":"soon"}', "is not milliseconds"),
])
def test_a_foreign_registration_is_an_error_naming_the_znode(data: bytes, message: str) -> None:
    with pytest.raises(ZnodeError, match=message) as info:
        decode_broker("/brokers/ids/4", data)
    assert "/brokers/ids/4" in str(info.value)


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_znode_error(data: bytes) -> None:
    for decode in (lambda d: decode_broker("/brokers/ids/1", d), decode_cluster_id):
        try:
            decode(data)
        except ZnodeError:
            pass


def test_cluster_id_znode_has_a_string_version() -> None:
    assert json.loads(encode_cluster_id("abc")) == {"version": "1", "id": "abc"}
    assert decode_cluster_id(b'{"version":"1","id":"Xy3_abcdefghijklmnopqr"}') == "Xy3_abcdefghijklmnopqr"
    with pytest.raises(ZnodeError, match="/cluster/id"):
        decode_cluster_id(b'{"version":"1"}')


def test_controller_znodes() -> None:
    from coordinator.cluster.znodes import decode_controller, decode_controller_epoch, encode_controller

    assert json.loads(encode_controller(3, 17)) == {"version": 1, "brokerid": 3, "timestamp": "17"}
    # Kafka 3.4+ writes version 2 with the KRaft migration epoch; only brokerid matters.
    assert decode_controller(b'{"version":2,"brokerid":5,"timestamp":"1","kraftControllerEpoch":-1}') == 5
    assert decode_controller_epoch(b"12") == 12
    for bad in (b"", b"x", b"-1", b"\xff"):
        with pytest.raises(ZnodeError, match="/controller_epoch"):
            decode_controller_epoch(bad)
    with pytest.raises(ZnodeError, match="/controller"):
        decode_controller(b'{"version":1}')
