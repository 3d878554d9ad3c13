"""Partition reassignment benchmark (issue 14 item 4): how fast a partition's data moves to a new
replica, unthrottled and under replication throttles (KIP-73), and what the throttle holds it to.

One run: ZooKeeper (tickTime 2000) and four node processes (``LocalCluster``, 6 s session,
``replication.quota.window.num=2``, so a throttled move bursts for at most a 2 s window rather
than Kafka's default 11 s). A topic ``move`` of one partition, replication factor 1, is filled
with ``--mb`` MB (1 KB records, confluent-kafka, acks=all). Then, for each rate (unthrottled, then
each ``--rates`` value in MB/s), the partition is reassigned from the node holding it to the next
node, the way ``kafka-reassign-partitions --execute --throttle`` does it (IncrementalAlterConfigs
for the broker rates and the topic's throttled-replica lists, then AlterPartitionReassignments);
the time runs from the Alter answer to ListPartitionReassignments showing nothing in progress,
after which the throttles are removed (``--verify``). Reported per move: seconds, MB/s.

Run: ``.venv/bin/python bench/reassign_bench.py [--mb 200] [--rates 20,5]``.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402

from bench.cluster_bench import SESSION_MS, TICK_MS, Zk, create_topic, free_ports, machine_info, wait_for  # noqa: E402
from coordinator.cluster.local_cluster import LocalCluster  # noqa: E402
from protocol.apis import ApiKey  # noqa: E402
from tests.wire_client import WireClient  # noqa: E402

TOPIC = "move"
RECORD = 1000
NODES = 4
SET, DELETE = 0, 1
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


def _client(cluster: LocalCluster, broker: int) -> WireClient:
    return WireClient(cluster.host, cluster.ports[broker - 1], timeout=60)


def _alter_configs(cluster: LocalCluster, broker: int, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]]) -> None:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as Req

    Res = Req.AlterConfigsResource
    request = Req(version=1, validate_only=False, resources=[
        Res(resource_type=t, resource_name=n, configs=[Res.AlterableConfig(name=k, config_operation=op, value=v)
                                                       for k, op, v in ops]) for t, n, ops in resources])
    with _client(cluster, broker) as c:
        response = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    bad = [(r.resource_name, r.error_code, r.error_message) for r in response.responses if r.error_code]
    if bad:
        raise RuntimeError(f"IncrementalAlterConfigs failed: {bad}")


def _throttle(cluster: LocalCluster, rate: int | None, source: int, target: int) -> None:
    """As the tool: every involved broker's rates (each broker's own resource, sent to it), the
    topic's leader list on the source replica and follower list on the new one. None: remove."""
    for broker in (source, target):
        ops = ([("leader.replication.throttled.rate", SET, str(rate)), ("follower.replication.throttled.rate", SET, str(rate))]
               if rate else [("leader.replication.throttled.rate", DELETE, None),
                             ("follower.replication.throttled.rate", DELETE, None)])
        _alter_configs(cluster, broker, [(BROKER_RESOURCE, str(broker), ops)])
    ops = ([("leader.replication.throttled.replicas", SET, f"0:{source}"),
            ("follower.replication.throttled.replicas", SET, f"0:{target}")] if rate else
           [("leader.replication.throttled.replicas", DELETE, None), ("follower.replication.throttled.replicas", DELETE, None)])
    _alter_configs(cluster, source, [(TOPIC_RESOURCE, TOPIC, ops)])


def _controller(zk: Zk) -> int:
    import json

    return int(json.loads(zk.client.get("/controller")[0])["brokerid"])


def _reassign(cluster: LocalCluster, controller: int, target: int) -> None:
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest as Req

    T = Req.ReassignableTopic
    request = Req(version=0, timeout_ms=30000, topics=[T(name=TOPIC, partitions=[
        T.ReassignablePartition(partition_index=0, replicas=[target])])])
    with _client(cluster, controller) as c:
        response = c.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, request)
    codes = [p.error_code for t in response.responses for p in t.partitions]
    if response.error_code or any(codes):
        raise RuntimeError(f"AlterPartitionReassignments failed: {response}")


def _moving(cluster: LocalCluster, controller: int) -> bool:
    from kafka.protocol.admin import ListPartitionReassignmentsRequest as Req

    with _client(cluster, controller) as c:
        response = c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, Req(version=0, timeout_ms=30000, topics=None))
    return bool(response.topics)


def _fill(bootstrap: str, megabytes: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 1 << 20, "compression.type": "none"})
    payload = bytes(RECORD)
    for _ in range(megabytes * 1000):
        while True:
            try:
                producer.produce(TOPIC, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("records not delivered")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--rates", default="20,5", help="throttles in MB/s, after an unthrottled move")
    args = parser.parse_args()
    rates: list[int | None] = [None] + [int(float(r) * 1_000_000) for r in args.rates.split(",") if r]

    def on_signal(sig: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGTERM, on_signal)
    started = datetime.now(UTC)
    tmp = Path(tempfile.mkdtemp(prefix="gc-reassign-bench-"))
    cluster = LocalCluster(tmp / "cluster", NODES, free_ports(NODES), tick_time_ms=TICK_MS,
                           settings=[f"zookeeper.session.timeout.ms={SESSION_MS}", "replication.quota.window.num=2",
                                     "auto.leader.rebalance.enable=false"])
    rows: list[str] = []
    zk: Any = None
    try:
        cluster.start()
        zk = Zk(cluster.zookeeper.connect)
        wait_for(lambda: len(zk.client.get_children("/brokers/ids")) == NODES, 30, "all nodes registered")
        create_topic(cluster.bootstrap, TOPIC, 1, 1, 1)
        wait_for(lambda: zk.client.exists(f"/brokers/topics/{TOPIC}/partitions/0/state"), 30, "the topic's state")
        t0 = time.monotonic()
        _fill(cluster.bootstrap, args.mb)
        fill_s = time.monotonic() - t0
        for rate in rates:
            source = int(zk.state(TOPIC, 0)["leader"])
            target = source % NODES + 1
            controller = _controller(zk)
            if rate:
                _throttle(cluster, rate, source, target)
            began = time.monotonic()
            _reassign(cluster, controller, target)
            wait_for(lambda c=controller: not _moving(cluster, c), 600, "the move to finish", 0.1)
            took = time.monotonic() - began
            if rate:
                _throttle(cluster, None, source, target)
            label = "unthrottled" if rate is None else f"{rate / 1e6:g} MB/s"
            rows.append(f"| {label} | {source} → {target} | {took:.2f} | {args.mb / took:.1f} |")
            print(f"[bench] {label}: {took:.2f} s", file=sys.stderr, flush=True)
    finally:
        if zk is not None:
            zk.close()
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Machine: {machine_info()}.")
    print(f"Command: `.venv/bin/python bench/reassign_bench.py --mb {args.mb} --rates {args.rates}`, "
          f"started {started:%Y-%m-%d %H:%M} UTC; filling {args.mb} MB took {fill_s:.1f} s.")
    print()
    print("| throttle | move | seconds | MB/s |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
