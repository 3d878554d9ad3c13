"""The active controller's duties: partition states for new partitions, leader election when a
broker goes, ISR clean-up, preferred-leader election, topic deletion — the duties of Kafka's
ZooKeeper-mode ``KafkaController`` (core/src/main/scala/kafka/controller/ in Kafka 3.x).

Reconciliation instead of an event log: whenever the view changes while this node is the
controller (brokers came or went, a topic appeared or grew, a state changed), one pass compares
every partition with the live brokers and writes what must change. A pass is idempotent, so a
missed or doubled event costs nothing; the view always catches up with ZooKeeper, so a write that
lost a race (BadVersion: the state moved meanwhile) is simply redone by the pass its new version
triggers.

Every write is fenced twice: by the controller epoch (``commit_fenced`` checks
``/controller_epoch``'s version, so a deposed controller writes nothing) and by the state
znode's version (the partition epoch), so it never overwrites a change it has not seen.

The rules each pass applies are in ``plan.py`` (pure, tested alone).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import cast

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError

from .controller_election import ControllerElection, ControllerMoved, ControllerToken
from .plan import bounced_replicas, finish_reassignment, invalid_move, plan_partition, reassign, warming_by_partition
from .view import ClusterView
from .znodes import (
    DELETE_TOPICS,
    PartitionState,
    TopicAssignment,
    ZnodeError,
    decode_partition_state,
    decode_topic,
    encode_partition_state,
    encode_topic,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from .zookeeper import ZkStat, ZkTransaction

__all__ = ["Controller"]

log = logging.getLogger("groupcoord.cluster.controller")


@dataclass(frozen=True, slots=True)
class _Snapshot:
    live: frozenset[int]
    shutting_down: frozenset[int]
    deleting: frozenset[str]
    topics: dict[str, TopicAssignment]
    states: dict[tuple[str, int], PartitionState]
    #: Replicas still warming, by partition (cluster/warming.py).
    warming: dict[tuple[str, int], frozenset[int]]
    #: Each live broker's epoch (its registration's czxid), to tell bounced ones (plan.py, KIP-380).
    epochs: dict[int, int]
    #: Brokers this controller saw register again with a new epoch since its last pass.
    bounced: frozenset[int]


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
        #: The broker epochs (registration czxids) last seen, and the brokers seen with a new one
        #: while still registered — bounced (KIP-380) — that no pass has handled yet.
        self._epochs: dict[int, int] = {}
        self._bounced: set[int] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._loop = asyncio.get_running_loop()

        def on_elected(token: ControllerToken) -> None:  # a kazoo thread
            self._loop.call_soon_threadsafe(self._elected, token)

        def on_resigned(token: ControllerToken) -> None:
            self._loop.call_soon_threadsafe(self._resigned, token)

        election.on_elected = on_elected
        election.on_resigned = on_resigned
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
        # Kafka's processBrokerChange: a broker in both the old and the new set with a new epoch
        # bounced; it is handled as failed, then started (plan.py).
        epochs = {b: reg.epoch for b, reg in view.brokers.items()}
        if self.token is not None:
            self._bounced |= {b for b, e in epochs.items() if b in self._epochs and e != self._epochs[b]}
        self._epochs = epochs
        self._dirty.set()

    def topic_changed(self, view: ClusterView, name: str) -> None:
        self._dirty.set()

    def state_changed(self, view: ClusterView, topic: str, partition: int) -> None:
        self._dirty.set()

    def _snapshot(self) -> _Snapshot:
        view = self.view
        return _Snapshot(frozenset(view.brokers), view.shutting_down, view.deleting, dict(view.topics),
                         dict(view.states), warming_by_partition(view.warming),
                         {b: reg.epoch for b, reg in view.brokers.items()}, frozenset(self._bounced))

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
            snap = self._snapshot()
            self._bounced.clear()
            try:
                await asyncio.to_thread(self._reconcile, token, snap, preferred)
            except ControllerMoved as exc:
                log.warning("controller fenced", extra={"reason": str(exc)})
                if self.token == token:
                    self.token = None
            except KazooException as exc:
                log.warning("controller pass failed; retrying", extra={"error": repr(exc)})
                self._bounced |= snap.bounced
                await asyncio.sleep(0.5)
                self._dirty.set()
            except Exception:
                log.exception("controller pass failed")
                self._bounced |= snap.bounced
                await asyncio.sleep(1.0)
                self._dirty.set()

    # --- one pass (a worker thread: ZooKeeper calls block) ------------------------------------------

    def _reconcile(self, token: ControllerToken, snap: _Snapshot, preferred: bool) -> None:
        for name in sorted(snap.deleting):
            self._delete_topic(token, name, snap.topics.get(name), snap.live)
        for name, assignment in sorted(snap.topics.items()):
            if name in snap.deleting:
                continue
            finishing: dict[int, tuple[PartitionState, PartitionState]] = {}
            self._reconcile_topic(token, snap, preferred, name, assignment, finishing)
            if finishing:
                self._finish_reassignments(token, assignment, finishing)

    def _reconcile_topic(self, token: ControllerToken, snap: _Snapshot, preferred: bool, name: str,
                         assignment: TopicAssignment, finishing: dict[int, tuple[PartitionState, PartitionState]]) -> None:
        client = self.election.zk.client
        for p, replicas in sorted(assignment.partitions.items()):
            state = snap.states.get((name, p))
            if state is not None and state.controller_epoch > token.epoch:
                raise ControllerMoved(f"{name}-{p} was written by controller epoch {state.controller_epoch}")
            bounced = bounced_replicas(state, snap.epochs, snap.bounced)
            new = plan_partition(replicas, state, snap.live, unclean=self.unclean, preferred=preferred,
                                 controller_epoch=token.epoch, shutting_down=snap.shutting_down,
                                 warming=snap.warming.get((name, p), frozenset()), bounced=bounced)
            if new is None:
                if state is not None and assignment.reassigning(p):
                    finished = finish_reassignment(assignment, p, state, snap.live, snap.shutting_down, token.epoch)
                    if finished is not None:
                        finishing[p] = (state, finished)
                continue
            path = partition_state_path(name, p)
            data = encode_partition_state(new)
            try:
                if state is None:
                    # The parents are created in the same transaction, conditional on the topic
                    # znode being the one planned from: a topic deleted meanwhile is not brought
                    # back as an empty /brokers/topics/<t> (ensure_path would recreate it).
                    parents = [q for q in (f"{topic_path(name)}/partitions", path.rsplit("/", 1)[0])
                               if not client.exists(q)]

                    def create(tx: ZkTransaction, path: str = path, data: bytes = data, parents: list[str] = parents) -> None:
                        tx.check(topic_path(name), assignment.zk_version)
                        for parent in parents:
                            tx.create(parent, b"")
                        tx.create(path, data)

                    self.election.commit_fenced(token, create)
                else:
                    def update(tx: ZkTransaction, path: str = path, data: bytes = data, version: int = state.zk_version) -> None:
                        tx.set_data(path, data, version=version)

                    self.election.commit_fenced(token, update)
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue  # the view brings the newer version and another pass
            log.info("partition state written", extra={
                "partition": f"{name}-{p}", "leader": new.leader, "leader_epoch": new.leader_epoch,
                "isr": list(new.isr), "bounced": sorted(bounced), "was": None if state is None else
                {"leader": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr)}})

    def _delete_topic(self, token: ControllerToken, name: str, assignment: TopicAssignment | None,
                      live: frozenset[int]) -> None:
        """Remove a topic queued in ``/admin/delete_topics``, in two steps (Kafka's
        TopicDeletionManager: the topic is gone once every replica answered StopReplica, and only
        then is its deletion marker removed, so it is never re-created meanwhile):

        1. delete the topic's znodes (states, assignment, config) in one fenced transaction; every
           node drops its replicas when the topic leaves its view (our StopReplica) and then
           acknowledges with ``/admin/delete_topics/<topic>/<broker id>`` (replica_manager.py);
        2. once every live node has acknowledged, delete the acknowledgements and the marker.

        While the marker exists no node auto-creates the topic and CreateTopics refuses it
        (topic_store.py), and DeleteTopics answers only once the marker is gone: the answer means
        no live node serves the topic any more.

        Each step tolerates the other having been done already: a pass started from a view that
        had not yet seen the previous pass's deletion finds nothing to delete (before, it deleted
        the marker again and failed the whole pass with NoNodeError)."""
        client = self.election.zk.client
        paths = []
        if assignment is not None:
            for p in sorted(assignment.partitions):
                state = partition_state_path(name, p)
                paths += [state, state.rsplit("/", 1)[0]]
            paths.append(f"{topic_path(name)}/partitions")
        existing = [path for path in paths + [topic_path(name), topic_config_path(name)] if client.exists(path)]
        marker = f"{DELETE_TOPICS}/{name}"
        if existing:
            def build(tx: ZkTransaction) -> None:
                # Only while the marker exists: a view that still shows it after the deletion
                # completed must not delete a topic of the same name created since.
                tx.check(marker, -1)
                for path in existing:
                    tx.delete(path)

            try:
                self.election.commit_fenced(token, build)
            except (NoNodeError, NotEmptyError):
                return  # it changed meanwhile (a state created, a znode gone): the view brings another pass
            log.info("topic deleted", extra={"topic": name})
        try:
            # The watch wakes the controller when a node acknowledges.
            acked = client.get_children(marker, watch=self._acknowledged)
        except NoNodeError:
            return  # finished already (a pass from a view that had not seen it yet)
        waiting = sorted(b for b in live if str(b) not in acked)
        if waiting:
            log.debug("topic deletion waits for nodes", extra={"topic": name, "waiting": waiting})
            return

        def finish(tx: ZkTransaction) -> None:
            for child in acked:
                tx.delete(f"{marker}/{child}")
            tx.delete(marker)

        try:
            self.election.commit_fenced(token, finish)
        except (NoNodeError, NotEmptyError):
            return  # an acknowledgement came or went meanwhile: the watch brings another pass
        log.info("topic deletion completed", extra={"topic": name, "acknowledged_by": sorted(int(a) for a in acked)})

    def _acknowledged(self, event: object) -> None:
        """A node acknowledged a deletion (a ZooKeeper thread)."""
        self._loop.call_soon_threadsafe(self._dirty.set)

    def _finish_reassignments(self, token: ControllerToken, assignment: TopicAssignment,
                              finishing: dict[int, tuple[PartitionState, PartitionState]]) -> None:
        """One transaction per topic: the new states and the topic znode without the finished
        moves, each conditional on the version it was planned from."""
        partitions, adds, removes = dict(assignment.partitions), dict(assignment.adding), dict(assignment.removing)
        for p in finishing:
            partitions[p] = assignment.target(p)
            adds.pop(p, None)
            removes.pop(p, None)
        done = replace(assignment, partitions=partitions, adding=adds, removing=removes)
        name = assignment.name

        def build(tx: ZkTransaction) -> None:
            for p, (old, new) in sorted(finishing.items()):
                tx.set_data(partition_state_path(name, p), encode_partition_state(new), version=old.zk_version)
            tx.set_data(topic_path(name), encode_topic(done), version=assignment.zk_version)

        try:
            self.election.commit_fenced(token, build)
        except (BadVersionError, NoNodeError):
            return  # something moved meanwhile: the view brings it and another pass
        for p, (_old, new) in sorted(finishing.items()):
            log.info("partition reassignment completed", extra={
                "partition": f"{name}-{p}", "replicas": list(partitions[p]),
                "removed": list(assignment.removing.get(p, ())), "leader": new.leader,
                "leader_epoch": new.leader_epoch, "isr": list(new.isr)})

    # --- AlterPartitionReassignments / ListPartitionReassignments (KIP-455) -------------------------

    async def alter_reassignments(self, wanted: dict[tuple[str, int], tuple[int, ...] | None],
                                  allow_replication_factor_change: bool = True) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Start (or cancel: None) the reassignment of each partition; (error code, message) for each.
        The move itself goes on in the reconcile passes; this answers once it is written."""
        from protocol.errors import ErrorCode

        token = self.token
        if token is None:
            return {tp: (ErrorCode.NOT_CONTROLLER, "This node is not the controller.") for tp in wanted}
        live = frozenset(self.view.brokers)
        deleting = self.view.deleting
        written: dict[str, int] = {}
        out = await asyncio.to_thread(self._alter, token, wanted, live, deleting, allow_replication_factor_change,
                                      written)
        # Answer once this node's view shows what was written, so that a List right after the
        # answer sees the moves (Kafka answers from the controller's own state the same way).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while loop.time() < deadline and any(
                (a := self.view.topics.get(name)) is not None and a.zk_version < version
                for name, version in written.items()):
            await asyncio.sleep(0.01)
        self._dirty.set()
        return out

    def _alter(self, token: ControllerToken, wanted: dict[tuple[str, int], tuple[int, ...] | None], live: frozenset[int],
               deleting: frozenset[str], allow_rf_change: bool,
               written: dict[str, int]) -> dict[tuple[str, int], tuple[int, str | None]]:
        from protocol.errors import ErrorCode

        client = self.election.zk.client
        out: dict[tuple[str, int], tuple[int, str | None]] = {}
        by_topic: dict[str, dict[int, tuple[int, ...] | None]] = {}
        for (name, p), target in wanted.items():
            by_topic.setdefault(name, {})[p] = target
        for name, moves in sorted(by_topic.items()):
            for _attempt in range(10):
                result: dict[int, tuple[int, str | None]] = {}
                try:
                    data, stat = client.get(topic_path(name))
                    current = decode_topic(topic_path(name), data, stat.version)
                except (NoNodeError, ZnodeError):
                    current = None
                if current is None or name in deleting:
                    result = {p: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.") for p in moves}
                    break
                moved = current
                for p, target in sorted(moves.items()):
                    problem = invalid_move(current, p, target, live, allow_rf_change)
                    if problem is not None:
                        result[p] = problem
                        continue
                    if target is not None and not current.reassigning(p) and target == current.partitions[p]:
                        result[p] = (ErrorCode.NONE, None)  # already there: nothing to do
                        continue
                    moved = reassign(moved, p, target)
                    result[p] = (ErrorCode.NONE, None)
                if moved is current:
                    break
                try:
                    def write(tx: ZkTransaction, path: str = topic_path(name), data: bytes = encode_topic(moved),
                              version: int = current.zk_version) -> None:
                        tx.set_data(path, data, version=version)

                    stat = cast(ZkStat, self.election.commit_fenced(token, write)[0])  # set_data's result
                    written[name] = stat.version
                except BadVersionError:
                    continue  # the topic changed meanwhile (a finished move, new partitions): again
                except NoNodeError:
                    result = {p: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.") for p in moves}
                    break
                log.info("partition reassignment started", extra={"topic": name, "moves": {
                    p: {"replicas": list(moved.partitions[p]), "adding": list(moved.adding.get(p, ())),
                        "removing": list(moved.removing.get(p, ()))}
                    for p, (code, _m) in sorted(result.items()) if code == ErrorCode.NONE and p in moved.partitions}})
                break
            else:
                result = {p: (ErrorCode.REQUEST_TIMED_OUT, f"Topic '{name}' kept changing; retry.") for p in moves}
            out.update({(name, p): r for p, r in result.items()})
        return out

    def list_reassignments(self, wanted: list[tuple[str, int]] | None) -> dict[tuple[str, int], TopicAssignment] | None:
        """The partitions being reassigned (all, or those of ``wanted``), each with its topic's
        assignment; None when this node is not the controller (Kafka answers NOT_CONTROLLER)."""
        if self.token is None:
            return None
        keys = wanted if wanted is not None else [
            (name, p) for name, a in sorted(self.view.topics.items()) for p in sorted(a.partitions)]
        out = {}
        for name, p in keys:
            assignment = self.view.topics.get(name)
            if assignment is not None and p in assignment.partitions and assignment.reassigning(p):
                out[(name, p)] = assignment
        return out

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
        snap = self._snapshot()
        return await asyncio.to_thread(self._elect, token, snap, wanted, unclean)

    def _elect(self, token: ControllerToken, snap: _Snapshot, wanted: list[tuple[str, int]],
               unclean: bool) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for name, p in wanted:
            out[(name, p)] = self._elect_one(token, snap, name, p, unclean)
        return out

    def _elect_one(self, token: ControllerToken, snap: _Snapshot, name: str, p: int, unclean: bool) -> int:
        from protocol.errors import ErrorCode

        state = snap.states.get((name, p))
        for _attempt in range(3):
            code, state = self._elect_at(token, snap, name, p, state, unclean)
            if code is not None:
                return code
            # The state znode moved since the view saw it (often our own last election, whose
            # watch has not arrived yet): read it and decide again, as Kafka's caller retries.
            try:
                data, stat = self.election.zk.client.get(partition_state_path(name, p))
                state = decode_partition_state(partition_state_path(name, p), data, stat.version, stat.mzxid)
            except NoNodeError:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            except ZnodeError as exc:
                log.error("unreadable partition state", extra={"partition": f"{name}-{p}", "reason": str(exc)})
                break
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if not unclean else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE

    def _elect_at(self, token: ControllerToken, snap: _Snapshot, name: str, p: int, state: PartitionState | None,
                  unclean: bool) -> tuple[int | None, PartitionState | None]:
        """One election of partition ``p`` of ``name`` from ``state``: its error code, or None
        if the state znode had moved on (its version did not match)."""
        from protocol.errors import ErrorCode

        assignment = snap.topics.get(name)
        if assignment is None or p not in assignment.partitions or state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, state
        replicas = assignment.partitions[p]
        if unclean:
            if state.leader in snap.live:
                return ErrorCode.ELECTION_NOT_NEEDED, state
            new = plan_partition(replicas, state, snap.live, unclean=True, preferred=False,
                                 controller_epoch=token.epoch, warming=snap.warming.get((name, p), frozenset()))
            if new is None or new.leader < 0:
                return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, state
        else:
            # An operator's explicit preferred election is carried out even to a warming replica.
            preferred = replicas[0]
            if state.leader == preferred:
                return ErrorCode.ELECTION_NOT_NEEDED, state
            if preferred not in snap.live or preferred not in state.isr:
                return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, state
            new = PartitionState(preferred, state.leader_epoch + 1,
                                 tuple(r for r in state.isr if r in snap.live), token.epoch)
        path, data = partition_state_path(name, p), encode_partition_state(new)
        try:
            self.election.commit_fenced(token, lambda tx: tx.set_data(path, data, version=state.zk_version))
        except BadVersionError:
            return None, state  # the state moved meanwhile: read it again
        except NoNodeError:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, state
        log.info("leader elected on request", extra={"partition": f"{name}-{p}", "leader": new.leader,
                                                     "leader_epoch": new.leader_epoch, "unclean": unclean})
        return ErrorCode.NONE, state
