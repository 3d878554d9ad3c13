"""``--reset-offsets`` end to end: a real server, real topics, a real consumer group (confluent-kafka
consumed and committed, then closed: the group is Empty), every scenario as a dry run and executed,
the committed offsets read back with confluent-kafka's AdminClient; run_reset is called as groups_cli
calls it, and one case goes through ``python -m coordinator groups``."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.tools.group_admin import GroupAdmin
from coordinator.tools.reset_offsets import NO_EXECUTE_WARNING, run_reset
from tests.clients.records_io import create_topic
from tests.conftest import REPO, ServerProcess

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

TOPIC, OTHER = "reset-t", "reset-u"
GROUP, GROUP2, ACTIVE = "reset-g", "reset-g2", "reset-active"
BASE_MS = 1_700_000_000_000  # record i of every partition has timestamp BASE_MS + i * 1000
RECORDS = 10
BASELINE = {(TOPIC, 0): 3, (TOPIC, 1): 5}  # partition 2 has no committed offset


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("reset") / "data", {"group.initial.rebalance.delay.ms": "0"})
    s.start()
    try:
        create_topic(s.bootstrap, TOPIC, 3)
        create_topic(s.bootstrap, OTHER, 1)
        _produce(s.bootstrap)
        for group in (GROUP, GROUP2):
            _consume_and_close(s.bootstrap, group)
        yield s
    finally:
        kafka_python = _ADMINS.pop("kafka-python " + s.bootstrap, None)
        if kafka_python is not None:
            kafka_python.close()  # type: ignore[attr-defined]
        _ADMINS.pop(s.bootstrap, None)
        s.stop()


def _produce(bootstrap: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in range(3):
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"v%d" % i, partition=p, timestamp=BASE_MS + i * 1000)
    producer.produce(OTHER, value=b"only", partition=0, timestamp=BASE_MS)
    assert producer.flush(20) == 0


def _consume_and_close(bootstrap: str, group: str) -> None:
    """A member joins, reads every record, commits and leaves: the group is Empty with commits."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        seen = 0
        for _ in range(200):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
            if seen == 3 * RECORDS:
                break
        assert seen == 3 * RECORDS
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


_ADMINS: dict[str, object] = {}


def _admin(server: ServerProcess):  # type: ignore[no-untyped-def]
    """One confluent-kafka AdminClient per server, kept alive while its futures run."""
    from confluent_kafka.admin import AdminClient

    if server.bootstrap not in _ADMINS:
        _ADMINS[server.bootstrap] = AdminClient({"bootstrap.servers": server.bootstrap})
    return _ADMINS[server.bootstrap]


def _kafka_python_admin(server: ServerProcess):  # type: ignore[no-untyped-def]
    from kafka import KafkaAdminClient

    key = "kafka-python " + server.bootstrap
    if key not in _ADMINS:
        _ADMINS[key] = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    return _ADMINS[key]


def committed(server: ServerProcess, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, read with a stock client."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = _admin(server).list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def set_committed(server: ServerProcess, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit a baseline with a stock client; partitions of TOPIC left out lose their commit."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = _admin(server)
    present = committed(server, group)
    gone = [TopicPartition(t, p) for (t, p) in present if (t, p) not in offsets]
    if gone:  # confluent-kafka's Python AdminClient has no OffsetDelete; kafka-python's has
        from kafka.structs import TopicPartition as KafkaPythonTopicPartition

        deleted = _kafka_python_admin(server).delete_group_offsets(
            group, [KafkaPythonTopicPartition(tp.topic, tp.partition) for tp in gone])
        assert all(error is None or getattr(error, "errno", 0) == 0 for error in deleted.values()), deleted
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])])[group].result(15)
    assert committed(server, group) == offsets


def reset(server: ServerProcess, *, groups: tuple[str, ...] = (GROUP,), now_ms: int | None = None,
          **options: object) -> tuple[int, str, str]:
    """run_reset with the Namespace the command line builds; (status, stdout, stderr)."""
    args = argparse.Namespace(group=list(groups), all_groups=False, topic=None, all_topics=False, dry_run=False,
                              execute=False, export=False, to_earliest=False, to_latest=False, to_current=False,
                              to_offset=None, shift_by=None, to_datetime=None, by_duration=None, from_file=None)
    for key, value in options.items():
        assert hasattr(args, key), key
        setattr(args, key, value)
    out, err = io.StringIO(), io.StringIO()
    with GroupAdmin(server.bootstrap) as admin:
        status = run_reset(args, admin, out, err, now_ms=None if now_ms is None else (lambda: now_ms),
                           warn_missing_execute=True)
    return status, out.getvalue(), err.getvalue()


def table(rows: dict[tuple[str, int], int], group: str = GROUP) -> str:
    line = "\n{:<30} {:<30} {:<10} {:<15}"
    text = line.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for (t, p), o in sorted(rows.items()):
        text += line.format(group, t, p, o)
    return text + "\n"


ALL = {"all_topics": True}
WHOLE = {"topic": [TOPIC]}
SCENARIOS = [
    ("to-earliest", {**WHOLE, "to_earliest": True}, {(TOPIC, 0): 0, (TOPIC, 1): 0, (TOPIC, 2): 0}),
    ("to-latest", {**WHOLE, "to_latest": True}, {(TOPIC, 0): 10, (TOPIC, 1): 10, (TOPIC, 2): 10}),
    ("to-current", {**WHOLE, "to_current": True}, {(TOPIC, 0): 3, (TOPIC, 1): 5, (TOPIC, 2): 10}),
    ("to-offset", {**ALL, "to_offset": 7}, {(TOPIC, 0): 7, (TOPIC, 1): 7}),
    ("to-offset some partitions", {"topic": [f"{TOPIC}:0,2"], "to_offset": 8}, {(TOPIC, 0): 8, (TOPIC, 2): 8}),
    ("shift-by", {**ALL, "shift_by": -2}, {(TOPIC, 0): 1, (TOPIC, 1): 3}),
    ("to-datetime", {**WHOLE, "to_datetime": "2023-11-14T22:13:24.000"}, {(TOPIC, p): 4 for p in range(3)}),
    ("to-datetime with a zone", {**WHOLE, "to_datetime": "2023-11-15T00:13:24.000+02:00"},
     {(TOPIC, p): 4 for p in range(3)}),
    ("by-duration", {**WHOLE, "by_duration": "PT1H"}, {(TOPIC, p): 4 for p in range(3)}),
]
NOW_MS = BASE_MS + 4000 + 3600_000  # --by-duration PT1H lands on record 4


@pytest.mark.parametrize("execute", [False, True], ids=["dry-run", "execute"])
@pytest.mark.parametrize(("name", "options", "plan"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_scenario(server: ServerProcess, name: str, options: dict[str, object], plan: dict[tuple[str, int], int],
                  execute: bool) -> None:
    assert BASE_MS + 4000 == 1_700_000_004_000  # 2023-11-14T22:13:24.000Z, the datetimes above
    set_committed(server, GROUP, BASELINE)
    status, out, err = reset(server, now_ms=NOW_MS, execute=execute, dry_run=not execute, **options)
    assert (status, err) == (0, "")
    assert out == table(plan)
    assert committed(server, GROUP) == ({**BASELINE, **plan} if execute else BASELINE)


def test_neither_dry_run_nor_execute_warns_and_changes_nothing(server: ServerProcess) -> None:
    set_committed(server, GROUP, BASELINE)
    status, out, err = reset(server, all_topics=True, to_earliest=True)
    assert (status, out, err) == (0, table({(TOPIC, 0): 0, (TOPIC, 1): 0}), NO_EXECUTE_WARNING + "\n")
    assert "missing.In a future" in err
    assert committed(server, GROUP) == BASELINE


def test_out_of_range_offsets_are_clamped_with_kafkas_warning(server: ServerProcess) -> None:
    set_committed(server, GROUP, BASELINE)
    status, out, err = reset(server, execute=True, all_topics=True, shift_by=100)
    assert status == 0 and out == table({(TOPIC, 0): 10, (TOPIC, 1): 10})
    assert "WARN New offset (103) is higher than latest offset for topic partition reset-t-0. Value will be set to 10" \
        " (org.apache.kafka.tools.consumer.group.ConsumerGroupCommand)" in err
    assert committed(server, GROUP) == {(TOPIC, 0): 10, (TOPIC, 1): 10}
    status, out, err = reset(server, execute=True, topic=[f"{TOPIC}:1"], to_offset=-5)
    assert out == table({(TOPIC, 1): 0})
    assert "New offset (-5) is lower than earliest offset for topic partition reset-t-1. Value will be set to 0" in err


def test_a_datetime_after_every_record_falls_back_to_latest(server: ServerProcess) -> None:
    set_committed(server, GROUP, BASELINE)
    status, out, _ = reset(server, execute=True, topic=[OTHER], to_datetime="2030-01-01T00:00:00.000")
    assert status == 0
    assert out == ("\nWarn: Partition 0 from topic reset-u is empty. Falling back to latest known offset.\n"
                   + table({(OTHER, 0): 1}))
    assert committed(server, GROUP) == {**BASELINE, (OTHER, 0): 1}


def test_export_then_from_file_round_trip(server: ServerProcess, tmp_path: Path) -> None:
    set_committed(server, GROUP, BASELINE)
    status, out, _ = reset(server, dry_run=True, topic=[TOPIC], to_offset=6, export=True)
    assert (status, out) == (0, "reset-t,0,6\nreset-t,1,6\nreset-t,2,6\n\n")  # println after the CSV
    plan = tmp_path / "plan.csv"
    plan.write_text(out)
    status, out, _ = reset(server, dry_run=True, from_file=str(plan))
    assert (status, out) == (0, table({(TOPIC, p): 6 for p in range(3)}))
    assert committed(server, GROUP) == BASELINE
    status, out, _ = reset(server, execute=True, from_file=str(plan))
    assert (status, out) == (0, table({(TOPIC, p): 6 for p in range(3)}))
    assert committed(server, GROUP) == {(TOPIC, p): 6 for p in range(3)}


def test_several_groups_export_four_columns_and_read_back(server: ServerProcess, tmp_path: Path) -> None:
    set_committed(server, GROUP, BASELINE)
    set_committed(server, GROUP2, {(TOPIC, 2): 9})
    status, out, _ = reset(server, groups=(GROUP, GROUP2), dry_run=True, all_topics=True, shift_by=-1, export=True)
    assert (status, out) == (0, "reset-g,reset-t,0,2\nreset-g,reset-t,1,4\nreset-g2,reset-t,2,8\n\n")
    plan = tmp_path / "plan.csv"
    plan.write_text(out)
    status, out, _ = reset(server, groups=(GROUP, GROUP2), execute=True, from_file=str(plan))
    assert status == 0
    assert out == table({(TOPIC, 0): 2, (TOPIC, 1): 4}) + table({(TOPIC, 2): 8}, GROUP2).split("\n", 2)[2]
    assert committed(server, GROUP) == {(TOPIC, 0): 2, (TOPIC, 1): 4}
    assert committed(server, GROUP2) == {(TOPIC, 2): 8}


def test_the_file_is_parsed_once_for_all_groups(server: ServerProcess, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka re-read the file per group; parsing it once is what keeps --all-groups linear."""
    import coordinator.tools.reset_offsets as reset_offsets

    parses: list[str] = []

    def counting_parse(text: str, **kwargs: object) -> object:
        parses.append(text)
        return parse_csv(text, **kwargs)  # type: ignore[arg-type]

    parse_csv = reset_offsets.parse_csv
    monkeypatch.setattr(reset_offsets, "parse_csv", counting_parse)
    plan = tmp_path / "plan.csv"
    plan.write_text("reset-g,reset-t,0,1\nreset-g2,reset-t,2,2\n")
    status, out, _ = reset(server, groups=(GROUP, GROUP2), dry_run=True, from_file=str(plan))
    assert status == 0
    assert out == table({(TOPIC, 0): 1}) + table({(TOPIC, 2): 2}, GROUP2).split("\n", 2)[2]
    assert len(parses) == 1


def test_a_group_missing_from_the_file_has_no_plan(server: ServerProcess, tmp_path: Path) -> None:
    plan = tmp_path / "plan.csv"
    plan.write_text("somebody-else,reset-t,0,1\n")
    set_committed(server, GROUP, BASELINE)
    status, out, _ = reset(server, groups=(GROUP, GROUP2), execute=True, from_file=str(plan))
    assert status == 0
    assert out == ("\nError: No reset plan for group reset-g found\n\nError: No reset plan for group reset-g2 found\n"
                   "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     \n")
    assert committed(server, GROUP) == BASELINE


def test_an_active_group_is_refused_and_keeps_its_offsets(server: ServerProcess) -> None:
    from confluent_kafka import Consumer

    before = {(TOPIC, 0): 2}
    set_committed(server, ACTIVE, before)  # committed before the member joins; it commits nothing itself
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": ACTIVE, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    stop = threading.Event()
    assigned = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            consumer.poll(0.2)
            if consumer.assignment():
                assigned.set()

    consumer.subscribe([TOPIC])
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        assert assigned.wait(30), "the consumer never got its partitions"
        status, out, err = reset(server, groups=(ACTIVE,), execute=True, all_topics=True, to_latest=True)
        assert (status, err) == (0, "")
        assert out == ("\nError: Assignments can only be reset if the group 'reset-active' is inactive, but the "
                       "current state is Stable.\n"
                       "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     \n")
        assert committed(server, ACTIVE) == before
    finally:
        stop.set()
        poller.join(10)
        consumer.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"to_datetime": "2024-01-31"}, "java.text.ParseException: Error parsing timestamp. It does not contain a "
                                        "'T' according to ISO8601 format"),
        ({"to_datetime": "2024-01-31T12:00:00"}, 'java.text.ParseException: Unparseable date: "2024-01-31T12:00:00Z"'),
        ({"by_duration": "1 hour"}, "Text cannot be parsed to a Duration"),
    ],
)
def test_malformed_datetime_or_duration_changes_nothing(server: ServerProcess, options: dict[str, object],
                                                         message: str) -> None:
    set_committed(server, GROUP, BASELINE)
    status, out, _ = reset(server, execute=True, topic=[TOPIC], **options)
    assert (status, out) == (0, f"\nError: Executing consumer group command failed due to {message}\n")
    assert committed(server, GROUP) == BASELINE


def test_malformed_csv_names_the_line(server: ServerProcess, tmp_path: Path) -> None:
    plan = tmp_path / "plan.csv"
    plan.write_text("reset-t,0,1\nreset-t,one,2\n")
    set_committed(server, GROUP, BASELINE)
    status, out, _ = reset(server, execute=True, from_file=str(plan))
    assert status == 0
    assert out == ("\nError: Executing consumer group command failed due to Malformed reset plan line 2: "
                   "'reset-t,one,2'; expected topic,partition,offset\n")
    assert committed(server, GROUP) == BASELINE
    status, out, _ = reset(server, execute=True, from_file=str(tmp_path / "absent.csv"))
    assert out.startswith("\nError: Executing consumer group command failed due to java.nio.file.NoSuchFileException")


def test_unknown_topic_is_an_error(server: ServerProcess) -> None:
    set_committed(server, GROUP, BASELINE)
    for topic in ("no-such-topic", "no-such-topic:0"):
        status, out, _ = reset(server, execute=True, topic=[topic], to_earliest=True)
        assert (status, out) == (0, "\nError: Executing consumer group command failed due to Topic 'no-such-topic' "
                                    "does not exist\n")
    assert committed(server, GROUP) == BASELINE


def test_usage_errors_exit_1(server: ServerProcess) -> None:
    set_committed(server, GROUP, BASELINE)
    status, out, err = reset(server, execute=True, topic=[TOPIC], shift_by=1)
    assert (status, out) == (1, "")
    assert err == "Cannot shift offset for partition reset-t-2 since there is no current committed offset\n"
    status, _, err = reset(server, execute=True, topic=[f"{TOPIC}:x"], to_earliest=True)
    assert (status, err) == (1, "Invalid partition 'x' specified in topic arg 'reset-t:x''\n")
    status, _, err = reset(server, execute=True, to_earliest=True)
    assert (status, err) == (1, "One of the reset scopes should be defined: --all-topics, --topic.\n")
    assert committed(server, GROUP) == BASELINE


def test_an_unknown_group_is_dead_and_may_be_reset(server: ServerProcess) -> None:
    status, out, _ = reset(server, groups=("reset-new",), execute=True, topic=[f"{TOPIC}:1"], to_offset=4)
    assert (status, out) == (0, table({(TOPIC, 1): 4}, "reset-new"))
    assert committed(server, "reset-new") == {(TOPIC, 1): 4}


def _groups_command(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", "groups", "--bootstrap-server", server.bootstrap,
                           *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_through_the_groups_command(server: ServerProcess) -> None:
    set_committed(server, GROUP, BASELINE)
    done = _groups_command(server, "--reset-offsets", "--group", GROUP, "--topic", f"{TOPIC}:0,1", "--to-offset", "2")
    assert (done.returncode, done.stdout) == (0, table({(TOPIC, 0): 2, (TOPIC, 1): 2}))
    assert done.stderr == NO_EXECUTE_WARNING + "\n"
    assert committed(server, GROUP) == BASELINE
    done = _groups_command(server, "--reset-offsets", "--group", GROUP, "--topic", f"{TOPIC}:0,1", "--to-offset", "2",
                           "--execute")
    assert (done.returncode, done.stdout, done.stderr) == (0, table({(TOPIC, 0): 2, (TOPIC, 1): 2}), "")
    assert committed(server, GROUP) == {(TOPIC, 0): 2, (TOPIC, 1): 2}
    # A usage error found while planning: Kafka's message, then the help, status 1; nothing committed.
    done = _groups_command(server, "--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--shift-by", "1",
                           "--execute")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("Cannot shift offset for partition reset-t-2 since there is no current committed "
                                  "offset\n")
    assert "--reset-offsets" in done.stderr  # the option help follows
    assert committed(server, GROUP) == {(TOPIC, 0): 2, (TOPIC, 1): 2}
