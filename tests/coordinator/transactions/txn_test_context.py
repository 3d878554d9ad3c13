"""A stand-in for the runtime around one transaction shard (like ``group_test_context``): a mock
clock and timer, an in-memory log of the records written; every call runs the handler, appends
its records, replays them (as the runtime does, with the typed key), then runs ``on_appended``.
``sleep(ms)`` fires due timers as writes; ``reload()`` builds a fresh shard from the log alone.
Marker jobs the shard hands over are collected in ``jobs``; ``complete(job)`` writes Complete*."""

from __future__ import annotations

import itertools
from typing import Any

from coordinator.runtime.contract import CoordinatorResult, Record
from coordinator.transactions.config import TransactionConfig
from coordinator.transactions.markers import MarkerJob
from coordinator.transactions.shard import TransactionHooks, TransactionShard
from coordinator.transactions.state import TransactionState
from protocol.transaction_log import TransactionLogValue, decode_value, encode_value, serialize
from tests.coordinator.group.group_test_context import MockClock, MockTimer

S = TransactionState


class TxnTestContext:
    def __init__(self, config: TransactionConfig | None = None, now_ms: int = 1_000_000,
                 first_producer_id: int = 1000) -> None:
        self.config = config or TransactionConfig()
        self.clock = MockClock(now_ms)
        self._ids = itertools.count(first_producer_id)
        #: Every producer id handed out (never twice).
        self.allocated: list[int] = []
        self.jobs: list[MarkerJob] = []
        self.log: list[Record] = []
        self.last_records: list[Record] = []
        self._build()
        self.shard.on_loaded()

    def _new_pid(self) -> int:
        pid = next(self._ids)
        self.allocated.append(pid)
        return pid

    def _build(self) -> None:
        self.timer = MockTimer(self.clock)
        self.hooks = TransactionHooks(new_producer_id=self._new_pid, prepared=self.jobs.append)
        self.shard = TransactionShard(7, self.config, self.clock, self.timer, self.hooks)

    # --- runtime stand-in -----------------------------------------------------------------------

    def run(self, result: CoordinatorResult[Any]) -> Any:
        self.last_records = list(result.records)
        for key, value in result.records:
            self.log.append((key, value))
            raw_key, raw_value = serialize(key, value)
            self.shard.replay(raw_key, raw_value, key)
        if result.on_appended is not None:
            result.on_appended()
        return result.response

    def sleep(self, ms: int) -> None:
        until = self.clock.now + ms
        written: list[Record] = []
        while True:
            due = self.timer.pop_next_due(until)
            if due is None:
                break
            self.clock.now = max(self.clock.now, due[0])
            self.run(due[1]())
            written += self.last_records
        self.clock.now = until
        self.last_records = written

    def reload(self) -> None:
        """A crash and a load: a fresh shard replays the log (soft state is lost)."""
        self.jobs.clear()
        self._build()
        for key, value in self.log:
            self.shard.replay(*serialize(key, value))
        self.shard.on_loaded()

    # --- requests -------------------------------------------------------------------------------

    def init(self, txn_id: str, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1) -> Any:
        return self.run(self.shard.init_producer_id(txn_id, timeout_ms, pid, epoch))

    def add(self, txn_id: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> Any:
        return self.run(self.shard.add_partitions(txn_id, pid, epoch, partitions))

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool) -> Any:
        return self.run(self.shard.end_transaction(txn_id, pid, epoch, commit))

    def complete(self, job: MarkerJob) -> Any:
        return self.run(self.shard.complete_transaction(job))

    def complete_all(self) -> None:
        jobs, self.jobs[:] = list(self.jobs), []
        for job in jobs:
            self.complete(job)

    # --- inspection -----------------------------------------------------------------------------

    def state(self, txn_id: str) -> TransactionState | None:
        meta = self.shard.transactions.get(txn_id)
        return None if meta is None else meta.state

    def written(self) -> list[tuple[str, TransactionLogValue | None]]:
        """The last request's records as (id, value), values decoded back from their bytes."""
        out = []
        for key, value in self.last_records:
            _raw_key, raw = serialize(key, value)
            out.append((key.transactional_id, None if raw is None else decode_value(raw)))  # type: ignore[attr-defined]
        return out

    def hard_state(self) -> dict[str, bytes]:
        """What the records describe (the soft fields left out): equal across a reload."""
        return {t: encode_value(m.to_value()) for t, m in self.shard.transactions.items()}
