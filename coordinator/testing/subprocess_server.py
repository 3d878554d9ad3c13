"""A groupcoord node as a child process: ``python -m coordinator serve``, with the HTTP listener
(``http.listen``, where the fault endpoint /faults is) and fault injection on.

The same surface as ``EmbeddedServer`` (coordinator/testing/embedded.py): ``start``, ``stop``,
``crash_restart``, ``bootstrap_servers``, ``faults`` (here over HTTP), plus ``kill`` and
``log_text``. The child runs this process's interpreter and the same ``coordinator`` package (its
directory goes first on the child's ``PYTHONPATH``); its log (logfmt) goes to a file next to the
data directory. Both ports are picked once (the OS hands out free ones) and kept across restarts.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .kafka_python_warnings import kafka_python_warnings_ignored
from .server_base import ServerBase
from .settings import free_port

if TYPE_CHECKING:
    from .faults import FaultHandle

__all__ = ["SubprocessServer"]

#: The log line a node writes once it serves (coordinator/app.py).
_LISTENING = re.compile(r"\bmsg=listening\b")


class SubprocessServer(ServerBase):
    def __init__(self, data_dir: str | Path, settings: Mapping[str, object] | None = None, port: int = 0) -> None:
        super().__init__(data_dir, settings, port)
        self.settings["test.faults.enable"] = "true"
        #: The HTTP listener's port: the caller's ``http.listen`` one, else picked at the first start.
        self.http_port = int(self.settings.get("http.listen", "").rpartition(":")[2] or 0)
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def config(self) -> Any:
        """The node's configuration, as its command line gives it."""
        from ..config import load_config

        return load_config(overrides=self._overrides(), data_dir=str(self.data_dir), listen=self.bootstrap_servers)

    @property
    def faults(self) -> FaultHandle:
        """The ``FaultHandle`` (coordinator/testing/faults.py) over the node's /faults endpoint."""
        if self._faults is None:
            with kafka_python_warnings_ignored():  # the handle's code is the node's too
                from .faults import FaultHandle, HttpTransport

            self._faults = FaultHandle(HttpTransport(self.http_url), restart=self.crash_restart)
        return self._faults

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _overrides(self) -> list[str]:
        settings = dict(self.settings)
        settings["http.listen"] = f"{self.host}:{self.http_port}"
        return [f"{k}={v}" for k, v in settings.items()]

    def start(self, timeout: float = 30.0) -> SubprocessServer:
        """Start the process; returns once it logged ``listening`` and its port accepts."""
        if self.running:
            raise RuntimeError("the server is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port(self.host)
        self.http_port = self.http_port or free_port(self.host)
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(self.data_dir),
                "--listen", self.bootstrap_servers]
        for item in self._overrides():
            args += ["--set", item]
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parent.parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self._this_run_log()}")
            if _LISTENING.search(self._this_run_log()) and _accepts(self.host, self.port):
                return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"the server did not listen within {timeout} s:\n{self._this_run_log()}")

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait for the graceful exit (SIGKILL after ``timeout``); the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a real crash."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(20)

    def crash_restart(self, timeout: float = 30.0) -> None:
        """SIGKILL, then a new process on the same data directory and ports."""
        self.kill()
        self.start(timeout)

    def log_text(self) -> str:
        """Everything the node's processes logged (every start of it)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _this_run_log(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> SubprocessServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False
