"""What every fuzz harness shares: the convention, discovery, and the one property.

Convention: ``tests/fuzz/fuzz_<name>.py`` defines, at module level::

    NAME = "<name>"                          # equal to the file name after ``fuzz_``
    INSTRUMENT = ("protocol.records", ...)   # modules whose functions atheris instruments
    def seeds() -> list[bytes]: ...          # the starting corpus, from the project's own data
    def one_input(data: bytes) -> None: ...  # returns, or raises on a property violation

The property: a decoder given any bytes returns a value or raises the project's own decode error.
Each harness names its allowed errors once, with :func:`expect`; any other exception escapes
``one_input`` and is the finding (atheris reports it as a crash, the replay test as a failure).
A harness that checks more than exception types (a split-invariance, an overrun) raises
:class:`Finding`, which :func:`expect` never swallows.

Nothing here imports atheris: the replay test runs without it.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

FUZZ_DIR = Path(__file__).resolve().parent
REGRESSIONS_DIR = FUZZ_DIR / "regressions"
_HARNESS_FILE = re.compile(r"^fuzz_([a-z0-9_]+)\.py$")
_REQUIRED = ("NAME", "INSTRUMENT", "seeds", "one_input")


class Finding(AssertionError):
    """A property violation that is not an exception type (e.g. a decoder reading past its input).

    An AssertionError, not a ValueError, so no decoder error class can be confused with it."""


@contextmanager
def expect(*allowed: type[BaseException]) -> Iterator[None]:
    """Swallow the decoder's own errors ``allowed``; let everything else out as a finding."""
    try:
        yield
    except Finding:
        raise
    except allowed:
        pass


def scratch_dir(prefix: str, *, memory: bool = False) -> Path:
    """A fresh directory removed at exit: a harness makes one per process and rewrites its files
    for every input (a new directory per input costs more than the input). ``memory`` puts it on
    /dev/shm where there is one, for harnesses that write whole segments."""
    where = "/dev/shm" if memory and os.path.isdir("/dev/shm") else None
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=where))
    atexit.register(shutil.rmtree, path, True)
    return path


@contextmanager
def quiet(level: int = logging.WARNING) -> Iterator[None]:
    """Silence log records up to ``level`` for one input: the code under test logs what it repairs
    or skips, and at fuzzing rates that would be all the output."""
    previous = logging.root.manager.disable
    logging.disable(level)
    try:
        yield
    finally:
        logging.disable(previous)


def discover() -> list[str]:
    """Names of every harness: ``fuzz_<name>.py`` files next to this module, sorted."""
    return sorted(m.group(1) for p in FUZZ_DIR.iterdir() if (m := _HARNESS_FILE.match(p.name)))


def load(name: str) -> ModuleType:
    """Import ``tests.fuzz.fuzz_<name>`` and check it follows the convention."""
    module = importlib.import_module(f"tests.fuzz.fuzz_{name}")
    missing = [attr for attr in _REQUIRED if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"fuzz_{name}.py lacks {', '.join(missing)}")
    if module.NAME != name:
        raise TypeError(f"fuzz_{name}.py says NAME = {module.NAME!r}")
    return module


def regressions_dir(name: str) -> Path:
    return REGRESSIONS_DIR / name


def regression_inputs(name: str) -> list[Path]:
    """Saved inputs (crashes once found, kept so they stay fixed), sorted for stable test ids."""
    directory = regressions_dir(name)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
