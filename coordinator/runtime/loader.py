"""Loading a partition's state: its snapshot if one is trusted, then its log (runtime rule 1).

One code path. A load and a hot standby replay through the same step function,
:func:`replay_steps`, which walks the record batches of a chunk of log (or snapshot) and calls the
shard's ``replay`` for each record; the one difference is whether the caller yields to the event
loop between slices of records (``slice_records``): a partition being loaded refuses its
operations anyway, while a standby rebuilt on a serving node must not stall it. Likewise the
snapshot is read on the loop or in a thread (``off_loop``), and the same trust rule
(``snapshot.py``) judges it. Transactional batches replay with their producer id and offsets
(``replay_transactional``), control batches as transaction markers (``replay_end_transaction``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from functools import partial
from typing import Generic

from protocol.records import CorruptBatchError, decode_records, iter_batch_positions, read_end_txn_marker

from .errors import RecordReplayError
from .partition import Partition, PartitionTable, ShardT
from .snapshot import SNAPSHOT_FILE, Snapshot, SnapshotError, read_snapshot, remove_snapshot

__all__ = ["Loader", "LOAD_READ_BYTES", "STANDBY_SLICE_RECORDS", "replay_steps"]

log = logging.getLogger("groupcoord.runtime")

#: Bytes read from the log per step while loading (about 4,000 commit records, ~10 ms of replay).
LOAD_READ_BYTES = 256 << 10

#: Records a standby replays between two yields to the event loop (a few milliseconds): a node
#: rebuilding a large standby — just restarted, its offsets partitions in the ISRs that acknowledge
#: the new leaders' commits — must still fetch and apply partition states promptly.
STANDBY_SLICE_RECORDS = 500

#: Told (records replayed so far, last offset done) before each yield of a sliced replay.
Progress = Callable[[int, int], None]

#: The file a record at an offset was read from (a segment of the log, the snapshot), for the
#: error of a record that does not replay; asked only then.
Source = Callable[[int], "str | None"]


def segment_of(part: Partition[ShardT], offset: int) -> str | None:
    """The path of the log segment holding ``offset``, None if the log does not say."""
    found = None
    for segment in getattr(part.plog.log, "segments", ()):
        if segment.base_offset > offset:
            break
        found = segment.path
    return None if found is None else str(found)


def replay_steps(part: Partition[ShardT], unknown_version: type[Exception], data: bytes, offset: int,
                 end: int | None = None, step: int = 0, source: Source | None = None) -> Iterator[tuple[int, int]]:
    """Replay the records at or after ``offset`` of the batches in ``data`` (those before ``end``,
    when given: a standby stops at the high watermark). Yields (records replayed, last offset
    done) after every ``step`` records (never, for 0) and once at the end.

    A record the shard cannot replay (bytes that do not decode, or a replay bug) raises
    RecordReplayError naming the partition, the record's offset and ``source(offset)``, with the
    shard's error as its cause, as Kafka's loader does ("Replaying record ... from <partition> at
    offset <n> ... failed due to: ...", ``CoordinatorLoaderImpl``):
    https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/coordinator/group/CoordinatorLoaderImpl.scala
    """
    shard = part.shard
    replayed = 0
    last = offset - 1
    for pos, header in iter_batch_positions(data):
        if end is not None and header.base_offset >= end:
            break
        if header.last_offset < offset:
            last = header.last_offset
            continue  # before the requested offset
        if header.is_control:
            # A transaction marker (KIP-98): an empty batch (the cleaner removed its record) and
            # control types other than ABORT and COMMIT (KRaft's) are ignored, as Kafka's loader does.
            try:
                marker = read_end_txn_marker(data, pos, header)
            except CorruptBatchError as exc:
                log.warning("skipping a corrupt control batch while loading",
                            extra={**part.where, "offset": header.base_offset, "reason": exc.reason})
                marker = None
            if marker is not None:
                shard.replay_end_transaction(header.producer_id, header.producer_epoch, marker[0])
            last = header.last_offset
            continue
        try:
            records = decode_records(data, pos, header)
        except CorruptBatchError as exc:
            log.warning("skipping a corrupt batch while loading",
                        extra={**part.where, "offset": header.base_offset, "reason": exc.reason})
            last = header.last_offset
            continue
        base = header.base_offset
        transactional = header.is_transactional
        replay = shard.replay
        for record in records:
            if record.key is None or base + record.offset_delta < offset:
                continue
            try:
                if transactional:
                    shard.replay_transactional(base + record.offset_delta, header.producer_id,
                                               header.producer_epoch, record.key, record.value)
                else:
                    replay(record.key, record.value)
            except unknown_version as exc:
                # Kafka skips unknown record types with a warning: they may be left over from an
                # aborted upgrade.
                log.warning("skipping a record of unknown version",
                            extra={**part.where, "offset": base + record.offset_delta, "reason": str(exc)})
                continue
            except Exception as exc:
                at = base + record.offset_delta
                raise RecordReplayError(str(part.where["partition"]), at, source(at) if source else None,
                                        exc) from exc
            replayed += 1
            if step and replayed % step == 0:
                yield replayed, base + record.offset_delta
        last = header.last_offset
    yield replayed, last


class Loader(Generic[ShardT]):
    """Replays a partition's snapshot and log into its shard."""

    def __init__(self, table: PartitionTable[ShardT], renew_shard: Callable[[Partition[ShardT]], None]) -> None:
        self._table = table
        #: Gives the partition a new, empty shard (and timers).
        self._renew_shard = renew_shard

    async def replay_snapshot(self, part: Partition[ShardT], *, off_loop: bool = False) -> int | None:
        """Replay the partition's snapshot if the trust rule of ``snapshot.py`` allows it; the
        offset the log must be replayed from after it, or None to replay the whole log.

        ``off_loop``: read and check the file in a thread (a million offsets make a 50 MB
        snapshot) and yield between slices of records, for a standby starting on a serving node;
        otherwise the whole replay runs in one step."""
        directory = part.plog.log.directory
        try:
            snap = await asyncio.to_thread(read_snapshot, directory) if off_loop else read_snapshot(directory)
        except (OSError, SnapshotError) as exc:
            self._distrust(part, str(exc))
            return None
        if snap is None or self._trust(part, snap) is None:
            return None
        data = bytes(snap.batches) if off_loop else snap.batches
        path = str(directory / SNAPSHOT_FILE)
        try:
            await self.replay_batches(part, data, 0, sliced=off_loop, source=lambda _at: path)
        except RecordReplayError as exc:
            # The CRCs hold but a record does not replay (a writer's bug, not the disk): the
            # snapshot is only a cache of the log, which stays the source of truth. The shard
            # holds part of the snapshot, so the log is replayed into a new one.
            self._distrust(part, str(exc))
            part.timer.cancel_all()
            self._renew_shard(part)
            return None
        part.snapshots.snapshot_records = snap.records
        part.snapshots.snapshot_ms = snap.captured_ms
        log.info("snapshot loaded", extra={**part.where, "offset": snap.offset, "records": snap.records})
        return int(snap.offset)

    def _trust(self, part: Partition[ShardT], snap: Snapshot) -> Snapshot | None:
        plog = part.plog
        # Up to the log end, not the high watermark: every snapshot is of committed records
        # (a leader's waits for the ISR, a standby's stops at the high watermark), and after a
        # restart a follower's high watermark is only its last checkpoint, seconds old.
        if not plog.log_start_offset <= snap.offset <= plog.log_end_offset:
            self._distrust(part, f"snapshot offset {snap.offset} outside the log "
                                 f"[{plog.log_start_offset}, {plog.log_end_offset}]")
            return None
        if self._table.clock.now_ms() >= snap.captured_ms + plog.log.options.delete_retention_ms:
            self._distrust(part, "snapshot older than delete.retention.ms: the cleaner may have removed "
                                 "later tombstones")
            return None
        return snap

    def _distrust(self, part: Partition[ShardT], reason: str) -> None:
        log.warning("ignoring the snapshot; replaying the whole log", extra={**part.where, "reason": reason})
        remove_snapshot(part.plog.log.directory)

    async def replay_batches(self, part: Partition[ShardT], data: bytes, offset: int, end: int | None = None, *,
                             sliced: bool = False, progress: Progress | None = None,
                             source: Source | None = None) -> tuple[int, int]:
        """Replay the records at or after ``offset`` of the batches in ``data`` (those before
        ``end``, when given): (records replayed, last offset seen). ``sliced``: yield to the event
        loop every ``STANDBY_SLICE_RECORDS`` records, telling ``progress`` before each yield;
        otherwise run in one step. Shared by the log and the snapshot; ``source`` names the file
        of a record that does not replay (the log's segment by default)."""
        result = (0, offset - 1)
        step = STANDBY_SLICE_RECORDS if sliced else 0
        if source is None:
            source = partial(segment_of, part)
        for result in replay_steps(part, self._table.serde.unknown_version, data, offset, end, step, source):
            if sliced:
                if progress is not None:
                    progress(*result)
                await asyncio.sleep(0)
        return result

    async def replay_log(self, part: Partition[ShardT], offset: int) -> int:
        """Replay the log from ``offset`` to its end; returns the number of records replayed. In
        cluster mode the end may lie above the high watermark: a new leader's log is what the ISR
        will hold, and answers that depend on it wait for the high watermark (runtime rule 2)."""
        plog = part.plog
        end = plog.log_end_offset
        replayed = 0
        while offset < end:
            data = plog.log.read(offset, LOAD_READ_BYTES)
            if not data:
                break
            count, last = await self.replay_batches(part, data, offset)
            replayed += count
            offset = last + 1
            await asyncio.sleep(0)  # one read (<= 1 MiB of records) between yields
        return replayed
