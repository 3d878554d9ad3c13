"""A real node (``groupcoord serve --set http.listen=…``), real consumers (kafka-python) committing,
and /metrics scraped and parsed as Prometheus parses it: kafka-lag-exporter's names, labels and
values (the lag after producing N more records), Burrow's status, Kafka's coordinator metrics, the
request and fsync histograms; health, readiness, and bad HTTP requests that leave Kafka serving."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO, ServerProcess, free_port

Samples = dict[str, list[tuple[dict[str, str], float]]]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, int]]:
    http_port = free_port()
    server = ServerProcess(tmp_path_factory.mktemp("http") / "data",
                           {"http.listen": f"127.0.0.1:{http_port}", "lag.sample.interval.ms": "100",
                            "num.partitions": "2", "group.initial.rebalance.delay.ms": "0",
                            "lag.cluster.name": "test-cluster"})
    server.start()
    try:
        yield server, http_port
    finally:
        assert server.stop() == 0, server.log_text()


def _get(port: int, path: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, dict(reply.headers), reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def _scrape(port: int) -> Samples:
    status, headers, body = _get(port, "/metrics")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples: Samples = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def _find(samples: Samples, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
    return [(l, v) for l, v in samples.get(name, []) if all(l.get(k) == w for k, w in labels.items())]


def _until(port: int, check: Callable[[Samples], bool], timeout: float = 20.0) -> Samples:
    """Scrape until ``check`` holds (the lag monitor samples every 100 ms)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = _scrape(port)
        if check(samples):
            return samples
        assert time.monotonic() < deadline, "metrics never reached the expected state"
        time.sleep(0.1)


def _produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(count):
            producer.send(topic, value=b"v%d" % i, partition=partition)
        producer.flush(10)
    finally:
        producer.close()


def test_lag_metrics_of_committing_consumers(node: tuple[ServerProcess, int]) -> None:
    server, port = node
    _produce(server.bootstrap, "orders", 0, 5)
    _produce(server.bootstrap, "orders", 1, 3)
    consumer = KafkaConsumer("orders", bootstrap_servers=server.bootstrap, group_id="g-live",
                             client_id="live-client", enable_auto_commit=False, auto_offset_reset="earliest")
    simple = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="g-simple", enable_auto_commit=False)
    try:
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 8:
            assert time.monotonic() < deadline, "did not consume the 8 records"
            seen += sum(len(v) for v in consumer.poll(500).values())
        consumer.commit()
        simple.commit({TopicPartition("orders", 0): OffsetAndMetadata(2, "", -1)})

        def caught_up(s: Samples) -> bool:
            live = _find(s, "kafka_consumergroup_group_lag", group="g-live")
            return len(live) == 2 and all(v == 0 for _l, v in live) and \
                bool(_find(s, "kafka_consumergroup_group_lag", group="g-simple"))

        samples = _until(port, caught_up)
        labels, value = _find(samples, "kafka_consumergroup_group_offset", group="g-live", partition="0")[0]
        assert value == 5
        assert set(labels) == {"cluster_name", "group", "topic", "partition", "member_host", "consumer_id",
                               "client_id"}
        assert labels["cluster_name"] == "test-cluster" and labels["client_id"] == "live-client"
        assert labels["consumer_id"].startswith("live-client") and labels["member_host"] != "unknown"
        # A group committing without members (assign()): kafka-lag-exporter's "unknown" members.
        labels, value = _find(samples, "kafka_consumergroup_group_lag", group="g-simple")[0]
        assert (labels["member_host"], labels["consumer_id"], labels["client_id"]) == ("unknown",) * 3
        assert value == 3
        assert _find(samples, "kafka_partition_latest_offset", topic="orders", partition="0")[0][1] == 5
        assert _find(samples, "kafka_partition_earliest_offset", topic="orders", partition="0")[0][1] == 0

        # N more records: the lag is N, its sums follow, the time lag is a number of seconds.
        _produce(server.bootstrap, "orders", 0, 7)
        samples = _until(port, lambda s: _find(s, "kafka_consumergroup_group_lag", group="g-live",
                                               partition="0")[0][1] == 7)
        assert _find(samples, "kafka_consumergroup_group_sum_lag", group="g-live")[0][1] == 7
        assert _find(samples, "kafka_consumergroup_group_max_lag", group="g-live")[0][1] == 7
        assert _find(samples, "kafka_consumergroup_group_topic_sum_lag", group="g-live", topic="orders")[0][1] == 7
        assert _find(samples, "kafka_partition_latest_offset", topic="orders", partition="0")[0][1] == 12
        assert _find(samples, "kafka_consumergroup_group_lag_seconds", group="g-live", partition="1")[0][1] == 0
        assert _find(samples, "burrow_kafka_consumer_lag_total", cluster="test-cluster",
                     consumer_group="g-live")[0][1] == 7
        assert _find(samples, "burrow_kafka_consumer_status", consumer_group="g-live")[0][1] in (1, 2)
        poll_ms = _find(samples, "kafka_consumergroup_poll_time_ms", cluster_name="test-cluster")[0][1]
        assert 0 <= poll_ms < 10_000
        # Burrow's per-partition families, and kafka-lag-exporter's health check, which asks for one family.
        burrow = dict(cluster="test-cluster", consumer_group="g-live", topic="orders", partition="0")
        assert _find(samples, "burrow_kafka_consumer_partition_lag", **burrow)[0][1] == 7
        assert _find(samples, "burrow_kafka_consumer_current_offset", **burrow)[0][1] == 5
        assert _find(samples, "burrow_kafka_topic_partition_offset", cluster="test-cluster", topic="orders",
                     partition="0")[0][1] == 12
        status, _headers, body = _get(port, "/metrics?name[]=kafka_consumergroup_poll_time_ms")
        assert status == 200
        assert [f.name for f in text_string_to_metric_families(body)] == ["kafka_consumergroup_poll_time_ms"]
    finally:
        consumer.close()
        simple.close()

    prefix = "kafka_server_group_coordinator_metrics_"
    assert _find(samples, prefix + "group_count", protocol="classic")[0][1] >= 2
    assert _find(samples, prefix + "offset_commit_count_total")[0][1] >= 3
    assert _find(samples, prefix + "group_completed_rebalance_count_total")[0][1] >= 1
    assert _find(samples, prefix + "num_partitions", state="active")[0][1] == 50
    assert _find(samples, "kafka_coordinator_group_groupmetadatamanager_numoffsets")[0][1] >= 3
    assert _find(samples, "groupcoord_requests_total", request="OffsetCommit")[0][1] >= 2
    assert _find(samples, "groupcoord_request_duration_seconds_count", request="JoinGroup")
    assert _find(samples, "groupcoord_log_fsync_duration_seconds_count")[0][1] >= 1


def _raw(port: int, data: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        reply = b""
        while b"\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    return int(reply.split(b" ", 2)[1])


def test_health_and_bad_requests_leave_kafka_serving(node: tuple[ServerProcess, int]) -> None:
    server, port = node
    assert _get(port, "/healthz")[0] == 200
    status, _headers, body = _get(port, "/readyz")
    assert (status, body) == (200, "ready\n")
    body_bytes = b"x" * 70000  # over http.request.max.bytes (65536)
    assert _raw(port, b"POST /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body_bytes)
                + body_bytes) == 413
    assert _raw(port, b"\x16\x03\x01 not http at all\r\n\r\n") == 400
    # A header line over aiohttp's limit (8190 bytes) is refused by its parser.
    assert _raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"y" * 20000 + b"\r\n\r\n") == 400
    # Kafka is served as before.
    simple: Any = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="g-after", enable_auto_commit=False)
    try:
        simple.commit({TopicPartition("orders", 1): OffsetAndMetadata(1, "", -1)})
        assert simple.committed(TopicPartition("orders", 1)) == 1
    finally:
        simple.close()
    assert _get(port, "/healthz")[0] == 200



def test_http_port_in_use_stops_start_up_naming_http_listen(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(tmp_path / "data"),
             "--listen", f"127.0.0.1:{free_port()}", "--set", f"http.listen=127.0.0.1:{port}"],
            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} (http.listen)" in result.stderr
