"""The plan of ``groupcoord zk-offsets migrate`` (coordinator/tools/zk_migration.py): pure tests."""

from __future__ import annotations

import pytest

from coordinator.tools.zk_migration import TO_KAFKA, TO_ZOOKEEPER, format_plan, moved_offsets, plan_migration

ZK = {("t", 0): 10, ("t", 1): 20, ("t", 2): 30, ("u", 0): 5}
KAFKA = {("t", 0): 7, ("t", 1): 25, ("t", 2): 30, ("v", 0): 9}


def test_to_kafka_moves_only_forward() -> None:
    rows = plan_migration("g", ZK, KAFKA, TO_KAFKA)
    assert [(r.topic, r.partition, r.action) for r in rows] == [
        ("t", 0, "moves"), ("t", 1, "kept: other side newer"), ("t", 2, "kept: same offset"),
        ("u", 0, "moves"), ("v", 0, "kept: nothing to move")]
    assert moved_offsets(rows, TO_KAFKA) == {("t", 0): 10, ("u", 0): 5}


def test_to_zookeeper_is_the_mirror() -> None:
    rows = plan_migration("g", ZK, KAFKA, TO_ZOOKEEPER)
    assert [r.action for r in rows] == ["kept: other side newer", "moves", "kept: same offset",
                                        "kept: nothing to move", "moves"]
    assert moved_offsets(rows, TO_ZOOKEEPER) == {("t", 1): 25, ("v", 0): 9}


def test_bad_direction() -> None:
    with pytest.raises(ValueError, match="to-kafka or to-zookeeper"):
        plan_migration("g", {}, {}, "sideways")


def test_table() -> None:
    text = format_plan(plan_migration("billing", {("payments", 0): 12}, {("payments", 1): 3}, TO_KAFKA))
    assert text.splitlines() == [
        "GROUP   TOPIC    PARTITION ZK-OFFSET KAFKA-OFFSET ACTION",
        "billing payments 0         12        -            moves",
        "billing payments 1         -         3            kept: nothing to move",
    ]
