"""The marker channel's rules for each partition's answer (Kafka's
TransactionMarkerRequestCompletionHandler): retry, done, or stop."""

from __future__ import annotations

import pytest

from coordinator.transactions.marker_channel import MarkerChannel, MarkerOutcome
from coordinator.transactions.markers import MarkerJob
from protocol.errors import ErrorCode as E

A, B, C = ("t", 0), ("t", 1), ("u", 0)
JOB = MarkerJob(3, "txn", 42, 5, True, frozenset({A, B, C}))


class ScriptedWriter:
    """Answers from a script: one dict of codes per call (missing partitions: NONE)."""

    def __init__(self, *answers: dict[tuple[str, int], int]) -> None:
        self.answers = list(answers)
        self.calls: list[list[tuple[str, int]]] = []

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        assert (producer_id, producer_epoch, commit, coordinator_epoch) == (42, 5, True, 9)
        self.calls.append(list(partitions))
        script = self.answers.pop(0) if self.answers else {}
        return {tp: script.get(tp, E.NONE) for tp in partitions}


async def no_sleep(ms: int) -> None:
    pass


def channel(writer: ScriptedWriter, exists: set[tuple[str, int]] | None = None) -> MarkerChannel:
    return MarkerChannel(writer, lambda t, p: exists is None or (t, p) in exists, no_sleep)


@pytest.mark.asyncio
async def test_retriable_errors_are_retried_for_those_partitions_only() -> None:
    writer = ScriptedWriter({A: E.NOT_LEADER_OR_FOLLOWER, B: E.UNSUPPORTED_FOR_MESSAGE_FORMAT},
                            {A: E.NOT_ENOUGH_REPLICAS}, {})
    assert await channel(writer).send(JOB, 9) is MarkerOutcome.COMPLETE
    assert writer.calls == [[A, B, C], [A], [A]]


@pytest.mark.asyncio
@pytest.mark.parametrize("code", [E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED, E.CORRUPT_MESSAGE])
async def test_fenced_or_unexpected_stops_without_completing(code: int) -> None:
    writer = ScriptedWriter({B: code})
    assert await channel(writer).send(JOB, 9) is MarkerOutcome.STOPPED
    assert writer.calls == [[A, B, C]]


@pytest.mark.asyncio
async def test_deleted_partitions_count_as_done() -> None:
    writer = ScriptedWriter({A: E.UNKNOWN_TOPIC_ID})
    assert await channel(writer, exists={A, B}).send(JOB, 9) is MarkerOutcome.COMPLETE
    assert writer.calls == [[A, B]]
    nothing = ScriptedWriter()
    assert await channel(nothing, exists=set()).send(JOB, 9) is MarkerOutcome.COMPLETE
    assert nothing.calls == []


@pytest.mark.asyncio
async def test_a_partition_no_longer_ours_stops_the_retries() -> None:
    writer = ScriptedWriter({A: E.REQUEST_TIMED_OUT})
    assert await channel(writer).send(JOB, 9, still_ours=lambda: False) is MarkerOutcome.STOPPED
    assert writer.calls == [[A, B, C]]


def test_the_single_node_coordinator_epoch_goes_up_at_every_start(tmp_path: object) -> None:
    from pathlib import Path

    from coordinator.transactions.service import COORDINATOR_EPOCH_FILE, next_node_coordinator_epoch

    assert isinstance(tmp_path, Path)
    assert [next_node_coordinator_epoch(tmp_path) for _ in range(3)] == [0, 1, 2]
    assert (tmp_path / COORDINATOR_EPOCH_FILE).read_text() == "2\n"
