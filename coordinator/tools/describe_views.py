"""``--describe``: the offsets, members and state views of kafka-consumer-groups.sh, collected in a few
batched requests for all groups at once and printed with Kafka 4.x's columns, widths and row order
(``ConsumerGroupCommand.printOffsets/printMembers/printStates``,
https://github.com/apache/kafka/blob/trunk/tools/src/main/java/org/apache/kafka/tools/consumer/group/ConsumerGroupCommand.java).

Every column is left-aligned at its width and followed by one space; GROUP, TOPIC, CONSUMER-ID and HOST
are as wide as their longest value, at least 15. A missing value prints ``-``. Groups come in
sorted order. Notices about a group's state go to stderr ("has no active members", "is rebalancing"),
a group that does not exist is reported on stdout as an error, and the tool still exits 0: all as Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from ..lag.offsets import tool_lag
from .group_admin import CommittedOffset, GroupAdmin, GroupAdminError, GroupDescription, Node
from .kafka_errors import exception_text

__all__ = [
    "GroupOffsets", "MemberRow", "OffsetRow", "collect_members", "collect_offsets", "collect_states",
    "print_members", "print_offsets", "print_states",
]

MISSING = "-"
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


@dataclass(frozen=True)
class OffsetRow:
    group: str
    topic: str
    partition: int
    leader_epoch: int | None
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str
    host: str
    client_id: str


@dataclass(frozen=True)
class GroupOffsets:
    group: str
    state: str
    coordinator: Node | None
    rows: list[OffsetRow]


@dataclass(frozen=True)
class MemberRow:
    group: str
    consumer_id: str
    instance_id: str
    host: str
    client_id: str
    partitions: int
    assignment: list[tuple[str, int]]
    target_assignment: list[tuple[str, int]]
    current_epoch: int | None
    target_epoch: int | None
    upgraded: bool | None


def describe(admin: GroupAdmin, ids: Iterable[str]) -> dict[str, GroupDescription]:
    """The groups described; a group the coordinator refused to describe (e.g. not authorized) fails the
    command, as the failed future of Kafka's describeConsumerGroups does."""
    described = admin.describe_groups(ids)
    for gid in sorted(described):
        if described[gid].error_code:
            raise GroupAdminError(exception_text(described[gid].error_code))
    return described


def collect_offsets(admin: GroupAdmin, ids: Iterable[str]) -> list[GroupOffsets]:
    """Each group's rows: members by assignment size (largest first), each member's partitions by
    (topic, partition), then committed partitions no member owns with ``-`` as the member. One
    describe, one offset fetch and one ListOffsets per leader for all groups together."""
    ids = sorted(set(ids))
    described = describe(admin, ids)
    committed = admin.committed_offsets(ids)
    wanted: set[tuple[str, int]] = set()
    for gid in ids:
        wanted.update(committed.get(gid, {}))
        for m in described[gid].members:
            wanted.update(m.assignment)
    log_end = admin.offsets(sorted(wanted), "latest") if wanted else {}
    result = []
    for gid in ids:
        group = described[gid]
        offsets = committed.get(gid, {})
        rows: list[OffsetRow] = []
        owned: set[tuple[str, int]] = set()
        for m in sorted((m for m in group.members if m.assignment), key=lambda m: -len(m.assignment)):
            owned.update(m.assignment)
            rows += _rows(gid, sorted(m.assignment), offsets, log_end, m.member_id, m.host, m.client_id)
        rest = sorted(tp for tp in offsets if tp not in owned)
        rows += _rows(gid, rest, offsets, log_end, MISSING, MISSING, MISSING)
        result.append(GroupOffsets(gid, group.state, group.coordinator, rows))
    return result


def _rows(group: str, tps: Sequence[tuple[str, int]], offsets: dict[tuple[str, int], CommittedOffset],
          log_end: dict[tuple[str, int], int | None], member: str, host: str, client: str) -> list[OffsetRow]:
    rows = []
    for tp in tps:
        c = offsets.get(tp)
        current = None if c is None else c.offset
        end = log_end.get(tp)
        rows.append(OffsetRow(group, tp[0], tp[1], None if c is None else c.leader_epoch, current, end,
                              tool_lag(current, end), member, host, client))
    return rows


def collect_members(admin: GroupAdmin, ids: Iterable[str]) -> list[tuple[GroupDescription, list[MemberRow]]]:
    described = describe(admin, sorted(set(ids)))
    result = []
    for gid in sorted(described):
        g = described[gid]
        rows = [MemberRow(gid, m.member_id, m.instance_id or "", m.host, m.client_id, len(m.assignment),
                          m.assignment, m.target_assignment or [], m.member_epoch, g.target_assignment_epoch,
                          m.upgraded) for m in g.members]
        result.append((g, rows))
    return result


def collect_states(admin: GroupAdmin, ids: Iterable[str]) -> list[GroupDescription]:
    described = describe(admin, sorted(set(ids)))
    return [described[gid] for gid in sorted(described)]


def _text(value: object) -> str:
    return MISSING if value is None else str(value)


def _print_error(message: str, out: TextIO) -> None:
    print(f"\nError: {message}", file=out)


def should_print(group: str, state: str, rows: int, out: TextIO, err: TextIO) -> bool:
    """Kafka's shouldPrintMemberState: a notice for the state; the table only for a live group with rows."""
    if state == "Dead":
        _print_error(f"Consumer group '{group}' does not exist.", out)
    elif state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=err)
    elif state in REBALANCING:
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=err)
    return state != "Dead" and rows > 0


def _row(widths: Sequence[int], cells: Sequence[object]) -> str:
    """Java's ``%-Ns`` per column, one space between; the last column unpadded when its width is 0."""
    return " ".join(f"{_text(c):<{w}}" if w else _text(c) for w, c in zip(widths, cells, strict=True))


def print_offsets(groups: Sequence[GroupOffsets], verbose: bool, out: TextIO, err: TextIO) -> None:
    for g in groups:
        if not should_print(g.group, g.state, len(g.rows), out, err):
            continue
        gw = max([15] + [len(r.group) for r in g.rows])
        tw = max([15] + [len(r.topic) for r in g.rows])
        cw = max([15] + [len(r.consumer_id) for r in g.rows])
        hw = max([15] + [len(r.host) for r in g.rows])
        if verbose:
            widths = [gw, tw, 10, 15, 15, 15, 15, cw, hw, 0]
            header = ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                      "CONSUMER-ID", "HOST", "CLIENT-ID"]
        else:
            widths = [gw, tw, 10, 15, 15, 15, cw, hw, 0]
            header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                      "HOST", "CLIENT-ID"]
        lines = [_row(widths, header)]
        for r in g.rows:
            cells: list[object] = [r.group, r.topic, r.partition]
            if verbose:
                cells.append(r.leader_epoch)
            cells += [r.current_offset, r.log_end_offset, r.lag, r.consumer_id, r.host, r.client_id]
            lines.append(_row(widths, cells))
        out.write("".join("\n" + line for line in lines) + "\n")


def assignment_string(tps: Sequence[tuple[str, int]]) -> str:
    """``topic:0,1;other:3`` (topics sorted, partitions in order), ``-`` when empty (Kafka 4.x)."""
    if not tps:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ";".join(sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in by_topic.items()))


def print_members(groups: Sequence[tuple[GroupDescription, list[MemberRow]]], verbose: bool,
                  out: TextIO, err: TextIO) -> None:
    for g, rows in groups:
        gw, cw, iw, hw, kw, ca, ta = 15, 15, 17, 15, 15, 20, 20
        with_instance = has_classic = has_consumer = False
        printing = should_print(g.group_id, g.state, len(rows), out, err)
        if printing:
            for r in rows:
                gw, cw, iw = max(gw, len(r.group)), max(cw, len(r.consumer_id)), max(iw, len(r.instance_id))
                hw, kw = max(hw, len(r.host)), max(kw, len(r.client_id))
                with_instance = with_instance or bool(r.instance_id)
                ca = max(ca, len(assignment_string(r.assignment)))
                ta = max(ta, len(assignment_string(r.target_assignment)))
                has_classic = has_classic or r.upgraded is False
                has_consumer = has_consumer or r.upgraded is True
        # As Kafka: the header is printed even when the group has no member to list.
        base = [gw, cw, iw, hw, kw, 15] if with_instance else [gw, cw, hw, kw, 15]
        migrating = has_classic and has_consumer
        extra = [15, ca, 15, ta, 0] if migrating else [15, ca, 15, ta]
        header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + [
            "HOST", "CLIENT-ID", "#PARTITIONS"]
        text = "\n" + _row(base, header) + " "
        if verbose:
            text += _row(extra, ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
                         + (["UPGRADED"] if migrating else []))
        text += "\n"
        for r in rows:
            cells: list[object] = [r.group, r.consumer_id] + ([r.instance_id] if with_instance else []) + [
                r.host, r.client_id, r.partitions]
            text += _row(base, cells) + " "
            if verbose:
                vcells: list[object] = [r.current_epoch, assignment_string(r.assignment), r.target_epoch,
                                        assignment_string(r.target_assignment)]
                if migrating:
                    vcells.append(MISSING if r.upgraded is None else str(r.upgraded).lower())
                text += _row(extra, vcells)
            text += "\n"
        out.write(text)


def coordinator_cell(node: Node | None) -> str:
    return MISSING if node is None else f"{node.host}:{node.port}  ({node.id})"


def print_states(groups: Sequence[GroupDescription], verbose: bool, out: TextIO, err: TextIO) -> None:
    for g in groups:
        if not should_print(g.group_id, g.state, 1, out, err):
            continue
        coordinator = coordinator_cell(g.coordinator)
        widths = [max(15, len(g.group_id)), max(25, len(coordinator)), 20, 20]
        strategy = g.assignor or MISSING
        if verbose:
            widths += [15, 25, 0]
            header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                      "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
            cells: list[object] = [g.group_id, coordinator, strategy, g.state, g.group_epoch,
                                   g.target_assignment_epoch, len(g.members)]
        else:
            widths += [0]
            header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
            cells = [g.group_id, coordinator, strategy, g.state, len(g.members)]
        out.write("\n" + _row(widths, header) + "\n" + _row(widths, cells) + "\n")
