"""What the runtime and the coordinators it hosts agree on: the seams, as types.

A coordinator (the classic group rules of ``coordinator/group/``; later a transaction or a share
coordinator) is a set of pure state machines. It sees the runtime only through this module:

* :class:`Clock` gives the time; :class:`Timer` runs an operation later. A timer operation is run
  by the runtime exactly like a write request: its records are appended and replayed, its
  ``on_appended`` runs once they are durable.
* :class:`CoordinatorResult` is what every write operation returns: the records to append (hard
  state changes, applied later by ``replay``), the response, and an optional callback to run once
  the records are durable and replayed (Kafka's ``CoordinatorResult`` of coordinator-common,
  https://github.com/apache/kafka/pull/13795).
* :class:`ResponseHandle` is a parked response (JoinGroup and SyncGroup wait for the rebalance).
  The state machines only ever call ``set_result``; the runtime hands in its own object with that
  method (``CoordinatorRuntime.response_future``) and delivers the value once everything written
  up to the end of the operation that set it is durable. :class:`ResponseFuture` is the
  asyncio-free one the tests and the fuzzers hand in.
* :class:`CoordinatorShard` is the state machine of one partition of the coordinator's topic, and
  :class:`RecordSerde` turns the records its operations return into the bytes its log holds
  (Kafka's ``CoordinatorShard`` and ``Serializer``).

Pure: no asyncio, no I/O, so the rules that import it stay pure (tests/test_layering.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = ["Clock", "Timer", "ResponseHandle", "ResponseFuture", "CoordinatorResult", "Record", "EMPTY_RESULT",
           "CoordinatorShard", "RecordSerde", "ResponseT", "non_atomic"]

#: A record as an operation returns it: (key, value), typed by the coordinator's own record
#: classes (``protocol.consumer_offsets`` for groups); value None is a tombstone. The runtime does
#: not look inside: the coordinator type's :class:`RecordSerde` turns it into bytes.
Record = tuple[object, object]

ResponseT = TypeVar("ResponseT")


class Clock(Protocol):
    def now_ms(self) -> int: ...


@dataclass(slots=True)
class CoordinatorResult(Generic[ResponseT]):
    """What a write operation or a timer operation returns.

    ``records`` are appended to the partition log as one batch and replayed into the shard;
    ``response`` is sent once they are durable; ``on_appended`` runs after that append is durable
    and replayed (before the response is released), and may complete parked responses.

    ``atomic`` (Kafka's ``CoordinatorResult.isAtomic``): the records go in one batch, and an
    operation whose records exceed the partition's ``max.message.bytes`` is refused
    (``writes.py``). A non-atomic result (a cleanup: tombstones that are each right alone) is
    split over as many batches as it needs instead.

    ``producer_id`` >= 0 (with ``producer_epoch``): a transactional write (TxnOffsetCommit). Its
    records go to the log in a batch of their own carrying that producer id and epoch, with the
    transactional attribute and base sequence 0, after the open batch is flushed, as Kafka's
    runtime writes them (``CoordinatorRuntime.scheduleTransactionalWriteOperation``, KIP-447);
    they are replayed with ``replay_transactional`` and count only once the producer's COMMIT
    marker follows (``CoordinatorShard.replay_end_transaction``).
    """

    records: list[Record] = field(default_factory=list)
    response: ResponseT | None = None
    on_appended: Callable[[], None] | None = None
    atomic: bool = True
    producer_id: int = -1
    producer_epoch: int = -1


#: A result with no records and no response (a timer that found nothing to do).
EMPTY_RESULT: CoordinatorResult[None] = CoordinatorResult()


def non_atomic(result: CoordinatorResult[ResponseT]) -> CoordinatorResult[ResponseT]:
    """``result``, its records allowed to span batches (a result with none is left alone: it
    may be the shared EMPTY_RESULT)."""
    if result.records:
        result.atomic = False
    return result


class Timer(Protocol):
    """Keyed timers of one partition. ``schedule`` replaces any timer with the same key; when a
    timer fires, its key is no longer scheduled and the runtime runs ``operation()`` as a write
    named ``name`` (one name per kind of timer, such as "expire-session": the key holds ids, the
    name is what log lines and metrics group by). A timer's write answers nobody: its result
    carries no response."""

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], CoordinatorResult[None]], *,
                 name: str) -> None: ...

    def cancel(self, key: str) -> None: ...

    def is_scheduled(self, key: str) -> bool: ...


class ResponseHandle(Protocol):
    """What the state machines need of a parked response: a second ``set_result`` is ignored."""

    def set_result(self, value: object) -> None: ...


class CoordinatorShard(Protocol):
    """The state machine of one partition of a coordinator topic, as the runtime drives it.

    Rule: only the ``replay*`` methods change the state the records describe, and they take them
    as the log holds them (key and value bytes; value None is a tombstone), so loading a
    partition and writing to it run the same code (runtime rule 1).

    Transactions (KIP-98, KIP-447): a record of a transactional batch is replayed with
    ``replay_transactional`` (its producer id, and its offset: Kafka's rule "the last log position
    wins" compares them), and a COMMIT or ABORT control batch of the producer with
    ``replay_end_transaction`` — when written (``CoordinatorRuntime.complete_transaction``), when
    loaded and in the hot standby alike. A shard whose log never holds transactional batches
    implements both as no-ops and ``snapshot_transactional_records`` as ``return ()``.
    """

    def replay(self, key: bytes, value: bytes | None, written: object = None) -> None:
        """A record of a non-transactional batch. ``written``: the typed key of a record the
        shard's own operation produced, if any (so the shard need not decode what it has just
        built)."""

    def replay_transactional(self, offset: int, producer_id: int, producer_epoch: int, key: bytes,
                             value: bytes | None, written: object = None) -> None:
        """A record of a transactional batch of ``producer_id``, at log offset ``offset``."""

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """A transaction marker of ``producer_id``: COMMIT (``commit``) or ABORT."""

    def on_loaded(self) -> None:
        """The partition's log is replayed: start the timers the state implies."""

    def snapshot_records(self) -> Iterable[tuple[bytes, bytes]]:
        """The state as the records a fully compacted log would keep (``snapshot.py``)."""

    def snapshot_transactional_records(self) -> Iterable[tuple[int, int, int, bytes, bytes | None]]:
        """The records of transactions still open, as ``(offset, producer_id, producer_epoch,
        key, value)`` in ascending offset: the snapshot writes them after ``snapshot_records``,
        each in a batch carrying its producer id and epoch at its original offset, so replaying
        the snapshot gives them back with what distinguishes them. A ``producer_id`` of -1 is a
        plain record that must be replayed at that point among them (``snapshot.py``)."""


class RecordSerde(Protocol):
    """Turns the records a coordinator's operations return into the key and value bytes of its
    log. Reading goes the other way inside the shard's ``replay``, which takes bytes."""

    def serialize(self, key: object, value: object) -> tuple[bytes, bytes | None]: ...

    #: Raised by ``replay`` for a record of a version this code does not know: loading skips it
    #: with a warning (Kafka does the same, for records left over from an aborted upgrade).
    unknown_version: type[Exception]


class ResponseFuture:
    """A minimal asyncio-free future: the test harness and the fuzzers use it; the runtime hands
    the shard its own handle instead."""

    __slots__ = ("_done", "_result", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._result: object = None
        self._callbacks: list[Callable[[ResponseFuture], None]] = []

    def set_result(self, value: object) -> None:
        if self._done:
            return
        self._done = True
        self._result = value
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback: Callable[[ResponseFuture], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def done(self) -> bool:
        return self._done

    def result(self) -> object:
        if not self._done:
            raise RuntimeError("response not set yet")
        return self._result
