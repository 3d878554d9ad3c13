"""The Makefile's two installs: `make serve` installs only the server's own dependencies
(pyproject `dependencies`, `pip install -e .`); `make test` installs the test extras
(`-e '.[test]'`: pyspark, the stock clients...). A `make serve` after `make test` installs nothing,
a `make test` after `make serve` installs the extras, and editing pyproject.toml reinstalls.

Most tests run the real Makefile with real make in a scratch copy, against a fake interpreter
that records what it is asked to do instead of installing (no network, milliseconds). One test,
marked slow, does the real serving install in a scratch copy and checks pyspark is absent.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import serving_copy

REPO = Path(__file__).resolve().parent.parent

# Stands in for `python3` and, once "installed" by `-m venv`, for `.venv/bin/python` and
# `.venv/bin/groupcoord`: each call appends one line (its name and arguments) to $FAKE_LOG.
FAKE_PYTHON = """#!/bin/bash
echo "$(basename "$0") $*" >> "$FAKE_LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin"
    cp "$0" "$3/bin/python"
    cp "$0" "$3/bin/groupcoord"
fi
"""


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A scratch copy holding what the Makefile reads, without a .venv, and a fake python3."""
    work = tmp_path / "repo"
    (work / "tests" / "clients").mkdir(parents=True)
    shutil.copy(REPO / "Makefile", work / "Makefile")
    shutil.copy(REPO / "pyproject.toml", work / "pyproject.toml")
    # `make test` runs this script; here it only leaves a trace.
    (work / "tests" / "clients" / "setup_clients.sh").write_text('echo "setup_clients" >> "$FAKE_LOG"\n')
    (work / "tests" / "coordinator" / "cluster").mkdir(parents=True)
    (work / "tests" / "coordinator" / "cluster" / "setup_zookeeper.sh").write_text('echo "setup_zookeeper" >> "$FAKE_LOG"\n')
    (work / "tests" / "browser").mkdir(parents=True, exist_ok=True)
    (work / "tests" / "browser" / "setup_browser.sh").write_text('echo "setup_browser" >> "$FAKE_LOG"\n')
    (work / "tests" / "coordinator" / "ops").mkdir(parents=True, exist_ok=True)
    (work / "tests" / "coordinator" / "ops" / "setup_prometheus.sh").write_text('echo "setup_prometheus" >> "$FAKE_LOG"\n')
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return work


def _make(clone: Path, *args: str) -> list[str]:
    """Run make in the copy; the fake interpreter's log lines written by this run."""
    log = clone.parent / "fake.log"
    before = log.read_text().splitlines() if log.exists() else []
    env = {**os.environ, "FAKE_LOG": str(log)}
    env.pop("MAKEFLAGS", None)
    env.pop("MAKELEVEL", None)
    res = subprocess.run(["make", "--no-print-directory", f"PYTHON={clone.parent / 'python3'}", *args],
                         cwd=clone, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    return (log.read_text().splitlines() if log.exists() else [])[len(before):]


def _installs(lines: list[str]) -> list[str]:
    """What each `pip install` of the run installed (its last argument, shell quotes removed)."""
    return [line.split()[-1] for line in lines if " -m pip install " in line]


def test_serve_on_a_fresh_clone_installs_only_the_server(clone: Path) -> None:
    lines = _make(clone, "serve", "ARGS=--listen 127.0.0.1:19092")
    assert lines[0].startswith("python3 -m venv .venv"), lines
    assert _installs(lines) == ["."], lines
    assert not any("[test]" in line or "pyspark" in line for line in lines), lines
    assert lines[-1] == "groupcoord serve --listen 127.0.0.1:19092", lines


def test_test_on_a_fresh_clone_installs_the_test_extras(clone: Path) -> None:
    lines = _make(clone, "test", "PYTEST_ARGS=-x -q")
    assert _installs(lines) == [".[test]"], lines
    assert lines[-5:] == ["setup_clients", "setup_zookeeper", "setup_browser", "setup_prometheus", "python -m pytest -n 3 --dist loadfile -x -q"], lines


def test_test_after_serve_installs_the_extras_and_serve_after_test_installs_nothing(clone: Path) -> None:
    assert _installs(_make(clone, "serve")) == ["."]
    assert _installs(_make(clone, "test")) == [".[test]"]
    # The full install covers serving: no narrower install over it, nothing to downgrade.
    lines = _make(clone, "serve")
    assert _installs(lines) == [] and lines == ["groupcoord serve"], lines
    assert _installs(_make(clone, "test")) == []
    assert _make(clone, "serve") == ["groupcoord serve"]


def test_serve_after_test_on_a_fresh_clone_installs_nothing(clone: Path) -> None:
    assert _installs(_make(clone, "test")) == [".[test]"]
    assert _make(clone, "serve") == ["groupcoord serve"]


def test_editing_pyproject_reinstalls(clone: Path) -> None:
    assert _installs(_make(clone, "serve")) == ["."]
    assert _installs(_make(clone, "serve")) == []
    with open(clone / "pyproject.toml", "a") as f:
        f.write("\n# a changed dependency list\n")
    assert _installs(_make(clone, "serve")) == ["."]
    assert _installs(_make(clone, "test")) == [".[test]"]
    with open(clone / "pyproject.toml", "a") as f:
        f.write("# changed again\n")
    assert _installs(_make(clone, "test")) == [".[test]"]
    assert _installs(_make(clone, "serve")) == []


def test_dry_run_lines(clone: Path) -> None:
    """`make -n` (nothing run) on a copy without a .venv: the install line each target would run."""
    def dry(target: str) -> list[str]:
        res = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=clone, capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        return [line for line in res.stdout.splitlines() if "pip install" in line]

    (serve_line,) = dry("serve")
    assert serve_line.endswith(" -e .") and "[test]" not in serve_line and "pyspark" not in serve_line
    (test_line,) = dry("test")
    assert test_line.endswith(" -e '.[test]'")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_real_serving_install_has_no_pyspark(tmp_path: Path) -> None:
    """`make install-serve` for real in a scratch copy: the server and its dependencies import,
    the test extras are absent. About 7 s with pip's wheels cached (2026-11-25)."""
    work = serving_copy(tmp_path)
    base_python = getattr(sys, "_base_executable", sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "MAKEFLAGS", "MAKELEVEL")}
    res = subprocess.run(["make", "--no-print-directory", f"PYTHON={base_python}", "install-serve"], cwd=work,
                         env=env, capture_output=True, text=True, timeout=220)
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    venv_python = work / ".venv" / "bin" / "python"
    imports = "import kafka, crc32c, cramjam, re2, coordinator.cli, coordinator.group.topic_regex, storage.log"
    ok = subprocess.run([str(venv_python), "-c", imports],
                        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    for absent in ("pyspark", "pyarrow", "pandas", "confluent_kafka", "aiokafka", "pytest"):
        res = subprocess.run([str(venv_python), "-c", f"import {absent}"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60)
        assert res.returncode != 0 and "ModuleNotFoundError" in res.stderr, (absent, res.stderr)
    version = subprocess.run([str(work / ".venv" / "bin" / "groupcoord"), "--version"], capture_output=True,
                             text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("groupcoord "), version
