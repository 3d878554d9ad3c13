"""The operator tools on a real three-node cluster (ZooKeeper, node processes), a crash included.

A topic of three partitions with one replica each, on nodes 1, 2 and 3: whichever node
coordinates the group, two of its partitions are led elsewhere, so their lag needs the leaders'
offsets (coordinator/ops/remote_offsets.py). Checked: the coordinator's /metrics gives the right
lag for every partition and follows N more records; /readyz is 200 on every node; /api/cluster
lists the nodes, the controller and the coordinator partitions with their hot standbys. Then the
coordinator's node is SIGKILLed: the group moves, and the new coordinator's /metrics and
/api/groups/{id} show its committed offsets and lag, and ``groupcoord groups --describe --state``
against the surviving nodes names the new coordinator.

The cluster's one listener is SASL_PLAINTEXT (PLAIN), between the nodes too: the leaders are
asked over the authenticated inter-broker connection.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from coordinator.cluster.local_cluster import LocalCluster
from protocol.hashing import partition_for
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster, wait_for
from tests.coordinator.cluster.test_replication import _leader

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[3]
GROUP, TOPIC = "g-ops", "ops-t"
OFFSETS_PARTITIONS = 3
#: Partition p's only replica is on node p + 1.
PLACEMENT = {0: [1], 1: [2], 2: [3]}
COMMITTED = 4
USER, PASSWORD = "broker", "broker-secret"
#: kafka-python's settings for the SASL listener.
SASL = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD}
JAAS = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{USER}" '
        f'password="{PASSWORD}" user_{USER}="{PASSWORD}";')


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:  # a node just killed
        return 0, repr(error)


def _group_lags(port: int) -> dict[int, float]:
    status, body = _get(port, "/metrics")
    assert status == 200, body
    return {int(s.labels["partition"]): s.value for f in text_string_to_metric_families(body) for s in f.samples
            if s.name == "kafka_consumergroup_group_lag" and s.labels["group"] == GROUP}


def _latest_offsets(port: int) -> dict[int, float]:
    status, body = _get(port, "/metrics")
    assert status == 200, body
    return {int(s.labels["partition"]): s.value for f in text_string_to_metric_families(body) for s in f.samples
            if s.name == "kafka_partition_latest_offset" and s.labels["topic"] == TOPIC}


def _http_port(log: Path) -> int | None:
    found = re.search(r"http_listen=\S+:(\d+)", log.read_text(errors="replace")) if log.exists() else None
    return int(found.group(1)) if found else None


def _produce(cluster: LocalCluster, count: int) -> list[tuple[int, int, int]]:
    """``count`` records on each partition; their (partition, offset, timestamp)."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", **SASL)
    sent = [producer.send(TOPIC, value=b"%d" % i, partition=p) for p in PLACEMENT for i in range(count)]
    producer.flush(20)
    producer.close()
    return [(m.partition, m.offset, m.timestamp) for m in (f.get(10) for f in sent)]


class Ops:
    def __init__(self, cluster: LocalCluster, ports: dict[int, int], directory: Path) -> None:
        self.cluster = cluster
        self.ports = ports
        #: (partition, offset, timestamp) of every record produced.
        self.records: list[tuple[int, int, int]] = []
        self.client_config = directory / "client.properties"
        self.client_config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                                      f"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                                      f'required username="{USER}" password="{PASSWORD}";\n')

    def coordinator(self) -> int:
        return _leader(self.cluster, "__consumer_offsets", partition_for(GROUP, OFFSETS_PARTITIONS))


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ops]:
    directory = tmp_path_factory.mktemp("ops-cluster")
    with running_cluster(directory / "cluster", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                         "offsets.topic.replication.factor=3", "http.listen=127.0.0.1:0",
                         "lag.sample.interval.ms=200", "http.admin.enabled=true",
                         # {port}: each node's own (local_cluster.py); clients and nodes on one listener.
                         "listeners=SASL_PLAINTEXT://127.0.0.1:{port}", "inter.broker.listener.name=SASL_PLAINTEXT",
                         "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
                         f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}") as cluster:
        ports = {b: wait_for(lambda b=b: _http_port(cluster.log_path(b)), 20, f"node {b}'s HTTP listener")
                 for b in (1, 2, 3)}
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000, **SASL)
        try:
            admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments=PLACEMENT)])
        finally:
            admin.close()
        records = _produce(cluster, 10)
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=GROUP, enable_auto_commit=False,
                                 **SASL)
        try:
            consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(COMMITTED, "", -1) for p in PLACEMENT})
        finally:
            consumer.close()
        ops = Ops(cluster, ports, directory)
        ops.records += records
        yield ops


def test_coordinator_measures_lag_of_partitions_led_elsewhere(ops: Ops) -> None:
    coordinator = ops.coordinator()
    port = ops.ports[coordinator]
    led_elsewhere = [p for p, (node,) in PLACEMENT.items() if node != coordinator]
    assert len(led_elsewhere) == 2
    wait_for(lambda: _group_lags(port) == {0: 6.0, 1: 6.0, 2: 6.0}, 30,
             f"node {coordinator} (coordinator) measures lag 10 - 4 on all three partitions")
    for other in set(ops.ports) - {coordinator}:
        assert _group_lags(ops.ports[other]) == {}  # only the coordinator exposes the group
    ops.records += _produce(ops.cluster, 5)
    wait_for(lambda: _group_lags(port) == {0: 11.0, 1: 11.0, 2: 11.0}, 30, "lag after 5 more records each")
    # Each partition's latest offset is served by its leader alone, so a scrape of every node has
    # it once (Grafana's kafka-lag-exporter dashboard joins on topic and partition).
    def latest_by_node() -> dict[int, dict[int, float]]:
        return {b: _latest_offsets(p) for b, p in ops.ports.items()}
    served = wait_for(lambda: (lambda got: got if all(got.values()) else None)(latest_by_node()), 30,
                      "every node serves the latest offsets of the partitions it leads")
    assert served == {node: {p: 15.0 for p, (leader,) in PLACEMENT.items() if leader == node} for node in ops.ports}
    # The partitions' offsets as the leaders gave them, on the dashboard too.
    status, body = _get(port, f"/api/groups/{GROUP}")
    assert status == 200
    rows = {r["partition"]: r for r in json.loads(body)["partitions"]}
    assert {p: (r["committed"], r["log_end"], r["lag"]) for p, r in rows.items()} == {
        p: (COMMITTED, 15, 11) for p in PLACEMENT}

    for b, p in ops.ports.items():
        wait_for(lambda p=p: _get(p, "/readyz") == (200, "ready\n"), 30, f"node {b} ready")

    status, body = _get(port, "/api/cluster")
    assert status == 200
    info = json.loads(body)
    assert info["cluster_mode"] is True
    assert sorted(n["node_id"] for n in info["nodes"]) == [1, 2, 3]
    assert info["controller_id"] in (1, 2, 3)

    def states() -> dict[int, str] | None:
        found = json.loads(_get(port, "/api/cluster")[1])["coordinators"]
        got = {c["partition"]: c["state"] for c in found if c["topic"] == "__consumer_offsets"}
        settled = sorted(got) == [0, 1, 2] and set(got.values()) == {"active", "standby"}
        return got if settled else None

    # Each offsets partition has three replicas: led (active) on one node, a hot standby on each
    # of the others; the coordinator's node leads the group's, and stands by for another.
    offsets = wait_for(states, 30, "the three offsets partitions on the coordinator's node, active or standby")
    assert offsets[partition_for(GROUP, OFFSETS_PARTITIONS)] == "active"
    placed = {(r["topic"], r["partition"]): (r["leader"], r["local"]) for r in info["partitions"]}
    assert {p: placed[(TOPIC, p)] for p in PLACEMENT} == {p: (n[0], n[0] == coordinator) for p, n in PLACEMENT.items()}
    status, page = _get(port, "/cluster")
    assert status == 200 and "standby" in page


def _reset_preview(ops: Ops, port: int, scenario: str, value: str = "") -> dict[int, int]:
    """The dashboard's JSON reset, a dry run over all the group's topics: partition -> new offset."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with opener.open(f"http://127.0.0.1:{port}/api/csrf", timeout=10) as reply:
        token = json.loads(reply.read())["token"]
    body = json.dumps({"scope": "all-topics", "scenario": scenario, "value": value}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/groups/{GROUP}/reset", data=body, headers={
        "Content-Type": "application/json", "X-CSRF-Token": token,
        "Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()})
    with opener.open(request, timeout=30) as reply:
        plan = json.loads(reply.read())
    assert plan["executed"] is False
    return {r["partition"]: r["new_offset"] for r in plan["rows"] if r["topic"] == TOPIC}


def test_dashboard_reset_plans_with_the_leaders_offsets(ops: Ops) -> None:
    # Earliest, latest and by timestamp, for partitions led here and elsewhere alike: the
    # partitions led elsewhere are asked of their leaders when the plan is made.
    port = ops.ports[ops.coordinator()]
    ends = {p: max(o for q, o, _t in ops.records if q == p) + 1 for p in PLACEMENT}
    assert _reset_preview(ops, port, "to-latest") == ends
    assert _reset_preview(ops, port, "to-earliest") == {p: 0 for p in PLACEMENT}
    # A timestamp among the records: per partition, the first record at or after it.
    at = sorted(t for _p, _o, t in ops.records)[len(ops.records) // 2]
    expected = {p: min(o for q, o, t in ops.records if q == p and t >= at) for p in PLACEMENT}
    text = datetime.datetime.fromtimestamp(at / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at % 1000:03d}"
    assert _reset_preview(ops, port, "to-datetime", text) == expected
    # Nothing planned was committed.
    assert _group_lags(port) == {0: 11.0, 1: 11.0, 2: 11.0}


def test_group_moves_with_its_offsets_and_lag_when_its_coordinator_crashes(ops: Ops) -> None:
    old = ops.coordinator()
    port = ops.ports[old]
    wait_for(lambda: _group_lags(port) == {0: 11.0, 1: 11.0, 2: 11.0}, 30, "lag before the crash")
    ops.cluster.procs[old].kill()  # SIGKILL: a crash, no controlled shutdown
    ops.cluster.procs[old].wait(10)
    survivors = sorted(set(ops.ports) - {old})
    new = wait_for(lambda: (c := ops.coordinator()) in survivors and c, SESSION_MS / 1000 + 20,
                   "a surviving node leads the group's offsets partition")
    new_port = ops.ports[new]
    # The partition whose only replica was on the crashed node has no leader: its lag is unknown
    # (NaN); the two others are measured, by the new coordinator, as before.
    alive = {p for p, (node,) in PLACEMENT.items() if node != old}

    def lags() -> dict[int, float] | None:
        found = _group_lags(new_port)
        return found if {p: found.get(p) for p in alive} == {p: 11.0 for p in alive} else None

    found = wait_for(lags, 30, f"node {new} (new coordinator) exposes the group's lag")
    dead = (set(PLACEMENT) - alive).pop()
    assert found.get(dead) is None or found[dead] != found[dead]  # absent or NaN
    detail = wait_for(lambda: (r := _get(new_port, f"/api/groups/{GROUP}"))[0] == 200 and json.loads(r[1]), 30,
                      "the dashboard's group page on the new coordinator")
    rows = {r["partition"]: r for r in detail["partitions"]}
    assert {p: r["committed"] for p, r in rows.items()} == {p: COMMITTED for p in PLACEMENT}
    assert {p: rows[p]["lag"] for p in alive} == {p: 11 for p in alive}
    assert rows[dead]["lag"] is None

    # The new coordinator's cluster page: the crashed node gone, a live controller.
    def cluster() -> dict[str, Any] | None:
        info = json.loads(_get(new_port, "/api/cluster")[1])
        settled = sorted(n["node_id"] for n in info["nodes"]) == survivors and info["controller_id"] in survivors
        return info if settled else None

    wait_for(cluster, 30, "the crashed node leaves the cluster page, a survivor is the controller")

    bootstrap = ",".join(f"127.0.0.1:{ops.cluster.ports[b - 1]}" for b in survivors)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "coordinator", "groups", "--bootstrap-server", bootstrap,
                           "--command-config", str(ops.client_config), "--describe", "--group", GROUP, "--state"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith(GROUP))
    assert f"127.0.0.1:{ops.cluster.ports[new - 1]}  ({new})" in line, done.stdout
    assert "Empty" in line
