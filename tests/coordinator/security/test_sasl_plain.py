"""SASL/PLAIN (RFC 4616) with Kafka's checks and messages, and the JAAS config it takes its users from."""

from __future__ import annotations

import pytest

from coordinator.security.sasl.errors import AuthenticationFailed
from coordinator.security.sasl.jaas import JaasError, parse_jaas_config, plain_users, single_login_module
from coordinator.security.sasl.plain import PlainServer

DOC_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def test_jaas_from_kafka_docs() -> None:
    module = single_login_module(DOC_JAAS)
    assert module.name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert module.flag == "required"
    assert module.options["username"] == "admin"
    assert plain_users(DOC_JAAS) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_jaas_quotes_escapes_comments_and_bare_words() -> None:
    text = ("/* broker */ org.Foo Required // the flag is case-blind\n"
            " user_a=\"p\\\"q\\\\r\\n\" user_b='single \"quoted\"' user_c=bare-word_1.$ ;")
    [module] = parse_jaas_config(text)
    assert module.flag == "required"
    assert module.options == {"user_a": 'p"q\\r\n', "user_b": 'single "quoted"', "user_c": "bare-word_1.$"}


def test_jaas_special_characters_in_user_names_and_passwords() -> None:
    users = plain_users('x.PlainLoginModule required user_a,b="p=,\\"" "user_c=d"="e";')
    assert users == {"a,b": 'p=,"', "c=d": "e"}


@pytest.mark.parametrize("text, message", [
    ("org.Foo required user_a=\"x\"", "';'"),
    ("org.Foo user_a=\"x\";", "control flag"),
    ("org.Foo mandatory;", "Invalid control flag"),
    ("org.Foo required user_a=\"x;", "unterminated"),
    ("org.Foo required user_a;", "'='"),
])
def test_jaas_errors(text: str, message: str) -> None:
    with pytest.raises(JaasError, match=message):
        parse_jaas_config(text)


def test_jaas_needs_exactly_one_module() -> None:
    with pytest.raises(JaasError, match="contains 2 login modules"):
        single_login_module("a required; b required;")


USERS = {"alice": "alice-secret", "a,b": "p"}


def _plain(message: bytes) -> PlainServer:
    server = PlainServer(USERS)
    assert server.evaluate(message) == b""
    return server


def test_plain_valid_with_and_without_authzid() -> None:
    assert _plain(b"\x00alice\x00alice-secret").username == "alice"
    assert _plain(b"alice\x00alice\x00alice-secret").complete
    assert _plain(b"\x00a,b\x00p").username == "a,b"


@pytest.mark.parametrize("message, text", [
    (b"alice\x00alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\x00alice\x00alice-secret\x00x", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\x00a\x00b\x00c\x00d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\x00\x00alice-secret", "Authentication failed: username not specified"),
    (b"\x00alice\x00", "Authentication failed: password not specified"),
    (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
    (b"\x00mallory\x00alice-secret", "Authentication failed: Invalid username or password"),
    (b"bob\x00alice\x00alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
])
def test_plain_failures_in_kafka_order(message: bytes, text: str) -> None:
    server = PlainServer(USERS)
    with pytest.raises(AuthenticationFailed) as e:
        server.evaluate(message)
    assert str(e.value) == text
    assert not server.complete
