"""Committed offsets survive a server crash: a group of Java, kafka-python and aiokafka members
(round-robin) consumes and commits, stops; the server is SIGKILLed and started again; fresh
members of the same group (each client fetching its offsets with its own OffsetFetch version:
Java v9 with require_stable, kafka-python v8, aiokafka v3) start exactly at the committed offsets
and consume only the records produced after them. Also aiokafka static membership."""

from __future__ import annotations

import pytest

from tests.clients.group_scenario import (
    P,
    committed_offsets,
    ctx,
    produce,
    run_group_scenario,
    start_member,
    wait_until,
)
from tests.clients.group_static import run_static_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

FAST = {"group.initial.rebalance.delay.ms": "0"}
KINDS = ["java", "kafka-python", "aiokafka"]


def test_groups_fresh_members_resume_after_server_crash(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(FAST)
    bs = server.bootstrap
    n1 = n2 = 1200
    first = run_group_scenario(server, tmp_path, KINDS, "roundrobin", kill_member=False, restart_server=False, n1=n1)
    server.kill()
    server.start()
    produce(bs, first.topic, n1, n2)
    members = [start_member(k, f"fresh{i}-{k}", bs, first.topic, first.group, "roundrobin", tmp_path)
               for i, k in enumerate(KINDS)]
    try:
        want = {(p, o) for p in range(P) for o in range(n1 // P, (n1 + n2) // P)}
        got: list[tuple[int, int, str]] = []

        def done() -> bool:
            got[:] = [(p, o, m.name) for m in members for p, o in m.records()]
            return want <= {(p, o) for p, o, _ in got}

        assert wait_until(done, 60), f"fresh members did not consume the new records\n{ctx(members, server)}"
        early = sorted((p, o, who) for p, o, who in got if o < n1 // P)
        assert not early, (f"fresh members re-consumed {len(early)} records below the committed offset "
                           f"{n1 // P} after the server crash, e.g. {early[:10]}\n{ctx(members, server)}")
        seen: dict[tuple[int, int], int] = {}
        for p, o, _ in got:
            seen[(p, o)] = seen.get((p, o), 0) + 1
        dupes = sorted(k for k, v in seen.items() if v > 1)
        assert not dupes, f"records consumed twice: {dupes[:10]}\n{ctx(members, server)}"
        for m in members:
            m.request_stop()
        for m in members:
            assert m.bg.wait(30) is not None, ctx(members, server)
        final: dict[int, int] = {}
        assert wait_until(lambda: (final.update(committed_offsets(bs, first.group)) or final)
                          == {p: (n1 + n2) // P for p in range(P)}, 15, 0.5), final
    finally:
        for m in members:
            m.bg.stop()


def test_groups_aiokafka_static_membership(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_static_scenario(server_factory(FAST), tmp_path, "aiokafka", "roundrobin")
