"""What the test servers start with unless told otherwise (docs/testing.md), and the free ports
they take."""

from __future__ import annotations

import socket
from collections.abc import Mapping

__all__ = ["FIXTURE_SETTINGS", "free_port", "server_settings"]

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
