"""The pipeline on KIP-848 consumer-group records (key versions 3-8 and 16): a ``__consumer_offsets``
log written by the server's log writer with ``protocol.consumer_group_records``, in the order
Kafka's coordinator writes them (a member's records, then the epoch bump, then the target
assignment, then the members' current assignments), read by the segment parser on both paths and
by the whole job, whose ``consumer_group_epochs`` and ``consumer_member_epochs`` tables must hold
the group's history: epochs, joins and leaves, target assignment epochs and member epochs."""

from __future__ import annotations

import asyncio
import random
import struct
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline.source.columns import arrow_schema, parse_segment
from pipeline.source.rows import topic_id_string
from pipeline.source.schema import CONSUMER_GROUP, CORRUPT, GROUP_METADATA, OFFSET_COMMIT, UNKNOWN
from pipeline.transforms import ConsumerGroupEvent, walk_consumer_group
from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRecordValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicMetadata,
    TopicPartitions,
    encode_key,
    encode_value,
)
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    serialize,
)
from protocol.records import build_batch
from storage.log import Log
from storage.options import offsets_topic_options

TS = 1_763_800_000_000
GROUP = "orders-app"
ORDERS = uuid.UUID("6a1f4c2e-8b3d-4e5f-9a0b-1c2d3e4f5a6b")
STABLE, UNREVOKED, UNRELEASED = 0, 1, 2


def cg(key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None) -> tuple[bytes, bytes | None]:
    return encode_key(key), None if value is None else encode_value(value)


def member(member_id: str, topics: tuple[str, ...] = ("orders",),
           regex: str | None = None) -> tuple[bytes, bytes | None]:
    return cg(ConsumerGroupMemberMetadataKey(GROUP, member_id),
              ConsumerGroupMemberMetadataValue(None, "rack-a", f"client-{member_id}", "/10.0.0.1", topics, regex,
                                               45_000, "uniform"))


def epoch(n: int | None) -> tuple[bytes, bytes | None]:
    return cg(ConsumerGroupMetadataKey(GROUP), None if n is None else ConsumerGroupMetadataValue(n))


def target(member_id: str, partitions: tuple[int, ...] | None) -> tuple[bytes, bytes | None]:
    return cg(ConsumerGroupTargetAssignmentMemberKey(GROUP, member_id),
              None if partitions is None else
              ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(ORDERS, partitions),)))


def target_epoch(n: int | None) -> tuple[bytes, bytes | None]:
    return cg(ConsumerGroupTargetAssignmentMetadataKey(GROUP),
              None if n is None else ConsumerGroupTargetAssignmentMetadataValue(n))


def current(member_id: str, member_epoch: int, previous: int, state: int, owned: tuple[int, ...],
            revoking: tuple[int, ...] = ()) -> tuple[bytes, bytes | None]:
    return cg(ConsumerGroupCurrentMemberAssignmentKey(GROUP, member_id),
              ConsumerGroupCurrentMemberAssignmentValue(
                  member_epoch, previous, state, (TopicPartitions(ORDERS, owned),) if owned else (),
                  (TopicPartitions(ORDERS, revoking),) if revoking else ()))


def left(member_id: str) -> list[tuple[bytes, bytes | None]]:
    """A member's tombstones in Kafka's order (current assignment, target, subscription)."""
    return [cg(ConsumerGroupCurrentMemberAssignmentKey(GROUP, member_id), None), target(member_id, None),
            cg(ConsumerGroupMemberMetadataKey(GROUP, member_id), None)]


def history() -> list[bytes]:
    """Batches of one coordinator partition: a consumer group through three epochs, its deletion
    and a new life under the same name, beside a classic group and offset commits."""
    batches = [
        # m1 joins: epoch 1, target epoch 1, m1 at epoch 1 owning all four partitions.
        [member("m1"), cg(ConsumerGroupPartitionMetadataKey(GROUP),
                          ConsumerGroupPartitionMetadataValue((TopicMetadata(ORDERS, "orders", 4),))),
         epoch(1), target("m1", (0, 1, 2, 3)), target_epoch(1), current("m1", 1, 0, STABLE, (0, 1, 2, 3))],
        # m2 joins with a regex: epoch 2; m1 must give up 2 and 3 first, m2 waits for them.
        [member("m2", (), "orders.*"),
         cg(ConsumerGroupRegularExpressionKey(GROUP, "orders.*"),
            ConsumerGroupRegularExpressionValue(("orders",), 7, TS + 900)),
         epoch(2), target("m1", (0, 1)), target("m2", (2, 3)), target_epoch(2),
         current("m2", 2, 0, UNRELEASED, ()), current("m1", 1, 1, UNREVOKED, (0, 1), (2, 3))],
        [serialize(OffsetCommitKey(GROUP, "orders", p), OffsetCommitValue(10 + p, "", TS + 1500)) for p in range(4)],
        # m1 revoked them: both at epoch 2.
        [current("m1", 2, 1, STABLE, (0, 1)), current("m2", 2, 0, STABLE, (2, 3))],
        # m1 leaves: epoch 3, m2 takes everything.
        [*left("m1"), epoch(3), target("m2", (0, 1, 2, 3)), target_epoch(3), current("m2", 3, 2, STABLE, (0, 1, 2, 3))],
        # A classic group beside it.
        [serialize(GroupMetadataKey("classic"), GroupMetadataValue(
            "consumer", 1, "range", "c1", TS, (MemberMetadata("c1", "client", "/h", 300, 100, b"", b""),)))],
        # DeleteGroups: every record of the group gets its tombstone, the epoch's last.
        [*left("m2"), cg(ConsumerGroupRegularExpressionKey(GROUP, "orders.*"), None), target_epoch(None),
         cg(ConsumerGroupPartitionMetadataKey(GROUP), None), epoch(None)],
        # The name again: m3 joins; no target assignment yet (KIP-1263's assignment interval).
        [member("m3"), epoch(1)],
    ]
    return [build_batch(records, timestamp_ms=TS + 1000 * i) for i, records in enumerate(batches)]


def write_log(root: Path, partition: int, batches: list[bytes]) -> Path:
    async def go() -> None:
        log = Log.open(root, "__consumer_offsets", partition, offsets_topic_options())
        for b in batches:
            await log.append(b)
        await log.close()

    asyncio.run(go())
    (segment,) = sorted((root / f"__consumer_offsets-{partition}").glob("*.log"))
    return segment


def rows(source: Path | bytes, fast: bool = True) -> list[dict[str, Any]]:
    table = pa.Table.from_batches(list(parse_segment(source, 3, 0, fast=fast)), schema=arrow_schema())
    return sorted(table.to_pylist(), key=lambda r: (r["offset"] < 0, r["offset"]))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kip848")
    write_log(root, 3, history())
    return root


def test_every_kip_848_record_is_decoded_on_both_paths(data_dir: Path) -> None:
    segment = data_dir / "__consumer_offsets-3" / "00000000000000000000.log"
    got = rows(segment)
    assert got == rows(segment, fast=False)
    assert [r["offset"] for r in got] == list(range(len(got)))
    assert not [r for r in got if r["record_type"] in (UNKNOWN, CORRUPT)]
    kinds = [(r["record_type"], r["key_version"], r["is_tombstone"]) for r in got]
    assert kinds[:6] == [(CONSUMER_GROUP, v, False) for v in (5, 4, 3, 7, 6, 8)]
    assert sum(k[0] == OFFSET_COMMIT for k in kinds) == 4 and sum(k[0] == GROUP_METADATA for k in kinds) == 1
    m1, partition_metadata, epoch1, target1, target_epoch1, current1 = got[:6]
    assert all(r["group_id"] == GROUP and r["value_version"] == 0 for r in got[:6])
    assert (m1["member_id"], m1["consumer_member"]) == ("m1", {
        "instance_id": None, "rack_id": "rack-a", "client_id": "client-m1", "client_host": "/10.0.0.1",
        "subscribed_topic_names": ["orders"], "subscribed_topic_regex": None, "rebalance_timeout_ms": 45_000,
        "server_assignor": "uniform", "classic_protocol": False})
    assert partition_metadata["subscribed_topics"] == [
        {"topic_id": topic_id_string(ORDERS), "topic_name": "orders", "num_partitions": 4}]
    assert topic_id_string(ORDERS) == "ah9MLos9Tl-aCxwtPk9aaw"  # Kafka's Uuid.toString()
    assert (epoch1["group_epoch"], target_epoch1["assignment_epoch"]) == (1, 1)
    assert (target1["member_id"], target1["assigned_partitions"]) == (
        "m1", [{"topic_id": topic_id_string(ORDERS), "partitions": [0, 1, 2, 3]}])
    assert (current1["member_epoch"], current1["previous_member_epoch"], current1["member_state"],
            current1["partitions_pending_revocation"]) == (1, 0, STABLE, [])
    (regex,) = [r for r in got if r["key_version"] == 16 and not r["is_tombstone"]]
    assert (regex["regular_expression"], regex["resolved_topics"], regex["regex_metadata_version"],
            regex["regex_resolved_ms"]) == ("orders.*", ["orders"], 7, TS + 900)
    (revoking,) = [r for r in got if r["member_state"] == UNREVOKED]
    assert revoking["partitions_pending_revocation"] == [{"topic_id": topic_id_string(ORDERS), "partitions": [2, 3]}]
    tombstones = [(r["key_version"], r["member_id"], r["regular_expression"]) for r in got
                  if r["record_type"] == CONSUMER_GROUP and r["is_tombstone"]]
    assert tombstones == [(8, "m1", None), (7, "m1", None), (5, "m1", None), (8, "m2", None), (7, "m2", None),
                          (5, "m2", None), (16, None, "orders.*"), (6, None, None), (4, None, None), (3, None, None)]


def test_an_unknown_value_version_is_an_unknown_row_and_a_malformed_record_a_corrupt_batch() -> None:
    newer = build_batch([(encode_key(ConsumerGroupMemberMetadataKey(GROUP, "m9")), struct.pack(">h", 1) + b"\x00" * 8)],
                        timestamp_ms=TS)
    (row,) = rows(newer)
    assert (row["record_type"], row["key_version"], row["value_version"], row["group_id"], row["member_id"]) == (
        UNKNOWN, 5, 1, GROUP, "m9")
    assert rows(newer) == rows(newer, fast=False)
    # A key version 5 with the group but no member id: bytes that do not parse, as for a classic record.
    broken = build_batch([(struct.pack(">h", 5) + b"\x00\x01g", encode_value(ConsumerGroupMetadataValue(1)))],
                         timestamp_ms=TS)
    (row,) = rows(broken)
    assert row["record_type"] == CORRUPT and "record at offset 0" in row["error"]


def _events(batches: list[list[tuple[int, bool, str | None, int | None]]]) -> list[ConsumerGroupEvent]:
    out: list[ConsumerGroupEvent] = []
    for kind, tombstone, member_id, number in (e for batch in batches for e in batch):
        out.append({"log_partition": 0, "offset": len(out), "key_version": kind, "is_tombstone": tombstone,
                    "time_ms": 100 * len(out), "member_id": member_id,
                    "group_epoch": number if kind == 3 else None, "assignment_epoch": number if kind == 6 else None})
    return out


def test_walking_a_group_gives_its_epochs_whatever_the_order_of_the_events() -> None:
    events = _events([
        [(5, False, "a", None), (3, False, None, 1), (6, False, None, 1)],
        [(5, False, "b", None), (5, False, "a", None), (3, False, None, 2), (6, False, None, 2)],
        [(5, True, "a", None), (5, False, "c", None), (3, False, None, 3)],  # no target for epoch 3
        [(6, False, None, 3)],  # computed later: still epoch 3's
        [(5, True, "b", None), (5, True, "c", None), (6, True, None, None), (3, True, None, None)],
        [(5, False, "a", None), (3, False, None, 1)],
    ])
    expected = [
        {"incarnation": 0, "group_epoch": 1, "time_ms": 100, "target_assignment_epoch": 1, "member_ids": ["a"],
         "joined": ["a"], "left": [], "log_offset": 1},
        {"incarnation": 0, "group_epoch": 2, "time_ms": 500, "target_assignment_epoch": 2, "member_ids": ["a", "b"],
         "joined": ["b"], "left": [], "log_offset": 5},
        {"incarnation": 0, "group_epoch": 3, "time_ms": 900, "target_assignment_epoch": 3,
         "member_ids": ["b", "c"], "joined": ["c"], "left": ["a"], "log_offset": 9},
        {"incarnation": 1, "group_epoch": 1, "time_ms": 1600, "target_assignment_epoch": None, "member_ids": ["a"],
         "joined": ["a"], "left": [], "log_offset": 16},
    ]
    assert walk_consumer_group(events) == expected
    shuffled = list(events)
    random.Random(848).shuffle(shuffled)
    assert walk_consumer_group(shuffled) == expected
    assert walk_consumer_group([]) == []


@pytest.mark.slow
def test_the_job_writes_the_consumer_group_history(spark: Any, data_dir: Path, tmp_path: Path) -> None:
    from pipeline.cli import run_job

    out = tmp_path / "out"
    result = run_job(spark, str(data_dir), str(out), now_ms=TS + 10_000)

    def table(name: str) -> list[dict[str, Any]]:
        return [r.asDict(recursive=True) for r in spark.read.parquet(str(out / name)).collect()]

    epochs = sorted(table("consumer_group_epochs"), key=lambda r: r["log_offset"])
    assert [(r["group_id"], r["incarnation"], r["group_epoch"], r["target_assignment_epoch"], r["member_count"],
             r["member_ids"], r["joined"], r["left"]) for r in epochs] == [
        (GROUP, 0, 1, 1, 1, ["m1"], ["m1"], []),
        (GROUP, 0, 2, 2, 2, ["m1", "m2"], ["m2"], []),
        (GROUP, 0, 3, 3, 1, ["m2"], [], ["m1"]),
        (GROUP, 1, 1, None, 1, ["m3"], ["m3"], []),
    ]
    assert [int(r["time"].timestamp() * 1000) for r in epochs] == [TS, TS + 1000, TS + 4000, TS + 7000]

    members = sorted(table("consumer_member_epochs"), key=lambda r: r["log_offset"])
    assert [(r["group_id"], r["incarnation"], r["member_id"], r["previous_member_epoch"], r["member_epoch"],
             r["state"], r["assigned_count"], r["pending_revocation_count"]) for r in members] == [
        (GROUP, 0, "m1", 0, 1, "STABLE", 4, 0),
        (GROUP, 0, "m2", 0, 2, "UNRELEASED_PARTITIONS", 0, 0),
        (GROUP, 0, "m1", 1, 1, "UNREVOKED_PARTITIONS", 2, 2),
        (GROUP, 0, "m1", 1, 2, "STABLE", 2, 0),
        (GROUP, 0, "m2", 0, 2, "STABLE", 2, 0),
        (GROUP, 0, "m2", 2, 3, "STABLE", 4, 0),
    ]
    assert members[2]["partitions_pending_revocation"] == [{"topic_id": topic_id_string(ORDERS), "partitions": [2, 3]}]

    # The classic tables are the classic group's alone; the consumer group's commits are offsets like any.
    assert [r["group_id"] for r in table("generations")] == ["classic"]
    assert sorted((r["group_id"], r["partition"], r["committed_offset"]) for r in table("latest_offsets")) == [
        (GROUP, p, 10 + p) for p in range(4)]
    totals = result["totals"]
    assert (totals["consumer_group"], totals["group_epochs"], totals["generations"]) == (32, 4, 1)
    report = (out / "report.md").read_text()
    assert "32 consumer-group (KIP-848)" in report and "consumer group epochs (KIP-848): 4;" in report
