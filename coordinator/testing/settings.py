"""What the test servers start with unless told otherwise (docs/testing.md), and the free ports
they take."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Mapping
from pathlib import Path

__all__ = ["FIXTURE_SETTINGS", "free_port", "free_port_block", "server_settings", "worker_port_range"]

#: A test's server is small and fast to start: one ``__consumer_offsets`` and one
#: ``__transaction_state`` partition (Kafka's defaults, 50 each, cost a load per partition and
#: gain a test nothing), no initial rebalance delay (Kafka's 3 s makes every first JoinGroup of a
#: test wait; Kafka's own test harness sets it to 0 too), and fault injection on.
FIXTURE_SETTINGS: dict[str, str] = {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "test.faults.enable": "true",
}


def server_settings(settings: Mapping[str, object] | None) -> dict[str, str]:
    """``FIXTURE_SETTINGS`` overridden by ``settings`` (values as the command line's ``--set`` takes
    them; booleans as ``true``/``false``)."""
    merged = dict(FIXTURE_SETTINGS)
    for key, value in (settings or {}).items():
        merged[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return merged


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS has just handed out as free (bound to port 0, then released). Each pytest-xdist
    worker asks on its own; the OS does not hand the same one to two askers in a row."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def worker_port_range() -> tuple[int, int]:
    """Ports to pick a block from: below the kernel's ephemeral range, where no outgoing connection
    can be holding one when a node restarts on its port; under pytest-xdist each worker (``gw0``,
    ``gw1``... of ``PYTEST_XDIST_WORKER_COUNT``) its own slice, so two workers never pick the same
    base between one's bind check and its node's bind."""
    low, high = 20000, 32000
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        high = min(high, ephemeral_low)
    except (OSError, ValueError, IndexError):
        pass
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if worker.startswith("gw") and count > 1:
        size = (high - low) // count
        low = low + int(worker[2:]) % count * size
        high = low + size
    return low, high


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A base port with ``count`` consecutive ports free on ``host`` (a cluster's nodes restart on
    theirs, so they are fixed up front), from :func:`worker_port_range`."""
    low, high = worker_port_range()
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(low, high - count)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind((host, port))
        except OSError:
            continue
        return base
    raise OSError(f"no {count} consecutive free ports in {low}..{high}")
