"""Why the runtime refuses an operation: the service turns each into a Kafka error code."""

from __future__ import annotations

import enum

__all__ = ["CoordinatorState", "NotActiveError", "NotEnoughReplicas", "CommitTimedOut", "RecordTooLarge", "RecordReplayError",
           "MarkerRefused", "ProducerFenced"]


class CoordinatorState(enum.Enum):
    """Where a partition of a coordinator topic stands on this node (Kafka's ``CoordinatorState``
    of coordinator-common, less its INITIAL and CLOSED: a partition not hosted here has no
    state, None)."""

    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    #: Cluster mode, a follower of the partition: replaying the replicated log as it grows, so
    #: taking over replays only the tail (runtime rule 6). Answers nothing.
    STANDBY = "standby"


class NotActiveError(Exception):
    """The partition is not serving: ``state`` says why (None: not hosted here)."""

    def __init__(self, partition: int, state: CoordinatorState | None) -> None:
        super().__init__(f"partition {partition} is {state.value if state else 'not owned'}")
        self.partition = partition
        self.state = state


class NotEnoughReplicas(NotActiveError):
    """Cluster mode: the ISR is below ``min.insync.replicas``; nothing was written (Kafka's
    NOT_ENOUGH_REPLICAS, answered COORDINATOR_NOT_AVAILABLE to an OffsetCommit)."""

    error_code = 15  # COORDINATOR_NOT_AVAILABLE


class CommitTimedOut(NotActiveError):
    """Cluster mode: the ISR did not have the records within ``offsets.commit.timeout.ms``. They
    may still become committed: the outcome is unknown, never a success (REQUEST_TIMED_OUT)."""

    error_code = 7  # REQUEST_TIMED_OUT


class RecordTooLarge(NotActiveError):
    """An operation's records would make a batch larger than the partition's
    ``max.message.bytes``: the operation is refused whole, before its records are replayed, so
    nothing is written and the shard is unchanged; the partition keeps serving. Kafka's runtime
    throws RecordTooLargeException (MESSAGE_TOO_LARGE) before replaying, and
    ``CoordinatorOperationExceptionHelper.handleOperationException`` answers it
    UNKNOWN_SERVER_ERROR to every group API (heartbeat and OffsetCommit alike):
    https://github.com/apache/kafka/blob/trunk/coordinator-common/src/main/java/org/apache/kafka/coordinator/common/runtime/CoordinatorOperationExceptionHelper.java
    """

    error_code = -1  # UNKNOWN_SERVER_ERROR

    def __init__(self, partition: int, state: CoordinatorState | None, operation: str, size: int,
                 limit: int) -> None:
        super().__init__(partition, state)
        self.args = (f"{operation}: records of about {size} bytes in a batch exceed max.message.bytes {limit} "
                     f"of partition {partition}",)
        self.size = size
        self.limit = limit


class RecordReplayError(Exception):
    """A record of a coordinator partition's log (or snapshot) that the shard could not replay:
    the message names the partition, the record's offset and the file it was read from, the
    shard's own error is the ``__cause__`` (Kafka's loader: "Replaying record ... from <tp> at
    offset <n> ... failed due to: ...")."""

    def __init__(self, partition: str, offset: int, source: str | None, cause: BaseException) -> None:
        where = f"{partition} at offset {offset}" + (f" ({source})" if source else "")
        super().__init__(f"replaying the record of {where} failed: {cause}")
        self.partition = partition
        self.offset = offset
        self.source = source


class MarkerRefused(NotActiveError):
    """The partition's log refused a transaction marker: its producer epoch is older than the one
    the log holds for that producer (INVALID_PRODUCER_EPOCH), or its coordinator epoch is
    (TRANSACTION_COORDINATOR_FENCED). Nothing was written or replayed (Kafka's
    ``ProducerAppendInfo.checkProducerEpoch`` / ``appendEndTxnMarker``)."""

    def __init__(self, partition: int, state: CoordinatorState | None, error_code: int) -> None:
        super().__init__(partition, state)
        self.args = (f"transaction marker refused on partition {partition} (error {error_code})",)
        self.error_code = error_code


class ProducerFenced(NotActiveError):
    """A transactional write of a producer epoch older than the one the partition's log holds for
    that producer (a zombie fenced by a newer producer with its transactional id): refused before
    replay, nothing written. Kafka's log checks the epoch of a coordinator's append
    (``ProducerAppendInfo`` with origin COORDINATOR) and the write fails with
    INVALID_PRODUCER_EPOCH."""

    error_code = 47  # INVALID_PRODUCER_EPOCH
