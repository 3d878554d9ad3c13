"""kafka-lag-exporter's Grafana dashboard reads our /metrics unchanged: a real node with consumer
groups lagging, a real Prometheus scraping its /metrics every second, and every query the
dashboard makes evaluated through Prometheus' HTTP API, its template variables resolved and
substituted as Grafana does (tests/coordinator/ops/prometheus_server.py).

The dashboard is ``grafana/Kafka_Lag_Exporter_Dashboard.json`` of
https://github.com/seglo/kafka-lag-exporter, last changed by commit
5b865fecc1c75f552550af2c0d212ebc33f09c45 (0.6.8, the file as of the repository's head
3fcb3c79f5a62745a167e9bc4cd92f0228cf9ad5). The expressions below are written here; they use the
same metric names, label matchers, functions and aggregations as its variables and panels, which
are noted by the dashboard's panel ids. Its variables: ``namespace`` (the Kubernetes namespace
label Prometheus attaches to the scraped series), ``cluster_name``, and ``consumer_group``
(multi-value, with "All" = ``.*``), each a ``query_result()`` of ``kafka_consumergroup_group_lag``
with a regex picking the label out. Prometheus scrapes the node twice, as two targets: with a
``namespace`` label set in the scrape configuration (docs/metrics.md), and without one, where
Grafana's Namespace variable is "None", the empty string, and ``namespace=""`` selects the series
without the label. Its last row (JVM memory and GC of the exporter's own pod) is about the
exporter's JVM, not about Kafka: those panels have no data here, as they have none for an exporter
outside Kubernetes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.conftest import ServerProcess, free_port
from tests.coordinator.ops.prometheus_server import PrometheusServer, interpolate, variable_options

NAMESPACE = "groupcoord-test"
#: The Namespace variable's value for each target: its label, and Grafana's "None" without one.
NAMESPACES = (NAMESPACE, "")
CLUSTER = "test-cluster"

#: Records produced per (topic, partition): the log end offsets.
PRODUCED = {("orders", 0): 10, ("orders", 1): 4, ("payments", 0): 3}
#: Committed offsets per group. ``billing.v1`` is a subscribed consumer (a member, so member labels);
#: ``audit`` and ``ledger`` commit through assign() (no members: kafka-lag-exporter's "unknown").
#: The dot in ``billing.v1`` is a regex metacharacter Grafana escapes in ``$consumer_group``.
COMMITTED = {
    "billing.v1": {("orders", 0): 6, ("orders", 1): 4},
    "audit": {("orders", 0): 2, ("orders", 1): 1, ("payments", 0): 1},
    "ledger": {("payments", 0): 3},
}
#: kafka-lag-exporter's lag: log end - committed.
EXPECTED_LAG = {(g, t, p): PRODUCED[(t, p)] - c for g, offsets in COMMITTED.items() for (t, p), c in offsets.items()}

# The dashboard's template variables, as Grafana evaluates them (same metric, matchers and regexes).
VARIABLES: dict[str, dict[str, Any]] = {
    "namespace": {"query": "query_result(kafka_consumergroup_group_lag)",
                  "regex": '/.*namespace="([^"]*).*/', "multi": False, "includeAll": False, "sort": 1},
    "cluster_name": {"query": 'query_result(kafka_consumergroup_group_lag{namespace="$namespace"})',
                     "regex": '/.*cluster_name="([^"]*).*/', "multi": False, "includeAll": False, "sort": 1},
    "consumer_group": {
        "query": 'query_result(kafka_consumergroup_group_lag{namespace="$namespace",cluster_name="$cluster_name"})',
        "regex": '/.*group="([^"]*).*/', "multi": True, "includeAll": True, "allValue": ".*", "sort": 1},
}

# The panels' queries. Every one filters on the three variables the same way.
SELECT = 'namespace="$namespace",cluster_name="$cluster_name",group=~"$consumer_group",group!=""'
PANELS = {
    # Row "All Consumer Group Lag".
    "102 max lag seconds": f"topk(50, kafka_consumergroup_group_max_lag_seconds{{{SELECT}}})",
    "103 partition lag seconds": f"topk(25, kafka_consumergroup_group_lag_seconds{{{SELECT}}})",
    "98 max lag": f"topk(50, kafka_consumergroup_group_max_lag{{{SELECT}}})",
    "82 partition lag": f"topk(25, kafka_consumergroup_group_lag{{{SELECT}}})",
    # Row "... Per Group Over Offset Lag", one panel per selected group.
    "147A group max lag seconds": f"kafka_consumergroup_group_max_lag_seconds{{{SELECT}}}",
    "147B group max lag": f"kafka_consumergroup_group_max_lag{{{SELECT}}}",
    # Row "... Per Group Over Summed Offsets", one panel per selected group.
    "107A max partition lag seconds": f"max by (group) (kafka_consumergroup_group_lag_seconds{{{SELECT}}})",
    "107B sum of group offsets": f"sum(kafka_consumergroup_group_offset{{{SELECT}}})",
    "107C sum of latest offsets": (
        f"sum(0 * kafka_consumergroup_group_offset{{{SELECT}}}"
        " + on (namespace, cluster_name, topic, partition) group_left ()"
        ' kafka_partition_latest_offset{namespace="$namespace",cluster_name="$cluster_name"})'),
    # Row "Kafka Lag Exporter JVM Metrics": the exporter's own pod.
    **{name: f'sum by (kubernetes_pod_name) (rate({metric}{{app_kubernetes_io_instance="kafka-lag-exporter"}}[5m]))'
       for name, metric in (("99 jvm memory", "jvm_memory_bytes_used"),
                            ("95 jvm gc time", "jvm_gc_collection_seconds_sum"),
                            ("97 jvm gc rate", "jvm_gc_collection_seconds_count"))},
}


@dataclass
class Stack:
    prometheus: PrometheusServer
    #: The evaluation time (Unix seconds) at which Prometheus holds a scrape of the expected state.
    at: float
    #: Before the first record was produced.
    produced_after: float

    def panel(self, name: str, namespace: str = NAMESPACE, **values: Any) -> list[dict[str, Any]]:
        """The panel's query with the variables set, at ``at``; checked against the range query a
        graph panel sends, whose last point must be the same."""
        expr = interpolate(PANELS[name], {"namespace": namespace, "cluster_name": CLUSTER, **values}, VARIABLES)
        instant = self.prometheus.query(expr, self.at)
        ranged = self.prometheus.query_range(expr, self.at - 10, self.at, 1)
        last = {_key(s["metric"]): s["values"][-1] for s in ranged if s["values"][-1][0] == self.at}
        assert last == {_key(s["metric"]): s["value"] for s in instant}, (name, expr)
        return instant


def _key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _value(series: dict[str, Any]) -> float:
    return float(series["value"][1])


def _by(result: list[dict[str, Any]], *labels: str) -> dict[Any, float]:
    out = {}
    for series in result:
        key = tuple(series["metric"][label] for label in labels)
        assert key not in out, (key, result)
        out[key if len(key) > 1 else key[0]] = _value(series)
    return out


def _produce(bootstrap: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for (topic, partition), count in PRODUCED.items():
            for i in range(count):
                producer.send(topic, value=b"r%d" % i, partition=partition)
        producer.flush(10)
    finally:
        producer.close()


def _lag_in_prometheus(prometheus: PrometheusServer, at: float) -> list[dict[tuple[str, str, int], float]]:
    """The lag each of the two targets (with and without a namespace label) shows at ``at``."""
    out = []
    for namespace in NAMESPACES:
        result = prometheus.query(f'kafka_consumergroup_group_lag{{namespace="{namespace}"}}', at)
        out.append({(s["metric"]["group"], s["metric"]["topic"], int(s["metric"]["partition"])): _value(s)
                    for s in result})
    return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work: Path = tmp_path_factory.mktemp("grafana")
    http_port = free_port()
    server = ServerProcess(work / "data", {"http.listen": f"127.0.0.1:{http_port}", "lag.sample.interval.ms": "100",
                                           "num.partitions": "2", "group.initial.rebalance.delay.ms": "0",
                                           "lag.cluster.name": CLUSTER})
    prometheus = PrometheusServer(work, [(f"127.0.0.1:{http_port}", {"namespace": NAMESPACE}),
                                         (f"127.0.0.1:{http_port}", {})])
    consumers: list[Any] = []
    server.start()
    try:
        prometheus.start()
        produced_after = time.time()
        _produce(server.bootstrap)
        billing = KafkaConsumer("orders", bootstrap_servers=server.bootstrap, group_id="billing.v1",
                                client_id="billing-client", enable_auto_commit=False, auto_offset_reset="earliest")
        consumers.append(billing)
        deadline = time.monotonic() + 30
        while not billing.assignment() or len(billing.assignment()) < 2:
            assert time.monotonic() < deadline, "billing.v1 was not assigned orders' two partitions"
            billing.poll(200)
        billing.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                        for (t, p), o in COMMITTED["billing.v1"].items()})
        for group in ("audit", "ledger"):
            standalone = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False)
            consumers.append(standalone)
            standalone.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                               for (t, p), o in COMMITTED[group].items()})
        prometheus.wait_for_target_up()
        # A time at which Prometheus holds the expected state, and after which it has stored a
        # later scrape: a scrape still in flight when ``at`` was chosen (its timestamp is when it
        # started) would otherwise change what queries at ``at`` see between one panel and the next.
        deadline = time.monotonic() + 30
        while True:
            at = round(time.time(), 3)
            if _lag_in_prometheus(prometheus, at) == [EXPECTED_LAG] * 2:
                prometheus.wait_for_scrape_after(at)
                if _lag_in_prometheus(prometheus, at) == [EXPECTED_LAG] * 2:
                    break
            assert time.monotonic() < deadline, (f"Prometheus never scraped the expected lag: "
                                                 f"{_lag_in_prometheus(prometheus, at)}\n{prometheus.log_text()}")
            time.sleep(0.2)
        yield Stack(prometheus, at, produced_after)
    finally:
        for consumer in consumers:
            consumer.close()
        prometheus.stop()
        assert server.stop() == 0, server.log_text()


@pytest.mark.parametrize("namespace", NAMESPACES, ids=["namespace-label", "no-namespace-label"])
def test_template_variables_offer_our_namespace_cluster_and_groups(stack: Stack, namespace: str) -> None:
    values = {"namespace": namespace, "cluster_name": CLUSTER}
    options = {name: variable_options(stack.prometheus, variable, values, VARIABLES, stack.at)
               for name, variable in VARIABLES.items()}
    # The target without the label offers no namespace of its own: on a Prometheus scraping only
    # such targets the list is Grafana's "None" (the empty string), chosen here by hand.
    assert options == {"namespace": [NAMESPACE], "cluster_name": [CLUSTER],
                       "consumer_group": sorted(COMMITTED)}


@pytest.mark.parametrize("namespace", NAMESPACES, ids=["namespace-label", "no-namespace-label"])
def test_top_row_lag_in_offsets_and_time(stack: Stack, namespace: str) -> None:
    everything = {"consumer_group": "$__all"}
    partition_lag = stack.panel("82 partition lag", namespace=namespace, **everything)
    assert {(g, t, int(p)): v for (g, t, p), v in _by(partition_lag, "group", "topic", "partition").items()} \
        == EXPECTED_LAG
    max_lag = _by(stack.panel("98 max lag", namespace=namespace, **everything), "group")
    assert max_lag == {g: max(v for (gg, _t, _p), v in EXPECTED_LAG.items() if gg == g) for g in COMMITTED}

    by_partition = _by(stack.panel("103 partition lag seconds", namespace=namespace, **everything),
                       "group", "topic", "partition")
    seconds = {(g, t, int(p)): v for (g, t, p), v in by_partition.items()}
    assert set(seconds) == set(EXPECTED_LAG)
    # Caught up: 0. Behind: the age of the first record not consumed — at least 0, at most the
    # time since the first record was produced.
    bound = stack.at - stack.produced_after + 1
    for key, lag in EXPECTED_LAG.items():
        assert not math.isnan(seconds[key]), key
        if lag == 0:
            assert seconds[key] == 0, key
        else:
            assert 0 <= seconds[key] <= bound, (key, seconds[key], bound)
    max_seconds = _by(stack.panel("102 max lag seconds", namespace=namespace, **everything), "group")
    assert max_seconds == {g: max(v for (gg, _t, _p), v in seconds.items() if gg == g) for g in COMMITTED}
    assert max_seconds["ledger"] == 0 and max_seconds["audit"] > 0


@pytest.mark.parametrize("namespace", NAMESPACES, ids=["namespace-label", "no-namespace-label"])
def test_one_panel_per_group_escaped_as_grafana_escapes_it(stack: Stack, namespace: str) -> None:
    for group in COMMITTED:
        offsets = stack.panel("147B group max lag", namespace=namespace, consumer_group=group)
        assert [s["metric"]["group"] for s in offsets] == [group]
        assert _value(offsets[0]) == max(v for (g, _t, _p), v in EXPECTED_LAG.items() if g == group)
        seconds = stack.panel("147A group max lag seconds", namespace=namespace, consumer_group=group)
        assert [s["metric"]["group"] for s in seconds] == [group] and _value(seconds[0]) >= 0
    # Several groups chosen: Grafana writes (a|b), each escaped.
    chosen = stack.panel("98 max lag", namespace=namespace, consumer_group=["audit", "billing.v1"])
    assert set(_by(chosen, "group")) == {"audit", "billing.v1"}


@pytest.mark.parametrize("namespace", NAMESPACES, ids=["namespace-label", "no-namespace-label"])
def test_summed_offsets_row(stack: Stack, namespace: str) -> None:
    for group, offsets in COMMITTED.items():
        by_group = _by(stack.panel("107A max partition lag seconds", namespace=namespace, consumer_group=group),
                       "group")
        max_seconds = _by(stack.panel("147A group max lag seconds", namespace=namespace, consumer_group=group), "group")
        assert by_group == max_seconds
        committed = stack.panel("107B sum of group offsets", namespace=namespace, consumer_group=group)
        assert [_value(s) for s in committed] == [sum(offsets.values())]
        latest = stack.panel("107C sum of latest offsets", namespace=namespace, consumer_group=group)
        assert [_value(s) for s in latest] == [sum(PRODUCED[tp] for tp in offsets)]
    # All groups: the join matches each group's partition to its one latest offset.
    latest = stack.panel("107C sum of latest offsets", namespace=namespace, consumer_group="$__all")
    assert [_value(s) for s in latest] == [sum(PRODUCED[tp] for offsets in COMMITTED.values() for tp in offsets)]


def test_jvm_panels_are_about_the_exporter_and_have_no_data(stack: Stack) -> None:
    for name in ("99 jvm memory", "95 jvm gc time", "97 jvm gc rate"):
        assert stack.panel(name) == [], name
