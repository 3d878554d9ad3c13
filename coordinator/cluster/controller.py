"""The active controller's duties: partition states for new partitions, leader election when a
broker goes, ISR clean-up, preferred-leader election (reference/cluster_replication.md §2).

Reconciliation instead of an event log: whenever the view changes while this node is the
controller (brokers came or went, a topic appeared or grew, a state changed), one pass compares
every partition with the live brokers and writes what must change. A pass is idempotent, so a
missed or doubled event costs nothing; the view always catches up with ZooKeeper, so a write that
lost a race (BadVersion: the state moved meanwhile) is simply redone by the pass its new version
triggers.

Every write is fenced twice: by the controller epoch (``commit_fenced`` checks
``/controller_epoch``'s version, so a deposed controller writes nothing) and by the state
znode's version (the partition epoch), so it never overwrites a change it has not seen.

Election rules (``PartitionLeaderElectionAlgorithms``, §2.3):

* a new partition: leader = the first live replica, ISR = the live replicas, leader epoch 0;
* the leader is gone: the first replica in assignment order that is live and in the ISR; none
  and ``unclean.leader.election.enable`` → the first live replica, ISR = [it]; none otherwise →
  leader -1 and the ISR kept as it was (it never becomes empty: the last member may hold data no
  other replica has, KIP-966's "last replica standing");
* a dead broker in the ISR of a live leader: removed;
* preferred leader (``auto.leader.rebalance.enable``, and ElectLeaders): the first replica, when it
  is live, in the ISR and not leading;
* controlled shutdown (§2.5): a node shutting down leads nothing another live ISR member can
  take, and leaves every ISR it is not the last member of.

Every change the controller makes bumps the leader epoch.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from .controller_election import ControllerElection, ControllerMoved, ControllerToken
from .view import ClusterView
from .znodes import (
    DELETE_TOPICS,
    NO_LEADER,
    PartitionState,
    TopicAssignment,
    encode_partition_state,
    partition_state_path,
    topic_config_path,
    topic_path,
)

__all__ = ["Controller"]

log = logging.getLogger("groupcoord.cluster.controller")


@dataclass(frozen=True, slots=True)
class _Snapshot:
    live: frozenset[int]
    shutting_down: frozenset[int]
    deleting: frozenset[str]
    topics: dict[str, TopicAssignment]
    states: dict[tuple[str, int], PartitionState]


def plan_partition(replicas: tuple[int, ...], state: PartitionState | None, live: frozenset[int], *,
                   unclean: bool, preferred: bool, controller_epoch: int,
                   shutting_down: frozenset[int] = frozenset()) -> PartitionState | None:
    """The state the controller writes for one partition, or None if it stays (pure)."""
    alive = [r for r in replicas if r in live]
    if state is None:
        if not alive:
            return None
        return PartitionState(alive[0], 0, tuple(alive), controller_epoch)
    if state.leader == -2:  # being deleted
        return None
    leader_live = state.leader in live
    if leader_live:
        isr = tuple(r for r in state.isr if r in live)
        leader = state.leader
        if shutting_down:
            staying = [r for r in replicas if r in isr and r not in shutting_down]
            if leader in shutting_down and staying:
                leader = staying[0]
            if leader not in shutting_down:
                isr = tuple(r for r in isr if r not in shutting_down)
        if preferred and alive and alive[0] != leader and alive[0] in isr and alive[0] not in shutting_down:
            leader = alive[0]
        if isr == state.isr and leader == state.leader:
            return None
        return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)
    candidates = [r for r in replicas if r in live and r in state.isr]
    candidates.sort(key=lambda r: r in shutting_down)  # stable: assignment order otherwise
    if candidates:
        leader = candidates[0]
        isr = tuple(r for r in state.isr if r in live)
    elif unclean and alive:
        leader, isr = alive[0], (alive[0],)
    else:
        if state.leader == NO_LEADER:
            return None
        # Keep the ISR minus the dead, but never empty: the last member stays (see docstring).
        isr = tuple(r for r in state.isr if r in live) or state.isr[-1:]
        leader = NO_LEADER
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)


class Controller:
    def __init__(self, election: ControllerElection, view: ClusterView, *, unclean_leader_election: bool,
                 auto_leader_rebalance: bool, leader_imbalance_check_s: float) -> None:
        self.election = election
        self.view = view
        self.unclean = unclean_leader_election
        self.auto_rebalance = auto_leader_rebalance
        self.imbalance_check_s = leader_imbalance_check_s
        self.token: ControllerToken | None = None
        self._dirty = asyncio.Event()
        self._preferred_due = False
        self._tasks: list[asyncio.Task[None]] = []
        self._loop = asyncio.get_running_loop()
        election.on_elected = lambda t: self._loop.call_soon_threadsafe(self._elected, t)
        election.on_resigned = lambda t: self._loop.call_soon_threadsafe(self._resigned, t)
        view.listeners.append(self)

    def start(self) -> None:
        self._tasks = [self._loop.create_task(self._run()), self._loop.create_task(self._rebalance_timer())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        # Their endings (cancellation, or the error a task died of) are not news at shutdown.
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- events (event loop) ---------------------------------------------------------------------

    def _elected(self, token: ControllerToken) -> None:
        self.token = token
        log.info("controller duties started", extra={"epoch": token.epoch})
        self._dirty.set()

    def _resigned(self, token: ControllerToken) -> None:
        if self.token == token:
            self.token = None

    def brokers_changed(self, view: ClusterView) -> None:
        self._dirty.set()

    def topic_changed(self, view: ClusterView, name: str) -> None:
        self._dirty.set()

    def state_changed(self, view: ClusterView, topic: str, partition: int) -> None:
        self._dirty.set()

    def elect_preferred(self) -> None:
        """Run a preferred-leader election on the next pass (ElectLeaders, the imbalance timer)."""
        self._preferred_due = True
        self._dirty.set()

    async def _rebalance_timer(self) -> None:
        if not self.auto_rebalance:
            return
        while True:
            await asyncio.sleep(self.imbalance_check_s)
            if self.token is not None:
                self.elect_preferred()

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            token = self.token
            if token is None:
                continue
            preferred, self._preferred_due = self._preferred_due, False
            snap = _Snapshot(frozenset(self.view.brokers), self.view.shutting_down, self.view.deleting,
                             dict(self.view.topics), dict(self.view.states))
            try:
                await asyncio.to_thread(self._reconcile, token, snap, preferred)
            except ControllerMoved as exc:
                log.warning("controller fenced", extra={"reason": str(exc)})
                if self.token == token:
                    self.token = None
            except KazooException as exc:
                log.warning("controller pass failed; retrying", extra={"error": repr(exc)})
                await asyncio.sleep(0.5)
                self._dirty.set()
            except Exception:
                log.exception("controller pass failed")
                await asyncio.sleep(1.0)
                self._dirty.set()

    # --- one pass (a worker thread: ZooKeeper calls block) ------------------------------------------

    def _reconcile(self, token: ControllerToken, snap: _Snapshot, preferred: bool) -> None:
        client = self.election.zk.client
        for name in sorted(snap.deleting):
            self._delete_topic(token, name, snap.topics.get(name))
        for name, assignment in sorted(snap.topics.items()):
            if name in snap.deleting:
                continue
            for p, replicas in sorted(assignment.partitions.items()):
                state = snap.states.get((name, p))
                if state is not None and state.controller_epoch > token.epoch:
                    raise ControllerMoved(f"{name}-{p} was written by controller epoch {state.controller_epoch}")
                new = plan_partition(replicas, state, snap.live, unclean=self.unclean, preferred=preferred,
                                     controller_epoch=token.epoch, shutting_down=snap.shutting_down)
                if new is None:
                    continue
                path = partition_state_path(name, p)
                data = encode_partition_state(new)
                try:
                    if state is None:
                        client.ensure_path(path.rsplit("/", 1)[0])
                        self.election.commit_fenced(token, lambda tx, path=path, data=data: tx.create(path, data))
                    else:
                        self.election.commit_fenced(token, lambda tx, path=path, data=data, state=state: tx.set_data(path, data, version=state.zk_version))
                except (NodeExistsError, BadVersionError, NoNodeError):
                    continue  # the view brings the newer version and another pass
                log.info("partition state written", extra={
                    "partition": f"{name}-{p}", "leader": new.leader, "leader_epoch": new.leader_epoch,
                    "isr": list(new.isr), "was": None if state is None else
                    {"leader": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr)}})

    def _delete_topic(self, token: ControllerToken, name: str, assignment: TopicAssignment | None) -> None:
        """Remove a topic queued in ``/admin/delete_topics`` (Kafka's TopicDeletionManager, without
        StopReplica: every node drops its replicas when the topic znode goes from its view)."""
        client = self.election.zk.client
        paths = []
        if assignment is not None:
            for p in sorted(assignment.partitions):
                state = partition_state_path(name, p)
                paths += [state, state.rsplit("/", 1)[0]]
            paths.append(f"{topic_path(name)}/partitions")
        existing = [path for path in paths + [topic_path(name), topic_config_path(name)] if client.exists(path)]

        def build(tx: object) -> None:
            for path in existing:
                tx.delete(path)  # type: ignore[attr-defined]
            tx.delete(f"{DELETE_TOPICS}/{name}")  # type: ignore[attr-defined]

        # A failure (a znode added meanwhile: NotEmpty) propagates: the pass is retried.
        self.election.commit_fenced(token, build)
        log.info("topic deleted", extra={"topic": name})

    # --- ElectLeaders (KIP-183 preferred, KIP-460 unclean) -----------------------------------------------

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool) -> dict[tuple[str, int], int]:
        """Run the election for ``partitions`` (None: every partition); an error code for each
        (NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
        UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER)."""
        from protocol.errors import ErrorCode

        token = self.token
        wanted = partitions if partitions is not None else [
            (t, p) for t, a in sorted(self.view.topics.items()) for p in sorted(a.partitions)]
        if token is None:
            return {tp: ErrorCode.NOT_CONTROLLER for tp in wanted}
        snap = _Snapshot(frozenset(self.view.brokers), self.view.shutting_down, self.view.deleting,
                         dict(self.view.topics), dict(self.view.states))
        return await asyncio.to_thread(self._elect, token, snap, wanted, unclean)

    def _elect(self, token: ControllerToken, snap: _Snapshot, wanted: list[tuple[str, int]],
               unclean: bool) -> dict[tuple[str, int], int]:
        from protocol.errors import ErrorCode

        out: dict[tuple[str, int], int] = {}
        for name, p in wanted:
            assignment = snap.topics.get(name)
            state = snap.states.get((name, p))
            if assignment is None or p not in assignment.partitions or state is None:
                out[(name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            replicas = assignment.partitions[p]
            if unclean:
                if state.leader in snap.live:
                    out[(name, p)] = ErrorCode.ELECTION_NOT_NEEDED
                    continue
                new = plan_partition(replicas, state, snap.live, unclean=True, preferred=False,
                                     controller_epoch=token.epoch)
                if new is None or new.leader < 0:
                    out[(name, p)] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                    continue
            else:
                preferred = replicas[0]
                if state.leader == preferred:
                    out[(name, p)] = ErrorCode.ELECTION_NOT_NEEDED
                    continue
                if preferred not in snap.live or preferred not in state.isr:
                    out[(name, p)] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                    continue
                new = PartitionState(preferred, state.leader_epoch + 1,
                                     tuple(r for r in state.isr if r in snap.live), token.epoch)
            path, data = partition_state_path(name, p), encode_partition_state(new)
            try:
                self.election.commit_fenced(token, lambda tx, path=path, data=data, state=state: tx.set_data(path, data, version=state.zk_version))
            except (BadVersionError, NoNodeError):
                # The state moved meanwhile (Kafka: the election is retried by the caller).
                out[(name, p)] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if not unclean \
                    else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            log.info("leader elected on request", extra={"partition": f"{name}-{p}", "leader": new.leader,
                                                         "leader_epoch": new.leader_epoch, "unclean": unclean})
            out[(name, p)] = ErrorCode.NONE
        return out
