"""The file format of Kafka's ExportZkOffsets / ImportZkOffsets tools (Kafka 0.8.2–1.1,
``core/src/main/scala/kafka/tools/``; removed in 2.0.0 with the Scala consumers, KAFKA-2983):
one line per partition, ``/consumers/<group>/offsets/<topic>/<partition>:<offset>``, no header.

ImportZkOffsets read lines until the end of the file or the first empty line, so an empty line
ends the input here too. Unlike Kafka's tool (which printed errors and went on), a malformed line
is an error naming its line number: the caller validates the whole file before writing anything.
Pure: text in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ZkOffsetsFileError", "ZkOffsetLine", "parse_zk_offsets", "format_zk_offsets"]

_PREFIX = "/consumers/"


class ZkOffsetsFileError(ValueError):
    """A malformed line; the message names the line number (1-based) and the line."""


@dataclass(frozen=True)
class ZkOffsetLine:
    group: str
    topic: str
    partition: int
    offset: int

    @property
    def path(self) -> str:
        return f"{_PREFIX}{self.group}/offsets/{self.topic}/{self.partition}"


def _parse_line(number: int, line: str) -> ZkOffsetLine:
    def bad(why: str) -> ZkOffsetsFileError:
        return ZkOffsetsFileError(f"line {number}: {why}: {line!r}")

    # The offset follows the last colon: a colon cannot be in a topic name (Kafka allows
    # [a-zA-Z0-9._-]), but a group name may hold one.
    path, sep, value = line.rpartition(":")
    if not sep:
        raise bad("expected /consumers/<group>/offsets/<topic>/<partition>:<offset>")
    parts = path.split("/")
    # ['', 'consumers', group, 'offsets', topic, partition]
    if len(parts) != 6 or parts[0] != "" or parts[1] != "consumers" or parts[3] != "offsets":
        raise bad("expected a path /consumers/<group>/offsets/<topic>/<partition>")
    group, topic, partition_text = parts[2], parts[4], parts[5]
    if not group or not topic:
        raise bad("empty group or topic")
    if not partition_text.isdigit() or not partition_text.isascii():
        raise bad(f"partition {partition_text!r} is not a non-negative integer")
    value = value.strip()
    # The znode holds the next offset to consume (reference: Kafka's docs, "ZooKeeper Directories",
    # https://kafka.apache.org/0100/documentation.html#impl_zookeeper): never negative.
    if not (value.isdigit() and value.isascii()):
        raise bad(f"offset {value!r} is not a non-negative integer")
    return ZkOffsetLine(group, topic, int(partition_text), int(value))


def parse_zk_offsets(text: str) -> list[ZkOffsetLine]:
    """Every line up to the end or the first empty line; ZkOffsetsFileError at the first bad
    line, or when two lines name the same partition (which of them would win is not defined)."""
    found: list[ZkOffsetLine] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if line == "":
            break
        entry = _parse_line(number, line)
        if entry.path in seen:
            raise ZkOffsetsFileError(f"line {number}: {entry.path} already given on line {seen[entry.path]}")
        seen[entry.path] = number
        found.append(entry)
    return found


def format_zk_offsets(offsets: Mapping[str, Mapping[tuple[str, int], int]] | Iterable[ZkOffsetLine]) -> str:
    """The file text: groups in the given order, each group's partitions sorted by (topic, partition)."""
    if isinstance(offsets, Mapping):
        lines = [ZkOffsetLine(g, t, p, o) for g, by_tp in offsets.items() for (t, p), o in sorted(by_tp.items())]
    else:
        lines = list(offsets)
    return "".join(f"{e.path}:{e.offset}\n" for e in lines)
