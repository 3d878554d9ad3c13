"""The classic group coordinator as a coordinator type of the runtime: its topic,
``__consumer_offsets``, the builder of its shard, and the serde of its records (the GroupMetadata
and OffsetCommit records of ``protocol.consumer_offsets``). ``coordinator/app.py`` registers it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from protocol.consumer_offsets import UnknownRecordVersion, serialize

from ..runtime.contract import Clock, Timer
from ..runtime.coordinator_types import CoordinatorType
from .config import GroupConfig
from .shard import GroupCoordinatorShard

__all__ = ["CONSUMER_OFFSETS", "OffsetsSerde", "OFFSETS_SERDE", "group_coordinator_type"]

#: The topic (``topics/registry.py`` names it too; group/ does not import topics/).
CONSUMER_OFFSETS = "__consumer_offsets"


class OffsetsSerde:
    """The records of ``__consumer_offsets`` (``contract.RecordSerde``)."""

    unknown_version: type[Exception] = UnknownRecordVersion

    def __init__(self) -> None:
        # The codec itself, not a wrapper: this runs for every record of every commit. Only the
        # shard's own operations produce records, and they produce the codec's types.
        self.serialize = cast(Callable[[object, object], "tuple[bytes, bytes | None]"], serialize)


OFFSETS_SERDE = OffsetsSerde()


def group_coordinator_type(config: GroupConfig, partition_exists: Callable[[str, int], bool] = lambda t, p: True,
                           ) -> CoordinatorType[GroupCoordinatorShard]:
    def build(partition: int, timer: Timer, clock: Clock) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(config, clock, timer, partition_exists)

    return CoordinatorType(CONSUMER_OFFSETS, build, OFFSETS_SERDE)
