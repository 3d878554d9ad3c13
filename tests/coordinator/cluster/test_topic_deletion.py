"""Topic deletion on a real 3-node cluster and ZooKeeper, as Kafka's controller does it: while a
deletion is in flight no node auto-creates the topic (Kafka refuses a topic "marked for
deletion"), and a DeleteTopics answer means the deletion completed — no node serves the topic and
no auto-creation started meanwhile brings it back afterwards. librdkafka's 0033 saw the opposite:
a topic deleted at the end of one round auto-created again 0.4 s later, matched by the next
round's regex subscription (issue 30 item 7)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from coordinator.cluster.local_cluster import LocalCluster
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.coordinator.cluster.test_replication import _create, _zk
from tests.coordinator.cluster.test_replication import cluster as cluster  # noqa: F401  (the fixture)
from tests.wire_client import WireClient

TOPIC = "doomed"
#: How long after the answer the topic must stay gone: an auto-creation a node started during the
#: deletion lands within milliseconds (one ZooKeeper transaction), the controller's next pass
#: within a second.
AFTERWARDS_S = 3.0


def _metadata(client: WireClient, allow_auto: bool) -> Any:
    from kafka.protocol.metadata import MetadataRequest

    request = MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                              allow_auto_topic_creation=allow_auto, include_topic_authorized_operations=False)
    return client.request(ApiKey.METADATA, 9, request).topics[0]


def _ask_until_unknown(cluster: LocalCluster, broker: int, stop: threading.Event, answers: list[int]) -> None:
    """A client holding the topic (a producer, a consumer's regex subscription): it keeps asking
    ``broker`` for the topic's metadata with auto-creation on until it is told the topic is
    unknown — LEADER_NOT_AVAILABLE (an auto-creation pending) makes it ask again. ``stop`` bounds
    it when it is never told."""
    with WireClient(cluster.host, cluster.ports[broker - 1]) as client:
        while not stop.is_set():
            topic = _metadata(client, allow_auto=True)
            answers.append(topic.error_code)
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return


def test_a_deleted_topic_is_gone_from_every_node_when_deletetopics_answers_and_stays_gone(
        cluster: LocalCluster) -> None:  # noqa: F811
    from kafka.protocol.admin import DeleteTopicsRequest

    _create(cluster, TOPIC, 4, 3, {})
    zk = _zk(cluster)
    stop = threading.Event()
    answers: dict[int, list[int]] = {b: [] for b in (1, 2, 3)}
    askers = [threading.Thread(target=_ask_until_unknown, args=(cluster, b, stop, answers[b]), daemon=True)
              for b in (1, 2, 3)]
    try:
        for asker in askers:
            asker.start()
        time.sleep(0.3)  # every asker is going
        with WireClient(cluster.host, cluster.ports[0], timeout=30.0) as admin:
            response = admin.request(ApiKey.DELETE_TOPICS, 4, DeleteTopicsRequest(version=4, topic_names=[TOPIC],
                                                                                 timeout_ms=20000))
        assert [r.error_code for r in response.responses] == [ErrorCode.NONE], response
        deadline = time.monotonic() + 5.0
        for asker in askers:
            asker.join(max(deadline - time.monotonic(), 0.0))
        stop.set()
        # Every client was told the topic is unknown (not "being created") and stopped asking.
        assert all(a and a[-1] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for a in answers.values()), \
            {b: sorted(set(a)) for b, a in answers.items()}

        # The answer means no node serves the topic any more.
        for broker in (1, 2, 3):
            with WireClient(cluster.host, cluster.ports[broker - 1]) as client:
                topic = _metadata(client, allow_auto=False)
            assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not topic.partitions, (broker, topic)
        # Every node was asked throughout the deletion, and none brought the topic back since.
        assert all(len(a) > 10 for a in answers.values()), {b: len(a) for b, a in answers.items()}
        deadline = time.monotonic() + AFTERWARDS_S
        while time.monotonic() < deadline:
            assert zk.exists(f"/brokers/topics/{TOPIC}") is None, "the deleted topic came back"
            time.sleep(0.05)
        assert zk.get_children("/admin/delete_topics") == []
        # The controller's passes during the deletion all went through.
        for broker in (1, 2, 3):
            text = cluster.log_path(broker).read_text(errors="replace")
            assert "controller pass failed" not in text, broker
        # Once completed, the name is free again (Kafka: a new topic of that name may be created).
        _create(cluster, TOPIC, 1, 3, {})
        assert zk.exists(f"/brokers/topics/{TOPIC}") is not None
    finally:
        stop.set()
        zk.stop()
        zk.close()


def test_while_a_node_has_not_dropped_the_topic_its_name_is_neither_auto_created_nor_created(
        cluster: LocalCluster) -> None:  # noqa: F811
    """A node that cannot answer (SIGSTOPped, its session not yet expired) holds the deletion
    open: DeleteTopics answers REQUEST_TIMED_OUT, as Kafka's does when the deletion does not
    complete within the request's timeout, and meanwhile the other nodes answer Metadata with
    auto-creation UNKNOWN_TOPIC_OR_PARTITION and CreateTopics TOPIC_ALREADY_EXISTS ("marked for
    deletion"), creating nothing. Once the node is gone (or back), the deletion completes."""
    import signal

    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest

    from tests.coordinator.cluster.test_replication import SESSION_MS

    _create(cluster, TOPIC, 2, 3, {})
    zk = _zk(cluster)
    # Not the controller (it must carry the deletion out) and not node 1 (the one asked).
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    stopped = 3 if controller != 3 else 2
    try:
        cluster.procs[stopped].send_signal(signal.SIGSTOP)
        with WireClient(cluster.host, cluster.ports[0], timeout=30.0) as admin:
            started = time.monotonic()
            response = admin.request(ApiKey.DELETE_TOPICS, 4, DeleteTopicsRequest(version=4, topic_names=[TOPIC],
                                                                                 timeout_ms=500))
            assert [r.error_code for r in response.responses] == [ErrorCode.REQUEST_TIMED_OUT], response
            # The znodes go (the controller's first step), the marker stays.
            while zk.exists(f"/brokers/topics/{TOPIC}") is not None:
                assert time.monotonic() - started < 2.0, "the controller did not delete the topic's znodes"
                time.sleep(0.02)
            assert zk.exists(f"/admin/delete_topics/{TOPIC}") is not None
            for broker in (b for b in (1, 2, 3) if b != stopped):
                with WireClient(cluster.host, cluster.ports[broker - 1]) as client:
                    topic = _metadata(client, allow_auto=True)
                assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (broker, topic)
            create = CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1,
                                                        assignments=[], configs=[])
            created = admin.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(
                version=5, topics=[create], timeout_ms=5000, validate_only=False)).topics[0]
            assert created.error_code == ErrorCode.TOPIC_ALREADY_EXISTS, created
            assert "marked for deletion" in (created.error_message or ""), created
            # All of it within the stopped node's session: it was still live throughout.
            assert time.monotonic() - started < SESSION_MS / 1000, "too slow to test the window"
            assert zk.exists(f"/brokers/topics/{TOPIC}") is None
    finally:
        cluster.procs[stopped].send_signal(signal.SIGCONT)
    try:
        deadline = time.monotonic() + 30
        while zk.exists(f"/admin/delete_topics/{TOPIC}") is not None:
            assert time.monotonic() < deadline, "the deletion did not complete"
            time.sleep(0.1)
        assert zk.exists(f"/brokers/topics/{TOPIC}") is None
    finally:
        zk.stop()
        zk.close()
