"""Stand-ins for the live view, the lag monitor and readiness (coordinator/ops/state_view.py,
lag_monitor.py, readiness.py: the attributes those return), for tests of what reads
them: the collectors and the HTTP listener without a node behind them."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry

from coordinator.config import load_config
from coordinator.ops.context import OpsContext


@dataclass
class FakeView:
    group_list: list[Any] = field(default_factory=list)
    partition_map: dict[tuple[str, int], Any] = field(default_factory=dict)
    coordinator_list: list[Any] = field(default_factory=list)
    runtime: Any = None
    txn_runtime: Any = None

    def groups(self) -> list[Any]:
        return self.group_list

    def group_counts(self) -> tuple[dict[tuple[str, str], int], int]:
        counts: dict[tuple[str, str], int] = {}
        for g in self.group_list:
            counts[(g.type, g.state)] = counts.get((g.type, g.state), 0) + 1
        return counts, sum(len(g.offsets) for g in self.group_list)

    def partitions(self) -> dict[tuple[str, int], Any]:
        return self.partition_map

    def coordinator_partitions(self) -> list[Any]:
        return self.coordinator_list

    def led_partition_offsets(self) -> dict[tuple[str, int], tuple[int, int]] | None:
        return None  # one node: the consumed partitions' offsets, from the lag rows

    def earliest(self, topic: str, partition: int) -> int | None:
        info = self.partition_map.get((topic, partition))
        return None if info is None else info.log_start


@dataclass
class FakeLag:
    lag_list: list[Any] = field(default_factory=list)
    statuses: dict[str, Any] = field(default_factory=dict)
    poll_time_ms: float | None = None

    def lags(self) -> list[Any]:
        return self.lag_list

    def group_statuses(self) -> dict[str, Any]:
        return self.statuses


@dataclass
class FakeReadiness:
    reasons: list[str] = field(default_factory=list)

    def live(self) -> bool:
        return True

    def ready(self) -> tuple[bool, list[str]]:
        return not self.reasons, list(self.reasons)


def partition_lag(group: str, topic: str, partition: int, committed: int | None, log_end: int | None, *,
                  lag_seconds: float | None = None, status: int | None = 1, member_id: str | None = None,
                  client_id: str | None = None, host: str | None = None, expires_at_ms: int | None = None,
                  expiring_within_day: bool = False) -> SimpleNamespace:
    lag = None if committed is None or log_end is None else log_end - committed
    return SimpleNamespace(group=group, topic=topic, partition=partition, committed=committed, log_end=log_end,
                           lag=lag, lag_seconds=lag_seconds, status=status, member_id=member_id,
                           client_id=client_id, host=host, expires_at_ms=expires_at_ms,
                           expiring_within_day=expiring_within_day)


def make_ctx(*settings: str, view: FakeView | None = None, lag: FakeLag | None = None,
             readiness: FakeReadiness | None = None, node_id: int = 1) -> OpsContext:
    return OpsContext(config=load_config(overrides=list(settings)), view=view or FakeView(),  # type: ignore[arg-type]
                      lag=lag or FakeLag(), readiness=readiness or FakeReadiness(),  # type: ignore[arg-type]
                      handlers={}, registry=CollectorRegistry(), cluster_id="cluster-A", node_id=node_id)
