"""``groupcoord groups --describe`` agrees, cell by cell, with what the Java AdminClient reports of the same
groups (tests/clients/java/GroupsToolView.java: describeConsumerGroups, listConsumerGroupOffsets,
listOffsets latest): members, assignments, committed offsets and their leader epochs, log-end offsets, lag, coordinator,
state.

Kafka's own kafka-consumer-groups.sh cannot be installed here (its distribution comes from Maven
Central, which this machine cannot reach), so the Java Admin it is built on stands in for it: the tool
prints what Admin returns, and these are the values each of our columns must carry.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from coordinator.groups_cli import run
from tests.clients.tools import run_java
from tests.coordinator.tools.live_groups import CLASSIC, EMPTY, KIP848, LiveGroups, live_groups

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

GROUPS = [CLASSIC, EMPTY, KIP848]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveGroups]:
    with live_groups(tmp_path_factory.mktemp("groups-tool-java") / "data") as groups:
        yield groups


class JavaView:
    """The GroupsToolView lines, by group."""

    def __init__(self, lines: list[str]) -> None:
        self.groups: dict[str, dict[str, str]] = {}
        self.members: dict[str, list[list[str]]] = {}
        self.offsets: dict[str, dict[tuple[str, int], tuple[str, str]]] = {}
        self.log_end: dict[tuple[str, int], str] = {}
        for line in lines:
            kind, *f = line.split(" ")
            if kind == "G":
                self.groups[f[0]] = dict(kv.split("=", 1) for kv in f[1:])
            elif kind == "M":
                self.members.setdefault(f[0], []).append(f[1:])
            elif kind == "O":
                self.offsets.setdefault(f[0], {})[(f[1], int(f[2]))] = (f[3], f[4])
            elif kind == "E":
                self.log_end[(f[0], int(f[1]))] = f[2]


@pytest.fixture(scope="module")
def java(live: LiveGroups) -> JavaView:
    res = run_java("GroupsToolView", [live.bootstrap, *GROUPS], timeout=90).check()
    lines = res.stdout.splitlines()
    assert lines and lines[-1] == "OK", res.describe()
    return JavaView(lines[:-1])


def table(live: LiveGroups, *argv: str) -> list[list[str]]:
    """Our --describe rows (headers and blank lines dropped), split into cells."""
    out, err = io.StringIO(), io.StringIO()
    assert run(["--bootstrap-server", live.bootstrap, "--describe", *[a for g in GROUPS for a in ("--group", g)],
                *argv], out, err) == 0, err.getvalue()
    return [line.split() for line in out.getvalue().splitlines() if line and not line.startswith("GROUP ")]


def test_state_view_agrees(live: LiveGroups, java: JavaView) -> None:
    rows = table(live, "--state")
    assert [r[0] for r in rows] == sorted(GROUPS)
    for group, coordinator, node_id, strategy, state, members in rows:
        j = java.groups[group]
        host, port, jid = j["coordinator"].rsplit(":", 2)
        assert (coordinator, node_id) == (f"{host}:{port}", f"({jid})"), group
        assert (strategy, state, members) == (j["assignor"], j["state"], j["members"]), (group, j)


def test_members_view_agrees(live: LiveGroups, java: JavaView) -> None:
    ours = {(r[0], r[1]): r[2:] for r in table(live, "--members", "--verbose")}
    theirs = {(g, m[0]): m[1:] for g, ms in java.members.items() for m in ms}
    assert set(ours) == set(theirs) and len(ours) == 2  # the classic and the KIP-848 member
    for key, (host, client, count, _epoch, assignment, *_target) in ours.items():
        instance, jclient, jhost, jassignment = theirs[key]
        assert (host, client, assignment) == (jhost, jclient, jassignment), key
        assert int(count) == sum(len(t.split(":")[1].split(",")) for t in jassignment.split(";")), key


def test_offsets_view_agrees(live: LiveGroups, java: JavaView) -> None:
    rows = table(live, "--verbose")
    owners = {}
    for g, ms in java.members.items():
        for member_id, _instance, client, host, assignment in ms:
            for part in assignment.split(";"):
                topic, ps = part.split(":")
                for p in ps.split(","):
                    owners[(g, topic, int(p))] = (member_id, host, client)
    expected_keys = set(owners) | {(g, t, p) for g, o in java.offsets.items() for t, p in o}
    assert {(r[0], r[1], int(r[2])) for r in rows} == expected_keys
    for group, topic, p, epoch, current, log_end, lag, member_id, host, client in rows:
        tp = (topic, int(p))
        committed, committed_epoch = java.offsets.get(group, {}).get(tp, ("-", "-"))
        assert (current, epoch, log_end) == (committed, committed_epoch, java.log_end[tp]), (group, tp)
        assert lag == ("-" if committed == "-" else str(int(java.log_end[tp]) - int(committed))), (group, tp)
        assert (member_id, host, client) == owners.get((group, topic, int(p)), ("-", "-", "-")), (group, tp)
