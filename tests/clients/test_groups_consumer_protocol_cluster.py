"""KIP-848 consumer groups (``group.protocol=consumer``) with the Java consumer (kafka-clients
3.9.1) on a three-node cluster, where the group's coordinator is whichever node leads its
``__consumer_offsets`` partition: the two membership scenarios test_groups_consumer_protocol.py
runs on one node.

* A static member (``group.instance.id``) closes (a static leave, epoch -2, keeps its place for
  the session) and starts again with the same instance id: it gets its partitions back and the
  other member sees no revocation (group_consumer_protocol.run_static_restart_scenario).
* A member is SIGKILLed: it sends nothing more, the coordinator fences it when its session
  expires (``group.consumer.session.timeout.ms``) and the survivor takes its partitions without
  giving up any of its own; every record is consumed, twice only past the victim's last commit.

One cluster serves both (a module fixture); its session is ``SESSION_MS``, long enough for a JVM
to restart within it (the static case) and short enough to keep the kill case brief.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from tests.clients.group_consumer_protocol import CONSUMER_PROTOCOL_SERVER, run_static_restart_scenario
from tests.clients.group_scenario import (
    P,
    all_consumed,
    check_exactly_once,
    committed_offsets,
    ctx,
    produce,
    start_member,
    uid,
    wait_stable,
    wait_until,
)
from tests.clients.records_io import create_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

#: The consumer group session of this cluster.
SESSION_MS = 8000


class _ClusterServer:
    """What the scenarios read of a server, for a three-node cluster."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap

    def log_text(self) -> str:
        return "\n".join(f"[node {b}] {line}" for b in (1, 2, 3)
                         for line in self.cluster.log_path(b).read_text(errors="replace").splitlines()[-20:])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_ClusterServer]:
    from tests.coordinator.cluster.conftest import running_cluster

    settings = {**CONSUMER_PROTOCOL_SERVER, "group.consumer.session.timeout.ms": str(SESSION_MS)}
    with running_cluster(tmp_path_factory.mktemp("cg-cluster") / "cluster", "offsets.topic.num.partitions=3",
                         *[f"{k}={v}" for k, v in settings.items()]) as cluster:
        yield _ClusterServer(cluster)


def test_java_consumer_protocol_static_member_restart_on_a_cluster(server: _ClusterServer, tmp_path: Path) -> None:
    run_static_restart_scenario(server, tmp_path, "java", SESSION_MS)


def test_java_consumer_protocol_member_sigkilled_on_a_cluster(server: _ClusterServer, tmp_path: Path) -> None:
    bs = server.bootstrap
    topic, group = uid("kip848-kill-t"), uid("kip848-kill-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, 1200)
    members = [start_member("java", f"k{i}-java", bs, topic, group, "consumer", tmp_path) for i in range(2)]
    survivor, victim = members
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 60), ctx(members, server)
        assert wait_stable(members, 40), ctx(members, server)
        assert survivor.assignment() and victim.assignment(), ctx(members, server)
        # Everything consumed is committed first, so the takeover below measures the session.
        want = {p: 1200 // P for p in range(P)}
        assert wait_until(lambda: committed_offsets(bs, group) == want, 20, 0.5), ctx(members, server)
        kept = set(survivor.assignment() or ())
        victim_commits = dict(victim.commits())
        mark = survivor.mark()
        victim.kill()
        t0 = time.monotonic()
        assert wait_until(lambda: survivor.assignment() == set(range(P)), SESSION_MS / 1000 + 15, 0.05), \
            f"the survivor never got the killed member's partitions\n{ctx(members, server)}"
        took = time.monotonic() - t0
        print(f"takeover after SIGKILL on the cluster: {took:.1f} s")
        # Noticed only when the session expires (the victim's last heartbeat was at most a
        # heartbeat interval, 500 ms, before the kill).
        assert SESSION_MS / 1000 - 1.5 <= took <= SESSION_MS / 1000 + 6, \
            f"takeover after {took:.1f} s, session {SESSION_MS} ms\n{ctx(members, server)}"
        # No reassignment storm: the survivor gave up none of its partitions, it only gained.
        moved = [e for e in survivor.events()[mark:] if e[0] in ("REV", "LOST")]
        assert not moved and kept < set(range(P)), f"{survivor.name} saw {moved}\n{ctx(members, server)}"
        produce(bs, topic, 1200, 1200)
        assert wait_until(lambda: all_consumed(members, 2400), 40), ctx(members, server)

        def past_the_victims_commit(p: int, o: int, who: list[str]) -> bool:
            return len(who) == 2 and victim.name in who and o >= victim_commits.get(p, 0)

        check_exactly_once(members, 2400, past_the_victims_commit, ctx(members, server))
        survivor.request_stop()
        assert survivor.bg.wait(30) is not None, ctx(members, server)
        want = {p: 2400 // P for p in range(P)}
        assert wait_until(lambda: committed_offsets(bs, group) == want, 20, 0.5), \
            f"committed {committed_offsets(bs, group)}\n{ctx(members, server)}"
    finally:
        for m in members:
            m.bg.stop()
