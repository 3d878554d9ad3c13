"""A rolling upgrade of a classic consumer group to the KIP-848 ``consumer`` protocol and back,
with stock clients (issue 31, items 7 and 9): four Java 3.9.1 consumers of a classic group consume
a topic while a producer keeps producing; they are restarted one at a time with
``group.protocol=consumer`` and then one at a time back to the classic protocol.

The group is upgraded online when the first consumer-protocol member joins (the classic members
keep working inside the consumer group, their JoinGroup/SyncGroup answered from the server's
assignment) and downgraded when the last consumer-protocol member leaves
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol,
"Upgrade & Downgrade"). Checked throughout: no committed offset (sampled through OffsetFetch)
ever goes backwards; every produced record is consumed; a record consumed twice was committed
by at most one of its consumers (a re-delivery of what was not committed, never two owners
consuming a partition at once); the group type ListGroups v5 reports is classic, then consumer
from the first consumer-protocol member on, then classic again after the last one left; and once
the producer stopped the committed offsets reach the end offsets.
Java with cooperative-sticky and with range (eager), confluent-kafka (librdkafka 2.16) with range
(a librdkafka cooperative-sticky group is refused the upgrade, as by Kafka), on one node and on a
three-node cluster. Client behaviour the test works around or pins: tests/clients/FINDINGS.md,
"Rolling upgrade".
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from kafka.protocol.admin import ListGroupsRequest

from tests.clients.group_consumer_protocol import CONSUMER_PROTOCOL_SERVER
from tests.clients.group_scenario import (
    Member,
    P,
    all_consumed,
    ctx,
    produce,
    start_member,
    uid,
    wait_stable,
    wait_until,
)
from tests.clients.records_io import create_topic
from tests.wire_client import WireClient

pytestmark = [pytest.mark.clients, pytest.mark.timeout(300)]

MEMBERS = 4
#: the producer's batch (a multiple of P, so every partition's end offset is total / P)
BATCH = 4 * P


def list_group_type(bootstrap: str, group: str) -> str | None:
    """The group's type as ListGroups v5 reports it, asking every node (each lists the groups it
    coordinates); None when no node lists it."""
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        try:
            with WireClient(host, int(port), timeout=5) as client:
                response = client.request(16, 5, ListGroupsRequest(version=5, states_filter=[], types_filter=[]))
        except OSError:
            continue
        for g in response.groups:
            if g.group_id == group:
                return str(g.group_type)
    return None


class Producer(threading.Thread):
    """Produces ``BATCH`` records every ``pause`` seconds until stopped (record i on i % P)."""

    def __init__(self, bootstrap: str, topic: str, start: int, pause: float = 0.4) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.total, self.pause = bootstrap, topic, start, pause
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                produce(self.bootstrap, self.topic, self.total, BATCH)
                self.total += BATCH
                self.halt.wait(self.pause)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def stop(self) -> int:
        self.halt.set()
        self.join(60)
        assert not self.is_alive(), "the producer did not stop"
        assert self.error is None, f"the producer failed: {self.error!r}"
        return self.total


class Monitor(threading.Thread):
    """Samples the group's committed offsets (OffsetFetch through kafka-python's admin client)
    and its ListGroups v5 type every ``step`` seconds."""

    def __init__(self, bootstrap: str, group: str, step: float = 0.3) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.step = bootstrap, group, step
        self.halt = threading.Event()
        self.samples = 0
        self.backwards: list[str] = []
        self.last: dict[int, int] = {}
        self.types: list[str | None] = []  # consecutive duplicates folded

    def _offsets(self, admin) -> dict[int, int]:  # type: ignore[no-untyped-def]
        res = admin.list_group_offsets(self.group)[self.group]
        return {tp.partition: om.offset for tp, om in res.items() if om.offset >= 0}

    def run(self) -> None:
        from kafka import KafkaAdminClient

        admin = None
        while not self.halt.is_set():
            try:
                if admin is None:
                    admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
                got = self._offsets(admin)
            except Exception:  # noqa: BLE001 - a sample missed (e.g. coordinator loading); the next one counts
                if admin is not None:
                    admin.close()
                admin = None
                got = None
            if got is not None:
                self.samples += 1
                for p, o in got.items():
                    if o < self.last.get(p, -1):
                        self.backwards.append(f"partition {p}: {self.last[p]} -> {o}")
                    self.last[p] = max(o, self.last.get(p, -1))
            kind = list_group_type(self.bootstrap, self.group)
            if kind is not None and (not self.types or self.types[-1] != kind):
                self.types.append(kind)
            self.halt.wait(self.step)
        if admin is not None:
            admin.close()

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def committed_consumptions(members: Sequence[Member]) -> dict[tuple[int, int], list[tuple[str, bool]]]:
    """Every consumption of a record: (partition, offset) -> [(member, whether that member
    committed past it while it still owned the partition)]."""
    out: dict[tuple[int, int], list[tuple[str, bool]]] = {}
    for m in members:
        open_: dict[int, list[int]] = {}  # partition -> indexes into out[(p, o)] not yet committed
        for tag, rest in m.events():
            if tag == "R":
                p, o = map(int, rest.split())
                entries = out.setdefault((p, o), [])
                entries.append((m.name, False))
                open_.setdefault(p, []).append(o)
            elif tag == "C":
                p, c = map(int, rest.split())
                still = []
                for o in open_.get(p, []):
                    if o < c:
                        entries = out[(p, o)]
                        i = max(i for i, (n, done) in enumerate(entries) if n == m.name and not done)
                        entries[i] = (m.name, True)
                    else:
                        still.append(o)
                open_[p] = still
            elif tag in ("REV", "LOST"):
                for p in (int(x) for x in rest.split(",") if x.strip()):
                    open_.pop(p, None)
    return out


def check_consumed(members: Sequence[Member], total: int, why: Callable[[], str]) -> None:
    seen = committed_consumptions(members)
    want = {(p, o) for p in range(P) for o in range(total // P)}
    missing = sorted(want - set(seen))
    assert not missing, f"{len(missing)} records never consumed, e.g. {missing[:10]}\n{why()}"
    extra = sorted(set(seen) - want)
    assert not extra, f"consumed offsets that were never produced: {extra[:10]}\n{why()}"
    twice = {k: v for k, v in seen.items() if sum(done for _, done in v) > 1}
    assert not twice, (f"{len(twice)} records consumed and committed by two consumers (two owners at once, "
                       f"or a committed offset lost), e.g. {sorted(twice.items())[:10]}\n{why()}")
    redelivered = sum(1 for v in seen.values() if len(v) > 1)
    print(f"{total} records, {redelivered} re-delivered (consumed but not committed by a previous owner)")


def start(kind: str, name: str, bootstrap: str, topic: str, group: str, strategy: str, tmp: Path) -> Member:
    """A member; a Java consumer-protocol one seeks its new partitions to their committed offsets
    (GroupConsumer.java's "seek-committed": kafka-clients 3.9.1 can otherwise reset a partition
    assigned during a committed-offsets fetch to auto.offset.reset, KAFKA-17066, a client race
    the server cannot prevent: its OffsetFetch answers were right, and no fetch was even sent)."""
    seek = kind == "java" and strategy.startswith("consumer")
    return start_member(kind, name, bootstrap, topic, group, strategy, tmp, seek_committed=seek)


def run_rolling_upgrade(server, tmp: Path, kind: str, classic: str, modern: str = "consumer") -> None:  # type: ignore[no-untyped-def]
    bs = server.bootstrap
    topic, group = uid("roll-t"), uid("roll-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, BATCH)
    members: list[Member] = []
    live: list[Member] = []
    producer = Producer(bs, topic, BATCH)
    monitor = Monitor(bs, group)

    def why() -> str:
        return (f"group types seen {monitor.types}; live {[(m.name, m.assignment()) for m in live]}\n"
                f"{ctx(members, server)}")

    def settled(when: str) -> None:
        assert wait_stable(live, 45), f"{when}: assignments never settled to one owner per partition\n{why()}"

    def group_type_is(want: str, when: str) -> None:
        got: list[str | None] = [None]
        assert wait_until(lambda: (got.__setitem__(0, list_group_type(bs, group)) or got[0]) == want, 15, 0.3), \
            f"{when}: ListGroups v5 says the group is {got[0]!r}, want {want!r}\n{why()}"

    def replace(i: int, strategy: str, label: str) -> None:
        old = live[i]
        old.request_stop()
        assert old.bg.wait(30) is not None, f"{old.name} did not stop\n{why()}"
        new = start(kind, f"{label}{i}-{kind}", bs, topic, group, strategy, tmp)
        members.append(new)
        live[i] = new

    try:
        for i in range(MEMBERS):
            m = start(kind, f"classic{i}-{kind}", bs, topic, group, classic, tmp)
            members.append(m)
            live.append(m)
        settled("classic group")
        group_type_is("classic", "classic group")
        producer.start()
        monitor.start()

        # -------- upgrade: one member at a time speaks the consumer protocol
        for i in range(MEMBERS):
            replace(i, modern, "modern")
            settled(f"upgrade step {i + 1}")
            # the group is a consumer group from the first consumer-protocol member on
            group_type_is("consumer", f"upgrade step {i + 1}")

        # -------- downgrade: one member at a time back to the classic protocol
        for i in range(MEMBERS):
            old = live[i]
            old.request_stop()
            assert old.bg.wait(30) is not None, f"{old.name} did not stop\n{why()}"
            # the last consumer-protocol member gone, only classic members are left: classic again
            group_type_is("classic" if i == MEMBERS - 1 else "consumer", f"downgrade step {i + 1}, member left")
            new = start(kind, f"back{i}-{kind}", bs, topic, group, classic, tmp)
            members.append(new)
            live[i] = new
            settled(f"downgrade step {i + 1}")
        group_type_is("classic", "after the downgrade")

        total = producer.stop()
        assert wait_until(lambda: all_consumed(members, total), 60), f"not all {total} records consumed\n{why()}"
        for m in live:
            m.request_stop()
        for m in live:
            assert m.bg.wait(30) is not None, f"{m.name} did not stop\n{why()}"
        want = {p: total // P for p in range(P)}
        assert wait_until(lambda: monitor.last == want, 20, 0.3), \
            f"end: committed offsets {monitor.last}, want the end offsets {want}\n{why()}"
        monitor.stop()
        assert monitor.samples > 20, f"only {monitor.samples} OffsetFetch samples\n{why()}"
        assert not monitor.backwards, f"committed offsets went backwards: {monitor.backwards[:10]}\n{why()}"
        assert monitor.types == ["classic", "consumer", "classic"], \
            f"group types over the run {monitor.types}\n{why()}"
        check_consumed(members, total, why)
    finally:
        producer.halt.set()
        monitor.halt.set()
        for m in members:
            m.bg.stop()


@pytest.mark.parametrize("classic", ["cooperative-sticky", "range"])
def test_java_rolling_upgrade_and_downgrade(server_factory, tmp_path, classic) -> None:  # type: ignore[no-untyped-def]
    run_rolling_upgrade(server_factory(CONSUMER_PROTOCOL_SERVER), tmp_path, "java", classic)


def test_confluent_rolling_upgrade_and_downgrade(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """librdkafka with the range assignor. Not cooperative-sticky: a librdkafka leader copies each
    member's subscription user data into its assignment (rd_kafka_group_MemberState_consumer_write
    writes rkgm_userdata), and the sticky assignors' subscriptions carry user data, which Kafka's
    ConsumerGroup.fromClassicGroup refuses to convert ("userData from a custom assignor would be
    lost": the heartbeat gets GROUP_ID_NOT_FOUND, which librdkafka treats as fatal); see
    test_confluent_cooperative_sticky_group_is_not_upgraded."""
    run_rolling_upgrade(server_factory(CONSUMER_PROTOCOL_SERVER), tmp_path, "confluent", "range")


def test_confluent_cooperative_sticky_group_is_not_upgraded(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A librdkafka cooperative-sticky classic group past its first generation carries the sticky
    user data in its assignments: a consumer-protocol member is refused (GROUP_ID_NOT_FOUND, fatal for librdkafka)
    and the classic group goes on untouched."""
    server = server_factory(CONSUMER_PROTOCOL_SERVER)
    bs = server.bootstrap
    topic, group = uid("roll-cs-t"), uid("roll-cs-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, BATCH)
    members: list[Member] = []
    try:
        # Two generations: in the second the members' subscriptions carry their previous
        # assignment as sticky user data (in the first they may carry none, and the group upgrades).
        for i in range(2):
            members.append(start_member("confluent", f"classic{i}-confluent", bs, topic, group, "cooperative-sticky",
                                        tmp_path))
            assert wait_stable(members, 45), ctx(members, server)
        before = [m.assignment() for m in members]
        marks = [m.mark() for m in members]
        modern = start_member("confluent", "modern-confluent", bs, topic, group, "consumer", tmp_path)
        members.append(modern)
        assert wait_until(lambda: any(tag == "E" and "group id does not exist" in rest
                                      for tag, rest in modern.events()), 30), \
            f"the consumer-protocol member was not refused\n{ctx(members, server)}"
        assert "unsupported custom assignor is in use" in server.log_text(), ctx(members, server)
        assert list_group_type(bs, group) == "classic", ctx(members, server)
        assert modern.assignment() is None, ctx(members, server)
        produce(bs, topic, BATCH, BATCH)
        assert wait_until(lambda: all_consumed(members, 2 * BATCH), 30), ctx(members, server)
        for m, was, mark in zip(members, before, marks, strict=False):
            revoked = [e for e in m.events()[mark:] if e[0] in ("REV", "LOST")]
            assert not revoked and m.assignment() == was, f"{m.name}: {revoked} / {m.assignment()}\n{ctx(members, server)}"
    finally:
        for m in members:
            m.bg.stop()


class _ClusterServer:
    """What the scenario reads of a server, for a three-node cluster."""

    def __init__(self, cluster) -> None:  # type: ignore[no-untyped-def]
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def log_text(self) -> str:
        return "\n".join(f"[node {b}] {line}" for b in (1, 2, 3)
                         for line in self.cluster.log_path(b).read_text(errors="replace").splitlines()[-20:])


@pytest.mark.parametrize(("kind", "classic"), [("java", "cooperative-sticky"), ("confluent", "range")])
def test_rolling_upgrade_and_downgrade_on_a_cluster(tmp_path, kind, classic) -> None:  # type: ignore[no-untyped-def]
    """On three nodes the group's coordinator is the leader of its offsets partition, any node."""
    from tests.coordinator.cluster.conftest import running_cluster

    settings = [f"{k}={v}" for k, v in CONSUMER_PROTOCOL_SERVER.items()]
    with running_cluster(tmp_path / "cluster", "offsets.topic.num.partitions=3", *settings) as cluster:
        run_rolling_upgrade(_ClusterServer(cluster), tmp_path, kind, classic)
