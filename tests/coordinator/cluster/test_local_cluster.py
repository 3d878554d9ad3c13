"""`groupcoord cluster up`: ZooKeeper and N nodes in one command, stopped by Ctrl-C (SIGINT)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, free_ports

pytestmark = pytest.mark.timeout(180)


def _read_until(proc: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"cluster up ended before {prefix!r}:\n{proc.stderr.read() if proc.stderr else ''}")
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    raise AssertionError(f"no {prefix!r} within {timeout}s")




def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def test_cluster_up_starts_zookeeper_and_three_registered_nodes_and_ctrl_c_stops_them(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient
    from kazoo.client import KazooClient

    base = free_ports(3)
    proc = subprocess.Popen([sys.executable, "-m", "coordinator", "cluster", "up", "--nodes", "3",
                             "--base-port", str(base), "--dir", str(tmp_path / "cluster"),
                             "--set", "group.initial.rebalance.delay.ms=0"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        zookeeper = _read_until(proc, "zookeeper: ", 90)
        bootstrap = _read_until(proc, "bootstrap: ", 10)
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        zk = KazooClient(hosts=zookeeper)
        zk.start(timeout=10)
        try:
            assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        finally:
            zk.stop()
            zk.close()
        # Every node answers a stock client.
        for address in bootstrap.split(","):
            admin = KafkaAdminClient(bootstrap_servers=address, request_timeout_ms=10000)
            try:
                assert admin.describe_cluster()["cluster_id"]
            finally:
                admin.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for i in range(3):
        assert not _listening("127.0.0.1", base + i)
    assert not _listening("127.0.0.1", int(zookeeper.rsplit(":", 1)[1]))
    for i in (1, 2, 3):
        assert (tmp_path / "cluster" / f"node-{i}" / "meta.properties").is_file()
        assert "registered in zookeeper" in (tmp_path / "cluster" / f"node-{i}.log").read_text()


def test_cluster_up_reports_a_node_that_cannot_start(tmp_path: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        res = subprocess.run([sys.executable, "-m", "coordinator", "cluster", "up", "--nodes", "1",
                              "--base-port", str(port), "--dir", str(tmp_path / "cluster")],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    finally:
        busy.close()
    assert res.returncode == 1
    assert "node 1 exited with 1 at start-up" in res.stderr and "cannot listen" in res.stderr
    assert "Traceback" not in res.stderr
