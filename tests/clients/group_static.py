"""Static membership (KIP-345) scenario for the group tests: three members with
``group.instance.id``; one is SIGKILLed and started again with the same instance id within its
session timeout. The group must not rebalance: the restarted member gets its old partitions
back, the others see no revocation and no new assignment."""

from __future__ import annotations

import time
from pathlib import Path

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

STATIC_SESSION_MS = 10000


def run_static_scenario(server, tmp: Path, kind: str, strategy: str, n1: int = 2400, n2: int = 1200) -> None:  # type: ignore[no-untyped-def]
    bs = server.bootstrap
    topic, group = uid("grp-st-t"), uid("grp-st-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, n1)
    members = [start_member(kind, f"s{i}-{kind}", bs, topic, group, strategy, tmp, instance=f"{group}-inst-{i}",
                            session_ms=STATIC_SESSION_MS) for i in range(3)]
    try:
        assert wait_until(lambda: all_consumed(members, n1), 60), f"not all {n1} consumed\n{ctx(members, server)}"
        assert wait_stable(members, 30), f"assignments never settled\n{ctx(members, server)}"
        check_exactly_once(members, n1, lambda p, o, who: False, ctx(members, server))

        victim = members[0]
        old = victim.assignment()
        vcommits = dict(victim.commits())
        marks = {m.name: m.mark() for m in members[1:]}
        victim.kill()
        t0 = time.monotonic()
        again = start_member(kind, f"s0b-{kind}", bs, topic, group, strategy, tmp, instance=f"{group}-inst-0",
                             session_ms=STATIC_SESSION_MS)
        members.append(again)
        assert wait_until(lambda: again.assignment() is not None, STATIC_SESSION_MS / 1000), \
            f"restarted static member got no assignment within the session timeout\n{ctx(members, server)}"
        took = time.monotonic() - t0
        assert again.assignment() == old, (f"restarted static member got {again.assignment()}, had {old} "
                                           f"(rejoined after {took:.1f} s)\n{ctx(members, server)}")
        # Past the old session timeout (+3 s): nothing may have happened to the others.
        time.sleep(max(0.0, STATIC_SESSION_MS / 1000 + 3 - (time.monotonic() - t0)))
        for m in members[1:3]:
            evs = [e for e in m.events()[marks[m.name]:] if e[0] in ("A", "REV", "LOST")]
            assert not evs, (f"{m.name} saw a rebalance ({evs}) when static member s0 restarted within its "
                             f"session timeout\n{ctx(members, server)}")
        produce(bs, topic, n1, n2)
        total = n1 + n2
        assert wait_until(lambda: all_consumed(members, total), 40), f"not all {total} consumed\n{ctx(members, server)}"
        assert wait_stable(members, 10, hold=0.5)

        def victim_uncommitted(p: int, o: int, who: list[str]) -> bool:
            return sorted(who) == sorted([victim.name, again.name]) and o >= vcommits.get(p, 0)

        check_exactly_once(members, total, victim_uncommitted, ctx(members, server))
        for m in members:
            if m.alive():
                m.request_stop()
        for m in members:
            if m.alive():
                assert m.bg.wait(30) is not None, f"{m.name} did not stop\n{ctx(members, server)}"
        want = {p: total // P for p in range(P)}
        got: dict[int, int] = {}
        assert wait_until(lambda: (got.update(committed_offsets(bs, group)) or got) == want, 15, 0.5), \
            f"OffsetFetch {got}, want {want}\n{ctx(members, server)}"
    finally:
        for m in members:
            m.bg.stop()
