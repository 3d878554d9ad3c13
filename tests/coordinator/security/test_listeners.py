"""Kafka's listener settings: parsing, the checks between them, and listener-prefixed settings."""

from __future__ import annotations

import pytest

from coordinator.config import ConfigError, load_config
from coordinator.security.listeners import Listener, resolve_listeners


def _resolve(*overrides: str, listen: str | None = None):
    return resolve_listeners(load_config(overrides=list(overrides), listen=listen))


def test_a_bare_host_port_is_one_plaintext_listener() -> None:
    listeners = _resolve(listen="127.0.0.1:9093")
    assert listeners.bound == (Listener("PLAINTEXT", "127.0.0.1", 9093, "PLAINTEXT"),)
    assert listeners.advertised == listeners.bound
    assert listeners.inter_broker == "PLAINTEXT"
    assert _resolve("listeners=PLAINTEXT://localhost:9092").bound == (Listener("PLAINTEXT", "localhost", 9092,
                                                                                 "PLAINTEXT"),)


def test_several_listeners_with_a_protocol_map_and_advertised_addresses() -> None:
    listeners = _resolve("listeners=internal://0.0.0.0:9092,EXTERNAL://:9093,SSL://127.0.0.1:9094",
                         "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,SSL:SSL",
                         "advertised.listeners=INTERNAL://10.0.0.1:9092,EXTERNAL://kafka.example.com:19093",
                         "inter.broker.listener.name=internal")
    assert [(x.name, x.protocol) for x in listeners.bound] == [("INTERNAL", "PLAINTEXT"), ("EXTERNAL", "SASL_SSL"),
                                                                ("SSL", "SSL")]
    assert listeners.advertised_for("EXTERNAL") == Listener("EXTERNAL", "kafka.example.com", 19093, "SASL_SSL")
    assert listeners.advertised_for("SSL") == Listener("SSL", "127.0.0.1", 9094, "SSL")  # its own address
    assert listeners.inter_broker == "INTERNAL"
    # Without inter.broker.listener.name: the listener of security.inter.broker.protocol.
    assert _resolve("listeners=SSL://:9094,PLAINTEXT://:9092").inter_broker == "PLAINTEXT"
    assert _resolve("listeners=SSL://:9094,PLAINTEXT://:9092",
                    "security.inter.broker.protocol=SSL").inter_broker == "SSL"


@pytest.mark.parametrize(("overrides", "message"), [
    (["listeners=PLAINTEXT://:9092,PLAINTEXT://:9093"], "listeners.*PLAINTEXT appears more than once"),
    (["listeners=A://:9092,B://:9092", "listener.security.protocol.map=A:PLAINTEXT,B:SSL"],
     "port 9092 is used by two listeners"),
    (["listeners=CLIENT://:9092"], "no security protocol for listener CLIENT.*listener.security.protocol.map"),
    (["listener.security.protocol.map=CLIENT:TLS"], "unknown security protocol 'TLS'"),
    (["listeners=PLAINTEXT://:9092", "advertised.listeners=PLAINTEXT://0.0.0.0:9092"],
     "advertised.listeners: PLAINTEXT advertises 0.0.0.0"),
    (["listeners=PLAINTEXT://:9092", "advertised.listeners=SSL://h:9093"], "advertised.listeners: listener SSL"),
    (["inter.broker.listener.name=INTERNAL"], "inter.broker.listener.name: INTERNAL is not a listener"),
    (["inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"], "both set"),
    (["security.inter.broker.protocol=SSL"], "security.inter.broker.protocol: no listener speaks SSL"),
    (["listeners=PLAINTEXT://host"], "listeners"),
    (["listeners=PLAINTEXT://h:99999"], "port 99999 outside"),
])
def test_bad_listener_settings_name_the_setting(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _resolve(*overrides)


def test_ipv4_and_ipv6_listeners_may_share_a_port() -> None:
    listeners = _resolve("listeners=A://127.0.0.1:9092,B://[::1]:9092",
                         "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT")
    assert [x.host for x in listeners.bound] == ["127.0.0.1", "::1"]


def test_security_settings_have_kafkas_defaults() -> None:
    config = load_config()
    assert config["listener.security.protocol.map"] == \
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    assert config["ssl.client.auth"] == "none"
    assert config["ssl.principal.mapping.rules"] == "DEFAULT"
    assert config["sasl.server.max.receive.size"] == 524288
    assert config["connections.max.reauth.ms"] == 0
    assert config["connection.failed.authentication.delay.ms"] == 100
    assert config["authorizer.class.name"] == "" and config["super.users"] == ""
    assert config["allow.everyone.if.no.acl.found"] is False
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        load_config(overrides=["ssl.client.auth=sometimes"])
    with pytest.raises(ConfigError, match="ssl.enabled.protocols"):
        load_config(overrides=["ssl.enabled.protocols=TLSv1.1,TLSv1.2"])


def test_listener_prefixed_settings_override_the_plain_ones() -> None:
    config = load_config(overrides=[
        "sasl.jaas.config=plain", "listener.name.sasl_ssl.ssl.client.auth=required",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=scram",
        "listener.name.sasl_ssl.connections.max.reauth.ms=5000"])
    assert config.for_listener("SASL_SSL", "ssl.client.auth") == "required"
    assert config.for_listener("SSL", "ssl.client.auth") == "none"
    assert config.for_listener("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256") == "scram"
    assert config.for_listener("SASL_SSL", "sasl.jaas.config", "PLAIN") == "plain"
    assert config.for_listener("SASL_SSL", "connections.max.reauth.ms") == 5000
    with pytest.raises(ConfigError, match="listener.name.sasl_ssl.ssl.client.auth"):
        load_config(overrides=["listener.name.sasl_ssl.ssl.client.auth=maybe"])
    with pytest.raises(ConfigError, match="unknown configuration key 'listener.name.sasl_ssl.num.partitions'"):
        load_config(overrides=["listener.name.sasl_ssl.num.partitions=3"])


def test_describe_configs_never_shows_a_secret() -> None:
    # Kafka shows PASSWORD-typed settings as null and sensitive, synonyms included.
    from coordinator.admin.config_apis import ConfigApis
    from coordinator.context import NodeInfo

    config = load_config(overrides=["sasl.jaas.config=x required user_alice=\"secret\";", "ssl.key.password=pw"])
    apis = ConfigApis(NodeInfo(1, "h", 9092, "c"), config, None)  # type: ignore[arg-type]
    result = apis._broker("1", {"sasl.jaas.config", "ssl.key.password", "ssl.keystore.key", "ssl.client.auth"},
                          synonyms=True, docs=False)
    entries = {e.name: e for e in result.configs}
    for key in ("sasl.jaas.config", "ssl.key.password", "ssl.keystore.key"):
        assert entries[key].value is None and entries[key].is_sensitive, key
        assert all(s.value is None for s in entries[key].synonyms), key
    assert entries["ssl.client.auth"].value == "none" and not entries["ssl.client.auth"].is_sensitive
