"""The log engine: crash-safe, segmented partition logs in Kafka's on-disk format.

This package knows logs, not groups: it may import ``protocol`` (the sans-IO batch codec) but
never ``coordinator``. Modules, each named for what it holds:

  * ``options``      ``LogOptions`` (Kafka topic configs with their defaults and reasons)
  * ``errors``       the exceptions, each stating the invariant it protects
  * ``files``        file names/suffixes, checkpoints, atomic small-file writes
  * ``offset_index`` / ``time_index``  the sparse ``.index`` / ``.timeindex``
  * ``segment``      ``LogSegment``: one ``.log`` + indexes; append, lookup, recover, truncate
  * ``recovery``     the numbered passes run when a partition directory is opened
  * ``group_commit`` the append queue: offsets in queue order, one write + one fsync per round
  * ``leader_epoch`` ``LeaderEpochCache``: leader epoch -> start offset (KIP-101/KIP-279)
  * ``log``          ``Log``: the façade: append, reads, roll, truncation, retention, close
  * ``cleaner``      compaction with crash-safe segment swaps
"""

from __future__ import annotations

from .cleaner import CleanResult, dirty_ratio, run_cleaner
from .errors import (
    CorruptCheckpointError,
    CorruptSnapshotError,
    InvalidBatchError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    StorageIOError,
)
from .leader_epoch import EpochEntry, LeaderEpochCache
from .log import AppendResult, FileSlice, Log
from .options import LogOptions, offsets_topic_options

__all__ = [
    "Log",
    "LogOptions",
    "AppendResult",
    "FileSlice",
    "CleanResult",
    "LeaderEpochCache",
    "EpochEntry",
    "dirty_ratio",
    "run_cleaner",
    "offsets_topic_options",
    "StorageError",
    "InvalidBatchError",
    "RecordTooLargeError",
    "LogClosedError",
    "OffsetOutOfRangeError",
    "StorageIOError",
    "CorruptCheckpointError",
    "CorruptSnapshotError",
]
