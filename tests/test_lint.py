"""The linter and the type checker, run with the suite so that `make test` (and CI) fail on a finding.

Their configuration is pyproject.toml's ``[tool.ruff]`` and ``[tool.mypy]``: ruff's pyflakes, isort,
pyupgrade and bugbear rules over the code, the tests and the benchmarks; mypy over the four
packages, strictly for protocol/, coordinator/group/ and coordinator/runtime/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["protocol", "storage", "coordinator", "pipeline"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=240)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", *PACKAGES, "tests", "bench")
    assert done.returncode == 0, f"ruff check:\n{done.stdout}{done.stderr}"


def test_mypy_finds_nothing() -> None:
    # No cache written into the checkout (a run over the four packages takes seconds).
    done = _run("mypy", "--cache-dir", os.devnull, *PACKAGES)
    assert done.returncode == 0, f"mypy:\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout, done.stdout


def test_every_import_of_ours_in_the_tests_resolves() -> None:
    """mypy does not check tests/, and pyflakes cannot see into another module: a name imported
    from one of our modules inside a function (as fixtures do) fails only when that test runs.
    Here every ``from <our module> import name`` in tests/, at any depth, must name something."""
    import ast
    import importlib

    ours = (*PACKAGES, "tests")
    missing = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.split(".")[0] in ours):
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                if alias.name == "*" or hasattr(module, alias.name):
                    continue
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{alias.name}")
    assert not missing, "imports of names that do not exist:\n" + "\n".join(missing)
