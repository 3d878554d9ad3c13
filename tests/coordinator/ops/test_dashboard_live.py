"""The dashboard of a live node (``groupcoord serve`` with ``http.listen``) with groups made by
kafka-python consumers: every page with the real groups, and a reset that goes through the node's
own OffsetCommit handler — refused on an active group, nothing changed by a dry run, committed on
execute, with HTTP Basic naming the SASL user whose ACLs decide."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from typing import Any

import pytest

from tests.browser.live_node import ACTIVE, EVIL, IDLE, RECORDS, TOPIC, LiveNode, live_node
from tests.conftest import REPO

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveNode]:
    with live_node(tmp_path_factory.mktemp("dashboard-live"), sasl=True) as n:
        yield n


class Browser:
    """urllib with a cookie jar: what a form submission sends."""

    def __init__(self, node: LiveNode) -> None:
        self.node = node
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with self.opener.open(self.node.url + path, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def post(self, path: str, fields: dict[str, str], user: tuple[str, str] | None = None) -> tuple[int, str, Any]:
        request = urllib.request.Request(self.node.url + path, data=urllib.parse.urlencode(fields).encode())
        if user is not None:
            request.add_header("Authorization", "Basic " + base64.b64encode(":".join(user).encode()).decode())
        try:
            with self.opener.open(request, timeout=10) as r:
                return r.status, r.read().decode(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers

    def token(self, group: str) -> str:
        status, text = self.get(group_path(group, "/reset"))
        assert status == 200
        m = re.search(r'name="csrf_token" value="([0-9a-f]+)"', text)
        assert m, text
        return m.group(1)


def group_path(group: str, suffix: str = "") -> str:
    return "/groups/" + urllib.parse.quote(group, safe="") + suffix


def acls(node: LiveNode, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "coordinator", "acls", "--bootstrap-server", node.bootstrap, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_page_shows_the_real_groups(node: LiveNode) -> None:
    b = Browser(node)
    status, text = b.get("/")
    assert status == 200 and ACTIVE in text and IDLE in text and "Stable" in text
    active = next(g for g in node.get_json("/api/groups")["groups"] if g["group_id"] == ACTIVE)
    assert active["lag"] == RECORDS - 10 and active["members"] == 1
    status, text = b.get(group_path(ACTIVE))
    assert status == 200 and "dash-active-client" in text and "<svg" in text and TOPIC in text
    for path in [group_path(IDLE, "/reset"), "/topics", "/cluster", "/static/dashboard.js"]:
        assert b.get(path)[0] == 200, path
    assert "Single node" in b.get("/cluster")[1]
    # A group id that is HTML is shown as text.
    for path in ["/", group_path(EVIL), group_path(EVIL, "/reset")]:
        status, text = b.get(path)
        assert status == 200 and '<img src=x' not in text and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text


def test_reset_of_an_active_group_is_refused(node: LiveNode) -> None:
    b = Browser(node)
    token = b.token(ACTIVE)
    before = node.committed(ACTIVE)
    status, text, _ = b.post(group_path(ACTIVE, "/reset"), {
        "csrf_token": token, "scope": "all-topics", "scenario": "to-earliest", "action": "execute"},
        user=("alice", "alice-secret"))
    assert status == 400
    assert (f"Assignments can only be reset if the group &#x27;{ACTIVE}&#x27; is inactive, but the current state "
            "is Stable.") in text
    assert node.committed(ACTIVE) == before


def test_reset_needs_csrf_and_credentials_and_the_acls_decide(node: LiveNode) -> None:
    b = Browser(node)
    token = b.token(IDLE)
    fields = {"csrf_token": token, "scope": "topics", "topics": f"{TOPIC}:0", "scenario": "to-offset",
              "value": "3", "action": "preview"}
    before = node.committed(IDLE)
    assert before == {(TOPIC, 0): RECORDS // 2, (TOPIC, 1): RECORDS // 2}
    # No token, then no credentials, then a wrong password: refused before anything is planned.
    assert b.post(group_path(IDLE, "/reset"), {**fields, "csrf_token": "0" * 64}, ("alice", "alice-secret"))[0] == 403
    status, _, headers = b.post(group_path(IDLE, "/reset"), fields)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert b.post(group_path(IDLE, "/reset"), fields, ("alice", "nope"))[0] == 401
    # The dry run shows the plan and changes nothing.
    status, text, _ = b.post(group_path(IDLE, "/reset"), fields, ("alice", "alice-secret"))
    assert status == 200 and "Preview (dry run: nothing changed)" in text and "<td>20</td><td>3</td>" in text
    assert node.committed(IDLE) == before
    fields["previewed"] = re.search(r'name="previewed" value="([0-9a-f]+)"', text).group(1)  # type: ignore[union-attr]
    # bob has no ACL: the OffsetCommit handler refuses him.
    status, text, _ = b.post(group_path(IDLE, "/reset"), {**fields, "action": "execute"}, ("bob", "bob-secret"))
    assert status == 200 and "GROUP_AUTHORIZATION_FAILED" in text
    assert node.committed(IDLE) == before
    # alice with READ on the group and the topic (what OffsetCommit needs) commits.
    acls(node, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", IDLE)
    acls(node, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", TOPIC)
    status, text, _ = b.post(group_path(IDLE, "/reset"), {**fields, "action": "execute"}, ("alice", "alice-secret"))
    assert status == 200 and "Offsets committed" in text and "<td>NONE</td>" in text, text
    assert node.committed(IDLE) == {(TOPIC, 0): 3, (TOPIC, 1): RECORDS // 2}
