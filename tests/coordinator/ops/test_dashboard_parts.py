"""The dashboard's pure parts: escaping, the SVG chart, CSRF tokens, HTTP Basic parsing and
checking, and the cluster page of a node in cluster mode."""

from __future__ import annotations

import asyncio
import base64
import xml.etree.ElementTree as ET
from types import SimpleNamespace

from coordinator.ops.dashboard.basic_auth import BasicAuth, parse_basic
from coordinator.ops.dashboard.chart import lag_chart
from coordinator.ops.dashboard.csrf import CsrfTokens
from coordinator.ops.dashboard.markup import Markup, el, escape, path_segment
from coordinator.ops.dashboard.pages import cluster_page
from coordinator.ops.dashboard.rows import cluster_info
from coordinator.ops.state_view import CoordinatorPartitionView, NodeView, PartitionView
from coordinator.security.sasl.scram_formatter import make_credential

SVG = "{http://www.w3.org/2000/svg}"


def test_values_are_escaped_and_markup_is_not() -> None:
    assert escape('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    assert el("td", "<b>", title='"q"') == '<td title="&quot;q&quot;">&lt;b&gt;</td>'
    assert el("td", el("b", "x")) == "<td><b>x</b></td>"
    assert escape(Markup("<i>")) == "<i>"
    assert el("input", disabled=True, value=None) == "<input disabled>"
    assert path_segment("a/b c?") == "a%2Fb%20c%3F"


def test_the_lag_chart_is_svg_with_one_point_per_sample() -> None:
    svg = ET.fromstring(lag_chart([(2_000, 10), (1_000, 40), (3_000, 0)]))
    assert svg.tag == f"{SVG}svg"
    (line,) = svg.iter(f"{SVG}polyline")
    xs = [float(p.split(",")[0]) for p in line.get("points", "").split()]
    ys = [float(p.split(",")[1]) for p in line.get("points", "").split()]
    assert xs == sorted(xs)  # time order, whatever order the samples came in
    assert ys[0] < ys[1] < ys[2]  # 40 highest on the page (smallest y), 0 at the bottom
    assert len(list(svg.iter(f"{SVG}circle"))) == 3
    assert "latest 0" in svg.get("aria-label", "")
    empty = ET.fromstring(lag_chart([]))
    assert not list(empty.iter(f"{SVG}polyline")) and "no samples yet" in "".join(empty.itertext())
    single = ET.fromstring(lag_chart([(5_000, 7)]))
    assert len(list(single.iter(f"{SVG}circle"))) == 1


def test_csrf_tokens_are_the_hmac_of_the_cookie() -> None:
    tokens = CsrfTokens(b"k" * 32)
    nonce = tokens.new_nonce()
    assert tokens.valid(nonce, tokens.token_for(nonce))
    assert not tokens.valid(nonce, tokens.token_for(nonce + "x"))
    assert not tokens.valid(nonce, CsrfTokens(b"j" * 32).token_for(nonce))  # another process' secret
    assert not tokens.valid(None, tokens.token_for(nonce)) and not tokens.valid(nonce, None)
    assert tokens.sign("preview", "x") != tokens.sign("csrf", "x")


def test_basic_credentials_are_parsed_strictly() -> None:
    def header(raw: bytes) -> str:
        return "Basic " + base64.b64encode(raw).decode()

    assert parse_basic(header(b"alice:pa:ss")) == ("alice", "pa:ss")
    assert parse_basic(header("zoë:pw".encode())) == ("zoë", "pw")
    for bad in [None, "", "Bearer x", "Basic !!!", header(b"no-colon"), header(b":pw"), header(b"\xff:pw")]:
        assert parse_basic(bad) is None, bad


def test_basic_auth_checks_plain_and_scram_users() -> None:
    scram = SimpleNamespace(
        users=lambda: {"carol": {}},
        get=lambda user, mech: make_credential(mech, "carol-pw", iterations=4096) if user == "carol" else None)
    auth = BasicAuth({"alice": "alice-pw"}, scram)
    assert auth.required()
    assert not BasicAuth({}, SimpleNamespace(users=lambda: {})).required()

    def principal(user: str, password: str) -> str | None:
        return asyncio.run(auth.principal("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()))

    assert principal("alice", "alice-pw") == "User:alice"
    assert principal("carol", "carol-pw") == "User:carol"
    assert principal("carol", "alice-pw") is None
    assert principal("alice", "carol-pw") is None
    assert principal("mallory", "x") is None


def test_cluster_page_lists_nodes_controller_and_standbys() -> None:
    view = SimpleNamespace(
        cluster=object(),
        nodes=lambda: [NodeView(1, "h1", 9092, "r1"), NodeView(2, "h2", 9092, None)],
        controller_id=lambda: 2,
        partitions=lambda: {("orders", 0): PartitionView(0, 10, 10, 1, (1, 2), (1, 2), True),
                            ("orders", 1): PartitionView(None, None, None, 2, (2,), (2, 1), False)},
        coordinator_partitions=lambda: [CoordinatorPartitionView("__consumer_offsets", 0, "active", 3.5),
                                        CoordinatorPartitionView("__consumer_offsets", 1, "standby", None)])
    info = cluster_info(SimpleNamespace(view=view))
    assert info.cluster_mode and info.controller_id == 2
    html = cluster_page(info)
    assert "Cluster mode: 2 nodes" in html and "Single node" not in html
    assert "<td>standby</td>" in html and "<td>3.5 ms</td>" in html
    assert "<td>1,2</td>" in html  # the ISR of orders-0
