"""Settings of the group coordinator (Kafka names and defaults, ``GroupCoordinatorConfig``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    #: group.min.session.timeout.ms / group.max.session.timeout.ms: JoinGroup session timeouts
    #: outside these bounds get INVALID_SESSION_TIMEOUT (a too-short timeout makes members flap,
    #: a too-long one keeps dead members in the group).
    session_timeout_min_ms: int = 6_000
    session_timeout_max_ms: int = 1_800_000
    #: group.initial.rebalance.delay.ms (KIP-134): wait this long for more members when an Empty
    #: group starts rebalancing, so consumers starting together cause one rebalance, not several.
    initial_rebalance_delay_ms: int = 3_000
    #: group.max.size (KIP-389): members per group; Kafka's default is Integer.MAX_VALUE.
    max_size: int = 2_147_483_647
    #: A brand-new member's liveness deadline while its first JoinGroup is parked (its socket is
    #: muted, so a disconnect cannot be seen): Kafka's NewMemberJoinTimeoutMs, 5 minutes.
    new_member_join_timeout_ms: int = 300_000
    #: offsets.retention.minutes (7 days since KIP-186) in milliseconds.
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    #: offsets.retention.check.interval.ms: how often expired offsets are looked for.
    offsets_retention_check_interval_ms: int = 600_000
    #: offset.metadata.max.bytes: longest CommittedMetadata, in UTF-16 code units as Java counts.
    offset_metadata_max_bytes: int = 4_096

    # --- KIP-848 consumer groups (GroupCoordinatorConfig's group.consumer.*; bounds are checked
    # where the settings are parsed, coordinator/config.py). Kafka 4 docs, "Consumer Rebalance
    # Protocol": https://kafka.apache.org/documentation/#consumer_rebalance_protocol

    #: group.consumer.session.timeout.ms: a member that does not heartbeat this long is fenced.
    consumer_session_timeout_ms: int = 45_000
    #: group.consumer.min/max.session.timeout.ms: bounds of the per-group override.
    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    #: group.consumer.heartbeat.interval.ms: the interval members are told to heartbeat at.
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    #: group.consumer.max.size: members per consumer group.
    consumer_max_size: int = 2_147_483_647
    #: group.consumer.assignors: server assignor names; the first is the default.
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: group.consumer.migration.policy: bidirectional | upgrade | downgrade | disabled.
    consumer_migration_policy: str = "bidirectional"
    #: group.consumer.regex.refresh.interval.ms: how often subscribed regexes are re-resolved.
    consumer_regex_refresh_interval_ms: int = 600_000
    #: group.consumer.assignment.interval.ms (KIP-1263, Kafka 4.3): the least time between two
    #: target assignment computations of a group; 0 computes on every group epoch bump.
    consumer_assignment_interval_ms: int = 1_000
