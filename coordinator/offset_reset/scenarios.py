"""The reset plan of one group: kafka-consumer-groups' scenarios and range clamping, pure.

Kafka computes the plan in ``ConsumerGroupCommand.prepareOffsetsToReset`` and clamps some
scenarios with ``checkOffsetsRange``
(https://github.com/apache/kafka/blob/3.9.0/tools/src/main/java/org/apache/kafka/tools/consumer/group/ConsumerGroupCommand.java).
Here the offsets it asks the brokers for arrive as plain dicts, so the command line (over the wire)
and the dashboard (in-process) build the very same plan:

==============  ===========================================  =========
scenario        new offset                                   clamped
==============  ===========================================  =========
to-earliest     earliest                                     no
to-latest       latest                                       no
to-current      committed; latest where nothing is committed no
to-offset N     N                                            yes
shift-by N      committed + N (a commit is required)         yes
to-datetime     first offset at or after the timestamp;      no
by-duration     latest where the partition has none
from-file       the CSV's offset                             yes
==============  ===========================================  =========

Clamping moves an offset above ``latest`` down to it and one below ``earliest`` up to it, with
Kafka's WARN text; an unknown bound leaves that side alone (Kafka's ``Unknown`` result).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CLAMPED",
    "SCENARIOS",
    "ResetPlan",
    "ResetUsageError",
    "TopicPartition",
    "clamp",
    "lookups_for",
    "parse_topic_args",
    "plan_reset",
    "tp_name",
]

TopicPartition = tuple[str, int]

#: The scenarios, in the order kafka-consumer-groups lists them (``allResetOffsetScenarioOpts``).
SCENARIOS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest", "shift-by", "from-file",
             "to-current")
#: Scenarios whose offsets go through ``checkOffsetsRange``.
CLAMPED = frozenset({"to-offset", "shift-by", "from-file"})

_LOOKUPS = {
    "to-earliest": frozenset({"earliest"}),
    "to-latest": frozenset({"latest"}),
    "to-current": frozenset({"committed", "latest"}),
    "to-offset": frozenset({"earliest", "latest"}),
    "shift-by": frozenset({"committed", "earliest", "latest"}),
    "to-datetime": frozenset({"timestamp", "latest"}),
    "by-duration": frozenset({"timestamp", "latest"}),
    "from-file": frozenset({"earliest", "latest"}),
}


class ResetUsageError(ValueError):
    """A failure Kafka reports with its usage text and exit status 1 (``printUsageAndExit`` or an
    ``IllegalArgumentException``); ``str()`` is Kafka's message."""


@dataclass(frozen=True)
class ResetPlan:
    """New offsets of one group, plus what Kafka says while computing them.

    ``notices`` are the lines Kafka prints on stdout (each starts with a newline, as Kafka's do);
    ``warnings`` are the messages Kafka logs at WARN (clamping).
    """

    offsets: dict[TopicPartition, int]
    notices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def tp_name(tp: TopicPartition) -> str:
    """``TopicPartition.toString()``: ``topic-partition``."""
    return f"{tp[0]}-{tp[1]}"


def lookups_for(scenario: str) -> frozenset[str]:
    """Which inputs ``plan_reset`` reads for a scenario: any of ``committed``, ``earliest``,
    ``latest``, ``timestamp`` (offsets for the scenario's timestamp). Callers fetch only those."""
    try:
        return _LOOKUPS[scenario]
    except KeyError:
        raise ValueError(f"unknown reset scenario {scenario!r}") from None


def parse_topic_args(topic_args: Iterable[str]) -> tuple[list[TopicPartition], list[str]]:
    """``--topic`` values split into explicit partitions (``t:0,2``) and whole topics (``t``),
    with Kafka's ``parseTopicsWithPartitions`` messages (``ResetUsageError``)."""
    explicit: list[TopicPartition] = []
    whole: list[str] = []
    for arg in topic_args:
        if ":" not in arg:
            whole.append(arg)
            continue
        parts = _java_split(arg, ":")
        if len(parts) != 2:
            raise ResetUsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
        topic, partitions = parts
        for p in _java_split(partitions, ","):
            explicit.append((topic, _java_int(p, arg)))
    return explicit, whole


def _java_split(text: str, sep: str) -> list[str]:
    """``String.split(sep)`` for a one-character separator: trailing empty strings dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts if parts or not text else []


def _java_int(text: str, topic_arg: str) -> int:
    """``Integer.parseInt``: optional sign, ASCII digits, 32-bit."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if body and body.isascii() and body.isdigit():
        value = int(text)
        if -(2**31) <= value < 2**31:
            return value
    raise ResetUsageError(f"Invalid partition '{text}' specified in topic arg '{topic_arg}''")


def clamp(
    requested: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int | None],
    latest: Mapping[TopicPartition, int | None],
) -> tuple[dict[TopicPartition, int], list[str]]:
    """``checkOffsetsRange``: each offset moved into [earliest, latest], with Kafka's warnings.

    The upper bound is checked first, as Kafka does; a missing bound is not enforced.
    """
    result: dict[TopicPartition, int] = {}
    warnings: list[str] = []
    for tp in sorted(requested):
        offset = requested[tp]
        end = latest.get(tp)
        start = earliest.get(tp)
        if end is not None and offset > end:
            warnings.append(f"New offset ({offset}) is higher than latest offset for topic partition {tp_name(tp)}. "
                            f"Value will be set to {end}")
            result[tp] = end
        elif start is not None and offset < start:
            warnings.append(f"New offset ({offset}) is lower than earliest offset for topic partition {tp_name(tp)}. "
                            f"Value will be set to {start}")
            result[tp] = start
        else:
            result[tp] = offset
    return result, warnings


def _required(values: Mapping[TopicPartition, int | None], tp: TopicPartition, what: str) -> int:
    value = values.get(tp)
    if value is None:
        raise ResetUsageError(f"Error getting {what} of topic partition: {tp_name(tp)}")
    return value


def plan_reset(
    scenario: str,
    partitions: Sequence[TopicPartition],
    *,
    value: int | None = None,
    committed: Mapping[TopicPartition, int] | None = None,
    earliest: Mapping[TopicPartition, int | None] | None = None,
    latest: Mapping[TopicPartition, int | None] | None = None,
    for_timestamp: Mapping[TopicPartition, int | None] | None = None,
    from_file: Mapping[TopicPartition, int] | None = None,
) -> ResetPlan:
    """The plan of one group for ``scenario`` (one of ``SCENARIOS``).

    ``partitions`` is the scope (ignored for ``from-file``, whose partitions are the file's);
    ``value`` is the offset of ``to-offset`` or the shift of ``shift-by``. The lookups a scenario
    needs (``lookups_for``) map each partition to its offset, None (or absent) when the broker
    gave none; ``for_timestamp`` holds -1 or None where no record is at or after the timestamp.
    Raises ``ResetUsageError`` with Kafka's message where Kafka prints usage and exits 1.
    """
    committed = committed or {}
    earliest = earliest or {}
    latest = latest or {}
    tps = sorted(set(partitions))
    if scenario == "to-earliest":
        return ResetPlan({tp: _required(earliest, tp, "starting offset") for tp in tps})
    if scenario == "to-latest":
        return ResetPlan({tp: _required(latest, tp, "ending offset") for tp in tps})
    if scenario == "to-current":
        return ResetPlan({tp: committed[tp] if tp in committed else _required(latest, tp, "ending offset")
                          for tp in tps})
    if scenario == "to-offset":
        if value is None:
            raise ValueError("to-offset needs the offset")
        offsets, warnings = clamp({tp: value for tp in tps}, earliest, latest)
        return ResetPlan(offsets, warnings=warnings)
    if scenario == "shift-by":
        if value is None:
            raise ValueError("shift-by needs the number of offsets")
        requested: dict[TopicPartition, int] = {}
        for tp in tps:
            if tp not in committed:
                raise ResetUsageError(f"Cannot shift offset for partition {tp_name(tp)} since there is no current "
                                      "committed offset")
            requested[tp] = committed[tp] + value
        offsets, warnings = clamp(requested, earliest, latest)
        return ResetPlan(offsets, warnings=warnings)
    if scenario in ("to-datetime", "by-duration"):
        found = for_timestamp or {}
        notices: list[str] = []
        result: dict[TopicPartition, int] = {}
        for tp in tps:
            offset = found.get(tp)
            if offset is None or offset == -1:
                # ListOffsets answered UNKNOWN_OFFSET: nothing at or after the timestamp.
                notices.append(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. "
                               "Falling back to latest known offset.")
                result[tp] = _required(latest, tp, "offset by timestamp")
            else:
                result[tp] = offset
        return ResetPlan(result, notices=notices)
    if scenario == "from-file":
        offsets, warnings = clamp(dict(from_file or {}), earliest, latest)
        return ResetPlan(offsets, warnings=warnings)
    raise ValueError(f"unknown reset scenario {scenario!r}")
