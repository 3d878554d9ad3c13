"""Server lifecycle and connection handling: configuration errors, signals, limits, ordering."""

from __future__ import annotations

import asyncio
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from coordinator.server.server import KafkaServer
from protocol.apis import ApiKey
from tests.conftest import REPO, ServerProcess
from tests.wire_client import WireClient, decode_response, encode_request


def _run_cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_version_flag() -> None:
    result = _run_cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("groupcoord ")


def test_bad_value_stops_startup_with_exit_2(tmp_path: Path) -> None:
    result = _run_cli("serve", "--data-dir", str(tmp_path), "--set", "offsets.topic.num.partitions=zero")
    assert result.returncode == 2
    assert "offsets.topic.num.partitions" in result.stderr and "'zero'" in result.stderr
    assert "integer 1..10000" in result.stderr
    assert not (tmp_path / "meta.properties").exists()


def test_unknown_key_and_bad_config_file(tmp_path: Path) -> None:
    result = _run_cli("serve", "--data-dir", str(tmp_path), "--set", "group.max.sise=3")
    assert result.returncode == 2 and "unknown configuration key 'group.max.sise'" in result.stderr
    conf = tmp_path / "server.properties"
    conf.write_text("# comment\nnum.partitions=3\nthis line is wrong\n")
    result = _run_cli("serve", "--config", str(conf))
    assert result.returncode == 2 and f"{conf}:3" in result.stderr
    conf.write_text("auto.create.topics.enable=maybe\n")
    result = _run_cli("serve", "--config", str(conf))
    assert result.returncode == 2 and "auto.create.topics.enable" in result.stderr and str(conf) in result.stderr


def test_config_file_values_apply(tmp_path: Path) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text("num.partitions = 4\nnode.id: 7\n")
    server = ServerProcess(tmp_path / "data")
    server.settings = {}
    server.start_args = ["--config", str(conf)]  # type: ignore[attr-defined]
    args = [sys.executable, "-m", "coordinator", "serve", "--config", str(conf), "--data-dir", str(server.data_dir),
            "--listen", server.bootstrap]
    proc = subprocess.Popen(args, cwd=REPO, stderr=subprocess.PIPE)
    try:
        _wait_listening(server.host, server.port)
        with WireClient(server.host, server.port) as c:
            req = MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name="four")])
            resp = c.request(ApiKey.METADATA, 9, req)
            assert resp.brokers[0].node_id == 7 and len(resp.topics[0].partitions) == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def _wait_listening(host: str, port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("server did not start")


def test_sigterm_is_graceful_and_exits_0(server) -> None:
    assert server.stop() == 0
    assert "msg=stopped" in server.log_text()


def test_second_signal_exits_at_once(server) -> None:
    # A connection with a request in flight keeps the graceful shutdown waiting; a parked request
    # is simulated by a half-sent frame, which keeps the connection busy reading.
    with WireClient(server.host, server.port):
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(10)
    assert code in (0, 1)
    assert "shutting down" in server.log_text()


def test_data_dir_is_locked_and_cluster_id_persists(server) -> None:
    second = _run_cli("serve", "--data-dir", str(server.data_dir), "--listen", "127.0.0.1:0")
    assert second.returncode == 2 and "in use by another groupcoord process" in second.stderr
    meta = (server.data_dir / "meta.properties").read_text()
    cluster_id = [l.split("=", 1)[1] for l in meta.splitlines() if l.startswith("cluster.id=")][0]
    assert len(cluster_id) == 22
    server.restart()
    assert f"cluster.id={cluster_id}" in (server.data_dir / "meta.properties").read_text()
    assert f"cluster_id={cluster_id}" in server.log_text().splitlines()[-1] or cluster_id in server.log_text()


def test_corrupt_registry_names_the_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "topics.json").write_text("{not json")
    result = _run_cli("serve", "--data-dir", str(data), "--listen", "127.0.0.1:0")
    assert result.returncode == 2 and str(data / "topics.json") in result.stderr


def test_max_connections(server_factory) -> None:
    server = server_factory({"max.connections": "2"})
    time.sleep(0.3)  # let the server see the fixture's readiness probe disconnect
    a = WireClient(server.host, server.port)
    b = WireClient(server.host, server.port)
    av = ApiVersionsRequest(version=0)
    assert a.request(ApiKey.API_VERSIONS, 0, av).error_code == 0
    assert b.request(ApiKey.API_VERSIONS, 0, av).error_code == 0
    c = socket.create_connection((server.host, server.port), timeout=5)
    assert c.recv(1) == b""  # refused after accept
    assert "max.connections (2) reached" in server.log_text()
    a.close()
    time.sleep(0.3)
    with WireClient(server.host, server.port) as d:
        assert d.request(ApiKey.API_VERSIONS, 0, av).error_code == 0
    b.close()
    c.close()


def test_idle_connections_are_closed(server_factory) -> None:
    server = server_factory({"connections.max.idle.ms": "1000"})
    sock = socket.create_connection((server.host, server.port), timeout=5)
    start = time.monotonic()
    assert sock.recv(1) == b""
    assert 0.9 < time.monotonic() - start < 3.0
    assert "connections.max.idle.ms" in server.log_text()


@pytest.mark.asyncio
async def test_responses_leave_in_request_order_even_when_a_later_one_finishes_first() -> None:
    release = asyncio.Event()

    async def parked(ctx, request):  # type: ignore[no-untyped-def]
        await release.wait()
        from kafka.protocol.metadata import MetadataResponse
        return MetadataResponse(version=ctx.api_version, brokers=[], topics=[], cluster_id="slow", controller_id=1)

    def fast(ctx, request):  # type: ignore[no-untyped-def]
        from kafka.protocol.metadata import ApiVersionsResponse
        return ApiVersionsResponse(version=ctx.api_version, error_code=0, api_keys=[])

    server = KafkaServer({ApiKey.METADATA: parked, ApiKey.API_VERSIONS: fast},
                         max_request_size=1 << 20, max_connections=10, idle_timeout_ms=60000)
    host, port = await server.bind("127.0.0.1", 0)
    await server.start()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(encode_request(ApiKey.METADATA, 9, 1, MetadataRequest(version=9, topics=[]))
                 + encode_request(ApiKey.API_VERSIONS, 0, 2, ApiVersionsRequest(version=0)))
    await writer.drain()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(reader.readexactly(4), 0.3)  # ApiVersions is done but must wait
    release.set()
    order = []
    for api, version in ((ApiKey.METADATA, 9), (ApiKey.API_VERSIONS, 0)):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        cid, resp = decode_response(api, version, await reader.readexactly(size))
        order.append(cid)
    assert order == [1, 2]
    writer.close()
    await server.shutdown(grace=1)


@pytest.mark.asyncio
async def test_shutdown_answers_requests_in_flight_and_reads_no_more() -> None:
    """A client that always has a request in flight (a producer stream) must not hold a graceful
    shutdown open until the grace runs out: requests read before it are answered, later ones are
    not read. (A Java producer once kept a shutdown busy for 6.7 s, appending all the while.)"""
    handled: list[int] = []

    async def slow(ctx, request):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.05)
        handled.append(ctx.correlation_id)
        from kafka.protocol.metadata import MetadataResponse
        return MetadataResponse(version=ctx.api_version, brokers=[], topics=[], cluster_id="c", controller_id=1)

    server = KafkaServer({ApiKey.METADATA: slow}, max_request_size=1 << 20, max_connections=10,
                         idle_timeout_ms=60000)
    host, port = await server.bind("127.0.0.1", 0)
    await server.start()
    reader, writer = await asyncio.open_connection(host, port)
    answered: list[int] = []

    async def stream() -> None:  # two requests in flight at all times, as long as the server reads
        cid = 0
        for _ in range(2):
            cid += 1
            writer.write(encode_request(ApiKey.METADATA, 9, cid, MetadataRequest(version=9, topics=[])))
        while True:
            try:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                answered.append(decode_response(ApiKey.METADATA, 9, await reader.readexactly(size))[0])
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            cid += 1
            writer.write(encode_request(ApiKey.METADATA, 9, cid, MetadataRequest(version=9, topics=[])))

    client = asyncio.ensure_future(stream())
    await asyncio.sleep(0.3)
    assert len(answered) >= 4
    started = time.monotonic()
    await server.shutdown(grace=10)
    took = time.monotonic() - started
    await asyncio.wait_for(client, 5)  # the server closed the connection
    assert took < 2, f"shutdown took {took:.2f} s with a client streaming requests"
    # everything that was handled was answered, in order, and nothing was left half-done
    assert answered == handled == list(range(1, len(answered) + 1))
    writer.close()


@pytest.mark.asyncio
async def test_encoded_responses_send_file_ranges_in_order(tmp_path: Path) -> None:
    from protocol.fetch_response import RecordsRef
    from protocol.responses import EncodedResponse, FileRange

    payload = bytes(range(256)) * 4096  # 1 MiB
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 10 + payload)
    released = []

    def with_file(ctx, request):  # type: ignore[no-untyped-def]
        f = open(path, "rb")
        rng = FileRange(f, 10, len(payload), release=lambda: (released.append(1), f.close()))
        body = struct.pack(">i", ctx.correlation_id)
        return EncodedResponse([struct.pack(">i", len(body) + len(payload)), body, RecordsRef(len(payload), rng)])

    def fast(ctx, request):  # type: ignore[no-untyped-def]
        from kafka.protocol.metadata import ApiVersionsResponse
        return ApiVersionsResponse(version=ctx.api_version, error_code=0, api_keys=[])

    server = KafkaServer({ApiKey.METADATA: with_file, ApiKey.API_VERSIONS: fast},
                         max_request_size=1 << 20, max_connections=10, idle_timeout_ms=60000)
    host, port = await server.bind("127.0.0.1", 0)
    await server.start()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(encode_request(ApiKey.API_VERSIONS, 0, 1, ApiVersionsRequest(version=0))
                 + encode_request(ApiKey.METADATA, 9, 2, MetadataRequest(version=9, topics=[]))
                 + encode_request(ApiKey.API_VERSIONS, 0, 3, ApiVersionsRequest(version=0)))
    await writer.drain()
    ids = []
    for _ in range(3):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        frame = await reader.readexactly(size)
        cid = struct.unpack(">i", frame[:4])[0]
        ids.append(cid)
        if cid == 2:
            assert frame[4:] == payload
    assert ids == [1, 2, 3] and released == [1]
    writer.close()
    await server.shutdown(grace=1)


@pytest.mark.parametrize("chosen, expected", [(None, "asyncio"), ("asyncio", "asyncio")])
def test_the_event_loop_is_asyncio_by_default(server_factory, monkeypatch: pytest.MonkeyPatch,
                                                             chosen: str | None, expected: str) -> None:
    if chosen is None:
        monkeypatch.delenv("GROUPCOORD_EVENT_LOOP", raising=False)
    else:
        monkeypatch.setenv("GROUPCOORD_EVENT_LOOP", chosen)
    server = server_factory()
    deadline = time.monotonic() + 10
    while "msg=listening" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f"event_loop={expected} " in server.log_text()
    with WireClient(server.host, server.port) as c:  # and it serves
        assert c.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest(version=0)).error_code == 0
    assert server.stop() == 0
