"""The ZooKeeper-era groups sampler of the ops wing against a real ZooKeeper: groups under /consumers as
Kafka 0.8's high-level consumer wrote them are read off the event loop and refreshed on the interval; a
malformed znode is an error naming its path, never a failed read."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.ops.zk_era_groups import ZkEraGroups

pytestmark = pytest.mark.timeout(60)

CONSUMER = "old_host-1700000000000-0badcafe"


@pytest.fixture
def zk(zookeeper: LocalZooKeeper, request: pytest.FixtureRequest) -> Iterator[Any]:
    from kazoo.client import KazooClient

    from tests.coordinator.cluster.conftest import chroot_for

    root = KazooClient(hosts=zookeeper.connect, timeout=10.0)
    root.start(timeout=10)
    chroot = chroot_for(request)
    root.ensure_path(chroot)
    client = KazooClient(hosts=zookeeper.connect + chroot, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()
    root.delete(chroot, recursive=True)
    root.stop()
    root.close()


def _write(zk: Any, group: str, offset: bytes) -> None:
    registration = {"version": 1, "subscription": {"t": 1}, "pattern": "static", "timestamp": "1700000000000"}
    zk.create(f"/consumers/{group}/ids/{CONSUMER}", json.dumps(registration).encode(), makepath=True)
    zk.create(f"/consumers/{group}/owners/t/0", f"{CONSUMER}-0".encode(), makepath=True)
    zk.create(f"/consumers/{group}/offsets/t/0", offset, makepath=True)


def test_reads_every_group_and_reports_malformed_znodes(zk: Any) -> None:
    _write(zk, "good", b"42")
    _write(zk, "bad", b"forty-two")
    groups = ZkEraGroups(zk)
    asyncio.run(groups.sample())
    assert [g.group for g in groups.groups] == ["bad", "good"]
    good = groups.groups[1]
    assert good.offsets == {("t", 0): 42} and good.owners == {("t", 0): f"{CONSUMER}-0"}
    assert [m.consumer_id for m in good.members] == [CONSUMER]
    assert groups.groups[0].offsets == {}
    assert len(groups.errors) == 1 and "/consumers/bad/offsets/t/0" in groups.errors[0]


def test_refreshes_on_the_interval_and_keeps_the_last_read_when_zookeeper_fails(zk: Any) -> None:
    async def scenario() -> None:
        groups = ZkEraGroups(zk, interval_ms=100)
        groups.start()
        try:
            while groups.reads == 0:
                await asyncio.sleep(0.01)
            assert groups.groups == []
            _write(zk, "later", b"7")
            while not groups.groups:
                await asyncio.sleep(0.01)
            assert groups.groups[0].offsets == {("t", 0): 7}
        finally:
            await groups.stop()
        zk.stop()  # no session: a read fails as a whole
        reads = groups.reads
        await groups.sample()
        assert groups.reads == reads and groups.groups[0].group == "later"

    asyncio.run(scenario())


def test_zookeeper_era_groups_in_kafka_lag_exporters_families_for_led_partitions() -> None:
    from types import SimpleNamespace

    from coordinator.cluster.zk_consumers import ZkGroup
    from coordinator.ops.metrics_lag import LagExposition
    from tests.coordinator.ops.fakes import FakeLag, FakeView, make_ctx, partition_lag

    class LeadingView(FakeView):
        def led_partition_offsets(self) -> dict[tuple[str, int], tuple[int, int]] | None:
            return {("t", 0): (50, 0), ("kafka-topic", 0): (9, 0)}  # ("t", 1) is led by another node

    old = ZkGroup("old-group", owners={("t", 0): f"{CONSUMER}-3"}, offsets={("t", 0): 45, ("t", 1): 5})
    ctx = make_ctx(view=LeadingView(), lag=FakeLag([partition_lag("new-group", "kafka-topic", 0, 4, 9)]))
    ctx.zk_era = SimpleNamespace(groups=[old])
    exposition = LagExposition(ctx)
    text = asyncio.run(exposition.text())
    labels = (f'cluster_name="cluster-A",group="old-group",topic="t",partition="0",member_host="unknown",'
              f'consumer_id="{CONSUMER}",client_id="unknown"')
    assert f"kafka_consumergroup_group_lag{{{labels}}} 5\n" in text
    assert f"kafka_consumergroup_group_offset{{{labels}}} 45\n" in text
    assert 'group="old-group",topic="t",partition="1"' not in text  # not led here: another node's series
    assert 'kafka_consumergroup_group_sum_lag{cluster_name="cluster-A",group="old-group"} 5\n' in text
    assert 'kafka_consumergroup_group_lag{cluster_name="cluster-A",group="new-group",topic="kafka-topic"' in text
    # A new read of /consumers is a new list: the next scrape renders it.
    ctx.zk_era.groups = [ZkGroup("old-group", offsets={("t", 0): 50})]
    assert 'kafka_consumergroup_group_sum_lag{cluster_name="cluster-A",group="old-group"} 0\n' in \
        asyncio.run(exposition.text())


def test_a_zookeeper_era_group_named_like_a_kafka_group_is_one_group_in_metrics() -> None:
    """Mid-migration the group has offsets in both storages: one series per partition, Kafka's offset where
    Kafka has one, ZooKeeper's for the others (Kafka 1.1's kafka-consumer-groups); one set of group sums."""
    from types import SimpleNamespace

    from coordinator.cluster.zk_consumers import ZkGroup
    from coordinator.ops.metrics_lag import LagExposition
    from tests.coordinator.ops.fakes import FakeLag, FakeView, make_ctx, partition_lag

    class LeadingView(FakeView):
        def led_partition_offsets(self) -> dict[tuple[str, int], tuple[int, int]] | None:
            return {("t", 0): (50, 0), ("t", 1): (10, 0), ("u", 0): (7, 0)}

    kafka = [partition_lag("aaa", "u", 0, 7, 7), partition_lag("billing", "t", 0, 40, 50, member_id="m-1"),
             partition_lag("zzz", "u", 0, 6, 7)]
    zk_billing = ZkGroup("billing", offsets={("t", 0): 30, ("t", 1): 5})
    zk_only = ZkGroup("old-only", offsets={("u", 0): 2})
    ctx = make_ctx(view=LeadingView(), lag=FakeLag(kafka))
    ctx.zk_era = SimpleNamespace(groups=[zk_billing, zk_only])
    text = asyncio.run(LagExposition(ctx).text())
    lags = [line for line in text.splitlines() if line.startswith("kafka_consumergroup_group_lag{")]
    billing = [line for line in lags if 'group="billing"' in line]
    assert billing == [
        'kafka_consumergroup_group_lag{cluster_name="cluster-A",group="billing",topic="t",partition="0",'
        'member_host="unknown",consumer_id="m-1",client_id="unknown"} 10',
        'kafka_consumergroup_group_lag{cluster_name="cluster-A",group="billing",topic="t",partition="1",'
        'member_host="unknown",consumer_id="unknown",client_id="unknown"} 5']
    assert text.count('kafka_consumergroup_group_sum_lag{cluster_name="cluster-A",group="billing"}') == 1
    assert 'kafka_consumergroup_group_sum_lag{cluster_name="cluster-A",group="billing"} 15\n' in text
    assert 'kafka_consumergroup_group_sum_lag{cluster_name="cluster-A",group="old-only"} 5\n' in text
    assert [line.split('group="')[1].split('"')[0] for line in lags] == ["aaa", "billing", "billing", "zzz",
                                                                        "old-only"]
    # No series twice: each line's labels are its own.
    assert len({line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}) == \
        len([line for line in text.splitlines() if not line.startswith("#")])


def test_dashboard_lists_zookeeper_era_groups_and_their_malformed_znodes() -> None:
    from types import SimpleNamespace

    from coordinator.cluster.zk_consumers import ConsumerRegistration, ZkGroup
    from coordinator.ops.dashboard.pages import groups_page
    from coordinator.ops.dashboard.rows import ZOOKEEPER_ERA, group_rows, zk_era_errors
    from tests.coordinator.ops.fakes import FakeView, make_ctx

    class LeadingView(FakeView):
        def led_partition_offsets(self) -> dict[tuple[str, int], tuple[int, int]] | None:
            return {("t", 0): (50, 0), ("t", 1): (10, 0)}

    member = ConsumerRegistration(CONSUMER, {"t": 1}, "static", 1700000000000)
    live = ZkGroup("live", members=[member], owners={("t", 0): f"{CONSUMER}-0"},
                   offsets={("t", 0): 45, ("t", 1): 8})
    broken = ZkGroup("broken", errors=["/consumers/broken/offsets/t/0: 'x' is not an offset"])
    ctx = make_ctx(view=LeadingView())
    ctx.zk_era = SimpleNamespace(groups=[broken, live], errors=broken.errors)
    rows = {r.group_id: r for r in group_rows(ctx)}
    assert rows["live"].protocol_type == ZOOKEEPER_ERA and rows["live"].state == "Stable"
    assert rows["live"].lag == 7 and rows["live"].members == 1 and rows["live"].partitions == 2
    assert rows["broken"].state == "Empty" and rows["broken"].lag is None
    html = groups_page(group_rows(ctx), zk_era_errors(ctx))
    assert ZOOKEEPER_ERA in html and "/consumers/broken/offsets/t/0" in html
    assert 'href="/groups/live"' not in html  # no page of its own
