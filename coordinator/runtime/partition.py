"""One partition of a coordinator topic as the runtime holds it, and the table of them.

A :class:`Partition` is its lifecycle state, its shard, its log and timers, and one small state
object per concern of the runtime, each owned by the module that runs that concern:

* :class:`WriteState` — the open batch and the answers waiting for durability (``writes.py``);
* :class:`SnapshotState` — when the next snapshot is due (``snapshot_schedule.py``);
* :class:`StandbyState` — how far a hot standby has replayed (``standby.py``).

Must be used only from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Generic, Protocol, TypeVar

from ..topics.log_manager import PartitionLog
from .contract import Clock, CoordinatorShard, RecordSerde
from .errors import CoordinatorState
from .timers import CoordinatorTimer, TimerFactory, TimerHandle

__all__ = ["Partition", "PartitionTable", "WriteState", "SnapshotState", "StandbyState", "ShardT"]

ShardT = TypeVar("ShardT", bound=CoordinatorShard)

log = logging.getLogger("groupcoord.runtime")


class Answer(Protocol):
    """What failing an answer needs of its future, whatever its result type."""

    def done(self) -> bool: ...

    def set_exception(self, exception: BaseException | type[BaseException], /) -> None: ...


class WriteState:
    """The write path of one partition (``writes.py``)."""

    __slots__ = ("last_written", "completions", "in_op", "waiting", "pending", "pending_base", "pending_bytes",
                 "pending_operations")

    def __init__(self, log_end_offset: int) -> None:
        #: One past the last offset written (queued) to this partition's log.
        self.last_written = log_end_offset
        #: Parked responses completed during the running operation, released after it.
        self.completions: list[tuple[asyncio.Future[object], object]] = []
        self.in_op = False
        #: Answers waiting for durability; failed together if the partition fails.
        self.waiting: set[Answer] = set()
        #: The open batch (runtime rule 7): serialized records replayed but not yet given to the
        #: log, the offset its first record will get, and its size.
        self.pending: list[tuple[bytes, bytes | None]] | None = None
        self.pending_base = 0
        self.pending_bytes = 0
        #: The names of the operations whose records the open batch holds, for its log lines.
        self.pending_operations: set[str] = set()


class SnapshotState:
    """When a partition's next snapshot is due (``snapshot_schedule.py``)."""

    __slots__ = ("since_snapshot", "snapshot_records", "snapshotting", "snapshot_ms", "refresh")

    def __init__(self) -> None:
        #: Records appended (or replayed from the log tail) since the last snapshot, and the
        #: number of records that snapshot held (runtime rule 4).
        self.since_snapshot = 0
        self.snapshot_records = 0
        self.snapshotting: asyncio.Future[None] | None = None
        #: When the snapshot on disk was taken (None: there is none), and the timer that renews
        #: it before it stops being trusted (runtime rule 5).
        self.snapshot_ms: int | None = None
        self.refresh: TimerHandle | None = None

    def stop_refresh(self) -> None:
        if self.refresh is not None:
            self.refresh.cancel()
            self.refresh = None


class StandbyState:
    """A hot standby's progress (``standby.py``, runtime rule 6)."""

    __slots__ = ("replayed_to", "truncations", "follow", "rebuilding", "warming")

    def __init__(self, truncations: int) -> None:
        #: The offset replayed up to, the log's truncation count it matches, and the task
        #: following the log.
        self.replayed_to = 0
        self.truncations = truncations
        self.follow: asyncio.Task[None] | None = None
        #: A standby whose state is being rebuilt (a snapshot half replayed): not to be taken over.
        self.rebuilding = False
        #: A standby that has not yet caught up with the high watermark.
        self.warming = False


class Partition(Generic[ShardT]):
    """A partition of the coordinator topic hosted on this node."""

    __slots__ = ("id", "name", "state", "plog", "shard", "timer", "writes", "snapshots", "standby")

    def __init__(self, partition: int, topic: str, plog: PartitionLog, shard: ShardT,
                 timer: CoordinatorTimer) -> None:
        self.id = partition
        #: ``topic-partition``, for log lines.
        self.name = f"{topic}-{partition}"
        self.state = CoordinatorState.LOADING
        self.plog = plog
        #: The shard and its timers; a standby rebuilt after a truncation gets new ones.
        self.shard = shard
        self.timer = timer
        self.writes = WriteState(plog.log_end_offset)
        self.snapshots = SnapshotState()
        self.standby = StandbyState(plog.truncations)

    @property
    def where(self) -> dict[str, object]:
        """The ``extra`` of a log line about this partition."""
        return {"partition": self.name}


class PartitionTable(Generic[ShardT]):
    """The partitions of one coordinator topic on this node, and what every part of the runtime
    shares: the topic, its record serde, the clock and the timer factory."""

    def __init__(self, topic: str, serde: RecordSerde, clock: Clock, timers: TimerFactory) -> None:
        self.topic = topic
        self.serde = serde
        self.clock = clock
        self.timers = timers
        self.by_id: dict[int, Partition[ShardT]] = {}

    def is_current(self, part: Partition[ShardT]) -> bool:
        """Whether ``part`` is still the one hosted (not unloaded or replaced meanwhile)."""
        return self.by_id.get(part.id) is part
