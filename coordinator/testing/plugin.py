"""The pytest plugin (entry point ``pytest11``: ``groupcoord``; docs/testing.md).

Fixtures:

- ``groupcoord_server``: a running node with a fresh data directory. By default one per test
  session (per pytest-xdist worker, each worker being a process of its own), started when a test
  first asks for it and stopped at the session's end; a test gets its own, stopped after it, when
  its marker says so (``@pytest.mark.groupcoord(scope="function")``, or ``config={...}`` or
  ``mode=...``) or ``--groupcoord-scope=function`` / ini ``groupcoord_scope`` does.
- ``bootstrap_servers``: that node's ``host:port``.
- ``groupcoord_admin``: that node's fault handle; every fault is cleared when the test ends.
- ``groupcoord_cluster``: a 3-node cluster on a real ZooKeeper, one per session.

Mode: ``inprocess`` (the node on a thread of the test process, coordinator/testing/embedded.py;
the default) or ``subprocess`` (coordinator/testing/subprocess_server.py), from the marker, else
``--groupcoord-mode`` / ini ``groupcoord_mode``.

pytest loads this module in every session of every project where groupcoord is installed: it
imports pytest and the standard library only; the servers are imported when a fixture needs one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from .kafka_python_warnings import kafka_python_warnings_ignored

__all__ = ["MODES", "SCOPES"]

MODES = ("inprocess", "subprocess")
SCOPES = ("session", "function")
_MARKER_ARGS = ("config", "mode", "scope")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("groupcoord", "groupcoord test servers (docs/testing.md)")
    group.addoption("--groupcoord-mode", choices=MODES, default=None,
                    help="run groupcoord_server in this process (inprocess, the default) or as a subprocess")
    group.addoption("--groupcoord-scope", choices=SCOPES, default=None,
                    help="one groupcoord_server per session (the default) or a fresh one per test (function)")
    parser.addini("groupcoord_mode", "groupcoord_server's mode: inprocess (default) or subprocess", default="inprocess")
    parser.addini("groupcoord_scope", "groupcoord_server's scope: session (default) or function", default="session")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "groupcoord(config=None, mode=None, scope=None): settings of the "
                            "groupcoord server a test gets (docs/testing.md)")


def _choice(config: pytest.Config, option: str, ini: str, choices: tuple[str, ...]) -> str:
    value = config.getoption(option) or config.getini(ini)
    if value not in choices:
        raise pytest.UsageError(f"{ini} = {value!r}: expected one of {', '.join(choices)}")
    return str(value)


class _Servers:
    """The session's servers: the shared one of each mode (started on first use) and every
    test's own; all stopped at the end."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._shared: dict[str, Any] = {}
        self._started: list[Any] = []

    def _new(self, mode: str, settings: Mapping[str, object] | None) -> Any:
        data_dir = self._tmp.mktemp(f"groupcoord-{mode}") / "data"
        server: Any
        if mode == "subprocess":
            from .subprocess_server import SubprocessServer

            server = SubprocessServer(data_dir, settings)
        else:
            from .embedded import EmbeddedServer

            server = EmbeddedServer(data_dir, settings)
        self._started.append(server)
        server.start()
        return server

    def shared(self, mode: str) -> Any:
        server = self._shared.get(mode)
        if server is None or not server.running:  # a test stopped it: the next gets a new one
            server = self._shared[mode] = self._new(mode, None)
        return server

    def own(self, mode: str, settings: Mapping[str, object] | None) -> Any:
        return self._new(mode, settings)

    def stop(self, server: Any) -> None:
        if server in self._started:
            self._started.remove(server)
        server.stop()

    def stop_all(self) -> None:
        errors: list[BaseException] = []
        while self._started:
            try:
                self.stop(self._started[-1])
            except Exception as exc:  # stop the others too, then report the first
                errors.append(exc)
        self._shared.clear()
        if errors:
            raise errors[0]


@pytest.fixture(scope="session")
def groupcoord_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Servers]:
    """The session's servers (see ``groupcoord_server``)."""
    servers = _Servers(tmp_path_factory)
    try:
        yield servers
    finally:
        servers.stop_all()


@pytest.fixture
def groupcoord_server(request: pytest.FixtureRequest, groupcoord_servers: _Servers) -> Iterator[Any]:
    """A running groupcoord node (``EmbeddedServer`` or ``SubprocessServer``): the session's, or
    the test's own when its marker or the scope option asks for one."""
    marker = request.node.get_closest_marker("groupcoord")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and (marker.args or set(kwargs) - set(_MARKER_ARGS)):
        raise pytest.UsageError(f"@pytest.mark.groupcoord takes only keyword arguments {', '.join(_MARKER_ARGS)}; "
                                f"got args {marker.args!r}, kwargs {sorted(kwargs)}")
    config = request.config
    mode = kwargs.get("mode") or _choice(config, "--groupcoord-mode", "groupcoord_mode", MODES)
    scope = kwargs.get("scope") or _choice(config, "--groupcoord-scope", "groupcoord_scope", SCOPES)
    if mode not in MODES or scope not in SCOPES:
        raise pytest.UsageError(f"@pytest.mark.groupcoord(mode={mode!r}, scope={scope!r}): mode is one of "
                                f"{', '.join(MODES)}, scope one of {', '.join(SCOPES)}")
    settings = kwargs.get("config")
    if scope == "function" or settings is not None or "mode" in kwargs:
        server = groupcoord_servers.own(mode, settings)
        try:
            yield server
        finally:
            groupcoord_servers.stop(server)
    else:
        server = groupcoord_servers.shared(mode)
        try:
            yield server
        finally:
            # A session server's faults end with the test that set them.
            if server.faults_used and server.running:
                server.faults.clear()


@pytest.fixture
def bootstrap_servers(groupcoord_server: Any) -> str:
    """``host:port`` of ``groupcoord_server``."""
    return str(groupcoord_server.bootstrap_servers)


@pytest.fixture
def groupcoord_admin(groupcoord_server: Any) -> Iterator[Any]:
    """``groupcoord_server``'s fault handle (coordinator/testing/faults.py). Every fault still
    active when the test ends is cleared."""
    handle = groupcoord_server.faults
    try:
        yield handle
    finally:
        if groupcoord_server.running:
            handle.clear()


@pytest.fixture(scope="session")
def groupcoord_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A 3-node cluster on a real ZooKeeper (coordinator/testing/cluster.py), one per session;
    the tests asking for it are skipped, saying what to install, when ZooKeeper is missing."""
    with kafka_python_warnings_ignored():
        from .cluster import GroupcoordCluster, zookeeper_missing

    missing = zookeeper_missing()
    if missing:
        pytest.skip(missing)
    cluster = GroupcoordCluster(tmp_path_factory.mktemp("groupcoord-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
