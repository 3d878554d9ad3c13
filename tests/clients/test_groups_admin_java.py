"""Java ``Admin`` consumer-group APIs (kafka-clients 3.9.1, ``java/GroupAdmin.java``) against a
live group of two Java consumers (one static, one dynamic): listConsumerGroups,
describeConsumerGroups (state, assignor, members, assignments), listConsumerGroupOffsets,
removeMembersFromConsumerGroup (a SIGKILLed static member, removed before its long session
timeout), alterConsumerGroupOffsets and deleteConsumerGroupOffsets on the Empty group,
deleteConsumerGroups."""

from __future__ import annotations

import time

import pytest

from tests.clients.group_scenario import P, all_consumed, ctx, produce, start_member, uid, wait_stable, wait_until
from tests.clients.records_io import create_topic
from tests.clients.tools import NODE_ID, run_java

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

SRC = ["GroupAdmin.java"]


def admin(bs: str, *args: str) -> list[str]:
    res = run_java("GroupAdmin", [bs, *args], sources=SRC, timeout=60).check()
    lines = res.stdout.splitlines()
    assert lines and lines[-1] == "OK", f"Admin {args}: {res.describe()}"
    return lines[:-1]


def admin_err(bs: str, *args: str) -> str:
    res = run_java("GroupAdmin", [bs, *args], sources=SRC, timeout=60).check()
    return res.stdout.splitlines()[-1]


def describe(bs: str, group: str) -> tuple[dict[str, str], list[list[str]]]:
    lines = admin(bs, "describe", group)
    head = dict(kv.split("=", 1) for kv in lines[0][2:].split())
    members = [ln.split(" ") for ln in lines[1:] if ln.startswith("M ")]
    return head, members


def offsets_full(bs: str, group: str) -> dict[int, tuple[int, str, str]]:
    """partition -> (offset, leader epoch or "-", metadata)"""
    out = {}
    for ln in admin(bs, "offsets", group):
        if ln.startswith("O "):
            f = ln.split(" ")
            out[int(f[2])] = (int(f[3]), f[4].removeprefix("epoch="), " ".join(f[5:]).removeprefix("metadata="))
    return out


def offsets(bs: str, group: str) -> dict[int, int]:
    return {p: v[0] for p, v in offsets_full(bs, group).items()}


def test_groups_java_admin_apis(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory({"group.initial.rebalance.delay.ms": "0"})
    bs = server.bootstrap
    topic, group = uid("grp-adm-t"), uid("grp-adm-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, 1200)
    instance = f"{group}-static"
    static = start_member("java", "static", bs, topic, group, "range", tmp_path, instance=instance, session_ms=30000)
    dynamic = start_member("java", "dynamic", bs, topic, group, "range", tmp_path)
    members = [static, dynamic]
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 60), ctx(members, server)
        assert wait_stable(members, 30), ctx(members, server)

        listed = [ln.split() for ln in admin(bs, "list") if ln.startswith("G ")]
        assert ["G", group, "Stable"] in listed, f"listConsumerGroups: {listed}\n{server.log_text()[-3000:]}"

        stable_only = [ln.split() for ln in admin(bs, "list-state", "Stable") if ln.startswith("G ")]
        assert ["G", group, "Stable"] in stable_only, f"listConsumerGroups(inStates Stable): {stable_only}"
        empty_only = [ln.split() for ln in admin(bs, "list-state", "Empty") if ln.startswith("G ")]
        assert not [g for g in empty_only if g[1] == group], f"listConsumerGroups(inStates Empty): {empty_only}"

        head, ms = describe(bs, group)
        assert head["state"] == "Stable" and head["assignor"] == "range" and head["members"] == "2", head
        assert head["coordinator"] == str(NODE_ID) and head["simple"] == "false", head
        by_instance = {m[2]: m for m in ms}
        assert set(by_instance) == {instance, "-"}, ms
        assert by_instance[instance][5] == ",".join(map(str, sorted(static.assignment() or []))), \
            f"describe: static member's assignment {by_instance[instance]} vs its own view {static.assignment()}"
        assert by_instance["-"][5] == ",".join(map(str, sorted(dynamic.assignment() or []))), \
            f"describe: dynamic member's assignment {by_instance['-']} vs its own view {dynamic.assignment()}"
        assert all(m[1] for m in ms) and len({m[1] for m in ms}) == 2, ms

        assert wait_until(lambda: offsets(bs, group) == {p: 100 for p in range(P)}, 15, 0.5), offsets(bs, group)

        # A SIGKILLed static member stays for its 30 s session; removeMembersFromConsumerGroup
        # (LeaveGroup v3+ with its group.instance.id) removes it now: the other member gets everything.
        static.kill()
        mark = dynamic.mark()
        t0 = time.monotonic()
        admin(bs, "remove-member", group, instance)
        assert wait_until(lambda: dynamic.assignment() == set(range(P)), 15), \
            f"dynamic member never got all partitions after the static member was removed\n{ctx(members, server)}"
        took = time.monotonic() - t0
        assert took < 15, took
        assert [e for e in dynamic.events()[mark:] if e[0] == "A"], ctx(members, server)
        head, ms = describe(bs, group)
        assert head["members"] == "1" and ms[0][2] == "-", (head, ms)
        assert admin_err(bs, "remove-member", group, instance).startswith("ERR"), "removing an unknown instance id"

        # A non-empty group refuses an admin offset commit.
        err = admin_err(bs, "alter", group, topic, "0:10")
        assert err.startswith("ERR UnknownMemberIdException"), f"alterConsumerGroupOffsets on a Stable group: {err}"

        # Neither a live group nor the offsets of a topic it is subscribed to can be deleted.
        err = admin_err(bs, "delete", group)
        assert err.startswith("ERR GroupNotEmptyException"), f"deleteConsumerGroups on a Stable group: {err}"
        err = admin_err(bs, "delete-offsets", group, topic, "0")
        assert err.startswith("ERR GroupSubscribedToTopicException"), \
            f"deleteConsumerGroupOffsets of a subscribed topic on a Stable group: {err}"
        head, _ = describe(bs, uid("grp-adm-none"))
        assert head["state"] == "Dead" and head["members"] == "0", f"describe of an unknown group: {head}"

        dynamic.request_stop()
        assert dynamic.bg.wait(30) is not None, ctx(members, server)
        assert wait_until(lambda: describe(bs, group)[0]["state"] == "Empty", 10, 0.5), describe(bs, group)
        head, ms = describe(bs, group)
        assert head["members"] == "0" and not ms, (head, ms)

        admin(bs, "alter", group, topic, "0:10,1:20:7:meta-one")
        full = offsets_full(bs, group)
        assert full[0] == (10, "-", "") and full[1] == (20, "7", "meta-one") and full[2][0] == 100, \
            f"offsets after alterConsumerGroupOffsets (p1 with leader epoch 7, metadata): {full}"
        got = offsets(bs, group)

        admin(bs, "delete-offsets", group, topic, "2,3")
        got = offsets(bs, group)
        assert 2 not in got and 3 not in got and got[0] == 10 and got[4] == 100, got

        admin(bs, "delete", group)
        listed = [ln.split() for ln in admin(bs, "list") if ln.startswith("G ")]
        assert not [g for g in listed if g[1] == group], listed
        head, ms = describe(bs, group)
        assert head["state"] == "Dead" and not ms, head
        assert offsets(bs, group) == {}, "offsets survive deleteConsumerGroups"
    finally:
        for m in members:
            m.bg.stop()


def test_groups_java_describe_authorized_operations(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """DescribeGroups v5 with include_authorized_operations=true (Java
    ``describeConsumerGroups(includeAuthorizedOperations(true))``). Without an authorizer Kafka
    answers with every operation the GROUP resource supports (``AuthHelper.authorizedOperations``:
    READ, DESCRIBE, DELETE); Java then reports that set. An omitted field (INT32_MIN) makes Java
    report null."""
    server = server_factory({"group.initial.rebalance.delay.ms": "0"})
    bs = server.bootstrap
    topic, group = uid("grp-ops-t"), uid("grp-ops-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, 120)
    m = start_member("java", "m", bs, topic, group, "range", tmp_path)
    try:
        assert wait_until(lambda: all_consumed([m], 120), 40) and wait_stable([m], 20), ctx([m], server)
        ops = [ln for ln in admin(bs, "describe-ops", group) if ln.startswith("OPS ")]
        assert ops == ["OPS DELETE,DESCRIBE,READ"], f"describeConsumerGroups(includeAuthorizedOperations): {ops}"
    finally:
        m.bg.stop()
