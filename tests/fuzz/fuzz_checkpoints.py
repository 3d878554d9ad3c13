"""The one-number offset checkpoints of a partition directory (``storage/files.py``:
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``) and the node's replication-offset (high watermark) checkpoint
(``storage/files.py`` too, read by ``coordinator/topics/log_manager.py``).

Edge: small text files read back on every start, before any client is served.

Properties asserted on any file contents:

1. ``read_checkpoint`` never raises (files.py rule 2: unreadable is ``None``, and the caller falls
   back to a full rescan), and what it returns is ``None`` or an offset: an int in [0, 2^63).
   An offset it accepts is what ``write_checkpoint`` writes for it, read back the same.
2. ``read_hw_checkpoint`` returns entries or raises ``CorruptCheckpointError`` (the log manager
   catches exactly that, logs it and ignores the file: the high watermarks start low and the ISR
   raises them again); nothing else. Its entries are ``(topic, partition) -> offset``, which
   ``write_hw_checkpoint`` writes and reads back the same.

The first input byte picks the file (even: an offset checkpoint, odd: the high watermarks); the
rest is its contents.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from storage.errors import CorruptCheckpointError
from storage.files import (
    RECOVERY_POINT_FILE,
    read_checkpoint,
    read_hw_checkpoint,
    write_checkpoint,
    write_hw_checkpoint,
)
from tests.fuzz.harness import Finding, scratch_dir

NAME = "checkpoints"
INSTRUMENT = ("storage.files",)

OFFSET, HIGH_WATERMARKS = 0, 1
_INT64_MAX = 2**63 - 1

_dir: Path | None = None


def _directory() -> Path:
    """One directory per process, reused by every input."""
    global _dir
    if _dir is None:
        _dir = scratch_dir("fuzz-checkpoints-")
    return _dir


def seeds() -> list[bytes]:
    """What the writers themselves produce."""
    directory = Path(tempfile.mkdtemp(prefix="fuzz-checkpoints-seeds-"))
    try:
        out = []
        for offset in (0, 1284, _INT64_MAX):
            write_checkpoint(directory / "cp", offset, sync=False)
            out.append(bytes([OFFSET]) + (directory / "cp").read_bytes())
        for entries in ({}, {("t", 0): 5}, {("__consumer_offsets", 49): 1_000_000, ("t", 1): 0, ("été", 3): 7}):
            write_hw_checkpoint(directory / "hw", entries)
            out.append(bytes([HIGH_WATERMARKS]) + (directory / "hw").read_bytes())
        return out
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _check_offset(path: Path) -> None:
    value = read_checkpoint(path)
    if value is None:
        return
    if not isinstance(value, int) or not 0 <= value <= _INT64_MAX:
        raise Finding(f"read_checkpoint returned {value!r}, not an offset")
    write_checkpoint(path, value, sync=False)
    again = read_checkpoint(path)
    if again != value:
        raise Finding(f"read {value}, wrote it and read back {again!r}")


def _check_high_watermarks(path: Path) -> None:
    try:
        entries = read_hw_checkpoint(path)
    except CorruptCheckpointError:
        return
    for key, offset in entries.items():
        if not (isinstance(key, tuple) and isinstance(key[0], str) and isinstance(key[1], int)
                and isinstance(offset, int)):
            raise Finding(f"read_hw_checkpoint returned the entry {key!r}: {offset!r}")
    write_hw_checkpoint(path, entries)
    try:
        again = read_hw_checkpoint(path)
    except CorruptCheckpointError as exc:
        raise Finding(f"write_hw_checkpoint wrote a file it does not read back: {exc}") from exc
    if again != entries:
        raise Finding(f"read {entries}, wrote them and read back {again}")


def one_input(data: bytes) -> None:
    if not data:
        return
    path = _directory() / RECOVERY_POINT_FILE
    path.write_bytes(data[1:])
    if data[0] % 2 == OFFSET:
        _check_offset(path)
        return
    _check_high_watermarks(path)


if __name__ == "__main__":
    import sys

    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
