"""The SCRAM client the nodes and the admin commands share: RFC 7677's example, and the server
answers it must refuse."""

from __future__ import annotations

import pytest

from coordinator.security.sasl.scram_client import ScramClient, ScramClientError

NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"


def test_rfc7677_example() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    assert client.client_first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.client_final(SERVER_FIRST) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ScramClientError, match="signature"):
        client.verify(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_names_are_escaped() -> None:
    assert ScramClient("SCRAM-SHA-512", "a,b=c", "pw", nonce="n").client_first() == b"n,,n=a=2Cb=3Dc,r=n"


@pytest.mark.parametrize("server_first, message", [
    (b"r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),  # not extended
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=100000000", "iterations"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000", "iterations"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,i=4096", "malformed"),
    (b"garbage", "malformed"),
])
def test_refuses_what_rfc5802_and_kafka_do_not_allow(server_first: bytes, message: str) -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    with pytest.raises(ScramClientError, match=message):
        client.client_final(server_first)
    with pytest.raises(ScramClientError):
        client.verify(b"v=")  # nothing to verify before client_final
