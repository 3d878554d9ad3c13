"""A groupcoord cluster for tests: a real ZooKeeper and N ``groupcoord serve`` nodes on loopback
ports, each with fault injection on its ``http.listen`` listener (docs/testing.md).

``GroupcoordCluster(directory).start()`` returns once every node is registered and serving and
every ``__consumer_offsets`` partition has a leader whose coordinator answers, so a test can use
it at once. The settings default for speed (a short ZooKeeper session, so a killed node's
partitions move within seconds; three offsets partitions replicated on every node; no initial
rebalance delay); ``settings`` overrides or adds any.

``cluster.faults`` injects the fault vocabulary across the cluster: a fault that names a group
(``rebalance``, ``kick_member``, ``move_coordinator``) goes to the group's coordinator; a fault on
requests (``fail``, ``delay``, ``pause_heartbeats``, ``leader_unavailable``, ``drop_connections``)
goes to every running node, and the ``Fault`` returned clears on all of them. ``move_coordinator``
is a real leadership move of the group's offsets partition (coordinator/cluster/coordinator_moves.py).
``crash_restart(node_id)`` SIGKILLs a node and starts it again on the same data and ports.

The ZooKeeper server is the machine's (coordinator/cluster/local_zookeeper.py): without one,
:func:`zookeeper_missing` says what to install and ``start()`` raises :class:`ZooKeeperMissing`.
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from protocol.apis import ApiKey, request_class
from protocol.client import decode_response, encode_request
from protocol.errors import ErrorCode
from protocol.hashing import partition_for

from ..cluster.local_cluster import LocalCluster
from ..cluster.local_zookeeper import zookeeper_classpath
from ..cluster.zookeeper import ClusterError
from .faults import Fault, FaultHandle, HttpTransport
from .settings import free_port_block

__all__ = ["ClusterFault", "ClusterFaults", "ClusterNode", "GroupcoordCluster", "ZooKeeperMissing",
           "zookeeper_missing", "CLUSTER_DEFAULTS"]

#: What the plugin skips a ``groupcoord_cluster`` test with when the machine has no ZooKeeper.
MISSING_MESSAGE = ("groupcoord_cluster needs ZooKeeper: install Debian's zookeeper package "
                   "(apt-get install zookeeper)")

#: The settings every node gets unless ``settings`` says otherwise. The ZooKeeper session (and
#: ZooKeeper's tick, below) are short so that a killed node's partitions move in about 5 s, as in
#: the project's own failover tests (tests/coordinator/cluster/conftest.py).
CLUSTER_DEFAULTS: dict[str, str] = {
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "zookeeper.session.timeout.ms": "4000",
    "replica.fetch.backoff.ms": "200",
    "test.faults.enable": "true",
}

#: ZooKeeper's tick: sessions may be as short as two ticks.
TICK_TIME_MS = 500
#: How long start-up, a restart or a lookup may take before it fails (a node's start-up, the
#: offsets topic's creation, a failover after a session timeout).
READY_TIMEOUT_S = 60.0

#: Answers of a node that does not coordinate the group (yet).
_NOT_SERVING = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                          ErrorCode.COORDINATOR_NOT_AVAILABLE})


class ZooKeeperMissing(ClusterError):
    """No ZooKeeper server is installed on this machine."""


def zookeeper_missing() -> str | None:
    """Why a cluster cannot start here (what to install), or None when ZooKeeper and Java are found."""
    import shutil

    try:
        zookeeper_classpath()
    except ClusterError as exc:
        return f"{MISSING_MESSAGE}; {exc}"
    if shutil.which("java") is None:
        return f"{MISSING_MESSAGE}; `java` is not on PATH"
    return None


def _call(host: str, port: int, api_key: ApiKey, version: int, request: Any, timeout: float = 5.0) -> Any:
    """One request on a connection of its own, and its answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(encode_request(api_key, version, 1, request, client_id="groupcoord-cluster"))

        def read(n: int) -> bytes:
            chunks = []
            while n:
                chunk = sock.recv(n)
                if not chunk:
                    raise ConnectionError(f"{host}:{port} closed the connection")
                chunks.append(chunk)
                n -= len(chunk)
            return b"".join(chunks)

        size = struct.unpack(">i", read(4))[0]
        _cid, response = decode_response(api_key, version, read(size))
        return response


class _Processes(LocalCluster):
    """``LocalCluster`` with an ``http.listen`` port of its own for each node."""

    def __init__(self, directory: Path, nodes: int, base_port: int, http_ports: dict[int, int],
                 settings: list[str]) -> None:
        super().__init__(directory, nodes, base_port, settings=settings, tick_time_ms=TICK_TIME_MS)
        self.http_ports = http_ports

    def node_args(self, broker_id: int, port: int) -> list[str]:
        return [*super().node_args(broker_id, port), "--set", f"http.listen={self.host}:{self.http_ports[broker_id]}"]


class ClusterNode:
    """One node of a :class:`GroupcoordCluster`: broker ``broker_id`` on ``port``, its fault
    endpoint at ``http_url``."""

    def __init__(self, cluster: GroupcoordCluster, broker_id: int, port: int, http_port: int) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.port = port
        self.http_port = http_port
        self.http_url = f"http://{cluster.host}:{http_port}"
        #: The node's own fault handle; its ``crash_restart`` is :meth:`crash_restart`.
        self.faults = FaultHandle(HttpTransport(self.http_url), restart=self.crash_restart)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.cluster.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.cluster._procs.log_path(self.broker_id)

    @property
    def running(self) -> bool:
        proc = self.cluster._procs.procs.get(self.broker_id)
        return proc is not None and proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown step at all, as a crash."""
        proc = self.cluster._procs.procs.get(self.broker_id)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a node a test SIGSTOPped dies all the same
            proc.kill()
            proc.wait()

    def stop(self) -> None:
        """SIGTERM: a graceful stop (controlled shutdown: its leaderships move first)."""
        proc = self.cluster._procs.procs.get(self.broker_id)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def start(self) -> None:
        """Start the (stopped) node again on its data and ports; returns once it serves and sees
        the cluster."""
        self.cluster._procs.restart(self.broker_id)
        self.cluster._wait_ready([self.broker_id])

    def restart(self) -> None:
        """Stop gracefully and start again."""
        self.stop()
        self.start()

    def crash_restart(self) -> None:
        """SIGKILL, then start again on the same data and ports."""
        self.kill()
        self.start()

    def __repr__(self) -> str:
        return f"ClusterNode({self.broker_id}, port={self.port}, http={self.http_port})"


class ClusterFault:
    """A lasting fault injected on several nodes: ``.faults`` by node id; ``.clear()`` and
    leaving its ``with`` block clear it on all of them."""

    def __init__(self, cluster: GroupcoordCluster, faults: dict[int, Fault]) -> None:
        self.cluster = cluster
        self.faults = faults

    @property
    def ids(self) -> dict[int, str]:
        return {node: fault.id for node, fault in self.faults.items()}

    def clear(self) -> bool:
        """Ends the fault on every node; False when it had ended by itself everywhere (a node
        killed meanwhile lost it with its process)."""
        cleared = False
        for node, fault in self.faults.items():
            if self.cluster.nodes[node].running:
                cleared = fault.clear() or cleared
        return cleared

    def __enter__(self) -> ClusterFault:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.clear()

    def __repr__(self) -> str:
        return f"ClusterFault({self.ids!r})"


class ClusterFaults:
    """The fault vocabulary across a cluster (see the module docstring)."""

    def __init__(self, cluster: GroupcoordCluster) -> None:
        self.cluster = cluster

    def _coordinator(self, group: str) -> FaultHandle:
        return self.cluster.nodes[self.cluster.coordinator_of(group)].faults

    def _everywhere(self, inject: Callable[[FaultHandle], Fault]) -> ClusterFault:
        faults: dict[int, Fault] = {}
        try:
            for node in self.cluster.running_nodes():
                faults[node.broker_id] = inject(node.faults)
        except BaseException:
            ClusterFault(self.cluster, faults).clear()  # never in force on only some nodes
            raise
        return ClusterFault(self.cluster, faults)

    # Group faults: at the group's coordinator.

    def rebalance(self, group: str) -> dict[str, Any]:
        return self._coordinator(group).rebalance(group)

    def kick_member(self, group: str, member: str | None = None) -> dict[str, Any]:
        return self._coordinator(group).kick_member(group, member)

    def move_coordinator(self, group: str, load_ms: int = 0, not_coordinator_ms: int = 0) -> dict[str, Any]:
        """A real move of the group's offsets partition's leadership to another in-sync replica;
        returns ``{"group", "partition", "from", "to"}`` once the new coordinator serves it."""
        return self._coordinator(group).move_coordinator(group, load_ms, not_coordinator_ms)

    # Request faults: on every running node.

    def fail(self, api: str | int, error: str | int, count: int | None = 1, group: str | None = None,
             topic: str | None = None, duration_ms: int | None = None) -> ClusterFault:
        """As ``FaultHandle.fail`` on every node: ``count`` counts on each node."""
        return self._everywhere(lambda h: h.fail(api, error, count, group, topic, duration_ms))

    def delay(self, api: str | int, ms: int, count: int | None = None, group: str | None = None,
              topic: str | None = None, duration_ms: int | None = None) -> ClusterFault:
        return self._everywhere(lambda h: h.delay(api, ms, count, group, topic, duration_ms))

    def pause_heartbeats(self, group: str | None = None, *, duration_ms: int) -> ClusterFault:
        return self._everywhere(lambda h: h.pause_heartbeats(group, duration_ms=duration_ms))

    def leader_unavailable(self, topic: str, partition: int, duration_ms: int) -> ClusterFault:
        return self._everywhere(lambda h: h.leader_unavailable(topic, partition, duration_ms))

    def drop_connections(self, client_id: str | None = None) -> dict[str, Any]:
        """Closes client connections on every node; ``{"dropped": total, "by_node": {id: n}}``."""
        by_node = {node.broker_id: int(node.faults.drop_connections(client_id).get("dropped", 0))
                   for node in self.cluster.running_nodes()}
        return {"dropped": sum(by_node.values()), "by_node": by_node}

    def crash_restart(self, node_id: int | None = None, *, group: str | None = None) -> int:
        """SIGKILL node ``node_id`` (or the coordinator of ``group``) and start it again on the
        same data; returns its id once it serves again."""
        if node_id is None:
            if group is None:
                raise ValueError("crash_restart needs node_id= or group= (the node coordinating that group)")
            node_id = self.cluster.coordinator_of(group)
        self.cluster.nodes[node_id].crash_restart()
        return node_id

    # Every node's lasting faults.

    def list(self) -> dict[int, list[dict[str, Any]]]:
        return {node.broker_id: node.faults.list() for node in self.cluster.running_nodes()}

    def clear(self) -> int:
        """Ends every lasting fault on every running node; returns how many."""
        return sum(node.faults.clear() for node in self.cluster.running_nodes())


class GroupcoordCluster:
    """ZooKeeper and ``nodes`` groupcoord nodes (broker ids 1..N) under ``directory``."""

    def __init__(self, directory: Path | str, nodes: int = 3, settings: dict[str, object] | None = None) -> None:
        self.directory = Path(directory)
        self.host = "127.0.0.1"
        self.settings = {**CLUSTER_DEFAULTS, **{k: _setting(v) for k, v in (settings or {}).items()}}
        self.offsets_partitions = int(self.settings["offsets.topic.num.partitions"])
        base = free_port_block(2 * nodes)
        http_ports = {b: base + nodes + b - 1 for b in range(1, nodes + 1)}
        self._procs = _Processes(self.directory, nodes, base, http_ports,
                                 [f"{k}={v}" for k, v in self.settings.items()])
        self.nodes: dict[int, ClusterNode] = {
            b: ClusterNode(self, b, base + b - 1, http_ports[b]) for b in range(1, nodes + 1)}
        self.faults = ClusterFaults(self)
        self._started = False

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap_servers for node in self.nodes.values())

    @property
    def zookeeper_connect(self) -> str:
        return self._procs.zookeeper.connect

    def running_nodes(self) -> list[ClusterNode]:
        return [node for node in self.nodes.values() if node.running]

    def start(self) -> GroupcoordCluster:
        missing = zookeeper_missing()
        if missing is not None:
            raise ZooKeeperMissing(missing)
        self._procs.start()
        self._started = True
        try:
            self._wait_ready(list(self.nodes))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every node (SIGTERM, at once: no leadership hand-over among nodes all leaving),
        then ZooKeeper."""
        if not self._started:
            return
        self._started = False
        for proc in self._procs.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        self._procs.stop()

    def __enter__(self) -> GroupcoordCluster:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # --- looking at the cluster over the wire ----------------------------------------------------

    def coordinator_of(self, group: str, timeout: float = READY_TIMEOUT_S) -> int:
        """The broker id coordinating ``group``: the node FindCoordinator names, once that node
        serves the group (answers its OffsetFetch without a coordinator error). Waits through a
        failover or a move in progress."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            for node in self.running_nodes():
                try:
                    found = self._find_coordinator(node, group)
                    if found is not None and found in self.nodes and self.nodes[found].running \
                            and self._serves(self.nodes[found], group):
                        return found
                    last = f"node {node.broker_id} names {found}"
                except OSError as exc:
                    last = exc
            if time.monotonic() > deadline:
                raise ClusterError(f"no node coordinated group '{group}' within {timeout:.0f} s (last: {last})")
            time.sleep(0.05)

    def _find_coordinator(self, node: ClusterNode, group: str) -> int | None:
        req = request_class(ApiKey.FIND_COORDINATOR)
        response = _call(self.host, node.port, ApiKey.FIND_COORDINATOR, 1, req(version=1, key=group, key_type=0))
        return int(response.node_id) if response.error_code == ErrorCode.NONE else None

    def _serves(self, node: ClusterNode, group: str) -> bool:
        req = request_class(ApiKey.OFFSET_FETCH)
        response = _call(self.host, node.port, ApiKey.OFFSET_FETCH, 7,
                         req(version=7, group_id=group, topics=None, require_stable=False))
        return response.error_code not in _NOT_SERVING

    def _brokers_seen(self, node: ClusterNode) -> set[int]:
        req = request_class(ApiKey.METADATA)
        response = _call(self.host, node.port, ApiKey.METADATA, 1, req(version=1, topics=[]))
        return {int(b.node_id) for b in response.brokers}

    def _wait_ready(self, broker_ids: list[int]) -> None:
        """Until each of ``broker_ids`` sees every running node, and every offsets partition has
        a coordinator that serves (the first lookup creates the topic)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        running = {node.broker_id for node in self.running_nodes()}
        for broker_id in broker_ids:
            node = self.nodes[broker_id]
            seen: set[int] = set()
            while not running <= seen:
                try:
                    seen = self._brokers_seen(node)
                except OSError:
                    seen = set()
                if running <= seen:
                    break
                if not node.running:
                    raise ClusterError(f"node {broker_id} exited at start-up; its log: {node.log_path}")
                if time.monotonic() > deadline:
                    raise ClusterError(f"node {broker_id} saw brokers {sorted(seen)}, not all of {sorted(running)}, "
                                       f"within {READY_TIMEOUT_S:.0f} s; its log: {node.log_path}")
                time.sleep(0.05)
        for group in _one_group_per_partition(self.offsets_partitions):
            self.coordinator_of(group, max(1.0, deadline - time.monotonic()))


def _setting(value: object) -> str:
    """A setting's value as ``--set`` takes it (``True`` → ``true``, as in a properties file)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _one_group_per_partition(partitions: int) -> Iterator[str]:
    """Group ids whose offsets partitions are 0..partitions-1, one each (for probing)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        name = f"groupcoord-cluster-probe-{i}"
        found.setdefault(partition_for(name, partitions), name)
        i += 1
    return iter(found[p] for p in sorted(found))


@contextmanager
def running_cluster(directory: Path | str, nodes: int = 3,
                    settings: dict[str, object] | None = None) -> Iterator[GroupcoordCluster]:
    """A started cluster, stopped on exit."""
    cluster = GroupcoordCluster(directory, nodes, settings)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
