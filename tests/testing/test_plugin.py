"""The pytest plugin (coordinator/testing/plugin.py), run as applications use it: small test files
in a child pytest (pytester) whose fixtures come from the ``groupcoord`` entry point, with this
checkout first on ``PYTHONPATH``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def child(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    return pytester


def _run(child: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    child.makepyfile(test_app=textwrap.dedent(source))
    return child.runpytest_subprocess("-p", "no:cacheprovider", "-q", *args, timeout=120)


_ADMIN = '''
import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

seen = {}


def topics(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def broker_setting(bootstrap, key):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")
        return described["broker"]["1"][key]["value"]
    finally:
        admin.close()
'''


def test_session_server_is_shared_and_a_marker_gives_a_fresh_one(child: pytest.Pytester) -> None:
    result = _run(child, _ADMIN + '''

def test_first(groupcoord_server, bootstrap_servers):
    assert type(groupcoord_server).__name__ == "EmbeddedServer"
    assert bootstrap_servers == groupcoord_server.bootstrap_servers
    seen["session"] = groupcoord_server
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    admin.create_topics([NewTopic("kept", 1, 1)])
    admin.close()


def test_the_next_test_gets_the_same_server(groupcoord_server):
    assert groupcoord_server is seen["session"]
    assert "kept" in topics(groupcoord_server.bootstrap_servers)


@pytest.mark.groupcoord(scope="function")
def test_function_scope_gives_a_fresh_node(groupcoord_server):
    assert groupcoord_server is not seen["session"]
    assert groupcoord_server.data_dir != seen["session"].data_dir
    assert "kept" not in topics(groupcoord_server.bootstrap_servers)
    seen["own"] = groupcoord_server


def test_a_tests_own_server_is_stopped_after_it():
    assert not seen["own"].running
    assert seen["session"].running


@pytest.mark.groupcoord(config={"group.max.size": 3})
def test_marker_config_reaches_the_node(groupcoord_server):
    assert groupcoord_server is not seen["session"]
    assert broker_setting(groupcoord_server.bootstrap_servers, "group.max.size") == "3"
    # The fixture defaults stay under the test's own settings.
    assert broker_setting(groupcoord_server.bootstrap_servers, "offsets.topic.num.partitions") == "1"


def test_the_session_server_has_the_defaults(groupcoord_server):
    assert groupcoord_server is seen["session"]
    assert broker_setting(groupcoord_server.bootstrap_servers, "group.max.size") != "3"
''')
    result.assert_outcomes(passed=6)


def test_admin_faults_end_with_the_test_that_set_them(child: pytest.Pytester) -> None:
    result = _run(child, '''
seen = {}


def test_sets_a_fault(groupcoord_server, groupcoord_admin):
    seen["server"] = groupcoord_server
    groupcoord_admin.fail("JoinGroup", "REBALANCE_IN_PROGRESS", count=5)
    groupcoord_server.faults.delay("Heartbeat", 50, count=5)
    assert len(groupcoord_admin.list()) == 2


def test_the_next_test_sees_none(groupcoord_server, groupcoord_admin):
    assert groupcoord_server is seen["server"]
    assert groupcoord_admin.list() == []


def test_admin_crash_restart_keeps_the_session_server(groupcoord_server, groupcoord_admin):
    port = groupcoord_server.port
    groupcoord_admin.crash_restart()
    assert groupcoord_server is seen["server"] and groupcoord_server.port == port and groupcoord_server.running
''')
    result.assert_outcomes(passed=3)


def test_function_scope_option_gives_every_test_its_own_server(child: pytest.Pytester) -> None:
    result = _run(child, _ADMIN + '''

def test_one(groupcoord_server):
    seen["one"] = groupcoord_server
    admin = KafkaAdminClient(bootstrap_servers=groupcoord_server.bootstrap_servers)
    admin.create_topics([NewTopic("only-here", 1, 1)])
    admin.close()


def test_two(groupcoord_server):
    assert groupcoord_server is not seen["one"] and not seen["one"].running
    assert "only-here" not in topics(groupcoord_server.bootstrap_servers)
''', "--groupcoord-scope=function")
    result.assert_outcomes(passed=2)


def test_subprocess_mode_and_its_crash_restart_keeps_offsets(child: pytest.Pytester) -> None:
    child.makeini("[pytest]\ngroupcoord_mode = subprocess\n")
    result = _run(child, '''
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata


def committed(bootstrap, tp):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="app", enable_auto_commit=False)
    try:
        return consumer.committed(tp)
    finally:
        consumer.close()


def test_commit_survives_a_crash(groupcoord_server, bootstrap_servers):
    assert type(groupcoord_server).__name__ == "SubprocessServer"
    pid = groupcoord_server.proc.pid
    tp = TopicPartition("__consumer_offsets", 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id="app", enable_auto_commit=False)
    consumer.commit({tp: OffsetAndMetadata(17, "", -1)})
    consumer.close()
    groupcoord_server.crash_restart()
    assert groupcoord_server.proc.pid != pid
    assert groupcoord_server.bootstrap_servers == bootstrap_servers
    assert committed(bootstrap_servers, tp) == 17
    assert groupcoord_server.log_text().count("msg=listening") == 2


def test_faults_over_http(groupcoord_server, groupcoord_admin):
    fault = groupcoord_admin.fail("OffsetCommit", "REBALANCE_IN_PROGRESS", count=3)
    assert [f["id"] for f in groupcoord_admin.list()] == [fault.id]
    assert groupcoord_admin.transport.base_url == f"http://127.0.0.1:{groupcoord_server.http_port}"


def test_and_they_are_gone_for_the_next_test(groupcoord_admin):
    assert groupcoord_admin.list() == []
''')
    result.assert_outcomes(passed=3)


def test_each_xdist_worker_gets_its_own_server(child: pytest.Pytester, tmp_path: Path) -> None:
    record = tmp_path / "seen.jsonl"
    result = _run(child, f'''
import json, os

import pytest


@pytest.mark.parametrize("n", range(8))
def test_record(groupcoord_server, n):
    with open({str(record)!r}, "a") as out:
        out.write(json.dumps([os.environ["PYTEST_XDIST_WORKER"], os.getpid(),
                              groupcoord_server.bootstrap_servers]) + "\\n")
''', "-n", "2")
    result.assert_outcomes(passed=8)
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    by_worker: dict[str, set[str]] = {}
    for worker, _pid, bootstrap in rows:
        by_worker.setdefault(worker, set()).add(bootstrap)
    assert len(by_worker) == 2, by_worker
    # One server per worker (the session's), and no two workers on the same one.
    assert all(len(servers) == 1 for servers in by_worker.values()), by_worker
    assert len(set.union(*by_worker.values())) == 2, by_worker


def test_loading_the_plugin_imports_no_server_code() -> None:
    # pytest loads the plugin in every session of every project that installs groupcoord.
    probe = ("import sys, coordinator.testing.plugin; "
             "print([m for m in ('coordinator.app', 'kafka', 'aiohttp', 'coordinator.testing.embedded') "
             "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO)}, timeout=60)
    assert out.stdout.strip() == "[]"



@pytest.mark.parametrize("mode", ["inprocess", "subprocess"])
def test_the_servers_code_is_imported_without_kafka_pythons_deprecation_warnings(
        child: pytest.Pytester, mode: str) -> None:
    # kafka-python's protocol classes warn when first imported (coordinator/testing/kafka_python_warnings.py);
    # the fixtures import them with the node's code and the fault handle's, and a user's run must
    # not report them as its own. The test file imports no kafka-python: the fixtures load it first.
    # (pytest-asyncio, installed here, warns at start-up about an ini option a user sets: not loaded.)
    result = _run(child, '''
def test_a_server_and_its_fault_handle(groupcoord_server, groupcoord_admin):
    assert groupcoord_admin.list() == []
''', f"--groupcoord-mode={mode}", "-W", "error::DeprecationWarning", "-p", "no:asyncio")
    result.assert_outcomes(passed=1)
    assert "DeprecationWarning" not in result.stdout.str()
