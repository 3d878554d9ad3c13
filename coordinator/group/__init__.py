"""Kafka's group coordinator (classic groups and KIP-848 consumer groups): the rules as pure state machines (no asyncio, no sockets,
no files), and ``service.py``, the adapter between the wire and the runtime.

``shard.GroupCoordinatorShard`` is the entry point of the rules: one per ``__consumer_offsets``
partition. The runtime (``coordinator.runtime``) runs its handlers serially, appends the records
they return, replays them with ``GroupCoordinatorShard.replay`` and only then answers.
``service.GroupService`` routes each request to its partition (Kafka's hash of the group id) and
answers COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR for partitions that do not serve.
"""

from __future__ import annotations

from ..runtime.contract import Clock, CoordinatorResult, ResponseFuture, Timer
from .config import GroupConfig
from .group_state import GroupState
from .shard import GroupCoordinatorShard

__all__ = ["GroupConfig", "GroupState", "GroupCoordinatorShard", "Clock", "CoordinatorResult", "ResponseFuture",
           "Timer"]
