"""File names, suffixes and the small crash-safe file primitives every other module uses.

Theory of operation: a partition directory ``<topic>-<partition>/`` holds, per segment,
``{base_offset:020d}.log`` plus ``.index``, ``.timeindex`` and (once the segment holds an ABORT
marker, ``txn_index.py``) ``.txnindex`` with the same prefix (20 digits so
``ls`` sorts numerically, as Kafka does), and a few one-number checkpoint files. Temporary states
of a segment are encoded as an extra suffix (``.cleaned``, ``.swap``, ``.deleted``) so recovery can
classify every file by name alone. The data directory above the partitions holds one more
checkpoint in cluster mode, the high watermark of every replica (``HW_CHECKPOINT_FILE``).

Rules:
  1. A checkpoint is replaced with write-temp, fsync, rename, fsync-directory: after a crash it
     holds either the old or the new value, never a torn one.
  2. An unreadable one-number checkpoint is reported as ``None`` (the caller falls back to the
     safe default: rescan everything), never as an exception. A checkpoint of several lines (the
     high watermarks here, the leader epochs in ``leader_epoch.py``) that is not in its format
     raises ``CorruptCheckpointError`` naming the file; a missing one is empty, not an error.
  3. ``.cleaned`` files are incomplete by definition and are deleted on open; a ``.swap`` file was
     fsynced before being renamed to that name, so it is complete and recovery finishes the swap.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import CorruptCheckpointError

__all__ = [
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "SEGMENT_SUFFIXES",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "DELETED_SUFFIX",
    "CLEAN_SHUTDOWN_FILE",
    "RECOVERY_POINT_FILE",
    "LOG_START_OFFSET_FILE",
    "CLEANER_OFFSET_FILE",
    "LEADER_EPOCH_FILE",
    "HW_CHECKPOINT_FILE",
    "segment_prefix",
    "segment_path",
    "parse_base_offset",
    "partition_dir",
    "fsync_dir",
    "atomic_write",
    "read_checkpoint",
    "write_checkpoint",
    "read_hw_checkpoint",
    "write_hw_checkpoint",
    "pread_exact",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
#: Aborted transactions whose marker the segment holds (Kafka's transaction index, ``txn_index.py``).
TXN_INDEX_SUFFIX = ".txnindex"
#: Every file of one segment: deleted, renamed and recovered together.
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"

#: Written by ``Log.close`` after everything is flushed; removed on open. Present means
#: "the indexes and sizes on disk are exact", so recovery can skip the scan.
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: Offset below which the log is known to be fsynced (Kafka's recovery-point checkpoint).
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
#: The log start offset, which may be above the first segment's base after retention or
#: ``delete_records`` (Kafka's log-start-offset checkpoint).
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
#: How far the compacted log has been cleaned (Kafka's cleaner-offset-checkpoint).
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
#: Leader epoch -> first offset of that epoch (KIP-101), Kafka's leader-epoch-checkpoint; written
#: and read by ``leader_epoch`` (several lines, so not a ``write_checkpoint`` file).
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
#: Cluster mode, one per data directory: each replica's high watermark, so a restarted replica does
#: not expose records the ISR never had (Kafka's replication-offset-checkpoint, in its format: ``0``,
#: the entry count, then one ``<topic> <partition> <high watermark>`` line per partition).
HW_CHECKPOINT_FILE = "replication-offset-checkpoint"

_CHECKPOINT_VERSION = 0
_MAX_OFFSET = 2**63 - 1


def segment_prefix(base_offset: int) -> str:
    return f"{base_offset:020d}"


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / (segment_prefix(base_offset) + suffix)


def parse_base_offset(name: str) -> int | None:
    """The base offset encoded in a segment file name, or None if the name is not one of ours."""
    prefix = name.split(".", 1)[0]
    if len(prefix) != 20 or not prefix.isdigit():
        return None
    return int(prefix)


def partition_dir(root: Path, topic: str, partition: int) -> Path:
    return root / f"{topic}-{partition}"


def fsync_dir(directory: Path) -> None:
    """Make renames and creations in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file (rule 1)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def read_checkpoint(path: Path) -> int | None:
    """The offset in a checkpoint file: ``None`` if absent or unreadable (rule 2)."""
    try:
        lines = path.read_text(encoding="ascii").split("\n")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        if int(lines[0]) != _CHECKPOINT_VERSION:
            return None
        value = int(lines[1])
    except (ValueError, IndexError):
        return None
    # An offset is an int64; anything else was not written by ``write_checkpoint`` (rule 2).
    return value if 0 <= value <= _MAX_OFFSET else None


def write_checkpoint(path: Path, offset: int, *, sync: bool = True) -> None:
    atomic_write(path, f"{_CHECKPOINT_VERSION}\n{offset}\n".encode("ascii"), sync=sync)


def read_hw_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> high watermark`` from ``HW_CHECKPOINT_FILE``: empty if the file does
    not exist; ``CorruptCheckpointError`` if it is not text in that format (rule 2)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:  # not UTF-8 text: damaged or not ours
        raise CorruptCheckpointError(path, f"unreadable ({exc})") from exc
    try:
        if lines[0].strip() != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad version or count")
        out: dict[tuple[str, int], int] = {}
        for line in lines[2:]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
        return out
    except (ValueError, IndexError) as exc:
        raise CorruptCheckpointError(path, str(exc)) from exc


def write_hw_checkpoint(path: Path, entries: dict[tuple[str, int], int]) -> None:
    """Replace ``HW_CHECKPOINT_FILE`` with ``entries``, sorted (rule 1)."""
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items()))
    atomic_write(path, f"0\n{len(entries)}\n{body}".encode())


def pread_exact(fd: int, length: int, position: int) -> bytes:
    """Read up to ``length`` bytes at ``position``; short only at end of file."""
    data = os.pread(fd, length, position)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)
