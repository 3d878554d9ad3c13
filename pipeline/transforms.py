"""The analytics, as DataFrame -> DataFrame functions over the raw ``consumer_offsets`` table.

Semantics follow the server's own replay (``coordinator/group``): the log is ordered by
(log partition, offset); the latest OffsetCommit record of a (group, topic, partition) is its
committed offset, and a tombstone removes it. A GroupMetadata tombstone (the group deleted or
expired) removes the group, not its offsets: those get tombstones of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TypedDict

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, parse_subscribed_topics

from .source.schema import GROUP_METADATA, OFFSET_COMMIT

__all__ = [
    "offset_commits", "latest_offsets", "commit_history", "commit_rate", "consumer_lag", "lag_at_commits",
    "burrow_status", "group_status", "group_generations", "membership_changes", "expired_offsets",
    "BURROW_ORDER", "evaluate_window",
]

KEY = ["group_id", "topic", "partition"]

#: ``offsets.retention.minutes`` default (KIP-186), in milliseconds.
OFFSETS_RETENTION_MS = 10_080 * 60_000


def offset_commits(raw: DataFrame) -> DataFrame:
    return raw.where(F.col("record_type") == OFFSET_COMMIT)


def _latest(commits: DataFrame) -> DataFrame:
    w = Window.partitionBy(*KEY).orderBy(F.col("log_partition").desc(), F.col("offset").desc())
    return commits.withColumn("_rank", F.row_number().over(w)).where("_rank = 1").drop("_rank")


def latest_offsets(raw: DataFrame) -> DataFrame:
    """The compacted view: what OffsetFetch answers for every group, partition by partition."""
    latest = _latest(offset_commits(raw))
    return (latest.where(~F.col("is_tombstone"))
            .select(*KEY, "committed_offset", "leader_epoch", "commit_metadata",
                    F.timestamp_millis("commit_timestamp_ms").alias("commit_time"),
                    F.col("offset").alias("log_offset")))


def commit_history(raw: DataFrame) -> DataFrame:
    return (offset_commits(raw).where(~F.col("is_tombstone"))
            .select(*KEY, "committed_offset", "leader_epoch", "commit_timestamp_ms",
                    F.timestamp_millis("commit_timestamp_ms").alias("commit_time"),
                    "log_partition", F.col("offset").alias("log_offset")))


def commit_rate(raw: DataFrame, window: str = "1 minute") -> DataFrame:
    """Commit records per group per time window."""
    return (commit_history(raw).groupBy("group_id", F.window("commit_time", window).alias("window"))
            .agg(F.count("*").alias("commits"), F.countDistinct("topic", "partition").alias("partitions"))
            .select("group_id", F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "commits", "partitions"))


def consumer_lag(latest: DataFrame, end_offsets: DataFrame) -> DataFrame:
    """Lag per group and partition now: log end offset minus committed offset (null when the
    partition's end is unknown)."""
    return (latest.join(end_offsets, ["topic", "partition"], "left")
            .select(*KEY, "committed_offset", "log_end_offset",
                    (F.col("log_end_offset") - F.col("committed_offset")).alias("lag")))


def lag_at_commits(history: DataFrame, end_history: DataFrame) -> DataFrame:
    """Each commit (a ``commit_history`` row, all its columns kept) with the partition's end
    offset at its commit time (the highest end offset of
    the batches stamped at or before it) and the lag then, never below zero (Burrow stores
    negative lag as 0).

    Commits and batches are merged into one time line per topic partition and a running maximum
    carries the end offset forward: a sort per partition, not a join of every commit with every
    batch, so it scales with the log rather than with their product."""
    commits = (history.withColumn("_ts", F.col("commit_timestamp_ms")).withColumn("_kind", F.lit(1))
               .withColumn("_end", F.lit(None).cast("long")))
    batches = end_history.select("topic", "partition", F.col("batch_max_timestamp_ms").alias("_ts"),
                                 F.lit(0).alias("_kind"), F.col("end_offset").alias("_end"))
    w = (Window.partitionBy("topic", "partition").orderBy("_ts", "_kind")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    timeline = (commits.unionByName(batches, allowMissingColumns=True)
                .withColumn("end_offset_then", F.coalesce(F.max("_end").over(w), F.lit(0))))
    return (timeline.where(F.col("_kind") == 1).drop("_ts", "_kind", "_end")
            .withColumn("lag_then", F.greatest(F.col("end_offset_then") - F.col("committed_offset"), F.lit(0))))


#: Burrow's status order, worst last (core/protocol/evaluator.go).
BURROW_ORDER = ["OK", "WARN", "STOP", "STALL", "REWIND"]


class WindowEntry(TypedDict):
    """What ``evaluate_window`` reads of one commit of a partition's window (``burrow_status``'s
    rows also carry the commit's log position, ``pos``, which only orders them)."""

    ts: int
    offset: int
    lag: int


def evaluate_window(entries: Sequence[WindowEntry], current_lag: int | None, now_ms: int) -> str:
    """Burrow's partition rules (clients_and_peers.md §5.2) over the last commits, oldest first;
    each entry has ``offset``, ``ts`` and ``lag``."""
    if not entries:
        return "OK"
    if current_lag is None or current_lag <= 0 or any(e["lag"] == 0 for e in entries):
        return "OK"  # rule 1: caught up at some point of the window
    offsets = [e["offset"] for e in entries]
    if any(b < a for a, b in pairwise(offsets)):
        return "REWIND"
    first, last = entries[0]["ts"], entries[-1]["ts"]
    if now_ms - last > last - first:
        return "STOP"
    if len(set(offsets)) == 1:
        return "STALL"
    lags = [e["lag"] for e in entries]
    if len(lags) > 1 and all(b >= a for a, b in pairwise(lags)):
        return "WARN"
    return "OK"


def burrow_status(history_with_lag: DataFrame, lag_now: DataFrame, now_ms: int, intervals: int = 10) -> DataFrame:
    """Status per committed group partition (the rows of ``lag_now``, i.e. offsets still in the
    compacted view) over its last ``intervals`` commits."""
    w = Window.partitionBy(*KEY).orderBy(F.col("commit_timestamp_ms").desc(), F.col("log_offset").desc())
    recent = (history_with_lag.withColumn("_n", F.row_number().over(w)).where(F.col("_n") <= intervals)
              .groupBy(*KEY).agg(F.sort_array(F.collect_list(F.struct(
                  F.col("commit_timestamp_ms").alias("ts"), F.col("log_offset").alias("pos"),
                  F.col("committed_offset").alias("offset"), F.col("lag_then").alias("lag")))).alias("window")))

    def evaluate(window, lag):  # untyped on purpose: hints would make Spark guess a pandas UDF
        return evaluate_window([e.asDict() for e in window or []], lag, now_ms)

    evaluate = F.udf(evaluate, StringType())

    return (recent.join(lag_now.select(*KEY, "lag"), KEY, "inner")
            .select(*KEY, "lag", F.size("window").alias("window_commits"),
                    evaluate("window", "lag").alias("status")))


def group_status(partition_status: DataFrame) -> DataFrame:
    """Each group's worst partition status; ``burrow_status`` reports STOP/STALL/REWIND as ERR at
    group level, as Burrow's HTTP API does."""
    rank = F.array_position(F.array(*[F.lit(s) for s in BURROW_ORDER]), F.col("status"))
    worst = (partition_status.groupBy("group_id")
             .agg(F.max(rank).alias("_r"), F.sum("lag").alias("total_lag"), F.max("lag").alias("max_lag"),
                  F.count("*").alias("partitions")))
    names = F.array(*[F.lit(s) for s in BURROW_ORDER])
    return worst.select("group_id", F.element_at(names, F.col("_r").cast("int")).alias("status"),
                        F.when(F.col("_r") >= 3, F.lit("ERR")).otherwise(F.element_at(names, F.col("_r").cast("int")))
                        .alias("burrow_status"), "partitions", "total_lag", "max_lag")


def _with_incarnation(gm: DataFrame) -> DataFrame:
    """Numbers each lifetime of a group name: 0 until its first GroupMetadata tombstone (deleted
    or expired), 1 after it, and so on. A group created again under the same name starts its
    generations again from 1; the incarnation keeps the two lives apart."""
    w = (Window.partitionBy("group_id").orderBy("log_partition", "offset")
         .rowsBetween(Window.unboundedPreceding, -1))
    return gm.withColumn("incarnation", F.coalesce(F.sum(F.col("is_tombstone").cast("int")).over(w), F.lit(0)))


def group_generations(raw: DataFrame) -> DataFrame:
    """One row per group generation, from its last GroupMetadata record: protocol, leader,
    members. The server writes a record when a generation's assignment is complete and when the
    group empties (a generation with no members)."""
    gm = _with_incarnation(raw.where(F.col("record_type") == GROUP_METADATA)).where(~F.col("is_tombstone"))
    w = (Window.partitionBy("group_id", "incarnation", "generation")
         .orderBy(F.col("log_partition").desc(), F.col("offset").desc()))
    last = gm.withColumn("_rank", F.row_number().over(w)).where("_rank = 1")
    return last.select("group_id", "incarnation", "generation", "protocol_type", "protocol", "leader",
                       F.timestamp_millis("batch_timestamp_ms").alias("time"),
                       F.size("members").alias("member_count"),
                       F.sort_array(F.transform("members", lambda m: m["member_id"])).alias("member_ids"),
                       F.col("offset").alias("log_offset"))


def membership_changes(generations: DataFrame) -> DataFrame:
    """Members that joined and left at each generation, against the group's previous one (of
    the same incarnation)."""
    w = Window.partitionBy("group_id", "incarnation").orderBy("generation")
    previous = F.coalesce(F.lag("member_ids").over(w), F.array().cast("array<string>"))
    return (generations.withColumn("_prev", previous)
            .select("group_id", "incarnation", "generation", "time", "member_count",
                    F.array_except("member_ids", "_prev").alias("joined"),
                    F.array_except("_prev", "member_ids").alias("left")))


def _subscribed_topics(members):  # untyped on purpose: hints would make Spark guess a pandas UDF
    """The union of the members' ConsumerProtocolSubscription topics; None if any does not parse
    (the coordinator then treats the group as subscribed to everything)."""
    topics: set[str] = set()
    for m in members or []:
        parsed = parse_subscribed_topics(bytes(m["subscription"] or b""))
        if parsed is None:
            return None
        topics |= parsed
    return sorted(topics)


def _expiry_due_at(latest: DataFrame, raw: DataFrame, retention_ms: int) -> DataFrame:
    """``latest`` (live offsets) with ``_due_at``: when a coordinator that loaded this log would
    expire each one, or null when it would not (the server's
    ``OffsetManager.expired_offset_tombstones``; KIP-211,
    https://cwiki.apache.org/confluence/display/KAFKA/KIP-211%3A+Revise+Expiration+Semantics+of+Consumer+Group+Offsets
    and Kafka's ``OffsetExpirationConditionImpl``,
    https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/OffsetExpirationConditionImpl.java
    ). The group is as the coordinator rebuilds it from its last GroupMetadata record: none, a
    tombstone or no protocol type is a simple group (age from each commit); no members is Empty
    (age from when it became Empty, or from the commit when the record has no state time, v0/v1);
    members under the "consumer" protocol is Stable (age from the commit, only for topics no
    member subscribes to); anything else never expires. An explicit expire time (value v1)
    replaces the age rule wherever one applies."""
    subscribed = F.udf(_subscribed_topics, ArrayType(StringType()))
    groups = (raw.where(F.col("record_type") == GROUP_METADATA).groupBy("group_id")
              .agg(F.max_by(F.struct("is_tombstone", "protocol_type", "protocol", "state_timestamp_ms", "members"),
                            F.struct("log_partition", "offset")).alias("_g"))
              .select("group_id", F.col("_g.*"))
              .select("group_id",
                      (F.col("is_tombstone") | F.coalesce(F.col("protocol_type"), F.lit("")).__eq__("")).alias("_simple"),
                      (F.coalesce(F.size("members"), F.lit(0)) <= 0).alias("_empty"),
                      F.col("state_timestamp_ms").alias("_became_empty"),
                      F.when((F.col("protocol_type") == CONSUMER_PROTOCOL_TYPE) & F.col("protocol").isNotNull(),
                             subscribed("members")).alias("_subscribed")))
    commit_ts, expire_ts = F.col("commit_timestamp_ms"), F.col("expire_timestamp_ms")
    base = (F.when(F.col("_simple").isNull() | F.col("_simple"), commit_ts)
            .when(F.col("_empty"), F.when(F.col("_became_empty") >= 0, F.col("_became_empty")).otherwise(commit_ts))
            .when(F.col("_subscribed").isNotNull() & ~F.array_contains("_subscribed", F.col("topic")), commit_ts))
    due = (F.when(base.isNull(), F.lit(None))
           .when(expire_ts.isNotNull() & (expire_ts >= 0), expire_ts)
           .otherwise(base + F.lit(retention_ms)))
    return latest.join(groups, "group_id", "left").withColumn("_due_at", due)


def expired_offsets(raw: DataFrame, now_ms: int, retention_ms: int = OFFSETS_RETENTION_MS) -> DataFrame:
    """Offsets that are gone (their latest record is a tombstone) with their last committed
    value, plus offsets still present that a coordinator loading this log at ``now_ms`` would
    expire (``_expiry_due_at``). ``kind``: ``removed with group`` when the group's own
    GroupMetadata tombstone was written with the offset's (DeleteGroups, or expiry that emptied
    a dead group), ``removed`` otherwise (expiry, OffsetDelete, topic deletion: the log does not
    say which), ``expiry due`` for the overdue ones, with ``removed_at`` the time they fell due."""
    commits = offset_commits(raw)
    latest = _latest(commits)
    gone = latest.where(F.col("is_tombstone")).select(*KEY, F.col("offset").alias("tombstone_offset"),
                                                      F.col("log_partition").alias("_tlp"),
                                                      F.col("batch_timestamp_ms").alias("_tts"),
                                                      F.timestamp_millis("batch_timestamp_ms").alias("removed_at"))
    w = Window.partitionBy(*KEY).orderBy(F.col("log_partition").desc(), F.col("offset").desc())
    last_value = (commits.where(~F.col("is_tombstone")).withColumn("_rank", F.row_number().over(w))
                  .where("_rank = 1").select(*KEY, F.col("committed_offset").alias("last_committed_offset")))
    # The group's next GroupMetadata record after the tombstone, if it is the group's own
    # tombstone written with it (same batch time): the offsets went with the group (DeleteGroups,
    # or expiry that left an Empty group with nothing).
    gm = raw.where(F.col("record_type") == GROUP_METADATA).select(
        "group_id", F.col("log_partition").alias("_lp"), F.col("offset").alias("_gm_offset"),
        F.col("is_tombstone").alias("_gm_tombstone"), F.col("batch_timestamp_ms").alias("_gm_ts"))
    next_gm = (gone.join(gm, "group_id").where((F.col("_lp") == F.col("_tlp")) & (F.col("_gm_offset") > F.col("tombstone_offset")))
               .groupBy(*KEY).agg(F.min_by(F.struct("_gm_tombstone", "_gm_ts"), F.col("_gm_offset")).alias("_next")))
    with_group = F.coalesce(F.col("_next._gm_tombstone") & (F.col("_next._gm_ts") == F.col("_tts")), F.lit(False))
    removed = (gone.join(last_value, KEY, "left").join(next_gm, KEY, "left")
               .select(*KEY, "last_committed_offset", "removed_at",
                       F.when(with_group, F.lit("removed with group")).otherwise(F.lit("removed")).alias("kind")))
    overdue = (_expiry_due_at(latest.where(~F.col("is_tombstone")), raw, retention_ms)
               .where(F.col("_due_at") <= now_ms)
               .select(*KEY, F.col("committed_offset").alias("last_committed_offset"),
                       F.timestamp_millis("_due_at").alias("removed_at"), F.lit("expiry due").alias("kind")))
    return removed.unionByName(overdue)
