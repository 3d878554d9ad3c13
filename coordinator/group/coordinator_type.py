"""The classic group coordinator as a coordinator type of the runtime: its topic,
``__consumer_offsets``, the builder of its shard, and the serde of its records (the GroupMetadata
and OffsetCommit records of ``protocol.consumer_offsets`` and the KIP-848 records of
``protocol.consumer_group_records``). ``coordinator/app.py`` registers it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from protocol import consumer_group_records as cgr
from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey, UnknownRecordVersion, serialize

from ..runtime.contract import Clock, Timer
from ..runtime.coordinator_types import CoordinatorType
from .config import GroupConfig
from .shard import GroupCoordinatorShard
from .topics_image import TopicsImage

__all__ = ["CONSUMER_OFFSETS", "OffsetsSerde", "OFFSETS_SERDE", "group_coordinator_type", "serialize_record"]

#: The topic (``topics/registry.py`` names it too; group/ does not import topics/).
CONSUMER_OFFSETS = "__consumer_offsets"


def serialize_record(key: object, value: object) -> tuple[bytes, bytes | None]:
    """Key and value bytes of any record the shard's operations produce. This runs for every
    record of every commit: an OffsetCommit key goes straight to its codec after one type test."""
    if type(key) is OffsetCommitKey or type(key) is GroupMetadataKey:
        return serialize(key, value)  # type: ignore[arg-type]
    return cgr.encode_key(key), None if value is None else cgr.encode_value(value)  # type: ignore[arg-type]


class OffsetsSerde:
    """The records of ``__consumer_offsets`` (``contract.RecordSerde``)."""

    unknown_version: type[Exception] = UnknownRecordVersion

    def __init__(self) -> None:
        self.serialize = serialize_record


OFFSETS_SERDE = OffsetsSerde()


def group_coordinator_type(config: GroupConfig, partition_exists: Callable[[str, int], bool] = lambda t, p: True,
                           topics: TopicsImage | None = None,
                           group_configs: Callable[[str], Mapping[str, int]] | None = None,
                           ) -> CoordinatorType[GroupCoordinatorShard]:
    """``topics`` and ``group_configs``: what every shard's consumer groups read (the topic
    registry and the per-group overrides); None: no topics, no overrides."""
    configs: Callable[[str], Mapping[str, int]] = group_configs or (lambda group_id: {})

    def build(partition: int, timer: Timer, clock: Clock) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(config, clock, timer, partition_exists, topics=topics, group_configs=configs)

    return CoordinatorType(CONSUMER_OFFSETS, build, OFFSETS_SERDE)
