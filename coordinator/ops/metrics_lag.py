"""Consumer lag as the monitoring tools operators already alert on expose it, computed at scrape
time from the lag monitor's last sample (``ops/lag_monitor.py``):

* kafka-lag-exporter's gauges, names and labels exactly (its ``Metrics.scala``,
  https://github.com/seglo/kafka-lag-exporter): per partition ``kafka_consumergroup_group_offset``,
  ``_group_lag``, ``_group_lag_seconds``; per group ``_group_max_lag``, ``_group_max_lag_seconds``,
  ``_group_sum_lag``; per group and topic ``_group_topic_sum_lag``; per partition
  ``kafka_partition_latest_offset`` / ``_earliest_offset``; ``kafka_consumergroup_poll_time_ms``.
  A partition without a commit has NaN offset and lags; a group without members has
  ``member_host``, ``consumer_id`` and ``client_id`` ``unknown`` — both as kafka-lag-exporter.
* Burrow's status gauges (``core/internal/httpserver/prometheus.go``,
  https://github.com/linkedin/Burrow): ``burrow_kafka_consumer_status``,
  ``burrow_kafka_consumer_lag_total``, ``burrow_kafka_topic_partition_status``.
* Offsets about to expire (KIP-211): ``groupcoord_consumergroup_offset_expiry_timestamp_seconds``
  per partition and ``groupcoord_consumergroup_offsets_expiring_within_day`` per group.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..lag.offsets import exporter_lag
from .context import OpsContext

__all__ = ["LagCollector", "UNKNOWN"]

NAN = math.nan
#: kafka-lag-exporter's member labels for a group with no members (``KafkaClient.getGroupPartitionsInfo``).
UNKNOWN = "unknown"

_PARTITION_LABELS = ["cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id"]


def _or_nan(value: float | int | None) -> float:
    return NAN if value is None else float(value)


class LagCollector(Collector):
    def __init__(self, ctx: OpsContext) -> None:
        self._ctx = ctx

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ctx = self._ctx
        cluster = ctx.cluster_name
        lags: list[Any] = list(ctx.lag.lags())
        offset = GaugeMetricFamily("kafka_consumergroup_group_offset",
                                   "Last group consumed offset of a partition", labels=_PARTITION_LABELS)
        lag = GaugeMetricFamily("kafka_consumergroup_group_lag", "Group offset lag of a partition",
                                labels=_PARTITION_LABELS)
        lag_seconds = GaugeMetricFamily("kafka_consumergroup_group_lag_seconds",
                                        "Group time lag of a partition", labels=_PARTITION_LABELS)
        max_lag = GaugeMetricFamily("kafka_consumergroup_group_max_lag", "Max group offset lag",
                                    labels=["cluster_name", "group"])
        max_lag_seconds = GaugeMetricFamily("kafka_consumergroup_group_max_lag_seconds", "Max group time lag",
                                            labels=["cluster_name", "group"])
        sum_lag = GaugeMetricFamily("kafka_consumergroup_group_sum_lag", "Sum of group offset lag",
                                    labels=["cluster_name", "group"])
        topic_sum_lag = GaugeMetricFamily("kafka_consumergroup_group_topic_sum_lag",
                                          "Sum of group offset lag across topic partitions",
                                          labels=["cluster_name", "group", "topic"])
        latest = GaugeMetricFamily("kafka_partition_latest_offset", "Latest offset of a partition",
                                   labels=["cluster_name", "topic", "partition"])
        earliest = GaugeMetricFamily("kafka_partition_earliest_offset", "Earliest offset of a partition",
                                     labels=["cluster_name", "topic", "partition"])
        partition_status = GaugeMetricFamily(
            "burrow_kafka_topic_partition_status",
            "Burrow's status of a group's partition (0 NOTFOUND, 1 OK, 2 WARN, 3 ERR, 4 STOP, 5 STALL, 6 REWIND)",
            labels=["cluster", "consumer_group", "topic", "partition"])
        expiry = GaugeMetricFamily("groupcoord_consumergroup_offset_expiry_timestamp_seconds",
                                   "When a committed offset expires (KIP-211), Unix seconds",
                                   labels=["cluster_name", "group", "topic", "partition"])
        expiring = GaugeMetricFamily("groupcoord_consumergroup_offsets_expiring_within_day",
                                     "Committed offsets of a group that expire within 24 hours",
                                     labels=["cluster_name", "group"])

        # Per group: (max lag, max lag seconds, sum lag, {topic: sum}); NaN lags are left out of
        # every aggregate (kafka-lag-exporter sums the non-NaN ones).
        groups: dict[str, list[Any]] = {}
        expiring_counts: dict[str, int] = {}
        topics: set[tuple[str, int]] = set()
        for p in lags:
            partition = str(p.partition)
            labels = [cluster, p.group, p.topic, partition, p.host or UNKNOWN, p.member_id or UNKNOWN,
                      p.client_id or UNKNOWN]
            value = _or_nan(exporter_lag(p.committed, p.log_end))
            seconds = _or_nan(p.lag_seconds) if p.committed is not None else NAN
            offset.add_metric(labels, _or_nan(p.committed))
            lag.add_metric(labels, value)
            lag_seconds.add_metric(labels, seconds)
            agg = groups.get(p.group)
            if agg is None:
                agg = groups[p.group] = [NAN, NAN, 0.0, {}]
            if not math.isnan(value):
                agg[0] = value if math.isnan(agg[0]) else max(agg[0], value)
                agg[2] += value
                agg[3][p.topic] = agg[3].get(p.topic, 0.0) + value
            else:
                agg[3].setdefault(p.topic, 0.0)
            if not math.isnan(seconds):
                agg[1] = seconds if math.isnan(agg[1]) else max(agg[1], seconds)
            topics.add((p.topic, p.partition))
            if p.status is not None:
                partition_status.add_metric([cluster, p.group, p.topic, partition], float(int(p.status)))
            if p.expires_at_ms is not None:
                expiry.add_metric([cluster, p.group, p.topic, partition], p.expires_at_ms / 1000.0)
            expiring_counts[p.group] = expiring_counts.get(p.group, 0) + (1 if p.expiring_within_day else 0)
        for group, (group_max, group_max_seconds, group_sum, by_topic) in sorted(groups.items()):
            max_lag.add_metric([cluster, group], group_max)
            max_lag_seconds.add_metric([cluster, group], group_max_seconds)
            sum_lag.add_metric([cluster, group], group_sum)
            for topic, topic_sum in sorted(by_topic.items()):
                topic_sum_lag.add_metric([cluster, group, topic], topic_sum)
            expiring.add_metric([cluster, group], float(expiring_counts.get(group, 0)))
        if topics:
            partitions = ctx.view.partitions()
            for topic, number in sorted(topics):
                info = partitions.get((topic, number))
                # Cluster mode: a partition hosted elsewhere has its offsets on its leader.
                if info is not None and info.log_end is not None and info.log_start is not None:
                    latest.add_metric([cluster, topic, str(number)], float(info.log_end))
                    earliest.add_metric([cluster, topic, str(number)], float(info.log_start))
        poll = GaugeMetricFamily("kafka_consumergroup_poll_time_ms",
                                 "Group time poll time", labels=["cluster_name"])
        poll.add_metric([cluster], _or_nan(getattr(ctx.lag, "poll_time_ms", None)))
        yield from (offset, lag, lag_seconds, max_lag, max_lag_seconds, sum_lag, topic_sum_lag, latest, earliest,
                    poll)
        yield from self._burrow_groups(cluster)
        yield from (partition_status, expiry, expiring)

    def _burrow_groups(self, cluster: str) -> Iterator[GaugeMetricFamily]:
        status = GaugeMetricFamily("burrow_kafka_consumer_status",
                                   "Burrow's status of a group (0 NOTFOUND, 1 OK, 2 WARN, 3 ERR)",
                                   labels=["cluster", "consumer_group"])
        total = GaugeMetricFamily("burrow_kafka_consumer_lag_total", "Burrow's total lag of a group",
                                  labels=["cluster", "consumer_group"])
        for group, group_status in sorted(self._ctx.lag.group_statuses().items()):
            status.add_metric([cluster, group], float(int(group_status.status)))
            total.add_metric([cluster, group], float(group_status.totallag))
        yield status
        yield total
