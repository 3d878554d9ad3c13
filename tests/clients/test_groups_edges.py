"""Group edge cases through stock clients: a session timeout below group.min.session.timeout.ms
(Java: InvalidSessionTimeoutException), a second live consumer with the same group.instance.id
(the old one is fenced: FencedInstanceIdException, the new one takes over the assignment), and a
kafkajs member (protocol RoundRobinAssigner) joining a Java group (range): no common protocol ->
INCONSISTENT_GROUP_PROTOCOL for the newcomer, the existing member is not disturbed."""

from __future__ import annotations

import time

import pytest

from tests.clients.group_scenario import P, all_consumed, ctx, produce, start_member, uid, wait_stable, wait_until
from tests.clients.records_io import create_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

FAST = {"group.initial.rebalance.delay.ms": "0"}


def _setup(server, n: int = 240) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    topic, group = uid("grp-edge-t"), uid("grp-edge-g")
    create_topic(server.bootstrap, topic, P)
    produce(server.bootstrap, topic, 0, n)
    return topic, group


def test_groups_java_session_timeout_below_minimum(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(FAST)
    topic, group = _setup(server)
    m = start_member("java", "short", server.bootstrap, topic, group, "range", tmp_path, session_ms=3000)
    try:
        rc = m.bg.wait(40)
        err = "\n".join(m.bg.err_lines)
        assert rc not in (None, 0) and "InvalidSessionTimeoutException" in err, \
            f"JoinGroup with session.timeout.ms=3000 (< min 6000) should fail\n{ctx([m], server)}"
        assert not m.records(), ctx([m], server)
    finally:
        m.bg.stop()


def test_groups_java_duplicate_static_instance_is_fenced(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(FAST)
    topic, group = _setup(server)
    inst = f"{group}-dup"
    old = start_member("java", "old", server.bootstrap, topic, group, "range", tmp_path, instance=inst,
                       session_ms=20000)
    members = [old]
    try:
        assert wait_until(lambda: all_consumed(members, 240), 40) and wait_stable(members, 20), ctx(members, server)
        new = start_member("java", "new", server.bootstrap, topic, group, "range", tmp_path, instance=inst,
                           session_ms=20000)
        members.append(new)
        assert wait_until(lambda: new.assignment() == set(range(P)), 20), \
            f"the new member with the same group.instance.id did not get the assignment\n{ctx(members, server)}"
        rc = old.bg.wait(30)
        err = "\n".join(old.bg.err_lines)
        assert rc not in (None, 0) and "FencedInstanceIdException" in err, \
            f"the old member with the same group.instance.id was not fenced\n{ctx(members, server)}"
        produce(server.bootstrap, topic, 240, 120)
        assert wait_until(lambda: {(p, o) for p, o in new.records()} >= {(p, o) for p in range(P) for o in range(20, 30)},
                          30), ctx(members, server)
    finally:
        for m in members:
            m.bg.stop()


def test_groups_kafkajs_joining_java_group_has_no_common_protocol(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(FAST)
    topic, group = _setup(server)
    java = start_member("java", "java", server.bootstrap, topic, group, "range", tmp_path)
    members = [java]
    try:
        assert wait_until(lambda: all_consumed(members, 240), 40) and wait_stable(members, 20), ctx(members, server)
        mark = java.mark()
        js = start_member("kafkajs", "kafkajs", server.bootstrap, topic, group, "roundrobin", tmp_path)
        members.append(js)
        assert wait_until(lambda: any(ln.startswith(("CRASH", "FATAL")) for ln in js.bg.lines), 30), \
            f"kafkajs member joined a group it shares no protocol with\n{ctx(members, server)}"
        crash = next(ln for ln in js.bg.lines if ln.startswith(("CRASH", "FATAL")))
        assert "protocols are incompatible" in crash, crash
        assert js.assignment() is None and not js.records(), ctx(members, server)
        time.sleep(2)
        assert not [e for e in java.events()[mark:] if e[0] in ("A", "REV", "LOST")], \
            f"the Java member was disturbed by the refused join\n{ctx(members, server)}"
    finally:
        for m in members:
            m.bg.stop()


def test_groups_java_group_max_size(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """group.max.size=2: a third member's JoinGroup gets GROUP_MAX_SIZE_REACHED (Java:
    GroupMaxSizeReachedException, fatal); the two members keep their partitions."""
    server = server_factory({**FAST, "group.max.size": "2"})
    topic, group = _setup(server)
    members = [start_member("java", f"m{i}", server.bootstrap, topic, group, "range", tmp_path) for i in range(2)]
    try:
        assert wait_until(lambda: all_consumed(members, 240), 40) and wait_stable(members, 20), ctx(members, server)
        third = start_member("java", "m2", server.bootstrap, topic, group, "range", tmp_path)
        members.append(third)
        rc = third.bg.wait(40)
        err = "\n".join(third.bg.err_lines)
        assert rc not in (None, 0) and "GroupMaxSizeReachedException" in err, \
            f"a third member joined a group with group.max.size=2\n{ctx(members, server)}"
        assert wait_stable(members[:2], 20), ctx(members, server)
    finally:
        for m in members:
            m.bg.stop()


def test_groups_java_stopped_member_is_fenced(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SIGSTOP one of three members past its session timeout: the others take its partitions.
    SIGCONT: the zombie's commits with its old generation must be refused (no 'C' line before its
    next assignment), it rejoins, and the group ends with one owner per partition and every
    record consumed (duplicates only from the zombie)."""
    import os
    import signal

    server = server_factory(FAST)
    topic, group = _setup(server, 1200)
    members = [start_member("java", f"m{i}", server.bootstrap, topic, group, "range", tmp_path) for i in range(3)]
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 60) and wait_stable(members, 30), ctx(members, server)
        zombie, others = members[0], members[1:]
        os.killpg(zombie.bg.proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        produce(server.bootstrap, topic, 1200, 1200)
        ok = wait_until(lambda: sorted(p for m in others for p in (m.assignment() or ())) == list(range(P)), 15)
        assert ok, f"the others did not take the stopped member's partitions\n{ctx(members, server)}"
        took = time.monotonic() - t0
        assert took < 6 + 6, took
        mark = zombie.mark()
        os.killpg(zombie.bg.proc.pid, signal.SIGCONT)
        assert wait_stable(members, 40), f"no stable 3-member group after SIGCONT\n{ctx(members, server)}"
        after = zombie.events()[mark:]
        first_a = next((i for i, e in enumerate(after) if e[0] == "A"), len(after))
        stale = [e for e in after[:first_a] if e[0] == "C"]
        assert not stale, (f"OffsetCommit from the fenced member's old generation was accepted: {stale}\n"
                           f"{ctx(members, server)}")
        produce(server.bootstrap, topic, 2400, 1200)
        assert wait_until(lambda: all_consumed(members, 3600), 40), ctx(members, server)
    finally:
        for m in members:
            try:
                os.killpg(m.bg.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            m.bg.stop()
