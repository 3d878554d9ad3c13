"""Shared fixtures: a real ``groupcoord serve`` process on a free loopback port.

Tests that talk to the server use it through real sockets. ``ServerProcess`` can SIGKILL and
restart the server on the same data directory and port, for crash tests.
"""

from __future__ import annotations

# hypothesis is imported here, before any test starts threads: otherwise its pytest plugin imports
# it at the terminal summary, and CPython 3.11's AST builder (whose recursion counter the compiler
# shares between threads, gh-106905, fixed in 3.11.8) may fail that import with "AST constructor
# recursion depth mismatch" while a test's server thread is still compiling or importing.
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis  # noqa: F401  (see the comment above)
import pytest

from coordinator.testing.settings import free_port_block, worker_port_range

REPO = Path(__file__).resolve().parent.parent


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``condition`` until it returns something true (returned), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout}s: {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker_port_range() -> tuple[int, int]:
    """This process's share of 20000..32000 (coordinator/testing/settings.py, shared with the
    testing toolkit's cluster)."""
    return worker_port_range()


def free_ports(count: int) -> int:
    """A base port with ``count`` consecutive bindable ports below the kernel's ephemeral range
    (32768..), where no outgoing connection of another test can be holding one of them."""
    return free_port_block(count)


def serving_copy(root: Path) -> Path:
    """What a fresh clone holds for serving, copied under ``root``: the Makefile, pyproject, the
    README and the four packages (no tests, no .venv)."""
    work = root / "repo"
    work.mkdir()
    for name in ("Makefile", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, work / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("protocol", "storage", "coordinator", "pipeline"):
        shutil.copytree(REPO / package, work / package, ignore=skip)
    return work


class ServerProcess:
    """A ``groupcoord serve`` subprocess. Its stderr goes to ``log_path``."""

    def __init__(self, data_dir: Path, settings: dict[str, str] | None = None, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.settings = dict(settings or {})
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.log_path = data_dir.parent / f"server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(self.data_dir),
                "--listen", self.bootstrap]
        for key, value in self.settings.items():
            args += ["--set", f"{key}={value}"]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"server did not listen within {timeout}s:\n{self.log_text()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a real crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for the graceful exit; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)

    def restart(self) -> None:
        if self.alive():
            self.stop()
        self.start()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[object]:
    """Call with optional settings to start a server; all are stopped at teardown."""
    started: list[ServerProcess] = []

    def make(settings: dict[str, str] | None = None, start: bool = True) -> ServerProcess:
        data = tmp_path / f"data-{len(started)}"
        server = ServerProcess(data, settings)
        started.append(server)
        if start:
            server.start()
        return server

    yield make
    for s in started:
        if s.alive():
            s.stop()


@pytest.fixture
def server(server_factory) -> ServerProcess:  # type: ignore[no-untyped-def]
    """A running server with default settings and a fresh data directory."""
    return server_factory()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for a whole test module, for tests that only read or create unique names."""
    data = tmp_path_factory.mktemp("shared") / "data"
    s = ServerProcess(data)
    s.start()
    yield s
    if s.alive():
        s.stop()


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
