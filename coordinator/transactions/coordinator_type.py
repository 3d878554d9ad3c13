"""The transaction coordinator as a coordinator type of the runtime: its topic,
``__transaction_state``, the builder of its shard, and the serde of its records
(``protocol.transaction_log``). ``coordinator/app.py`` registers it."""

from __future__ import annotations

from protocol.transaction_log import UnknownRecordVersion, serialize

from ..runtime.contract import Clock, Timer
from ..runtime.coordinator_types import CoordinatorType
from .config import TransactionConfig
from .shard import TransactionHooks, TransactionShard

__all__ = ["TRANSACTION_STATE", "TransactionLogSerde", "transaction_coordinator_type"]

#: The topic (``topics/registry.py`` names it too).
TRANSACTION_STATE = "__transaction_state"


class TransactionLogSerde:
    """The records of ``__transaction_state`` (``contract.RecordSerde``)."""

    unknown_version: type[Exception] = UnknownRecordVersion

    def __init__(self) -> None:
        self.serialize = serialize


def transaction_coordinator_type(config: TransactionConfig,
                                 hooks: TransactionHooks) -> CoordinatorType[TransactionShard]:
    """``hooks``: shared by every shard; the service fills them in once it exists."""

    def build(partition: int, timer: Timer, clock: Clock) -> TransactionShard:
        return TransactionShard(partition, config, clock, timer, hooks)

    return CoordinatorType(TRANSACTION_STATE, build, TransactionLogSerde())
