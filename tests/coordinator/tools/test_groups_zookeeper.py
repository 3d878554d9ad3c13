"""``groupcoord groups --zookeeper``: Kafka 1.1's ZooKeeper mode against a real ZooKeeper and a one-node
cluster registered in it, with /consumers znodes written as Kafka 0.8's high-level consumer wrote them
(registration JSON under ids/, thread ids under owners/, plain decimal offsets under offsets/)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from coordinator.groups_cli import run
from coordinator.tools.zk_mode import NOTE, consumer_of
from tests.coordinator.cluster.conftest import wait_for

pytestmark = pytest.mark.timeout(120)

TOPIC = "zk-era"
CONSUMER = "legacy_host1-1700000000000-1a2b3c4d"


def groups(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def test_bootstrap_server_is_refused_beside_zookeeper() -> None:
    status, out, err = groups("--zookeeper", "127.0.0.1:1", "--bootstrap-server", "127.0.0.1:2", "--list")
    assert status == 1 and out == ""
    assert err.splitlines()[0] == "Option [bootstrap-server] is not valid with [zookeeper]."


def test_describe_needs_a_group_and_one_action() -> None:
    # Kafka 1.1: CommandLineUtils.checkRequiredArgs, and main's one-action rule counting --reset-offsets.
    assert groups("--zookeeper", "127.0.0.1:1", "--describe")[2].splitlines()[0] == \
        'Missing required argument "[group]"'
    assert groups("--zookeeper", "127.0.0.1:1", "--list", "--describe", "--group", "g")[2].splitlines()[0] == \
        "Command must include exactly one action: --list, --describe, --delete, --reset-offsets"


@pytest.mark.parametrize(("argv", "message"), [
    # 1.1's checkInvalidArgs wrote no space between "option" and the second option's quote.
    (("--list", "--group", "g"), 'Option "[group]" can\'t be used with option"[list]"'),
    (("--list", "--topic", "t"), 'Option "[topic]" can\'t be used with option"[list]"'),
    # joptsimple's availableUnless(zkConnectOpt) on KIP-175's views; options 1.1 did not have at all.
    (("--describe", "--group", "g", "--members"),
     "Option(s) [members] are unavailable given other options on the command line"),
    (("--describe", "--group", "g", "--offsets"),
     "Option(s) [offsets] are unavailable given other options on the command line"),
    (("--list", "--state"), "Option(s) [state] are unavailable given other options on the command line"),
    (("--describe", "--all-groups"), "all-groups is not a recognized option"),
    (("--list", "--type", "classic"), "type is not a recognized option"),
    # --reset-offsets passes 1.1's checks with --zookeeper (and fails when run): its own checks still apply.
    (("--reset-offsets", "--to-earliest", "--execute"), 'Missing required argument "[group]"'),
    (("--reset-offsets", "--group", "g", "--execute", "--dry-run"),
     "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
    (("--reset-offsets", "--group", "g", "--to-earliest", "--to-latest", "--execute"),
     'Option "[to-earliest]" can\'t be used with option"[to-latest]"'),
])
def test_option_errors_are_kafka_1_1s(argv: tuple[str, ...], message: str) -> None:
    status, out, err = groups("--zookeeper", "127.0.0.1:1", *argv)
    assert status == 1 and out == "" and err.splitlines()[0] == message


def test_consumer_id_is_the_thread_id_without_its_thread() -> None:
    assert consumer_of(f"{CONSUMER}-0") == CONSUMER
    assert consumer_of(f"{CONSUMER}-12") == CONSUMER


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.conftest import free_ports

    # http.listen: the node's /metrics shows the ZooKeeper-era groups too (coordinator/ops/zk_era_groups.py).
    local = LocalCluster(tmp_path_factory.mktemp("zkmode"), 1, free_ports(1), tick_time_ms=500,
                         settings=["http.listen=127.0.0.1:0", "lag.sample.interval.ms=100",
                                   # one node: the group's coordinator can answer (Kafka-stored offsets come first)
                                   "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=1"])
    local.start()
    try:
        admin = AdminClient({"bootstrap.servers": local.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)], request_timeout=20)[TOPIC].result(timeout=30)
        producer = Producer({"bootstrap.servers": local.bootstrap})
        for p, count in ((0, 10), (1, 4)):
            for _ in range(count):
                producer.produce(TOPIC, b"x", partition=p)
        assert producer.flush(30) == 0
        yield local
    finally:
        local.stop()


@pytest.fixture
def zk(cluster: LocalCluster) -> Iterator[Any]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.zookeeper.connect, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.delete("/consumers", recursive=True)
    client.stop()
    client.close()


def write_0_8_group(zk: Any, group: str, offsets: dict[int, bytes]) -> None:
    """What a 0.8 high-level consumer with offsets.storage=zookeeper left: its registration, the owner of
    partition 0 (thread 0), an offset per partition as written by commitOffsetToZooKeeper."""
    registration = {"version": 1, "subscription": {TOPIC: 1}, "pattern": "static", "timestamp": "1700000000000"}
    zk.create(f"/consumers/{group}/ids/{CONSUMER}", json.dumps(registration).encode(), makepath=True)
    zk.create(f"/consumers/{group}/owners/{TOPIC}/0", f"{CONSUMER}-0".encode(), makepath=True)
    for partition, value in offsets.items():
        zk.create(f"/consumers/{group}/offsets/{TOPIC}/{partition}", value, makepath=True)


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.startswith(TOPIC)]


def test_list_and_describe_show_the_lag(cluster: LocalCluster, zk: Any) -> None:
    write_0_8_group(zk, "legacy", {0: b"7", 1: b"4"})
    zk.create("/consumers/other/offsets", b"", makepath=True)
    connect = cluster.zookeeper.connect
    status, out, err = groups("--zookeeper", connect, "--list")
    assert status == 0 and sorted(out.split()) == ["legacy", "other"]
    assert err.splitlines()[0] == NOTE

    def described() -> list[list[str]] | None:
        status, out, err = groups("--zookeeper", connect, "--describe", "--group", "legacy")
        assert status == 0, (out, err)
        rows = _rows(out)
        return rows if rows and all(r[3] != "-" for r in rows) else None

    rows = wait_for(described, 30, "log end offsets from the registered broker")
    assert rows == [[TOPIC, "0", "7", "10", "3", CONSUMER], [TOPIC, "1", "4", "4", "0", "-"]]
    status, out, _ = groups("--zookeeper", connect, "--describe", "--group", "legacy")
    # Kafka 1.1's printOffsets: a blank line; TOPIC and CONSUMER-ID as wide as their longest value (15 at
    # least), PARTITION 10, the offsets and LAG 15; each line ends with a space after CONSUMER-ID.
    consumer = f"{CONSUMER:<35} "
    assert out == ("\n"
                   f"TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             {'CONSUMER-ID':<35} \n"
                   f"{TOPIC:<15} 0          7               10              3               {consumer}\n"
                   f"{TOPIC:<15} 1          4               4               0               {'-':<35} \n")

    status, out, _ = groups("--zookeeper", connect, "--describe", "--group", "legacy", "--output", "json")
    assert json.loads(out) == [{"group": "legacy", "storage": "zookeeper", "errors": [], "partitions": [
        {"topic": TOPIC, "partition": 0, "current_offset": 7, "log_end_offset": 10, "lag": 3, "consumer_id": CONSUMER},
        {"topic": TOPIC, "partition": 1, "current_offset": 4, "log_end_offset": 4, "lag": 0, "consumer_id": None}]}]


def test_a_group_that_is_not_there(cluster: LocalCluster, zk: Any) -> None:
    connect = cluster.zookeeper.connect
    # No /consumers at all: 1.1's getChildren("/consumers") failed, through main's catch-all.
    no_node = ("Error: Executing consumer group command failed due to "
               "org.apache.zookeeper.KeeperException$NoNodeException: KeeperErrorCode = NoNode for /consumers\n")
    assert zk.exists("/consumers") is None
    assert groups("--zookeeper", connect, "--describe", "--group", "absent")[:2] == (0, no_node)
    assert groups("--zookeeper", connect, "--list")[:2] == (0, no_node)
    zk.create("/consumers/other/offsets", b"", makepath=True)
    status, out, _ = groups("--zookeeper", connect, "--describe", "--group", "absent")
    assert status == 0 and out == "Error: The consumer group 'absent' does not exist.\n"


def test_a_group_with_nothing_to_show_prints_the_header_alone(cluster: LocalCluster, zk: Any) -> None:
    zk.create("/consumers/bare/ids", b"", makepath=True)  # a 0.8 consumer that registered once and left
    status, out, err = groups("--zookeeper", cluster.zookeeper.connect, "--describe", "--group", "bare")
    assert status == 0 and err == NOTE + "\n"
    assert out == ("\nTOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
                   "CONSUMER-ID     \n")


def test_a_rebalancing_group_shows_its_consumers_without_partitions(cluster: LocalCluster, zk: Any) -> None:
    """Registered consumers, no owner znodes yet (a rebalance under way): every partition with "-" as its consumer,
    a "missing offset data" line for a partition never committed, and a line per consumer (per topic it
    subscribes to) with only its id, as Kafka 1.1's ZkConsumerGroupService."""
    write_0_8_group(zk, "moving", {0: b"5"})
    zk.delete(f"/consumers/moving/owners/{TOPIC}/0")  # owners/zk-era stays: the topic is still the group's
    second = "legacy_host2-1700000000001-5e6f7a8b"
    zk.create(f"/consumers/moving/ids/{second}", zk.get(f"/consumers/moving/ids/{CONSUMER}")[0])
    connect = cluster.zookeeper.connect

    def described() -> str | None:
        status, out, _ = groups("--zookeeper", connect, "--describe", "--group", "moving")
        return out if status == 0 and f"{TOPIC:<15} 0          5               10 " in out else None

    out = wait_for(described, 30, "log end offsets from the registered broker")
    width = len(second)
    assert out.splitlines() == [
        f"Error: Could not fetch offset from zookeeper for group 'moving' partition '{TOPIC}-1' due to missing "
        "offset data in zookeeper.",
        "",
        f"TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             {'CONSUMER-ID':<{width}} ",
        f"{TOPIC:<15} 0          5               10              5               {'-':<{width}} ",
        f"{TOPIC:<15} 1          -               4               -               {'-':<{width}} ",
        f"-               -          -               -               -               {CONSUMER:<{width}} ",
        f"-               -          -               -               -               {second} ",
    ]


def test_an_offset_stored_in_kafka_is_shown_before_zookeepers(cluster: LocalCluster, zk: Any) -> None:
    """Kafka 1.1 fetched the group's offsets from its coordinator first and read ZooKeeper only for partitions
    without one (a group moving to Kafka storage by dual commit)."""
    from coordinator.tools.group_admin import GroupAdmin

    write_0_8_group(zk, "dual", {0: b"7", 1: b"2"})
    with GroupAdmin(cluster.bootstrap, timeout_ms=20000) as admin:
        assert admin.alter_offsets("dual", {(TOPIC, 0): 9}) == {(TOPIC, 0): 0}

    def described() -> list[list[str]] | None:
        rows = _rows(groups("--zookeeper", cluster.zookeeper.connect, "--describe", "--group", "dual")[1])
        return rows if rows and all(r[3] != "-" for r in rows) else None

    rows = wait_for(described, 30, "log end offsets from the registered broker")
    assert rows == [[TOPIC, "0", "9", "10", "1", CONSUMER], [TOPIC, "1", "2", "4", "2", "-"]]


def test_a_repeated_group_or_topic_fails_where_1_1_read_one(cluster: LocalCluster, zk: Any) -> None:
    # joptsimple's valueOf in 1.1's collectGroupOffsets and deleteGroups, through main's catch-all.
    connect = cluster.zookeeper.connect
    zk.create("/consumers/one/ids", b"", makepath=True)
    status, out, _ = groups("--zookeeper", connect, "--describe", "--group", "one", "--group", "two")
    assert (status, out) == (0, "Error: Executing consumer group command failed due to Found multiple arguments "
                                "for option group, but you asked for only one\n")
    status, out, _ = groups("--zookeeper", connect, "--delete", "--group", "one", "--topic", "a", "--topic", "b")
    assert out == ("Error: Executing consumer group command failed due to Found multiple arguments for option "
                   "topic, but you asked for only one\n") and zk.exists("/consumers/one/ids")
    status, out, _ = groups("--zookeeper", connect, "--describe", "--group", "one", "--group", "two",
                            "--output", "json")
    assert [g["group"] for g in json.loads(out)] == ["one", "two"]


def test_reset_offsets_is_refused_naming_the_zk_offsets_tool(cluster: LocalCluster, zk: Any) -> None:
    # 1.1 accepted it and failed with an UnsupportedOperationException without a message; we say why.
    status, out, err = groups("--zookeeper", cluster.zookeeper.connect, "--reset-offsets", "--group", "g",
                              "--to-earliest", "--topic", TOPIC, "--execute")
    assert (status, err) == (1, NOTE + "\n") and out.startswith("Error: --reset-offsets does not act on ZooKeeper-based")
    assert "zk-offsets import" in out and "zk-offsets migrate" in out
    status, out, err = groups("--zookeeper", cluster.zookeeper.connect, "--reset-offsets", "--group", "g",
                              "--to-earliest")
    assert err.splitlines()[0] == (  # 1.1's wording of the warning
        "WARN: In a future major release, the default behavior of this command will be to prompt the user before "
        "executing the reset rather than doing a dry run. You should add the --dry-run option explicitly if you are "
        "scripting this command and want to keep the current default behavior without prompting.")
    assert err.splitlines()[1] == NOTE and status == 1


def test_malformed_znodes_are_reported_by_path(cluster: LocalCluster, zk: Any) -> None:
    write_0_8_group(zk, "broken", {0: b"7", 1: b"not-a-number"})
    zk.set(f"/consumers/broken/ids/{CONSUMER}", b"{not json")
    zk.create("/brokers/ids/99", b"{bad ids json", makepath=True)
    try:
        status, out, err = groups("--zookeeper", cluster.zookeeper.connect, "--describe", "--group", "broken")
    finally:
        zk.delete("/brokers/ids/99")
    assert status == 0, (out, err)
    assert f"/consumers/broken/offsets/{TOPIC}/1" in err and "not-a-number" in err
    assert f"/consumers/broken/ids/{CONSUMER}" in err
    assert "/brokers/ids/99" in err
    rows = _rows(out)
    assert rows[0][:3] == [TOPIC, "0", "7"] and rows[1][:3] == [TOPIC, "1", "-"]


def test_delete_is_refused_while_a_consumer_is_registered(cluster: LocalCluster, zk: Any) -> None:
    write_0_8_group(zk, "active", {0: b"3"})
    connect = cluster.zookeeper.connect
    status, out, _ = groups("--zookeeper", connect, "--delete", "--group", "active")
    # Kafka 1.1 printed the refusal with its printError: "Error: " first, on stdout.
    assert status == 0 and out.strip() == \
        "Error: Delete for group 'active' failed because its consumers are still active."
    assert zk.exists(f"/consumers/active/offsets/{TOPIC}/0") is not None
    zk.delete(f"/consumers/active/ids/{CONSUMER}")  # the consumer's ephemeral registration is gone
    status, out, _ = groups("--zookeeper", connect, "--delete", "--group", "active")
    assert out.strip() == "Deleted all consumer group information for group 'active' in zookeeper."
    assert zk.exists("/consumers/active") is None


def test_delete_of_one_topic_of_a_group_is_refused_while_a_consumer_is_registered(cluster: LocalCluster,
                                                                                  zk: Any) -> None:
    """Kafka 1.1's --delete --group G --topic T (deleteConsumerGroupInfoForTopicInZK): the group's owners and
    offsets of that topic only; refused while a consumer is registered; the whole group when it is the only
    topic the group owns partitions of."""
    write_0_8_group(zk, "two-topics", {0: b"3", 1: b"4"})
    zk.create("/consumers/two-topics/offsets/other/0", b"9", makepath=True)
    connect = cluster.zookeeper.connect
    args = ("--zookeeper", connect, "--delete", "--group", "two-topics", "--topic", "other")
    status, out, err = groups(*args)
    assert status == 0 and out.strip() == \
        "Error: Delete for group 'two-topics' topic 'other' failed because its consumers are still active."
    assert zk.exists("/consumers/two-topics/offsets/other/0") is not None
    zk.delete(f"/consumers/two-topics/ids/{CONSUMER}")
    zk.delete(f"/consumers/two-topics/owners/{TOPIC}", recursive=True)  # ephemerals gone with the consumer
    status, out, _ = groups(*args)
    assert status == 0 and out.strip() == \
        "Deleted consumer group information for group 'two-topics' topic 'other' in zookeeper."
    assert zk.exists("/consumers/two-topics/offsets/other") is None
    assert zk.get(f"/consumers/two-topics/offsets/{TOPIC}/1")[0] == b"4"  # the other topic untouched

    # The only topic it owns partitions of: the whole group goes (an owner left by a consumer that died).
    zk.create(f"/consumers/two-topics/owners/{TOPIC}/0", b"gone-0", makepath=True)
    status, out, _ = groups("--zookeeper", connect, "--delete", "--group", "two-topics", "--topic", TOPIC)
    assert out.strip() == f"Deleted consumer group information for group 'two-topics' topic '{TOPIC}' in zookeeper."
    assert zk.exists("/consumers/two-topics") is None

    # --topic alone: every inactive group with offsets of the topic.
    write_0_8_group(zk, "busy", {0: b"1"})
    zk.create(f"/consumers/idle/offsets/{TOPIC}/0", b"2", makepath=True)
    zk.create("/consumers/idle/offsets/kept/0", b"5", makepath=True)
    zk.create("/consumers/idle/ids", b"")  # its consumer registered once and left
    status, out, _ = groups("--zookeeper", connect, "--delete", "--topic", TOPIC)
    assert out.strip() == ("Deleted consumer group information for all inactive consumer groups for topic "
                           f"'{TOPIC}' in zookeeper.")
    assert zk.exists(f"/consumers/idle/offsets/{TOPIC}") is None and zk.exists("/consumers/idle/offsets/kept/0")
    assert zk.exists(f"/consumers/busy/offsets/{TOPIC}/0") is not None

    # A topic name Kafka would not take: its Topic.validate error, through the command's catch-all.
    status, out, _ = groups("--zookeeper", connect, "--delete", "--group", "idle", "--topic", "bad/name")
    assert status == 0 and out.strip().startswith("Error: Executing consumer group command failed due to Topic name")
    assert zk.exists("/consumers/idle/offsets/kept/0") is not None


def test_delete_of_a_group_without_ids(cluster: LocalCluster, zk: Any) -> None:
    """Kafka 1.1 read /consumers/G/ids to see whether the group was active: without that znode (a group that only
    ever had offsets written, or none at all) each delete said the group does not exist, and --delete --topic
    stopped at such a group with ZooKeeper's NoNode."""
    zk.create(f"/consumers/offsets-only/offsets/{TOPIC}/0", b"3", makepath=True)
    connect = cluster.zookeeper.connect
    for group in ("offsets-only", "absent"):
        status, out, _ = groups("--zookeeper", connect, "--delete", "--group", group)
        assert status == 0 and out == f"Error: Delete for group '{group}' failed because group does not exist.\n"
        status, out, _ = groups("--zookeeper", connect, "--delete", "--group", group, "--topic", TOPIC)
        assert out == f"Error: Delete for group '{group}' topic '{TOPIC}' failed because group does not exist.\n"
    assert zk.exists(f"/consumers/offsets-only/offsets/{TOPIC}/0") is not None
    status, out, _ = groups("--zookeeper", connect, "--delete", "--topic", TOPIC)
    assert status == 0 and out == (
        "Error: Executing consumer group command failed due to org.apache.zookeeper.KeeperException$NoNodeException: "
        "KeeperErrorCode = NoNode for /consumers/offsets-only/ids\n")
    assert zk.exists(f"/consumers/offsets-only/offsets/{TOPIC}/0") is not None
    zk.create("/consumers/never-committed/ids", b"", makepath=True)
    zk.delete("/consumers/offsets-only", recursive=True)
    status, out, _ = groups("--zookeeper", connect, "--delete", "--topic", TOPIC)
    assert out.endswith("KeeperErrorCode = NoNode for /consumers/never-committed/offsets\n")


def test_delete_needs_a_group_or_a_topic_and_the_topic_only_goes_with_delete() -> None:
    assert groups("--zookeeper", "127.0.0.1:1", "--delete")[2].startswith(
        "Option [delete] either takes [group], [topic], or both")
    assert groups("--zookeeper", "127.0.0.1:1", "--describe", "--group", "g", "--topic", "t")[2].splitlines()[0] == \
        'Option "[topic]" can\'t be used with option"[describe]"'


def test_a_chroot_in_the_connect_string_is_where_consumers_are_read(cluster: LocalCluster, zk: Any) -> None:
    zk.create("/chrooted/consumers/inside/offsets", b"", makepath=True)
    try:
        status, out, _ = groups("--zookeeper", cluster.zookeeper.connect + "/chrooted", "--list")
    finally:
        zk.delete("/chrooted", recursive=True)
    assert status == 0 and out.split() == ["inside"]


def test_an_unreachable_zookeeper_is_an_error_naming_it() -> None:
    from tests.conftest import free_port

    # Kafka 1.1 died with zkclient's ZkTimeoutException, status 1; a line naming the connect string instead.
    connect = f"127.0.0.1:{free_port()}"
    status, out, err = groups("--zookeeper", connect, "--list", "--timeout", "500")
    assert status == 1 and out == ""
    assert err.splitlines() == [NOTE, f"groupcoord groups: cannot connect to ZooKeeper at {connect} within 500 ms"]


def test_the_nodes_metrics_show_the_zookeeper_era_group_lag(cluster: LocalCluster, zk: Any) -> None:
    import re
    import urllib.request

    write_0_8_group(zk, "scraped", {0: b"6"})
    log = cluster.log_path(1)
    port = int(wait_for(lambda: re.search(r"http_listen=\S+:(\d+)", log.read_text(errors="replace")), 30,
                        "the node's http listener").group(1))
    line = (f'kafka_consumergroup_group_lag{{cluster_name="{{}}",group="scraped",topic="{TOPIC}",partition="0",'
            f'member_host="unknown",consumer_id="{CONSUMER}",client_id="unknown"}} 4')

    def scraped() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            body = answer.read().decode()
        return any(re.fullmatch(re.escape(line).replace(re.escape("{}"), '[^"]*'), text)
                   for text in body.splitlines())
    wait_for(scraped, 30, "the ZooKeeper-era group's lag in /metrics")
