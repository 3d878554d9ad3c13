"""Cluster-test fixtures: clients of the ZooKeeper of tests/coordinator/conftest.py, local clusters."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from coordinator.cluster.local_zookeeper import LocalZooKeeper, zookeeper_classpath
from coordinator.cluster.zookeeper import ClusterError
from tests.conftest import wait_for  # noqa: F401  (the cluster tests import it from here)


@pytest.fixture
def zk_client(zookeeper: LocalZooKeeper) -> Iterator[object]:
    """A plain kazoo client for looking at what the nodes wrote, as an operator's zkCli would."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.connect, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def chroot_for(request: pytest.FixtureRequest) -> str:
    """A chroot of its own per test, so tests sharing one ZooKeeper do not see each other."""
    return "/" + request.node.name.replace("[", "_").replace("]", "_").replace("-", "_")


#: The ZooKeeper session of the nodes in the cluster tests: short, so failovers are quick.
SESSION_MS = 4000


@contextlib.contextmanager
def running_cluster(directory: Path, *settings: str) -> Iterator[LocalCluster]:
    """ZooKeeper (tickTime 500) and three node processes on free loopback ports, with a 4 s
    session and a 200 ms fetch backoff, plus ``settings``; stopped afterwards (a node a test left
    SIGSTOPped is resumed first, or it would never exit on SIGTERM)."""
    from tests.conftest import free_ports

    try:
        zookeeper_classpath()
    except ClusterError as exc:  # a failure with what to install, never a silent skip
        pytest.fail(str(exc), pytrace=False)
    cluster = LocalCluster(directory, 3, free_ports(3), tick_time_ms=500,
                           settings=[f"zookeeper.session.timeout.ms={SESSION_MS}", "replica.fetch.backoff.ms=200",
                                     *settings])
    cluster.start()
    try:
        yield cluster
    finally:
        for proc in cluster.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        cluster.stop()
