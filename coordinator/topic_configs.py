"""Per-topic configuration keys a client may set in CreateTopics, with Kafka's names and checks.

A name not listed here gets INVALID_CONFIG, as Kafka answers for unknown topic configs.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["TOPIC_CONFIGS", "topic_config_error", "offsets_topic_configs"]


def _long(lo: int = 0) -> Callable[[str], bool]:
    def ok(value: str) -> bool:
        try:
            return int(value) >= lo
        except ValueError:
            return False

    return ok


def _ratio(value: str) -> bool:
    try:
        return 0.0 <= float(value) <= 1.0
    except ValueError:
        return False


def _policy(value: str) -> bool:
    parts = [p.strip() for p in value.split(",")]
    return bool(parts) and all(p in ("delete", "compact") for p in parts)


def _one_of(*options: str) -> Callable[[str], bool]:
    return lambda value: value in options


TOPIC_CONFIGS: dict[str, Callable[[str], bool]] = {
    "cleanup.policy": _policy,
    "compression.type": _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    "delete.retention.ms": _long(0),
    "file.delete.delay.ms": _long(0),
    "flush.messages": _long(1),
    "flush.ms": _long(0),
    "index.interval.bytes": _long(0),
    "max.compaction.lag.ms": _long(1),
    "max.message.bytes": _long(0),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "message.timestamp.before.max.ms": _long(0),
    "message.timestamp.after.max.ms": _long(0),
    "min.cleanable.dirty.ratio": _ratio,
    "min.compaction.lag.ms": _long(0),
    "min.insync.replicas": _long(1),
    "preallocate": _one_of("true", "false"),
    "retention.bytes": _long(-1),
    "retention.ms": _long(-1),
    "segment.bytes": _long(14),
    "segment.index.bytes": _long(4),
    "segment.jitter.ms": _long(0),
    "segment.ms": _long(1),
    "unclean.leader.election.enable": _one_of("true", "false"),
}


def topic_config_error(name: str, value: str | None) -> str | None:
    """Why ``name=value`` is not acceptable for a topic, or None."""
    check = TOPIC_CONFIGS.get(name)
    if check is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Null value not supported for topic config: {name}"
    if not check(value):
        return f"Invalid value {value} for configuration {name}"
    return None


def offsets_topic_configs(segment_bytes: int) -> dict[str, str]:
    """``__consumer_offsets`` topic configs, as Kafka's ``groupMetadataTopicConfigs`` sets them."""
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "compression.type": "producer"}
