"""``groupcoord groups`` on a three-node cluster: groups spread over the nodes' coordinators are listed
(ListGroups to every node), described by their own coordinators (one batched request each) and their
log-end offsets read from each partition's leader."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from coordinator.groups_cli import run
from coordinator.tools.group_admin import GroupAdmin, GroupAdminError
from tests.coordinator.cluster.conftest import running_cluster, wait_for

pytestmark = pytest.mark.timeout(120)

GROUPS = [f"spread-{i:02d}" for i in range(12)]


def groups(bootstrap: str, *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert run(["--bootstrap-server", bootstrap, *argv], out, err) == 0, (out.getvalue(), err.getvalue())
    return out.getvalue()


def test_groups_on_every_coordinator(tmp_path: Path, zookeeper: object) -> None:
    with running_cluster(tmp_path, "offsets.topic.num.partitions=6", "offsets.topic.replication.factor=3") as cluster:
        bootstrap = cluster.bootstrap
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client fails its futures
        admin.create_topics([NewTopic("spread", 3, 3)], request_timeout=20)["spread"].result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for p in range(3):
            for _ in range(4 + p):
                producer.produce("spread", b"x", partition=p)
        assert producer.flush(30) == 0

        def committed_all() -> bool:
            try:
                with GroupAdmin(bootstrap, timeout_ms=2000) as admin:
                    return all(admin.alter_offsets(g, {("spread", i % 3): 1}) == {("spread", i % 3): 0}
                               for i, g in enumerate(GROUPS))
            except GroupAdminError:
                return False  # a coordinator still loading
        wait_for(committed_all, 60, "an admin commit for every group")

        assert set(groups(bootstrap, "--list").split()) == set(GROUPS)
        state = groups(bootstrap, "--describe", "--all-groups", "--state")
        rows = [line.split() for line in state.splitlines() if line.startswith("spread-")]
        assert [r[0] for r in rows] == GROUPS
        assert len({r[2] for r in rows}) > 1, state  # "(id)": the groups live on several coordinators
        offsets = groups(bootstrap, "--describe", "--all-groups")
        cells = {r[0]: r[1:6] for r in (line.split() for line in offsets.splitlines() if line.startswith("spread-"))}
        assert cells == {g: ["spread", str(i % 3), "1", str(4 + i % 3), str(3 + i % 3)] for i, g in enumerate(GROUPS)}
