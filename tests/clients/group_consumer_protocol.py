"""KIP-848 scenarios for the group tests (``group.protocol=consumer``): stock-client members
(``java/GroupConsumer.java``, ``group_member.py`` for confluent-kafka) whose assignment the
server computes, checked through the lines they print (group_scenario.py's protocol).

The server of these tests shortens the consumer group session to ``SESSION_MS`` (Kafka's
``group.consumer.session.timeout.ms`` bounds allow it once the minimum is lowered) and the
heartbeat interval to 500 ms, so a member killed without leaving is fenced in seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.clients.group_scenario import (
    Member,
    P,
    all_consumed,
    check_exactly_once,
    committed_offsets,
    ctx,
    produce,
    stable,
    start_member,
    uid,
    wait_stable,
    wait_until,
)
from tests.clients.records_io import create_topic

SESSION_MS = 6000
#: Server settings of the KIP-848 tests: a short session and heartbeat (the minimums lowered to
#: admit them), and no initial rebalance delay for the classic protocol the clients look up with.
CONSUMER_PROTOCOL_SERVER = {
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}


def _commits_cover(bs: str, group: str, total: int, members: list[Member], server: object, when: str) -> None:
    want = {p: total // P for p in range(P)}
    got: dict[int, int] = {}
    assert wait_until(lambda: (got.update(committed_offsets(bs, group)) or got) == want, 20, 0.5), \
        f"{when}: OffsetFetch {got}, want {want}\n{ctx(members, server)}"


def _settled(members: list[Member], server: object, when: str, timeout: float = 40) -> None:
    assert wait_stable(members, timeout), (f"{when}: assignments never settled to one owner per partition "
                                           f"{[(m.name, m.assignment()) for m in members]}\n{ctx(members, server)}")


def run_scale_scenario(server, tmp: Path, kind: str, strategy: str = "consumer", *,  # type: ignore[no-untyped-def]
                       kill_phase: bool = True, batch: int = 1200) -> None:
    """One member consumes and commits everything; a second joins and the partitions split with
    no record consumed twice (a partition moves only once its owner revoked it, committing
    first); the second leaves and the first takes everything back; then (``kill_phase``) a third
    joins and is SIGKILLed, and the first gets its partitions once its session expired."""
    bs = server.bootstrap
    topic, group = uid("kip848-t"), uid("kip848-g")
    create_topic(bs, topic, P)
    total = batch
    produce(bs, topic, 0, batch)
    first = start_member(kind, f"a-{kind}", bs, topic, group, strategy, tmp)
    members = [first]
    try:
        # -------- one member: everything, once, committed
        assert wait_until(lambda: all_consumed(members, total), 60), \
            f"one member: not all {total} records consumed within 60 s\n{ctx(members, server)}"
        _settled(members, server, "one member")
        assert first.assignment() == set(range(P))
        check_exactly_once(members, total, lambda p, o, who: False, ctx(members, server))
        _commits_cover(bs, group, total, members, server, "one member")

        # -------- a second member joins: the partitions split, none consumed twice
        second = start_member(kind, f"b-{kind}", bs, topic, group, strategy, tmp)
        members.append(second)
        _settled(members, server, "two members")
        assert first.assignment() and second.assignment(), ctx(members, server)
        produce(bs, topic, total, batch)
        total += batch
        assert wait_until(lambda: all_consumed(members, total), 40), \
            f"two members: not all {total} records consumed\n{ctx(members, server)}"
        check_exactly_once(members, total, lambda p, o, who: False, ctx(members, server))
        _commits_cover(bs, group, total, members, server, "two members")

        # -------- the second leaves (close: a leave heartbeat): the first takes everything
        second.request_stop()
        assert second.bg.wait(30) is not None, f"{second.name} did not stop\n{ctx(members, server)}"
        assert wait_until(lambda: first.assignment() == set(range(P)), 20), \
            f"after a leave: the remaining member has {first.assignment()}\n{ctx(members, server)}"
        produce(bs, topic, total, batch)
        total += batch
        assert wait_until(lambda: all_consumed(members, total), 40), \
            f"after a leave: not all {total} records consumed\n{ctx(members, server)}"
        check_exactly_once(members, total, lambda p, o, who: False, ctx(members, server))

        if kill_phase:
            # -------- a third joins and is SIGKILLed: fenced after the session timeout
            third = start_member(kind, f"c-{kind}", bs, topic, group, strategy, tmp)
            members.append(third)
            live = [first, third]
            _settled(live, server, "a third member")
            assert third.assignment(), ctx(members, server)
            # Consumed and committed before the kill, so the takeover below measures the session.
            produce(bs, topic, total, batch)
            total += batch
            assert wait_until(lambda: all_consumed(members, total), 40), ctx(members, server)
            _commits_cover(bs, group, total, members, server, "before the kill")
            vcommits = dict(third.commits())
            third.kill()
            t0 = time.monotonic()
            assert wait_until(lambda: first.assignment() == set(range(P)), SESSION_MS / 1000 + 15, 0.05), \
                f"the survivor never got the killed member's partitions\n{ctx(members, server)}"
            took = time.monotonic() - t0
            print(f"takeover after SIGKILL: {took:.1f} s")
            # Noticed only when the session expires (the last heartbeat was at most 500 ms before).
            assert SESSION_MS / 1000 - 1.5 <= took <= SESSION_MS / 1000 + 6, \
                f"takeover after {took:.1f} s, session {SESSION_MS} ms\n{ctx(members, server)}"
            produce(bs, topic, total, batch)
            total += batch
            assert wait_until(lambda: all_consumed(members, total), 40), ctx(members, server)

            def victim_uncommitted(p: int, o: int, who: list[str]) -> bool:
                return len(who) == 2 and third.name in who and o >= vcommits.get(p, 0)

            check_exactly_once(members, total, victim_uncommitted, ctx(members, server))

        first.request_stop()
        assert first.bg.wait(30) is not None, f"{first.name} did not stop\n{ctx(members, server)}"
        _commits_cover(bs, group, total, members, server, "end")
    finally:
        for m in members:
            m.bg.stop()


def run_static_restart_scenario(server, tmp: Path, kind: str, session_ms: int,  # type: ignore[no-untyped-def]
                                strategy: str = "consumer") -> None:
    """Two static members (``group.instance.id``); one closes (a static leave, epoch -2, which
    keeps its place for the session timeout) and starts again with the same instance id: it gets
    its partitions back and the other member sees no change."""
    bs = server.bootstrap
    topic, group = uid("kip848-st-t"), uid("kip848-st-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, 1200)
    members = [start_member(kind, f"s{i}-{kind}", bs, topic, group, strategy, tmp, instance=f"{group}-inst-{i}")
               for i in range(2)]
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 60), ctx(members, server)
        _settled(members, server, "two static members")
        leaving, staying = members
        old = leaving.assignment()
        mark = staying.mark()
        leaving.request_stop()
        assert leaving.bg.wait(30) is not None, f"{leaving.name} did not stop\n{ctx(members, server)}"
        t0 = time.monotonic()
        again = start_member(kind, f"s0b-{kind}", bs, topic, group, strategy, tmp, instance=f"{group}-inst-0")
        members.append(again)
        assert wait_until(lambda: again.assignment() is not None, session_ms / 1000), \
            f"the restarted static member got no assignment within the session timeout\n{ctx(members, server)}"
        assert wait_until(lambda: again.assignment() == old, 5), \
            f"the restarted static member got {again.assignment()}, had {old}\n{ctx(members, server)}"
        # Past the session timeout (+3 s): the other member saw nothing happen.
        time.sleep(max(0.0, session_ms / 1000 + 3 - (time.monotonic() - t0)))
        events = [e for e in staying.events()[mark:] if e[0] in ("REV", "LOST")]
        assert not events and staying.assignment() == set(range(P)) - old, \
            f"{staying.name} saw {events} / has {staying.assignment()}\n{ctx(members, server)}"
        assert stable([staying, again]), ctx(members, server)
        produce(bs, topic, 1200, 1200)
        assert wait_until(lambda: all_consumed(members, 2400), 40), ctx(members, server)
        check_exactly_once(members, 2400, lambda p, o, who: False, ctx(members, server))
    finally:
        for m in members:
            m.bg.stop()
