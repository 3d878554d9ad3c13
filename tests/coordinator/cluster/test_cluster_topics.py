"""Topic lifecycle in cluster mode, through a stock admin client: CreatePartitions rewrites the
assignment and the controller elects the new partitions' leaders; DeleteTopics queues the topic in
``/admin/delete_topics``, the controller removes its znodes and every node its replicas."""

from __future__ import annotations

import json

from coordinator.cluster.local_cluster import LocalCluster
from tests.coordinator.cluster.conftest import wait_for
from tests.coordinator.cluster.test_replication import _create, _zk
from tests.coordinator.cluster.test_replication import cluster as cluster  # noqa: F401  (the fixture)


def test_create_partitions_then_delete_then_create_again(cluster: LocalCluster) -> None:  # noqa: F811
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewPartitions

    _create(cluster, "life", 1, 2, {})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
    zk = _zk(cluster)
    try:
        admin.create_partitions({"life": NewPartitions(3)})
        topic = json.loads(zk.get("/brokers/topics/life")[0])
        assert sorted(topic["partitions"]) == ["0", "1", "2"]
        assert all(len(r) == 2 for r in topic["partitions"].values())
        for p in (1, 2):
            state = json.loads(zk.get(f"/brokers/topics/life/partitions/{p}/state")[0])
            assert state["leader"] == topic["partitions"][str(p)][0]
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        assert producer.send("life", b"x", partition=2).get(timeout=20).offset == 0
        producer.close()
        replicas = topic["partitions"]["2"]
        assert all((cluster.directory / f"node-{b}" / "life-2").is_dir() for b in replicas)

        admin.delete_topics(["life"], timeout_ms=15000)
        assert zk.exists("/brokers/topics/life") is None and zk.exists("/config/topics/life") is None
        assert zk.get_children("/admin/delete_topics") == []
        wait_for(lambda: not any((cluster.directory / f"node-{b}" / f"life-{p}").exists()
                                 for b in (1, 2, 3) for p in range(3)), 20, "replica directories removed")
        assert "life" not in admin.list_topics()

        _create(cluster, "life", 2, 3, {})
        assert sorted(json.loads(zk.get("/brokers/topics/life")[0])["partitions"]) == ["0", "1"]
    finally:
        zk.stop()
        zk.close()
        admin.close()


def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(cluster: LocalCluster) -> None:  # noqa: F811
    """kafka-leader-election --election-type preferred: after the preferred leader was killed and
    came back (in the ISR, not leading), ElectLeaders makes it the leader again at a new epoch;
    asking again answers ELECTION_NOT_NEEDED."""
    from kafka.admin import KafkaAdminClient

    from protocol.errors import ErrorCode
    from tests.coordinator.cluster.test_replication import SESSION_MS, _leader, _state

    _create(cluster, "pref", 1, 3, {})
    preferred = _leader(cluster, "pref", 0)
    cluster.procs[preferred].kill()
    wait_for(lambda: _leader(cluster, "pref", 0) not in (preferred, -1), SESSION_MS / 1000 + 15, "a new leader")
    cluster.restart(preferred)
    zk = _zk(cluster)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
    try:
        wait_for(lambda: preferred in _state(zk, "pref", 0)["isr"], 30, "the preferred replica back in the ISR")
        epoch = _state(zk, "pref", 0)["leader_epoch"]
        def elect() -> list[int]:
            response = admin.elect_leaders(0, {"pref": [0]}, raise_errors=False)
            return [p.error_code for r in response.replica_election_results for p in r.partition_result]

        # NOT_CONTROLLER while the client's metadata names a node that is not (or no longer) the
        # controller: clients retry after a metadata refresh, as this does.
        codes = wait_for(lambda: (c := elect()) != [ErrorCode.NOT_CONTROLLER] and c, 20, "an answer from the controller")
        assert codes == [ErrorCode.NONE], codes
        state = _state(zk, "pref", 0)
        assert state["leader"] == preferred and state["leader_epoch"] == epoch + 1
        again = admin.elect_leaders(0, {"pref": [0]}, raise_errors=False)
        assert [p.error_code for r in again.replica_election_results for p in r.partition_result] == [
            ErrorCode.ELECTION_NOT_NEEDED]
    finally:
        zk.stop()
        zk.close()
        admin.close()


def test_describe_log_dirs_answers_per_node_with_its_replicas(cluster: LocalCluster) -> None:  # noqa: F811
    from kafka.admin import KafkaAdminClient

    _create(cluster, "dirs", 2, 2, {})
    zk = _zk(cluster)
    try:
        assignment = json.loads(zk.get("/brokers/topics/dirs")[0])["partitions"]
    finally:
        zk.stop()
        zk.close()
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
    try:
        for broker in (1, 2, 3):
            (answer,) = admin.describe_log_dirs(brokers=[broker])
            assert answer["broker"] == broker
            (result,) = answer["log_dirs"]
            assert result["error_code"] == 0 and result["total_bytes"] > 0
            assert result["log_dir"] == str((cluster.directory / f"node-{broker}").resolve())
            hosted = sorted(p["partition_index"] for t in result["topics"] if t["name"] == "dirs"
                            for p in t["partitions"])
            assert hosted == sorted(int(p) for p, replicas in assignment.items() if broker in replicas)
    finally:
        admin.close()


def test_producer_ids_are_unique_across_the_nodes(cluster: LocalCluster) -> None:  # noqa: F811
    """InitProducerId on every node hands out ids from blocks claimed in
    ``/latest_producer_id_block`` (Kafka's format): no two nodes give out the same id — a reused
    id made a new producer's first batches look like retries of another's (answered as
    duplicates, never written), found by the stock-client group failover test."""
    from kafka.protocol.producer import InitProducerIdRequest

    from protocol.apis import ApiKey
    from tests.wire_client import WireClient

    ids = []
    for _round in range(2):
        for port in cluster.ports:
            with WireClient(cluster.host, port) as c:
                r = c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
                    version=4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
                assert r.error_code == 0
                ids.append(r.producer_id)
    assert len(set(ids)) == len(ids), ids
    zk = _zk(cluster)
    try:
        block = json.loads(zk.get("/latest_producer_id_block")[0])
    finally:
        zk.stop()
        zk.close()
    assert block["version"] == 1 and block["broker"] in (1, 2, 3)
    assert int(block["block_end"]) - int(block["block_start"]) == 999  # strings, as Kafka writes them
    assert sorted(ids)[-1] <= int(block["block_end"])
