"""CI's fuzz pass: every harness under atheris for a few seconds (issue 22).

A short, time-boxed run per harness on every CI run, as a subprocess of ``tests.fuzz.run``: the
whole pass stays under about two minutes for eight or so harnesses. A crash fails the test and
names the input ``run.py`` saved under ``tests/fuzz/regressions/<name>/``; commit it and it is
replayed by ``test_regressions.py`` from then on. atheris is in the test extras, so a missing
atheris is a broken install and fails here rather than skipping.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fuzz.harness import discover
from tests.fuzz.run import REPO

#: Seconds of fuzzing per harness; with start-up (~2-3 s) about 11 s a harness.
SECONDS = 8


def test_atheris_installed() -> None:
    import atheris  # noqa: F401 - the import is the test

    assert hasattr(atheris, "Fuzz")


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", discover())
def test_fuzz_pass(name: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.run", name, "--seconds", str(SECONDS), "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=110)
    summary = [line for line in proc.stdout.splitlines() if line.startswith(("fuzz ", "  saved "))]
    assert summary, f"no summary from the fuzz run:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, (f"fuzz_{name} crashed:\n" + "\n".join(summary) + "\n" + proc.stderr[-4000:])
    execs = int(summary[-1].split(": ")[1].split()[0])
    assert execs > 0, summary[-1]
