"""Fixtures every coordinator test directory may use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordinator.cluster.local_zookeeper import LocalZooKeeper, zookeeper_classpath
from coordinator.cluster.zookeeper import ClusterError


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    """A real ZooKeeper server per test module (Debian's package, installed by `make test`)."""
    try:
        zookeeper_classpath()
    except ClusterError as exc:  # a failure with what to install, never a silent skip
        pytest.fail(str(exc), pytrace=False)
    # tickTime 500: sessions may be as short as 1 s, so expiry tests stay quick.
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper"), tick_time_ms=500)
    server.start()
    yield server
    server.stop()
