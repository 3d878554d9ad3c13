"""The logs of every hosted partition: opened at start-up, created and deleted with topics.

:class:`PartitionLog` wraps one ``storage.Log`` with what the request handlers need around it:
the topic's settings, the idempotent-producer state, the offsets appends will get, and waiters for
new data (Fetch long polls) and for durability (duplicate produce retries).

Rules:

1. Every append to a partition goes through its ``PartitionLog``. Offsets are assigned by the log
   in the order appends are queued (``append_validated`` queues before it returns), so the wrapper
   knows a batch's offset the moment it queues it, and updates producer state then — before the
   next request's sequence check.
2. The high watermark is the log end offset: the storage engine exposes data to readers only once
   it is written under the flush policy, which is what "committed" means on a single node.
3. Producer state survives a clean restart as a snapshot taken at the log end on close; it is used
   only if it was taken exactly at the log end found on open (nothing was appended or lost since),
   and deleted once read. Otherwise the state is rebuilt by replaying every batch header.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.fetch_response import RecordsRef
from protocol.records import BatchHeader, Compression, decode_records, read_batch_header
from protocol.responses import FileRange
from storage.log import FileSlice, Log
from storage.options import LogOptions
from storage.producer_state import ProducerStateManager

from ..config import Config
from ..data_dir import atomic_write
from .configs import effective_topic_configs
from .registry import TopicInfo, TopicRegistry

__all__ = ["LogManager", "PartitionLog", "PartitionConfig"]

log = logging.getLogger("groupcoord.logs")

PRODUCER_SNAPSHOT = "producer_state.snapshot"
LONG_MAX = 2**63 - 1
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

    #: A single node leads every partition from creation on: the leader epoch never changes.
    leader_epoch = 0

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

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    def append_batch(self, batch: bytearray, header: BatchHeader) -> tuple[int, asyncio.Future[None]]:
        """Queue one validated batch; returns its base offset and a future for durability."""
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
        """Resolves once everything below ``offset`` is durable."""
        fut = asyncio.get_running_loop().create_future()
        if self.high_watermark >= offset:
            fut.set_result(None)
        else:
            self._durable_waiters.append((offset, fut))
        return fut

    def _wake(self) -> None:
        hw = self.high_watermark
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

    def read(self, offset: int, max_bytes: int, *, min_one: bool) -> bytes | RecordsRef | None:
        """Whole batches from ``offset`` within ``max_bytes`` (one at least if ``min_one``)."""
        found = self.log.slice(offset, max_bytes)
        if found is None or (not min_one and found.length > max_bytes):
            return None
        if found.length < SENDFILE_MIN_BYTES:
            return found.read()
        return RecordsRef(found.length, _file_range(found))

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
    state = ProducerStateManager()
    for seg in storage.segments:
        state.replay(h for _pos, h, _b, _off in seg.batches(with_bytes=False))
    return state


class LogManager:
    """Opens, creates, deletes and maintains the partition logs of every hosted topic."""

    def __init__(self, data_dir: Path, registry: TopicRegistry, config: Config) -> None:
        self.data_dir = data_dir
        self.registry = registry
        self.config = config
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._maintenance: asyncio.Task[None] | None = None

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
        storage = Log.open(self.data_dir, info.name, partition, options)
        return PartitionLog(info.name, partition, storage, settings, _load_producer_state(storage))

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
        for p in range(info.num_partitions):
            self._logs[(info.name, p)] = self._open(info, p)

    def partitions_added(self, info: TopicInfo, old_count: int) -> None:
        for p in range(old_count, info.num_partitions):
            self._logs[(info.name, p)] = self._open(info, p)

    def topic_deleted(self, info: TopicInfo) -> None:
        # As Kafka does: close the logs and rename their directories out of the way at once, so
        # a topic of the same name can be created right after; remove the files in the background.
        doomed = []
        for p in range(info.num_partitions):
            plog = self._logs.pop((info.name, p), None)
            if plog is None:
                continue
            plog.log.abort()
            target = plog.log.directory.with_name(f"{plog.log.directory.name}.{uuid.uuid4().hex}-delete")
            os.rename(plog.log.directory, target)
            doomed.append(target)
        if doomed:
            asyncio.get_running_loop().run_in_executor(None, _remove_dirs, doomed)
