"""The scrape-time collectors (coordinator/ops/metrics*.py) over stand-ins of the live view and
the lag monitor: kafka-lag-exporter's and Burrow's names, labels and values, Kafka's
group-coordinator metrics, the timing histograms. The exposition is parsed back with
prometheus-client's own parser, as Prometheus would read it."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from coordinator.lag.burrow import GroupStatus, Status
from coordinator.ops.context import OpsContext
from coordinator.ops.lag_monitor import PartitionLag
from coordinator.ops.metrics import LATENCY_BUCKETS, register_metrics
from coordinator.ops.metrics_lag import LagRenderer, render_lag
from protocol.apis import ApiKey
from protocol.consumer_group_records import ConsumerGroupMetadataKey
from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey

from .fakes import FakeLag, FakeView, make_ctx, partition_lag


def _samples(ctx: OpsContext) -> dict[str, list[tuple[dict[str, str], float]]]:
    assert ctx.metrics is not None
    text = asyncio.run(ctx.metrics.render()).decode()
    result: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            result.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return result


def _one(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    found = [v for l, v in samples[name] if all(l.get(k) == w for k, w in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def _lag_ctx() -> OpsContext:
    view = FakeView(partition_map={("orders", 0): SimpleNamespace(log_start=5, log_end=120),
                                   ("orders", 1): SimpleNamespace(log_start=0, log_end=40),
                                   ("audit", 0): SimpleNamespace(log_start=0, log_end=7)})
    lag = FakeLag(lag_list=[
        partition_lag("g1", "orders", 0, 100, 120, lag_seconds=3.5, status=2, member_id="m-1", client_id="c-1",
                      host="/127.0.0.1", expires_at_ms=1_700_000_000_000, expiring_within_day=True),
        partition_lag("g1", "orders", 1, 50, 40, lag_seconds=0.0, status=1, member_id="m-1", client_id="c-1",
                      host="/127.0.0.1"),
        partition_lag("idle", "audit", 0, None, 7, status=None),
    ], statuses={"g1": SimpleNamespace(status=2, totallag=20), "idle": SimpleNamespace(status=1, totallag=0)},
        poll_time_ms=12.0)
    ctx = make_ctx("lag.cluster.name=prod", view=view, lag=lag)
    register_metrics(ctx)
    return ctx


def test_kafka_lag_exporter_partition_gauges_carry_its_labels() -> None:
    s = _samples(_lag_ctx())
    labels = dict(cluster_name="prod", group="g1", topic="orders", partition="0", member_host="/127.0.0.1",
                  consumer_id="m-1", client_id="c-1")
    assert set(s["kafka_consumergroup_group_offset"][0][0]) == set(labels)
    assert _one(s, "kafka_consumergroup_group_offset", **labels) == 100
    assert _one(s, "kafka_consumergroup_group_lag", **labels) == 20
    assert _one(s, "kafka_consumergroup_group_lag_seconds", **labels) == 3.5
    # A commit past the end offset: kafka-lag-exporter floors the lag at 0.
    assert _one(s, "kafka_consumergroup_group_lag", group="g1", partition="1") == 0


def test_no_commit_is_nan_and_no_member_is_unknown() -> None:
    s = _samples(_lag_ctx())
    idle = dict(cluster_name="prod", group="idle", topic="audit", partition="0", member_host="unknown",
                consumer_id="unknown", client_id="unknown")
    for name in ("kafka_consumergroup_group_offset", "kafka_consumergroup_group_lag",
                 "kafka_consumergroup_group_lag_seconds"):
        assert math.isnan(_one(s, name, **idle)), name
    assert _one(s, "kafka_consumergroup_group_sum_lag", group="idle") == 0
    assert math.isnan(_one(s, "kafka_consumergroup_group_max_lag", group="idle"))


def test_group_aggregates_and_partition_offsets() -> None:
    s = _samples(_lag_ctx())
    assert set(s["kafka_consumergroup_group_max_lag"][0][0]) == {"cluster_name", "group"}
    assert _one(s, "kafka_consumergroup_group_max_lag", group="g1") == 20
    assert _one(s, "kafka_consumergroup_group_max_lag_seconds", group="g1") == 3.5
    assert _one(s, "kafka_consumergroup_group_sum_lag", group="g1") == 20
    assert _one(s, "kafka_consumergroup_group_topic_sum_lag", group="g1", topic="orders") == 20
    assert _one(s, "kafka_partition_latest_offset", cluster_name="prod", topic="orders", partition="0") == 120
    assert _one(s, "kafka_partition_earliest_offset", cluster_name="prod", topic="orders", partition="0") == 5
    assert _one(s, "kafka_consumergroup_poll_time_ms", cluster_name="prod") == 12


def test_burrow_status_and_expiring_offsets() -> None:
    s = _samples(_lag_ctx())
    assert _one(s, "burrow_kafka_consumer_status", cluster="prod", consumer_group="g1") == 2
    assert _one(s, "burrow_kafka_consumer_lag_total", cluster="prod", consumer_group="g1") == 20
    assert _one(s, "burrow_kafka_topic_partition_status", consumer_group="g1", topic="orders", partition="0") == 2
    assert _one(s, "groupcoord_consumergroup_offset_expiry_timestamp_seconds", group="g1", partition="0") \
        == 1_700_000_000
    assert _one(s, "groupcoord_consumergroup_offsets_expiring_within_day", group="g1") == 1
    assert _one(s, "groupcoord_consumergroup_offsets_expiring_within_day", group="idle") == 0


def test_burrow_partition_lag_current_offset_and_topic_offset() -> None:
    s = _samples(_lag_ctx())
    burrow = dict(cluster="prod", consumer_group="g1", topic="orders")
    assert set(s["burrow_kafka_consumer_partition_lag"][0][0]) == {"cluster", "consumer_group", "topic", "partition"}
    assert _one(s, "burrow_kafka_consumer_partition_lag", partition="0", **burrow) == 20
    # A commit past the end offset: Burrow's current lag is 0, never negative.
    assert _one(s, "burrow_kafka_consumer_partition_lag", partition="1", **burrow) == 0
    assert _one(s, "burrow_kafka_consumer_current_offset", partition="0", **burrow) == 100
    assert _one(s, "burrow_kafka_consumer_current_offset", partition="1", **burrow) == 50
    # No commit: Burrow stores nothing for the partition, so neither family has it.
    for name in ("burrow_kafka_consumer_partition_lag", "burrow_kafka_consumer_current_offset"):
        assert not [l for l, _v in s[name] if l["consumer_group"] == "idle"], name
    assert set(s["burrow_kafka_topic_partition_offset"][0][0]) == {"cluster", "topic", "partition"}
    assert _one(s, "burrow_kafka_topic_partition_offset", cluster="prod", topic="orders", partition="0") == 120
    assert _one(s, "burrow_kafka_topic_partition_offset", cluster="prod", topic="audit", partition="0") == 7


def test_burrow_partition_lag_is_zero_where_the_log_end_is_unknown() -> None:
    row = PartitionLag("g", "t", 0, 5, None, None, None, Status.OK, None, None, None, None, False)
    text = render_lag("c", [row], {}, None, {})
    assert 'burrow_kafka_consumer_partition_lag{cluster="c",consumer_group="g",topic="t",partition="0"} 0\n' in text
    assert 'kafka_consumergroup_group_lag{cluster_name="c",group="g",topic="t",partition="0"' in text
    assert "burrow_kafka_topic_partition_offset{" not in text
    assert LagRenderer().render("c", [row], {}, None, {}) == text


def test_in_a_cluster_burrow_topic_offsets_are_those_of_the_partitions_led_here() -> None:
    # As kafka_partition_latest_offset: plain/0 is consumed here but led elsewhere, plain/1 is led here.
    row = PartitionLag("g", "plain", 0, 5, 10, 5, 1.0, Status.WARN, None, None, None, None, False)
    status = {"g": GroupStatus(Status.WARN, 1.0, ("plain", 0), 5)}
    renderer = LagRenderer()
    line = 'burrow_kafka_topic_partition_offset{{cluster="c",topic="plain",partition="1"}} {}'
    # Twice the same (the second from the renderer's cached lines), then a new log end.
    for led in ({("plain", 1): (40, 3)}, {("plain", 1): (40, 3)}, {("plain", 1): (41, 3)}):
        text = renderer.render("c", [row], status, None, {("plain", 0): 2}, led)
        assert text == render_lag("c", [row], status, None, {("plain", 0): 2}, led)
        offsets = [line for line in text.splitlines() if line.startswith("burrow_kafka_topic_partition_offset{")]
        assert offsets == [line.format(led[("plain", 1)][0])]


def test_name_filter_returns_only_the_named_families() -> None:
    ctx = _lag_ctx()
    ctx.registry.register(_StaticCollector())
    assert ctx.metrics is not None

    def names(*wanted: str) -> list[str]:
        assert ctx.metrics is not None
        text = asyncio.run(ctx.metrics.render(frozenset(wanted))).decode()
        return [family.name for family in text_string_to_metric_families(text)]

    assert names("kafka_consumergroup_poll_time_ms") == ["kafka_consumergroup_poll_time_ms"]
    # The first family of the lag text, the last one, and one of the registry's, together.
    assert names("kafka_consumergroup_group_offset", "groupcoord_consumergroup_offsets_expiring_within_day",
                 "groupcoord_static") == ["groupcoord_static", "kafka_consumergroup_group_offset",
                                          "groupcoord_consumergroup_offsets_expiring_within_day"]
    # A family whose name starts another's (kafka_consumergroup_group_lag / _lag_seconds) alone.
    assert names("kafka_consumergroup_group_lag") == ["kafka_consumergroup_group_lag"]
    assert names("no_such_family") == []
    everything = asyncio.run(ctx.metrics.render()).decode()
    assert "groupcoord_static" in everything and "burrow_kafka_topic_partition_offset" in everything


class _StaticCollector(Collector):
    """A collector without ``describe``, as all of the node's are."""

    def collect(self) -> list[Metric]:
        return [GaugeMetricFamily("groupcoord_static", "A fixed gauge.", value=1)]


def test_cluster_name_defaults_to_the_cluster_id() -> None:
    ctx = make_ctx(lag=FakeLag(lag_list=[partition_lag("g", "t", 0, 1, 2)]))
    register_metrics(ctx)
    assert _one(_samples(ctx), "kafka_consumergroup_group_lag", group="g") == 1
    assert _samples(ctx)["kafka_consumergroup_group_lag"][0][0]["cluster_name"] == "cluster-A"


def _group(gid: str, type_: str, state: str, offsets: int) -> SimpleNamespace:
    return SimpleNamespace(group_id=gid, type=type_, state=state, offsets={("t", i): None for i in range(offsets)})


def test_group_coordinator_metrics_as_jmx_exporter_names_them() -> None:
    view = FakeView(
        group_list=[_group("a", "classic", "Stable", 3), _group("b", "classic", "Empty", 1),
                    _group("c", "consumer", "Reconciling", 2)],
        coordinator_list=[SimpleNamespace(topic="__consumer_offsets", partition=0, state="active", load_time_ms=40),
                          SimpleNamespace(topic="__consumer_offsets", partition=1, state="active", load_time_ms=20),
                          SimpleNamespace(topic="__consumer_offsets", partition=2, state="loading", load_time_ms=None),
                          SimpleNamespace(topic="__transaction_state", partition=0, state="active", load_time_ms=9)])
    ctx = make_ctx(view=view)
    register_metrics(ctx)
    s = _samples(ctx)
    prefix = "kafka_server_group_coordinator_metrics_"
    assert _one(s, prefix + "group_count", protocol="classic") == 2
    assert _one(s, prefix + "group_count", protocol="consumer") == 1
    assert _one(s, prefix + "consumer_group_count", state="Reconciling") == 1
    assert _one(s, prefix + "consumer_group_count", state="Stable") == 0
    assert _one(s, prefix + "num_partitions", state="active") == 2
    assert _one(s, prefix + "num_partitions", state="loading") == 1
    assert _one(s, prefix + "partition_load_time_max") == 40
    assert _one(s, prefix + "partition_load_time_avg") == 30
    assert _one(s, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 6
    assert _one(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
    assert _one(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
    # One node: no replica metrics.
    assert "kafka_server_replicamanager_leadercount" not in s


def test_replica_metrics_in_cluster_mode() -> None:
    part = SimpleNamespace
    view = FakeView(partition_map={
        ("t", 0): part(log_start=0, log_end=1, leader=2, isr=[2, 3], replicas=[2, 3, 4], local=True),
        ("t", 1): part(log_start=0, log_end=1, leader=2, isr=[2, 3, 4], replicas=[2, 3, 4], local=True),
        ("t", 2): part(log_start=0, log_end=1, leader=3, isr=[3, 2], replicas=[3, 2], local=True),
        ("u", 0): part(log_start=0, log_end=1, leader=4, isr=[4], replicas=[4], local=False)})
    view.runtime = SimpleNamespace(topic="__consumer_offsets", standby_lag=lambda: {4: 12, 1: 0})
    ctx = make_ctx("zookeeper.connect=localhost:2181", view=view, node_id=2)
    register_metrics(ctx)
    s = _samples(ctx)
    assert _one(s, "kafka_server_replicamanager_leadercount") == 2
    assert _one(s, "kafka_server_replicamanager_partitioncount") == 3
    assert _one(s, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert _one(s, "kafka_cluster_partition_insyncreplicascount", topic="t", partition="0") == 2
    assert _one(s, "groupcoord_coordinator_standby_lag_records", topic="__consumer_offsets", partition="4") == 12
    assert _one(s, "groupcoord_coordinator_standby_lag_records", partition="1") == 0


def test_request_and_fsync_histograms() -> None:
    ctx = make_ctx()
    hooks = register_metrics(ctx)
    requests, fsyncs = hooks.requests, hooks.fsyncs
    requests.observe(int(ApiKey.OFFSET_COMMIT), 0.0003)
    requests.observe(int(ApiKey.OFFSET_COMMIT), 0.02)
    requests.observe(int(ApiKey.HEARTBEAT), 50.0)
    fsyncs.observe(0.004)
    s = _samples(ctx)
    name = "groupcoord_request_duration_seconds"
    assert _one(s, name + "_count", request="OffsetCommit") == 2
    assert _one(s, name + "_bucket", request="OffsetCommit", le="0.0005") == 1
    assert _one(s, name + "_bucket", request="OffsetCommit", le="0.025") == 2
    assert _one(s, name + "_sum", request="OffsetCommit") == pytest.approx(0.0203)
    assert _one(s, name + "_bucket", request="Heartbeat", le=str(LATENCY_BUCKETS[-1])) == 0
    assert _one(s, name + "_bucket", request="Heartbeat", le="+Inf") == 1
    assert _one(s, "groupcoord_requests_total", request="OffsetCommit") == 2
    assert _one(s, "groupcoord_log_fsync_duration_seconds_count") == 1
    assert _one(s, "groupcoord_log_fsync_duration_seconds_bucket", le="0.005") == 1


def test_group_coordinator_counters_from_write_records() -> None:
    ctx = make_ctx()
    counters = register_metrics(ctx).counters
    commit = (OffsetCommitKey("g", "t", 0), object())
    tombstone = (OffsetCommitKey("g", "t", 1), None)
    counters.on_write("commit-offset", [commit, commit])
    counters.on_write("txn-commit-offset", [commit])
    counters.on_write("cleanup-group-metadata", [tombstone, tombstone, tombstone])
    counters.on_write("delete-offsets", [tombstone])
    counters.on_write("classic-group-sync", [(GroupMetadataKey("g"), object())])
    counters.on_write("classic-group-join", [(GroupMetadataKey("g"), object())])  # not a completed rebalance
    counters.on_write("consumer-group-heartbeat", [(ConsumerGroupMetadataKey("c"), object())])
    s = _samples(ctx)
    prefix = "kafka_server_group_coordinator_metrics_"
    assert _one(s, prefix + "offset_commit_count_total") == 3
    assert _one(s, prefix + "offset_expiration_count_total") == 3
    assert _one(s, prefix + "offset_deletion_count_total") == 1
    assert _one(s, prefix + "group_completed_rebalance_count_total") == 1
    assert _one(s, prefix + "consumer_group_rebalance_count_total") == 1


def test_label_values_are_escaped() -> None:
    odd = 'a "quoted"\\group\nwith a newline'
    ctx = make_ctx(lag=FakeLag(lag_list=[partition_lag(odd, "t", 0, 1, 4)],
                               statuses={odd: SimpleNamespace(status=1, totallag=3)}))
    register_metrics(ctx)
    s = _samples(ctx)
    assert _one(s, "kafka_consumergroup_group_lag", group=odd) == 3
    assert _one(s, "burrow_kafka_consumer_lag_total", consumer_group=odd) == 3


def test_the_lag_text_is_rendered_once_per_sample() -> None:
    lag = FakeLag(lag_list=[partition_lag("g", "t", 0, 1, 4)])
    ctx = make_ctx(lag=lag)
    register_metrics(ctx)
    assert _one(_samples(ctx), "kafka_consumergroup_group_lag", group="g") == 3
    lag.lag_list.append(partition_lag("h", "t", 0, 1, 4))  # the same sample: not rendered again
    assert "h" not in {labels["group"] for labels, _v in _samples(ctx)["kafka_consumergroup_group_lag"]}
    lag.lag_list = [partition_lag("g", "t", 0, 2, 4)]  # a new sample
    assert _one(_samples(ctx), "kafka_consumergroup_group_lag", group="g") == 2
