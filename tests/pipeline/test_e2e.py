"""End to end: a real server, real consumer groups (kafka-python), a stop, then the pipeline on
the data directory. The compacted view must equal what the server answered to OffsetFetch, the
generation history must hold exactly the generations and members the clients were in, and lag
must be the end offsets minus the commits."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from pipeline.cli import run_job

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "orders"
PARTITIONS = 4
MESSAGES = 100  # 25 per partition: every end offset is 25


def _generation(consumer: KafkaConsumer) -> tuple[int, str]:
    """The generation and member id this client was told it is in."""
    g = consumer._coordinator._generation
    return g.generation_id, g.member_id


def _settle(consumers: list[KafkaConsumer], timeout: float = 30.0) -> tuple[int, set[str]]:
    """Poll everyone until they share one generation and own every partition between them;
    returns that generation and its members as the clients saw them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            # 1 s, not less: kafka-python 3.0.12 drops a SyncGroup's assignment for good when poll's time runs
            # out right after the SyncGroup answer (docs/testing.md); records make it return sooner.
            c.poll(timeout_ms=1000, max_records=1)
        gens = {_generation(c)[0] for c in consumers}
        owned = sum(len(c.assignment()) for c in consumers)
        if len(gens) == 1 and min(gens) > 0 and owned == PARTITIONS:
            return gens.pop(), {_generation(c)[1] for c in consumers}
    raise AssertionError(f"group did not settle: {[(_generation(c), c.assignment()) for c in consumers]}")


#: Clients a test opened, closed at its teardown even when it fails: a kafka-python client left
#: running keeps reconnecting in its own thread, with jitter from the global ``random`` — which
#: made later hypothesis tests in the same process fail as flaky (CI, 2026-11-25).
_OPEN: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        try:
            _OPEN.pop().close()
        except Exception:
            pass


def _consumer(server: Any, group: str) -> KafkaConsumer:
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=10_000, heartbeat_interval_ms=300,
                             max_poll_interval_ms=60_000)
    _OPEN.append(consumer)
    # The topic's partitions known before the first join: kafka-python 3.0 may otherwise join before its
    # metadata comes, be assigned nothing and rebalance again (docs/testing.md).
    deadline = time.monotonic() + 30
    while not consumer.partitions_for_topic(TOPIC):
        assert time.monotonic() < deadline, "the topic's metadata never came"
        time.sleep(0.05)
    return consumer


def _commit_all(consumer: KafkaConsumer, base: int) -> None:
    consumer.commit({tp: OffsetAndMetadata(base + tp.partition, "", -1) for tp in consumer.assignment()})


def test_pipeline_matches_what_the_server_and_clients_saw(server_factory: Any, spark: Any, tmp_path: Path) -> None:
    server = server_factory({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "4"})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    _OPEN.append(admin)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    # One batch per record (each send awaited), the k-th record of a partition stamped base + k s: the
    # end offset history that lag in seconds interpolates over has a point per record.
    base_ms = (int(time.time()) - 100) * 1000
    for i in range(MESSAGES):
        producer.send(TOPIC, key=str(i).encode(), value=b"v", partition=i % PARTITIONS,
                      timestamp_ms=base_ms + (i // PARTITIONS) * 1000).get(timeout=20)
    producer.flush()
    producer.close()
    seen: dict[str, dict[int, set[str]]] = {"g1": {}, "g3": {}}

    # g1: one member, then two (a join: rebalance), then one again (a leave): three generations,
    # then the last member leaves and the group is Empty (a fourth generation with no members).
    c1 = _consumer(server, "g1")
    gen, members = _settle([c1])
    seen["g1"][gen] = members
    _commit_all(c1, 10)
    c2 = _consumer(server, "g1")
    gen, members = _settle([c1, c2])
    seen["g1"][gen] = members
    _commit_all(c1, 20)
    _commit_all(c2, 20)
    c2.close()
    gen, members = _settle([c1])
    seen["g1"][gen] = members
    _commit_all(c1, 22)
    c1.close()

    # g2: a simple consumer (assign + commit, no membership, so no GroupMetadata).
    simple = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="g2", enable_auto_commit=False)
    _OPEN.append(simple)
    simple.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    simple.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(5 * p, "meta", -1) for p in range(PARTITIONS)})
    simple.close()
    # g3: a real member commits and leaves, then the group is deleted (DeleteGroups).
    doomed = _consumer(server, "g3")
    gen, members = _settle([doomed])
    seen["g3"][gen] = members
    _commit_all(doomed, 1)
    doomed.close()
    assert admin.delete_groups(["g3"]) == {"g3": "OK"}
    answered = admin.list_group_offsets(["g1", "g2", "g3"])  # OffsetFetch v8+, all three groups
    fetched = {g: {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in answered.get(g, {}).items()}
               for g in ("g1", "g2", "g3")}
    admin.close()
    now_ms = int(time.time() * 1000)
    assert server.stop() == 0

    out = tmp_path / "out"
    result = run_job(spark, str(server.data_dir), str(out), now_ms=now_ms)

    def table(name: str) -> list[Any]:
        return spark.read.parquet(str(out / name)).collect()

    # The compacted view is what OffsetFetch answered, group by group (g3: nothing).
    view: dict[str, dict[tuple[str, int], tuple[int, str]]] = {"g1": {}, "g2": {}, "g3": {}}
    for r in table("latest_offsets"):
        view[r["group_id"]][(r["topic"], r["partition"])] = (r["committed_offset"], r["commit_metadata"])
    assert view == fetched
    assert fetched == {"g1": {(TOPIC, p): (22 + p, "") for p in range(PARTITIONS)},
                       "g2": {(TOPIC, p): (5 * p, "meta") for p in range(PARTITIONS)}, "g3": {}}

    # Generation history: the generations the clients saw, each with exactly the members they
    # saw, in an unbroken sequence from 1 (a client may not see a generation that a rebalance
    # replaced at once, e.g. one formed before it had topic metadata), ending Empty.
    gens: dict[str, dict[int, set[str]]] = {}
    for r in table("generations"):
        assert r["incarnation"] == 0
        gens.setdefault(r["group_id"], {})[r["generation"]] = set(r["member_ids"])
    assert sorted(gens) == ["g1", "g3"]  # g2 never had members, so no GroupMetadata
    for group, expected_gens in (("g1", 3), ("g3", 1)):
        assert len(seen[group]) == expected_gens
        last = max(seen[group])
        assert sorted(gens[group]) == list(range(1, last + 2))
        assert {g: gens[group][g] for g in seen[group]} == seen[group]
        assert gens[group][last + 1] == set()
        members = set().union(*seen[group].values())
        assert all(m <= members for m in gens[group].values())
    assert len(set().union(*seen["g1"].values())) == 2
    churn = {g: (n, j, lv) for g, n, j, lv in result["churn"]}
    assert churn == {"g1": (len(gens["g1"]), 2, 2), "g3": (len(gens["g3"]), 1, 1)}  # g1: +c1 +c2 -c2 -c1

    # Lag: end offsets minus commits.
    lag = {(r["group_id"], r["partition"]): (r["log_end_offset"], r["lag"]) for r in table("consumer_lag")}
    assert lag == {(g, p): (25, 25 - off) for g, offs in fetched.items() for (_t, p), (off, _m) in offs.items()}
    # In seconds: the end offset reached c with the record stamped base + (c - 1) s (for c = 0, the line
    # through the first and last points gives base - 1 s); 0 when caught up (g1 on partition 3).
    seconds = {(r["group_id"], r["partition"]): r["lag_seconds"] for r in table("consumer_lag")}
    assert seconds == {(g, p): 0.0 if off == 25 else pytest.approx((now_ms - base_ms - (off - 1) * 1000) / 1000)
                       for g, offs in fetched.items() for (_t, p), (off, _m) in offs.items()}
    # ... and at each commit (every message was produced before the first commit).
    history = sorted((r["group_id"], r["partition"], r["committed_offset"], r["end_offset_then"], r["lag_then"])
                     for r in table("commit_history"))
    assert history == sorted([("g1", p, base + p, 25, 25 - base - p) for p in range(PARTITIONS) for base in (10, 20, 22)]
                             + [("g2", p, 5 * p, 25, 25 - 5 * p) for p in range(PARTITIONS)]
                             + [("g3", p, 1 + p, 25, 24 - p) for p in range(PARTITIONS)])

    # Burrow-style status. g2 committed once and never again: STOP (ERR at group level).
    status = {(r["group_id"], r["partition"]): r["status"] for r in table("partition_status")}
    assert {k: v for k, v in status.items() if k[0] == "g2"} == {("g2", p): "STOP" for p in range(PARTITIONS)}
    commits = [r for r in table("commit_history") if r["group_id"] == "g1"]
    first, last = min(r["commit_timestamp_ms"] for r in commits), max(r["commit_timestamp_ms"] for r in commits)
    # g1: offsets advance and lag falls at every commit, so OK unless it has gone quiet for longer
    # than its window spans (STOP), which depends on how long g2 and g3 took.
    g1_expected = "STOP" if now_ms - last > last - first else "OK"
    assert {k: v for k, v in status.items() if k[0] == "g1"} == {("g1", p): g1_expected for p in range(PARTITIONS)}
    groups = {r["group_id"]: (r["status"], r["burrow_status"], r["partitions"], r["total_lag"])
              for r in table("group_status")}
    assert groups == {"g1": (g1_expected, "ERR" if g1_expected == "STOP" else "OK", 4, sum(3 - p for p in range(4))),
                      "g2": ("STOP", "ERR", 4, sum(25 - 5 * p for p in range(4)))}

    # Expired and deleted: g3's offsets went with the group.
    expired = sorted((r["group_id"], r["partition"], r["last_committed_offset"], r["kind"]) for r in table("expired_offsets"))
    assert expired == [("g3", p, 1 + p, "removed with group") for p in range(PARTITIONS)]

    totals = result["totals"]
    assert (totals["groups"], totals["offsets"], totals["total_lag"], totals["generations"], totals["expired"]) == (
        2, 8, 6 + 70, len(gens["g1"]) + len(gens["g3"]), 4)
    html = (out / "report.html").read_text()
    assert html.count("<svg") == 3
    md = (out / "report.md").read_text()
    assert "| g2 | STOP | ERR | 4 | 70 | 25 |" in md


def test_command_line_entry_points_without_spark(tmp_path: Path) -> None:
    """``groupcoord pipeline ...`` forwards to ``python -m pipeline ...``; bad usage is refused
    before any JVM starts, and serving never imports pyspark."""
    import subprocess
    import sys

    missing = str(tmp_path / "missing")
    for argv in (["-m", "coordinator", "pipeline"], ["-m", "pipeline"]):
        proc = subprocess.run([sys.executable, *argv, "run", "--data-dir", missing, "--out", str(tmp_path / "o")],
                              capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stderr) == (2, f"groupcoord pipeline: {missing} is not a directory\n")
        proc = subprocess.run([sys.executable, *argv, "run", "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "--end-offsets" in proc.stdout and "--master" in proc.stdout
    probe = ("import sys, coordinator.cli, coordinator.app; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pipeline')))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "[]\n")
