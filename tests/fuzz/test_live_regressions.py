"""Frames the live-server fuzzer (``bench/live_fuzz.py``, issue 22) found making the server fail,
each kept exactly as it was sent and replayed against a real ``groupcoord serve``.

For each: the server answers it as Kafka would (here: a request Kafka's readers refuse closes the
connection without a response), stays up and goes on serving a connection opened before, and
logs one line naming the peer (no "handler failed", no traceback).
"""

from __future__ import annotations

import re
import socket
import struct
import time
from dataclasses import dataclass

import pytest

from tests.conftest import ServerProcess

TIMEOUT = 10.0


@dataclass
class Case:
    name: str
    frame_hex: str  # the whole frame, size prefix included
    #: "closed": closed without a byte of response; otherwise the answer's correlation id
    expect: str | int
    #: what the one log line naming the peer must say (regex, case-insensitive)
    reason: str
    finding: str


CASES = [
    Case(
        "list-groups-v5-null-in-types-filter",
        # ListGroups v5 (flexible), client "probe-js": states_filter ["3vp5Q", "J2Pnj7gDjztV"],
        # types_filter [null] (compact length 0 for the one element)
        "0000002a0010000500000847000870726f62652d6a7300030633767035510d4a32506e6a3767446a7a7456020000",
        "closed",
        r"types_filter.*null|null.*types_filter",
        "a null element in a []string (ListGroups types_filter) passed the nullability check, which "
        "looked at arrays but not their elements, and the handler crashed on None.lower() "
        "(AttributeError, 'handler failed' with a traceback)",
    ),
    Case(
        "list-groups-v4-null-in-states-filter",
        # ListGroups v4, client "consumer-st-685a7f7f-inst-a": states_filter ["R\x0e\x00", null],
        # then bytes spliced in from another frame
        "000000530010000400000b72001b636f6e73756d65722d73742d36383561376637662d696e73742d6100030452"
        "0e000000000000000000000000000000000f9eee763f94fa6d697865642d646635383330356100010000",
        "closed",
        r"states_filter.*null|null.*states_filter",
        "the same for states_filter (the handler crashed on None.lower() one line earlier)",
    ),
]


def _connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(TIMEOUT)
    return sock


def _read_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def _api_versions(sock: socket.socket, correlation_id: int) -> None:
    client = b"regression-good"
    payload = struct.pack(">hhih", 18, 0, correlation_id, len(client)) + client
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    got_id, error = struct.unpack_from(">ih", _read_exact(sock, size))
    assert (got_id, error) == (correlation_id, 0)


def _find_coordinator(sock: socket.socket, correlation_id: int) -> None:
    """FindCoordinator v1 until it answers NONE: the offsets topic exists and its partitions are
    loaded, as in the fuzz run (the handlers that failed went through them)."""
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    deadline = time.monotonic() + TIMEOUT
    while True:
        client = b"regression-good"
        payload = (struct.pack(">hhih", 10, 1, correlation_id, len(client)) + client
                   + FindCoordinatorRequest[1](key="regression-group", key_type=0).encode(version=1))
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _read_exact(sock, 4))
        body = _read_exact(sock, size)
        response = FindCoordinatorResponse.decode(body[4:], version=1)
        if response.error_code == 0:
            return
        assert time.monotonic() < deadline, f"no coordinator: error {response.error_code}"
        time.sleep(0.1)


def _read_until_closed(sock: socket.socket) -> bytes:
    received = b""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return received
        except TimeoutError:
            break
        if not chunk:
            return received
        received += chunk
    pytest.fail(f"the server kept the connection open (received {received[:64]!r})")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fuzzer_finding(server: ServerProcess, case: Case) -> None:
    good = _connect(server)
    _api_versions(good, 1)
    _find_coordinator(good, 2)

    victim = _connect(server)
    host, port = victim.getsockname()[:2]
    peer = f"{host}:{port}"
    victim.sendall(bytes.fromhex(case.frame_hex))
    if case.expect == "closed":
        received = _read_until_closed(victim)
        assert received == b"", f"the server answered with {received[:64]!r}"
    else:
        (size,) = struct.unpack(">i", _read_exact(victim, 4))
        (got_id,) = struct.unpack_from(">i", _read_exact(victim, size))
        assert got_id == case.expect
    victim.close()

    _api_versions(good, 3)
    good.close()
    assert server.alive()

    pattern = re.compile(re.escape(peer) + r"(?!\d)")
    deadline = time.monotonic() + TIMEOUT
    while True:
        text = server.log_text()
        lines = [line for line in text.splitlines() if pattern.search(line)]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert "handler failed" not in text and "Traceback" not in text, text[-3000:]
    if case.expect == "closed":
        assert len(lines) == 1, lines
        assert re.search(case.reason, lines[0], re.IGNORECASE), lines[0]


# --- a CreatePartitions to 65,535 partitions stopped the server for over an hour -------------------
#
# Found by the long live run: a fuzzed CreatePartitions (or CreateTopics) asking for 65,535
# partitions was accepted and the new partitions' logs were made one by one on the event loop
# (each log's files are written and fsynced, ~20 ms): nothing else was served, the clients' sessions
# and requests timed out. Now a request needing more than Kafka's 10,000 records per operation fails
# with POLICY_VIOLATION as Kafka's controller answers, and large creations open their logs off the
# event loop, the request answered once they are open.


def _request(sock: socket.socket, api_key: int, version: int, correlation_id: int, request: object) -> bytes:
    from protocol.apis import is_flexible

    client = b"regression-admin"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    if is_flexible(api_key, version):
        header += b"\x00"
    payload = header + request.encode(version=version)  # type: ignore[attr-defined]
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    body = _read_exact(sock, size)
    assert struct.unpack_from(">i", body)[0] == correlation_id
    return body[5:] if is_flexible(api_key, version) else body[4:]


def _create_topic(name: str, partitions: int) -> object:
    from kafka.protocol.admin import CreateTopicsRequest

    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                               assignments=[], configs=[])
    return CreateTopicsRequest[4](topics=[topic], timeout_ms=60000, validate_only=False)


def test_too_many_partitions_in_one_request_is_a_policy_violation(server: ServerProcess) -> None:
    from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsResponse

    sock = _connect(server)
    response = CreateTopicsResponse.decode(_request(sock, 19, 4, 1, _create_topic("huge", 65535)), version=4)
    assert [(t.name, t.error_code) for t in response.topics] == [("huge", 44)]  # POLICY_VIOLATION
    assert response.topics[0].error_message == "Unable to perform excessively large batch operation."
    response = CreateTopicsResponse.decode(_request(sock, 19, 4, 2, _create_topic("small", 3)), version=4)
    assert response.topics[0].error_code == 0
    grow = CreatePartitionsRequest[1](topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name="small", count=65535, assignments=None)], timeout_ms=60000, validate_only=False)
    response = CreatePartitionsResponse.decode(_request(sock, 37, 1, 3, grow), version=1)
    assert [(r.name, r.error_code) for r in response.results] == [("small", 44)]
    sock.close()
    assert server.alive()
    assert not (server.data_dir / "huge-0").exists() and not (server.data_dir / "small-3").exists()


def test_a_large_topic_is_created_while_the_server_goes_on_serving(server: ServerProcess) -> None:
    from kafka.protocol.admin import CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse

    partitions = 1000  # 5-20 s of fsyncs on the event loop before the fix (5-20 ms a partition)
    admin = _connect(server)
    admin.settimeout(180)
    from protocol.apis import is_flexible

    client = b"regression-admin"
    request = _create_topic("large", partitions)
    payload = struct.pack(">hhih", 19, 4, 7, len(client)) + client + (b"\x00" if is_flexible(19, 4) else b"")
    payload += request.encode(version=4)  # type: ignore[attr-defined]
    admin.sendall(struct.pack(">i", len(payload)) + payload)

    # meanwhile every probe on a fresh connection is answered promptly
    slowest = 0.0
    for i in range(5):
        t0 = time.monotonic()
        probe = _connect(server)
        _api_versions(probe, 100 + i)
        probe.close()
        slowest = max(slowest, time.monotonic() - t0)
        time.sleep(0.2)
    assert slowest < 3.0, f"a probe took {slowest:.1f}s while the topic was being created"

    (size,) = struct.unpack(">i", _read_exact(admin, 4))
    body = _read_exact(admin, size)
    response = CreateTopicsResponse.decode(body[5:] if is_flexible(19, 4) else body[4:], version=4)
    assert response.topics[0].error_code == 0
    # answered once every partition is open: all directories are there
    assert all((server.data_dir / f"large-{p}").is_dir() for p in range(partitions))

    # deleting and re-creating it works (no directory shared by the old and the new topic)
    delete = DeleteTopicsRequest[4](topic_names=["large"], timeout_ms=60000)
    response = DeleteTopicsResponse.decode(_request(admin, 20, 4, 8, delete), version=4)
    assert response.responses[0].error_code == 0
    response = CreateTopicsResponse.decode(_request(admin, 19, 4, 9, _create_topic("large", 2)), version=4)
    assert response.topics[0].error_code == 0
    admin.close()
    assert server.alive()
    text = server.log_text()
    assert "level=ERROR" not in text and "Traceback" not in text, text[-3000:]


# --- a DeleteTopics racing a produce logged "append failed" at ERROR -------------------------------
#
# Found by the long live run: a produce whose append was queued when a DeleteTopics closed the
# partition's log failed with LogClosedError, logged at ERROR as a storage failure and answered
# KAFKA_STORAGE_ERROR. It is an ordinary race: answered NOT_LEADER_OR_FOLLOWER (retriable; the
# client's metadata refresh then shows the topic gone), logged at INFO.


def test_a_produce_racing_the_deletion_of_its_topic_is_not_an_error(server: ServerProcess) -> None:
    from kafka.protocol.admin import CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse
    from kafka.protocol.producer import ProduceRequest, ProduceResponse
    from kafka.record.memory_records import MemoryRecordsBuilder

    admin = _connect(server)
    response = CreateTopicsResponse.decode(_request(admin, 19, 4, 1, _create_topic("doomed", 1)), version=4)
    assert response.topics[0].error_code == 0
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=int(time.time() * 1000), key=b"k", value=b"v" * 100, headers=[])
    builder.close()
    records = builder.buffer()
    produce = ProduceRequest[7](transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name="doomed", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(records))])])
    delete = DeleteTopicsRequest[4](topic_names=["doomed"], timeout_ms=30000)
    client = b"regression-producer"
    frames = b""
    for api_key, version, cid, request in ((0, 7, 2, produce), (20, 4, 3, delete)):
        from protocol.apis import is_flexible

        payload = (struct.pack(">hhih", api_key, version, cid, len(client)) + client
                   + (b"\x00" if is_flexible(api_key, version) else b"") + request.encode(version=version))
        frames += struct.pack(">i", len(payload)) + payload
    admin.sendall(frames)  # one segment: the deletion is handled right behind the produce
    answers = {}
    for _ in range(2):
        (size,) = struct.unpack(">i", _read_exact(admin, 4))
        body = _read_exact(admin, size)
        correlation_id = struct.unpack_from(">i", body)[0]
        answers[correlation_id] = body[5:] if correlation_id == 3 else body[4:]  # DeleteTopics v4: header v1
    produced = ProduceResponse.decode(answers[2], version=7).responses[0].partition_responses[0]
    assert produced.error_code in (0, 6), produced  # written before the deletion, or NOT_LEADER_OR_FOLLOWER
    assert DeleteTopicsResponse.decode(answers[3], version=4).responses[0].error_code == 0
    admin.close()
    assert server.alive()
    text = server.log_text()
    assert "level=ERROR" not in text and "Traceback" not in text, text[-3000:]
