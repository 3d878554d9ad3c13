"""Per-topic configuration: Kafka's keys, their checks, defaults and broker-level synonyms.

One table serves CreateTopics validation (an unknown key gets INVALID_CONFIG, as in Kafka),
DescribeConfigs (the value in force and where it came from) and, for hosted topics, the log
engine's options. A topic key without an override takes its broker synonym's value (e.g.
``retention.ms`` ← ``log.retention.ms``) or, lacking one, Kafka's default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .replication_quota import throttled_replicas_error

__all__ = ["TopicConfigDef", "TOPIC_CONFIGS", "topic_config_error", "offsets_topic_configs", "effective_topic_configs"]

# DescribeConfigs config types (DescribeConfigsResponse.json, v3+).
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 4, 5, 6, 7


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


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    check: Callable[[str], bool]
    default: str
    type: int
    broker_key: str | None = None
    doc: str = ""


_DEFS = [
    TopicConfigDef("cleanup.policy", _policy, "delete", TYPE_LIST, None, "delete or compact (or both)"),
    TopicConfigDef("compression.type", _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
                   "producer", TYPE_STRING, None, "compression of stored batches; producer keeps what was sent"),
    TopicConfigDef("delete.retention.ms", _long(0), "86400000", TYPE_LONG, None, "how long tombstones survive cleaning"),
    TopicConfigDef("file.delete.delay.ms", _long(0), "60000", TYPE_LONG, None, "delay before a deleted file is removed"),
    TopicConfigDef("flush.messages", _long(1), str(2**63 - 1), TYPE_LONG, "log.flush.interval.messages",
                   "fsync after this many messages"),
    TopicConfigDef("flush.ms", _long(0), str(2**63 - 1), TYPE_LONG, None, "fsync after this much time"),
    TopicConfigDef("index.interval.bytes", _long(0), "4096", TYPE_INT, None, "bytes between offset index entries"),
    TopicConfigDef("max.compaction.lag.ms", _long(1), str(2**63 - 1), TYPE_LONG, None, "longest a record stays uncompacted"),
    TopicConfigDef("max.message.bytes", _long(0), "1048588", TYPE_INT, "message.max.bytes", "largest record batch"),
    TopicConfigDef("message.timestamp.type", _one_of("CreateTime", "LogAppendTime"), "CreateTime", TYPE_STRING, None,
                   "whether stored timestamps are the producer's or the append time"),
    TopicConfigDef("message.timestamp.before.max.ms", _long(0), str(2**63 - 1), TYPE_LONG, None, "allowed timestamp skew (past)"),
    TopicConfigDef("message.timestamp.after.max.ms", _long(0), str(2**63 - 1), TYPE_LONG, None, "allowed timestamp skew (future)"),
    TopicConfigDef("min.cleanable.dirty.ratio", _ratio, "0.5", TYPE_DOUBLE, None, "dirty share that triggers compaction"),
    TopicConfigDef("min.compaction.lag.ms", _long(0), "0", TYPE_LONG, None, "shortest time a record stays uncompacted"),
    TopicConfigDef("min.insync.replicas", _long(1), "1", TYPE_INT, "min.insync.replicas", "replicas that must acknowledge acks=all"),
    TopicConfigDef("preallocate", _one_of("true", "false"), "false", TYPE_BOOLEAN, None, "preallocate segment files"),
    TopicConfigDef("retention.bytes", _long(-1), "-1", TYPE_LONG, "log.retention.bytes", "size retention per partition"),
    TopicConfigDef("retention.ms", _long(-1), "604800000", TYPE_LONG, "log.retention.ms", "time retention"),
    TopicConfigDef("segment.bytes", _long(14), "1073741824", TYPE_INT, "log.segment.bytes", "segment size"),
    TopicConfigDef("segment.index.bytes", _long(4), "10485760", TYPE_INT, None, "offset index size"),
    TopicConfigDef("segment.jitter.ms", _long(0), "0", TYPE_LONG, None, "random jitter of segment.ms"),
    TopicConfigDef("segment.ms", _long(1), "604800000", TYPE_LONG, None, "segment age that forces a roll"),
    TopicConfigDef("unclean.leader.election.enable", _one_of("true", "false"), "false", TYPE_BOOLEAN,
                   "unclean.leader.election.enable", "elect out-of-sync replicas"),
    # Replication throttles (KIP-73, replication_quota.py): in cluster mode; on a single node,
    # which replicates nothing, accepted and reported with no effect.
    TopicConfigDef("leader.replication.throttled.replicas", throttled_replicas_error, "", TYPE_LIST, None,
                   "replicas (partition:broker, or *) whose leader sends at most leader.replication.throttled.rate"),
    TopicConfigDef("follower.replication.throttled.replicas", throttled_replicas_error, "", TYPE_LIST, None,
                   "replicas (partition:broker, or *) fetched at most at follower.replication.throttled.rate"),
    # Accepted and reported as Kafka does, with no effect without tiered storage: a client that
    # sets them (tooling often copies whole topic configs) works.
    TopicConfigDef("remote.storage.enable", _one_of("true", "false"), "false", TYPE_BOOLEAN, None,
                   "tiered storage (not available here)"),
    TopicConfigDef("local.retention.ms", _long(-2), "-2", TYPE_LONG, None, "local retention under tiered storage"),
    TopicConfigDef("local.retention.bytes", _long(-2), "-2", TYPE_LONG, None, "local retention under tiered storage"),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}


def topic_config_error(name: str, value: str | None) -> str | None:
    """Why ``name=value`` is not acceptable for a topic, or None."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Null value not supported for topic config: {name}"
    if not definition.check(value):
        return f"Invalid value {value} for configuration {name}"
    return None


def offsets_topic_configs(segment_bytes: int) -> dict[str, str]:
    """``__consumer_offsets`` topic configs, as Kafka's ``groupMetadataTopicConfigs`` sets them."""
    return {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "compression.type": "producer"}


def effective_topic_configs(overrides: Mapping[str, str], broker: Mapping[str, object]) -> dict[str, tuple[str, str]]:
    """Every topic key's value in force and its source: ``topic``, ``broker`` or ``default``."""
    result: dict[str, tuple[str, str]] = {}
    for name, definition in TOPIC_CONFIGS.items():
        if name in overrides:
            result[name] = (overrides[name], "topic")
        elif definition.broker_key is not None and definition.broker_key in broker:
            value = broker[definition.broker_key]
            result[name] = (str(value).lower() if isinstance(value, bool) else str(value), "broker")
        else:
            result[name] = (definition.default, "default")
    return result
