"""The transaction APIs' ACL checks (coordinator/transactions/service.py), one test per row of
Kafka's table (KafkaApis ``handle*``; coordinator/security/request_checks.py): each shows the answer allowed and denied,
and that a denied request changes nothing. The service runs in process on the real runtime and
shard with the real ACL authorizer (``Rules`` of the group tests).
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from coordinator.transactions.config import TransactionConfig
from coordinator.transactions.coordinator_type import transaction_coordinator_type
from coordinator.transactions.service import TransactionService
from coordinator.transactions.shard import TransactionHooks
from protocol.errors import ErrorCode as E
from tests.coordinator.runtime.test_runtime import OneLog
from tests.coordinator.security.test_api_authz_groups import ADMIN, ALICE, DurableLog, Rules, answer, ctx
from tests.coordinator.stepping_clock import SteppingClock

O, R = AclOperation, ResourceType


class Ids:
    claim_block = None
    exhausted = False

    def __init__(self) -> None:
        self._next = 100

    async def refill(self) -> None:
        pass

    def next_id(self) -> int:
        self._next += 1
        return self._next


async def txn_service(rules: Rules) -> TransactionService:
    clock = SteppingClock()
    hooks = TransactionHooks()
    runtime = CoordinatorRuntime(OneLog(DurableLog()),  # type: ignore[arg-type]
                                 transaction_coordinator_type(TransactionConfig(), hooks), clock=clock,
                                 timers=clock.timers)
    await runtime.load(0)
    return TransactionService(runtime, hooks, TransactionConfig(), lambda: 1, lambda: 1, Ids(),  # type: ignore[arg-type]
                              lambda c, r: "idempotent", authorizer=rules)


def init(txn: str = "tx") -> Any:
    return InitProducerIdRequest[4](transactional_id=txn, transaction_timeout_ms=60000, producer_id=-1,
                                    producer_epoch=-1)


async def started(service: TransactionService, rules: Rules, txn: str = "tx") -> tuple[int, int]:
    rules.allow((ALICE, O.WRITE, R.TRANSACTIONAL_ID, txn))
    got = await answer(service.init_producer_id(ctx(4), init(txn)))
    assert got.error_code == E.NONE
    return got.producer_id, got.producer_epoch


async def described(service: TransactionService, txn: str = "tx") -> Any:
    """The transaction's state, read past the authorizer (as a super user)."""
    got = await service.describe_transactions(ctx(0, ADMIN),
                                              DescribeTransactionsRequest[0](transactional_ids=[txn]))
    return got.transaction_states[0]


@pytest.mark.asyncio
async def test_init_producer_id_with_a_transactional_id_needs_write_on_it() -> None:
    rules = Rules()
    service = await txn_service(rules)
    got = await answer(service.init_producer_id(ctx(4), init()))
    assert (got.error_code, got.producer_id) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
    rules.allow((ALICE, O.DESCRIBE, R.TRANSACTIONAL_ID, "tx"))  # DESCRIBE is not enough
    assert (await answer(service.init_producer_id(ctx(4), init()))).error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (await described(service)).error_code == E.TRANSACTIONAL_ID_NOT_FOUND  # nothing was written
    pid, _ = await started(service, rules)
    assert pid == 101


def add_request(pid: int, epoch: int, topics: dict[str, list[int]], txn: str = "tx") -> Any:
    T = AddPartitionsToTxnRequest[3].AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest[3](v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
                                        v3_and_below_producer_epoch=epoch,
                                        v3_and_below_topics=[T(name=n, partitions=ps) for n, ps in topics.items()])


def add_codes(got: Any) -> dict[str, int]:
    return {t.name: t.results_by_partition[0].partition_error_code for t in got.results_by_topic_v3_and_below}


@pytest.mark.asyncio
async def test_add_partitions_to_txn_needs_write_on_the_id_and_on_each_topic() -> None:
    rules = Rules()
    service = await txn_service(rules)
    pid, epoch = await started(service, rules)
    rules.allow((ALICE, O.DESCRIBE, R.TOPIC, "*"))
    rules.revoke((ALICE, O.WRITE, R.TRANSACTIONAL_ID, "tx"))
    got = await service.add_partitions_to_txn(ctx(3), add_request(pid, epoch, {"t1": [0], "t2": [0]}))
    assert add_codes(got) == {"t1": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              "t2": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    rules.allow((ALICE, O.WRITE, R.TRANSACTIONAL_ID, "tx"), (ALICE, O.WRITE, R.TOPIC, "t1"))
    got = await service.add_partitions_to_txn(ctx(3), add_request(pid, epoch, {"t1": [0], "t2": [0]}))
    assert add_codes(got) == {"t1": E.OPERATION_NOT_ATTEMPTED, "t2": E.TOPIC_AUTHORIZATION_FAILED}
    # Internal topics are never the client's to add, whatever the ACLs.
    rules.allow((ALICE, O.WRITE, R.TOPIC, "__consumer_offsets"))
    got = await service.add_partitions_to_txn(ctx(3), add_request(pid, epoch, {"__consumer_offsets": [0]}))
    assert add_codes(got) == {"__consumer_offsets": E.TOPIC_AUTHORIZATION_FAILED}
    assert (await described(service)).topics == []
    got = await service.add_partitions_to_txn(ctx(3), add_request(pid, epoch, {"t1": [0]}))
    assert add_codes(got) == {"t1": E.NONE}
    assert [t.topic for t in (await described(service)).topics] == ["t1"]


@pytest.mark.asyncio
async def test_add_partitions_to_txn_v4_comes_from_brokers_with_cluster_action() -> None:
    rules = Rules()
    service = await txn_service(rules)
    pid, epoch = await started(service, rules)
    T = AddPartitionsToTxnRequest[4].AddPartitionsToTxnTransaction
    request = AddPartitionsToTxnRequest[4](transactions=[T(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[T.AddPartitionsToTxnTopic(name="t1", partitions=[0])])])
    got = await service.add_partitions_to_txn(ctx(4, "User:broker"), request)
    assert (got.error_code, got.results_by_transaction) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    rules.allow(("User:broker", O.CLUSTER_ACTION, R.CLUSTER, CLUSTER_NAME))
    got = await service.add_partitions_to_txn(ctx(4, "User:broker"), request)
    assert got.error_code == E.NONE
    assert got.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == \
        E.TRANSACTION_ABORTABLE  # verified: not in the transaction (past the check)


@pytest.mark.asyncio
async def test_add_offsets_to_txn_needs_write_on_the_id_then_read_on_the_group() -> None:
    rules = Rules()
    service = await txn_service(rules)
    pid, epoch = await started(service, rules)
    request = AddOffsetsToTxnRequest[3](transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g")
    got = await service.add_offsets_to_txn(ctx(3, "User:bob"), request)
    assert got.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    got = await service.add_offsets_to_txn(ctx(3), request)
    assert got.error_code == E.GROUP_AUTHORIZATION_FAILED
    assert (await described(service)).topics == []
    rules.allow((ALICE, O.READ, R.GROUP, "g"))
    assert (await service.add_offsets_to_txn(ctx(3), request)).error_code == E.NONE
    assert [t.topic for t in (await described(service)).topics] == ["__consumer_offsets"]


@pytest.mark.asyncio
async def test_end_txn_needs_write_on_the_id() -> None:
    rules = Rules((ALICE, O.WRITE, R.TOPIC, "t1"))
    service = await txn_service(rules)
    pid, epoch = await started(service, rules)
    await service.add_partitions_to_txn(ctx(3), add_request(pid, epoch, {"t1": [0]}))
    request = EndTxnRequest[3](transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=False)
    assert (await service.end_txn(ctx(3, "User:bob"), request)).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (await described(service)).transaction_state == "Ongoing"
    assert (await service.end_txn(ctx(3), request)).error_code == E.NONE
    assert (await described(service)).transaction_state != "Ongoing"


@pytest.mark.asyncio
async def test_describe_and_list_transactions_need_describe_on_each_id() -> None:
    rules = Rules((ALICE, O.WRITE, R.TOPIC, "t1"), (ALICE, O.WRITE, R.TOPIC, "t2"))
    service = await txn_service(rules)
    for txn in ("a", "b"):
        pid, epoch = await started(service, rules, txn)
        await service.add_partitions_to_txn(ctx(3), add_request(pid, epoch, {"t1": [0], "t2": [0]}, txn))
    viewer = "User:viewer"
    rules.allow((viewer, O.DESCRIBE, R.TRANSACTIONAL_ID, "a"), (viewer, O.DESCRIBE, R.TOPIC, "t2"))
    got = await service.describe_transactions(ctx(0, viewer), DescribeTransactionsRequest[0](transactional_ids=["a", "b"]))
    assert [(s.transactional_id, s.error_code) for s in got.transaction_states] == [
        ("a", E.NONE), ("b", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    assert [t.topic for t in got.transaction_states[0].topics] == ["t2"]  # t1 is not the viewer's to see
    listed = await service.list_transactions(ctx(0, viewer), ListTransactionsRequest[0](
        state_filters=[], producer_id_filters=[]))
    assert [s.transactional_id for s in listed.transaction_states] == ["a"]
