"""The classic group coordinator as a coordinator type of the runtime: its topic,
``__consumer_offsets``, the builder of its shard, and the serde of its records (the GroupMetadata
and OffsetCommit records of ``protocol.consumer_offsets``). ``coordinator/app.py`` registers it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

from protocol.consumer_offsets import UnknownRecordVersion, serialize

from ..runtime.contract import Clock, Timer
from ..runtime.coordinator_types import CoordinatorType
from .config import GroupConfig
from .shard import GroupCoordinatorShard
from .topics_image import TopicsImage

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


def _no_overrides(group_id: str) -> Mapping[str, int]:
    return {}


def group_coordinator_type(config: GroupConfig, partition_exists: Callable[[str, int], bool] = lambda t, p: True,
                           topics: TopicsImage | None = None,
                           group_configs: Callable[[str], Mapping[str, int]] | None = None,
                           ) -> CoordinatorType[GroupCoordinatorShard]:
    """``topics``: what KIP-848 groups see of the topics (the node's topic registry; None: no
    topics). ``group_configs``: a group's overrides of consumer.session.timeout.ms,
    consumer.heartbeat.interval.ms and consumer.assignment.interval.ms, as validated integers
    (coordinator/admin/group_configs.py; None: no group has any)."""
    overrides = group_configs if group_configs is not None else _no_overrides

    def build(partition: int, timer: Timer, clock: Clock) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(config, clock, timer, partition_exists, topics=topics, group_configs=overrides)

    return CoordinatorType(CONSUMER_OFFSETS, build, OFFSETS_SERDE)
