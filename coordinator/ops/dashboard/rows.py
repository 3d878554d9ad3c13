"""What the pages and the JSON API show, read from the node's live view (``ctx.view``, a
``StateView``) and its lag monitor (``ctx.lag``): plain rows, one builder per page, so the HTML
and ``/api/...`` never disagree."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GroupRow", "MemberRow", "PartitionRow", "GroupDetail", "TopicRow", "PartitionStateRow",
           "CoordinatorRow", "ClusterInfo", "group_rows", "group_detail", "topic_rows", "cluster_info",
           "offset_lag", "status_name"]


def offset_lag(committed: int | None, log_end: int | None) -> int | None:
    """kafka-consumer-groups' LAG: none when either side is missing or nothing was committed (-1)."""
    if committed is None or log_end is None or committed < 0:
        return None
    return log_end - committed


def status_name(status: object) -> str:
    """Burrow's status string (``Status.name``), or what was handed in; ``-`` for none."""
    if status is None:
        return "-"
    name = getattr(status, "name", None)
    return str(name if name is not None else status)


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    type: str
    state: str
    protocol_type: str
    assignor: str
    epoch: int | None
    members: int
    partitions: int
    lag: int | None
    lag_seconds: float | None
    status: str


@dataclass(frozen=True)
class MemberRow:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    lag: int | None
    lag_seconds: float | None
    status: str
    member_id: str | None
    client_id: str | None
    host: str | None
    expires_at_ms: int | None
    expiring_within_day: bool


@dataclass(frozen=True)
class GroupDetail:
    group: GroupRow
    coordinator_partition: int | None
    members: list[MemberRow]
    partitions: list[PartitionRow]
    history: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class TopicRow:
    topic: str
    partitions: int
    #: Summed over the partitions hosted here (None when none is: cluster mode, led elsewhere).
    log_start: int | None
    log_end: int | None
    #: Records between log start and end, summed likewise.
    records: int | None
    groups: list[str]


@dataclass(frozen=True)
class PartitionStateRow:
    topic: str
    partition: int
    leader: int | None
    isr: list[int]
    replicas: list[int]
    log_start: int | None
    log_end: int | None
    local: bool


@dataclass(frozen=True)
class CoordinatorRow:
    topic: str
    partition: int
    state: str
    load_time_ms: float | None


@dataclass(frozen=True)
class ClusterInfo:
    cluster_mode: bool
    nodes: list[dict[str, Any]]
    controller_id: int | None
    partitions: list[PartitionStateRow]
    coordinators: list[CoordinatorRow]


def _lags_by_group(ctx: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for row in ctx.lag.lags():
        out.setdefault(row.group, []).append(row)
    return out


def _summary(g: Any, lags: Iterable[Any], statuses: dict[str, Any], log_ends: dict[tuple[str, int], int]) -> GroupRow:
    lag_rows = list(lags)
    if lag_rows:
        offsets = [r.lag for r in lag_rows if r.lag is not None]
        seconds = [r.lag_seconds for r in lag_rows if r.lag_seconds is not None]
    else:  # not sampled yet: the offsets side from the view alone
        offsets = [lag for tp, c in g.offsets.items()
                   if (lag := offset_lag(c.offset, log_ends.get(tp))) is not None]
        seconds = []
    status = statuses.get(g.group_id)
    return GroupRow(
        group_id=g.group_id, type=g.type, state=g.state, protocol_type=g.protocol_type or "",
        assignor=g.assignor or "", epoch=g.epoch, members=len(g.members), partitions=len(g.offsets),
        lag=sum(offsets) if offsets else None, lag_seconds=max(seconds) if seconds else None,
        status=status_name(getattr(status, "status", status)))


def _log_ends(ctx: Any) -> dict[tuple[str, int], int]:
    return {tp: p.log_end for tp, p in ctx.view.partitions().items()}


#: The protocol column of a group of Kafka's old ZooKeeper-based consumer (ops/zk_era_groups.py).
ZOOKEEPER_ERA = "ZooKeeper-era"


def group_rows(ctx: Any) -> list[GroupRow]:
    lags = _lags_by_group(ctx)
    statuses = ctx.lag.group_statuses()
    ends = _log_ends(ctx)
    rows = [_summary(g, lags.get(g.group_id, ()), statuses, ends) for g in ctx.view.groups()]
    return sorted([*rows, *zk_era_rows(ctx)], key=lambda r: r.group_id)


def zk_era_rows(ctx: Any) -> list[GroupRow]:
    """The ZooKeeper-era groups of the last /consumers read: lag over the partitions this node leads (one node:
    those it hosts), as in /metrics; state Stable while a consumer is registered, else Empty."""
    zk_era = getattr(ctx, "zk_era", None)
    if zk_era is None:
        return []
    from ..zk_era_groups import lag_rows

    led = ctx.view.led_partition_offsets()
    lags: dict[str, list[int]] = {}
    for r in lag_rows(zk_era.groups, led, None if led is not None else ctx.view.latest):
        if r.committed is not None and r.log_end is not None:
            lags.setdefault(r.group, []).append(r.log_end - r.committed)
    return [GroupRow(group_id=g.group, type="classic", state="Stable" if g.members else "Empty",
                     protocol_type=ZOOKEEPER_ERA, assignor="", epoch=None, members=len(g.members),
                     partitions=len(g.offsets), lag=sum(lags[g.group]) if g.group in lags else None,
                     lag_seconds=None, status="-") for g in zk_era.groups]


def zk_era_errors(ctx: Any) -> list[str]:
    """The malformed znodes of the last /consumers read, each naming its path."""
    zk_era = getattr(ctx, "zk_era", None)
    return [] if zk_era is None else list(zk_era.errors)


def group_detail(ctx: Any, group_id: str) -> GroupDetail | None:
    g = ctx.view.group(group_id)
    if g is None:
        return None
    ends = _log_ends(ctx)
    lag_rows = {(r.topic, r.partition): r for r in ctx.lag.lags() if r.group == group_id}
    owners = {tp: m for m in g.members for tp in m.assignment}
    partitions: list[PartitionRow] = []
    for tp in sorted(set(g.offsets) | set(owners) | set(lag_rows)):
        committed_view = g.offsets.get(tp)
        committed = committed_view.offset if committed_view is not None else None
        owner = owners.get(tp)
        sampled = lag_rows.get(tp)
        log_end = ends.get(tp)
        expires = committed_view.expires_at_ms if committed_view is not None else None
        partitions.append(PartitionRow(
            topic=tp[0], partition=tp[1], committed=committed, log_end=log_end,
            lag=offset_lag(committed, log_end),
            lag_seconds=sampled.lag_seconds if sampled is not None else None,
            status=status_name(sampled.status) if sampled is not None else "-",
            member_id=owner.member_id if owner else None, client_id=owner.client_id if owner else None,
            host=owner.host if owner else None,
            expires_at_ms=sampled.expires_at_ms if sampled is not None else expires,
            expiring_within_day=bool(sampled.expiring_within_day) if sampled is not None else False))
    members = [MemberRow(m.member_id, m.instance_id, m.client_id, m.host, sorted(m.assignment))
               for m in sorted(g.members, key=lambda m: m.member_id)]
    summary = _summary(g, lag_rows.values(), ctx.lag.group_statuses(), ends)
    return GroupDetail(group=summary, coordinator_partition=g.coordinator_partition, members=members,
                       partitions=partitions, history=[(int(t), int(v)) for t, v in ctx.lag.history(group_id)])


def topic_rows(ctx: Any) -> list[TopicRow]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, _), p in ctx.view.partitions().items():
        by_topic.setdefault(topic, []).append(p)
    consumers: dict[str, set[str]] = {}
    for g in ctx.view.groups():
        for topic, _ in g.offsets:
            consumers.setdefault(topic, set()).add(g.group_id)
    out = []
    for topic, parts in sorted(by_topic.items()):
        local = [p for p in parts if p.log_start is not None and p.log_end is not None]
        start = sum(p.log_start for p in local) if local else None
        end = sum(p.log_end for p in local) if local else None
        out.append(TopicRow(topic, len(parts), start, end, None if start is None or end is None else end - start,
                            sorted(consumers.get(topic, ()))))
    return out


def cluster_info(ctx: Any) -> ClusterInfo:
    view = ctx.view
    # StateView.cluster is the ZooKeeper view in cluster mode, None on a single node.
    cluster_mode = getattr(view, "cluster", None) is not None
    nodes = list(view.nodes()) if hasattr(view, "nodes") else []
    controller = view.controller_id() if hasattr(view, "controller_id") else None
    partitions = [PartitionStateRow(t, p, v.leader, list(v.isr or []), list(v.replicas or []), v.log_start,
                                    v.log_end, bool(v.local))
                  for (t, p), v in sorted(view.partitions().items())]
    coordinators = [CoordinatorRow(c.topic, c.partition, c.state,
                                   None if c.load_time_ms is None else round(c.load_time_ms, 1))
                    for c in sorted(view.coordinator_partitions(), key=lambda c: (c.topic, c.partition))]
    return ClusterInfo(cluster_mode=cluster_mode, nodes=[_node(n) for n in nodes], controller_id=controller,
                       partitions=partitions, coordinators=coordinators)


def _node(n: Any) -> dict[str, Any]:
    if isinstance(n, dict):
        return dict(n)
    fields = ("node_id", "id", "host", "port", "rack")
    return {f: getattr(n, f) for f in fields if hasattr(n, f)}
