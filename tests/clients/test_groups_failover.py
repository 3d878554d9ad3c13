"""What a group sees across a coordinator crash and at formation:

* A stable group of three Java members (dynamic, and static) survives a server SIGKILL and
  restart without a rebalance: the group is loaded from ``__consumer_offsets`` with its
  generation and members, the members' heartbeats (same member id and generation) are accepted,
  so no member sees a revocation or a new assignment (as on Kafka after a coordinator failover,
  when the members come back within their session timeout); records produced after the restart
  are consumed once.
* With the default ``group.initial.rebalance.delay.ms`` (3000 ms), three members started
  together all land in the first generation: each gets exactly one assignment, no revocation.
"""

from __future__ import annotations

import time

import pytest

from tests.clients.group_scenario import (
    P,
    all_consumed,
    check_exactly_once,
    ctx,
    produce,
    start_member,
    uid,
    wait_stable,
    wait_until,
)
from tests.clients.records_io import create_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(150)]


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_groups_java_no_rebalance_across_server_restart(server_factory, tmp_path, static) -> None:  # type: ignore[no-untyped-def]
    server = server_factory({"group.initial.rebalance.delay.ms": "0"})
    bs = server.bootstrap
    topic, group = uid("grp-fo-t"), uid("grp-fo-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, 1200)
    members = [start_member("java", f"m{i}", bs, topic, group, "range", tmp_path,
                            instance=f"{group}-i{i}" if static else "-", session_ms=15000) for i in range(3)]
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 60), ctx(members, server)
        assert wait_stable(members, 30), ctx(members, server)
        before = {m.name: m.assignment() for m in members}
        marks = {m.name: m.mark() for m in members}
        server.kill()
        time.sleep(1.0)
        server.start()
        produce(bs, topic, 1200, 1200)
        assert wait_until(lambda: all_consumed(members, 2400), 40), ctx(members, server)
        time.sleep(4)  # several heartbeat intervals after the restart
        moved = {m.name: [e for e in m.events()[marks[m.name]:] if e[0] in ("A", "REV", "LOST")] for m in members}
        assert not any(moved.values()), (f"members rebalanced after a coordinator restart within their session "
                                         f"timeout: {moved}\n{ctx(members, server)}")
        assert {m.name: m.assignment() for m in members} == before
        check_exactly_once(members, 2400, lambda p, o, who: False, ctx(members, server))
        if static:
            # The static-member mapping was loaded too: a member restarted with its instance id
            # takes its old place without a rebalance.
            victim = members[0]
            marks = {m.name: m.mark() for m in members[1:]}
            victim.kill()
            again = start_member("java", "m0-again", bs, topic, group, "range", tmp_path,
                                 instance=f"{group}-i0", session_ms=15000)
            members.append(again)
            assert wait_until(lambda: again.assignment() is not None, 15), ctx(members, server)
            assert again.assignment() == before[victim.name], (again.assignment(), before[victim.name])
            time.sleep(3)
            moved = {m.name: [e for e in m.events()[marks[m.name]:] if e[0] in ("A", "REV", "LOST")]
                     for m in members[1:3]}
            assert not any(moved.values()), (f"a static member restarted after the coordinator restart caused a "
                                             f"rebalance: {moved}\n{ctx(members, server)}")
    finally:
        for m in members:
            m.bg.stop()


def test_groups_initial_rebalance_delay_forms_one_generation(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory()  # default group.initial.rebalance.delay.ms=3000
    bs = server.bootstrap
    topic, group = uid("grp-init-t"), uid("grp-init-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, 600)
    members = [start_member("java", f"m{i}", bs, topic, group, "range", tmp_path) for i in range(3)]
    try:
        assert wait_until(lambda: all_consumed(members, 600), 60), ctx(members, server)
        assert wait_stable(members, 30), ctx(members, server)
        for m in members:
            evs = [e for e in m.events() if e[0] in ("A", "REV", "LOST")]
            assert len(evs) == 1 and evs[0][0] == "A", \
                f"{m.name}: {evs}: the members started together should share the first generation\n{ctx(members, server)}"
        check_exactly_once(members, 600, lambda p, o, who: False, ctx(members, server))
    finally:
        for m in members:
            m.bg.stop()


def test_groups_java_server_crash_during_rebalance(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two members are stable; a third starts and the server is SIGKILLed while it joins (the
    group is preparing or completing a rebalance). After the restart the three members converge
    on one owner per partition and consume later records once."""
    server = server_factory({"group.initial.rebalance.delay.ms": "0"})
    bs = server.bootstrap
    topic, group = uid("grp-cr-t"), uid("grp-cr-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, 1200)
    members = [start_member("java", f"m{i}", bs, topic, group, "range", tmp_path) for i in range(2)]
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 60), ctx(members, server)
        assert wait_stable(members, 30), ctx(members, server)
        third = start_member("java", "m2", bs, topic, group, "range", tmp_path)
        members.append(third)
        assert wait_until(lambda: "STARTED" in third.bg.lines, 20), ctx(members, server)
        time.sleep(0.4)
        server.kill()
        time.sleep(0.5)
        server.start()
        assert wait_stable(members, 40), f"no stable 3-member assignment after the crash\n{ctx(members, server)}"
        produce(bs, topic, 1200, 1200)
        assert wait_until(lambda: all_consumed(members, 2400), 40), ctx(members, server)
        check_exactly_once(members, 2400, lambda p, o, who: False, ctx(members, server))
    finally:
        for m in members:
            m.bg.stop()
