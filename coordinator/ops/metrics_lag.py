"""Consumer lag as the monitoring tools operators already alert on expose it, computed at scrape
time from the lag monitor's last sample (``ops/lag_monitor.py``):

* kafka-lag-exporter's gauges, names and labels exactly (its ``Metrics.scala``,
  https://github.com/seglo/kafka-lag-exporter): per partition ``kafka_consumergroup_group_offset``,
  ``_group_lag``, ``_group_lag_seconds``; per group ``_group_max_lag``, ``_group_max_lag_seconds``,
  ``_group_sum_lag``; per group and topic ``_group_topic_sum_lag``; per partition
  ``kafka_partition_latest_offset`` / ``_earliest_offset``; ``kafka_consumergroup_poll_time_ms``.
  A partition without a commit has NaN offset and lags; a group without members has
  ``member_host``, ``consumer_id`` and ``client_id`` ``unknown`` — both as kafka-lag-exporter.
* Burrow's gauges (``core/internal/httpserver/prometheus.go``, https://github.com/linkedin/Burrow):
  per group ``burrow_kafka_consumer_status``, ``burrow_kafka_consumer_lag_total``; per group
  partition ``burrow_kafka_topic_partition_status``, ``burrow_kafka_consumer_partition_lag``,
  ``burrow_kafka_consumer_current_offset`` (the last two only for a partition with a commit: Burrow
  stores no other); per partition ``burrow_kafka_topic_partition_offset``, the partitions of
  ``kafka_partition_latest_offset`` with the same value.
* Offsets about to expire (KIP-211): ``groupcoord_consumergroup_offset_expiry_timestamp_seconds``
  per partition and ``groupcoord_consumergroup_offsets_expiring_within_day`` per group.

These are rendered straight to the text format, not through prometheus-client's metric objects:
10,000 groups of 10 partitions are 100,000 series per family, which prometheus-client takes
seconds to build and format. The text depends only on the lag monitor's sample (a new list of
frozen ``PartitionLag`` each time), so it is rendered once per sample, in a thread (nothing it
reads changes), and served from the cache until the next sample; the event loop only reads the
log start offsets of the consumed partitions.

Rendering is incremental (``LagRenderer``): the lag monitor hands back last sample's row objects
and ``GroupStatus`` for a group where nothing changed (``ops/lag_monitor.py``), and the lines of
such a group are those rendered for it last time — a sample where a hundred groups committed
renders a hundred groups' lines and joins the rest. The output is ``render_lag``'s, byte for byte.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ..lag.offsets import exporter_lag
from .context import OpsContext

__all__ = ["LagExposition", "LagRenderer", "render_lag", "select_families", "UNKNOWN", "FAMILY_NAMES"]

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
    ("burrow_kafka_consumer_partition_lag",
     "Burrow's current lag of a group's partition: log end less the last commit, 0 if negative or unknown"),
    ("burrow_kafka_consumer_current_offset", "Burrow's last committed offset of a group's partition"),
    ("burrow_kafka_topic_partition_offset", "Burrow's latest offset (log end) of a partition"),
    ("groupcoord_consumergroup_offset_expiry_timestamp_seconds",
     "When a committed offset expires (KIP-211), Unix seconds"),
    ("groupcoord_consumergroup_offsets_expiring_within_day",
     "Committed offsets of a group that expire within 24 hours"),
)

#: The names of the families written here (each family's one sample name too: all are gauges).
FAMILY_NAMES = frozenset(name for name, _help in _FAMILIES)


def select_families(body: bytes, names: Collection[str]) -> bytes:
    """The families of a rendered ``body`` whose name is in ``names`` (``/metrics?name[]=``).
    A family runs from its HELP line to the next family's: label values escape newlines, so a
    line starting ``# HELP`` only ever starts a family."""
    parts: list[bytes] = []
    for name, _help in _FAMILIES:
        if name not in names:
            continue
        head = f"# HELP {name} ".encode()
        if body.startswith(head):
            start = 0
        else:
            start = body.find(b"\n" + head) + 1
            if start == 0:
                continue
        end = body.find(b"\n# HELP ", start)
        parts.append(body[start:] if end < 0 else body[start:end + 1])
    return b"".join(parts)


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


def _burrow_lag(exporter: int | None) -> int:
    """Burrow's current lag (its ``fetchConsumer``; ``PartitionWindow.current_lag`` in
    coordinator/lag/burrow.py) from kafka-lag-exporter's: both are the log end less the commit,
    floored at 0; Burrow has 0 where the log end is not known, never NaN."""
    return 0 if exporter is None else exporter


def render_lag(cluster: str, lags: Sequence[Any], statuses: Mapping[str, Any], poll_time_ms: float | None,
               earliest: Mapping[tuple[str, int], int],
               partitions: Mapping[tuple[str, int], tuple[int, int | None]] | None = None) -> str:
    """The lag families in Prometheus' text format 0.0.4, from one sample of the lag monitor.
    ``partitions`` (cluster mode): (log end, log start) of the partitions whose latest/earliest
    offsets this node serves, instead of those of the partitions its groups consume (see
    ``LagExposition``). Pure: runs in a thread."""
    out: dict[str, list[str]] = {name: [] for name, _help in _FAMILIES}
    offset, lag, lag_s = (out["kafka_consumergroup_group_offset"], out["kafka_consumergroup_group_lag"],
                          out["kafka_consumergroup_group_lag_seconds"])
    partition_status = out["burrow_kafka_topic_partition_status"]
    burrow_lag, burrow_offset = out["burrow_kafka_consumer_partition_lag"], out["burrow_kafka_consumer_current_offset"]
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
        if p.committed is not None:
            burrow_lag.append(f"{{{short}}} {_burrow_lag(value)}")
            burrow_offset.append(f"{{{short}}} {p.committed}")
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
    if partitions is not None:
        latest = {tp: end for tp, (end, _start) in partitions.items()}
        earliest = {tp: start for tp, (_end, start) in partitions.items() if start is not None}
    for (topic, n), end in sorted(latest.items()):
        labels = f'cluster_name="{c}",topic="{_esc(topic)}",partition="{n}"'
        out["kafka_partition_latest_offset"].append(f"{{{labels}}} {end}")
        start = earliest.get((topic, n))
        if start is not None:
            out["kafka_partition_earliest_offset"].append(f"{{{labels}}} {start}")
        out["burrow_kafka_topic_partition_offset"].append(
            f'{{cluster="{c}",topic="{_esc(topic)}",partition="{n}"}} {end}')
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


#: Indexes into a group's rendered fragments (``LagRenderer._group``).
_PER_PARTITION = ("kafka_consumergroup_group_offset", "kafka_consumergroup_group_lag",
                  "kafka_consumergroup_group_lag_seconds", "burrow_kafka_topic_partition_status",
                  "burrow_kafka_consumer_partition_lag", "burrow_kafka_consumer_current_offset",
                  "groupcoord_consumergroup_offset_expiry_timestamp_seconds")
_PER_GROUP = ("kafka_consumergroup_group_max_lag", "kafka_consumergroup_group_max_lag_seconds",
              "kafka_consumergroup_group_sum_lag", "kafka_consumergroup_group_topic_sum_lag",
              "groupcoord_consumergroup_offsets_expiring_within_day")
_BURROW_GROUP = ("burrow_kafka_consumer_status", "burrow_kafka_consumer_lag_total")


class _Rendered:
    """One group's lines, per family (each fragment whole lines, name included), and what they
    were rendered from: the rows (compared by identity) and the status object."""

    __slots__ = ("rows", "status", "fragments")

    def __init__(self, rows: Sequence[Any], status: object, fragments: tuple[str, ...]) -> None:
        self.rows = rows
        self.status = status
        # A tuple of strings: the cyclic GC stops tracking it, one object fewer per group.
        self.fragments = fragments


_NO_ROWS: tuple[Any, ...] = ()


class LagRenderer:
    """``render_lag`` with each group's lines kept from one call to the next, re-rendered only
    for a group whose rows or status are not the very objects of last time (module docstring).
    Not thread-safe: one render at a time (``LagExposition`` holds a lock)."""

    def __init__(self) -> None:
        self._groups: dict[str, _Rendered] = {}
        #: (topic, partition) -> (log end, log start, its latest, earliest and Burrow offset lines).
        self._partitions: dict[tuple[str, int], tuple[int, int | None, str, str, str]] = {}
        #: How many groups the last render rendered afresh (the benchmark reports it).
        self.rendered_groups = 0
        self._cluster = ""

    def render(self, cluster: str, lags: Sequence[Any], statuses: Mapping[str, Any], poll_time_ms: float | None,
               earliest: Mapping[tuple[str, int], int],
               partitions: Mapping[tuple[str, int], tuple[int, int | None]] | None = None) -> str:
        runs: dict[str, Sequence[Any]] = {}
        start = 0
        count = len(lags)
        while start < count:
            group = lags[start].group
            end = start + 1
            while end < count and lags[end].group == group:
                end += 1
            if group in runs:
                # A group's rows apart from each other (not what the lag monitor hands over):
                # render from scratch, nothing cached.
                self._groups.clear()
                self._partitions.clear()
                return render_lag(cluster, lags, statuses, poll_time_ms, earliest, partitions)
            runs[group] = lags[start:end]
            start = end
        if cluster != self._cluster:
            self._groups.clear()
            self._partitions.clear()
            self._cluster = cluster
        cache = self._groups
        fresh: dict[str, _Rendered] = {}
        rendered = 0
        for group in (*runs, *(g for g in statuses if g not in runs)):
            rows = runs.get(group, _NO_ROWS)
            status = statuses.get(group)
            old = cache.get(group)
            if old is None or old.status is not status or len(old.rows) != len(rows) \
                    or any(a is not b for a, b in zip(old.rows, rows, strict=True)):
                old = _render_group(cluster, group, rows, status)
                rendered += 1
            fresh[group] = old
        self._groups = fresh
        self.rendered_groups = rendered
        parts: list[str] = []
        fragments: dict[str, list[str]] = {}
        c = _esc(cluster)
        by_lags = [fresh[g] for g in runs]
        by_name = [fresh[g] for g in sorted(runs)]
        by_status = [fresh[g] for g in sorted(statuses)]
        for i, name in enumerate(_PER_PARTITION):
            fragments[name] = [r.fragments[i] for r in by_lags]
        for i, name in enumerate(_PER_GROUP, len(_PER_PARTITION)):
            fragments[name] = [r.fragments[i] for r in by_name]
        for i, name in enumerate(_BURROW_GROUP, len(_PER_PARTITION) + len(_PER_GROUP)):
            fragments[name] = [r.fragments[i] for r in by_status]
        latest: dict[tuple[str, int], int] = {}
        if partitions is not None:
            latest = {tp: end for tp, (end, _start) in partitions.items()}
            earliest = {tp: start for tp, (_end, start) in partitions.items() if start is not None}
        else:
            for p in lags:
                if p.log_end is not None:
                    latest[(p.topic, p.partition)] = p.log_end
        lines = self._partitions
        fresh_lines: dict[tuple[str, int], tuple[int, int | None, str, str, str]] = {}
        partition_lines: list[str] = []
        earliest_lines: list[str] = []
        burrow_lines: list[str] = []
        for tp in sorted(latest):
            end, first = latest[tp], earliest.get(tp)
            cached = lines.get(tp)
            if cached is None or cached[0] != end or cached[1] != first:
                topic = _esc(tp[0])
                labels = f'cluster_name="{c}",topic="{topic}",partition="{tp[1]}"'
                cached = (end, first, f"kafka_partition_latest_offset{{{labels}}} {end}\n",
                          "" if first is None else f"kafka_partition_earliest_offset{{{labels}}} {first}\n",
                          f'burrow_kafka_topic_partition_offset{{cluster="{c}",topic="{topic}",'
                          f'partition="{tp[1]}"}} {end}\n')
            fresh_lines[tp] = cached
            partition_lines.append(cached[2])
            earliest_lines.append(cached[3])
            burrow_lines.append(cached[4])
        self._partitions = fresh_lines
        fragments["kafka_partition_latest_offset"] = partition_lines
        fragments["kafka_partition_earliest_offset"] = earliest_lines
        fragments["burrow_kafka_topic_partition_offset"] = burrow_lines
        fragments["kafka_consumergroup_poll_time_ms"] = [
            f'kafka_consumergroup_poll_time_ms{{cluster_name="{c}"}} {_num(poll_time_ms)}\n']
        for name, help_text in _FAMILIES:
            parts.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
            parts.extend(fragments[name])
        return "".join(parts)


def _render_group(cluster: str, group: str, rows: Sequence[Any], status: Any) -> _Rendered:
    """One group's lines in every family, as ``render_lag`` writes them."""
    c, g = _esc(cluster), _esc(group)
    offset: list[str] = []
    lag: list[str] = []
    lag_s: list[str] = []
    partition_status: list[str] = []
    burrow_lag: list[str] = []
    burrow_offset: list[str] = []
    expiry: list[str] = []
    g_max: int | None = None
    g_max_s: float | None = None
    g_sum = 0
    by_topic: dict[str, int] = {}
    expiring = 0
    for p in rows:
        t, n = _esc(p.topic), p.partition
        labels = (f'{{cluster_name="{c}",group="{g}",topic="{t}",partition="{n}",'
                  f'member_host="{_esc(p.host or UNKNOWN)}",consumer_id="{_esc(p.member_id or UNKNOWN)}",'
                  f'client_id="{_esc(p.client_id or UNKNOWN)}"}} ')
        value = exporter_lag(p.committed, p.log_end)
        seconds = p.lag_seconds if p.committed is not None else None
        offset.append(f"kafka_consumergroup_group_offset{labels}{_num(p.committed)}\n")
        lag.append(f"kafka_consumergroup_group_lag{labels}{_num(value)}\n")
        lag_s.append(f"kafka_consumergroup_group_lag_seconds{labels}{_num(seconds)}\n")
        if value is not None:
            g_max = value if g_max is None else max(g_max, value)
            g_sum += value
            by_topic[p.topic] = by_topic.get(p.topic, 0) + value
        else:
            by_topic.setdefault(p.topic, 0)
        if seconds is not None and seconds == seconds:
            g_max_s = seconds if g_max_s is None else max(g_max_s, seconds)
        if p.expiring_within_day:
            expiring += 1
        if p.status is not None:
            partition_status.append(f'burrow_kafka_topic_partition_status{{cluster="{c}",consumer_group="{g}",'
                                    f'topic="{t}",partition="{n}"}} {int(p.status)}\n')
        if p.committed is not None:
            short = f'{{cluster="{c}",consumer_group="{g}",topic="{t}",partition="{n}"}} '
            burrow_lag.append(f"burrow_kafka_consumer_partition_lag{short}{_burrow_lag(value)}\n")
            burrow_offset.append(f"burrow_kafka_consumer_current_offset{short}{p.committed}\n")
        if p.expires_at_ms is not None:
            expiry.append(f'groupcoord_consumergroup_offset_expiry_timestamp_seconds{{cluster_name="{c}",'
                          f'group="{g}",topic="{t}",partition="{n}"}} {_num(p.expires_at_ms / 1000.0)}\n')
    fragments = ["".join(offset), "".join(lag), "".join(lag_s), "".join(partition_status), "".join(burrow_lag),
                 "".join(burrow_offset), "".join(expiry)]
    if rows:
        labels = f'{{cluster_name="{c}",group="{g}"}} '
        fragments += [
            f"kafka_consumergroup_group_max_lag{labels}{_num(g_max)}\n",
            f"kafka_consumergroup_group_max_lag_seconds{labels}{_num(g_max_s)}\n",
            f"kafka_consumergroup_group_sum_lag{labels}{_num(g_sum)}\n",
            "".join(f'kafka_consumergroup_group_topic_sum_lag{{cluster_name="{c}",group="{g}",topic="{_esc(topic)}"}} '
                    f"{_num(topic_sum)}\n" for topic, topic_sum in sorted(by_topic.items())),
            f"groupcoord_consumergroup_offsets_expiring_within_day{labels}{expiring}\n"]
    else:
        fragments += ["", "", "", "", ""]
    if status is not None:
        labels = f'{{cluster="{c}",consumer_group="{g}"}} '
        fragments += [f"burrow_kafka_consumer_status{labels}{int(status.status)}\n",
                      f"burrow_kafka_consumer_lag_total{labels}{_num(status.totallag)}\n"]
    else:
        fragments += ["", ""]
    return _Rendered(rows, status, tuple(fragments))


class LagExposition:
    """The rendered lag families of the lag monitor's current sample (module docstring), kept
    encoded: a scrape between two samples copies bytes and renders nothing."""

    def __init__(self, ctx: OpsContext) -> None:
        self._ctx = ctx
        #: The sample (lags list, statuses) the cached text was rendered from.
        self._rendered: tuple[object, object, str, object] | None = None
        self._body = b""
        self._renderer = LagRenderer()
        # The renderer keeps state between renders: two scrapes at once wait for one render.
        self._lock = asyncio.Lock()

    def _earliest(self, lags: Iterable[Any]) -> dict[tuple[str, int], int]:
        consumed = {(p.topic, p.partition) for p in lags}
        if not consumed:
            return {}
        out: dict[tuple[str, int], int] = {}
        earliest = self._ctx.view.earliest
        for tp in consumed:
            start = earliest(*tp)
            if start is not None:
                out[tp] = start
        return out

    def _current(self, lags: object, statuses: object, cluster: str) -> bool:
        cached = self._rendered
        return cached is not None and cached[0] is lags and cached[1] is statuses and cached[2] == cluster \
            and cached[3] is self._zk_groups()

    def _zk_groups(self) -> object:
        """The last read of ZooKeeper-era groups (a new list per read), or None without them."""
        zk_era = self._ctx.zk_era
        return None if zk_era is None else zk_era.groups

    async def body(self) -> bytes:
        """The lag families, encoded."""
        ctx = self._ctx
        lags, statuses = ctx.lag.lags(), ctx.lag.group_statuses()
        cluster = ctx.cluster_name
        if self._current(lags, statuses, cluster):
            return self._body
        async with self._lock:
            lags, statuses = ctx.lag.lags(), ctx.lag.group_statuses()
            if not self._current(lags, statuses, cluster):
                zk_groups = self._zk_groups()
                earliest = self._earliest(lags)
                led = ctx.view.led_partition_offsets()
                rows: Sequence[Any] = lags
                if zk_groups:
                    # ZooKeeper-era groups after this node's own, in the same families; one named like a
                    # Kafka group shows once, Kafka's offsets first (ops/zk_era_groups.py).
                    from .zk_era_groups import lag_rows, merge_rows

                    zk_rows = lag_rows(ctx.zk_era.groups, led, None if led is not None else ctx.view.latest)
                    rows = await asyncio.to_thread(merge_rows, lags, zk_rows)
                self._body = await asyncio.to_thread(self._render, cluster, rows, statuses, ctx.lag.poll_time_ms,
                                                     earliest, led)
                self._rendered = (lags, statuses, cluster, zk_groups)
            return self._body

    def _render(self, cluster: str, lags: Sequence[Any], statuses: Mapping[str, Any], poll_time_ms: float | None,
                earliest: Mapping[tuple[str, int], int],
                led: Mapping[tuple[str, int], tuple[int, int | None]] | None = None) -> bytes:
        return self._renderer.render(cluster, lags, statuses, poll_time_ms, earliest, led).encode()

    async def text(self) -> str:
        return (await self.body()).decode()
