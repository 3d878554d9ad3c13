"""The dashboard's pages as HTML, from the rows of rows.py: pure functions, no request in sight."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from . import csrf
from .chart import lag_chart
from .markup import Markup, el, join, page, path_segment
from .reset import SCENARIOS, Plan, ResetForm
from .rows import ZOOKEEPER_ERA, ClusterInfo, GroupDetail, GroupRow, TopicRow

__all__ = ["groups_page", "group_page", "reset_page", "topics_page", "cluster_page", "not_found_page",
           "message_page", "fmt_seconds", "fmt_time"]

DASH = "-"


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return DASH
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def fmt_time(ms: int | None) -> str:
    if ms is None:
        return DASH
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d} UTC"


def _v(value: object) -> object:
    return DASH if value is None or value == "" else value


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, id_: str | None = None,
           empty: str = "Nothing to show.", row_attrs: Sequence[Mapping[str, object]] | None = None) -> Markup:
    if not rows:
        return el("p", empty, class_="empty")
    head = el("thead", el("tr", join(el("th", h, scope="col") for h in headers)))
    body_rows = []
    for i, row in enumerate(rows):
        attrs = row_attrs[i] if row_attrs else {}
        body_rows.append(el("tr", join(el("td", _v(c)) for c in row), **attrs))
    return el("table", head, el("tbody", join(body_rows)), id=id_)


def _group_link(group_id: str, suffix: str = "") -> str:
    return f"/groups/{path_segment(group_id)}{suffix}"


def _status(status: str) -> Markup:
    return el("span", status, class_=f"status status-{status.lower()}")


def _state(state: str) -> Markup:
    return el("span", state, class_=f"state state-{state.lower()}")


def groups_page(rows: Sequence[GroupRow], zk_errors: Sequence[str] = ()) -> str:
    filter_box = el("p", el("label", "Filter ", el("input", type="search", id="group-filter", placeholder="group, state, type…",
                                                   autocomplete="off", data_filter="groups-table")), class_="filter")
    # A ZooKeeper-era group has no page: its state is znodes, not this node's offsets topic.
    table_rows = [[r.group_id if r.protocol_type == ZOOKEEPER_ERA else el("a", r.group_id, href=_group_link(r.group_id)),
                   _state(r.state), r.type,
                   r.protocol_type or DASH, r.assignor or DASH, r.members, r.lag, fmt_seconds(r.lag_seconds),
                   _status(r.status)] for r in rows]
    attrs = [{"data_search": f"{r.group_id} {r.state} {r.type} {r.protocol_type} {r.assignor} {r.status}".lower()}
             for r in rows]
    table = _table(["Group", "State", "Type", "Protocol", "Assignor", "Members", "Lag", "Lag (time)", "Status"],
                   table_rows, id_="groups-table", empty="No consumer groups on this node.", row_attrs=attrs)
    count = el("p", f"{len(rows)} group{'s' if len(rows) != 1 else ''} coordinated by this node.", class_="muted")
    parts = [count, filter_box, table]
    if zk_errors:
        parts.append(el("h2", "ZooKeeper-era groups: malformed znodes"))
        parts.append(el("ul", *(el("li", e) for e in zk_errors), class_="errors"))
    return page("Consumer groups", join(parts), active="/")


def _assignment(assignment: Sequence[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return "; ".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items())) or DASH


def group_page(detail: GroupDetail, timeline: Sequence[Any], *, now_ms: int) -> str:
    g = detail.group
    facts = el("dl", join([
        el("dt", "State"), el("dd", _state(g.state)), el("dt", "Type"), el("dd", g.type),
        el("dt", "Protocol"), el("dd", _v(g.protocol_type)), el("dt", "Assignor"), el("dd", _v(g.assignor)),
        el("dt", "Epoch"), el("dd", _v(g.epoch)), el("dt", "Members"), el("dd", g.members),
        el("dt", "Lag"), el("dd", _v(g.lag)), el("dt", "Lag (time)"), el("dd", fmt_seconds(g.lag_seconds)),
        el("dt", "Status"), el("dd", _status(g.status)),
        el("dt", "Coordinator partition"), el("dd", _v(detail.coordinator_partition))]), class_="facts")
    actions = el("p", el("a", "Reset offsets…", href=_group_link(g.group_id, "/reset"), class_="button"))
    members = _table(["Member", "Instance", "Client id", "Host", "Assignment"],
                     [[m.member_id, m.instance_id, m.client_id, m.host, _assignment(m.assignment)]
                      for m in detail.members], id_="members-table", empty="No active members.")
    part_rows, attrs = [], []
    for p in detail.partitions:
        expiring = DASH
        if p.expires_at_ms is not None:
            left = (p.expires_at_ms - now_ms) / 1000
            expiring = f"in {fmt_seconds(max(left, 0))}" if p.expiring_within_day else fmt_time(p.expires_at_ms)
        part_rows.append([p.topic, p.partition, p.committed, p.log_end, p.lag, fmt_seconds(p.lag_seconds),
                          _status(p.status), p.client_id, p.host, expiring])
        attrs.append({"class_": "expiring" if p.expiring_within_day else None})
    partitions = _table(["Topic", "Partition", "Committed", "Log end", "Lag", "Lag (time)", "Status", "Client id",
                         "Host", "Expires"], part_rows, id_="partitions-table", empty="No committed offsets.",
                        row_attrs=attrs)
    entries = [[fmt_time(e.timestamp_ms), e.offset, e.kind, e.epoch, e.state_or_protocol,
                e.members if isinstance(e.members, int) else len(e.members or ())]
               for e in timeline]
    history = _table(["Time", "Log offset", "Record", "Epoch", "State / protocol", "Members"], entries,
                     id_="timeline-table", empty="No group records in the offsets log.")
    body = join([facts, actions, el("h2", "Members"), members, el("h2", "Partitions"), partitions,
                 el("h2", "Lag over time"), el("figure", lag_chart(detail.history), class_="chart"),
                 el("h2", "Generation and epoch timeline"), history])
    return page(f"Group {g.group_id}", body, active="/")


def _option(value: str, label: str, selected: bool) -> Markup:
    return el("option", label, value=value, selected=selected)


def reset_page(group_id: str, state: str, *, admin_enabled: bool, token: str, form: ResetForm | None = None,
               raw: dict[str, str] | None = None, plan: Plan | None = None, executed: bool = False,
               error: str | None = None, notice: str | None = None, previewed: str | None = None) -> str:
    raw = raw or {}
    parts: list[Markup] = [el("p", "State: ", _state(state), " · ",
                              el("a", "back to the group", href=_group_link(group_id)))]
    if not admin_enabled:
        parts.append(el("p", "Offset reset is disabled on this node: set http.admin.enabled=true to enable it.",
                        class_="notice disabled"))
    if error:
        parts.append(el("p", "Error: ", error, class_="notice error", role="alert"))
    if notice:
        parts.append(el("p", notice, class_="notice warn", id="reset-notice"))
    scope = raw.get("scope", "all-topics")
    scenario = raw.get("scenario", "to-earliest")
    fields = join([
        el("input", type="hidden", name=csrf.FIELD, value=token),
        el("input", type="hidden", name="previewed", value=previewed) if previewed else "",
        el("fieldset", el("legend", "Scope"),
           el("label", el("input", type="radio", name="scope", value="all-topics", checked=scope != "topics"),
              " every partition the group has committed (--all-topics)"),
           el("label", el("input", type="radio", name="scope", value="topics", checked=scope == "topics"),
              " topics (--topic): ",
              el("input", type="text", name="topics", value=raw.get("topics", ""), placeholder="orders orders:0,2",
                 size=40))),
        el("fieldset", el("legend", "Scenario"),
           el("label", "Reset ", el("select", join(_option(k, f"{label} (--{k})", k == scenario)
                                                  for k, (label, _) in SCENARIOS.items()), name="scenario", id="scenario")),
           el("label", " value ", el("input", type="text", name="value", id="scenario-value",
                                     value=raw.get("value", ""), size=32)),
           el("p", join(el("span", f"--{k}: {hint}", data_scenario=k, class_="hint")
                        for k, (_, hint) in SCENARIOS.items() if hint), class_="hints")),
        el("p", el("button", "Preview (dry run)", type="submit", name="action", value="preview",
                   disabled=not admin_enabled),
           " ",
           el("button", "Execute", type="submit", name="action", value="execute", class_="danger",
              disabled=not admin_enabled or previewed is None)),
    ])
    parts.append(el("form", fields, method="post", action=_group_link(group_id, "/reset"), id="reset-form"))
    if plan is not None:
        title = "Offsets committed" if executed else "Preview (dry run: nothing changed)"
        for warning in plan.warnings:
            parts.append(el("p", "Warn: ", warning, class_="notice warn"))
        headers = ["Group", "Topic", "Partition", "Current offset", "New offset"] + (["Result"] if executed else [])
        rows = [[plan.group_id, r.topic, r.partition, r.current, r.new_offset] + ([r.result] if executed else [])
                for r in plan.rows]
        parts += [el("h2", title), _table(headers, rows, id_="plan-table", empty="The plan is empty.")]
    return page(f"Reset offsets of {group_id}", join(parts), active="/")


def topics_page(rows: Sequence[TopicRow]) -> str:
    table = _table(["Topic", "Partitions", "Log start (sum)", "Log end (sum)", "Records", "Groups with offsets"],
                   [[r.topic, r.partitions, r.log_start, r.log_end, r.records,
                     join((el("a", g, href=_group_link(g)) for g in r.groups), ", ") if r.groups else DASH]
                    for r in rows], id_="topics-table", empty="No topics.")
    return page("Topics", table, active="/topics")


def cluster_page(info: ClusterInfo) -> str:
    parts: list[Markup] = []
    if info.cluster_mode:
        parts.append(el("p", f"Cluster mode: {len(info.nodes)} nodes; controller ", el("strong", _v(info.controller_id)),
                        "."))
    else:
        parts.append(el("p", "Single node: not part of a cluster (zookeeper.connect is not set); this node leads "
                        "every partition and coordinates every group.", class_="notice", id="single-node"))
    parts.append(el("h2", "Nodes"))
    parts.append(_table(["Node", "Host", "Port", "Rack", "Controller"],
                        [[n.get("node_id", n.get("id")), n.get("host"), n.get("port"), n.get("rack"),
                          "yes" if n.get("node_id", n.get("id")) == info.controller_id else ""]
                         for n in info.nodes], id_="nodes-table"))
    parts.append(el("h2", "Coordinator partitions"))
    parts.append(_table(["Topic", "Partition", "State", "Load time"],
                        [[c.topic, c.partition, c.state, DASH if c.load_time_ms is None else f"{c.load_time_ms:g} ms"]
                         for c in info.coordinators], id_="coordinators-table", empty="No coordinator partitions loaded."))
    parts.append(el("h2", "Partitions"))
    parts.append(_table(["Topic", "Partition", "Leader", "ISR", "Replicas", "Log start", "Log end", "Local"],
                        [[p.topic, p.partition, p.leader, ",".join(map(str, p.isr)) or DASH,
                          ",".join(map(str, p.replicas)) or DASH, p.log_start, p.log_end, "yes" if p.local else "no"]
                         for p in info.partitions], id_="partitions-table", empty="No partitions."))
    return page("Cluster", join(parts), active="/cluster")


def not_found_page(text: str) -> str:
    return page("Not found", el("p", text, class_="notice error"))


def message_page(title: str, text: str) -> str:
    return page(title, el("p", text, class_="notice error", role="alert"))
