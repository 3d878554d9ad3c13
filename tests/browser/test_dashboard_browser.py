"""The dashboard in a real browser: headless Chromium (Debian's package, through Playwright) on a
live node whose groups kafka-python consumers made. It checks what a person sees on each page —
the group row with its lag, the filter narrowing the list, the group's members and lag chart, a
reset previewed and then executed, the cluster page — and saves a screenshot of each
(tests/browser/artifacts/)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.browser.live_node import ACTIVE, EVIL, IDLE, RECORDS, TOPIC, LiveNode, live_node

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[LiveNode]:
    with live_node(tmp_path) as n:
        yield n


def test_dashboard_pages_in_chromium(node: LiveNode, browser_page: Any, screenshot: Callable[[str], Path]) -> None:
    from playwright.sync_api import expect

    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

    # The groups list: each group's row with its state and lag.
    page.goto(node.url + "/")
    expect(page.locator("h1")).to_have_text("Consumer groups")
    active_row = page.locator("#groups-table tbody tr", has_text=ACTIVE)
    expect(active_row).to_contain_text("Stable")
    expect(active_row.locator("td").nth(6)).to_have_text(str(RECORDS - 10))
    expect(page.locator("#groups-table tbody tr", has_text=EVIL)).to_have_count(1)  # an HTML id, shown as text
    screenshot("groups")

    # The filter box narrows the list as one types.
    page.fill("#group-filter", "idle")
    visible = page.locator("#groups-table tbody tr:visible")
    expect(visible).to_have_count(1)
    expect(visible).to_contain_text(IDLE)
    screenshot("groups-filtered")
    page.fill("#group-filter", "")
    expect(page.locator("#groups-table tbody tr:visible")).to_have_count(3)

    # A group's page: its member with client id and assignment, and the lag chart once sampled.
    page.click(f"#groups-table a:text-is('{ACTIVE}')")
    expect(page.locator("h1")).to_have_text(f"Group {ACTIVE}")
    expect(page.locator("#members-table")).to_contain_text("dash-active-client")
    expect(page.locator("#members-table")).to_contain_text(f"{TOPIC}:0,1")
    deadline = time.monotonic() + 15
    while page.locator("svg.lag-chart polyline").count() == 0:  # the lag monitor samples every 300 ms
        assert time.monotonic() < deadline, "no lag sample drawn"
        page.wait_for_timeout(300)
        page.reload()
    expect(page.locator("svg.lag-chart")).to_be_visible()
    expect(page.locator("#partitions-table tbody tr")).to_have_count(2)
    screenshot("group")

    # The reset form: a preview changes nothing, execute commits, the group page shows it.
    page.goto(f"{node.url}/groups/{quote(IDLE, safe='')}/reset")
    page.check("input[name=scope][value=all-topics]")
    page.select_option("#scenario", "to-earliest")
    expect(page.locator("#scenario-value")).to_be_disabled()  # the script: to-earliest takes no value
    expect(page.locator("button[value=execute]")).to_be_disabled()  # nothing previewed yet
    page.click("button[value=preview]")
    expect(page.locator("h2")).to_have_text("Preview (dry run: nothing changed)")
    expect(page.locator("button[value=execute]")).to_be_enabled()
    page.select_option("#scenario", "to-latest")  # a changed form waits for its own preview
    expect(page.locator("button[value=execute]")).to_be_disabled()
    page.select_option("#scenario", "to-earliest")
    page.click("button[value=preview]")
    expect(page.locator("#plan-table tbody tr")).to_have_count(2)
    expect(page.locator("#plan-table tbody tr").first).to_contain_text(f"{IDLE}{TOPIC}0{RECORDS // 2}0")
    screenshot("reset-preview")
    assert node.committed(IDLE) == {(TOPIC, 0): RECORDS // 2, (TOPIC, 1): RECORDS // 2}
    page.click("button[value=execute]")
    expect(page.locator("h2")).to_have_text("Offsets committed")
    expect(page.locator("#plan-table tbody")).to_contain_text("NONE")
    screenshot("reset-executed")
    assert node.committed(IDLE) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    page.goto(f"{node.url}/groups/{quote(IDLE, safe='')}")
    first = page.locator("#partitions-table tbody tr").first.locator("td")
    expect(first.nth(2)).to_have_text("0")  # committed
    expect(first.nth(4)).to_have_text(str(RECORDS // 2))  # lag

    # Topics and the cluster: one node, and it says so.
    page.click("nav a:text-is('Topics')")
    expect(page.locator("#topics-table")).to_contain_text(TOPIC)
    screenshot("topics")
    page.click("nav a:text-is('Cluster')")
    expect(page.locator("#single-node")).to_contain_text("Single node")
    expect(page.locator("#coordinators-table")).to_contain_text("__consumer_offsets")
    screenshot("cluster")
    assert errors == []
