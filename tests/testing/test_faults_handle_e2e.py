"""The fault handle and ``groupcoord faults`` against a real ``groupcoord serve`` node with
``test.faults.enable=true`` and an HTTP listener: faults they inject are seen by a client on the wire,
what the node refuses comes back as its message with nothing changed, and a crash-restart brings
the node back on the same ports. One node for the module; the refusal of a node without fault
injection needs a second."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.testing.faults import FaultError, FaultHandle, HttpTransport
from protocol.apis import ApiKey, request_class
from protocol.errors import ErrorCode
from tests.conftest import REPO, ServerProcess, free_port
from tests.wire_client import WireClient

FAULTS_ON = {"test.faults.enable": "true", "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}


def serve(data_dir: Path, settings: dict[str, str]) -> tuple[ServerProcess, str]:
    """A node with an HTTP listener on a free port; returns once that answers too."""
    http_port = free_port()
    server = ServerProcess(data_dir, {**settings, "http.listen": f"127.0.0.1:{http_port}"})
    server.start()
    url = f"http://127.0.0.1:{http_port}"
    deadline = time.monotonic() + 20
    while not HttpTransport(url).answers():
        assert time.monotonic() < deadline, server.log_text()
        time.sleep(0.05)
    return server, url


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    server, url = serve(tmp_path_factory.mktemp("faults-e2e") / "data", FAULTS_ON)
    yield server, url
    if server.alive():
        server.stop()


@pytest.fixture
def handle(node: tuple[ServerProcess, str]) -> Iterator[FaultHandle]:
    faults = FaultHandle(HttpTransport(node[1]))
    yield faults
    faults.clear()


def heartbeat(server: ServerProcess, group: str, member: str = "m-1", generation: int = 1) -> int:
    request = request_class(ApiKey.HEARTBEAT)(version=4, group_id=group, generation_id=generation, member_id=member,
                                              group_instance_id=None)
    with WireClient(server.host, server.port) as client:
        return int(client.request(ApiKey.HEARTBEAT, 4, request).error_code)


def join(server: ServerProcess, group: str) -> tuple[str, int]:
    """One classic member joined and synced (the group Stable): its member id and generation."""
    J, S = request_class(ApiKey.JOIN_GROUP), request_class(ApiKey.SYNC_GROUP)

    def join_as(client: WireClient, member: str) -> Any:
        return client.request(ApiKey.JOIN_GROUP, 5, J(
            version=5, group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member,
            group_instance_id=None, protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range",
                                                                                                  metadata=b"")]))

    with WireClient(server.host, server.port) as client:
        # FindCoordinator first, as a client does: it creates __consumer_offsets on a fresh node.
        find = request_class(ApiKey.FIND_COORDINATOR)(version=4, key_type=0, coordinator_keys=[group])
        deadline = time.monotonic() + 20
        while client.request(ApiKey.FIND_COORDINATOR, 4, find).coordinators[0].error_code != ErrorCode.NONE:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.05)
        first = join_as(client, "")
        while first.error_code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR):
            assert time.monotonic() < deadline, "the group coordinator never loaded"
            time.sleep(0.05)
            first = join_as(client, "")
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
        joined = join_as(client, first.member_id)
        assert joined.error_code == ErrorCode.NONE, joined
        synced = client.request(ApiKey.SYNC_GROUP, 3, S(
            version=3, group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id=None, assignments=[S.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                              assignment=b"")]))
        assert synced.error_code == ErrorCode.NONE, synced
        return joined.member_id, joined.generation_id


def cli(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", "faults", "--url", url, *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_a_fail_fault_answers_the_requests_it_names_until_its_block_ends(
        node: tuple[ServerProcess, str], handle: FaultHandle) -> None:
    server, _ = node
    with handle.fail("Heartbeat", "REBALANCE_IN_PROGRESS", count=5, group="e2e-fail") as fault:
        assert heartbeat(server, "e2e-fail") == ErrorCode.REBALANCE_IN_PROGRESS
        assert heartbeat(server, "another-group") != ErrorCode.REBALANCE_IN_PROGRESS  # the filter holds
        (listed,) = handle.list()
        assert (listed["id"], listed["fault"], listed["remaining"]) == (fault.id, "fail", 4)
    assert handle.list() == []
    assert heartbeat(server, "e2e-fail") != ErrorCode.REBALANCE_IN_PROGRESS


def test_a_fault_whose_count_ran_out_clears_quietly(node: tuple[ServerProcess, str], handle: FaultHandle) -> None:
    server, _ = node
    with handle.fail(ApiKey.HEARTBEAT, ErrorCode.ILLEGAL_GENERATION, group="e2e-once") as fault:
        assert heartbeat(server, "e2e-once") == ErrorCode.ILLEGAL_GENERATION
        assert heartbeat(server, "e2e-once") != ErrorCode.ILLEGAL_GENERATION
        assert fault.clear() is False  # it had ended after its one request


def test_bad_input_raises_the_nodes_message_and_changes_nothing(handle: FaultHandle) -> None:
    with pytest.raises(FaultError, match="unknown fault 'explode': valid faults are rebalance") as caught:
        handle.inject({"fault": "explode"})
    assert caught.value.status == 400
    with pytest.raises(FaultError, match="unknown api 'Heartbeet'") as caught:
        handle.fail("Heartbeet", "REBALANCE_IN_PROGRESS")
    assert caught.value.status == 400
    with pytest.raises(FaultError, match="unknown parameter 'ms' for fault 'pause-heartbeats'"):
        handle.inject({"fault": "pause-heartbeats", "ms": 5, "duration_ms": 100})
    with pytest.raises(FaultError) as caught:
        handle.clear("f999")
    assert caught.value.status == 404
    assert handle.list() == []


def test_group_faults_act_on_a_real_group(node: tuple[ServerProcess, str], handle: FaultHandle) -> None:
    server, _ = node
    member, generation = join(server, "e2e-group")
    assert heartbeat(server, "e2e-group", member, generation) == ErrorCode.NONE
    rebalanced = handle.rebalance("e2e-group")
    assert (rebalanced["group"], rebalanced["protocol"], rebalanced["generation"]) == ("e2e-group", "classic",
                                                                                        generation)
    assert heartbeat(server, "e2e-group", member, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert handle.kick_member("e2e-group")["member"] == member  # the first (and only) member
    assert heartbeat(server, "e2e-group", member, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    moved = handle.move_coordinator("e2e-group", load_ms=50, not_coordinator_ms=50)
    assert (moved["group"], moved["partition"]) == ("e2e-group", 0)  # offsets.topic.num.partitions=1
    # Answered once the partition is active again: the group is served at once.
    assert join(server, "e2e-group")[1] > generation


def test_group_faults_on_a_group_the_node_does_not_know_change_nothing(
        node: tuple[ServerProcess, str], handle: FaultHandle) -> None:
    _, url = node
    for action in (lambda: handle.rebalance("nope"), lambda: handle.kick_member("nope", member="m-1"),
                   lambda: handle.move_coordinator("nope", load_ms=10)):
        with pytest.raises(FaultError) as caught:
            action()
        assert (caught.value.status, caught.value.message) == (404, "group 'nope' does not exist")
    done = cli(url, "kick-member", "--group", "nope")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "groupcoord faults: group 'nope' does not exist\n")
    assert handle.list() == []


def test_the_command_line_injects_lists_and_clears(node: tuple[ServerProcess, str]) -> None:
    server, url = node
    injected = cli(url, "fail", "--api", "Heartbeat", "--error", "NOT_COORDINATOR", "--group", "e2e-cli", "--count", "3")
    assert (injected.returncode, injected.stderr) == (0, ""), injected.stderr
    assert heartbeat(server, "e2e-cli") == ErrorCode.NOT_COORDINATOR
    listed = cli(url, "list")
    assert listed.returncode == 0
    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["ID", "FAULT", "PARAMS"]
    assert row.split()[1] == "fail" and row.startswith("f")
    assert "group=e2e-cli" in row
    assert cli(url, "clear").stdout == '{"cleared": 1}\n'
    refused = cli(url, "leader-unavailable", "--topic", "t", "--partition", "0", "--duration-ms", "999999999")
    assert refused.returncode == 1
    assert refused.stderr.startswith("groupcoord faults: ")
    assert "test.faults.max.duration.ms" in refused.stderr
    assert cli(url, "list", "--json").stdout == "[]\n"


def test_a_node_without_fault_injection_refuses_with_how_to_turn_it_on(tmp_path: Path) -> None:
    server, url = serve(tmp_path / "data", {"offsets.topic.num.partitions": "1"})
    try:
        with pytest.raises(FaultError, match="start it with test.faults.enable=true") as caught:
            FaultHandle(HttpTransport(url)).fail("Heartbeat", "NOT_COORDINATOR")
        assert caught.value.status == 404
        done = cli(url, "drop-connections")
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == ("groupcoord faults: fault injection is off on this node: "
                               "start it with test.faults.enable=true\n")
    finally:
        server.stop()


def test_crash_restart_over_http_brings_the_node_back_on_its_ports(
        node: tuple[ServerProcess, str], handle: FaultHandle) -> None:
    server, _ = node
    pid = server.proc.pid if server.proc else None
    lasting = handle.pause_heartbeats("e2e-crash", duration_ms=60_000)
    handle.crash_restart()
    # The same process image replaced (exec), the Kafka listener and the HTTP listener back; the
    # faults of the old image are gone with it.
    assert server.alive() and server.proc is not None and server.proc.pid == pid
    assert handle.list() == []
    assert lasting.clear() is False
    assert heartbeat(server, "e2e-crash") != ErrorCode.REBALANCE_IN_PROGRESS
    assert "crash-restart requested" in server.log_text()
