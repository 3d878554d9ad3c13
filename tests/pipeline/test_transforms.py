"""The analytics on tiny hand-built tables (one shared Spark session), and Burrow's rules on
their own (plain Python)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from coordinator.lag.burrow import PartitionWindow
from pipeline import transforms as T
from pipeline.source.schema import CONTROL, GROUP_METADATA, OFFSET_COMMIT, RAW_COLUMNS, RAW_SCHEMA


def raw_row(offset: int, **fields: Any) -> tuple:
    row = {c: None for c in RAW_COLUMNS}
    row.update(log_partition=0, segment_base_offset=0, offset=offset, is_tombstone=False, batch_timestamp_ms=offset)
    row.update(fields)
    return tuple(row[c] for c in RAW_COLUMNS)


def commit(offset: int, group: str, partition: int, value: int | None, ts: int = 0, **kw: Any) -> tuple:
    return raw_row(offset, record_type=OFFSET_COMMIT, group_id=group, topic="t", partition=partition,
                   committed_offset=value, is_tombstone=value is None, commit_timestamp_ms=ts if value is not None else None,
                   **kw)


def member(mid: str) -> dict[str, Any]:
    return {"member_id": mid, "group_instance_id": None, "client_id": "c", "client_host": "/h",
            "rebalance_timeout_ms": 1, "session_timeout_ms": 1, "subscription": b"", "assignment": b""}


def generation(offset: int, group: str, gen: int, members: list[str]) -> tuple:
    return raw_row(offset, record_type=GROUP_METADATA, group_id=group, generation=gen, protocol_type="consumer",
                   protocol="range", leader=members[0] if members else None, members=[member(m) for m in members])


@pytest.fixture
def raw(spark: Any) -> Any:
    rows = [
        commit(0, "a", 0, 5, ts=1_000),
        commit(1, "a", 0, 9, ts=2_000),  # later commit wins
        commit(2, "a", 1, 3, ts=2_000),
        commit(3, "a", 1, None),  # then deleted
        commit(4, "b", 0, 7, ts=3_000, expire_timestamp_ms=4_000),
        generation(5, "a", 1, ["m1"]),
        generation(6, "a", 2, ["m1", "m2"]),
        generation(7, "a", 3, ["m2", "m3"]),
        raw_row(8, record_type=GROUP_METADATA, group_id="b", is_tombstone=True),  # group gone, offsets stay
        # c: committed, deleted (offset and group tombstones in one batch), then created again.
        commit(9, "c", 0, 4, ts=500),
        generation(10, "c", 1, ["x"]),
        commit(11, "c", 0, None, batch_timestamp_ms=12),
        raw_row(12, record_type=GROUP_METADATA, group_id="c", is_tombstone=True),
        generation(13, "c", 1, ["y"]),
    ]
    return spark.createDataFrame(rows, RAW_SCHEMA)


def test_latest_offsets_follow_the_servers_replay(raw: Any) -> None:
    got = sorted((r["group_id"], r["partition"], r["committed_offset"]) for r in T.latest_offsets(raw).collect())
    assert got == [("a", 0, 9), ("b", 0, 7)]


def test_transactional_commits_count_after_a_commit_marker_and_by_their_own_log_position(spark: Any) -> None:
    def txn(offset: int, pid: int, group: str, value: int) -> tuple:
        return commit(offset, group, 0, value, ts=offset, producer_id=pid, is_transactional=True)

    def marker(offset: int, pid: int, commit_it: bool) -> tuple:
        return raw_row(offset, record_type=CONTROL, producer_id=pid, is_transactional=True, is_control=True,
                       control_type=1 if commit_it else 0)

    rows = [
        txn(0, 7, "a", 5), marker(1, 7, True),                        # a: committed -> 5
        commit(2, "b", 0, 3, ts=2), txn(3, 8, "b", 9), marker(4, 8, False),  # b: aborted -> stays 3
        txn(5, 9, "c", 1), commit(6, "c", 0, 2, ts=6), marker(7, 9, True),  # c: the later plain commit wins
        txn(8, 7, "d", 4),                                           # d: pending (7's next transaction)
        txn(9, 10, "e", 6), txn(10, 11, "e", 7), marker(11, 11, True), marker(12, 10, True),  # e: 7 (later record)
    ]
    raw = spark.createDataFrame(rows, RAW_SCHEMA)
    got = sorted((r["group_id"], r["committed_offset"]) for r in T.latest_offsets(raw).collect())
    assert got == [("a", 5), ("b", 3), ("c", 2), ("e", 7)]
    pending = [(r["producer_id"], r["group_id"], r["committed_offset"]) for r in T.pending_offsets(raw).collect()]
    assert pending == [(7, "d", 4)]
    history = sorted((r["group_id"], r["committed_offset"]) for r in T.commit_history(raw).collect())
    assert history == [("a", 5), ("b", 3), ("c", 1), ("c", 2), ("e", 6), ("e", 7)]  # no aborted or pending ones


def test_expired_and_deleted_offsets(raw: Any) -> None:
    got = sorted((r["group_id"], r["partition"], r["last_committed_offset"], r["kind"])
                 for r in T.expired_offsets(raw, now_ms=10_000).collect())
    assert got == [("a", 1, 3, "removed"), ("b", 0, 7, "expiry due"), ("c", 0, 4, "removed with group")]


def test_generations_and_membership_changes(raw: Any) -> None:
    gens = T.group_generations(raw)
    assert sorted((r["group_id"], r["incarnation"], r["generation"], r["member_count"], r["leader"])
                  for r in gens.collect()) == [
        ("a", 0, 1, 1, "m1"), ("a", 0, 2, 2, "m1"), ("a", 0, 3, 2, "m2"), ("c", 0, 1, 1, "x"), ("c", 1, 1, 1, "y")]
    changes = sorted((r["group_id"], r["incarnation"], r["generation"], r["joined"], r["left"])
                     for r in T.membership_changes(gens).collect())
    assert changes == [("a", 0, 1, ["m1"], []), ("a", 0, 2, ["m2"], []), ("a", 0, 3, ["m3"], ["m1"]),
                       ("c", 0, 1, ["x"], []), ("c", 1, 1, ["y"], [])]


def test_commit_rate_counts_per_window(raw: Any) -> None:
    got = [(r["group_id"], r["commits"]) for r in T.commit_rate(raw, "1 minute").orderBy("group_id").collect()]
    assert got == [("a", 3), ("b", 1), ("c", 1)]


def test_lag_and_burrow_status_end_to_end(spark: Any, raw: Any) -> None:
    ends = spark.createDataFrame([("t", 0, 20), ("t", 1, 3)], "topic STRING, partition INT, log_end_offset LONG")
    end_history = spark.createDataFrame([("t", 0, 10, 500), ("t", 0, 20, 2_500)],
                                        "topic STRING, partition INT, end_offset LONG, batch_max_timestamp_ms LONG")
    latest = T.latest_offsets(raw)
    lag = T.consumer_lag(latest, ends)
    assert sorted((r["group_id"], r["lag"]) for r in lag.collect()) == [("a", 11), ("b", 13)]
    with_lag = T.lag_at_commits(T.commit_history(raw), end_history)
    lags = sorted((r["group_id"], r["partition"], r["committed_offset"], r["lag_then"]) for r in with_lag.collect())
    # c/0 at 500 ms: the end offset then was 10 (the batch stamped 500 counts).
    assert lags == [("a", 0, 5, 5), ("a", 0, 9, 1), ("a", 1, 3, 0), ("b", 0, 7, 13), ("c", 0, 4, 6)]
    status = T.burrow_status(with_lag, lag, now_ms=2_500)
    got = sorted((r["group_id"], r["partition"], r["status"], r["window_commits"]) for r in status.collect())
    # a/0: offsets advance, lag falls: OK. b/0: lag, and its offset never moved in the window:
    # STALL. a/1 and c/0 are deleted: no status.
    assert got == [("a", 0, "OK", 2), ("b", 0, "STALL", 1)]
    groups = sorted((r["group_id"], r["status"], r["burrow_status"]) for r in T.group_status(status).collect())
    assert groups == [("a", "OK", "OK"), ("b", "STALL", "ERR")]


def w(*entries: tuple[int, int, int]) -> list[dict[str, int]]:
    return [{"ts": ts, "offset": o, "lag": lag} for ts, o, lag in entries]


@pytest.mark.parametrize(("entries", "lag", "now", "status"), [
    (w((0, 10, 5), (10, 20, 0)), 5, 20, "OK"),  # rule 1: caught up inside the window
    (w((0, 10, 5), (10, 20, 3)), 0, 20, "OK"),  # no lag now
    (w((0, 20, 5), (10, 10, 9)), 9, 20, "REWIND"),
    (w((0, 10, 5), (10, 20, 6)), 6, 100, "STOP"),  # silent for longer than the window spans
    (w((0, 10, 5), (10, 10, 8)), 8, 15, "STALL"),
    (w((0, 10, 5), (10, 20, 5), (20, 30, 7)), 7, 25, "WARN"),  # advancing, lag never falls
    (w((0, 10, 5), (10, 20, 3), (20, 30, 4)), 4, 25, "OK"),
])
def test_burrow_rules(entries: list[dict[str, int]], lag: int, now: int, status: str) -> None:
    assert T.evaluate_window(entries, lag, now) == status


def test_burrow_status_in_spark_matches_the_servers_window(spark: Any) -> None:
    """The Spark job picks each partition's last commits from the log and evaluates them; the
    server's ``PartitionWindow`` is fed the same commits one by one: one status for each."""
    rng = random.Random(34)
    history, lag_now, expected, now = [], [], {}, 200_000
    for p in range(40):
        window, offset = PartitionWindow(intervals=4), rng.randrange(50)
        gaps = [rng.choice((0, 5, 1_000, 20_000)) for _ in range(rng.randrange(1, 9))]
        ts = now - rng.choice((0, 500, 3_000, 100_000)) - sum(gaps)  # quiet since the last commit, or not
        for pos, gap in enumerate(gaps):
            ts += gap
            offset = max(offset + rng.choice((-7, 0, 0, 0, 3, 10)), 0)
            end_then = offset + rng.choice((0, 4, 20, 30))
            window.add_commit(offset, ts, ts, broker_offset=end_then)
            history.append(("g", "t", p, offset, ts, pos, max(end_then - offset, 0)))
        log_end = offset + rng.choice((-1, 0, 5, 30))
        window.add_broker_offset(log_end)
        lag_now.append(("g", "t", p, log_end - offset))
        expected[p] = window.evaluate(now).status.name
    assert set(expected.values()) >= {"OK", "WARN", "STOP", "STALL", "REWIND"}
    with_lag = spark.createDataFrame(history, "group_id STRING, topic STRING, partition INT, committed_offset LONG, "
                                              "commit_timestamp_ms LONG, log_offset LONG, lag_then LONG")
    lag = spark.createDataFrame(lag_now, "group_id STRING, topic STRING, partition INT, lag LONG")
    got = {r["partition"]: r["status"] for r in T.burrow_status(with_lag, lag, now, intervals=4).collect()}
    assert got == expected


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    body = b"".join(len(t).to_bytes(2, "big") + t.encode() for t in topics)
    return (0).to_bytes(2, "big") + len(topics).to_bytes(4, "big") + body + (-1).to_bytes(4, "big", signed=True)


def test_expiry_due_follows_the_coordinators_kip_211_rules(spark: Any) -> None:
    def offset(pos: int, group: str, topic: str, ts: int, expire: int | None = None) -> tuple:
        return raw_row(pos, record_type=OFFSET_COMMIT, group_id=group, topic=topic, partition=0, committed_offset=pos,
                       commit_timestamp_ms=ts, expire_timestamp_ms=expire)

    def metadata(pos: int, group: str, protocol_type: str, members: list[bytes], state_ts: int) -> tuple:
        return raw_row(pos, record_type=GROUP_METADATA, group_id=group, generation=1, protocol_type=protocol_type,
                       protocol="range" if members else None, state_timestamp_ms=state_ts,
                       members=[{**member(f"m{i}"), "subscription": s} for i, s in enumerate(members)])

    rows = [
        offset(0, "simple-old", "t", 1_000),  # no GroupMetadata: from the commit, due 11,000
        offset(1, "simple-new", "t", 15_000),  # due 25,000
        offset(2, "empty", "t", 100), metadata(3, "empty", "consumer", [], 9_000),  # from becoming Empty: 19,000
        offset(4, "empty-late", "t", 100), metadata(5, "empty-late", "consumer", [], 12_000),  # 22,000
        offset(6, "empty-v1", "t", 100), metadata(7, "empty-v1", "consumer", [], -1),  # no state time: 10,100
        offset(8, "stable", "t", 100), offset(9, "stable", "u", 100),  # only u: nobody subscribes to it
        metadata(10, "stable", "consumer", [subscription("t"), subscription("t", "v")], 50),
        offset(11, "connect", "t", 100, expire=200),  # a Stable non-consumer group: nothing expires
        metadata(12, "connect", "connect", [b"\x00"], 50),
        offset(13, "explicit", "t", 19_000, expire=3_000),  # simple, an explicit expire time wins: 3,000
    ]
    got = sorted((r["group_id"], r["topic"], r["removed_at"].timestamp() * 1000)
                 for r in T.expired_offsets(spark.createDataFrame(rows, RAW_SCHEMA), now_ms=20_000, retention_ms=10_000)
                 .where("kind = 'expiry due'").collect())
    assert got == [("empty", "t", 19_000), ("empty-v1", "t", 10_100), ("explicit", "t", 3_000),
                   ("simple-old", "t", 11_000), ("stable", "u", 10_100)]


def test_consumer_lag_in_seconds_from_the_end_offset_history(spark: Any) -> None:
    latest = spark.createDataFrame(
        [("g1", "t", 0, 9), ("g2", "t", 0, 7), ("g3", "t", 0, 20), ("g4", "t", 0, 12), ("g1", "t", 1, 1),
         ("g1", "u", 0, 5)], "group_id STRING, topic STRING, partition INT, committed_offset LONG")
    ends = spark.createDataFrame([("t", 0, 20), ("t", 1, 3)], "topic STRING, partition INT, log_end_offset LONG")
    # (15, 400) is stamped before the batch ahead of it: dropped, as the exporter drops OutOfOrder points.
    end_history = spark.createDataFrame([("t", 0, 5, 100), ("t", 0, 10, 500), ("t", 0, 15, 400), ("t", 0, 20, 2_500)],
                                        "topic STRING, partition INT, end_offset LONG, batch_max_timestamp_ms LONG")
    rows = T.consumer_lag(latest, ends, end_history, now_ms=5_000).collect()
    assert rows[0].asDict().keys() == {"group_id", "topic", "partition", "committed_offset", "log_end_offset", "lag",
                                       "lag_seconds"}
    got = {(r["group_id"], r["topic"], r["partition"]): (r["lag"], r["lag_seconds"]) for r in rows}
    assert got == {
        ("g1", "t", 0): (11, pytest.approx(4.58)),  # between (5, 100) and (10, 500): the end was at 9 at 420 ms
        ("g2", "t", 0): (13, pytest.approx(4.74)),  # 7 at 260 ms
        ("g3", "t", 0): (0, 0.0),  # caught up
        ("g4", "t", 0): (8, pytest.approx(4.1)),  # between (10, 500) and (20, 2500): 12 at 900 ms
        ("g1", "t", 1): (2, None),  # no history for t/1
        ("g1", "u", 0): (None, None),  # end offset unknown
    }
    # Without a history (end offsets from a file) only a caught-up partition has a lag in seconds.
    plain = {(r["group_id"], r["partition"]): r["lag_seconds"] for r in T.consumer_lag(latest, ends).collect()
             if r["topic"] == "t"}
    assert plain == {("g1", 0): None, ("g2", 0): None, ("g3", 0): 0.0, ("g4", 0): None, ("g1", 1): None}


def test_lag_seconds_from_history_is_the_lookup_table_rule() -> None:
    from coordinator.lag.time_lag import LookupTable

    history = [(5, 100), (10, 500), (15, 400), (20, 2_500)]
    table = LookupTable(60)
    for offset, ts in history:
        table.add(offset, ts)
    got = T.lag_seconds_from_history(history, [0, 7, 12, 20], 5_000)
    assert got == {o: table.lag_seconds(o, 5_000) for o in (0, 7, 12, 20)}
    # Below the oldest point: along the line through the oldest and newest, (5, 100) and (20, 2500), 0 at -700 ms.
    assert got[20] == 0.0 and got[0] == pytest.approx(5.7)
    assert T.lag_seconds_from_history([], [3], 5_000) == {3: None}  # too few points
