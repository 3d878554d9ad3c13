"""A real ``groupcoord serve`` process against bad bytes on raw sockets.

For each kind of bad input the server must close only the offending connection, send nothing for
the bad frame, keep serving a connection that was opened before it, stay alive, and log one line
naming the peer (``ip:port`` of the bad socket) and the reason. Also: ApiVersions above our
maximum is answered in the v0 format (KIP-511), and pipelined requests come back in order.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kafka.protocol.admin import ListGroupsResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)

from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from tests.conftest import ServerProcess
from tests.protocol.test_connection import frame, request_frame, request_header, tagged_section
from tests.protocol.test_request_codec import api_versions_v3_body, list_groups_v4_body
from tests.protocol.test_roundtrip import reencode

CLOSE_TIMEOUT = 5.0
LOG_TIMEOUT = 5.0

# --------------------------------------------------------------------------------------------
# Socket helpers
# --------------------------------------------------------------------------------------------


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=CLOSE_TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def peer_of(sock: socket.socket) -> str:
    """How the server sees this client: ``ip:port``."""
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One response frame: (correlation id, everything after it)."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    assert 4 <= size < 10 * 1024 * 1024, size
    payload = recv_exact(sock, size)
    return struct.unpack_from(">i", payload, 0)[0], payload[4:]


def api_versions_round_trip(sock: socket.socket, correlation_id: int, version: int = 0) -> Any:
    """Send ApiVersions and decode its answer (header v0 at every version)."""
    if version >= 3:
        request = ApiVersionsRequest[version](client_software_name="bad-input-test",
                                              client_software_version="1.0")
    else:
        request = ApiVersionsRequest[version]()
    sock.sendall(request_frame(request, version, correlation_id, "good-client"))
    got_id, body = read_response(sock)
    assert got_id == correlation_id
    response = ApiVersionsResponse.decode(body, version=version)
    assert response.error_code == 0
    keys = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
    assert keys[ApiKey.API_VERSIONS] == SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
    return response


def expect_closed_without_response(sock: socket.socket, timeout: float = CLOSE_TIMEOUT) -> None:
    """The server closes the socket (EOF or reset) and sends no byte before doing so."""
    sock.settimeout(timeout)
    received = b""
    deadline = time.monotonic() + timeout
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            break
        except TimeoutError:
            pytest.fail(f"server did not close the connection within {timeout}s")
        if not chunk:
            break
        received += chunk
        if time.monotonic() > deadline:
            pytest.fail("server kept the connection open")
    assert received == b"", f"server answered the bad frame with {received[:64]!r}"


def send_tolerant(sock: socket.socket, data: bytes) -> None:
    """Send, ignoring a reset: the server may have closed us before we finish."""
    try:
        sock.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass


def log_lines_naming(server: ServerProcess, peer: str) -> list[str]:
    pattern = re.compile(re.escape(peer) + r"(?!\d)")
    return [line for line in server.log_text().splitlines() if pattern.search(line)]


def wait_for_log_line(server: ServerProcess, peer: str, reason: re.Pattern[str]) -> list[str]:
    deadline = time.monotonic() + LOG_TIMEOUT
    while True:
        lines = [line for line in log_lines_naming(server, peer) if reason.search(line)]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


# --------------------------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------------------------


@dataclass
class BadInput:
    name: str
    send: Callable[[socket.socket], None]
    #: what the log line must say about the reason (regex, case-insensitive)
    reason: str


def _send(data: bytes) -> Callable[[socket.socket], None]:
    return lambda sock: send_tolerant(sock, data)


def _huge_prefix(sock: socket.socket) -> None:
    send_tolerant(sock, struct.pack(">i", 2**31 - 1))
    # keep streaming a little: a server that believed the prefix would start buffering it
    for _ in range(16):
        send_tolerant(sock, b"\x00" * 65536)


def _truncated_then_close(sock: socket.socket) -> None:
    whole = request_frame(ApiVersionsRequest[3](client_software_name="x", client_software_version="1"),
                          3, 1, "truncating-client")
    send_tolerant(sock, whole[:-5])
    time.sleep(0.2)
    sock.shutdown(socket.SHUT_WR)  # the client closes its side mid-frame


BAD_INPUTS = [
    BadInput("garbage-http", _send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
             r"1195725856"),  # b"GET " read as a size prefix
    BadInput("garbage-bytes-in-a-frame", _send(frame(b"\xff" * 12 + b"\x13\x37" * 8)),
             r"unknown api key -1"),
    BadInput("negative-size", _send(struct.pack(">i", -5) + b"\x00" * 16), r"-5\b"),
    BadInput("huge-size", _huge_prefix, r"2147483647"),
    BadInput("truncated-then-close", _truncated_then_close,
             r"truncat|incomplete|partial|mid[- ]|unfinished|eof|closed"),
    BadInput("unknown-api-key",
             _send(frame(request_header(12345, 0, 1, "bad", flexible=False) + b"\x00" * 4)),
             r"unknown api key 12345|12345"),
    BadInput("version-out-of-range",
             _send(frame(request_header(ApiKey.METADATA, 99, 1, "bad", flexible=False) + b"\x00" * 4)),
             r"\b99\b"),
    BadInput("malformed-header-client-id-length",
             _send(frame(struct.pack(">hhih", 18, 0, 1, 400) + b"abc")),
             r"client.?id"),
    BadInput("malformed-header-invalid-utf8",
             _send(frame(struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe")),
             r"utf|unicode|malformed"),
    BadInput("malformed-header-truncated", _send(frame(b"\x00\x12\x00")), r"truncated|header"),
    # Kafka 4.4's decoder limits: an array of more than 1,000,000 elements (here whole: a 1 MB
    # ListGroups v4 whose states filter holds 1,000,001 empty strings; and the count alone), more
    # than 10,000 tagged fields in a body or in the request header.
    BadInput("array-over-a-million-elements",
             _send(frame(request_header(ApiKey.LIST_GROUPS, 4, 1, "bad", flexible=True)
                         + list_groups_v4_body(1_000_001))),
             r"array of 1000001 elements, more than the 1000000"),
    BadInput("array-count-over-a-million-without-elements",
             _send(frame(request_header(ApiKey.LIST_GROUPS, 4, 1, "bad", flexible=True)
                         + list_groups_v4_body(1_000_001, elements=0))),
             r"array of 1000001 elements, more than the 1000000"),
    BadInput("body-tagged-fields-over-ten-thousand",
             _send(frame(request_header(ApiKey.API_VERSIONS, 3, 1, "bad", flexible=True)
                         + api_versions_v3_body(10_001))),
             r"10001 tagged fields, more than the 10000"),
    BadInput("header-tagged-fields-over-ten-thousand",
             _send(frame(request_header(ApiKey.API_VERSIONS, 3, 1, "bad", flexible=True,
                                        header_tags=tagged_section([(100 + i, b"") for i in range(10_001)]))
                         + api_versions_v3_body(0))),
             r"10001 tagged fields, more than the 10000"),
]


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=[b.name for b in BAD_INPUTS])
def test_bad_input_closes_only_that_connection(server: ServerProcess, bad: BadInput) -> None:
    good = connect(server)
    api_versions_round_trip(good, 1)

    victim = connect(server)
    peer = peer_of(victim)
    rss_before = rss_bytes(server.proc.pid)  # type: ignore[union-attr]
    bad.send(victim)
    expect_closed_without_response(victim)
    victim.close()

    if bad.name == "huge-size":
        claimed = 2**31 - 1
        rss_after = rss_bytes(server.proc.pid)  # type: ignore[union-attr]
        assert rss_after < 256 * 1024 * 1024, f"server RSS {rss_after} after a {claimed}-byte claim"
        assert rss_after - rss_before < 64 * 1024 * 1024, (rss_before, rss_after)

    # the connection opened before the bad one is still served
    api_versions_round_trip(good, 2)
    api_versions_round_trip(good, 3, version=3)
    good.close()
    assert server.alive()

    lines = wait_for_log_line(server, peer, re.compile(bad.reason, re.IGNORECASE))
    assert len(lines) == 1, (
        f"expected one log line naming {peer} and matching /{bad.reason}/, got {lines}\n"
        f"lines naming the peer: {log_lines_naming(server, peer)}"
    )


def test_many_bad_connections_do_not_hurt_the_server(server: ServerProcess) -> None:
    good = connect(server)
    for i, bad in enumerate(BAD_INPUTS * 3):
        victim = connect(server)
        bad.send(victim)
        expect_closed_without_response(victim)
        victim.close()
        api_versions_round_trip(good, 100 + i)
    assert server.alive()
    good.close()


def test_responses_before_a_violation_are_delivered(server: ServerProcess) -> None:
    """Good requests pipelined ahead of a bad frame still get their answers, in order.

    Kafka reads one request at a time per connection, so it has answered the good requests
    before it reads (and refuses) the bad frame; only the bad frame goes unanswered.
    """
    sock = connect(server)
    good = b"".join(request_frame(ApiVersionsRequest[0](), 0, cid, "early") for cid in (1, 2, 3))
    bad = frame(request_header(12345, 0, 4, "early", flexible=False))
    sock.sendall(good + bad)
    ids = []
    sock.settimeout(CLOSE_TIMEOUT)
    try:
        for _ in range(3):
            correlation_id, body = read_response(sock)
            ApiVersionsResponse.decode(body, version=0)
            ids.append(correlation_id)
    except (ConnectionError, OSError) as exc:
        pytest.fail(f"connection closed after {ids} of [1, 2, 3]: {exc!r}")
    assert ids == [1, 2, 3]
    expect_closed_without_response(sock)
    sock.close()
    assert server.alive()


def test_requests_at_kafkas_decoder_limits_are_served(server: ServerProcess) -> None:
    """At exactly 1,000,000 array elements and 10,000 tagged fields a request is not refused."""
    sock = connect(server)
    sock.settimeout(60)  # a million elements take the server's decoder a while
    sock.sendall(frame(request_header(ApiKey.LIST_GROUPS, 4, 7, "at-limit", flexible=True)
                       + list_groups_v4_body(1_000_000)))
    correlation_id, body = read_response(sock)
    assert correlation_id == 7
    assert body[0] == 0  # response header v1: no tagged fields
    response = ListGroupsResponse.decode(body[1:], version=4)
    assert response.error_code == 0
    assert response.groups == []  # no group is in the state ""
    sock.sendall(frame(request_header(ApiKey.API_VERSIONS, 3, 8, "at-limit", flexible=True,
                                      header_tags=tagged_section([(100 + i, b"") for i in range(10_000)]))
                       + api_versions_v3_body(10_000)))
    correlation_id, body = read_response(sock)
    assert correlation_id == 8
    assert ApiVersionsResponse.decode(body, version=3).error_code == 0
    sock.close()
    assert server.alive()


# --------------------------------------------------------------------------------------------
# ApiVersions above our maximum (KIP-511)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flexible_header", [False, True], ids=["header-v1", "header-v2"])
def test_api_versions_above_max_gets_v0_error_response(
    server: ServerProcess, flexible_header: bool
) -> None:
    sock = connect(server)
    # A body in a format from the future; the server must not try to decode it.
    future_body = b"\x0bfuture-soft\x041.0\x00\x07\xff\xff"
    sock.sendall(frame(request_header(18, 99, 4711, "future-client", flexible=flexible_header)
                       + future_body))
    correlation_id, body = read_response(sock)
    assert correlation_id == 4711
    # v0 format: error_code int16, then the api keys array, nothing else
    assert body[:2] == b"\x00\x23"
    response = ApiVersionsResponse.decode(body, version=0)
    assert response.error_code == 35  # UNSUPPORTED_VERSION
    assert reencode(response, 0) == body
    keys = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
    assert keys, "the error response lists the supported versions"
    low, high = keys[ApiKey.API_VERSIONS]
    assert low <= 0 and high >= 4
    # Kafka lists only ApiVersions here; listing more is fine, but each range must be the table's
    for api_key, versions in keys.items():
        assert SUPPORTED_VERSIONS[ApiKey(api_key)] == versions
    # a client reading it as the version it asked for still gets v0 (error present)
    assert ApiVersionsResponse.decode(body, version=4).error_code == 35

    # the same connection goes on: the client retries with a version we speak
    response = api_versions_round_trip(sock, 4712, version=4)
    assert response.error_code == 0
    api_versions_round_trip(sock, 4713, version=0)
    sock.close()
    assert server.alive()


# --------------------------------------------------------------------------------------------
# Pipelining
# --------------------------------------------------------------------------------------------


def _pipelined_requests(count: int) -> list[tuple[int, int, int, bytes]]:
    """(api_key, version, correlation id, frame) for a mix of ApiVersions and Metadata."""
    requests = []
    api_versions_max = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]
    metadata_low, metadata_high = SUPPORTED_VERSIONS[ApiKey.METADATA]
    for i in range(count):
        correlation_id = 1000 + 7 * i
        if i % 2 == 0:
            version = i // 2 % (api_versions_max + 1)
            if version >= 3:
                request = ApiVersionsRequest[version](client_software_name="pipeline",
                                                      client_software_version="1.0")
            else:
                request = ApiVersionsRequest[version]()
            key = ApiKey.API_VERSIONS
        else:
            version = max(metadata_low, 1) + (i // 2) % (metadata_high - max(metadata_low, 1) + 1)
            request = MetadataRequest[version](topics=[], allow_auto_topic_creation=False)
            key = ApiKey.METADATA
        requests.append((key, version, correlation_id,
                         request_frame(request, version, correlation_id, f"pipe-{i}")))
    return requests


def test_pipelined_requests_come_back_in_order(server: ServerProcess) -> None:
    requests = _pipelined_requests(50)
    sock = connect(server)
    sock.sendall(b"".join(data for *_, data in requests))  # one write
    sock.settimeout(10)
    got = []
    for key, version, correlation_id, _ in requests:
        got_id, body = read_response(sock)
        got.append(got_id)
        assert got_id == correlation_id, f"expected {correlation_id}, got {got_id} (so far {got})"
        if key == ApiKey.API_VERSIONS:
            response = ApiVersionsResponse.decode(body, version=version)
            assert response.error_code == 0
        else:
            if MetadataRequest.flexible_version_q(version):
                assert body[0] == 0  # response header v1
                body = body[1:]
            response = MetadataResponse.decode(body, version=version)
            assert response.topics == []
            assert len(response.brokers) == 1
    assert got == sorted(got)
    assert server.alive()
    sock.close()


def test_pipelined_requests_fed_one_byte_at_a_time(server: ServerProcess) -> None:
    requests = _pipelined_requests(6)
    stream = b"".join(data for *_, data in requests)
    sock = connect(server)
    for i in range(len(stream)):
        sock.sendall(stream[i : i + 1])
    got = [read_response(sock)[0] for _ in requests]
    assert got == [cid for _, _, cid, _ in requests]
    sock.close()


# --------------------------------------------------------------------------------------------
# socket.request.max.bytes
# --------------------------------------------------------------------------------------------


def test_request_size_limit_from_configuration(server_factory: Any) -> None:
    server = server_factory({"socket.request.max.bytes": "1024"})
    good = connect(server)

    def padded(length: int, correlation_id: int) -> bytes:
        # ApiVersions v0 has an empty body: the client id sets the frame size exactly
        client_id = "c" * (length - 10)
        data = request_frame(ApiVersionsRequest[0](), 0, correlation_id, client_id)
        assert len(data) - 4 == length
        return data

    good.sendall(padded(1024, 1))  # at the limit: served
    assert read_response(good)[0] == 1

    victim = connect(server)
    peer = peer_of(victim)
    send_tolerant(victim, padded(1025, 2))
    expect_closed_without_response(victim)
    victim.close()
    assert wait_for_log_line(server, peer, re.compile(r"1025"))
    api_versions_round_trip(good, 3)
    good.close()


def test_stalled_partial_frame_is_closed_when_idle(server_factory: Any) -> None:
    """Half a frame and then silence (slowloris) does not hold a connection forever."""
    server = server_factory({"connections.max.idle.ms": "1000"})
    victim = connect(server)
    peer = peer_of(victim)
    whole = request_frame(ApiVersionsRequest[0](), 0, 1, "staller")
    victim.sendall(whole[: len(whole) // 2])
    expect_closed_without_response(victim, timeout=5.0)
    victim.close()
    assert wait_for_log_line(server, peer, re.compile(r"idle"))
    assert server.alive()
