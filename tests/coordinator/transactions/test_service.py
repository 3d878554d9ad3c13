"""The service's answers for partitions that do not serve, and for refused appends (Kafka's
``appendTransactionToLog`` mapping), with a stand-in runtime."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.protocol.producer import EndTxnRequest, InitProducerIdRequest

from coordinator.context import RequestContext
from coordinator.runtime.errors import (
    CommitTimedOut,
    CoordinatorState,
    NotActiveError,
    NotEnoughReplicas,
    RecordTooLarge,
)
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.transactions.config import TransactionConfig
from coordinator.transactions.service import TransactionService
from coordinator.transactions.shard import TransactionHooks
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E


class StandInRuntime:
    topic = "__transaction_state"

    def __init__(self, state: CoordinatorState | None, refuse: Exception | None = None) -> None:
        self._state = state
        self.refuse = refuse
        self.writes: list[str] = []

    def state(self, partition: int) -> CoordinatorState | None:
        return self._state

    serving_error = CoordinatorRuntime.serving_error  # the real rule, over the state set here

    def write(self, partition: int, name: str, op: Any) -> asyncio.Future[Any]:
        self.writes.append(name)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.refuse is None:
            fut.set_result(None)
        else:
            fut.set_exception(self.refuse)
        return fut


class Ids:
    claim_block = None
    exhausted = False

    async def refill(self) -> None:
        pass

    def next_id(self) -> int:
        return 1


def service(runtime: StandInRuntime) -> TransactionService:
    return TransactionService(runtime, TransactionHooks(), TransactionConfig(), lambda: 50, lambda: 50,  # type: ignore[arg-type]
                              Ids(), lambda ctx, req: "idempotent")


def ctx(api: ApiKey, version: int) -> RequestContext:
    return RequestContext(int(api), version, 1, "c", "127.0.0.1:1")


def init_request(version: int = 4, txn: str | None = "t") -> Any:
    return InitProducerIdRequest(version=version, transactional_id=txn, transaction_timeout_ms=1000,
                                 producer_id=-1, producer_epoch=-1)


@pytest.mark.asyncio
@pytest.mark.parametrize(("state", "error"), [(CoordinatorState.LOADING, E.COORDINATOR_LOAD_IN_PROGRESS),
                                              (None, E.NOT_COORDINATOR), (CoordinatorState.STANDBY, E.NOT_COORDINATOR)])
async def test_unserved_partitions(state: CoordinatorState | None, error: int) -> None:
    svc = service(StandInRuntime(state))
    answer = await svc.init_producer_id(ctx(ApiKey.INIT_PRODUCER_ID, 4), init_request())  # type: ignore[misc]
    assert answer.error_code == error
    end = await svc.end_txn(ctx(ApiKey.END_TXN, 3), EndTxnRequest(
        version=3, transactional_id="t", producer_id=1, producer_epoch=0, committed=True))
    assert end.error_code == error
    assert await svc.verify("t", 1, 0, [("a", 0)]) == {("a", 0): error}


@pytest.mark.asyncio
@pytest.mark.parametrize(("refusal", "error"), [
    (NotActiveError(0, None), E.NOT_COORDINATOR),
    (NotEnoughReplicas(0, CoordinatorState.ACTIVE), E.COORDINATOR_NOT_AVAILABLE),
    (CommitTimedOut(0, CoordinatorState.ACTIVE), E.COORDINATOR_NOT_AVAILABLE),
    (RecordTooLarge(0, CoordinatorState.ACTIVE, "x", 10, 5), E.UNKNOWN_SERVER_ERROR)])
async def test_refused_appends(refusal: Exception, error: int) -> None:
    svc = service(StandInRuntime(CoordinatorState.ACTIVE, refusal))
    answer = await svc.init_producer_id(ctx(ApiKey.INIT_PRODUCER_ID, 4), init_request())  # type: ignore[misc]
    assert answer.error_code == error


def test_no_transactional_id_goes_to_the_idempotent_path() -> None:
    svc = service(StandInRuntime(CoordinatorState.ACTIVE))
    assert svc.init_producer_id(ctx(ApiKey.INIT_PRODUCER_ID, 4), init_request(txn=None)) == "idempotent"


@pytest.mark.asyncio
async def test_a_newer_epoch_of_our_own_leadership_resends_the_markers_under_it() -> None:
    runtime = StandInRuntime(CoordinatorState.ACTIVE)
    svc = service(runtime)
    svc.become_coordinator(3, 5)
    assert runtime.writes == [] and svc.coordinator_epoch(3) == 5
    svc.become_coordinator(3, 5)
    assert runtime.writes == []
    svc.become_coordinator(3, 6)
    assert runtime.writes == ["resend-markers"] and svc.coordinator_epoch(3) == 6
    assert svc.coordinator_epoch(4) == 0  # not led here: the node's own counter (unused in a cluster)
