"""Kafka's classic group coordinator as pure state machines (no asyncio, no sockets, no files).

``shard.GroupCoordinatorShard`` is the entry point: one per ``__consumer_offsets`` partition. The
runtime (``coordinator.runtime``) runs its handlers serially, appends the records they return,
replays them with ``GroupCoordinatorShard.replay`` and only then answers.
"""

from __future__ import annotations

from .config import GroupConfig
from .group_state import GroupState
from .shard import GroupCoordinatorShard
from .timing import Clock, CoordinatorResult, ResponseFuture, Timer

__all__ = ["GroupConfig", "GroupState", "GroupCoordinatorShard", "Clock", "CoordinatorResult", "ResponseFuture",
           "Timer"]
