"""``--output json``: the data of ``--list`` and of each ``--describe`` view as JSON objects, one array
on stdout, missing values as ``null`` (this tool's addition; Kafka's tool prints tables only)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from .describe_views import GroupOffsets, MemberRow
from .group_admin import GroupDescription, GroupListing, Node
from .listing import type_name

__all__ = ["dump", "listing_json", "members_json", "offsets_json", "states_json"]


def _node(node: Node | None) -> dict[str, Any] | None:
    return None if node is None else {"id": node.id, "host": node.host, "port": node.port}


def _tps(tps: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in tps]


def _missing(group: str, state: str) -> dict[str, Any] | None:
    if state == "Dead":
        return {"group": group, "state": state, "error": f"Consumer group '{group}' does not exist."}
    return None


def listing_json(groups: Sequence[GroupListing]) -> list[dict[str, Any]]:
    return [{"group": g.group_id, "type": type_name(g.type), "state": g.state or "Unknown",
             "protocol_type": g.protocol_type} for g in groups]


def offsets_json(groups: Sequence[GroupOffsets],
                 lag_seconds: Mapping[tuple[str, str, int], float | None] | None = None) -> list[dict[str, Any]]:
    """``lag_seconds`` by (group, topic, partition) (``coordinator/tools/lag_seconds.py``): each partition's
    lag in time, ``null`` when unknown; without it the key is left out."""
    result = []
    for g in groups:
        result.append(_missing(g.group, g.state) or {
            "group": g.group, "state": g.state, "coordinator": _node(g.coordinator),
            "partitions": [{"topic": r.topic, "partition": r.partition, "leader_epoch": r.leader_epoch,
                            "current_offset": r.current_offset, "log_end_offset": r.log_end_offset, "lag": r.lag,
                            **({} if lag_seconds is None else
                               {"lag_seconds": lag_seconds.get((g.group, r.topic, r.partition))}),
                            "consumer_id": None if r.consumer_id == "-" else r.consumer_id,
                            "host": None if r.host == "-" else r.host,
                            "client_id": None if r.client_id == "-" else r.client_id} for r in g.rows]})
    return result


def members_json(groups: Sequence[tuple[GroupDescription, list[MemberRow]]]) -> list[dict[str, Any]]:
    result = []
    for g, rows in groups:
        result.append(_missing(g.group_id, g.state) or {
            "group": g.group_id, "state": g.state, "type": g.type,
            "members": [{"consumer_id": r.consumer_id, "group_instance_id": r.instance_id or None, "host": r.host,
                         "client_id": r.client_id, "partitions": r.partitions, "current_epoch": r.current_epoch,
                         "assignment": _tps(r.assignment), "target_epoch": r.target_epoch,
                         "target_assignment": _tps(r.target_assignment), "upgraded": r.upgraded} for r in rows]})
    return result


def states_json(groups: Sequence[GroupDescription]) -> list[dict[str, Any]]:
    result = []
    for g in groups:
        result.append(_missing(g.group_id, g.state) or {
            "group": g.group_id, "type": g.type, "coordinator": _node(g.coordinator),
            "assignment_strategy": g.assignor or None, "state": g.state, "members": len(g.members),
            "group_epoch": g.group_epoch, "target_assignment_epoch": g.target_assignment_epoch})
    return result


def dump(data: Any, out: TextIO) -> None:
    json.dump(data, out, indent=2)
    out.write("\n")
