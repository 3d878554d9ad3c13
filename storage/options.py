"""``LogOptions``: every tunable of one partition log, with Kafka's names and defaults.

Theory of operation: options are a frozen value passed to ``Log.open``; nothing reads global
configuration. Each field mirrors a Kafka topic config (named in its comment) so an operator's
knowledge carries over. ``offsets_topic_options()`` gives the settings Kafka creates
``__consumer_offsets`` with.

Rules:
  1. Options are validated once, in ``__post_init__``; a bad value is a ``ValueError`` naming it.
  2. Options never change the on-disk format, only when files roll, flush and are deleted, so a
     log may be reopened with different options.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, TypedDict, Unpack

__all__ = ["LogOptions", "LogOptionChanges", "FlushPolicy", "CleanupPolicy", "offsets_topic_options"]

FlushPolicy = Literal["fsync", "interval", "none"]
CleanupPolicy = Literal["delete", "compact"]

_DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class LogOptions:
    #: ``segment.bytes``. 1 GiB as in Kafka: big enough that per-segment costs (three files,
    #: an fd, a directory entry) are negligible, small enough that retention and compaction can
    #: work in useful steps. A batch larger than this still goes in (alone in its segment).
    #: Values above 2 GiB - 1 act as 2 GiB - 1: index entries hold int32 file positions.
    segment_bytes: int = 1 << 30
    #: ``segment.ms``. 7 days as in Kafka: time-based retention can only drop whole segments, so
    #: a quiet log still rolls and becomes deletable.
    segment_ms: int = 7 * _DAY_MS
    #: ``index.interval.bytes``. 4096 as in Kafka: one 8-byte index entry per 4 KiB of log keeps
    #: the index ~0.2% of the log while bounding the forward scan after a lookup to ~4 KiB.
    index_interval_bytes: int = 4096
    #: ``max.message.bytes`` (after Kafka's 1 MiB + 12-byte log overhead default): the largest batch
    #: accepted, so one producer cannot allocate unbounded memory on every reader.
    max_batch_bytes: int = 1048588
    #: When ``append`` counts as durable. ``fsync``: fsync before acknowledging (what a
    #: single-node coordinator needs, since there are no replicas to fall back on). ``interval``:
    #: fsync at most every ``flush_interval_ms`` (Kafka's ``flush.ms``). ``none``: leave it to the
    #: OS page cache (Kafka's default, which relies on replication instead).
    flush_policy: FlushPolicy = "fsync"
    #: ``flush.ms`` for the ``interval`` policy. One second bounds the loss window to about what a
    #: client's retry would re-send anyway.
    flush_interval_ms: int = 1000
    #: ``cleanup.policy``.
    cleanup_policy: CleanupPolicy = "delete"
    #: ``retention.ms``: 7 days as in Kafka; -1 keeps data forever.
    retention_ms: int = 7 * _DAY_MS
    #: ``retention.bytes``: -1 (no size limit) as in Kafka.
    retention_bytes: int = -1
    #: ``delete.retention.ms``: 1 day as in Kafka; how long a tombstone survives after the segment
    #: holding it was first cleaned, so slow consumers still see the delete.
    delete_retention_ms: int = _DAY_MS
    #: ``min.cleanable.dirty.ratio``: 0.5 as in Kafka; clean when at least half of the non-active
    #: log has not been cleaned yet, which bounds write amplification to about 2x.
    min_cleanable_dirty_ratio: float = 0.5
    #: Most distinct keys one compaction pass maps (Kafka bounds the same map by
    #: ``log.cleaner.dedupe.buffer.size``). A million keys of the size ``__consumer_offsets`` uses
    #: cost on the order of 150 MB of Python dict; a pass that reaches it cleans the dirty
    #: segments mapped so far and leaves the rest for the next pass.
    cleaner_max_keys: int = 1_000_000
    #: ``file.delete.delay.ms``: 60 s as in Kafka; a replaced or deleted segment's file descriptor
    #: stays open this long so in-flight zero-copy reads of it complete.
    file_delete_delay_ms: int = 60_000

    def __post_init__(self) -> None:
        if self.segment_bytes < 64:
            raise ValueError(f"segment_bytes must be at least 64, got {self.segment_bytes}")
        if self.segment_ms <= 0:
            raise ValueError(f"segment_ms must be positive, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0, got {self.index_interval_bytes}")
        if self.max_batch_bytes < 61:
            raise ValueError(f"max_batch_bytes must be >= 61 (a batch header), got {self.max_batch_bytes}")
        if self.flush_policy not in ("fsync", "interval", "none"):
            raise ValueError(f"flush_policy must be fsync, interval or none, got {self.flush_policy!r}")
        if self.cleanup_policy not in ("delete", "compact"):
            raise ValueError(f"cleanup_policy must be delete or compact, got {self.cleanup_policy!r}")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(f"min_cleanable_dirty_ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}")
        if self.cleaner_max_keys < 1:
            raise ValueError(f"cleaner_max_keys must be positive, got {self.cleaner_max_keys}")
        if self.delete_retention_ms < 0:
            raise ValueError(f"delete_retention_ms must be >= 0, got {self.delete_retention_ms}")

    def with_(self, **changes: Unpack[LogOptionChanges]) -> LogOptions:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


class LogOptionChanges(TypedDict, total=False):
    """The fields of :class:`LogOptions`, for ``with_`` (tests/storage/test_options_types.py keeps
    the two lists equal)."""

    segment_bytes: int
    segment_ms: int
    index_interval_bytes: int
    max_batch_bytes: int
    flush_policy: FlushPolicy
    flush_interval_ms: int
    cleanup_policy: CleanupPolicy
    retention_ms: int
    retention_bytes: int
    delete_retention_ms: int
    min_cleanable_dirty_ratio: float
    cleaner_max_keys: int
    file_delete_delay_ms: int


def offsets_topic_options() -> LogOptions:
    """Kafka's ``__consumer_offsets`` settings: compacted, 100 MiB segments
    (``offsets.topic.segment.bytes``, small so compaction and replay stay fast), fsync before ack."""
    return LogOptions(segment_bytes=100 * 1024 * 1024, cleanup_policy="compact", flush_policy="fsync")
