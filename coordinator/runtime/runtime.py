"""The coordinator runtime: one state machine ("shard") per ``__consumer_offsets`` partition.

Generic: it knows records, logs, timers and durability, not groups. A shard is anything with
``replay(key, value)`` (key/value from ``protocol.consumer_offsets``; value None is a tombstone)
and ``on_loaded()``; operations are plain functions of the shard returning a result with
``records``, ``response`` and an optional ``on_appended`` callback.

Theory of operation. asyncio runs one callback at a time, so an operation that runs start to
finish without awaiting is already serial: operations on one partition never interleave. Each
write operation:

1. runs ``op(shard)``, which validates and returns (records, response) without touching the
   records' state;
2. adds the records to the partition's open batch and replays them into the shard with the same
   ``replay`` that loading uses; the batch goes to the log at the end of the event loop's current
   round (rule 7), which assigns offsets in queue order, so the runtime knows them at once;
3. answers only once the log says the batch is durable — and so does every answer of that
   partition produced after it, reads included: nothing a client sees can be lost by a crash.

Replaying at queue time, before durability, lets the next operation see the effects of the
previous one without waiting an fsync, so commits to one partition share fsyncs (group commit).
If an append fails, the log refuses further appends (an I/O error leaves its tail unknown); the
partition is marked failed and every answer still waiting on it fails, so the service answers
NOT_COORDINATOR and clients go elsewhere or retry. A restart reloads the partition from what the
log holds — state that was replayed but never became durable is never seen by anyone.

Rules:

1. Only ``replay`` changes record state, and it takes records as the log holds them (key and
   value bytes): loading a partition is replaying its log, then ``on_loaded()``. There is no
   second code path. A snapshot (``snapshot.py``) stands for a prefix of the log: it is the
   shard's state written out as records, replayed the same way, and then the log after it.
2. A response, a parked response completed by a later operation or timer, and an operation's
   ``on_appended`` all wait for the partition's durable offset to pass everything written up to
   the end of the operation that produced them.
3. While a partition loads, its operations are refused (the service answers
   COORDINATOR_LOAD_IN_PROGRESS); loading yields to the event loop after each read of
   ``LOAD_READ_BYTES`` so partitions already loaded keep being served.
4. A partition writes a new snapshot once the records appended since the last one outnumber
   both ``snapshot_min_records`` and the records of its last snapshot (the live state), so the
   log tail replayed at load stays no longer than the state itself, and the cost of snapshots
   per appended record stays constant. Shutdown snapshots every partition that changed.
5. A snapshot is trusted for ``delete.retention.ms`` after it was taken (``snapshot.py``, rule
   3), so a partition that has one takes a fresh one when half of that has passed, changed or
   not: a coordinator idle for a day would otherwise replay its whole log at the next load.
6. Hot standby (cluster mode, beyond Kafka, which loads the whole partition on election): a
   follower of a partition keeps a shard that replays the log as replication appends to it —
   the same ``replay``, no timers, no answers. Becoming the leader replays only what it had not
   yet and serves. If the follower's log is truncated (a new leader's log diverged), the standby
   state is thrown away and rebuilt from the log, so it never holds a record the log lost.
   A standby is *warming* from its start until it has first replayed up to the high watermark;
   ``standby_listeners`` hear when that starts and ends, so the cluster can prefer a warm
   replica when it elects a leader (a cold one would answer COORDINATOR_LOAD_IN_PROGRESS for the
   seconds a million offsets take to replay).
7. Batching (Kafka's ``group.coordinator.append.linger.ms=-1``, "adaptive", PR #20780): the
   records of every write a partition runs in one round of the event loop go to its log as one
   batch, flushed by a callback queued behind that round's work — no timer, so a lone commit
   waits no longer than before, and commits arriving together (many connections, one ``select``)
   share one batch: one header, one CRC, one append, one follower append and one standby batch
   instead of one each. A batch is flushed early once it reaches ``APPEND_BATCH_MAX_BYTES``; an
   operation's records are never split across batches. Records of a partition that stopped
   being served before its batch was flushed are never written: their answers failed already.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from typing import Any, Callable, Iterable, Iterator, Protocol

from protocol.consumer_offsets import UnknownRecordVersion, serialize
from protocol.records import CorruptBatchError, build_batch, decode_records, iter_batch_positions, read_batch_header

from storage.errors import LogClosedError

from ..topics.log_manager import LogManager, PartitionLog
from .snapshot import SnapshotEncoder, SnapshotError, read_snapshot, remove_snapshot, write_snapshot

__all__ = ["CoordinatorRuntime", "CoordinatorState", "NotActiveError", "NotEnoughReplicas", "CommitTimedOut",
           "SystemClock", "AsyncioTimer", "Shard"]

log = logging.getLogger("groupcoord.runtime")

#: A partition's open batch is flushed before it grows past this (rule 7); Kafka caps it at the
#: partition's ``max.message.bytes`` (1 MiB by default).
APPEND_BATCH_MAX_BYTES = 512 << 10

#: Bytes read from the log per step while loading (about 4,000 commit records, ~10 ms of replay).
LOAD_READ_BYTES = 256 << 10


class Shard(Protocol):
    def replay(self, key: bytes, value: bytes | None, written: Any = None) -> None:
        """``written``: the typed key of a record the shard's own handler produced, if any."""

    def on_loaded(self) -> None: ...

    def snapshot_records(self) -> Iterable[tuple[bytes, bytes]]: ...


class CoordinatorState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    #: Cluster mode, a follower of the partition: replaying the replicated log as it grows, so
    #: taking over replays only the tail (rule 6). Answers nothing.
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


#: Records a standby replays between two yields to the event loop (a few milliseconds): a node
#: rebuilding a large standby — just restarted, its offsets partitions in the ISRs that acknowledge
#: the new leaders' commits — must still fetch and apply partition states promptly.
STANDBY_SLICE_RECORDS = 500

#: After a failed snapshot, the earliest retry of a renewal that is already due (rule 5).
SNAPSHOT_RETRY_SECONDS = 60.0


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class AsyncioTimer:
    """Keyed timers of one partition; an expiry runs its operation as a write (records first)."""

    def __init__(self, runtime: CoordinatorRuntime, partition: int) -> None:
        self._runtime = runtime
        self._partition = partition
        self._handles: dict[str, asyncio.TimerHandle] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], Any]) -> None:
        old = self._handles.pop(key, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000.0, self._fire, key, operation)

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def _fire(self, key: str, operation: Callable[[], Any]) -> None:
        self._handles.pop(key, None)
        try:
            done = self._runtime.write(self._partition, lambda _shard: operation())
        except NotActiveError:
            return  # the partition was unloaded or failed; its timers die with it
        except Exception:
            log.exception("timer operation failed", extra={"timer": key, "partition": self._partition})
            return
        unanswered(done)


def unanswered(done: asyncio.Future[Any]) -> None:
    """A write nobody answers (a timer's, an internal one): its outcome is still read when it
    comes, because an unload (leadership moved while its records waited for the ISR) fails it,
    and asyncio logs an exception never retrieved as an ERROR. The records' fate is the log's."""
    done.add_done_callback(_read_outcome)


def _read_outcome(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()


class _Context:
    __slots__ = ("partition", "state", "shard", "plog", "timer", "last_written", "completions", "in_op", "waiting",
                 "since_snapshot", "snapshot_records", "snapshotting", "snapshot_ms", "refresh", "replayed_to",
                 "truncations", "follow", "rebuilding", "pending", "pending_base", "pending_bytes", "warming")

    def __init__(self, partition: int, plog: PartitionLog) -> None:
        self.partition = partition
        self.state = CoordinatorState.LOADING
        self.shard: Any = None
        self.plog = plog
        self.timer: AsyncioTimer | None = None
        #: One past the last offset written (queued) to this partition's log.
        self.last_written = plog.log_end_offset
        #: Parked responses completed during the running operation, released after it.
        self.completions: list[tuple[asyncio.Future[Any], Any]] = []
        self.in_op = False
        #: Answers waiting for durability; failed together if the partition fails.
        self.waiting: set[asyncio.Future[Any]] = set()
        #: Records appended (or replayed from the log tail) since the last snapshot, and the
        #: number of records that snapshot held (rule 4).
        self.since_snapshot = 0
        self.snapshot_records = 0
        self.snapshotting: asyncio.Future[None] | None = None
        #: When the snapshot on disk was taken (None: there is none), and the timer that renews
        #: it before it stops being trusted (rule 5).
        self.snapshot_ms: int | None = None
        self.refresh: asyncio.TimerHandle | None = None
        #: Standby (rule 6): the offset replayed up to, the log's truncation count it matches,
        #: and the task following the log.
        self.replayed_to = 0
        self.truncations = getattr(plog, "truncations", 0)
        self.follow: asyncio.Task[None] | None = None
        #: A standby whose state is being rebuilt (a snapshot half replayed): not to be taken over.
        self.rebuilding = False
        #: A standby that has not yet caught up with the high watermark (rule 6).
        self.warming = False
        #: The open batch (rule 7): serialized records replayed but not yet given to the log, the
        #: offset its first record will get, and its size.
        self.pending: list[tuple[bytes, bytes | None]] | None = None
        self.pending_base = 0
        self.pending_bytes = 0

    def stop_refresh(self) -> None:
        if self.refresh is not None:
            self.refresh.cancel()
            self.refresh = None


class CoordinatorRuntime:
    """Runs shards over the partitions of one compacted topic."""

    def __init__(self, logs: LogManager, topic: str,
                 shard_factory: Callable[[int, AsyncioTimer, SystemClock], Shard],
                 clock: SystemClock | None = None, *, snapshot_min_records: int = 20_000,
                 commit_timeout_ms: int = 5000) -> None:
        self.logs = logs
        #: ``offsets.commit.timeout.ms``: how long an answer waits for the ISR (cluster mode).
        self.commit_timeout_s = commit_timeout_ms / 1000.0
        self.snapshot_min_records = snapshot_min_records
        self.topic = topic
        self.shard_factory = shard_factory
        self.clock = clock or SystemClock()
        self._contexts: dict[int, _Context] = {}
        #: Partitions promised to ``load`` but not started yet: they answer as loading, as Kafka
        #: does for partitions queued behind others in its loader.
        self._queued: set[int] = set()
        self.load_seconds: dict[int, float] = {}
        #: Told ``(partition, warming)`` when a standby starts warming and when it stops (caught
        #: up, taken over, or gone) — rule 6. Cluster mode publishes it for the controller.
        self.standby_listeners: list[Callable[[int, bool], None]] = []

    # --- state --------------------------------------------------------------------------------

    def state(self, partition: int) -> CoordinatorState | None:
        ctx = self._contexts.get(partition)
        if ctx is None:
            return CoordinatorState.LOADING if partition in self._queued else None
        return ctx.state

    def queue_loading(self, partitions: Iterable[int]) -> None:
        """Partitions ``load`` will be called for: until then they count as loading."""
        self._queued.update(partitions)

    def shard(self, partition: int) -> Any:
        ctx = self._active(partition)
        return ctx.shard

    def _active(self, partition: int) -> _Context:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.state is not CoordinatorState.ACTIVE:
            raise NotActiveError(partition, ctx.state if ctx else None)
        if not ctx.plog.is_leader:
            # Cluster mode: leadership gone or suspended (a stall, cluster/liveness.py) before
            # the resignation reached us: answer nothing from a state that may be stale.
            raise NotActiveError(partition, ctx.state)
        return ctx

    # --- loading ------------------------------------------------------------------------------

    async def load(self, partition: int) -> None:
        """Become the coordinator of ``partition``: replay its log into a fresh shard."""
        self._queued.discard(partition)
        plog = self.logs.get(self.topic, partition)
        if plog is None:
            raise KeyError(f"{self.topic}-{partition} is not hosted here")
        old = self._contexts.get(partition)
        started = time.monotonic()
        if old is not None and old.state is CoordinatorState.STANDBY and old.plog is plog and old.rebuilding:
            # A standby still rebuilding (a node restarted a moment ago) is nearer the end than a
            # fresh load would be: let it finish (answers meanwhile: COORDINATOR_LOAD_IN_PROGRESS).
            while old.rebuilding and self._contexts.get(partition) is old and old.state is CoordinatorState.STANDBY:
                await asyncio.sleep(0.01)
            old = self._contexts.get(partition)
        if (old is not None and old.state is CoordinatorState.STANDBY and old.plog is plog and not old.rebuilding
                and old.truncations == getattr(plog, "truncations", 0)):
            # Rule 6: take over the standby state; only the tail is left to replay.
            ctx = old
            self._set_warming(ctx, False)  # leading now: no longer a candidate to be ranked
            if ctx.follow is not None:
                ctx.follow.cancel()
                ctx.follow = None
            ctx.state = CoordinatorState.LOADING
            start: int | None = ctx.replayed_to
        else:
            if old is not None:
                self._halt(old)
            ctx = _Context(partition, plog)
            self._contexts[partition] = ctx
            ctx.timer = AsyncioTimer(self, partition)
            ctx.shard = self.shard_factory(partition, ctx.timer, self.clock)
            start = None
        try:
            if start is None:
                start = self._replay_snapshot(ctx)
                if start is None:
                    start = plog.log_start_offset
                else:
                    await asyncio.sleep(0)
            ctx.since_snapshot += await self._replay_log(ctx, start)
            ctx.in_op = True
            try:
                ctx.shard.on_loaded()
            finally:
                ctx.in_op = False
        except Exception:
            log.exception("loading failed", extra={"partition": f"{self.topic}-{partition}"})
            ctx.state = CoordinatorState.FAILED
            return
        if self._contexts.get(partition) is not ctx:
            ctx.timer.cancel_all()
            return  # unloaded while loading (cluster mode: leadership moved on)
        ctx.last_written = plog.log_end_offset
        ctx.state = CoordinatorState.ACTIVE
        self.load_seconds[partition] = time.monotonic() - started
        log.info("coordinator partition loaded", extra={
            "partition": f"{self.topic}-{partition}", "seconds": round(self.load_seconds[partition], 4),
            "from_offset": start, "log_end": ctx.last_written, "from_standby": ctx is old})
        self._release_completions(ctx)
        self._maybe_snapshot(ctx)
        self._schedule_refresh(ctx)

    def _replay_snapshot(self, ctx: _Context) -> int | None:
        """Replay the partition's snapshot if the trust rule of ``snapshot.py`` allows it; the
        offset the log must be replayed from after it, or None to replay the whole log."""
        snap = self._trusted_snapshot(ctx)
        if snap is None:
            return None
        self._replay_batches(ctx, snap.batches, 0)
        return self._snapshot_replayed(ctx, snap)

    async def _replay_snapshot_gently(self, ctx: _Context) -> int | None:
        """``_replay_snapshot`` yielding to the event loop between chunks of batches: a standby
        rebuilt while the node serves (a million offsets take seconds) must not stall it."""
        snap = await self._trusted_snapshot_off_loop(ctx)
        if snap is None:
            return None
        await self._replay_batches_gently(ctx, bytes(snap.batches), 0)
        return self._snapshot_replayed(ctx, snap)

    def _snapshot_replayed(self, ctx: _Context, snap: Any) -> int:
        ctx.snapshot_records = snap.records
        ctx.snapshot_ms = snap.captured_ms
        log.info("snapshot loaded", extra={"partition": f"{self.topic}-{ctx.partition}", "offset": snap.offset,
                                           "records": snap.records})
        return int(snap.offset)

    def _trusted_snapshot(self, ctx: _Context) -> Any:
        """The partition's snapshot if the trust rule of ``snapshot.py`` allows it, else None
        (an untrusted one is deleted, with the reason)."""
        try:
            snap = read_snapshot(ctx.plog.log.directory)
        except (OSError, SnapshotError) as exc:
            return self._distrust(ctx, str(exc))
        return self._trust(ctx, snap)

    async def _trusted_snapshot_off_loop(self, ctx: _Context) -> Any:
        """``_trusted_snapshot`` with the file read and checked in a thread: a million offsets
        make a 50 MB snapshot, and a standby starting must not stall the node that long."""
        try:
            snap = await asyncio.to_thread(read_snapshot, ctx.plog.log.directory)
        except (OSError, SnapshotError) as exc:
            return self._distrust(ctx, str(exc))
        return self._trust(ctx, snap)

    def _trust(self, ctx: _Context, snap: Any) -> Any:
        if snap is None:
            return None
        plog = ctx.plog
        # Up to the log end, not the high watermark: every snapshot is of committed records
        # (a leader's waits for the ISR, a standby's stops at the high watermark), and after a
        # restart a follower's high watermark is only its last checkpoint, seconds old.
        if not plog.log_start_offset <= snap.offset <= plog.log_end_offset:
            return self._distrust(ctx, f"snapshot offset {snap.offset} outside the log "
                                       f"[{plog.log_start_offset}, {plog.log_end_offset}]")
        if self.clock.now_ms() >= snap.captured_ms + plog.log.options.delete_retention_ms:
            return self._distrust(ctx, "snapshot older than delete.retention.ms: the cleaner may have removed "
                                       "later tombstones")
        return snap

    def _distrust(self, ctx: _Context, reason: str) -> None:
        log.warning("ignoring the snapshot; replaying the whole log",
                    extra={"partition": f"{self.topic}-{ctx.partition}", "reason": reason})
        remove_snapshot(ctx.plog.log.directory)
        return None

    def _replay_batches(self, ctx: _Context, data: bytes, offset: int, end: int | None = None) -> tuple[int, int]:
        """Replay the records at or after ``offset`` of the batches in ``data`` (those before
        ``end``, when given: a standby stops at the high watermark): (records replayed, last
        offset seen). Shared by the log and the snapshot."""
        result = (0, offset - 1)
        for result in self._replay_steps(ctx, data, offset, end):
            pass
        return result

    async def _replay_batches_gently(self, ctx: _Context, data: bytes, offset: int, end: int | None = None,
                                     progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
        """``_replay_batches`` yielding to the event loop every ``STANDBY_SLICE_RECORDS`` records,
        telling ``progress`` (records replayed so far, last offset done) before each yield."""
        result = (0, offset - 1)
        for result in self._replay_steps(ctx, data, offset, end, STANDBY_SLICE_RECORDS):
            if progress is not None:
                progress(*result)
            await asyncio.sleep(0)
        return result

    def _replay_steps(self, ctx: _Context, data: bytes, offset: int, end: int | None = None,
                      step: int = 0) -> Iterator[tuple[int, int]]:
        """The replay of ``_replay_batches`` as a generator: yields (records replayed, last offset
        done) after every ``step`` records (never, for 0) and once at the end."""
        replay = ctx.shard.replay
        replayed = 0
        last = offset - 1
        for pos, header in iter_batch_positions(data):
            if end is not None and header.base_offset >= end:
                break
            if header.last_offset < offset or header.is_control:
                last = header.last_offset
                continue  # before the requested offset, or a transaction marker
            try:
                records = decode_records(data, pos, header)
            except CorruptBatchError as exc:
                log.warning("skipping a corrupt batch while loading",
                            extra={"partition": f"{self.topic}-{ctx.partition}", "offset": header.base_offset,
                                   "reason": exc.reason})
                last = header.last_offset
                continue
            base = header.base_offset
            for record in records:
                if record.key is None or base + record.offset_delta < offset:
                    continue
                try:
                    replay(record.key, record.value)
                except UnknownRecordVersion as exc:
                    # Kafka skips unknown record types with a warning: they may be left over
                    # from an aborted upgrade.
                    log.warning("skipping a record of unknown version",
                                extra={"partition": f"{self.topic}-{ctx.partition}",
                                       "offset": base + record.offset_delta, "reason": str(exc)})
                    continue
                replayed += 1
                if step and replayed % step == 0:
                    yield replayed, base + record.offset_delta
            last = header.last_offset
        yield replayed, last

    async def _replay_log(self, ctx: _Context, offset: int) -> int:
        """Replay the log from ``offset`` to its end; returns the number of records replayed. In
        cluster mode the end may lie above the high watermark: a new leader's log is what the ISR
        will hold, and answers that depend on it wait for the high watermark (rule 2)."""
        plog = ctx.plog
        end = plog.log_end_offset
        replayed = 0
        while offset < end:
            data = plog.log.read(offset, LOAD_READ_BYTES)
            if not data:
                break
            count, last = self._replay_batches(ctx, data, offset)
            replayed += count
            offset = last + 1
            await asyncio.sleep(0)  # one read (<= 1 MiB of records) between yields
        return replayed

    # --- snapshots ----------------------------------------------------------------------------

    def _maybe_snapshot(self, ctx: _Context) -> None:
        # A standby snapshots too (issue 14): a follower restarted, or taking over after a
        # restart, replays from its own recent snapshot rather than from the log start.
        if ctx.snapshotting is None and ctx.state in (CoordinatorState.ACTIVE, CoordinatorState.STANDBY) \
                and ctx.since_snapshot >= max(self.snapshot_min_records, ctx.snapshot_records):
            ctx.snapshotting = asyncio.ensure_future(self._snapshot(ctx))

    async def _snapshot(self, ctx: _Context) -> None:
        """Write the partition's state as of now (offset ``last_written``; a standby's: what it
        replayed, all committed) once it is durable."""
        where = {"partition": f"{self.topic}-{ctx.partition}"}
        retry = 0.0
        state = ctx.state
        try:
            offset = ctx.replayed_to if state is CoordinatorState.STANDBY else ctx.last_written
            encoder = SnapshotEncoder(offset, self.clock.now_ms())
            # A copy of the records, taken in one step so it is the state at ``offset``; the
            # encoding after it pauses between batches so serving goes on.
            records = list(ctx.shard.snapshot_records())
            ctx.since_snapshot = 0
            ctx.snapshot_records = len(records)
            step = SnapshotEncoder.BATCH_RECORDS
            for i in range(0, len(records), step):
                encoder.add(records[i:i + step])
                await asyncio.sleep(0)
            data = encoder.finish()
            del records
            if state is CoordinatorState.ACTIVE:
                await ctx.plog.wait_committed(offset)  # never claim what the log (the ISR) does not hold yet
            if ctx.state is not state or self._contexts.get(ctx.partition) is not ctx:
                return
            await asyncio.get_running_loop().run_in_executor(None, write_snapshot, ctx.plog.log.directory, data)
            ctx.snapshot_ms = encoder.captured_ms
            log.debug("snapshot written", extra={**where, "offset": offset, "records": ctx.snapshot_records})
        except Exception as exc:
            log.warning("snapshot failed; loading will replay more of the log", extra={**where, "reason": str(exc)})
            retry = SNAPSHOT_RETRY_SECONDS
        finally:
            ctx.snapshotting = None
            self._schedule_refresh(ctx, retry)

    def _schedule_refresh(self, ctx: _Context, min_delay: float = 0.0) -> None:
        """Rule 5: renew the snapshot on disk when half its trusted life has passed (after a
        failed attempt, not sooner than ``min_delay`` seconds: a broken disk is not hammered)."""
        ctx.stop_refresh()
        if ctx.snapshot_ms is None or ctx.state is not CoordinatorState.ACTIVE or self._contexts.get(ctx.partition) is not ctx:
            return
        due_ms = ctx.snapshot_ms + ctx.plog.log.options.delete_retention_ms // 2
        delay = max((due_ms - self.clock.now_ms()) / 1000, min_delay)
        ctx.refresh = asyncio.get_running_loop().call_later(delay, self._refresh, ctx)

    def _refresh(self, ctx: _Context) -> None:
        ctx.refresh = None
        if ctx.state is CoordinatorState.ACTIVE and ctx.snapshotting is None and self._contexts.get(ctx.partition) is ctx:
            log.info("renewing the snapshot before delete.retention.ms passes",
                     extra={"partition": f"{self.topic}-{ctx.partition}"})
            ctx.snapshotting = asyncio.ensure_future(self._snapshot(ctx))

    async def snapshot_all(self) -> None:
        """Snapshot every serving partition that changed since its last snapshot, and every hot
        standby that replayed at least ``snapshot_min_records`` since its own (shutdown).

        A standby's snapshots are amortized (the next one after as many records as the last
        held), so a standby of a large partition may hold half its state beyond its last
        snapshot; after a controlled shutdown every partition here is a standby, and without
        this the restart would replay that half from the log (issue 14: the restarted node is
        slow to rejoin, and to follow, the ISRs it is in). A standby still rebuilding (the
        partition this node led until the handover) is left as it is: its state is partial."""
        for ctx in list(self._contexts.values()):
            if ctx.snapshotting is not None:
                continue
            if (ctx.state is CoordinatorState.ACTIVE and ctx.since_snapshot > 0) or (
                    ctx.state is CoordinatorState.STANDBY and not ctx.rebuilding
                    and ctx.since_snapshot >= self.snapshot_min_records):
                ctx.snapshotting = asyncio.ensure_future(self._snapshot(ctx))
        pending = [ctx.snapshotting for ctx in self._contexts.values() if ctx.snapshotting is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    # --- operations ---------------------------------------------------------------------------

    def write(self, partition: int, op: Callable[[Any], Any]) -> asyncio.Future[Any]:
        """Run a write operation now; the returned future gets its response once durable."""
        ctx = self._active(partition)
        if not ctx.plog.accepts_writes():
            # Cluster mode: not leading, or the ISR is below min.insync.replicas; Kafka refuses
            # the append (NOT_ENOUGH_REPLICAS) and the group answers an error, never NONE.
            if ctx.plog.is_leader:
                raise NotEnoughReplicas(partition, ctx.state)
            raise NotActiveError(partition, ctx.state)
        loop = asyncio.get_running_loop()
        ctx.in_op = True
        try:
            result = op(ctx.shard)
            records = list(getattr(result, "records", None) or ())
            if records:
                self._append(ctx, records)
        finally:
            ctx.in_op = False
        fut: asyncio.Future[Any] = loop.create_future()
        self._after_durable(ctx, ctx.last_written, fut, getattr(result, "response", result),
                            getattr(result, "on_appended", None))
        self._release_completions(ctx)
        return fut

    def read(self, partition: int, op: Callable[[Any], Any]) -> asyncio.Future[Any]:
        """Run a read now; its answer waits for pending writes to be durable (rule 2)."""
        ctx = self._active(partition)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._after_durable(ctx, ctx.last_written, fut, op(ctx.shard), None)
        return fut

    def response_future(self, partition: int) -> tuple[Any, asyncio.Future[Any]]:
        """A parked-response handle for the shard, and the asyncio future the service awaits.

        ``handle.set_result(x)``, called by the shard during some later operation or timer, is
        delivered once that operation's records are durable.
        """
        ctx = self._contexts[partition]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        runtime = self

        class _Handle:
            done = False

            def set_result(self, value: Any) -> None:
                if self.done:
                    return
                self.done = True
                ctx.completions.append((fut, value))
                if not ctx.in_op:
                    runtime._release_completions(ctx)

        return _Handle(), fut

    def _append(self, ctx: _Context, records: list[tuple[Any, Any]]) -> None:
        items = [serialize(key, value) for key, value in records]
        size = sum(len(k) + (0 if v is None else len(v)) for k, v in items)
        if ctx.pending is not None and ctx.pending_bytes + size > APPEND_BATCH_MAX_BYTES:
            self._flush(ctx, ctx.pending)
        if ctx.pending is None:
            ctx.pending = []
            ctx.pending_base = ctx.plog.next_offset
            ctx.pending_bytes = 0
            asyncio.get_running_loop().call_soon(self._flush, ctx, ctx.pending)
        ctx.pending.extend(items)
        ctx.pending_bytes += size
        ctx.last_written = ctx.pending_base + len(ctx.pending)
        replay = ctx.shard.replay
        for (key, value), (typed_key, _typed_value) in zip(items, records):
            replay(key, value, typed_key)
        ctx.since_snapshot += len(items)
        self._maybe_snapshot(ctx)

    def _flush(self, ctx: _Context, pending: list[tuple[bytes, bytes | None]]) -> None:
        """Give the partition's open batch to its log (rule 7)."""
        if ctx.pending is not pending:
            return  # flushed early, or dropped
        ctx.pending = None
        if self._contexts.get(ctx.partition) is not ctx or ctx.state is not CoordinatorState.ACTIVE:
            return  # no longer served here: the answers waiting on these records failed already
        plog = ctx.plog
        where = {"partition": f"{self.topic}-{ctx.partition}"}
        if plog.replication is not None and not plog.replication.is_leader:
            # Leadership went between the operations and the flush (the unload follows): the
            # shard holds records its log will never have, so it must not answer again.
            log.info("coordinator batch not written: the partition changed hands first", extra=where)
            self._fail(ctx)
            return
        if plog.next_offset != ctx.pending_base:  # only the runtime writes here: a bug, say so loudly
            log.error("coordinator batch not written: the log moved under it", extra={
                **where, "expected_base": ctx.pending_base, "next_offset": plog.next_offset})
            self._fail(ctx)
            return
        batch = bytearray(build_batch(pending, timestamp_ms=self.clock.now_ms()))
        header = read_batch_header(batch, 0)
        _base, durable = plog.append_batch(batch, header)
        durable.add_done_callback(lambda f: self._appended(ctx, f))

    def flush_pending(self) -> None:
        """Flush every partition's open batch now (shutdown, before the logs close)."""
        for ctx in list(self._contexts.values()):
            if ctx.pending is not None:
                self._flush(ctx, ctx.pending)

    def _appended(self, ctx: _Context, durable: asyncio.Future[None]) -> None:
        exc = None if durable.cancelled() else durable.exception()
        if exc is None and not durable.cancelled():
            return
        if self._contexts.get(ctx.partition) is not ctx:
            # Unloaded before its batch was written (the replica reassigned away, KIP-455: the
            # log closes right after): its answers already failed with NOT_COORDINATOR, and the
            # state it would have stopped serving is gone. Nothing is lost; not an error.
            log.info("coordinator batch not written: the partition was unloaded first",
                     extra={"partition": f"{self.topic}-{ctx.partition}", "reason": str(exc or "cancelled")})
            return
        log.error("coordinator append failed; the partition stops serving until a restart reloads it",
                  extra={"partition": f"{self.topic}-{ctx.partition}", "reason": str(exc or "cancelled")})
        self._fail(ctx)

    def _fail(self, ctx: _Context) -> None:
        if ctx.state is CoordinatorState.ACTIVE:
            ctx.state = CoordinatorState.FAILED
            ctx.stop_refresh()
            if ctx.timer is not None:
                ctx.timer.cancel_all()
            waiting, ctx.waiting = ctx.waiting, set()
            for fut in waiting:
                if not fut.done():
                    fut.set_exception(NotActiveError(ctx.partition, ctx.state))

    def _after_durable(self, ctx: _Context, offset: int, fut: asyncio.Future[Any], response: Any,
                       on_appended: Callable[[], None] | None) -> None:
        def deliver(committed: asyncio.Future[None] | None = None) -> None:
            # The wait's outcome is read first, also when the answer was settled meanwhile
            # (unloaded, timed out): asyncio logs an exception never retrieved as an ERROR.
            lost = committed is not None and (committed.cancelled() or committed.exception() is not None)
            ctx.waiting.discard(fut)
            if fut.done():
                return
            if lost:
                # Cluster mode: leadership went before the ISR had it. Never NONE from a log this
                # node no longer leads (KAFKA-20634): the client retries at the new coordinator.
                fut.set_exception(NotActiveError(ctx.partition, ctx.state))
                return
            if ctx.state is CoordinatorState.FAILED or self._contexts.get(ctx.partition) is not ctx:
                fut.set_exception(NotActiveError(ctx.partition, ctx.state))
                return
            if on_appended is not None:
                ctx.in_op = True
                try:
                    on_appended()
                finally:
                    ctx.in_op = False
                self._release_completions(ctx)
            fut.set_result(response)

        if ctx.plog.high_watermark >= offset:
            deliver()
        else:
            ctx.waiting.add(fut)
            ctx.plog.wait_committed(offset).add_done_callback(deliver)
            if ctx.plog.replication is not None:
                def timed_out() -> None:
                    ctx.waiting.discard(fut)
                    if not fut.done():
                        fut.set_exception(CommitTimedOut(ctx.partition, ctx.state))
                timer = asyncio.get_running_loop().call_later(self.commit_timeout_s, timed_out)
                fut.add_done_callback(lambda _f: timer.cancel())

    def _release_completions(self, ctx: _Context) -> None:
        if not ctx.completions or ctx.state is CoordinatorState.LOADING:
            return
        pending, ctx.completions = ctx.completions, []
        for fut, value in pending:
            self._after_durable(ctx, ctx.last_written, fut, value, None)

    # --- hot standby (rule 6) ------------------------------------------------------------------

    def standby(self, partition: int) -> None:
        """Follow ``partition``'s log into a standby shard (cluster mode: this node is a follower)."""
        plog = self.logs.get(self.topic, partition)
        if plog is None:
            return
        old = self._contexts.get(partition)
        if old is not None:
            if old.state is CoordinatorState.STANDBY and old.plog is plog:
                return
            self.unload(partition)
        ctx = _Context(partition, plog)
        ctx.state = CoordinatorState.STANDBY
        self._contexts[partition] = ctx
        self._set_warming(ctx, True)
        ctx.follow = asyncio.ensure_future(self._follow_log(ctx))

    def _set_warming(self, ctx: _Context, warming: bool) -> None:
        if ctx.warming == warming:
            return
        ctx.warming = warming
        for listener in list(self.standby_listeners):
            try:
                listener(ctx.partition, warming)
            except Exception:
                log.exception("standby listener failed", extra={"partition": f"{self.topic}-{ctx.partition}"})

    async def _fresh_standby(self, ctx: _Context) -> None:
        if ctx.timer is not None:
            ctx.timer.cancel_all()
        ctx.rebuilding = True
        ctx.timer = AsyncioTimer(self, ctx.partition)
        ctx.shard = self.shard_factory(ctx.partition, ctx.timer, self.clock)
        ctx.truncations = getattr(ctx.plog, "truncations", 0)
        start = await self._replay_snapshot_gently(ctx)
        ctx.replayed_to = ctx.plog.log_start_offset if start is None else start
        ctx.since_snapshot = 0
        ctx.rebuilding = False

    async def _follow_log(self, ctx: _Context) -> None:
        plog = ctx.plog
        loop = asyncio.get_running_loop()
        where = {"partition": f"{self.topic}-{ctx.partition}"}
        try:
            await self._fresh_standby(ctx)
            while self._contexts.get(ctx.partition) is ctx and ctx.state is CoordinatorState.STANDBY:
                truncations = getattr(plog, "truncations", 0)
                if ctx.truncations != truncations:
                    # Only a cut below what was replayed invalidates the state (an unclean
                    # election: the standby replays committed records only).
                    cuts = getattr(plog, "truncation_offsets", [])[ctx.truncations:]
                    if not cuts or min(cuts) < ctx.replayed_to:
                        log.info("standby state rebuilt after the log was truncated", extra=where)
                        await self._fresh_standby(ctx)
                        continue
                    ctx.truncations = truncations
                # Committed records only (below the high watermark): a standby never holds state
                # a truncation could take back, and may snapshot what it holds at any time.
                end = min(plog.high_watermark, plog.log_end_offset)
                if ctx.replayed_to >= end:
                    self._set_warming(ctx, False)
                if ctx.replayed_to < end:
                    data = plog.log.read(ctx.replayed_to, LOAD_READ_BYTES)
                    if not data:
                        await asyncio.sleep(0.05)
                        continue
                    done = 0

                    def progress(count: int, last: int) -> None:
                        # Kept current between slices: a takeover cancels this task at a yield
                        # and replays from ``replayed_to`` (records below it are skipped).
                        nonlocal done
                        ctx.replayed_to = max(last + 1, ctx.replayed_to)
                        ctx.since_snapshot += count - done
                        done = count

                    await self._replay_batches_gently(ctx, data, ctx.replayed_to, end, progress)
                    self._maybe_snapshot(ctx)
                    continue
                fut: asyncio.Future[None] = loop.create_future()
                plog.add_data_waiter(fut)
                try:
                    await asyncio.wait_for(fut, 1.0)
                except asyncio.TimeoutError:
                    pass
                finally:
                    plog.remove_data_waiter(fut)
        except asyncio.CancelledError:
            raise
        except LogClosedError:
            # The replica is going away (reassigned off this node, or the node is stopping) and
            # its unload has not reached us yet: nothing is wrong, and nothing is left to follow.
            log.info("standby stopped: its log was closed", extra=where)
            if self._contexts.get(ctx.partition) is ctx and ctx.state is CoordinatorState.STANDBY:
                del self._contexts[ctx.partition]
                self._set_warming(ctx, False)
        except Exception:
            log.exception("standby replay failed; taking over will load the partition from its log", extra=where)
            if self._contexts.get(ctx.partition) is ctx and ctx.state is CoordinatorState.STANDBY:
                del self._contexts[ctx.partition]
                self._set_warming(ctx, False)

    def _halt(self, ctx: _Context) -> None:
        """Stop what runs on its own for a partition: the standby's replay, the snapshot
        renewal, the shard's timers."""
        self._set_warming(ctx, False)
        if ctx.follow is not None:
            ctx.follow.cancel()
            ctx.follow = None
        ctx.stop_refresh()
        if ctx.timer is not None:
            ctx.timer.cancel_all()

    def unload(self, partition: int) -> None:
        """Stop coordinating ``partition`` (cluster mode: another node leads it now). Timers stop,
        parked answers and answers waiting for the ISR fail (NOT_COORDINATOR), the state goes."""
        self._queued.discard(partition)
        ctx = self._contexts.pop(partition, None)
        if ctx is None:
            return
        self._halt(ctx)
        ctx.pending = None  # never written (rule 7): the answers waiting on it fail below
        ctx.state = CoordinatorState.FAILED if ctx.state is CoordinatorState.FAILED else CoordinatorState.LOADING
        waiting, ctx.waiting = ctx.waiting, set()
        for fut in waiting:
            if not fut.done():
                fut.set_exception(NotActiveError(partition, None))
        for fut, _value in ctx.completions:
            if not fut.done():
                fut.set_exception(NotActiveError(partition, None))
        ctx.completions = []

    def unload_all(self) -> None:
        """Stop coordinating every partition: timers stop, and shards with an ``on_unloaded``
        answer what they hold parked (delivered once durable, like any answer)."""
        for ctx in list(self._contexts.values()):
            self._halt(ctx)
            unloaded = getattr(ctx.shard, "on_unloaded", None)
            if ctx.state is CoordinatorState.ACTIVE and unloaded is not None:
                ctx.in_op = True
                try:
                    unloaded()
                finally:
                    ctx.in_op = False
                self._release_completions(ctx)
            if ctx.pending is not None:
                self._flush(ctx, ctx.pending)  # what on_unloaded wrote goes to the log before it closes
            ctx.state = CoordinatorState.FAILED if ctx.state is CoordinatorState.FAILED else CoordinatorState.LOADING
        self._contexts.clear()
        self._queued.clear()

    def active_partitions(self) -> list[int]:
        return [p for p, ctx in self._contexts.items() if ctx.state is CoordinatorState.ACTIVE]
