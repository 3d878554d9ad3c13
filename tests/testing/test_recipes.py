"""The recipes of docs/testing.md, run as written.

Every ```python block right below a ``<!-- recipe: NAME -->`` line is a complete test file for a
user's project. Each is written to an empty directory and run by a pytest of its own (a child
process, so nothing of this suite's configuration — its conftest, its ini, its strict markers —
helps it), with ``PYTHONPATH`` set to this checkout: the ``pytest11`` entry point of the
installed package then loads this checkout's ``coordinator.testing.plugin``, which
``test_the_child_runs_load_this_checkouts_plugin`` checks. A recipe passes when its run passes
with exactly the number of tests the doc's recipe table gives it, none skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "testing.md"

RECIPE = re.compile(r"^<!-- recipe: ([a-z0-9-]+) -->\n```python\n(.*?)^```$", re.M | re.S)
TABLE_ROW = re.compile(r"^\| `([a-z0-9-]+)` \| [^|]+ \| (\d+) \|", re.M)

# A recipe starts servers and stock clients; the cluster one a ZooKeeper and three nodes.
CHILD_TIMEOUT_S = 150


def recipes() -> dict[str, str]:
    text = DOC.read_text()
    found: dict[str, str] = {}
    for name, source in RECIPE.findall(text):
        assert name not in found, f"two recipes named {name!r} in {DOC}"
        found[name] = source
    return found


def recipe_table() -> dict[str, int]:
    """The tests count of each row of the table in the Recipes section."""
    section = DOC.read_text().split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    return {name: int(count) for name, count in TABLE_ROW.findall(section)}


def child_env() -> dict[str, str]:
    """This process's environment without pytest's own variables (a user's shell has none), with
    this checkout first on the import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def test_every_recipe_is_in_the_table_and_compiles() -> None:
    found, table = recipes(), recipe_table()
    assert len(found) >= 6, f"recipes found in {DOC}: {sorted(found)}"
    assert sorted(found) == sorted(table), "the recipe table and the recipe blocks must name the same recipes"
    for name, source in found.items():
        compile(source, f"recipe {name}", "exec")
        defined = len(re.findall(r"^(?:async )?def test_", source, re.M))
        assert defined == table[name], f"recipe {name} defines {defined} tests, the table says {table[name]}"


def test_the_child_runs_load_this_checkouts_plugin(tmp_path: Path) -> None:
    # The package is installed (editable, maybe from another checkout); PYTHONPATH must win so the
    # recipes below test this checkout's plugin, fixtures and fault handle.
    probe = ("from importlib.metadata import entry_points\n"
             "[ep] = [ep for ep in entry_points(group='pytest11') if ep.name == 'groupcoord']\n"
             "print(ep.value)\n"
             "print(ep.load().__file__)\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=child_env(),
                         capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    assert out[0] == "coordinator.testing.plugin"
    assert Path(out[1]).resolve() == REPO / "coordinator" / "testing" / "plugin.py"


@pytest.mark.clients
@pytest.mark.slow
@pytest.mark.timeout(CHILD_TIMEOUT_S + 30)
@pytest.mark.parametrize("name", sorted(recipes()))
def test_recipe_passes(name: str, tmp_path: Path) -> None:
    source = recipes()[name]
    expected = recipe_table()[name]
    (tmp_path / f"test_{name.replace('-', '_')}.py").write_text(source)
    report = tmp_path / "report.xml"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
         f"--junitxml={report}", "-o", f"timeout={CHILD_TIMEOUT_S - 20}"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    output = f"--- recipe {name}: pytest exited {run.returncode}\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    assert run.returncode == 0, output
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": expected, "failures": 0, "errors": 0, "skipped": 0}, output
