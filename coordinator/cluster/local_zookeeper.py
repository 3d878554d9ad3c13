"""A standalone ZooKeeper server from the machine's installation, on a loopback port with a data
directory of its own: for the tests, and for a local cluster on one machine.

Debian's ``zookeeper`` package (3.8) puts the server in ``/usr/share/java/zookeeper.jar``, whose
manifest names the libraries it needs. We run ``ZooKeeperServerMain`` in the foreground with a
minimal config (each setting is in ZooKeeper's administrator's guide,
https://zookeeper.apache.org/doc/r3.8.0/zookeeperAdmin.html): the default NIO connection factory
(Debian's jar does not list netty-codec, which Netty would need), no admin server, only the
``srvr``/``ruok`` four-letter words, and ``maxSessionTimeout`` raised to 60 s so tests can ask for
long sessions. ``GROUPCOORD_ZOOKEEPER_CLASSPATH`` points elsewhere (e.g. the lib/*.jar of
an Apache ZooKeeper tarball).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from .zookeeper import ClusterError

__all__ = ["LocalZooKeeper", "zookeeper_classpath", "INSTALL_HINT"]

DEBIAN_JAR = Path("/usr/share/java/zookeeper.jar")
INSTALL_HINT = ("ZooKeeper is not installed: on Debian or Ubuntu run `apt-get install -y zookeeper` (as root; "
                "`make test` does it), elsewhere set GROUPCOORD_ZOOKEEPER_CLASSPATH to the ZooKeeper jars "
                "(e.g. '/opt/zookeeper/lib/*')")


def zookeeper_classpath() -> str:
    """The server's class path, or ClusterError with what to install."""
    configured = os.environ.get("GROUPCOORD_ZOOKEEPER_CLASSPATH")
    if configured:
        return configured
    if DEBIAN_JAR.is_file():
        return str(DEBIAN_JAR)
    raise ClusterError(INSTALL_HINT)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalZooKeeper:
    """``start()`` runs the server and waits until it answers; ``stop()`` ends it (SIGTERM)."""

    def __init__(self, data_dir: Path, port: int | None = None, tick_time_ms: int = 2000) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or _free_port()
        self.tick_time_ms = tick_time_ms
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "zookeeper.log"

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        java = shutil.which("java")
        if java is None:
            raise ClusterError("ZooKeeper needs Java: `java` is not on PATH")
        classpath = zookeeper_classpath()
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=srvr,ruok\n"
            "maxSessionTimeout=60000\n")
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [java, "-Xmx256m", "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ClusterError(f"ZooKeeper exited with {self.proc.returncode} at start-up:\n{self.log_text()}")
            # Serving, not just up: ``ruok`` says imok while the server still loads its database, and a
            # connection ZooKeeper 3.8 closes in that window stays open (an NPE in its close path,
            # ZOOKEEPER-5051, https://github.com/apache/zookeeper/pull/2391): a client connecting then
            # hangs for its whole connect timeout. ``srvr`` names the mode only once the server serves.
            if "Mode: " in (self.four_letter("srvr") or ""):
                return
            time.sleep(0.1)
        self.stop()
        raise ClusterError(f"ZooKeeper did not answer on {self.connect} within {timeout:.0f} s:\n{self.log_text()}")

    def four_letter(self, word: str) -> str | None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as s:
                s.sendall(word.encode())
                chunks = []
                while chunk := s.recv(4096):
                    chunks.append(chunk)
                return b"".join(chunks).decode(errors="replace")
        except OSError:
            return None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
