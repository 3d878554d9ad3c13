"""Stock kafkajs 2.2.4 admin client bootstraps against the server."""

from __future__ import annotations

import pytest

from tests.clients.tools import CLUSTER_ID_RE, NODE_ID, run_node, unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]


def test_kafkajs_admin_bootstrap(server) -> None:  # type: ignore[no-untyped-def]
    topic = unique_topic("kafkajs-admin")
    res = run_node("admin_bootstrap.js", [server.bootstrap, topic, "3", "5"], timeout=60).check()
    r = res.json()
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]

    assert r["connect"] is True, ctx

    cluster = r["cluster"]
    assert "error" not in cluster, ctx
    assert CLUSTER_ID_RE.match(cluster["clusterId"] or ""), ctx
    assert cluster["controller"] == NODE_ID, ctx
    assert cluster["brokers"] == [{"nodeId": NODE_ID, "host": server.host, "port": server.port}], ctx

    # createTopics resolves true when created, false when the topic already exists
    assert r["create"] is True, ctx
    assert r["createAgain"] is False, ctx

    assert r["list"] is True, ctx
    d = r["describe"]
    assert d == {
        "found": True,
        "partitions": 3,
        "partitionIds": [0, 1, 2],
        "leaders": [NODE_ID] * 3,
        "replicas": [[NODE_ID]] * 3,
        "isr": [[NODE_ID]] * 3,
        "errors": [0] * 3,
    }, ctx

    assert r["grow"] is True, ctx
    g = r["afterGrow"]
    assert g.get("partitions") == 5 and g.get("leaders") == [NODE_ID] * 5, ctx

    assert r["delete"] is True, ctx
    assert r["listAfterDelete"] is False, ctx
    assert r["disconnect"] is True, ctx
