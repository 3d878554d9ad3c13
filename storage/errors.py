"""Exceptions raised by the log engine; each docstring states the invariant it protects.

Theory of operation: callers (the coordinator runtime, the server) translate these into Kafka error
codes. The split matters because some mean "the caller sent something wrong" (reject it, keep
going), some mean "this log can no longer be trusted" (stop using it), and some mean "ask again".

Rules:
  1. An append that raises ``InvalidBatchError`` or ``RecordTooLargeError`` has appended nothing:
     input is validated in full before any offset is assigned or any byte is written.
  2. ``LogClosedError`` is final for the ``Log`` object; reopen the directory to continue.
  3. ``StorageIOError`` fails every append that was queued with it, and the log refuses further
     appends: after a failed write or fsync the file's contents are unknown until recovery runs.
"""

from __future__ import annotations

__all__ = [
    "StorageError",
    "InvalidBatchError",
    "RecordTooLargeError",
    "LogClosedError",
    "OffsetOutOfRangeError",
    "StorageIOError",
    "CorruptCheckpointError",
    "CorruptSnapshotError",
]


class StorageError(Exception):
    """Base class of every error this package raises on purpose."""


class InvalidBatchError(StorageError):
    """Input to ``append`` is not a sequence of whole, valid v2 batches (size, magic or CRC).

    The log accepts only batches it could hand back byte for byte: a batch that fails its own CRC
    would poison every later reader and every recovery scan.
    """


class RecordTooLargeError(StorageError):
    """One batch is larger than ``max_batch_bytes`` (Kafka: ``max.message.bytes``)."""


class LogClosedError(StorageError):
    """The log was closed (or failed); no method but ``close`` may be called on it."""


class OffsetOutOfRangeError(StorageError):
    """A read asked for an offset below ``log_start_offset`` or above ``log_end_offset``.

    Reading exactly at ``log_end_offset`` is not an error: it returns nothing, like a Kafka fetch
    at the end of the log.
    """


class StorageIOError(StorageError):
    """A write, fsync or rename failed. The log stops accepting appends (rule 3)."""


class CorruptCheckpointError(StorageError, ValueError):
    """A structured checkpoint file (``leader-epoch-checkpoint``, ``replication-offset-checkpoint``)
    is not in the format we write.

    Raised by the reader, with the file in the message, so a foreign or damaged file is never
    half-trusted. ``Log.open`` catches it and rebuilds the leader epochs from the log itself
    (recovery rule 1: opening never raises because of file contents); the log manager ignores a
    bad high watermark checkpoint (the high watermarks start low and the ISR raises them again).
    """

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"{path}: not a valid checkpoint file: {reason}")
        self.path = path
        self.reason = reason


class CorruptSnapshotError(StorageError, ValueError):
    """A producer-state snapshot that is not whole: short, CRC mismatch, foreign magic or version,
    or a layout that does not add up.

    The loader discards the snapshot and rebuilds the state from the log's batch headers (the log
    is the authority; the snapshot only saves the scan). A ValueError too, because that is what
    this was raised as before it had a class of its own.
    """
