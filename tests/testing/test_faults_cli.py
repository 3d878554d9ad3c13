"""``groupcoord faults`` (coordinator/faults_cli.py) against the fake node of test_faults_handle.py:
what it sends, what it prints, its exit statuses. test_faults_cli_e2e.py runs it against a real node."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from coordinator.cli import main
from coordinator.faults_cli import DEFAULT_URL, format_table, run
from tests.conftest import REPO, free_port
from tests.testing.test_faults_handle import OFF, FakeNode


@pytest.fixture(scope="module")
def node() -> Iterator[FakeNode]:
    fake = FakeNode()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def fresh(node: FakeNode) -> FakeNode:
    node.reset()
    return node


def faults(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def test_each_action_sends_its_fault_and_prints_the_answer(fresh: FakeNode) -> None:
    url = fresh.url
    assert faults("--url", url, "rebalance", "--group", "known") == (
        0, '{"result": {"group": "known", "protocol": "classic", "generation": 2}}\n', "")
    assert faults("--url", url, "fail", "--api", "8", "--error", "REBALANCE_IN_PROGRESS", "--count", "2",
                  "--group", "known")[1] == '{"id": "f1", "result": {}}\n'
    for argv in (["kick-member", "--group", "known", "--member", "m-1"],
                 ["move-coordinator", "--group", "known", "--load-ms", "10", "--not-coordinator-ms", "20"],
                 ["delay", "--api", "JoinGroup", "--ms", "100", "--topic", "t", "--duration-ms", "5000"],
                 ["drop-connections", "--client-id", "app"],
                 ["pause-heartbeats", "--duration-ms", "1000"],
                 ["leader-unavailable", "--topic", "t", "--partition", "0", "--duration-ms", "1000"]):
        status, out, err = faults("--url", url, *argv)
        assert (status, err) == (0, ""), argv
        json.loads(out)
    assert fresh.engine.bodies == [
        {"fault": "rebalance", "group": "known"},
        {"fault": "fail", "api": 8, "error": "REBALANCE_IN_PROGRESS", "count": 2, "group": "known"},
        {"fault": "kick-member", "group": "known", "member": "m-1"},
        {"fault": "move-coordinator", "group": "known", "load_ms": 10, "not_coordinator_ms": 20},
        {"fault": "delay", "api": "JoinGroup", "ms": 100, "topic": "t", "duration_ms": 5000},
        {"fault": "drop-connections", "client_id": "app"},
        {"fault": "pause-heartbeats", "duration_ms": 1000},
        {"fault": "leader-unavailable", "topic": "t", "partition": 0, "duration_ms": 1000},
    ]


def test_list_prints_a_table_or_json_and_clear_ends_one_or_all(fresh: FakeNode) -> None:
    url = fresh.url
    assert faults("--url", url, "list") == (0, "no faults in force\n", "")
    faults("--url", url, "fail", "--api", "OffsetCommit", "--error", "NOT_COORDINATOR", "--group", "g", "--count", "3")
    faults("--url", url, "pause-heartbeats", "--duration-ms", "1000")
    status, out, _ = faults("--url", url, "list")
    lines = out.splitlines()
    assert status == 0
    assert lines[0].split() == ["ID", "FAULT", "PARAMS", "REMAINING", "EXPIRES_IN_MS"]
    assert lines[1].split() == ["f1", "fail", "api=OffsetCommit", "error=NOT_COORDINATOR", "count=3", "group=g",
                                "3", "60000"]
    assert lines[2].split() == ["f2", "pause-heartbeats", "duration_ms=1000", "-", "60000"]
    # --json after the action works as before it.
    status, out, _ = faults("list", "--url", url, "--json")
    assert [f["id"] for f in json.loads(out)] == ["f1", "f2"]
    assert faults("--url", url, "clear", "f2") == (0, '{"cleared": 1}\n', "")
    assert faults("--url", url, "clear") == (0, '{"cleared": 1}\n', "")
    assert faults("--url", url, "list", "--json")[1] == "[]\n"


def test_refusals_print_the_nodes_message_exit_1_and_change_nothing(fresh: FakeNode) -> None:
    url = fresh.url
    assert faults("--url", url, "rebalance", "--group", "nope") == (
        1, "", "groupcoord faults: group 'nope' does not exist\n")
    assert faults("--url", url, "clear", "f7") == (1, "", "groupcoord faults: no fault 'f7'\n")
    assert fresh.engine.bodies == []
    assert faults("--url", url, "list", "--json")[1] == "[]\n"


def test_a_node_without_fault_injection_or_without_a_listener_exits_1() -> None:
    off = FakeNode(enabled=False)
    off.start()
    try:
        assert faults("--url", off.url, "list") == (1, "", f"groupcoord faults: {OFF}\n")
        assert faults("--url", off.url, "kick-member", "--group", "g")[0] == 1
    finally:
        off.stop()
    gone = f"http://127.0.0.1:{free_port()}"
    status, out, err = faults("--url", gone, "list")
    assert (status, out) == (1, "")
    assert err.startswith(f"groupcoord faults: cannot reach {gone}/faults: connection refused")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert faults("rebalance") == (2, "", "")
    assert "the following arguments are required: --group" in capsys.readouterr().err
    assert faults("explode")[0] == 2
    assert "invalid choice: 'explode'" in capsys.readouterr().err
    assert faults("delay", "--api", "Fetch", "--ms", "soon")[0] == 2
    assert faults()[0] == 2


def test_the_url_comes_from_the_environment_else_localhost_8080(fresh: FakeNode,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUPCOORD_FAULTS_URL", fresh.url)
    assert faults("list") == (0, "no faults in force\n", "")
    monkeypatch.delenv("GROUPCOORD_FAULTS_URL")
    assert DEFAULT_URL == "http://localhost:8080"
    status, _, err = faults("--url", f"127.0.0.1:{free_port()}", "list")  # the scheme may be left out
    assert status == 1 and "connection refused" in err


def test_crash_restart_waits_for_the_node_to_come_back(fresh: FakeNode) -> None:
    before = fresh.restarts
    assert faults("--url", fresh.url, "crash-restart") == (0, '{"restarted": true}\n', "")
    assert fresh.restarts == before + 1


def test_the_groupcoord_command_dispatches_faults(fresh: FakeNode, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["faults", "--url", fresh.url, "drop-connections"]) == 0
    assert json.loads(capsys.readouterr().out) == {"result": {"dropped": 0}}
    # And as a process, with its real exit status and streams.
    done = subprocess.run([sys.executable, "-m", "coordinator", "faults", "--url", fresh.url, "rebalance",
                           "--group", "nope"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "groupcoord faults: group 'nope' does not exist\n")


def test_the_table_leaves_out_empty_parameters() -> None:
    table = format_table([{"id": "f1", "fault": "delay", "api": "Fetch", "ms": 5, "group": None,
                           "remaining": None, "expires_in_ms": 100}])
    assert table.splitlines()[1].split() == ["f1", "delay", "api=Fetch", "ms=5", "-", "100"]
