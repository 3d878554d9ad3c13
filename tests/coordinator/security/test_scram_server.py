"""The SCRAM server against RFC 7677's vector, the SHA-512 values of reference/security.md §4.4, and
scramp's client as an independent oracle; Kafka's rules for names, nonces, iterations and failures."""

from __future__ import annotations

import base64

import pytest
from scramp import ScramClient, ScramException

from coordinator.security.sasl.errors import AuthenticationFailed, SaslFailure
from coordinator.security.sasl.scram import ScramServer, escape_saslname, fake_credential, unescape_saslname
from coordinator.security.sasl.scram_formatter import (
    ScramCredential,
    credential_from_string,
    credential_to_string,
    make_credential,
)

C_NONCE = "rOprNGfwEbeRWgbNEkqO"
S_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = f"n,,n=user,r={C_NONCE}".encode()


def b64(text: str) -> bytes:
    return base64.b64decode(text)


VECTORS = {
    "SCRAM-SHA-256": dict(
        stored_key="WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=",
        server_key="wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=",
        proof="dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        signature="6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
    "SCRAM-SHA-512": dict(
        stored_key="6AAub3065EYRmyFpM2RNwqK+eGnrkYuEWbXn19LsEmBqzu8QaCXNc1FwpnX9NhH2hK/60dzj9DoO5DvVkOHbvg==",
        server_key="jZHbYjC1aHh0/hKbxyBuGFjDrgjgKTT1esA7awWiKcRZ0o/0b1yWEebBeSVkkCFewf91nLDfKF24mvD5nmE6rA==",
        proof="gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ==",
        signature="ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw=="),
}


@pytest.mark.parametrize("mechanism", sorted(VECTORS))
def test_credential_derivation_matches_vectors(mechanism: str) -> None:
    v = VECTORS[mechanism]
    credential = make_credential(mechanism, "pencil", 4096, SALT)
    assert credential.stored_key == b64(v["stored_key"])
    assert credential.server_key == b64(v["server_key"])
    assert credential_from_string(credential_to_string(credential)) == credential
    assert credential_to_string(credential).startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert credential_to_string(credential).endswith(",iterations=4096")


def _server(mechanism: str, users: dict[str, ScramCredential], nonce: str | None = S_NONCE) -> ScramServer:
    return ScramServer(mechanism, lambda name, mech: users.get(name) if mech == mechanism else None,
                       server_nonce=nonce)


@pytest.mark.parametrize("mechanism", sorted(VECTORS))
def test_exchange_reproduces_vectors(mechanism: str) -> None:
    v = VECTORS[mechanism]
    server = _server(mechanism, {"user": make_credential(mechanism, "pencil", 4096, SALT)})
    nonce = C_NONCE + S_NONCE
    assert server.evaluate(CLIENT_FIRST) == f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    final = server.evaluate(f"c=biws,r={nonce},p={v['proof']}".encode())
    assert final == f"v={v['signature']}".encode()
    assert server.complete and server.username == "user"


def _scramp_exchange(server: ScramServer, client: ScramClient) -> None:
    server_first = server.evaluate(client.get_client_first().encode()).decode()
    client.set_server_first(server_first)
    server_final = server.evaluate(client.get_client_final().encode()).decode()
    client.set_server_final(server_final)  # raises unless our signature is right


@pytest.mark.parametrize("mechanism", sorted(VECTORS))
@pytest.mark.parametrize("name", ["alice", "a,b", "c=d", 'q"uote', "=2C,=3D="])
def test_scramp_client_with_special_names(mechanism: str, name: str) -> None:
    server = ScramServer(mechanism, lambda n, m: make_credential(m, "s3cret ü", 4096) if n == name else None)
    _scramp_exchange(server, ScramClient([mechanism], name, "s3cret ü"))
    assert server.complete and server.username == name


def test_scramp_client_wrong_password_fails_at_client_final() -> None:
    server = ScramServer("SCRAM-SHA-512", lambda n, m: make_credential(m, "right", 4096))
    client = ScramClient(["SCRAM-SHA-512"], "alice", "wrong")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    with pytest.raises(SaslFailure, match="Invalid client credentials") as e:
        server.evaluate(client.get_client_final().encode())
    assert not isinstance(e.value, AuthenticationFailed)  # the client sees the generic message


def test_unknown_user_looks_like_a_wrong_password() -> None:
    """Same shape of server-first for a known and an unknown name, the same salt on a repeat, and a
    failure only at client-final."""
    known = make_credential("SCRAM-SHA-256", "pw", 4096)
    users = {"alice": known}
    first = _server("SCRAM-SHA-256", users).evaluate(b"n,,n=mallory,r=abc").decode()
    again = _server("SCRAM-SHA-256", users).evaluate(b"n,,n=mallory,r=abc").decode()
    assert first == again
    fake_salt = base64.b64decode(first.split(",s=")[1].split(",")[0])
    assert fake_salt == fake_credential("SCRAM-SHA-256", "mallory").salt
    assert 20 <= len(fake_salt) <= 26 and fake_salt.isalnum()  # like a generated salt (base 36)
    assert first.endswith(",i=4096")
    other = _server("SCRAM-SHA-256", users).evaluate(b"n,,n=mallory2,r=abc").decode()
    assert other.split(",s=")[1] != first.split(",s=")[1]
    # Even a client that derives keys from the fake salt cannot succeed.
    server = _server("SCRAM-SHA-256", users, nonce=None)
    client = ScramClient(["SCRAM-SHA-256"], "mallory", "anything")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    with pytest.raises(SaslFailure, match="Invalid client credentials"):
        server.evaluate(client.get_client_final().encode())


def _final(server: ScramServer, r: str, channel: str = "biws") -> bytes:
    return f"c={channel},r={r},p={VECTORS['SCRAM-SHA-256']['proof']}".encode()


def test_nonce_doubled_by_old_librdkafka_is_accepted() -> None:
    """librdkafka < 2.6.1 sends the client nonce twice in client-final; Kafka 3.8.1+ accepts an r that
    ends with the server-first nonce, and so do we. The proof then covers that r, so compute it."""
    import hashlib
    import hmac

    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, SALT)
    server = _server("SCRAM-SHA-256", {"user": credential})
    server_first = server.evaluate(CLIENT_FIRST).decode()
    r = C_NONCE + C_NONCE + S_NONCE
    without_proof = f"c=biws,r={r}"
    auth = f"n=user,r={C_NONCE},{server_first},{without_proof}".encode()
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", SALT, 4096)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    signature = hmac.digest(credential.stored_key, auth, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    assert server.evaluate(f"{without_proof},p={proof}".encode()).startswith(b"v=")


@pytest.mark.parametrize("r", [C_NONCE, C_NONCE + S_NONCE + "x", "other" + C_NONCE])
def test_foreign_nonce_is_refused(r: str) -> None:
    server = _server("SCRAM-SHA-256", {"user": make_credential("SCRAM-SHA-256", "pencil", 4096, SALT)})
    server.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslFailure, match="Invalid client nonce"):
        server.evaluate(_final(server, r))


def test_channel_binding_must_repeat_the_gs2_header() -> None:
    server = _server("SCRAM-SHA-256", {"user": make_credential("SCRAM-SHA-256", "pencil", 4096, SALT)})
    server.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslFailure, match="channel binding"):
        server.evaluate(_final(server, C_NONCE + S_NONCE, channel="eSws"))  # "y,,"


@pytest.mark.parametrize("message", [
    b"y,,n=user,r=abc",  # only gs2 flag n
    b"p=tls-unique,,n=user,r=abc",
    b"n,,n=us=er,r=abc",  # = must be escaped
    b"n,,n=user",  # no nonce
    b"n,,n=,r=abc",  # empty name
    "n,,n=üser,r=abc".encode(),  # Kafka's saslname grammar is 7-bit
    b"n,,n=user,r=a,b",  # bad extension
    b"\xff\xfe",
])
def test_malformed_client_first(message: bytes) -> None:
    server = _server("SCRAM-SHA-256", {"user": make_credential("SCRAM-SHA-256", "pencil", 4096, SALT)})
    with pytest.raises(SaslFailure) as e:
        server.evaluate(message)
    assert not isinstance(e.value, AuthenticationFailed)


def test_reserved_m_and_extensions_are_tolerated() -> None:
    server = _server("SCRAM-SHA-256", {"user": make_credential("SCRAM-SHA-256", "pencil", 4096, SALT)})
    assert server.evaluate(b"n,,m=x,n=user,r=abc,tokenauth=true,zz=1").startswith(b"r=abc")


def test_authzid_must_equal_the_user() -> None:
    users = {"a,b": make_credential("SCRAM-SHA-256", "pencil", 4096, SALT)}
    assert _server("SCRAM-SHA-256", users).evaluate(b"n,a=a=2Cb,n=a=2Cb,r=abc").startswith(b"r=abc")
    for name in (b"a=2Cb", b"nobody"):  # the same answer whether the user exists or not
        with pytest.raises(AuthenticationFailed, match="authorization id that is different"):
            _server("SCRAM-SHA-256", users).evaluate(b"n,a=root," + b"n=" + name + b",r=abc")


@pytest.mark.parametrize("iterations", [4095, 16385])
def test_stored_iterations_out_of_bounds_fail(iterations: int) -> None:
    users = {"user": make_credential("SCRAM-SHA-256", "pencil", iterations, SALT)}
    with pytest.raises(SaslFailure, match="Iterations"):
        _server("SCRAM-SHA-256", users).evaluate(CLIENT_FIRST)


def test_no_step_after_completion_or_failure() -> None:
    server = _server("SCRAM-SHA-256", {})
    with pytest.raises(SaslFailure):
        server.evaluate(b"garbage")
    with pytest.raises(SaslFailure):
        server.evaluate(CLIENT_FIRST)


def test_saslname_escaping_round_trip() -> None:
    for name in ("a,b", "c=d", "=2C", ",=,"):
        assert unescape_saslname(escape_saslname(name)) == name
    assert unescape_saslname("=3D2C") == "=2C"


def test_scramp_rejects_a_bad_server_signature() -> None:
    """The oracle really checks us: a tampered server-final fails in scramp."""
    server = ScramServer("SCRAM-SHA-256", lambda n, m: make_credential(m, "pw", 4096))
    client = ScramClient(["SCRAM-SHA-256"], "alice", "pw")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    final = server.evaluate(client.get_client_final().encode()).decode()
    tampered = "v=" + base64.b64encode(bytes(32)).decode()
    assert final != tampered
    with pytest.raises(ScramException):
        client.set_server_final(tampered)
