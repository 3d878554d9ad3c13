"""The node's Prometheus metrics (docs/metrics.md lists every name).

Two kinds. Timings on the hot path — one observation per Kafka request (``RequestMetrics``) and
per fsynced group-commit round (``FsyncMetrics``) — are a bucket increment and an addition on
plain lists, no lock, no label lookup: the server calls a bound method and nothing else. Everything
else (groups, partitions) is computed when Prometheus scrapes, by custom collectors reading the
node's live view (``metrics_coordinator.py``); the lag families (``metrics_lag.py``) once per lag
sample.

The registry is the context's own, never prometheus-client's global one: two nodes in one process
(the tests) expose each their own numbers.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from protocol.apis import ApiKey

from .context import OpsContext
from .metrics_coordinator import CoordinatorCollector, GroupCoordinatorCounters
from .metrics_lag import FAMILY_NAMES, LagExposition, select_families

__all__ = ["RequestMetrics", "FsyncMetrics", "Hooks", "MetricsExposition", "NamedFamilies", "LATENCY_BUCKETS", "register_metrics"]

#: Upper bounds (seconds) of the latency buckets: 100 µs to 10 s, roughly ×2.5 apart — a commit
#: answered from the page cache lands in the first ones, a fsync on a slow disk in the last.
LATENCY_BUCKETS: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Histogram:
    """Counts per bucket (not cumulative; the +Inf bucket last) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * (buckets + 1)
        self.total = 0.0

    def buckets(self, bounds: Sequence[float]) -> list[tuple[str, float]]:
        result: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*(repr(b) for b in bounds), "+Inf"), self.counts, strict=True):
            running += count
            result.append((bound, running))
        return result


class RequestMetrics(Collector):
    """Kafka requests answered, by api, and how long from dispatch to the response being ready
    (Kafka's ``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=…`` less the send)."""

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS) -> None:
        self._bounds = tuple(bounds)
        self._by_api: dict[int, _Histogram] = {}

    def observe(self, api_key: int, seconds: float) -> None:
        # The hot path: the server calls this once per request on the event loop.
        histogram = self._by_api.get(api_key)
        if histogram is None:
            histogram = self._by_api[api_key] = _Histogram(len(self._bounds))
        histogram.counts[bisect_left(self._bounds, seconds)] += 1
        histogram.total += seconds

    def collect(self) -> Iterator[HistogramMetricFamily | CounterMetricFamily]:
        duration = HistogramMetricFamily(
            "groupcoord_request_duration_seconds",
            "Kafka requests: seconds from dispatch to the response being ready, by API.", labels=["request"])
        requests = CounterMetricFamily("groupcoord_requests", "Kafka requests answered, by API.", labels=["request"])
        for api_key, histogram in sorted(self._by_api.items()):
            name = _api_name(api_key)
            buckets = histogram.buckets(self._bounds)
            duration.add_metric([name], buckets, histogram.total)
            requests.add_metric([name], buckets[-1][1])
        yield duration
        yield requests


class FsyncMetrics(Collector):
    """Seconds each fsynced group-commit round spent in fsync (Kafka's
    ``kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs``, in base units)."""

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS) -> None:
        self._bounds = tuple(bounds)
        self._histogram = _Histogram(len(self._bounds))
        # Rounds are fsynced on storage's sync threads, several at once: the lock keeps the counts
        # exact (a round is milliseconds; the lock is nothing next to it).
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self._lock:
            self._histogram.counts[bisect_left(self._bounds, seconds)] += 1
            self._histogram.total += seconds

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily("groupcoord_log_fsync_duration_seconds",
                                       "Seconds a group-commit round spent in fsync.")
        with self._lock:
            family.add_metric([], self._histogram.buckets(self._bounds), self._histogram.total)
        yield family


def _api_name(api_key: int) -> str:
    """Kafka's request name, as its ``request`` tag spells it (``OffsetCommit``)."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return str(api_key)
    return "".join(word.capitalize() for word in name.split("_"))


@dataclass(frozen=True)
class Hooks:
    """The collectors fed from the hot paths, for the caller to hand over: ``requests.observe``
    to the server, ``fsyncs.observe`` to storage, ``counters.on_write`` to the group runtime."""

    requests: RequestMetrics
    fsyncs: FsyncMetrics
    counters: GroupCoordinatorCounters


class NamedFamilies(Collector):
    """The families of ``registry`` with a sample named in ``names``, those samples alone — the
    selection of prometheus-client's ``restricted_registry``, which leaves out every collector
    without a ``describe`` (all of this node's) unless the registry was built for them."""

    def __init__(self, registry: Collector, names: Collection[str]) -> None:
        self._registry = registry
        self._names = names

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            samples = [sample for sample in family.samples if sample.name in self._names]
            if samples:
                kept = Metric(family.name, family.documentation, family.type, family.unit)
                kept.samples = samples
                yield kept


class MetricsExposition:
    """What /metrics answers: the registry's collectors (small: per API, per state, per node) in
    prometheus-client's format, then the lag families rendered per sample (``metrics_lag.py``)."""

    def __init__(self, ctx: OpsContext) -> None:
        self._ctx = ctx
        self._lag = LagExposition(ctx)

    async def render(self, names: Collection[str] | None = None) -> bytes:
        """Every family, or (``names``: ``/metrics?name[]=…``) only those with a sample of one of
        these names, as prometheus-client's own ``name[]`` filter selects them."""
        return b"".join(await self.render_parts(names))

    async def render_parts(self, names: Collection[str] | None = None) -> list[bytes]:
        """``render``'s body as the registry's text and the lag text: the listener writes them
        one after the other, so a scrape between samples sends the kept lag bytes (84.8 MB at
        10,000 groups x 10 partitions, bench/RESULTS.md) without copying them into one body."""
        if names is None:
            return [generate_latest(self._ctx.registry), await self._lag.body()]
        registry = generate_latest(NamedFamilies(self._ctx.registry, names))
        if FAMILY_NAMES.isdisjoint(names):
            return [registry]
        return [registry, select_families(await self._lag.body(), names)]


def register_metrics(ctx: OpsContext) -> Hooks:
    """Register every collector in ``ctx.registry`` and the exposition /metrics serves
    (``ctx.metrics``); returns the collectors fed from the hot paths."""
    hooks = Hooks(RequestMetrics(), FsyncMetrics(), GroupCoordinatorCounters())
    for collector in (hooks.requests, hooks.fsyncs, hooks.counters, CoordinatorCollector(ctx)):
        ctx.registry.register(collector)
    ctx.metrics = MetricsExposition(ctx)
    return hooks
