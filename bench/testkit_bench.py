"""The testing toolkit (issue 35): what a fresh groupcoord per test costs. One command::

    .venv/bin/python bench/testkit_bench.py              # everything (~5 minutes on 2 cores)
    .venv/bin/python bench/testkit_bench.py --quick      # 20 tests per suite, 10 starts
    .venv/bin/python bench/testkit_bench.py --only ready
    .venv/bin/python bench/testkit_bench.py --only suite --tests 100

Workloads:

- ``suite``: a generated test file of ``--tests`` tests (default 100), each marked
  ``@pytest.mark.groupcoord(scope="function")`` — a fresh server per test, with a fresh data
  directory — and each doing one real round trip with confluent-kafka: produce one record, then a
  consumer in a group of its own joins, reads it and commits its offset synchronously. The file
  runs in an empty directory with ``python -m pytest``, this checkout first on ``PYTHONPATH`` (its
  plugin is the one the ``pytest11`` entry point loads), in each mode (``--groupcoord-mode
  inprocess`` / ``subprocess``), serially and with ``-n 2`` (pytest-xdist, two workers: one per
  core of the reference machine). Reported: the wall time of each pytest run, interpreter start
  and collection included. Beside them, the same suite on testcontainers-kafka, computed from a
  published figure (``TESTCONTAINERS_KAFKA_S`` below, its source and what it measures there):
  tests × that figure, halved for two workers.
- ``ready``: ``--starts`` (default 50) fresh in-process servers (``EmbeddedServer``, the
  fixture's settings, a new data directory each) one after the other: the time from
  ``start()`` to the listener accepting a connection, and to the first completed JoinGroup on a
  new connection (FindCoordinator, then JoinGroup v5 with the KIP-394 member id round, retried
  while the coordinator is not yet serving); median and p95. One start before them, not counted,
  pays the imports.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# Published figure for a Kafka test container: testcontainers-java pull request #2078 ("Rework
# KafkaContainer (do not run a sub-process)", merged 2019-11, https://github.com/testcontainers/testcontainers-java/pull/2078)
# says the change "Reduces the execution time of KafkaContainerTest#testUsage by ~3s (from 12s to 9s)".
# That test starts one KafkaContainer (Confluent's cp-kafka image, ZooKeeper embedded in the
# container) and does one produce/consume round trip through it: the same shape as one test of the
# suite below, each test paying its container start. The image pull is not in it (pulled before).
TESTCONTAINERS_KAFKA_S = 9.0
TESTCONTAINERS_SOURCE = "https://github.com/testcontainers/testcontainers-java/pull/2078"

TEST_TEMPLATE = '''\
import uuid

import pytest
from confluent_kafka import Consumer, Producer


@pytest.mark.groupcoord(scope="function")
@pytest.mark.parametrize("i", range({tests}))
def test_round_trip(i, bootstrap_servers):
    topic, group = f"t-{{uuid.uuid4().hex}}", f"g-{{uuid.uuid4().hex}}"
    producer = Producer({{"bootstrap.servers": bootstrap_servers}})
    producer.produce(topic, value=b"x")
    assert producer.flush(10) == 0
    consumer = Consumer({{"bootstrap.servers": bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False}})
    consumer.subscribe([topic])
    for _ in range(100):
        message = consumer.poll(0.1)
        if message is not None and not message.error():
            break
    assert message is not None and message.value() == b"x"
    consumer.commit(message=message, asynchronous=False)
    consumer.close()
'''


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPUs, {platform.machine()}, Linux {platform.release()}, "
            f"CPython {platform.python_version()}, load average {load}")


def run_suite(tests: int, mode: str, workers: int) -> tuple[float, str]:
    """Wall seconds of one pytest run of the generated file, and its summary line."""
    with tempfile.TemporaryDirectory(prefix="testkit-bench-") as directory:
        Path(directory, "test_fresh_servers.py").write_text(TEST_TEMPLATE.format(tests=tests))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env["PYTHONPATH"] = str(REPO)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   f"--groupcoord-mode={mode}"]
        if workers:
            command += ["-n", str(workers)]
        started = time.perf_counter()
        run = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - started
    summary = (run.stdout.strip().splitlines() or ["(no output)"])[-1]
    if run.returncode != 0:
        raise SystemExit(f"suite {mode} -n {workers} failed ({run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}")
    return wall, summary


def suite(tests: int) -> list[str]:
    lines = [f"suite: {tests} tests, each a fresh server (marker scope=\"function\") and one confluent-kafka "
             "produce + group consume + commit", "", "| | serial | -n 2 |", "|---|---|---|"]
    for mode in ("inprocess", "subprocess"):
        cells = []
        for workers in (0, 2):
            wall, summary = run_suite(tests, mode, workers)
            print(f"  {mode} workers={workers}: {wall:.1f} s ({summary})", flush=True)
            cells.append(f"{wall:.1f} s ({wall / tests * 1000:.0f} ms/test)")
        lines.append(f"| groupcoord {mode} | {cells[0]} | {cells[1]} |")
    tc = tests * TESTCONTAINERS_KAFKA_S
    lines.append(f"| testcontainers-kafka, computed: {tests} x {TESTCONTAINERS_KAFKA_S:.0f} s "
                 f"([source]({TESTCONTAINERS_SOURCE})) | {tc:.0f} s | {tc / 2:.0f} s |")
    return lines


def accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def first_join(host: str, port: int) -> None:
    """FindCoordinator, then JoinGroup v5 until the member has joined (KIP-394's member id round
    first); retried while the coordinator is still loading."""
    from kafka.protocol.consumer import JoinGroupRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from protocol.apis import ApiKey
    from tests.wire_client import WireClient

    retriable = {14, 15, 16}   # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
    with WireClient(host, port) as c:
        while True:
            found = c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key="bench", key_type=0))
            if found.error_code == 0:
                break
            assert found.error_code in retriable, found
        member_id = ""
        while True:
            joined: Any = c.request(ApiKey.JOIN_GROUP, 5, JoinGroupRequest(
                version=5, group_id="bench", session_timeout_ms=45_000, rebalance_timeout_ms=10_000,
                member_id=member_id, group_instance_id=None, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            if joined.error_code == 0:
                return
            if joined.error_code == 79:   # MEMBER_ID_REQUIRED
                member_id = joined.member_id
                continue
            assert joined.error_code in retriable, joined


def ready(starts: int) -> list[str]:
    from coordinator.testing.embedded import EmbeddedServer
    from coordinator.testing.settings import FIXTURE_SETTINGS

    to_accept, to_join = [], []
    for i in range(starts + 1):   # the first one, not counted, pays the imports
        with tempfile.TemporaryDirectory(prefix="testkit-ready-") as directory:
            server = EmbeddedServer(Path(directory), dict(FIXTURE_SETTINGS))
            started = time.perf_counter()
            server.start()
            host, port_text = server.bootstrap_servers.rsplit(":", 1)
            port = int(port_text)
            while not accepts(host, port):
                pass
            accepted = time.perf_counter() - started
            first_join(host, port)
            joined = time.perf_counter() - started
            if i:
                to_accept.append(accepted)
                to_join.append(joined)
            server.stop()

    def stats(xs: list[float]) -> str:
        ms = sorted(x * 1000 for x in xs)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        return f"median {statistics.median(ms):.0f} ms, p95 {p95:.0f} ms"

    return [f"ready: {starts} fresh in-process servers (EmbeddedServer, the fixture's settings)", "",
            f"- start() → listener accepts: {stats(to_accept)}",
            f"- start() → first completed FindCoordinator + JoinGroup: {stats(to_join)}"]


def main() -> None:
    ap = argparse.ArgumentParser(description="Testing toolkit benchmark (issue 35).")
    ap.add_argument("--quick", action="store_true", help="20 tests per suite, 10 starts")
    ap.add_argument("--only", default="suite,ready", help="comma-separated: suite, ready")
    ap.add_argument("--tests", type=int, default=None, help="tests per suite (default 100)")
    ap.add_argument("--starts", type=int, default=None, help="fresh servers for `ready` (default 50)")
    args = ap.parse_args()
    tests = args.tests or (20 if args.quick else 100)
    starts = args.starts or (10 if args.quick else 50)
    only = set(args.only.split(","))
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {machine()}", flush=True)
    out: list[str] = []
    if "ready" in only:
        out += ready(starts) + [""]
    if "suite" in only:
        out += suite(tests) + [""]
    print(f"load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
