"""The logs of every hosted partition: opened at start-up, created and deleted with topics, and
maintained (compaction, retention) while the node runs.

One partition's log is a :class:`~coordinator.topics.partition_log.PartitionLog`
(``partition_log.py``); this module holds the set of them and their lifecycle. It is the topic
registry's listener: a topic created or grown gets its logs opened here (many partitions: in the
background, see ``SYNC_OPEN_MAX``), a topic deleted has them closed and renamed aside at once, as
Kafka does. In cluster mode the cluster wing opens only this node's replicas (``open_partition``),
and their high watermarks are checkpointed to ``storage.files.HW_CHECKPOINT_FILE`` so a restarted
replica does not expose records the ISR never had.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shutil
import threading
import uuid
from dataclasses import replace
from pathlib import Path

from protocol.records import Compression
from storage.errors import CorruptCheckpointError
from storage.files import HW_CHECKPOINT_FILE, partition_dir, read_hw_checkpoint, write_hw_checkpoint
from storage.io_worker import shared_worker
from storage.log import Log
from storage.options import FlushPolicy, LogOptions

from ..config import Config
from .configs import effective_topic_configs
from .partition_log import PartitionConfig, PartitionLog, load_producer_state
from .registry import CONSUMER_OFFSETS, TopicInfo, TopicRegistry

__all__ = ["LogManager", "topic_settings"]

log = logging.getLogger("groupcoord.logs")

LONG_MAX = 2**63 - 1
#: How long ``abort_all`` waits for the I/O thread to finish what it was handed.
_ABORT_DRAIN_S = 10.0

_CODECS = {"gzip": Compression.GZIP, "snappy": Compression.SNAPPY, "lz4": Compression.LZ4,
           "zstd": Compression.ZSTD, "uncompressed": Compression.NONE}


def topic_settings(info: TopicInfo, config: Config) -> tuple[LogOptions, PartitionConfig]:
    """A topic's effective configs (its overrides over the node's defaults) as the storage engine's
    options and the produce path's settings."""
    values = {k: v for k, (v, _src) in effective_topic_configs(info.configs, config).items()}
    flush_messages = int(values["flush.messages"])
    flush_ms = int(values["flush.ms"])
    flush_policy: FlushPolicy
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
        flush_policy=flush_policy,
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


def _set_aside(directory: Path) -> Path:
    """Rename a log directory to Kafka's ``<topic>-<p>.<id>-delete`` form, for removal later."""
    target = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}-delete")
    os.rename(directory, target)
    return target


def _remove_dirs(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)



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
        #: The high watermark checkpoint being written (in an executor thread), if any.
        self._hw_write: asyncio.Future[None] | None = None
        #: Cluster mode: this node holds only the partitions it is a replica of, opened by the
        #: cluster wing (``open_partition``) rather than for every partition of a new topic.
        self.broker_id: int | None = None
        self._hw_checkpoint: dict[tuple[str, int], int] | None = None
        #: topic name -> tasks opening its new partitions in the background
        self._opening: dict[str, set[asyncio.Task[None]]] = {}
        #: Their own thread: the default executor's threads stay free for appends and fsyncs.
        self._open_executor: concurrent.futures.ThreadPoolExecutor | None = None

    # --- lookup -------------------------------------------------------------------------------

    def topic_info(self, name: str | None, topic_id: uuid.UUID | None) -> TopicInfo | None:
        if name is not None:
            return self.registry.get(name)
        return self.registry.by_id(topic_id) if topic_id is not None else None

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    # --- lifecycle ----------------------------------------------------------------------------

    def _open(self, info: TopicInfo, partition: int, high_watermark: int | None = None) -> PartitionLog:
        options, settings = topic_settings(info, self.config)
        if info.name == CONSUMER_OFFSETS and self.broker_id is None:
            # A single node has no replica to hold a commit it acknowledged, so its offsets log is
            # fsynced before anything is acknowledged, whatever the topic's flush settings say
            # (Kafka never fsyncs it and relies on offsets.commit.required.acks=-1 reaching the
            # ISR instead: which is what cluster mode does — partition_log.py rule 2).
            options = replace(options, flush_policy="fsync")
        storage = Log.open(self.data_dir, info.name, partition, options, high_watermark=high_watermark)
        return PartitionLog(info.name, partition, storage, settings, load_producer_state(storage, high_watermark))

    async def open_partition(self, info: TopicInfo, partition: int) -> PartitionLog:
        """Open (recovering if need be) one partition's log off the event loop, in cluster mode
        with its replication state."""
        plog = self._logs.get((info.name, partition))
        if self.broker_id is not None and self._hw_checkpoint is None:
            self._hw_checkpoint = self._read_hw_checkpoint()
        if plog is None:
            # Cluster mode: transactions completed above the checkpointed high watermark stay
            # unstable (partition_log.py rule 4); unknown, every one does until the ISR confirms.
            hw = None if self._hw_checkpoint is None else self._hw_checkpoint.get((info.name, partition), 0)
            plog = await asyncio.get_running_loop().run_in_executor(None, self._open, info, partition, hw)
            existing = self._logs.get((info.name, partition))
            if existing is not None:  # opened meanwhile
                plog.log.abort()
                plog = existing
            else:
                self._logs[(info.name, partition)] = plog
        if self.broker_id is not None and self._hw_checkpoint is not None:
            plog.replicate(self.broker_id, self._hw_checkpoint.get((info.name, partition)))
        return plog

    def _read_hw_checkpoint(self) -> dict[tuple[str, int], int]:
        """The checkpointed high watermarks; a damaged file is logged (naming it) and ignored: the
        high watermarks then start low and the ISR raises them again."""
        path = self.data_dir / HW_CHECKPOINT_FILE
        try:
            return read_hw_checkpoint(path)
        except CorruptCheckpointError as exc:
            log.warning("high watermark checkpoint corrupt; ignored", extra={"file": str(path), "reason": exc.reason})
            return {}

    async def checkpoint_high_watermarks(self) -> None:
        """Write every replicated partition's high watermark (cluster mode; every 5 s and at close,
        as ``replica.high.watermark.checkpoint.interval.ms``)."""
        # One write at a time: two threads writing the file's one temporary name race, and the
        # second rename finds it gone (close_all cancels the periodic checkpoint mid-write, but
        # cancelling its caller does not stop the thread). The write is shielded, so it stays
        # pending until its thread is done and the next one waits for it.
        while self._hw_write is not None and not self._hw_write.done():
            await asyncio.wait([self._hw_write])
        entries = {(p.topic, p.partition): p.high_watermark for p in self._logs.values() if p.replication is not None}
        self._hw_write = asyncio.get_running_loop().run_in_executor(
            None, write_hw_checkpoint, self.data_dir / HW_CHECKPOINT_FILE, entries)
        await asyncio.shield(self._hw_write)

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

    def _stop_background(self) -> None:
        """Stop the maintenance task and the partitions still opening (close and abort alike)."""
        if self._maintenance is not None:
            self._maintenance.cancel()
        for tasks in list(self._opening.values()):
            for task in tasks:
                task.cancel()
        if self._open_executor is not None:
            self._open_executor.shutdown(wait=False, cancel_futures=True)
            self._open_executor = None

    async def close_all(self) -> None:
        self._stop_background()
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

    def abort_all(self) -> None:
        """Drop every log as a crash would (``Log.abort``: descriptors closed, nothing written),
        after the appends already handed to the I/O thread: a write left behind could land on a
        descriptor number the next opener reuses."""
        self._stop_background()
        drained = threading.Event()
        try:
            shared_worker().run(drained.set)
        except RuntimeError:  # no running loop: nothing of ours can be queued
            drained.set()
        drained.wait(_ABORT_DRAIN_S)
        for plog in list(self._logs.values()):
            plog.log.abort()
        self._logs.clear()

    def remove_expired_producers(self) -> int:
        """Drop, in every partition, the producers idle longer than ``producer.id.expiration.ms``
        (open transactions excepted; ``PartitionLog.remove_expired_producers``); how many went."""
        expiration_ms = self.config["producer.id.expiration.ms"]
        removed = 0
        for plog in list(self._logs.values()):
            removed += plog.remove_expired_producers(expiration_ms)
        if removed:
            log.info("expired idle producers", extra={"producers": removed})
        return removed

    async def _maintain(self) -> None:
        """Compaction every ``log.cleaner.backoff.ms`` (each pass checks the dirty ratio),
        retention every ``log.retention.check.interval.ms`` and producer expiration every
        ``producer.id.expiration.check.interval.ms``, as Kafka schedules them."""
        loop = asyncio.get_running_loop()
        backoff = int(self.config["log.cleaner.backoff.ms"]) / 1000.0
        retention_every = int(self.config["log.retention.check.interval.ms"]) / 1000.0
        expiry_every = self.config["producer.id.expiration.check.interval.ms"] / 1000.0
        next_retention = loop.time() + retention_every
        next_expiry = loop.time() + expiry_every
        while True:
            await asyncio.sleep(min(backoff, max(min(next_retention, next_expiry) - loop.time(), 0.0)))
            if loop.time() >= next_expiry:
                next_expiry = loop.time() + expiry_every
                try:
                    self.remove_expired_producers()
                except Exception:
                    log.exception("producer expiration failed")
            retention_due = loop.time() >= next_retention
            if retention_due:
                next_retention = loop.time() + retention_every
            for plog in list(self._logs.values()):
                if plog.log.closed:
                    continue
                try:
                    if plog.log.options.cleanup_policy == "compact":
                        await plog.clean()
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
        except TimeoutError:
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
