"""The states of a transaction and the transitions between them.

Kafka's ``TransactionState`` (``TransactionMetadata.scala`` of
https://github.com/apache/kafka/tree/3.9/core/src/main/scala/kafka/coordinator/transaction;
later ``transaction-coordinator/.../TransactionState.java``): the byte id is what the record's
``TransactionStatus`` stores, the name is what DescribeTransactions and ListTransactions return.
The valid previous states are those of Kafka 3.9 (the classic flow; TV2's "abort when unsure"
from Empty and Complete* is not served).
"""

from __future__ import annotations

import enum

__all__ = ["TransactionState", "VALID_PREVIOUS", "is_valid_transition", "EPOCH_EXHAUSTED", "MAX_EPOCH"]


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    #: In memory only: an expiring id (written as a tombstone).
    DEAD = 6
    #: In memory only: replaced at once by a PrepareAbort write.
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @property
    def expirable(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @property
    def preparing(self) -> bool:
        """A decision is written and its markers are on their way."""
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @classmethod
    def by_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


S = TransactionState
_NAMES = {S.EMPTY: "Empty", S.ONGOING: "Ongoing", S.PREPARE_COMMIT: "PrepareCommit", S.PREPARE_ABORT: "PrepareAbort",
          S.COMPLETE_COMMIT: "CompleteCommit", S.COMPLETE_ABORT: "CompleteAbort", S.DEAD: "Dead",
          S.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_COMPLETE = frozenset({S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY}) | _COMPLETE,
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY}) | _COMPLETE,
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY}) | _COMPLETE,
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_valid_transition(old: TransactionState | None, new: TransactionState) -> bool:
    """``old`` None: the id is new (its first record is Empty, Kafka's metadata created in Empty)."""
    return new in (S.EMPTY, S.DEAD) if old is None else old in VALID_PREVIOUS[new]


#: ``Short.MAX_VALUE - 1``: an epoch this high is exhausted; the coordinator never hands out
#: ``Short.MAX_VALUE`` itself, so it can always fence once more (``TransactionMetadata.isEpochExhausted``).
EPOCH_EXHAUSTED = 32766
MAX_EPOCH = 32767
