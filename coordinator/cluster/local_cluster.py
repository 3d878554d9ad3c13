"""``groupcoord cluster up``: ZooKeeper and N nodes on loopback ports, in one command.

Layout under the cluster directory: ``zookeeper/`` (its data and config; the port is kept in
``zoo.cfg`` so a second ``up`` on the same directory finds the same cluster) and ``node-<id>/``
per node, with the node's log in ``node-<id>.log``. Node ``i`` (1..N) listens on
``base_port + i - 1``. In a ``--set`` value, ``{port}`` and ``{id}`` stand for the node's port and
broker id, so ``--set 'listeners=SASL_SSL://127.0.0.1:{port}'`` gives every node its own secured
listener (a ``listeners`` setting replaces the PLAINTEXT one the port alone would mean; docs/listeners.md). Ctrl-C or SIGTERM stops the nodes gracefully (SIGTERM, as an operator
would), then ZooKeeper; a node that exits on its own is reported and stops the rest.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from .local_zookeeper import LocalZooKeeper
from .zookeeper import ClusterError

__all__ = ["LocalCluster", "listening_logged", "run_local_cluster"]

#: How long a node may take to listen, and to stop after SIGTERM.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def _kept_port(zoo_cfg: Path) -> int | None:
    try:
        match = re.search(r"^clientPort=(\d+)$", zoo_cfg.read_text(), re.MULTILINE)
    except FileNotFoundError:
        return None
    return int(match.group(1)) if match else None


def listening_logged(log: bytes, port: int) -> bool:
    """Whether a node's log says it listens on ``port``: on any address, as a ``listeners`` setting
    may bind ``localhost`` (``::1`` first on some hosts), ``0.0.0.0`` or the default interface."""
    return re.search(rb"msg=listening listen=\S*:%d " % port, log) is not None


class LocalCluster:
    def __init__(self, directory: Path, nodes: int, base_port: int, host: str = "127.0.0.1",
                 settings: list[str] | None = None, tick_time_ms: int = 2000) -> None:
        if nodes < 1:
            raise ClusterError("a cluster needs at least one node (--nodes)")
        self.directory = Path(directory)
        self.host = host
        self.ports = [base_port + i for i in range(nodes)]
        self.settings = list(settings or [])
        zk_dir = self.directory / "zookeeper"
        self.zookeeper = LocalZooKeeper(zk_dir, port=_kept_port(zk_dir / "zoo.cfg"), tick_time_ms=tick_time_ms)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._log_start: dict[int, int] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{port}" for port in self.ports)

    def log_path(self, broker_id: int) -> Path:
        return self.directory / f"node-{broker_id}.log"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.zookeeper.start()
        try:
            for broker_id, port in enumerate(self.ports, start=1):
                self._start_node(broker_id, port)
            for broker_id, port in enumerate(self.ports, start=1):
                self._wait_listening(broker_id, port)
        except BaseException:
            self.stop()
            raise

    def node_args(self, broker_id: int, port: int) -> list[str]:
        """The ``serve`` command line of node ``broker_id``."""
        settings = [item.replace("{port}", str(port)).replace("{id}", str(broker_id)) for item in self.settings]
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(self.directory / f"node-{broker_id}"),
                "--set", f"broker.id={broker_id}", "--set", f"zookeeper.connect={self.zookeeper.connect}"]
        # --listen wins over --set (it is applied last), so it is given only when no setting names
        # the listeners: otherwise every node would serve one PLAINTEXT listener whatever was set.
        if not any(item.partition("=")[0].strip() == "listeners" for item in settings):
            args += ["--listen", f"{self.host}:{port}"]
        for item in settings:
            args += ["--set", item]
        return args

    def _start_node(self, broker_id: int, port: int) -> None:
        args = self.node_args(broker_id, port)
        with open(self.log_path(broker_id), "ab") as log:
            self._log_start[broker_id] = log.tell()  # the log is appended to across runs
            # A session of its own: Ctrl-C in the terminal reaches this command, which then stops
            # each node with SIGTERM, in order, rather than every process at once.
            self.procs[broker_id] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def restart(self, broker_id: int) -> None:
        """Start a node again (after a test killed it) and wait until it listens."""
        proc = self.procs.get(broker_id)
        if proc is not None and proc.poll() is None:
            raise ClusterError(f"node {broker_id} is still running")
        port = self.ports[broker_id - 1]
        self._start_node(broker_id, port)
        self._wait_listening(broker_id, port)

    def add_node(self, port: int) -> int:
        """Start one more node (the next broker id) on ``port``, as an operator adding a broker to
        the cluster would; returns its id once it listens."""
        self.ports.append(port)
        broker_id = len(self.ports)
        self._start_node(broker_id, port)
        self._wait_listening(broker_id, port)
        return broker_id

    def _wait_listening(self, broker_id: int, port: int) -> None:
        # Ready when the node's own log says so: a connect probe could reach another process
        # already bound to the port while the node fails to bind it.
        deadline = time.monotonic() + START_TIMEOUT_S
        proc = self.procs[broker_id]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ClusterError(f"node {broker_id} exited with {proc.returncode} at start-up; "
                                   f"its log: {self.log_path(broker_id)}\n{self._tail(broker_id)}")
            with open(self.log_path(broker_id), "rb") as log:
                log.seek(self._log_start[broker_id])
                if listening_logged(log.read(), port):
                    return
            time.sleep(0.1)
        raise ClusterError(f"node {broker_id} did not listen on {self.host}:{port} within {START_TIMEOUT_S:.0f} s; "
                           f"its log: {self.log_path(broker_id)}")

    def _tail(self, broker_id: int) -> str:
        try:
            return "\n".join(self.log_path(broker_id).read_text(errors="replace").splitlines()[-10:])
        except FileNotFoundError:
            return ""

    def exited(self) -> list[tuple[int, int]]:
        return [(broker_id, proc.returncode) for broker_id, proc in self.procs.items() if proc.poll() is not None]

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.zookeeper.stop()


def run_local_cluster(directory: Path, nodes: int, base_port: int, settings: list[str], out: TextIO) -> int:
    """Start, print where to connect, wait for Ctrl-C/SIGTERM or a node's exit, stop. Exit status:
    0 after a requested stop, 1 if a node exited on its own or the cluster could not start."""
    cluster = LocalCluster(directory, nodes, base_port, settings=settings)
    stop_requested = False

    def request_stop(_sig: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            cluster.start()
        except ClusterError as exc:
            print(f"groupcoord: {exc}", file=sys.stderr)
            return 1
        print(f"zookeeper: {cluster.zookeeper.connect}", file=out)
        print(f"bootstrap: {cluster.bootstrap}", file=out)
        print(f"logs: {directory}/node-<id>.log; Ctrl-C stops the cluster", file=out, flush=True)
        status = 0
        while not stop_requested:
            gone = cluster.exited()
            if gone:
                for broker_id, code in gone:
                    print(f"node {broker_id} exited with {code}; stopping the cluster "
                          f"(log: {cluster.log_path(broker_id)})", file=sys.stderr)
                status = 1
                break
            time.sleep(0.2)
        print("stopping", file=out, flush=True)
        cluster.stop()
        return status
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
