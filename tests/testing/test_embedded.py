"""EmbeddedServer (coordinator/testing/embedded.py): the node on a thread of the test process.
A crash restart keeps committed offsets and the port; a failure of the node's thread is raised
by ``start`` with its cause; ``stop`` is graceful and frees the port."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from coordinator.testing.embedded import EmbeddedServer, ServerError
from coordinator.testing.faults import FaultError


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    server = EmbeddedServer(tmp_path_factory.mktemp("embedded") / "data")
    server.start()
    yield server
    server.stop()


def _consumer(server: EmbeddedServer, group: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=server.bootstrap_servers, group_id=group, enable_auto_commit=False)


def test_crash_restart_keeps_committed_offsets_and_port(server: EmbeddedServer) -> None:
    tp = TopicPartition("__consumer_offsets", 0)  # any partition the group's commit may name
    consumer = _consumer(server, "crash-group")
    try:
        consumer.commit({tp: OffsetAndMetadata(42, "before the crash", -1)})
    finally:
        consumer.close()
    port, first_app = server.port, server.app
    server.crash_restart()
    assert server.port == port
    assert server.app is not first_app and server.running
    # The first node wrote no snapshot of the coordinator's state (a graceful stop does): the
    # offset came back from the log.
    assert not (server.data_dir / "__consumer_offsets-0" / "coordinator.snapshot").exists()
    consumer = _consumer(server, "crash-group")
    try:
        assert consumer.committed(tp) == 42
    finally:
        consumer.close()


def test_the_fault_handle_reaches_the_running_node(server: EmbeddedServer) -> None:
    fault = server.faults.fail("OffsetCommit", "REBALANCE_IN_PROGRESS", count=2)
    assert [(f["id"], f["fault"]) for f in server.faults.list()] == [(fault.id, "fail")]
    assert server.faults.clear() == 1
    assert server.faults.list() == []


def test_the_crash_restart_fault_restarts_the_node_in_place(server: EmbeddedServer) -> None:
    # Through the node's engine (its crash_restart_hook), not the handle's shortcut to crash_restart.
    tp = TopicPartition("__consumer_offsets", 0)
    consumer = _consumer(server, "fault-crash-group")
    try:
        consumer.commit({tp: OffsetAndMetadata(7, "", -1)})
    finally:
        consumer.close()
    old, port = server.app, server.port
    server.faults.transport.crash_restart()
    deadline = time.monotonic() + 20
    while not (server.app is not None and server.app is not old and server.app.started.is_set()):
        assert time.monotonic() < deadline, "the node did not come back"
        time.sleep(0.01)
    assert server.port == port
    consumer = _consumer(server, "fault-crash-group")
    try:
        assert consumer.committed(tp) == 7
    finally:
        consumer.close()
    # The same handle follows the new node.
    with server.faults.delay("Heartbeat", 10, count=1) as fault:
        assert [f["id"] for f in server.faults.list()] == [fault.id]
    assert server.faults.list() == []


def test_a_node_without_fault_injection_refuses_as_its_endpoint_does(tmp_path: Path) -> None:
    with EmbeddedServer(tmp_path / "data", {"test.faults.enable": False}) as server:
        with pytest.raises(FaultError, match="fault injection is off on this node") as refused:
            server.faults.list()
    assert refused.value.status == 404


def test_the_settings_reach_the_node(server: EmbeddedServer) -> None:
    # FIXTURE_SETTINGS: the small, fast node of docs/testing.md.
    assert server.config["offsets.topic.num.partitions"] == 1
    assert server.config["group.initial.rebalance.delay.ms"] == 0
    assert server.config["test.faults.enable"] is True


def test_a_failed_start_raises_with_its_cause(server: EmbeddedServer, tmp_path: Path) -> None:
    # The data directory is locked by the running node: the second App's DataDir refuses it.
    second = EmbeddedServer(server.data_dir)
    with pytest.raises(ServerError, match="start failed") as failed:
        second.start(timeout=20)
    assert failed.value.__cause__ is not None
    assert "in use by another groupcoord process" in str(failed.value.__cause__)
    assert not second.running
    second.stop()  # nothing to stop: returns


def test_a_node_failing_in_its_run_lets_go_of_its_data_dir(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = EmbeddedServer(tmp_path / "data", port=taken.getsockname()[1])
        with pytest.raises(ServerError) as failed:
            busy.start(timeout=20)
    assert isinstance(failed.value.__cause__, OSError)  # the bind, raised by App.run on the node's thread
    assert not busy.running
    # The failed node released the data directory: a new one takes it.
    server = EmbeddedServer(tmp_path / "data").start()
    server.stop()


def test_stop_is_graceful_and_frees_the_port(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path / "data").start()
    port = server.port
    server.stop()
    assert not server.running
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    again = EmbeddedServer(tmp_path / "data", port=port).start()
    try:
        assert again.port == port
    finally:
        again.stop()


def test_a_node_in_the_harness_notes_its_faults_without_a_warning(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # Every harness node has faults on: a WARNING per start would litter each test's output (and
    # reach stderr where logging is not set up); `groupcoord serve` keeps it a warning.
    caplog.set_level("INFO", logger="groupcoord")
    node = EmbeddedServer(tmp_path / "data")
    node.start()
    node.stop()
    notes = [r for r in caplog.records if "fault injection is on" in r.getMessage()]
    assert [r.levelname for r in notes] == ["INFO"]
