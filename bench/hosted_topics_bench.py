"""Hosted-topic throughput with the official Java client (issue 4 targets).

1. Java producer, 1 KB records, acks=1, one partition: MB/s appended (target >= 100 MB/s).
2. Java consumer reading the partition from the start (about 1 GiB): MB/s delivered (>= 200 MB/s).
3. The server's CPU seconds per GB in and out, from /proc/<pid>/stat.

Run: ``.venv/bin/python bench/hosted_topics_bench.py [--mb 1024]`` (after ``make test`` installed
the Java jars). Uses a fresh data directory under /tmp and a free loopback port.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402

from tests.wire_client import WireClient  # noqa: E402

CACHE = Path(os.environ.get("GROUPCOORD_CLIENTS_CACHE", Path.home() / ".cache" / "groupcoord-clients"))
JARS = ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=1024, help="megabytes to produce (and then consume)")
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--acks", default="1")
    args = parser.parse_args()
    classpath = os.pathsep.join(str(CACHE / "java" / j) for j in JARS)
    build = Path(tempfile.mkdtemp(prefix="gc-bench-java-"))
    subprocess.run(["javac", "-d", str(build), "-cp", classpath, *map(str, (REPO / "bench" / "java").glob("*.java"))],
                   check=True)
    classpath = f"{build}{os.pathsep}{classpath}"
    data = Path(tempfile.mkdtemp(prefix="gc-bench-data-"))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "coordinator", "serve", "--data-dir", str(data),
                               "--listen", f"127.0.0.1:{port}", "--set", "logging.level=WARNING",
                               "--set", "message.max.bytes=8388608"], cwd=REPO)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        CT = CreateTopicsRequest.CreatableTopic
        with WireClient("127.0.0.1", port) as c:
            c.request(19, 7, CreateTopicsRequest(version=7, timeout_ms=5000, topics=[CT(
                name="bench", num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
        count = args.mb * 1_000_000 // args.record_bytes
        bootstrap = f"127.0.0.1:{port}"
        cpu0 = cpu_seconds(server.pid)
        out = subprocess.run(["java", "-Xmx1g", "-cp", classpath, "ProducerBench", bootstrap, "bench", str(count),
                              str(args.record_bytes), args.acks], capture_output=True, text=True, check=True)
        cpu_in = cpu_seconds(server.pid) - cpu0
        print("produce:", out.stdout.strip(), f"server_cpu_s={cpu_in:.2f}",
              f"server_cpu_s_per_gb={cpu_in / (args.mb / 1000):.2f}")
        cpu0 = cpu_seconds(server.pid)
        out = subprocess.run(["java", "-Xmx1g", "-cp", classpath, "ConsumerBench", bootstrap, "bench"],
                             capture_output=True, text=True, check=True)
        cpu_out = cpu_seconds(server.pid) - cpu0
        print("consume:", out.stdout.strip(), f"server_cpu_s={cpu_out:.2f}",
              f"server_cpu_s_per_gb={cpu_out / (args.mb / 1000):.2f}")
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(build, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
