"""Kafka's own group-coordinator and replica metrics, computed at scrape time from the node's live
view, named as Prometheus' jmx_exporter names Kafka's JMX beans (domain, ``type``, attribute,
lower case, ``-`` and ``.`` as ``_``; other key properties become labels), so a dashboard built
for a Kafka broker scraped through jmx_exporter finds them:

* ``kafka.server:type=group-coordinator-metrics`` (Kafka's ``GroupCoordinatorMetrics`` and
  ``GroupCoordinatorRuntimeMetrics``, https://kafka.apache.org/documentation/#group_coordinator_monitoring):
  ``group-count{protocol}``, ``consumer-group-count{state}``, ``num-partitions{state}``,
  ``partition-load-time-max`` / ``-avg`` → ``kafka_server_group_coordinator_metrics_…``, and the
  ``…-count`` totals of commits, expirations, deletions and rebalances as counters
  (``kafka_server_group_coordinator_metrics_offset_commit_count_total``: prometheus-client adds
  ``_total`` to every counter);
* ``kafka.coordinator.group:type=GroupMetadataManager,name=NumOffsets|NumGroups…`` (the Yammer gauges
  kept for compatibility) → ``kafka_coordinator_group_groupmetadatamanager_numoffsets`` …;
* cluster mode, ``kafka.server:type=ReplicaManager,name=LeaderCount|PartitionCount|UnderReplicatedPartitions``
  → ``kafka_server_replicamanager_…``, and ``kafka.cluster:type=Partition,name=InSyncReplicasCount``
  → ``kafka_cluster_partition_insyncreplicascount{topic,partition}`` for the partitions this node leads,
  and groupcoord's own ``groupcoord_coordinator_standby_lag_records{topic,partition}``: what each hot
  standby of a coordinator partition has still to replay before it could take over.

Partition load times are those of the partitions loaded now, not Kafka's 30-second window.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from protocol.consumer_group_records import ConsumerGroupMetadataKey
from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey

from .context import OpsContext

__all__ = ["CoordinatorCollector", "GroupCoordinatorCounters", "CONSUMER_GROUP_STATES", "CLASSIC_GROUP_STATES"]

_PREFIX = "kafka_server_group_coordinator_metrics_"
_YAMMER = "kafka_coordinator_group_groupmetadatamanager_"
#: KIP-848 group states, as ``consumer-group-count`` tags them.
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
#: Classic group states and the Yammer gauge counting each.
CLASSIC_GROUP_STATES = {"PreparingRebalance": "numgroupspreparingrebalance",
                        "CompletingRebalance": "numgroupscompletingrebalance", "Stable": "numgroupsstable",
                        "Dead": "numgroupsdead", "Empty": "numgroupsempty"}
_OFFSETS_TOPIC = "__consumer_offsets"


#: Write operations (Kafka's runtime names, coordinator/group/) whose offset records are commits,
#: expirations (the retention timer, KIP-211) and administrative deletions.
_COMMIT_OPS = frozenset({"commit-offset", "txn-commit-offset"})
_EXPIRE_OPS = frozenset({"cleanup-group-metadata"})
_DELETE_OPS = frozenset({"delete-offsets", "delete-groups"})


class GroupCoordinatorCounters(Collector):
    """Kafka's ``offset-commit-count``, ``offset-expiration-count``, ``offset-deletion-count``,
    ``group-completed-rebalance-count`` and ``consumer-group-rebalance-count``, counted from the
    records each write operation of the group coordinator produces (``on_write``, handed to the
    runtime as its write observer): an offset commit record is a committed offset; an offset
    tombstone of the retention timer an expired one, of OffsetDelete or DeleteGroups a deleted one;
    the group record the leader's SyncGroup stores (the assignment) a completed classic rebalance;
    a KIP-848 group epoch record a consumer-group rebalance (Kafka bumps the epoch and counts one
    at the same place). Exposed as counters (``_total``), the rates being Prometheus' ``rate()``."""

    def __init__(self) -> None:
        self.commits = self.expirations = self.deletions = 0
        self.classic_rebalances = self.consumer_rebalances = 0

    def on_write(self, name: str, records: list[tuple[object, object]]) -> None:
        if name in _COMMIT_OPS:
            # The hot path: a commit writes one offset record per partition and nothing else
            # (coordinator/group/offset_manager.py), so no record needs looking at.
            self.commits += len(records)
            return
        for key, value in records:
            kind = type(key)
            if kind is OffsetCommitKey:
                if value is not None:
                    continue
                if name in _EXPIRE_OPS:
                    self.expirations += 1
                elif name in _DELETE_OPS:
                    self.deletions += 1
            elif kind is GroupMetadataKey:
                if value is not None and name == "classic-group-sync":
                    self.classic_rebalances += 1
            elif kind is ConsumerGroupMetadataKey and value is not None:
                self.consumer_rebalances += 1

    def collect(self) -> Iterator[CounterMetricFamily]:
        for name, doc, value in (
                ("offset_commit_count", "The total number of committed offsets", self.commits),
                ("offset_expiration_count", "The total number of expired offsets", self.expirations),
                ("offset_deletion_count", "The total number of administrative deleted offsets", self.deletions),
                ("group_completed_rebalance_count", "The total number of classic group completed rebalances",
                 self.classic_rebalances),
                ("consumer_group_rebalance_count", "The total number of consumer group rebalances",
                 self.consumer_rebalances)):
            yield CounterMetricFamily(_PREFIX + name, doc, value=float(value))


class CoordinatorCollector(Collector):
    def __init__(self, ctx: OpsContext) -> None:
        self._ctx = ctx

    def collect(self) -> Iterator[GaugeMetricFamily]:
        view = self._ctx.view
        by_protocol = {"classic": 0, "consumer": 0}
        consumer_states = dict.fromkeys(CONSUMER_GROUP_STATES, 0)
        classic_states = dict.fromkeys(CLASSIC_GROUP_STATES, 0)
        # Counted from the shards, not through view.groups() (~100 ms at 10,000 groups of 10
        # partitions, every scrape).
        counts, offsets = view.group_counts()
        for (kind, state), count in counts.items():
            by_protocol[kind] = by_protocol.get(kind, 0) + count
            states = consumer_states if kind == "consumer" else classic_states
            if state in states:
                states[state] += count
        family = GaugeMetricFamily(_PREFIX + "group_count", "The number of groups, by protocol", labels=["protocol"])
        for protocol, count in sorted(by_protocol.items()):
            family.add_metric([protocol], float(count))
        yield family
        family = GaugeMetricFamily(_PREFIX + "consumer_group_count", "The number of consumer groups, by state",
                                   labels=["state"])
        for state, count in consumer_states.items():
            family.add_metric([state], float(count))
        yield family
        yield GaugeMetricFamily(_YAMMER + "numoffsets", "Committed offsets held", value=float(offsets))
        yield GaugeMetricFamily(_YAMMER + "numgroups", "Classic groups", value=float(by_protocol["classic"]))
        for state, name in CLASSIC_GROUP_STATES.items():
            yield GaugeMetricFamily(_YAMMER + name, f"Classic groups in state {state}",
                                    value=float(classic_states[state]))
        yield from self._partitions()
        if self._ctx.config["zookeeper.connect"]:
            yield from self._replicas()

    def _partitions(self) -> Iterator[GaugeMetricFamily]:
        states = {"loading": 0, "active": 0, "failed": 0}
        load_times: list[float] = []
        for part in self._ctx.view.coordinator_partitions():
            if part.topic != _OFFSETS_TOPIC:
                continue
            if part.state in states:
                states[part.state] += 1
            if part.state == "active" and part.load_time_ms is not None:
                load_times.append(float(part.load_time_ms))
        family = GaugeMetricFamily(_PREFIX + "num_partitions", "The number of coordinator partitions, by state",
                                   labels=["state"])
        for state, count in states.items():
            family.add_metric([state], float(count))
        yield family
        yield GaugeMetricFamily(_PREFIX + "partition_load_time_max",
                                "The max time it took to load the partitions loaded now (ms)",
                                value=max(load_times) if load_times else 0.0)
        yield GaugeMetricFamily(_PREFIX + "partition_load_time_avg",
                                "The average time it took to load the partitions loaded now (ms)",
                                value=sum(load_times) / len(load_times) if load_times else 0.0)

    def _replicas(self) -> Iterator[GaugeMetricFamily]:
        node = self._ctx.node_id
        leaders = hosted = under = 0
        isr = GaugeMetricFamily("kafka_cluster_partition_insyncreplicascount",
                                "In-sync replicas of a partition this node leads", labels=["topic", "partition"])
        for (topic, partition), info in sorted(self._ctx.view.partitions().items()):
            if info.local:
                hosted += 1
            if info.leader != node:
                continue
            leaders += 1
            isr.add_metric([topic, str(partition)], float(len(info.isr)))
            if len(info.isr) < len(info.replicas):
                under += 1
        standby = GaugeMetricFamily("groupcoord_coordinator_standby_lag_records",
                                    "Records a hot standby coordinator partition has still to replay",
                                    labels=["topic", "partition"])
        view = self._ctx.view
        for runtime in (view.runtime, view.txn_runtime):
            if runtime is not None:
                for partition, behind in sorted(runtime.standby_lag().items()):
                    standby.add_metric([runtime.topic, str(partition)], float(behind))
        yield standby
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions this node leads",
                                value=float(leaders))
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions this node hosts",
                                value=float(hosted))
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions this node leads with fewer in-sync replicas than replicas",
                                value=float(under))
        yield isr
