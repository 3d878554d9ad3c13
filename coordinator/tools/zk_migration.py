"""The plan of ``groupcoord zk-offsets migrate``: which partitions' offsets move between ZooKeeper
(``/consumers/<g>/offsets``) and Kafka's offsets storage, and which stay.

An offset moves only forward: the destination keeps its own when it is already at or past the
source's. Kafka's migration took the same side: during dual commit its consumers fetched
max(ZooKeeper, Kafka) (reference: Kafka's docs, "Migrating offsets from ZooKeeper to Kafka",
https://kafka.apache.org/0100/documentation.html, and the consumer's
``dual.commit.enabled``), so no consumer ever rewinds because of a migration. Pure: values in, rows out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MigrationRow", "plan_migration", "format_plan", "moved_offsets", "TO_KAFKA", "TO_ZOOKEEPER", "MOVES"]

TO_KAFKA = "to-kafka"
TO_ZOOKEEPER = "to-zookeeper"
MOVES = "moves"

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class MigrationRow:
    group: str
    topic: str
    partition: int
    zk_offset: int | None
    kafka_offset: int | None
    action: str

    @property
    def moves(self) -> bool:
        return self.action == MOVES


def plan_migration(group: str, zk: Mapping[TopicPartition, int], kafka: Mapping[TopicPartition, int],
                   direction: str) -> list[MigrationRow]:
    """One row per partition known to either side, sorted by (topic, partition)."""
    if direction not in (TO_KAFKA, TO_ZOOKEEPER):
        raise ValueError(f"direction must be {TO_KAFKA} or {TO_ZOOKEEPER}, not {direction!r}")
    source, destination = (zk, kafka) if direction == TO_KAFKA else (kafka, zk)
    rows = []
    for tp in sorted(set(zk) | set(kafka)):
        have, want = destination.get(tp), source.get(tp)
        if want is None:
            action = "kept: nothing to move"
        elif have is None or have < want:
            action = MOVES
        elif have == want:
            action = "kept: same offset"
        else:
            action = "kept: other side newer"
        rows.append(MigrationRow(group, tp[0], tp[1], zk.get(tp), kafka.get(tp), action))
    return rows


def moved_offsets(rows: list[MigrationRow], direction: str) -> dict[TopicPartition, int]:
    """The offsets to write to the destination: the source's, of the rows that move."""
    moved: dict[TopicPartition, int] = {}
    for row in rows:
        if row.moves:
            offset = row.zk_offset if direction == TO_KAFKA else row.kafka_offset
            assert offset is not None  # a row moves only when its source has an offset
            moved[(row.topic, row.partition)] = offset
    return moved


HEADER = ("GROUP", "TOPIC", "PARTITION", "ZK-OFFSET", "KAFKA-OFFSET", "ACTION")


def format_plan(rows: list[MigrationRow]) -> str:
    """A table as kafka-consumer-groups.sh prints its views: left-aligned columns one space apart, a
    column as wide as its widest cell; ``-`` where a side has no offset."""
    cells = [HEADER] + [(r.group, r.topic, str(r.partition), "-" if r.zk_offset is None else str(r.zk_offset),
                         "-" if r.kafka_offset is None else str(r.kafka_offset), r.action) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER) - 1)]
    return "".join(" ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)) + " " + row[-1] + "\n"
                   for row in cells)
