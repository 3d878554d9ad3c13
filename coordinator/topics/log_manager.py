"""The logs of every hosted partition: opened at start-up, created and deleted with topics.

:class:`PartitionLog` wraps one ``storage.Log`` with what the request handlers need around it:
the topic's settings, the idempotent-producer state, the offsets appends will get, and waiters for
new data (Fetch long polls) and for durability (duplicate produce retries).

Rules:

1. Every append to a partition goes through its ``PartitionLog``. Offsets are assigned by the log
   in the order appends are queued (``append_validated`` queues before it returns), so the wrapper
   knows a batch's offset the moment it queues it, and updates producer state then — before the
   next request's sequence check.
2. On a single node the high watermark is the log end offset: the storage engine exposes data to
   readers only once it is written under the flush policy, which is what "committed" means there.
   In cluster mode ``replication`` (``replication.py``) holds the role, leader epoch, ISR and a
   high watermark that the ISR moves; consumers read below it, followers up to the log end.
3. Producer state survives a clean restart as a snapshot taken at the log end on close; it is used
   only if it was taken exactly at the log end found on open (nothing was appended or lost since),
   and deleted once read. Otherwise the state is rebuilt by replaying every batch header.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shutil
import struct
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from protocol.fetch_response import RecordsRef
from protocol.records import BatchHeader, Compression, decode_records, read_batch_header
from protocol.responses import FileRange
from storage.files import partition_dir
from storage.log import FileSlice, Log
from storage.options import LogOptions
from storage.producer_state import ProducerStateManager

from ..config import Config
from ..data_dir import atomic_write
from .configs import effective_topic_configs
from .registry import CONSUMER_OFFSETS, TopicInfo, TopicRegistry
from .replication import Replication

__all__ = ["LogManager", "PartitionLog", "PartitionConfig"]

log = logging.getLogger("groupcoord.logs")

PRODUCER_SNAPSHOT = "producer_state.snapshot"
#: Cluster mode: each partition's high watermark, so a restarted replica does not expose records
#: the ISR never had (Kafka's file and format: ``0``, a count, ``<topic> <partition> <hw>`` lines).
HW_CHECKPOINT = "replication-offset-checkpoint"
LONG_MAX = 2**63 - 1
_LEADER_EPOCH = struct.Struct(">i")
#: Reads smaller than this are copied into the response; larger ones go out with sendfile. Below
#: it the extra task and syscalls of sendfile cost more than copying a few pages.
SENDFILE_MIN_BYTES = 64 * 1024
_CODECS = {"gzip": Compression.GZIP, "snappy": Compression.SNAPPY, "lz4": Compression.LZ4,
           "zstd": Compression.ZSTD, "uncompressed": Compression.NONE}


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    """The topic settings the produce path applies."""

    max_message_bytes: int
    log_append_time: bool
    #: None keeps what the producer sent (``compression.type=producer``).
    compression: int | None
    #: ``min.insync.replicas``: acks=all needs this many in-sync replicas; there is one.
    min_insync_replicas: int = 1
    #: ``message.timestamp.before.max.ms`` / ``after.max.ms`` (KIP-937): how far a CreateTime
    #: record's timestamp may lie in the past / future of the append time.
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 2**63 - 1


def topic_settings(info: TopicInfo, config: Config) -> tuple[LogOptions, PartitionConfig]:
    values = {k: v for k, (v, _src) in effective_topic_configs(info.configs, config).items()}
    flush_messages = int(values["flush.messages"])
    flush_ms = int(values["flush.ms"])
    if flush_messages <= 1:
        flush_policy = "fsync"
    elif flush_ms < LONG_MAX:
        flush_policy = "interval"
    else:
        flush_policy = "none"
    policies = {p.strip() for p in values["cleanup.policy"].split(",")}
    options = LogOptions(
        segment_bytes=int(values["segment.bytes"]),
        segment_ms=int(values["segment.ms"]),
        index_interval_bytes=int(values["index.interval.bytes"]),
        max_batch_bytes=int(values["max.message.bytes"]),
        flush_policy=flush_policy,  # type: ignore[arg-type]
        flush_interval_ms=min(flush_ms, 2**31 - 1),
        cleanup_policy="compact" if "compact" in policies else "delete",
        retention_ms=int(values["retention.ms"]),
        retention_bytes=int(values["retention.bytes"]),
        delete_retention_ms=int(values["delete.retention.ms"]),
        min_cleanable_dirty_ratio=float(values["min.cleanable.dirty.ratio"]),
        file_delete_delay_ms=int(values["file.delete.delay.ms"]),
    )
    codec = values["compression.type"]
    partition = PartitionConfig(int(values["max.message.bytes"]), values["message.timestamp.type"] == "LogAppendTime",
                                None if codec == "producer" else _CODECS[codec],
                                min_insync_replicas=int(values["min.insync.replicas"]),
                                timestamp_before_max_ms=int(values["message.timestamp.before.max.ms"]),
                                timestamp_after_max_ms=int(values["message.timestamp.after.max.ms"]))
    return options, partition


class PartitionLog:
    """One hosted partition. Used from the event loop only."""

    def __init__(self, topic: str, partition: int, storage: Log, config: PartitionConfig,
                 producers: ProducerStateManager) -> None:
        self.topic = topic
        self.partition = partition
        self.log = storage
        self.config = config
        self.producers = producers
        self._next_offset = storage.log_end_offset
        self._data_waiters: set[asyncio.Future[None]] = set()
        self._durable_waiters: list[tuple[int, asyncio.Future[None]]] = []
        #: Cluster mode only (rule 2): None on a single node, which leads every partition.
        self.replication: Replication | None = None
        #: How many times the log's tail was cut (a follower diverged from a new leader): a
        #: reader of the log that ran ahead (a standby coordinator) starts over when it moves.
        self.truncations = 0
        #: Where each of those cuts was (a reader that stayed below every cut keeps its state).
        self.truncation_offsets: list[int] = []
        #: Replicated appends queued and not yet written (see ``settle_replicated``).
        self._replicating: set[asyncio.Future[Any]] = set()

    def replicate(self, broker_id: int, high_watermark: int | None) -> Replication:
        """Switch this partition to cluster mode (no role yet: the cluster wing assigns it).
        ``high_watermark``: the last checkpointed one; unknown → the log start (nothing is
        readable until the ISR confirms it)."""
        if self.replication is None:
            self.replication = Replication(broker_id, lambda: self.log.log_end_offset,
                                           self.config.min_insync_replicas, on_advance=self._wake)
            start = self.log.log_start_offset if high_watermark is None else high_watermark
            self.replication.high_watermark = max(min(start, self.log.log_end_offset), self.log.log_start_offset)
        return self.replication

    @property
    def leader_epoch(self) -> int:
        # A single node leads every partition from creation on: the epoch stays 0.
        return 0 if self.replication is None else self.replication.leader_epoch

    @property
    def is_leader(self) -> bool:
        """Whether this node serves the partition as its leader now: the role, and in cluster
        mode a lease that a stall longer than the session suspends (cluster/liveness.py)."""
        repl = self.replication
        return repl is None or (repl.is_leader and repl.lease())

    @property
    def next_offset(self) -> int:
        """The offset the next append gets: the log end once everything queued has landed."""
        return self._next_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        if self.replication is not None:
            return self.replication.high_watermark
        return self.log.log_end_offset

    def accepts_writes(self) -> bool:
        """Whether a coordinator may write here now: it leads, with an ISR of at least
        ``min.insync.replicas`` (Kafka's NOT_ENOUGH_REPLICAS otherwise)."""
        repl = self.replication
        return repl is None or (repl.is_leader and repl.lease() and len(repl.isr) >= self.config.min_insync_replicas)

    def wait_committed(self, offset: int) -> asyncio.Future[None]:
        """Resolves once everything below ``offset`` is committed: durable here on a single node;
        in the ISR (the high watermark) in cluster mode, failing with NotLeader if this node
        stops leading first."""
        if self.replication is None:
            return self.wait_durable(offset)
        return self.replication.wait_for(offset)

    def append_batch(self, batch: bytearray, header: BatchHeader) -> tuple[int, asyncio.Future[None]]:
        """Queue one validated batch; returns its base offset and a future for durability."""
        if self.replication is not None:
            # KIP-101: every batch carries the leader epoch it was written in (not under the CRC).
            _LEADER_EPOCH.pack_into(batch, 12, self.replication.leader_epoch)
        base = self._next_offset
        queued = self.log.append_validated(batch, header)
        self._next_offset = base + header.last_offset_delta + 1
        self.producers.update(header, base)
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A callback rather than a task: this runs for every coordinator write.
        queued.add_done_callback(lambda f: self._appended(f, base, durable))
        return base, durable

    def _appended(self, queued: asyncio.Future[Any], expected_base: int, durable: asyncio.Future[None]) -> None:
        self._wake()
        if self.replication is not None:
            self.replication.maybe_advance()
        if durable.done():
            return  # cancelled by its waiter (a request whose connection went): nobody to tell
        if queued.cancelled():
            durable.cancel()
            return
        exc = queued.exception()
        if exc is not None:
            durable.set_exception(exc)
            return
        result = queued.result()
        if result.base_offset != expected_base:  # rule 1 broken: a bug, say so loudly
            log.error("append landed at an unexpected offset",
                      extra={"partition": f"{self.topic}-{self.partition}", "expected": expected_base,
                             "actual": result.base_offset})
        durable.set_result(None)

    def wait_durable(self, offset: int) -> asyncio.Future[None]:
        """Resolves once everything below ``offset`` is durable in this node's log."""
        fut = asyncio.get_running_loop().create_future()
        if self.log.log_end_offset >= offset:
            fut.set_result(None)
        else:
            self._durable_waiters.append((offset, fut))
        return fut

    def _wake(self) -> None:
        hw = self.log.log_end_offset
        for fut in self._data_waiters:
            if not fut.done():
                fut.set_result(None)
        self._data_waiters.clear()
        if self._durable_waiters:
            still = []
            for offset, fut in self._durable_waiters:
                if hw >= offset:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((offset, fut))
            self._durable_waiters = still

    def add_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.add(fut)

    def remove_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.discard(fut)

    def read(self, offset: int, max_bytes: int, *, min_one: bool, max_offset: int | None = None) -> bytes | RecordsRef | None:
        """Whole batches from ``offset`` within ``max_bytes`` (one at least if ``min_one``),
        ending below ``max_offset`` (the high watermark for consumers; None: the log end)."""
        if max_offset is not None and max_offset < self.log.log_end_offset:
            return self._read_below(offset, max_bytes, min_one, max_offset)
        found = self.log.slice(offset, max_bytes)
        if found is None or (not min_one and found.length > max_bytes):
            return None
        if found.length < SENDFILE_MIN_BYTES:
            return found.read()
        return RecordsRef(found.length, _file_range(found))

    def _read_below(self, offset: int, max_bytes: int, min_one: bool, max_offset: int) -> bytes | None:
        # Rare (a leader whose followers lag): copy and cut at the last whole batch below.
        if offset >= max_offset:
            return None
        data = self.log.read(offset, max_bytes)
        end = pos = 0
        while pos + 61 <= len(data):
            header = read_batch_header(data, pos)
            if header.base_offset + header.last_offset_delta >= max_offset:
                break
            pos += header.size
            end = pos
        if end == 0 or (not min_one and end > max_bytes):
            return None
        return bytes(data[:end])

    # --- follower side (cluster mode) -------------------------------------------------------------

    def append_replicated(self, data: bytes) -> asyncio.Future[Any]:
        """Append batches fetched from the leader, offsets and leader epochs kept; producer state
        follows, so a follower that becomes leader keeps the idempotence guarantees."""
        fut = self.log.append_replicated(data)
        pos = 0
        while pos + 61 <= len(data):
            header = read_batch_header(data, pos)
            self.producers.update(header, header.base_offset)
            # The end of what is queued, not of what is written: a follower that becomes leader
            # with this append in flight must give its first batch the offset after it.
            self._next_offset = max(self._next_offset, header.base_offset + header.last_offset_delta + 1)
            pos += header.size
        self._replicating.add(fut)

        def done(f: asyncio.Future[Any]) -> None:
            self._replicating.discard(f)
            self._next_offset = max(self._next_offset, self.log.log_end_offset)
            self._wake()
        fut.add_done_callback(done)
        return fut

    async def settle_replicated(self) -> None:
        """Wait for replicated appends still in flight (a follower becoming leader: the new epoch
        starts after them, KIP-101)."""
        while self._replicating:
            await asyncio.gather(*list(self._replicating), return_exceptions=True)

    async def truncate_to(self, offset: int) -> None:
        """Drop everything from ``offset`` on (a follower whose log diverged from the leader's)."""
        if offset >= self.log.log_end_offset:
            await self.log.truncate_to(offset)  # no batch goes; a conflicting epoch entry may
            return
        self.truncations += 1
        self.truncation_offsets.append(offset)
        await self.log.truncate_to(offset)
        self._next_offset = self.log.log_end_offset
        self.producers = await asyncio.get_running_loop().run_in_executor(None, _rebuild_producer_state, self.log)
        if self.replication is not None:
            self.replication.high_watermark = min(self.replication.high_watermark, self.log.log_end_offset)
        self._wake()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        offset = self.log.offset_for_timestamp(timestamp)
        if offset is None:
            return None
        return offset, self._record_timestamp(offset)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """KIP-734: the first record carrying the largest timestamp in the log."""
        best = None
        for seg in self.log.segments:
            if seg.size and seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        data = self.log.read(max(best.offset_of_max_timestamp, self.log_start_offset), 1)
        header = read_batch_header(data, 0)
        for record in decode_records(data, 0, header, check_crc=False):
            if record.timestamp(header) == best.max_timestamp:
                return header.base_offset + record.offset_delta, best.max_timestamp
        return best.offset_of_max_timestamp, best.max_timestamp

    def _record_timestamp(self, offset: int) -> int:
        data = self.log.read(offset, 1)
        header = read_batch_header(data, 0)
        for record in decode_records(data, 0, header, check_crc=False):
            if header.base_offset + record.offset_delta == offset:
                return record.timestamp(header)
        return -1

    async def close(self) -> None:
        """Close the log cleanly, then snapshot producer state at its final end (rule 3)."""
        await self.log.close()
        snapshot = self.producers.snapshot(self.log.log_end_offset)
        await asyncio.get_running_loop().run_in_executor(
            None, atomic_write, self.log.directory / PRODUCER_SNAPSHOT, snapshot)


def _file_range(found: FileSlice) -> FileRange:
    # closefd=False: the segment owns the descriptor and keeps it open long enough after a
    # deletion (file.delete.delay.ms) for a send in flight to finish.
    file = os.fdopen(found.fd, "rb", closefd=False, buffering=0)
    return FileRange(file, found.position, found.length, release=file.close)


def read_hw_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The checkpoint's entries; a missing file is empty, an unreadable one is logged (naming it)
    and ignored: the high watermarks then start low and the ISR raises them again."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:  # not UTF-8 text: damaged or not ours
        log.warning("high watermark checkpoint unreadable", extra={"file": str(path), "reason": str(exc)})
        return {}
    try:
        if lines[0].strip() != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad version or count")
        out = {}
        for line in lines[2:]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
        return out
    except (ValueError, IndexError) as exc:
        log.warning("high watermark checkpoint corrupt; ignored", extra={"file": str(path), "reason": str(exc)})
        return {}


def write_hw_checkpoint(path: Path, entries: dict[tuple[str, int], int]) -> None:
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items()))
    atomic_write(path, f"0\n{len(entries)}\n{body}".encode())


def _set_aside(directory: Path) -> Path:
    """Rename a log directory to Kafka's ``<topic>-<p>.<id>-delete`` form, for removal later."""
    target = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}-delete")
    os.rename(directory, target)
    return target


def _remove_dirs(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _load_producer_state(storage: Log) -> ProducerStateManager:
    path = storage.directory / PRODUCER_SNAPSHOT
    if path.exists():
        try:
            state, at = ProducerStateManager.from_snapshot(path.read_bytes())
        except ValueError as exc:
            log.warning("ignoring producer state snapshot", extra={"file": str(path), "reason": str(exc)})
            state, at = None, -1
        path.unlink()
        if state is not None and at == storage.log_end_offset:
            return state
    return _rebuild_producer_state(storage)


def _rebuild_producer_state(storage: Log) -> ProducerStateManager:
    state = ProducerStateManager()
    for seg in storage.segments:
        state.replay(h for _pos, h, _b, _off in seg.batches(with_bytes=False))
    return state


#: A topic created, or grown, by at most this many partitions has their logs made at once, on the
#: event loop (a new log's files are written and fsynced: ~20 ms each on a busy disk). More are
#: made by executor threads, ``_OPEN_CHUNK`` at a time, while the server goes on serving: one
#: CreatePartitions to 65,535 partitions stopped every client for over an hour (issue 22, the
#: live fuzzer). The request that made them is answered once they are all open.
SYNC_OPEN_MAX = 8
_OPEN_CHUNK = 32


class LogManager:
    """Opens, creates, deletes and maintains the partition logs of every hosted topic."""

    def __init__(self, data_dir: Path, registry: TopicRegistry, config: Config) -> None:
        self.data_dir = data_dir
        self.registry = registry
        self.config = config
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._maintenance: asyncio.Task[None] | None = None
        #: Cluster mode: this node holds only the partitions it is a replica of, opened by the
        #: cluster wing (``open_partition``) rather than for every partition of a new topic.
        self.broker_id: int | None = None
        self._hw_checkpoint: dict[tuple[str, int], int] | None = None
        #: topic name -> tasks opening its new partitions in the background
        self._opening: dict[str, set[asyncio.Task[None]]] = {}
        #: Their own thread: the default executor's threads stay free for appends and fsyncs.
        self._open_executor: concurrent.futures.ThreadPoolExecutor | None = None

    # --- lookup -------------------------------------------------------------------------------

    def topic_info(self, name: str | None, topic_id: Any) -> TopicInfo | None:
        if name is not None:
            return self.registry.get(name)
        return self.registry.by_id(topic_id) if topic_id is not None else None

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    # --- lifecycle ----------------------------------------------------------------------------

    def _open(self, info: TopicInfo, partition: int) -> PartitionLog:
        options, settings = topic_settings(info, self.config)
        if info.name == CONSUMER_OFFSETS and self.broker_id is None:
            # A single node has no replica to hold a commit it acknowledged, so its offsets log is
            # fsynced before anything is acknowledged, whatever the topic's flush settings say
            # (Kafka never fsyncs it and relies on offsets.commit.required.acks=-1 reaching the
            # ISR instead: which is what cluster mode does — rule 2).
            options = replace(options, flush_policy="fsync")
        storage = Log.open(self.data_dir, info.name, partition, options)
        return PartitionLog(info.name, partition, storage, settings, _load_producer_state(storage))

    async def open_partition(self, info: TopicInfo, partition: int) -> PartitionLog:
        """Open (recovering if need be) one partition's log off the event loop, in cluster mode
        with its replication state."""
        plog = self._logs.get((info.name, partition))
        if plog is None:
            plog = await asyncio.get_running_loop().run_in_executor(None, self._open, info, partition)
            existing = self._logs.get((info.name, partition))
            if existing is not None:  # opened meanwhile
                plog.log.abort()
                plog = existing
            else:
                self._logs[(info.name, partition)] = plog
        if self.broker_id is not None:
            if self._hw_checkpoint is None:
                self._hw_checkpoint = read_hw_checkpoint(self.data_dir / HW_CHECKPOINT)
            plog.replicate(self.broker_id, self._hw_checkpoint.get((info.name, partition)))
        return plog

    async def checkpoint_high_watermarks(self) -> None:
        """Write every replicated partition's high watermark (cluster mode; every 5 s and at close,
        as ``replica.high.watermark.checkpoint.interval.ms``)."""
        entries = {(p.topic, p.partition): p.high_watermark for p in self._logs.values() if p.replication is not None}
        await asyncio.get_running_loop().run_in_executor(None, write_hw_checkpoint, self.data_dir / HW_CHECKPOINT, entries)

    def partitions(self) -> list[PartitionLog]:
        return list(self._logs.values())

    async def open_all(self) -> None:
        """Open (and recover) every partition of every registered topic, off the event loop."""
        loop = asyncio.get_running_loop()
        for info in self.registry.all():
            for p in range(info.num_partitions):
                if (info.name, p) not in self._logs:
                    self._logs[(info.name, p)] = await loop.run_in_executor(None, self._open, info, p)
        self._maintenance = asyncio.ensure_future(self._maintain())

    async def close_all(self) -> None:
        if self._maintenance is not None:
            self._maintenance.cancel()
        for tasks in list(self._opening.values()):
            for task in tasks:
                task.cancel()
        if self._open_executor is not None:
            self._open_executor.shutdown(wait=False, cancel_futures=True)
            self._open_executor = None
        if self.broker_id is not None and self._logs:
            try:
                await self.checkpoint_high_watermarks()
            except OSError:
                log.exception("high watermark checkpoint failed")
        for plog in list(self._logs.values()):
            try:
                await plog.close()
            except Exception:
                log.exception("closing a log failed", extra={"partition": f"{plog.topic}-{plog.partition}"})
        self._logs.clear()

    async def _maintain(self) -> None:
        """Compaction every ``log.cleaner.backoff.ms`` (each pass checks the dirty ratio) and
        retention every ``log.retention.check.interval.ms``, as Kafka schedules them."""
        loop = asyncio.get_running_loop()
        backoff = int(self.config["log.cleaner.backoff.ms"]) / 1000.0
        retention_every = int(self.config["log.retention.check.interval.ms"]) / 1000.0
        next_retention = loop.time() + retention_every
        while True:
            await asyncio.sleep(min(backoff, max(next_retention - loop.time(), 0.0)))
            retention_due = loop.time() >= next_retention
            if retention_due:
                next_retention = loop.time() + retention_every
            for plog in list(self._logs.values()):
                if plog.log.closed:
                    continue
                try:
                    if plog.log.options.cleanup_policy == "compact":
                        await plog.log.clean()
                    elif retention_due:
                        await plog.log.apply_retention()
                except Exception:
                    log.exception("log maintenance failed", extra={"partition": f"{plog.topic}-{plog.partition}"})

    async def wait_for_data(self, logs: list[PartitionLog], timeout: float) -> None:
        """Return when any of ``logs`` gets new durable data, or after ``timeout`` seconds."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for plog in logs:
            plog.add_data_waiter(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for plog in logs:
                plog.remove_data_waiter(fut)

    # --- TopicListener ------------------------------------------------------------------------

    def topic_created(self, info: TopicInfo) -> None:
        if self.broker_id is not None:
            return  # cluster mode: the cluster wing opens this node's replicas
        self._open_new(info, range(info.num_partitions))

    def partitions_added(self, info: TopicInfo, old_count: int) -> None:
        if self.broker_id is not None:
            return
        self._open_new(info, range(old_count, info.num_partitions))

    def _open_new(self, info: TopicInfo, partitions: range) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or len(partitions) <= SYNC_OPEN_MAX or info.name == CONSUMER_OFFSETS:
            for p in partitions:
                self._logs[(info.name, p)] = self._open(info, p)
            return
        task = loop.create_task(self._open_in_background(info, partitions))
        tasks = self._opening.setdefault(info.name, set())
        tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            tasks.discard(t)
            if not tasks and self._opening.get(info.name) is tasks:
                del self._opening[info.name]
            if not t.cancelled() and t.exception() is not None:
                log.error("opening new partitions failed", exc_info=t.exception(),
                          extra={"topic": info.name, "partitions": f"{partitions.start}..{partitions.stop - 1}"})

        task.add_done_callback(done)

    async def _open_in_background(self, info: TopicInfo, partitions: range) -> None:
        loop = asyncio.get_running_loop()
        if self._open_executor is None:
            self._open_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="open-partitions")
        for i in range(0, len(partitions), _OPEN_CHUNK):
            opened = await loop.run_in_executor(self._open_executor, self._open_chunk, info,
                                                partitions[i:i + _OPEN_CHUNK])
            for plog in opened:
                self._logs[(info.name, plog.partition)] = plog

    def _open_chunk(self, info: TopicInfo, partitions: range) -> list[PartitionLog]:
        opened: list[PartitionLog] = []
        try:
            for p in partitions:
                opened.append(self._open(info, p))
        except BaseException:
            for plog in opened:
                plog.log.abort()
            raise
        return opened

    def opening(self, topic: str) -> bool:
        """Whether new partitions of ``topic`` are being opened in the background."""
        return bool(self._opening.get(topic))

    async def wait_opened(self, topic: str) -> None:
        """Until every new partition of ``topic`` being opened in the background is open."""
        while self._opening.get(topic):
            await asyncio.gather(*list(self._opening[topic]), return_exceptions=True)

    def configs_changed(self, info: TopicInfo) -> None:
        """Apply a topic's new overrides to its open logs (Kafka applies topic config changes
        live): the produce path's settings and the log's options (segments roll, retention and
        cleaning read them at their next use)."""
        options, settings = topic_settings(info, self.config)
        for p in range(info.num_partitions):
            plog = self._logs.get((info.name, p))
            if plog is not None:
                plog.config = settings
                plog.log.options = options
                if plog.replication is not None:
                    plog.replication.min_insync_replicas = settings.min_insync_replicas

    def topic_deleted(self, info: TopicInfo) -> None:
        # As Kafka does: close the logs and rename their directories out of the way at once, so
        # a topic of the same name can be created right after; remove the files in the background.
        doomed = []
        for p in range(info.num_partitions):
            plog = self._logs.pop((info.name, p), None)
            if plog is None:
                continue
            if plog.replication is not None:
                plog.replication.go_offline(f"topic {info.name} deleted")
            plog.log.abort()
            doomed.append(_set_aside(plog.log.directory))
        if doomed:
            asyncio.get_running_loop().run_in_executor(None, _remove_dirs, doomed)

    # --- one partition leaving this node (cluster mode: reassigned away) --------------------------

    def _directory(self, topic: str, partition: int) -> Path:
        return partition_dir(self.data_dir, topic, partition)

    def has_directory(self, topic: str, partition: int) -> bool:
        return self._directory(topic, partition).is_dir()

    async def remove_partition(self, topic: str, partition: int) -> None:
        """Close and delete one partition's log (open or only on disk), renamed aside at once."""
        plog = self._logs.pop((topic, partition), None)
        directory = self._directory(topic, partition)
        if plog is not None:
            # A clean close waits for an append in flight (a follower's last fetch) to finish.
            await plog.log.close()
            directory = plog.log.directory
        if directory.is_dir():
            doomed = _set_aside(directory)
            await asyncio.get_running_loop().run_in_executor(None, _remove_dirs, [doomed])
