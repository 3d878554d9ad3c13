"""KIP-890 verification and pipelined produce requests: a producer sends the batches of a
transaction without waiting (librdkafka 0137 with batch.num.messages=1: three requests in flight);
the second batch arrives while the first is being verified. It must be appended after the first,
not refused with OUT_OF_ORDER_SEQUENCE_NUMBER (which librdkafka treats as a fatal error)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator

import pytest
from kafka.protocol.producer import ProduceRequest

from coordinator.context import RequestContext
from protocol.apis import ApiKey
from protocol.client import decode_response
from protocol.errors import ErrorCode
from tests.coordinator.topics.test_transactions import READ_UNCOMMITTED, Node, create, init_pid, list_offset, txn_batch


class SlowVerifier:
    """Confirms every partition after ``delay`` seconds (a coordinator on another node)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls += 1
        await asyncio.sleep(self.delay)
        return {p: ErrorCode.NONE for p in partitions}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("verify-order"))
    yield n
    n.close()


def test_pipelined_batches_wait_for_the_first_ones_verification(node: Node) -> None:
    P = ProduceRequest.TopicProduceData
    verifier = SlowVerifier(0.3)
    node.produce.verifier = verifier
    try:
        with node.client() as c:
            create(c, "pipelined")
            pid = init_pid(c)
            # A first transaction, committed: the producer has state (sequence 0) on the partition.
            req = ProduceRequest(version=9, transactional_id="tx-pipe", acks=-1, timeout_ms=5000, topic_data=[
                P(name="pipelined", partition_data=[P.PartitionProduceData(index=0, records=txn_batch(pid, 0, [b"a"]))])])
            assert c.request(ApiKey.PRODUCE, 9, req).responses[0].partition_responses[0].error_code == 0
            assert node.write_markers(pid, 0, True, 0, [("pipelined", 0)]) == {("pipelined", 0): ErrorCode.NONE}
            verifier.calls = 0
            # The second transaction's three batches, sent without waiting (offsets 2, 3, 4).
            sent = []
            for seq in range(1, 4):
                req = ProduceRequest(version=9, transactional_id="tx-pipe", acks=-1, timeout_ms=5000, topic_data=[
                    P(name="pipelined", partition_data=[P.PartitionProduceData(
                        index=0, records=txn_batch(pid, seq, [b"m%d" % seq]))])])
                sent.append(c.send(ApiKey.PRODUCE, 9, req))
            answers = {}
            for _ in sent:
                got, resp = decode_response(ApiKey.PRODUCE, 9, c.read_frame())
                part = resp.responses[0].partition_responses[0]
                answers[got] = (part.error_code, part.base_offset)
            assert [answers[i] for i in sent] == [(ErrorCode.NONE, 2), (ErrorCode.NONE, 3), (ErrorCode.NONE, 4)]
            assert list_offset(c, "pipelined", -1, READ_UNCOMMITTED)[1] == 5
    finally:
        node.produce.verifier = None
    # The first batch opened the transaction: the ones behind it needed no verification.
    assert verifier.calls == 1
    assert not node.produce._verifying


class GatedVerifier:
    """Answers each partition with ``answers`` (NONE by default) once ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.answers: list[int] = []
        self.calls = 0

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls += 1
        await self.gate.wait()
        answer = self.answers.pop(0) if self.answers else ErrorCode.NONE
        return {p: answer for p in partitions}


def _request(topic: str, pid: int, seq: int) -> ProduceRequest:
    P = ProduceRequest.TopicProduceData
    return ProduceRequest(version=9, transactional_id="tx-gated", acks=-1, timeout_ms=5000, topic_data=[
        P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=txn_batch(pid, seq, [b"m%d" % seq]))])])


async def _answer(reply: object) -> tuple[int, int]:
    response = await reply if inspect.isawaitable(reply) else reply
    part = response.responses[0].partition_responses[0]  # type: ignore[union-attr]
    return part.error_code, part.base_offset


def test_a_batch_arriving_after_the_first_is_appended_waits_for_those_queued_before_it(node: Node) -> None:
    # The CI failure (librdkafka, seq 6 of a transaction of seqs 2..6 refused OUT_OF_ORDER): the
    # first batch is verified and appended; the batches queued behind it resume only in later
    # steps of the event loop. A batch read in between sees the transaction open and must still
    # wait for them, not be checked against a producer state that lacks them.
    with node.client() as c:
        create(c, "gated")
        pid = init_pid(c)
    ctx = RequestContext(api_key=ApiKey.PRODUCE, api_version=9, correlation_id=1, client_id=None, peer="test")
    verifier = GatedVerifier()
    node.produce.verifier = verifier

    async def scenario() -> list[tuple[int, int]]:
        produce = node.produce
        plog = node.logs.get("gated", 0)
        assert plog is not None
        verifier.gate.set()
        assert await _answer(produce.produce(ctx, _request("gated", pid, 0))) == (ErrorCode.NONE, 0)
        assert await node.markers.write_markers(pid, 0, True, 0, [("gated", 0)]) == {("gated", 0): ErrorCode.NONE}
        verifier.gate.clear()
        first = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated", pid, 1))))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated", pid, 2))))
        await asyncio.sleep(0)
        verifier.gate.set()
        while not plog.has_open_transaction(pid):
            await asyncio.sleep(0)
        # The first batch is in (offset 2), the second not yet: now the third arrives.
        assert plog.next_offset == 3
        third = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated", pid, 3))))
        return list(await asyncio.gather(first, second, third))

    try:
        answers = node.call(scenario())
    finally:
        node.produce.verifier = None
    assert answers == [(ErrorCode.NONE, 2), (ErrorCode.NONE, 3), (ErrorCode.NONE, 4)]
    assert verifier.calls == 2
    assert not node.produce._verifying


def test_a_cancelled_request_still_has_its_batch_decided_in_order(node: Node) -> None:
    # The connection goes while the second batch waits behind the first's verification (its
    # request cancelled). Its batch is still decided after the first and before the third: were
    # it released at once, the third would go ahead of the first and fail OUT_OF_ORDER.
    with node.client() as c:
        create(c, "gated-cancel")
        pid = init_pid(c)
    ctx = RequestContext(api_key=ApiKey.PRODUCE, api_version=9, correlation_id=1, client_id=None, peer="test")
    verifier = GatedVerifier()
    node.produce.verifier = verifier

    async def scenario() -> tuple[list[tuple[int, int]], int]:
        produce = node.produce
        plog = node.logs.get("gated-cancel", 0)
        assert plog is not None
        first = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated-cancel", pid, 0))))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated-cancel", pid, 1))))
        await asyncio.sleep(0)
        second.cancel()
        # Another request of the same connection, cancelled before its handling even started.
        never = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated-cancel", pid, 2))))
        never.cancel()
        third = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated-cancel", pid, 3))))
        await asyncio.sleep(0)
        verifier.gate.set()
        answers = list(await asyncio.gather(first, third))
        return answers, plog.next_offset

    try:
        answers, end = node.call(scenario())
    finally:
        node.produce.verifier = None
    # Sequences 0, 1, 2 and 3 at offsets 0..3, whatever became of the requests of 1 and 2.
    assert answers == [(ErrorCode.NONE, 0), (ErrorCode.NONE, 3)]
    assert end == 4
    assert verifier.calls == 1
    assert not node.produce._verifying


def test_a_failed_verification_leaves_no_gap_and_the_retries_go_in(node: Node) -> None:
    # The first batch's verification fails (a retriable error); the one queued behind it is then
    # decided as Kafka, reading one request at a time, would decide it: verified itself, then
    # refused by its sequence (the first is missing) — never appended over the gap. librdkafka
    # retries both, in order.
    with node.client() as c:
        create(c, "gated-fail")
        pid = init_pid(c)
    ctx = RequestContext(api_key=ApiKey.PRODUCE, api_version=9, correlation_id=1, client_id=None, peer="test")
    verifier = GatedVerifier()
    node.produce.verifier = verifier

    async def scenario() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        produce = node.produce
        # A committed transaction first: the producer has a sequence (0) here. (A producer the
        # partition does not know may start at any sequence, in Kafka too.)
        verifier.gate.set()
        assert await _answer(produce.produce(ctx, _request("gated-fail", pid, 0))) == (ErrorCode.NONE, 0)
        assert await node.markers.write_markers(pid, 0, True, 0, [("gated-fail", 0)]) == {
            ("gated-fail", 0): ErrorCode.NONE}
        verifier.gate.clear()
        verifier.answers = [ErrorCode.CONCURRENT_TRANSACTIONS]
        first = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated-fail", pid, 1))))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(_answer(produce.produce(ctx, _request("gated-fail", pid, 2))))
        await asyncio.sleep(0)
        verifier.gate.set()
        failed = list(await asyncio.gather(first, second))
        retried = [await _answer(produce.produce(ctx, _request("gated-fail", pid, seq))) for seq in (1, 2)]
        return failed, retried

    try:
        failed, retried = node.call(scenario())
    finally:
        node.produce.verifier = None
    assert failed == [(ErrorCode.NOT_ENOUGH_REPLICAS, -1), (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]
    assert retried == [(ErrorCode.NONE, 2), (ErrorCode.NONE, 3)]
    assert not node.produce._verifying
