"""What the randomized fault schedules share (tests/coordinator/cluster/test_fault_schedule.py for topics,
test_group_fault_schedule.py for consumer groups): the fault log printed and quoted in assertion
messages, a ZooKeeper reader that rides out ZooKeeper's own restarts, polling, and the node log
lines no fault may cause, and partition moves (AlterPartitionReassignments) awaited to the end."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from coordinator.cluster.local_cluster import LocalCluster


class FaultLog:
    """What happened when, relative to the schedule's start; ``replay`` says how to run it again."""

    def __init__(self, seed: int, replay: str) -> None:
        self.seed = seed
        self.replay = replay
        self.t0 = time.monotonic()
        #: The wall clock at ``t0``: node log lines carry wall-clock times (``from_wall``).
        self.wall0 = time.time()
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, what: str) -> None:
        line = f"+{time.monotonic() - self.t0:7.2f}s {what}"
        with self.lock:
            self.lines.append(line)
        print(line, flush=True)

    def from_wall(self, epoch_s: float) -> float:
        """A wall-clock time (a node log line's ``ts``) on the schedule's monotonic clock."""
        return self.t0 + (epoch_s - self.wall0)

    def at(self, t: float) -> str:
        return f"+{t - self.t0:.2f}s"

    def text(self) -> str:
        with self.lock:
            lines = list(self.lines)
        return (f"seed={self.seed} (replay: GROUPCOORD_FAULT_SEED={self.seed} {self.replay})\nfault log:\n  "
                + "\n  ".join(lines))


class ZkReader:
    """One kazoo client for a schedule's checks; reads answer None / empty while ZooKeeper is away."""

    def __init__(self, cluster: LocalCluster) -> None:
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=cluster.zookeeper.connect, timeout=10.0)
        self.client.start(timeout=10)

    def live_brokers(self) -> set[int]:
        try:
            return {int(b) for b in self.client.get_children("/brokers/ids")}
        except Exception:  # disconnected while ZooKeeper restarts
            return set()

    def state(self, topic: str, partition: int) -> dict[str, Any] | None:
        try:
            data, _ = self.client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
            return dict(json.loads(data))
        except Exception:
            return None

    def leader(self, topic: str, partition: int) -> int | None:
        s = self.state(topic, partition)
        return None if s is None else int(s["leader"])

    def replicas(self, topic: str, partition: int) -> list[int] | None:
        """The partition's replicas as the topic znode lists them (during a move: target first)."""
        try:
            data, _ = self.client.get(f"/brokers/topics/{topic}")
            return [int(b) for b in json.loads(data)["partitions"][str(partition)]]
        except Exception:
            return None

    def controller(self) -> int | None:
        try:
            return int(json.loads(self.client.get("/controller")[0])["brokerid"])
        except Exception:  # no controller this moment, or ZooKeeper away
            return None

    def full_isr(self, topics: Iterable[tuple[str, int]], nodes: tuple[int, ...]) -> bool:
        """Every node alive and every partition of ``topics`` (name, partition count) led, with
        every node in its ISR."""
        if self.live_brokers() != set(nodes):
            return False
        for topic, count in topics:
            for p in range(count):
                s = self.state(topic, p)
                if s is None or sorted(s["isr"]) != sorted(nodes) or s["leader"] not in nodes:
                    return False
        return True

    def close(self) -> None:
        self.client.stop()
        self.client.close()


def poll(condition: Callable[[], Any], timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return False


def _node_lines(cluster: LocalCluster, nodes: Iterable[int]) -> Iterable[tuple[int, str]]:
    """(node, line) of every line in the nodes' logs (a log not written yet is skipped)."""
    for b in nodes:
        try:
            text = cluster.log_path(b).read_text(errors="replace")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            yield b, line


def bad_log_lines(cluster: LocalCluster, nodes: Iterable[int]) -> list[str]:
    """ERROR / CRITICAL lines and tracebacks in the nodes' logs."""
    return [f"node-{b}.log: {line}" for b, line in _node_lines(cluster, nodes)
            if "level=ERROR" in line or "level=CRITICAL" in line or re.match(r"\s*Traceback", line)]


def node_log_events(cluster: LocalCluster, nodes: Iterable[int], message: str) -> list[tuple[float, str]]:
    """(wall-clock seconds, line) of the node log lines whose message contains ``message``."""
    from datetime import datetime

    out = []
    for _b, line in _node_lines(cluster, nodes):
        if message in line and line.startswith("ts="):
            stamp = line[3:].split(" ", 1)[0].replace("Z", "+00:00")
            try:
                out.append((datetime.fromisoformat(stamp).timestamp(), line))
            except ValueError:
                continue
    return sorted(out)


def move_partition(cluster: LocalCluster, zk: ZkReader, topic: str, partition: int, target: list[int],
                   timeout: float) -> str | None:
    """Reassign ``topic``-``partition`` to ``target`` as an operator would: AlterPartitionReassignments
    to the controller (asked again while it is refused or the controller cannot be reached), then
    ListPartitionReassignments until the move is no longer listed and the topic znode lists
    exactly ``target``. None once done; otherwise what went wrong (not accepted, or not done, in
    time)."""
    from protocol.errors import ErrorCode
    from tests.coordinator.cluster.test_reassignment import _alter, _alter_errors, _list

    deadline = time.monotonic() + timeout
    last = "no controller in ZooKeeper"
    while True:
        if time.monotonic() > deadline:
            return f"move of {topic}-{partition} to {target} not accepted within {timeout:.0f} s: {last}"
        controller = zk.controller()
        if controller is None:
            time.sleep(0.2)
            continue
        try:
            response = _alter(cluster, controller, {(topic, partition): list(target)})
        except Exception as exc:  # the controller went away mid-request: ask the next one
            last = f"node {controller}: {exc!r}"
            time.sleep(0.2)
            continue
        errors = _alter_errors(response)
        if response.error_code == ErrorCode.NONE and set(errors.values()) == {ErrorCode.NONE}:
            break
        # Asked again until the deadline: NOT_CONTROLLER while the controller moves, and
        # INVALID_REPLICA_ASSIGNMENT while a target node is not live in the controller's view (a
        # node whose session expired across a ZooKeeper restart re-registers a moment later).
        last = f"node {controller} answered error {response.error_code}, per partition {errors}"
        time.sleep(0.3)

    def finished() -> bool:
        nonlocal last
        controller = zk.controller()
        if controller is None:
            return False
        try:
            code, moving = _list(cluster, controller)
        except Exception as exc:
            last = f"ListPartitionReassignments to node {controller}: {exc!r}"
            return False
        last = f"listed {moving.get((topic, partition))} (error {code}); replicas {zk.replicas(topic, partition)}"
        return code == ErrorCode.NONE and (topic, partition) not in moving and zk.replicas(topic, partition) == target

    if not poll(finished, max(0.0, deadline - time.monotonic()), 0.2):
        return f"move of {topic}-{partition} to {target} not finished within {timeout:.0f} s: {last}"
    return None
