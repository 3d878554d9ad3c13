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

These are rendered straight to the text format, not through prometheus-client's metric objects:
10,000 groups of 10 partitions are 100,000 series per family, which prometheus-client takes
seconds to build and format. The text depends only on the lag monitor's sample (a new list of
frozen ``PartitionLag`` each time), so it is rendered once per sample, in a thread (nothing it
reads changes), and served from the cache until the next sample; the event loop only reads the
log start offsets of the consumed partitions.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..lag.offsets import exporter_lag
from .context import OpsContext

__all__ = ["LagExposition", "render_lag", "UNKNOWN"]

#: kafka-lag-exporter's member labels for a group with no members (``KafkaClient.getGroupPartitionsInfo``).
UNKNOWN = "unknown"

_NAN = math.nan

#: (name, help, type) of every family, in the order they are written.
_FAMILIES = (
    ("kafka_consumergroup_group_offset", "Last group consumed offset of a partition"),
    ("kafka_consumergroup_group_lag", "Group offset lag of a partition"),
    ("kafka_consumergroup_group_lag_seconds", "Group time lag of a partition"),
    ("kafka_consumergroup_group_max_lag", "Max group offset lag"),
    ("kafka_consumergroup_group_max_lag_seconds", "Max group time lag"),
    ("kafka_consumergroup_group_sum_lag", "Sum of group offset lag"),
    ("kafka_consumergroup_group_topic_sum_lag", "Sum of group offset lag across topic partitions"),
    ("kafka_partition_latest_offset", "Latest offset of a partition"),
    ("kafka_partition_earliest_offset", "Earliest offset of a partition"),
    ("kafka_consumergroup_poll_time_ms", "Group time poll time"),
    ("burrow_kafka_consumer_status", "Burrow's status of a group (0 NOTFOUND, 1 OK, 2 WARN, 3 ERR)"),
    ("burrow_kafka_consumer_lag_total", "Burrow's total lag of a group"),
    ("burrow_kafka_topic_partition_status",
     "Burrow's status of a group's partition (0 NOTFOUND, 1 OK, 2 WARN, 3 ERR, 4 STOP, 5 STALL, 6 REWIND)"),
    ("groupcoord_consumergroup_offset_expiry_timestamp_seconds",
     "When a committed offset expires (KIP-211), Unix seconds"),
    ("groupcoord_consumergroup_offsets_expiring_within_day",
     "Committed offsets of a group that expire within 24 hours"),
)


def _esc(value: str) -> str:
    """A label value escaped as the text format requires (backslash, double quote, newline)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _num(value: float | int | None) -> str:
    if value is None:
        return "NaN"
    if isinstance(value, int):
        return str(value)
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def render_lag(cluster: str, lags: Sequence[Any], statuses: Mapping[str, Any], poll_time_ms: float | None,
               earliest: Mapping[tuple[str, int], int]) -> str:
    """The lag families in Prometheus' text format 0.0.4, from one sample of the lag monitor.
    Pure: runs in a thread."""
    out: dict[str, list[str]] = {name: [] for name, _help in _FAMILIES}
    offset, lag, lag_s = (out["kafka_consumergroup_group_offset"], out["kafka_consumergroup_group_lag"],
                          out["kafka_consumergroup_group_lag_seconds"])
    partition_status = out["burrow_kafka_topic_partition_status"]
    expiry = out["groupcoord_consumergroup_offset_expiry_timestamp_seconds"]
    c = _esc(cluster)
    # Per group: [max lag, max lag seconds, sum lag, {topic: sum}, expiring count]; NaN lags are
    # left out of every aggregate (kafka-lag-exporter sums the non-NaN ones).
    groups: dict[str, list[Any]] = {}
    latest: dict[tuple[str, int], int] = {}
    for p in lags:
        g, t, n = _esc(p.group), _esc(p.topic), p.partition
        labels = (f'cluster_name="{c}",group="{g}",topic="{t}",partition="{n}",'
                  f'member_host="{_esc(p.host or UNKNOWN)}",consumer_id="{_esc(p.member_id or UNKNOWN)}",'
                  f'client_id="{_esc(p.client_id or UNKNOWN)}"')
        value = exporter_lag(p.committed, p.log_end)
        seconds = p.lag_seconds if p.committed is not None else None
        offset.append(f"{{{labels}}} {_num(p.committed)}")
        lag.append(f"{{{labels}}} {_num(value)}")
        lag_s.append(f"{{{labels}}} {_num(seconds)}")
        agg = groups.get(p.group)
        if agg is None:
            agg = groups[p.group] = [None, None, 0, {}, 0]
        by_topic = agg[3]
        if value is not None:
            agg[0] = value if agg[0] is None else max(agg[0], value)
            agg[2] += value
            by_topic[p.topic] = by_topic.get(p.topic, 0) + value
        else:
            by_topic.setdefault(p.topic, 0)
        if seconds is not None and seconds == seconds:
            agg[1] = seconds if agg[1] is None else max(agg[1], seconds)
        if p.expiring_within_day:
            agg[4] += 1
        if p.log_end is not None:
            latest[(p.topic, n)] = p.log_end
        short = f'cluster="{c}",consumer_group="{g}",topic="{t}",partition="{n}"'
        if p.status is not None:
            partition_status.append(f"{{{short}}} {int(p.status)}")
        if p.expires_at_ms is not None:
            expiry.append(f'{{cluster_name="{c}",group="{g}",topic="{t}",partition="{n}"}} '
                          f"{_num(p.expires_at_ms / 1000.0)}")
    for group, (g_max, g_max_s, g_sum, by_topic, expiring) in sorted(groups.items()):
        labels = f'cluster_name="{c}",group="{_esc(group)}"'
        out["kafka_consumergroup_group_max_lag"].append(f"{{{labels}}} {_num(g_max)}")
        out["kafka_consumergroup_group_max_lag_seconds"].append(f"{{{labels}}} {_num(g_max_s)}")
        out["kafka_consumergroup_group_sum_lag"].append(f"{{{labels}}} {_num(g_sum)}")
        for topic, topic_sum in sorted(by_topic.items()):
            out["kafka_consumergroup_group_topic_sum_lag"].append(
                f'{{{labels},topic="{_esc(topic)}"}} {_num(topic_sum)}')
        out["groupcoord_consumergroup_offsets_expiring_within_day"].append(f"{{{labels}}} {expiring}")
    for (topic, n), end in sorted(latest.items()):
        labels = f'cluster_name="{c}",topic="{_esc(topic)}",partition="{n}"'
        out["kafka_partition_latest_offset"].append(f"{{{labels}}} {end}")
        start = earliest.get((topic, n))
        if start is not None:
            out["kafka_partition_earliest_offset"].append(f"{{{labels}}} {start}")
    out["kafka_consumergroup_poll_time_ms"].append(f'{{cluster_name="{c}"}} {_num(poll_time_ms)}')
    for group, status in sorted(statuses.items()):
        labels = f'cluster="{c}",consumer_group="{_esc(group)}"'
        out["burrow_kafka_consumer_status"].append(f"{{{labels}}} {int(status.status)}")
        out["burrow_kafka_consumer_lag_total"].append(f"{{{labels}}} {_num(status.totallag)}")
    parts: list[str] = []
    for name, help_text in _FAMILIES:
        parts.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
        lines = out[name]
        if lines:
            parts.append(name + f"\n{name}".join(lines) + "\n")
    return "".join(parts)


class LagExposition:
    """The rendered lag families of the lag monitor's current sample (module docstring)."""

    def __init__(self, ctx: OpsContext) -> None:
        self._ctx = ctx
        #: The sample (lags list, statuses) the cached text was rendered from, and the text.
        self._rendered: tuple[object, object, str] | None = None
        self._text = ""

    def _earliest(self, lags: Iterable[Any]) -> dict[tuple[str, int], int]:
        consumed = {(p.topic, p.partition) for p in lags}
        if not consumed:
            return {}
        out: dict[tuple[str, int], int] = {}
        for tp in consumed:
            start = self._ctx.view.earliest(*tp)
            if start is not None:
                out[tp] = start
        return out

    async def text(self) -> str:
        ctx = self._ctx
        lags, statuses = ctx.lag.lags(), ctx.lag.group_statuses()
        cluster = ctx.cluster_name
        cached = self._rendered
        if cached is None or cached[0] is not lags or cached[1] is not statuses or cached[2] != cluster:
            earliest = self._earliest(lags)
            self._text = await asyncio.to_thread(render_lag, cluster, lags, statuses, ctx.lag.poll_time_ms,
                                                 earliest)
            self._rendered = (lags, statuses, cluster)
        return self._text
