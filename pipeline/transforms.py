"""The analytics, as DataFrame -> DataFrame functions over the raw ``consumer_offsets`` table.

Semantics follow the server's own replay (``coordinator/group``): the log is ordered by
(log partition, offset); the latest OffsetCommit record of a (group, topic, partition) is its
committed offset, and a tombstone removes it. A GroupMetadata tombstone (the group deleted or
expired) removes the group, not its offsets: those get tombstones of their own.

Transactional commits (TxnOffsetCommit, KIP-447) sit in transactional batches of their producer:
such a record counts once the producer's next marker in that log partition is a COMMIT, never if
it is an ABORT, and is *pending* while there is none (``pending_offsets``). A committed one then
competes by its own log position with the other records, which is the server's rule (the last
log position wins: ``coordinator/group/offset_manager.py`` rule 3).

KIP-848 consumer groups (``group.protocol=consumer``) have no generations: their history is the
group epoch (ConsumerGroupMetadata), the members' subscriptions (ConsumerGroupMemberMetadata,
a tombstone when a member leaves), the target assignment's epoch and each member's epoch
(ConsumerGroupCurrentMemberAssignment): ``consumer_group_epochs`` and ``consumer_member_epochs``.
KIP-848:
https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

from coordinator.lag.burrow import OffsetEntry, Status, evaluate_partition
from coordinator.lag.time_lag import LookupTable
from protocol.consumer_group_records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
)
from protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, parse_subscribed_topics

from .source.schema import CONSUMER_GROUP, CONTROL, GROUP_METADATA, OFFSET_COMMIT

__all__ = [
    "offset_commits", "transactional_commits", "pending_offsets", "latest_offsets", "commit_history", "commit_rate", "consumer_lag",
    "lag_seconds_from_history", "lag_at_commits",
    "burrow_status", "group_status", "group_generations", "membership_changes", "expired_offsets",
    "consumer_group_epochs", "consumer_member_epochs", "walk_consumer_group", "MEMBER_STATES",
    "BURROW_ORDER", "evaluate_window",
]

KEY = ["group_id", "topic", "partition"]
#: A control record's type (Kafka's ``ControlRecordType``).
ABORT_MARKER, COMMIT_MARKER = 0, 1

#: ``offsets.retention.minutes`` default (KIP-186), in milliseconds.
OFFSETS_RETENTION_MS = 10_080 * 60_000


#: ``transaction_outcome`` of a transactional commit: its producer's next marker, or none yet.
COMMITTED, ABORTED, PENDING = "committed", "aborted", "pending"


def transactional_commits(raw: DataFrame) -> DataFrame:
    """The OffsetCommit records of transactional batches, each with ``transaction_outcome``: the
    type of the first marker of its producer after it in its log partition (COMMIT: committed,
    ABORT: aborted), or pending."""
    rows = raw.where(F.col("is_transactional") & F.col("record_type").isin(OFFSET_COMMIT, CONTROL))
    w = (Window.partitionBy("log_partition", "producer_id").orderBy("offset")
         .rowsBetween(1, Window.unboundedFollowing))
    marker = F.first(F.when(F.col("record_type") == CONTROL, F.col("control_type")), ignorenulls=True).over(w)
    return (rows.withColumn("_marker", marker).where(F.col("record_type") == OFFSET_COMMIT)
            .withColumn("transaction_outcome", F.when(F.col("_marker") == COMMIT_MARKER, F.lit(COMMITTED))
                        .when(F.col("_marker") == ABORT_MARKER, F.lit(ABORTED)).otherwise(F.lit(PENDING)))
            .drop("_marker"))


def offset_commits(raw: DataFrame) -> DataFrame:
    """The OffsetCommit records that count: plain ones, and transactional ones whose transaction
    committed."""
    commits = raw.where(F.col("record_type") == OFFSET_COMMIT)
    committed = (transactional_commits(raw).where(F.col("transaction_outcome") == COMMITTED)
                 .drop("transaction_outcome"))
    return commits.where(~F.coalesce(F.col("is_transactional"), F.lit(False))).unionByName(committed)


def pending_offsets(raw: DataFrame) -> DataFrame:
    """Transactional offsets whose transaction has no marker yet: invisible to OffsetFetch, which
    answers UNSTABLE_OFFSET_COMMIT for their partitions to a RequireStable fetch (KIP-447)."""
    return (transactional_commits(raw).where(F.col("transaction_outcome") == PENDING)
            .select("producer_id", *KEY, "committed_offset", "commit_metadata",
                    F.timestamp_millis("commit_timestamp_ms").alias("commit_time"),
                    "log_partition", F.col("offset").alias("log_offset")))


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


def consumer_lag(latest: DataFrame, end_offsets: DataFrame, end_history: DataFrame | None = None,
                 now_ms: int | None = None) -> DataFrame:
    """Lag per group and partition now: log end offset minus committed offset (null when the
    partition's end is unknown), and ``lag_seconds``: how long ago, at ``now_ms``, the log end was
    at the committed offset, by kafka-lag-exporter's interpolation over the partition's end-offset
    history (``lag_seconds_from_history``). 0 when the group is caught up; null when the lag is
    unknown or the history cannot tell (no ``end_history``: end offsets from a file)."""
    lag = (latest.join(end_offsets, ["topic", "partition"], "left")
           .select(*KEY, "committed_offset", "log_end_offset",
                   (F.col("log_end_offset") - F.col("committed_offset")).alias("lag")))
    caught_up = F.when(F.col("lag") <= 0, F.lit(0.0))
    if end_history is None or now_ms is None:
        return lag.withColumn("lag_seconds", caught_up.cast("double"))
    points = (end_history.groupBy("topic", "partition")
              .agg(F.sort_array(F.collect_list(F.struct(F.col("end_offset").alias("offset"),
                                                        F.col("batch_max_timestamp_ms").alias("ts")))).alias("points")))
    # One lookup table per topic partition for all the offsets groups committed on it, not one per
    # group partition: the table is built from the whole history of the partition.
    wanted = (lag.where(F.col("lag") > 0).groupBy("topic", "partition")
              .agg(F.collect_set("committed_offset").alias("offsets")))

    def seconds(points, offsets):  # untyped on purpose: hints would make Spark guess a pandas UDF
        history = [(p["offset"], p["ts"]) for p in points or []]
        return [(o, s) for o, s in lag_seconds_from_history(history, offsets, now_ms).items()]

    seconds = F.udf(seconds, ArrayType(StructType([StructField("committed_offset", LongType()),
                                                   StructField("lag_seconds", DoubleType())])))
    per_offset = (wanted.join(points, ["topic", "partition"], "left")
                  .select("topic", "partition", F.explode(seconds("points", "offsets")).alias("s"))
                  .select("topic", "partition", "s.committed_offset", "s.lag_seconds"))
    return (lag.join(per_offset, ["topic", "partition", "committed_offset"], "left")
            .select(*KEY, "committed_offset", "log_end_offset", "lag",
                    caught_up.otherwise(F.col("lag_seconds")).alias("lag_seconds")))


def lag_seconds_from_history(history: Sequence[tuple[int, int]], committed: Sequence[int],
                             now_ms: int) -> dict[int, float | None]:
    """Lag in seconds of each committed offset of one partition, at ``now_ms``: kafka-lag-exporter's
    lookup table (``coordinator/lag/time_lag.py``, the rule the server falls back on when the record
    at the committed offset cannot be read) fed the partition's (end offset after a batch, the
    batch's max timestamp) points in log order. The server's table holds the end offsets it sampled
    lately; here every batch is a point, so the table holds them all and nothing falls out of it.
    Points stamped no later than the one before are dropped (the exporter's OutOfOrder)."""
    table = LookupTable(max(len(history), 1))
    for offset, ts in history:
        table.add(offset, ts)
    return {o: table.lag_seconds(o, now_ms) for o in committed}


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


#: Burrow's partition statuses, best first: ``coordinator.lag.burrow.Status`` order without
#: NOTFOUND and ERR (a group's status, which ``group_status`` derives).
BURROW_ORDER = [s.name for s in Status if s not in (Status.NOTFOUND, Status.ERR)]


class WindowEntry(TypedDict):
    """What ``evaluate_window`` reads of one commit of a partition's window (``burrow_status``'s
    rows also carry the commit's log position, ``pos``, which only orders them)."""

    ts: int
    offset: int
    lag: int


def evaluate_window(entries: Sequence[WindowEntry], current_lag: int | None, now_ms: int,
                    intervals: int = 10) -> str:
    """Burrow's partition status (``coordinator/lag/burrow.py``, the rules the server uses) over the
    last commits, oldest first. The log has no record of the broker end offsets Burrow samples
    between commits, so STOP is never held back by a recent catch-up; an unknown or negative
    current lag counts as 0, as Burrow floors it."""
    window = [OffsetEntry(e["offset"], e["ts"], e["ts"], e["lag"]) for e in entries]
    lag = max(current_lag or 0, 0)
    return evaluate_partition(window, (), lag, now_ms, intervals=intervals).name


def burrow_status(history_with_lag: DataFrame, lag_now: DataFrame, now_ms: int, intervals: int = 10) -> DataFrame:
    """Status per committed group partition (the rows of ``lag_now``, i.e. offsets still in the
    compacted view) over its last ``intervals`` commits."""
    w = Window.partitionBy(*KEY).orderBy(F.col("commit_timestamp_ms").desc(), F.col("log_offset").desc())
    recent = (history_with_lag.withColumn("_n", F.row_number().over(w)).where(F.col("_n") <= intervals)
              .groupBy(*KEY).agg(F.sort_array(F.collect_list(F.struct(
                  F.col("commit_timestamp_ms").alias("ts"), F.col("log_offset").alias("pos"),
                  F.col("committed_offset").alias("offset"), F.col("lag_then").alias("lag")))).alias("window")))

    def evaluate(window, lag):  # untyped on purpose: hints would make Spark guess a pandas UDF
        return evaluate_window([e.asDict() for e in window or []], lag, now_ms, intervals)

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


#: Kafka's MemberState codes (``ConsumerGroupCurrentMemberAssignmentValue.State``, an int8) by name.
MEMBER_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"}


class ConsumerGroupEvent(TypedDict):
    """What ``walk_consumer_group`` reads of one KIP-848 record of a group (key versions 3, 5, 6)."""

    log_partition: int
    offset: int
    key_version: int
    is_tombstone: bool
    time_ms: int | None
    member_id: str | None
    group_epoch: int | None
    assignment_epoch: int | None


class ConsumerGroupEpoch(TypedDict):
    incarnation: int
    group_epoch: int
    time_ms: int | None
    target_assignment_epoch: int | None
    member_ids: list[str]
    joined: list[str]
    left: list[str]
    log_offset: int


def walk_consumer_group(events: Sequence[ConsumerGroupEvent]) -> list[ConsumerGroupEpoch]:
    """Replays one consumer group's epoch, member and target-assignment records (in any order:
    they are sorted by log position here) into one entry per group epoch record.

    The coordinator writes a joining member's ConsumerGroupMemberMetadata before the epoch bump it
    causes, and a leaving member's tombstone before its own bump, so the members of an epoch are
    those whose latest member record up to the epoch record is not a tombstone; ``joined`` and
    ``left`` compare them with the previous epoch's. The target assignment computed for an epoch
    follows its epoch record: ``target_assignment_epoch`` is the last TargetAssignmentMetadata
    written before the next epoch record (null when none was, e.g. under KIP-1263's assignment
    interval). A ConsumerGroupMetadata tombstone (the group deleted) ends an incarnation: members
    and epochs start again under the same name."""
    ordered = sorted(events, key=lambda e: (e["log_partition"], e["offset"]))
    epochs: list[ConsumerGroupEpoch] = []
    current: ConsumerGroupEpoch | None = None
    incarnation = 0
    live: set[str] = set()
    at_last_epoch: set[str] = set()
    for e in ordered:
        kind = e["key_version"]
        if kind == CONSUMER_GROUP_METADATA:
            if e["is_tombstone"]:
                incarnation += 1
                live, at_last_epoch, current = set(), set(), None
                continue
            current = {"incarnation": incarnation, "group_epoch": e["group_epoch"] or 0, "time_ms": e["time_ms"],
                       "target_assignment_epoch": None, "member_ids": sorted(live),
                       "joined": sorted(live - at_last_epoch), "left": sorted(at_last_epoch - live),
                       "log_offset": e["offset"]}
            epochs.append(current)
            at_last_epoch = set(live)
        elif kind == CONSUMER_GROUP_MEMBER_METADATA and e["member_id"] is not None:
            if e["is_tombstone"]:
                live.discard(e["member_id"])
            else:
                live.add(e["member_id"])
        elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA and current is not None and not e["is_tombstone"]:
            current["target_assignment_epoch"] = e["assignment_epoch"]
    return epochs


_EPOCH_TYPE = ArrayType(StructType([
    StructField("incarnation", IntegerType()),
    StructField("group_epoch", IntegerType()),
    StructField("time_ms", LongType()),
    StructField("target_assignment_epoch", IntegerType()),
    StructField("member_ids", ArrayType(StringType())),
    StructField("joined", ArrayType(StringType())),
    StructField("left", ArrayType(StringType())),
    StructField("log_offset", LongType()),
]))


def consumer_group_epochs(raw: DataFrame) -> DataFrame:
    """One row per group epoch of a KIP-848 consumer group: when it was bumped, the members then,
    who joined and who left since the previous epoch, and the target assignment epoch computed
    for it (``walk_consumer_group``). A group's records are few next to its commits (one set per
    rebalance), so each group is replayed in one Python call."""

    def walk(events):  # untyped on purpose: hints would make Spark guess a pandas UDF
        return walk_consumer_group([e.asDict() for e in events or []])

    walk = F.udf(walk, _EPOCH_TYPE)
    kinds = (CONSUMER_GROUP_METADATA, CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA)
    event = F.struct("log_partition", "offset", F.col("key_version").cast("int").alias("key_version"), "is_tombstone",
                     F.col("batch_timestamp_ms").alias("time_ms"), "member_id", "group_epoch", "assignment_epoch")
    events = (raw.where((F.col("record_type") == CONSUMER_GROUP) & F.col("key_version").isin(*kinds))
              .groupBy("group_id").agg(F.collect_list(event).alias("_events")))
    return (events.select("group_id", F.explode(walk("_events")).alias("_e"))
            .select("group_id", "_e.incarnation", "_e.group_epoch", F.timestamp_millis("_e.time_ms").alias("time"),
                    "_e.target_assignment_epoch", F.size("_e.member_ids").alias("member_count"), "_e.member_ids",
                    "_e.joined", "_e.left", "_e.log_offset"))


def consumer_member_epochs(raw: DataFrame) -> DataFrame:
    """One row per ConsumerGroupCurrentMemberAssignment record: a member's epoch moving toward the
    group's (``previous_member_epoch`` -> ``member_epoch``), its reconciliation ``state`` (Kafka's
    MemberState name) and the partitions it owns and is yet to revoke, counted and by topic id."""
    cg = raw.where(F.col("record_type") == CONSUMER_GROUP)
    deleted = ((F.col("key_version") == CONSUMER_GROUP_METADATA) & F.col("is_tombstone")).cast("int")
    w = (Window.partitionBy("group_id").orderBy("log_partition", "offset")
         .rowsBetween(Window.unboundedPreceding, -1))
    states = F.create_map(*[F.lit(x) for code, name in MEMBER_STATES.items() for x in (code, name)])
    state = F.col("member_state").cast("int")

    def count(column: str) -> Column:
        return F.coalesce(F.size(F.flatten(F.transform(column, lambda t: t["partitions"]))), F.lit(0))

    return (cg.withColumn("incarnation", F.coalesce(F.sum(deleted).over(w), F.lit(0)))
            .where((F.col("key_version") == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT) & ~F.col("is_tombstone"))
            .select("group_id", "incarnation", "member_id", "member_epoch", "previous_member_epoch",
                    F.coalesce(F.element_at(states, state), state.cast("string")).alias("state"),
                    count("assigned_partitions").alias("assigned_count"),
                    count("partitions_pending_revocation").alias("pending_revocation_count"),
                    "assigned_partitions", "partitions_pending_revocation",
                    F.timestamp_millis("batch_timestamp_ms").alias("time"), F.col("offset").alias("log_offset")))


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
