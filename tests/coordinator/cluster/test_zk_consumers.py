"""ZooKeeper-era /consumers znodes: values parsed and written as Kafka 0.8.2–2.x did, bad ones named, writes atomic."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.cluster.zk_consumers import (
    ConsumerRegistration,
    TransactionTooLarge,
    ZkConsumerError,
    ZkConsumers,
    format_offset,
    ids_path,
    offset_path,
    owners_path,
    parse_offset,
    parse_registration,
)
from tests.coordinator.cluster.conftest import chroot_for


def test_paths_are_kafkas() -> None:
    assert offset_path("g", "t", 3) == "/consumers/g/offsets/t/3"
    assert ids_path("g") == "/consumers/g/ids"
    assert owners_path("g", "t") == "/consumers/g/owners/t"


def test_offset_is_a_plain_decimal() -> None:
    assert format_offset(286894308) == b"286894308"
    assert parse_offset("/p", b"286894308") == 286894308
    assert parse_offset("/p", b"-1") == -1
    assert parse_offset("/p", format_offset(2 ** 63 - 1)) == 2 ** 63 - 1


@pytest.mark.parametrize("bad", [b"", b"abc", b"1_000", b"+5", b"12.5", b"\xff", b"9223372036854775808",
                                 "\u0661".encode()])
def test_bad_offset_names_path_and_value(bad: bytes) -> None:
    with pytest.raises(ZkConsumerError) as info:
        parse_offset("/consumers/g/offsets/t/0", bad)
    assert "/consumers/g/offsets/t/0" in str(info.value)


def test_registration_as_kafka_08_writes_it() -> None:
    data = b'{"version":1,"subscription":{"t1":2},"pattern":"static","timestamp":"1700000000000"}'
    assert parse_registration("/consumers/g/ids/g_host-1-abcd", data) == ConsumerRegistration(
        "g_host-1-abcd", {"t1": 2}, "static", 1700000000000)


@pytest.mark.parametrize("bad", [b"{", b"[1]", b'{"subscription":{"t":"x"}}', b'{"timestamp":"soon"}',
                                 b'{"pattern":3}'])
def test_bad_registration_names_path(bad: bytes) -> None:
    with pytest.raises(ZkConsumerError, match="/consumers/g/ids/c1"):
        parse_registration("/consumers/g/ids/c1", bad)


@pytest.fixture
def consumers(zookeeper: LocalZooKeeper, zk_client: object, request: pytest.FixtureRequest) -> Iterator[ZkConsumers]:
    from kazoo.client import KazooClient

    chroot = chroot_for(request)
    zk_client.ensure_path(chroot)  # type: ignore[attr-defined]
    client = KazooClient(hosts=zookeeper.connect + chroot, timeout=10.0)
    client.start(timeout=10)
    yield ZkConsumers(client)
    client.stop()
    client.close()


def test_read_group_and_set_offsets_in_one_transaction(consumers: ZkConsumers) -> None:
    zk = consumers.client
    zk.create("/consumers/g/ids/c1", b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"5"}',
              makepath=True)
    zk.create("/consumers/g/ids/c2", b"not json", makepath=True)
    zk.create("/consumers/g/owners/t/0", b"c1-0", makepath=True)
    zk.create("/consumers/g/offsets/t/0", b"10", makepath=True)
    zk.create("/consumers/g/offsets/t/1", b"ten", makepath=True)
    zk.create("/consumers/g/offsets/t/x", b"3", makepath=True)

    group = consumers.read_group("g")
    assert group.members == [ConsumerRegistration("c1", {"t": 1}, "static", 5)]
    assert group.owners == {("t", 0): "c1-0"}
    assert group.offsets == {("t", 0): 10}
    assert len(group.errors) == 3
    assert any("/consumers/g/ids/c2" in e for e in group.errors)
    assert any("/consumers/g/offsets/t/1" in e and "ten" in e for e in group.errors)
    assert consumers.groups() == ["g"]

    # Set one existing znode and create new ones (parents too), all in one transaction.
    consumers.set_offsets("g", {("t", 0): 11, ("u", 2): 7})
    assert zk.get("/consumers/g/offsets/t/0")[0] == b"11"
    assert zk.get("/consumers/g/offsets/u/2")[0] == b"7"
    consumers.set_offset("h", "t", 0, 42)
    assert consumers.get_offset("h", "t", 0) == 42 and consumers.get_offset("h", "t", 1) is None
    assert consumers.offsets("h") == {("t", 0): 42}

    # A transaction that cannot commit writes nothing: ZooKeeper refuses a child of an ephemeral
    # znode, so the second create fails and the first is rolled back with it.
    zk.create("/consumers/e/offsets/t", b"", ephemeral=False, makepath=True)
    zk.create("/consumers/e/offsets/v", b"", ephemeral=True)
    with pytest.raises(ZkConsumerError, match="nothing written"):
        consumers.set_offsets("e", {("t", 0): 1, ("v", 0): 2})
    assert zk.exists("/consumers/e/offsets/t/0") is None

    # Several groups in one transaction: parents created inside it, so a failure leaves no empty group.
    with pytest.raises(ZkConsumerError, match="groups f, e failed, nothing written"):
        consumers.set_groups_offsets({"f": {("t", 0): 1}, "e": {("v", 0): 2}})
    assert zk.exists("/consumers/f") is None
    consumers.set_groups_offsets({"f": {("t", 0): 1}, "g": {("t", 0): 12, ("t", 5): 3}})
    assert consumers.offsets("f") == {("t", 0): 1}
    assert consumers.offsets("g") == {("t", 0): 12, ("t", 5): 3, ("u", 2): 7}
    with pytest.raises(TransactionTooLarge, match="2 offsets of 1 groups .* nothing written"):
        consumers.set_groups_offsets({"f": {("t", 0): 2, ("t", 1): 2}}, max_request_bytes=200)
    assert consumers.offsets("f") == {("t", 0): 1}


def test_mirror_groups_setting_names_and_prefixes() -> None:
    from coordinator.config import ConfigError, load_config, parse_group_patterns

    assert parse_group_patterns("") == (frozenset(), ())
    assert parse_group_patterns(" a, legacy-* ,b") == (frozenset({"a", "b"}), ("legacy-",))
    with pytest.raises(ValueError, match="only ends a prefix"):
        parse_group_patterns("a*b")
    with pytest.raises(ConfigError, match="offsets.zookeeper.mirror.groups"):
        load_config(None, ["offsets.zookeeper.mirror.groups=*x"])
    assert load_config(None, ["offsets.zookeeper.mirror.groups=a,legacy-*"])["offsets.zookeeper.mirror.groups"] \
        == "a,legacy-*"

    from coordinator.cluster.zk_offset_apis import ZkOffsetApis
    from coordinator.security.request_checks import NO_AUTHORIZER

    apis = ZkOffsetApis(ZkConsumers(None), lambda _t: 0, metadata_max_bytes=1, authorizer=NO_AUTHORIZER,
                        mirror_groups="a, legacy-*")
    assert [g for g in ("a", "ab", "legacy-", "legacy-x", "legacy") if apis.mirrors(g)] == ["a", "legacy-", "legacy-x"]


class _Acls:
    """An authorizer allowing only what ``allowed`` lists as (operation, type, name)."""

    enabled = True

    def __init__(self, *allowed: tuple[object, object, str]) -> None:
        self.allowed = set(allowed)

    def authorize(self, principal: str, host: str, operation: object, resource_type: object, name: str) -> bool:
        return (operation, resource_type, name) in self.allowed


class _Znodes:
    """ZkConsumers' offset calls over a dict (the v0 handlers' use of it, without a ZooKeeper)."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, str, int], int] = {}

    def set_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.offsets[(group, topic, partition)] = offset

    def get_offset(self, group: str, topic: str, partition: int) -> int | None:
        return self.offsets.get((group, topic, partition))


def test_v0_under_an_authorizer_checks_group_then_topic() -> None:
    """Kafka 0.9+'s order for v0 (KafkaApis): the group (READ to commit, DESCRIBE to fetch), then each topic."""
    import asyncio

    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

    from coordinator.cluster.zk_offset_apis import ZkOffsetApis
    from coordinator.context import RequestContext
    from coordinator.security.acl import AclOperation as Op
    from coordinator.security.acl import ResourceType as R
    from protocol.errors import ErrorCode

    znodes = _Znodes()
    acls = _Acls((Op.READ, R.GROUP, "g"), (Op.READ, R.TOPIC, "ok"), (Op.DESCRIBE, R.GROUP, "g"),
                 (Op.DESCRIBE, R.TOPIC, "ok"))
    apis = ZkOffsetApis(znodes, lambda _t: 1, metadata_max_bytes=10, authorizer=acls)  # type: ignore[arg-type]
    ctx = RequestContext(8, 0, 1, "c", "peer")
    CT = OffsetCommitRequest.OffsetCommitRequestTopic
    CP = CT.OffsetCommitRequestPartition

    def commit(group: str) -> dict[str, int]:
        request = OffsetCommitRequest(version=0, group_id=group, topics=[
            CT(name=t, partitions=[CP(partition_index=0, committed_offset=3, committed_metadata="")])
            for t in ("ok", "secret")])
        answer = asyncio.run(apis.offset_commit_v0(ctx, request))
        return {t.name: t.partitions[0].error_code for t in answer.topics}

    assert commit("g") == {"ok": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert commit("h") == {"ok": ErrorCode.GROUP_AUTHORIZATION_FAILED, "secret": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    assert znodes.offsets == {("g", "ok", 0): 3}

    fetch = OffsetFetchRequest(version=0, group_id="g", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=[0]) for t in ("ok", "secret")])
    answer = asyncio.run(apis.offset_fetch_v0(RequestContext(9, 0, 1, "c", "peer"), fetch))
    assert {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code) for t in answer.topics} == {
        "ok": (3, ErrorCode.NONE), "secret": (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)}


def _sized_offsets(size: int, chroot: str) -> dict[str, dict[tuple[str, int], int]]:
    """One group of 10 partitions whose all-create transaction is exactly ``size`` bytes: a long group name
    does the bulk (each of the 13 creates carries it), the offsets' digit counts the last bytes."""
    from coordinator.cluster.zk_consumers import estimate_transaction_bytes

    def offsets(name_len: int, extra_digits: int) -> dict[str, dict[tuple[str, int], int]]:
        values = {("t", p): 1 for p in range(10)}
        values[("t", 0)] = int("1" * (1 + extra_digits))
        return {"g" * name_len: values}

    base = estimate_transaction_bytes(offsets(1, 0), chroot=chroot)
    per_char = estimate_transaction_bytes(offsets(2, 0), chroot=chroot) - base  # the creates carrying the name
    name_len = 1 + (size - base) // per_char
    extra = size - estimate_transaction_bytes(offsets(name_len, 0), chroot=chroot)
    assert 0 <= extra < 18
    wanted = offsets(name_len, extra)
    assert estimate_transaction_bytes(wanted, chroot=chroot) == size
    return wanted


@pytest.mark.parametrize("chroot", ["", "/a/longer/chroot"])
def test_size_estimate_is_the_exact_size_of_the_request(chroot: str) -> None:
    """estimate_transaction_bytes (no ZooKeeper call) counts what kazoo serializes for an all-create import."""
    from kazoo.client import KazooClient

    from coordinator.cluster.zk_consumers import estimate_transaction_bytes, transaction_bytes

    client = KazooClient(hosts="127.0.0.1:1" + chroot)  # never started: only its transactions are built
    consumers = ZkConsumers(client)
    consumers._missing_parents = lambda path: [p for p in  # type: ignore[method-assign]
                                               ("/consumers", path.rsplit("/", 2)[0], path.rsplit("/", 1)[0], path)
                                               if p]
    wanted = {"billing": {("payments", 0): 286894308, ("payments", 1): 7}, "g2": {("t", 12): 0}}
    planned = consumers._plan({g: dict(o) for g, o in wanted.items()})
    assert transaction_bytes(planned) == estimate_transaction_bytes(wanted, chroot=chroot)


def test_the_size_limit_is_zookeepers_own(consumers: ZkConsumers, zookeeper: LocalZooKeeper) -> None:
    """A transaction of exactly MAX_TRANSACTION_BYTES is applied by ZooKeeper 3.8; one byte more is refused
    here before sending, and ZooKeeper itself drops the connection of that request (so the limit is not
    needlessly cautious, and not unsafe)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss

    from coordinator.cluster.zk_consumers import MAX_TRANSACTION_BYTES

    chroot = consumers.client.chroot
    fits = _sized_offsets(MAX_TRANSACTION_BYTES, chroot)
    consumers.set_groups_offsets(fits)
    (group, written), = fits.items()
    assert consumers.offsets(group) == written

    consumers.client.delete("/consumers", recursive=True)  # all creates again, /consumers included
    too_big = _sized_offsets(MAX_TRANSACTION_BYTES + 1, chroot)
    with pytest.raises(TransactionTooLarge, match=f"of {MAX_TRANSACTION_BYTES + 1} bytes, more than the "
                       f"{MAX_TRANSACTION_BYTES} one request may carry"):
        consumers.set_groups_offsets(too_big)
    with pytest.raises(TransactionTooLarge):
        consumers.check_fits(too_big)
    assert consumers.groups() == []

    raw = KazooClient(hosts=zookeeper.connect + chroot, timeout=10.0)
    raw.start(timeout=10)
    try:
        bypass = ZkConsumers(raw)
        bypass._refuse_if_too_large = lambda *a: None  # type: ignore[method-assign]
        with pytest.raises(ConnectionLoss):
            bypass.set_groups_offsets(too_big)
    finally:
        raw.stop()
        raw.close()
    assert consumers.groups() == []


def test_setting_existing_znodes_fits_more_than_creating_them(consumers: ZkConsumers) -> None:
    """Above the all-create bound the planned transaction's exact size decides: a set is 27 bytes smaller."""
    from coordinator.cluster.zk_consumers import estimate_transaction_bytes, transaction_bytes

    wanted = {"g": {("t", p): 1 for p in range(50)}}
    consumers.set_groups_offsets(wanted)
    bound = estimate_transaction_bytes(wanted, chroot=consumers.client.chroot)
    exact = transaction_bytes(consumers._plan(wanted))
    assert exact < bound
    consumers.set_groups_offsets({"g": {tp: 2 for tp in wanted["g"]}}, max_request_bytes=exact)
    assert set(consumers.offsets("g").values()) == {2}
    with pytest.raises(TransactionTooLarge):
        consumers.set_groups_offsets({"g": {tp: 3 for tp in wanted["g"]}}, max_request_bytes=exact - 1)
