"""Locate the stock Kafka clients installed by ``tests/clients/setup_clients.sh`` and run them.

Java (kafka-clients 3.9.1 jars), kafkajs 2.2.4 and kcat live in a cache outside the repo:
``$GROUPCOORD_CLIENTS_CACHE`` or ``~/.cache/groupcoord-clients``. A missing tool makes the test
FAIL (never skip) with a message that says to run the setup script.

Java sources under ``tests/clients/java`` are compiled once per test session into a temp dir.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
JAVA_SRC = HERE / "java"
JS_SRC = HERE / "js"
SETUP = HERE / "setup_clients.sh"
SETUP_HINT = f"run `bash {SETUP.relative_to(HERE.parent.parent)}` (from the repo root) to install the stock clients"

JARS = ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")


def cache_dir() -> Path:
    env = os.environ.get("GROUPCOORD_CLIENTS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "groupcoord-clients"


def _missing(what: str) -> None:
    pytest.fail(f"{what} is missing: {SETUP_HINT}", pytrace=False)


def _which(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        _missing(f"`{name}` (not on PATH)")
    return path  # type: ignore[return-value]


# ------------------------------------------------------------------------------ locate


def java_classpath() -> str:
    """The kafka-clients 3.9.1 classpath (jars joined with os.pathsep)."""
    java_dir = cache_dir() / "java"
    jars = [java_dir / name for name in JARS]
    for jar in jars:
        if not jar.is_file() or jar.stat().st_size == 0:
            _missing(f"Java client jar {jar}")
    return os.pathsep.join(str(j) for j in jars)


def kafkajs_dir() -> Path:
    """The npm prefix holding ``node_modules/kafkajs`` (2.2.4)."""
    js_dir = cache_dir() / "js"
    if not (js_dir / "node_modules" / "kafkajs" / "package.json").is_file():
        _missing(f"kafkajs in {js_dir}/node_modules")
    return js_dir


def kcat_path() -> str:
    return _which("kcat")


# ------------------------------------------------------------------------------ run


@dataclass
class Result:
    args: list[str]
    returncode: int | None  # None: killed after the timeout
    stdout: str
    stderr: str
    timed_out: bool = False

    def describe(self) -> str:
        status = "TIMED OUT" if self.timed_out else f"exit {self.returncode}"
        return (f"$ {' '.join(self.args)}\n[{status}]\n--- stdout ---\n{self.stdout}"
                f"\n--- stderr ---\n{self.stderr[-6000:]}")

    def check(self) -> Result:
        """Fail the test (showing all output) unless the process exited 0 in time."""
        if self.timed_out or self.returncode != 0:
            pytest.fail(f"client run failed:\n{self.describe()}", pytrace=False)
        return self

    def kv(self) -> dict[str, str]:
        """``key=value`` lines of stdout (later keys win)."""
        out: dict[str, str] = {}
        for line in self.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep and key and " " not in key:
                out[key.strip()] = value.strip()
        return out

    def json(self) -> Any:
        """The last stdout line that parses as JSON."""
        for line in reversed(self.stdout.splitlines()):
            line = line.strip()
            if line.startswith(("{", "[")):
                try:
                    return json.loads(line)
                except ValueError:
                    continue
        pytest.fail(f"no JSON line in client output:\n{self.describe()}", pytrace=False)


def run(args: Sequence[str], timeout: float = 45.0, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> Result:
    """Run a command with a timeout; on timeout kill it and return what it printed."""
    args = [str(a) for a in args]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env,
                            cwd=cwd, text=True, errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return Result(args, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Result(args, None, out, err, timed_out=True)


_compiled: dict[tuple[str, ...], Path] = {}


def _cleanup(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def compile_java(*sources: str) -> Path:
    """Compile ``tests/clients/java/<name>`` sources (once per session); return the class dir."""
    key = tuple(sorted(sources))
    if key in _compiled:
        return _compiled[key]
    javac = _which("javac")
    classpath = java_classpath()
    out_dir = Path(tempfile.mkdtemp(prefix="groupcoord-javac-"))
    atexit.register(_cleanup, out_dir)
    files = [JAVA_SRC / s for s in key]
    for f in files:
        if not f.is_file():
            pytest.fail(f"Java source {f} not found", pytrace=False)
    res = run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(out_dir), *map(str, files)],
              timeout=120)
    if res.returncode != 0:
        pytest.fail(f"javac failed:\n{res.describe()}", pytrace=False)
    _compiled[key] = out_dir
    return out_dir


def run_java(main_class: str, args: Sequence[str] = (), sources: Sequence[str] | None = None,
             timeout: float = 45.0) -> Result:
    """Compile (once) and run ``main_class`` from ``tests/clients/java``.

    ``sources`` defaults to ``[<main_class>.java]``.
    """
    java = _which("java")
    classes = compile_java(*(sources or [f"{main_class}.java"]))
    classpath = os.pathsep.join([str(classes), java_classpath()])
    return run([java, "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                main_class, *args], timeout=timeout)


def run_node(script: str, args: Sequence[str] = (), timeout: float = 45.0) -> Result:
    """Run ``tests/clients/js/<script>`` with kafkajs resolvable via NODE_PATH."""
    node = _which("node")
    modules = kafkajs_dir() / "node_modules"
    path = JS_SRC / script
    if not path.is_file():
        pytest.fail(f"node script {path} not found", pytrace=False)
    return run([node, str(path), *args], timeout=timeout,
               env={"NODE_PATH": str(modules), "KAFKAJS_NO_PARTITIONER_WARNING": "1"})


def run_kcat(args: Sequence[str], timeout: float = 30.0) -> Result:
    return run([kcat_path(), *args], timeout=timeout)


# ------------------------------------------------------------------------------ expectations

import re as _re
import uuid as _uuid

#: Kafka cluster ids are a base64url-encoded UUID without padding: 22 characters.
CLUSTER_ID_RE = _re.compile(r"^[A-Za-z0-9_-]{22}$")

#: The server's default node id (``node.id``), which is also the controller.
NODE_ID = 1


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{_uuid.uuid4().hex[:10]}"
