"""Controller election and fencing against a real ZooKeeper, in process (kazoo sessions)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from coordinator.cluster.controller_election import ControllerElection, ControllerMoved, ControllerToken
from coordinator.cluster.zookeeper import ZooKeeper
from tests.coordinator.cluster.conftest import chroot_for, wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sessions(zookeeper, request: pytest.FixtureRequest) -> Iterator[Callable[[], ZooKeeper]]:
    made: list[ZooKeeper] = []
    connect = zookeeper.connect + chroot_for(request)

    def make() -> ZooKeeper:
        zk = ZooKeeper(connect, session_timeout_ms=2000, connection_timeout_ms=10000)
        zk.start()
        made.append(zk)
        return zk

    yield make
    for zk in made:
        try:
            zk.close()
        except Exception:
            pass


def test_one_of_three_wins_and_the_epoch_starts_at_one(sessions) -> None:  # type: ignore[no-untyped-def]
    elected: list[ControllerToken] = []
    nodes = [ControllerElection(sessions(), i, on_elected=elected.append) for i in (1, 2, 3)]
    for n in nodes:
        n.start()
    wait_for(lambda: elected, 10, "an election")
    time.sleep(0.3)  # the losers' watches have run by now too
    assert len(elected) == 1 and elected[0].epoch == 1
    assert [n.token for n in nodes if n.token] == elected
    data, _ = nodes[0].zk.client.get("/controller_epoch")
    assert data == b"1"


def test_when_the_controller_leaves_another_is_elected_with_the_next_epoch(sessions) -> None:  # type: ignore[no-untyped-def]
    a = ControllerElection(sessions(), 1)
    a.start()
    wait_for(lambda: a.token, 10, "a to win alone")
    b = ControllerElection(sessions(), 2)
    b.start()
    time.sleep(0.2)
    assert b.token is None
    a.zk.close()  # its session ends: /controller goes with it
    token = wait_for(lambda: b.token, 10, "b to take over")
    assert token.epoch == 2


def test_a_deposed_controllers_fenced_write_fails(sessions) -> None:  # type: ignore[no-untyped-def]
    resigned: list[ControllerToken] = []
    a = ControllerElection(sessions(), 1, on_resigned=resigned.append)
    a.start()
    old = wait_for(lambda: a.token, 10, "a to win")
    a.commit_fenced(old, lambda tx: tx.create("/fenced-1", b"a"))  # while it leads, it writes
    operator = sessions()
    b = ControllerElection(operator, 2)
    b.start()
    # /controller deleted behind a's back (as when its session expires while it is paused):
    # b wins epoch 2 before a has reacted.
    operator.client.delete("/controller")
    new = wait_for(lambda: b.token, 10, "b to win")
    assert new.epoch == old.epoch + 1
    with pytest.raises(ControllerMoved, match="epoch 1 of broker 1 is stale"):
        a.commit_fenced(old, lambda tx: tx.create("/fenced-2", b"a"))
    assert operator.client.exists("/fenced-2") is None
    b.commit_fenced(new, lambda tx: tx.create("/fenced-3", b"b"))
    wait_for(lambda: resigned == [old], 10, "a to notice /controller names b and resign")
    assert a.token is None


def test_a_non_fencing_error_is_raised_as_itself(sessions) -> None:  # type: ignore[no-untyped-def]
    from kazoo.exceptions import NodeExistsError

    a = ControllerElection(sessions(), 1)
    a.start()
    token = wait_for(lambda: a.token, 10, "a to win")
    a.commit_fenced(token, lambda tx: tx.create("/x", b""))
    with pytest.raises(NodeExistsError):
        a.commit_fenced(token, lambda tx: tx.create("/x", b""))
