"""This node's replicas: turns the partition states in the view into roles, fetchers and ISR
changes (Kafka's ``ReplicaManager`` on a broker, fed by ZooKeeper watches instead of LeaderAndIsr).

* A topic in the view is adopted by the topic registry (the registry is ZooKeeper's in cluster
  mode, not ``topics.json``), so every handler sees it; a topic gone from the view is dropped,
  and if it is queued for deletion this node acknowledges that to the controller.
* For each partition this node is a replica of, once its state is known: open the log, then
  lead (leader = this node) or follow the leader through a :class:`ReplicaFetcher`. A role is
  applied only for a newer leader epoch (or the same epoch with a newer partition epoch: an ISR
  change), never an older one (§2.7).
* A leader writes its own ISR changes to the state znode, conditional on the partition epoch it
  knows (Kafka's ZooKeeper-mode ``ZkIsrManager`` before AlterPartition, §3.4): it expands when a
  follower catches up, and shrinks every ``replica.lag.time.max.ms / 2`` those that fell behind.
  A lost race (BadVersion) is dropped: the newer state arrives through the view.
* While the ZooKeeper session is lost the leader writes nothing, and — as the view may be stale
  — its high watermark can only move with followers that still fetch from it at its epoch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from functools import partial

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from ..topics.log_manager import LogManager
from ..topics.partition_log import PartitionLog
from ..topics.registry import TopicInfo
from ..topics.replication_quota import ReplicationThrottle
from ..topics.service import TopicService
from .replica_fetcher import FetchSettings, ReplicaFetcher
from .view import ClusterView
from .znodes import CONTROLLED_SHUTDOWN, DELETE_TOPICS, PartitionState, encode_partition_state, partition_state_path
from .zookeeper import ZkStat, ZooKeeper

__all__ = ["ReplicaManager", "NOT_A_REPLICA"]

log = logging.getLogger("groupcoord.cluster.replicas")

#: The leader epoch leadership listeners are told when this node stops being a replica at all
#: (reassigned away): nothing to keep a standby of.
NOT_A_REPLICA = -1

#: ``replica.high.watermark.checkpoint.interval.ms`` (Kafka's default).
HW_CHECKPOINT_INTERVAL_S = 5.0


def next_to_apply(dirty: Iterable[tuple[str, int]], elects_me: Callable[[tuple[str, int]], bool],
                  hosted: Callable[[tuple[str, int]], bool]) -> tuple[str, int]:
    """The partition whose state the replica manager applies next: one electing this node, then
    one it already hosts (switching its fetcher takes milliseconds; opening a log takes disk),
    then by name (pure)."""
    return min(dirty, key=lambda k: (not elects_me(k), not hosted(k), k))


class ReplicaManager:
    def __init__(self, broker_id: int, zk: ZooKeeper, view: ClusterView, topics: TopicService, logs: LogManager,
                 *, lag_time_max_ms: int, fetch: FetchSettings, throttle: ReplicationThrottle | None = None,
                 lease: Callable[[], bool] | None = None) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.view = view
        self.topics = topics
        self.logs = logs
        self.lag_time_max_ms = lag_time_max_ms
        self.fetch_settings = fetch
        self.throttle = throttle
        #: Whether this node may serve what it leads (cluster/liveness.py's StallGuard.fresh).
        self.lease = lease
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[tuple[str, int], int] = {}
        self._dirty: set[tuple[str, int]] = set()
        #: In controlled shutdown, past handing over leadership: follow nothing any more.
        self._stopping = False
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        #: Told (topic, partition, leading, leader epoch) whenever this node starts or stops
        #: leading a partition: each coordinator type follows its topic's partitions
        #: (``coordinator_leadership.py``; issue 14 for groups, issue 32 for transactions).
        self.leadership_listeners: list[Callable[[str, int, bool, int], None]] = []
        #: Topics queued for deletion this node has acknowledged dropping (``_acknowledge_deletions``).
        self._deletions_acked: set[str] = set()
        self._acks: set[asyncio.Task[None]] = set()
        view.listeners.append(self)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._apply_loop()), loop.create_task(self._shrink_loop()),
                       loop.create_task(self._checkpoint_loop())]

    async def stop(self) -> None:
        tasks = [*self._tasks, *self._acks]
        for task in tasks:
            task.cancel()
        # Their endings (cancellation, or the error a task died of) are not news at shutdown.
        await asyncio.gather(*tasks, return_exceptions=True)
        for fetcher in self.fetchers.values():
            await fetcher.stop()

    async def controlled_shutdown(self, timeout_s: float) -> list[str]:
        """Ask the controller to move this node's leaderships away (an ephemeral
        ``/admin/controlled_shutdown/<id>``), and wait until this node leads only partitions
        nobody else in the ISR can take, or ``timeout_s``. Returns those still led (Kafka's
        RemainingPartitions)."""
        path = f"{CONTROLLED_SHUTDOWN}/{self.broker_id}"
        try:
            await asyncio.to_thread(self.zk.client.create, path, b"", ephemeral=True, makepath=True)
        except KazooException as exc:
            log.warning("controlled shutdown not possible", extra={"error": repr(exc)})
            return self._remaining()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._remaining() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        remaining = self._remaining()
        log.info("controlled shutdown", extra={"remaining_partitions": remaining})
        # Out of every ISR now: stop following (Kafka's StopReplica to a broker shutting down).
        self._stopping = True
        for key in list(self._following):
            self._unfollow(key)
        return remaining

    def _remaining(self) -> list[str]:
        out = []
        for plog in self.logs.partitions():
            repl = plog.replication
            if repl is None or not repl.is_leader:
                continue
            others = [r for r in repl.isr if r != self.broker_id and self.view.live(r)
                      and r not in self.view.shutting_down]
            if others:
                out.append(f"{plog.topic}-{plog.partition}")
        return out

    # --- view events (event loop) --------------------------------------------------------------------

    def brokers_changed(self, view: ClusterView) -> None:
        # A leader that re-registered may have a new endpoint; fetchers read it at each connect.
        # The topics queued for deletion changed too (ClusterView.set_deleting tells this).
        self._acknowledge_deletions()

    def topic_changed(self, view: ClusterView, name: str) -> None:
        assignment = view.topics.get(name)
        registry = self.topics.registry
        if assignment is None:
            if name in registry:
                for key in [k for k in self._following if k[0] == name]:
                    self._unfollow(key)
                for plog in self.logs.partitions():
                    if plog.topic == name and plog.replication is not None and plog.replication.is_leader:
                        self._tell(name, plog.partition, False, plog.replication.leader_epoch)
                self.topics.forget(name)
            self._acknowledge_deletions()
            return
        info = registry.get(name)
        configs = view.configs.get(name, {})
        if info is None or info.topic_id != assignment.topic_id:
            if info is not None:
                self.topics.forget(name)
            self.topics.adopt(TopicInfo(name, assignment.topic_id, len(assignment.partitions), dict(configs)))
        else:
            if info.num_partitions < len(assignment.partitions):
                self.topics.resize(name, len(assignment.partitions))
            if info.configs != configs:  # altered after creation (IncrementalAlterConfigs)
                self.topics.set_configs(name, dict(configs))
        for p in assignment.partitions:
            self._mark(name, p)

    def state_changed(self, view: ClusterView, topic: str, partition: int) -> None:
        self._mark(topic, partition)

    def _acknowledge_deletions(self) -> None:
        """Tell the controller this node serves no topic queued for deletion that has left its
        view (dropped above, on ``topic_changed``): ``/admin/delete_topics/<topic>/<broker id>``,
        our answer to Kafka's StopReplica. The controller removes the marker — and DeleteTopics
        answers — only once every live node has answered (controller.py ``_delete_topic``). The
        znode is persistent, so a session lost and regained does not take it back; it is created
        without its parent, so a marker already removed is not brought back."""
        pending = self.view.deleting
        self._deletions_acked &= pending
        for name in sorted(pending - self._deletions_acked):
            if name in self.view.topics or name in self.topics.registry:
                continue
            self._deletions_acked.add(name)
            task = asyncio.get_running_loop().create_task(self._acknowledge(name))
            self._acks.add(task)
            task.add_done_callback(self._acks.discard)

    async def _acknowledge(self, name: str) -> None:
        """One acknowledgement, retried while ZooKeeper cannot be reached (the controller waits
        for it); one that exists already, or whose marker is gone (the deletion completed), is
        not news."""
        path = f"{DELETE_TOPICS}/{name}/{self.broker_id}"
        while name in self.view.deleting:
            try:
                await asyncio.to_thread(self.zk.client.create, path, b"")
                return
            except (NodeExistsError, NoNodeError):
                return
            except KazooException as exc:
                log.warning("could not acknowledge a topic deletion; retrying", extra={"path": path, "error": repr(exc)})
                await asyncio.sleep(0.5)

    def _mark(self, topic: str, partition: int) -> None:
        self._dirty.add((topic, partition))
        self._wake.set()

    # --- applying states ----------------------------------------------------------------------------------

    async def _apply_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._dirty:
                # One partition at a time, leaderships first, then partitions already open here,
                # re-chosen after each: a node restarted a moment ago has every partition to open
                # (disk, and standbys to rebuild), and a leadership arriving meanwhile must not
                # wait behind them all — clients wait for the coordinator it was just elected to
                # be — nor a new leader of a partition this node already follows in its ISR: the
                # leader's commits wait for this node's fetches, which switching to it starts.
                key = next_to_apply(self._dirty, self._elects_me, lambda k: self.logs.get(*k) is not None)
                self._dirty.discard(key)
                try:
                    await self._apply(*key)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("applying a partition state failed", extra={"partition": f"{key[0]}-{key[1]}"})

    def _from_previous_life(self, state: PartitionState) -> bool:
        """Whether ``state`` was written before this node's current registration: a leadership it
        names was given to an earlier process or session of this node (its broker epoch, the
        registration's czxid, is newer than the state's mzxid). A Kafka broker leads only on the
        controller's LeaderAndIsr to its current broker epoch, never on what it finds in
        ZooKeeper (KIP-380,
        https://cwiki.apache.org/confluence/display/KAFKA/KIP-380%3A+Detect+outdated+control+requests+and+bounced+brokers+using+broker+generation);
        here the controller fails such a leadership over (plan.py's bounced replicas), and this
        node leads only once a state written since says so."""
        me = self.view.brokers.get(self.broker_id)
        return me is not None and state.mzxid >= 0 and me.epoch > state.mzxid

    def _elects_me(self, key: tuple[str, int]) -> bool:
        state = self.view.state(*key)
        return state is not None and state.leader == self.broker_id

    async def _apply(self, topic: str, partition: int) -> None:
        assignment = self.view.topics.get(topic)
        state = self.view.state(topic, partition)
        info = self.topics.registry.get(topic)
        if assignment is None or state is None or info is None:
            return
        replicas = assignment.partitions.get(partition, ())
        if self.broker_id not in replicas:
            await self._retire(topic, partition)
            return
        plog = await self.logs.open_partition(info, partition)
        repl = plog.replication
        assert repl is not None
        repl.request_isr = lambda isr, plog=plog: self._write_isr(plog, isr)
        if self.lease is not None:
            repl.lease = self.lease
        newer_epoch = state.leader_epoch > repl.leader_epoch
        if state.leader_epoch < repl.leader_epoch:
            return  # an older state delivered late (§2.7)
        if replicas != repl.replicas and repl.role != "offline":
            repl.update_replicas(replicas)
        if state.leader == self.broker_id:
            if newer_epoch or not repl.is_leader:
                if self._from_previous_life(state):
                    log.info("not leading: the leadership was given to this node's previous registration; "
                             "waiting for the controller", extra={"partition": f"{topic}-{partition}",
                                                                  "leader_epoch": state.leader_epoch})
                    return
                self._unfollow((topic, partition))
                # KIP-101: the new epoch starts where the log will end once everything queued has
                # landed: the last batches copied from the old leader, and (a new epoch of our own
                # leadership) our own appends still queued, stamped with the old epoch. From the
                # same step on, new appends carry the new epoch, so the cache and the batches agree.
                await plog.settle_replicated()
                start = plog.next_offset
                if repl.is_leader:
                    repl.leader_epoch = state.leader_epoch
                await plog.log.assign_leader_epoch(state.leader_epoch, start)
                repl.become_leader(state.leader_epoch, state.isr, replicas, state.zk_version)
                self._tell(topic, partition, True, state.leader_epoch)
                log.info("leading", extra={"partition": f"{topic}-{partition}", "leader_epoch": state.leader_epoch,
                                           "isr": list(state.isr), "log_end": plog.log_end_offset})
            elif state.zk_version > repl.zk_version:
                repl.update_isr(state.isr, state.zk_version)
            return
        if newer_epoch or repl.role != "follower" or repl.leader_id != state.leader:
            repl.become_follower(state.leader, state.leader_epoch, state.isr, replicas, state.zk_version)
            self._tell(topic, partition, False, state.leader_epoch)
            self._unfollow((topic, partition))
            if state.leader >= 0 and not self._stopping:
                self._follow(plog, state.leader, state.leader_epoch)
            log.info("following", extra={"partition": f"{topic}-{partition}", "leader": state.leader,
                                         "leader_epoch": state.leader_epoch})
        elif state.zk_version > repl.zk_version:
            repl.isr, repl.zk_version = state.isr, state.zk_version

    async def _retire(self, topic: str, partition: int) -> None:
        """This node is no longer a replica (a reassignment moved the partition away, KIP-455):
        stop leading or following, tell the listeners (:data:`NOT_A_REPLICA`), then delete the
        log, as Kafka's StopReplica with delete does. Also removes a log left on disk by a
        reassignment that finished while this node was down."""
        plog = self.logs.get(topic, partition)
        if plog is None:
            if self.logs.has_directory(topic, partition):
                await self.logs.remove_partition(topic, partition)
                log.info("stray replica deleted", extra={"partition": f"{topic}-{partition}"})
            return
        repl = plog.replication
        self._unfollow((topic, partition))
        self._tell(topic, partition, False, NOT_A_REPLICA)
        if repl is not None:
            repl.go_offline(f"{topic}-{partition} was reassigned away from broker {self.broker_id}")
        await self.logs.remove_partition(topic, partition)
        log.info("replica removed", extra={"partition": f"{topic}-{partition}"})

    def _tell(self, topic: str, partition: int, leading: bool, epoch: int) -> None:
        for listener in self.leadership_listeners:
            try:
                listener(topic, partition, leading, epoch)
            except Exception:
                log.exception("leadership listener failed", extra={"partition": f"{topic}-{partition}"})

    def _follow(self, plog: PartitionLog, leader: int, epoch: int) -> None:
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = ReplicaFetcher(leader, partial(self._endpoint, leader),
                                                             self.fetch_settings, self.throttle,
                                                             self.view.inter_broker_security)
        fetcher.follow(plog, epoch)
        self._following[(plog.topic, plog.partition)] = leader

    def _unfollow(self, key: tuple[str, int]) -> None:
        leader = self._following.pop(key, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].unfollow(*key)

    def _endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return self.view.inter_broker_endpoint(broker_id)

    # --- ISR changes by the leader --------------------------------------------------------------------------

    def _write_isr(self, plog: PartitionLog, isr: tuple[int, ...]) -> None:
        repl = plog.replication
        if repl is None or not repl.is_leader:
            return
        if any(r not in repl.isr and r in self.view.shutting_down for r in isr):
            # A replica in controlled shutdown stays out (the controller took it out; adding it
            # back would make the two bump the leader epoch in turn until it is gone).
            repl.pending_isr = None
            return
        state = self.view.state(plog.topic, plog.partition)
        if state is None or state.zk_version != repl.zk_version or not self.view.connected:
            repl.pending_isr = None
            return
        new = PartitionState(self.broker_id, repl.leader_epoch, isr, state.controller_epoch)
        asyncio.get_running_loop().create_task(self._commit_isr(plog, new, repl.zk_version))

    async def _commit_isr(self, plog: PartitionLog, new: PartitionState, version: int) -> None:
        path = partition_state_path(plog.topic, plog.partition)
        try:
            stat: ZkStat = await asyncio.to_thread(self.zk.client.set, path, encode_partition_state(new), version)
        except (BadVersionError, NoNodeError, KazooException) as exc:
            log.info("isr change not written", extra={"partition": f"{plog.topic}-{plog.partition}",
                                                      "isr": list(new.isr), "reason": repr(exc)})
            if plog.replication is not None:
                plog.replication.pending_isr = None
            return
        log.info("isr changed", extra={"partition": f"{plog.topic}-{plog.partition}", "isr": list(new.isr),
                                       "leader_epoch": new.leader_epoch})
        repl = plog.replication
        if repl is not None and repl.is_leader and repl.leader_epoch == new.leader_epoch and repl.zk_version == version:
            # Apply at once rather than waiting for the watch: the write is the partition epoch.
            repl.update_isr(new.isr, stat.version)

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(HW_CHECKPOINT_INTERVAL_S)
            try:
                await self.logs.checkpoint_high_watermarks()
            except OSError:
                log.exception("high watermark checkpoint failed")

    async def _shrink_loop(self) -> None:
        interval = max(self.lag_time_max_ms / 2000.0, 0.05)
        while True:
            await asyncio.sleep(interval)
            if not self.view.connected:
                continue
            for plog in self.logs.partitions():
                repl = plog.replication
                if repl is None or not repl.is_leader or repl.pending_isr is not None:
                    continue
                lagging = repl.lagging(self.lag_time_max_ms)
                if lagging:
                    isr = tuple(r for r in repl.isr if r not in lagging)
                    log.warning("shrinking isr", extra={"partition": f"{plog.topic}-{plog.partition}",
                                                        "out": lagging, "isr": list(isr)})
                    repl.pending_isr = isr
                    self._write_isr(plog, isr)
