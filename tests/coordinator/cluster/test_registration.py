"""A node joins a cluster: real ZooKeeper, real node processes (issue 13, first step).

With ``zookeeper.connect`` a node creates Kafka's persistent paths, takes the cluster id from
``/cluster/id`` (creating it first), and registers itself in ``/brokers/ids/<id>`` as an ephemeral
znode with Kafka's JSON, before it serves. Each test uses a chroot of its own on one ZooKeeper.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, ServerProcess
from tests.coordinator.cluster.conftest import chroot_for, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster(zookeeper, tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Starts nodes in this test's chroot; all stopped at teardown."""
    chroot = chroot_for(request)
    nodes: list[ServerProcess] = []

    def node(broker_id: int, start: bool = True, data: Path | None = None, **settings: str) -> ServerProcess:
        s = ServerProcess(data or tmp_path / f"node-{broker_id}-{len(nodes)}",
                          {"zookeeper.connect": zookeeper.connect + chroot, "broker.id": str(broker_id),
                           "zookeeper.session.timeout.ms": "2000", **settings})
        nodes.append(s)
        if start:
            s.start()
        return s

    node.chroot = chroot  # type: ignore[attr-defined]
    yield node
    for s in nodes:
        if s.alive():
            s.stop()


def _serve(data: Path, *settings: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(data), "--listen", "127.0.0.1:0"]
    for s in settings:
        args += ["--set", s]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_a_node_registers_as_kafka_does(cluster, zk_client) -> None:  # type: ignore[no-untyped-def]
    node = cluster(1, **{"broker.rack": "rack-a"})
    root = cluster.chroot
    assert zk_client.get_children(root + "/brokers/ids") == ["1"]
    data, stat = zk_client.get(root + "/brokers/ids/1")
    value = json.loads(data)
    assert stat.ephemeralOwner != 0  # ephemeral: gone with the node's session
    assert value["version"] == 5 and value["jmx_port"] == -1
    assert value["endpoints"] == [f"PLAINTEXT://{node.host}:{node.port}"]
    assert (value["host"], value["port"], value["rack"]) == (node.host, node.port, "rack-a")
    assert abs(int(value["timestamp"]) - time.time() * 1000) < 60_000
    # Kafka's persistent parents, for tools that list them.
    for path in ("/brokers/topics", "/config/topics", "/admin/delete_topics", "/isr_change_notification"):
        assert zk_client.exists(root + path), path
    # The cluster id in ZooKeeper is the one in the node's meta.properties.
    cluster_id = json.loads(zk_client.get(root + "/cluster/id")[0])
    meta = (node.data_dir / "meta.properties").read_text()
    assert cluster_id["version"] == "1" and f"cluster.id={cluster_id['id']}\n" in meta
    assert "registered in zookeeper" in node.log_text()


def test_every_node_joins_the_same_cluster(cluster, zk_client) -> None:  # type: ignore[no-untyped-def]
    nodes = [cluster(i) for i in (1, 2, 3)]
    assert sorted(zk_client.get_children(cluster.chroot + "/brokers/ids")) == ["1", "2", "3"]
    ids = {next(line for line in (n.data_dir / "meta.properties").read_text().splitlines()
                if line.startswith("cluster.id=")) for n in nodes}
    assert len(ids) == 1


def test_a_second_node_with_the_same_broker_id_refuses_to_start(cluster, zk_client) -> None:  # type: ignore[no-untyped-def]
    first = cluster(1)
    owner = zk_client.get(cluster.chroot + "/brokers/ids/1")[1].ephemeralOwner
    second = cluster(1, start=False)
    with pytest.raises(RuntimeError, match="exited with 1"):
        second.start()
    assert "broker.id 1 is already registered in ZooKeeper" in second.log_text()
    assert "another live node uses this id" in second.log_text()
    # The first keeps its registration and serves.
    assert first.alive()
    assert zk_client.get(cluster.chroot + "/brokers/ids/1")[1].ephemeralOwner == owner


def test_graceful_stop_deregisters_at_once_and_sigkill_after_the_session(cluster, zk_client) -> None:  # type: ignore[no-untyped-def]
    ids = cluster.chroot + "/brokers/ids"
    a, b = cluster(1), cluster(2)
    assert a.stop() == 0
    assert zk_client.get_children(ids) == ["2"]  # the session was closed, not left to expire
    b.kill()
    killed = time.monotonic()
    assert zk_client.get_children(ids) == ["2"]  # a crash leaves it until the session times out
    wait_for(lambda: zk_client.get_children(ids) == [], 10, "the killed node's registration to expire")
    assert time.monotonic() - killed < 2.0 + 3.0  # the 2 s session, plus ZooKeeper's tick and our poll


def test_a_node_restarted_after_sigkill_registers_again(cluster, zk_client) -> None:  # type: ignore[no-untyped-def]
    node = cluster(1)
    path = cluster.chroot + "/brokers/ids/1"
    old_owner = zk_client.get(path)[1].ephemeralOwner
    node.kill()
    # At once, while its old session still holds the id: it waits that session out, not refuses.
    node.start(timeout=30)
    assert zk_client.get(path)[1].ephemeralOwner != old_owner


def test_a_node_stopped_past_its_session_registers_again_when_resumed(cluster, zk_client) -> None:  # type: ignore[no-untyped-def]
    node = cluster(1)
    path = cluster.chroot + "/brokers/ids/1"
    old_owner = zk_client.get(path)[1].ephemeralOwner
    assert node.proc is not None
    os.kill(node.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: zk_client.exists(path) is None, 10, "the stopped node's session to expire")
    finally:
        os.kill(node.proc.pid, signal.SIGCONT)
    stat = wait_for(lambda: zk_client.exists(path), 15, "the resumed node to register in a new session")
    assert stat.ephemeralOwner != old_owner
    assert "zookeeper session expired" in node.log_text()
    assert node.alive()


def test_a_data_directory_of_another_cluster_is_refused(zookeeper, zk_client, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    chroot = chroot_for(request)
    zk_client.create(chroot + "/cluster/id", b'{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}', makepath=True)
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=1\ncluster.id=BBBBBBBBBBBBBBBBBBBBBB\nnode.id=1\n")
    res = _serve(data, f"zookeeper.connect={zookeeper.connect}{chroot}", "broker.id=1")
    assert res.returncode == 2, res.stderr
    assert "cluster.id is BBBBBBBBBBBBBBBBBBBBBB but the cluster in ZooKeeper is AAAAAAAAAAAAAAAAAAAAAA" in res.stderr
    assert zk_client.get_children(chroot + "/brokers/ids") == []


def test_a_foreign_cluster_id_znode_is_a_clear_error(zookeeper, zk_client, tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    chroot = chroot_for(request)
    zk_client.create(chroot + "/cluster/id", b"not json", makepath=True)
    res = _serve(tmp_path / "data", f"zookeeper.connect={zookeeper.connect}{chroot}")
    assert res.returncode == 1, res.stderr
    assert "znode /cluster/id is not JSON" in res.stderr and "Traceback" not in res.stderr


def test_unreachable_zookeeper_stops_start_up_with_a_message(tmp_path: Path) -> None:
    from tests.conftest import free_port

    port = free_port()  # nothing listens there
    started = time.monotonic()
    res = _serve(tmp_path / "data", f"zookeeper.connect=127.0.0.1:{port}", "zookeeper.connection.timeout.ms=1500")
    assert res.returncode == 1, res.stderr
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port} within 1500 ms" in res.stderr
    assert "Traceback" not in res.stderr
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("value", ["localhost", "h:99999", "h:1//x", ":2181", "h:1,", "h:1/a/"])
def test_a_malformed_zookeeper_connect_is_a_configuration_error(tmp_path: Path, value: str) -> None:
    res = _serve(tmp_path / "data", f"zookeeper.connect={value}")
    assert res.returncode == 2
    assert "zookeeper.connect" in res.stderr and "HOST:PORT" in res.stderr


def test_broker_id_and_node_id_must_agree(tmp_path: Path) -> None:
    res = _serve(tmp_path / "data", "broker.id=3", "node.id=4")
    assert res.returncode == 2
    assert "broker.id (3) and node.id (4)" in res.stderr


def _controller(zk_client, root: str, not_: tuple[int, ...] = ()) -> tuple[int, int] | None:  # type: ignore[no-untyped-def]
    """(controller broker id, controller epoch) as ZooKeeper has them, once the controller is
    none of ``not_``; None while there is none."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = zk_client.get(root + "/controller")
    except NoNodeError:
        return None
    broker = json.loads(data)["brokerid"]
    epoch, _ = zk_client.get(root + "/controller_epoch")
    return None if broker in not_ else (broker, int(epoch))


def test_one_node_is_controller_and_another_takes_over_when_it_dies(cluster, zk_client) -> None:  # type: ignore[no-untyped-def]
    root = cluster.chroot
    nodes = {i: cluster(i) for i in (1, 2, 3)}
    first, epoch = wait_for(lambda: _controller(zk_client, root), 10, "a controller")
    assert epoch == 1
    assert json.loads(zk_client.get(root + "/controller")[0])["version"] == 1
    assert "elected controller" in nodes[first].log_text()
    nodes[first].kill()
    killed = time.monotonic()
    second, epoch = wait_for(lambda: _controller(zk_client, root, (first,)), 15, "a new controller after SIGKILL")
    assert second != first and epoch == 2
    assert time.monotonic() - killed < 2.0 + 3.0  # the 2 s session, plus tick and polling
    # A graceful stop hands over at once (the session is closed, not left to expire).
    assert nodes[second].stop() == 0
    third, epoch = wait_for(lambda: _controller(zk_client, root, (first, second)), 5, "a new controller after SIGTERM")
    assert third not in (first, second) and epoch == 3
