"""The controller's pure decisions: which state a partition gets next, how a reassignment is
laid out and when it completes, and which moves Kafka's controller refuses. No ZooKeeper, no
asyncio: ``controller.py`` reads the view, calls these and writes what they return.

Election rules (Kafka's ``PartitionLeaderElectionAlgorithms``,
core/src/main/scala/kafka/controller/PartitionStateMachine.scala in Kafka 3.x):

* a new partition: leader = the first live replica, ISR = the live replicas, leader epoch 0;
* the leader is gone: the first replica in assignment order that is live and in the ISR; none
  and ``unclean.leader.election.enable`` → the first live replica, ISR = [it]; none otherwise →
  leader -1 and the ISR kept as it was (it never becomes empty: the last member may hold data no
  other replica has, KIP-966's "last replica standing");
* a dead broker in the ISR of a live leader: removed;
* preferred leader (``auto.leader.rebalance.enable``, and ElectLeaders): the first replica, when it
  is live, in the ISR and not leading;
* controlled shutdown (https://kafka.apache.org/documentation/#basic_ops_restarting): a node shutting down leads nothing another live ISR member can
  take, and leaves every ISR it is not the last member of;
* warm replicas first (groupcoord's own, cluster/warming.py): wherever the rules above leave a
  choice among ISR members — a leader gone, a controlled shutdown — a replica whose state is
  still warming up comes after the others, order kept otherwise; and the preferred replica
  does not take leadership back while it is warming (it would answer "loading" meanwhile).
  A preference only: if every candidate is warming, the first is chosen as before;
* partition reassignment (KIP-455, :meth:`Controller.alter_reassignments`): the topic znode
  lists the original and the target replicas together, with ``adding_replicas`` and
  ``removing_replicas``; the new replicas follow and catch up like any follower, and once every
  target replica is in the ISR one transaction writes the target as the assignment and a state
  with the leader in the target (kept if it is there, else the first live target replica in the
  ISR — Kafka's ReassignPartitionLeaderElectionStrategy) and the ISR narrowed to the target.
  Replicas no longer assigned delete their logs when they see it (Kafka's StopReplica with
  delete). A cancellation is a reassignment back to the original replicas.

* a bounced broker (KIP-380,
  https://cwiki.apache.org/confluence/display/KAFKA/KIP-380%3A+Detect+outdated+control+requests+and+bounced+brokers+using+broker+generation):
  a node that restarted, or lost its session, and registered again with a newer broker epoch
  (the czxid of ``/brokers/ids/<id>``) before the controller saw it go. Kafka's controller
  handles it as a failure then a startup (``processBrokerChange``: ``onBrokerFailure`` then
  ``onBrokerStartup``); here a partition whose state names as leader or ISR member a broker that
  registered after the state was written (its epoch is larger than the state's mzxid: zxids
  order every write) is planned first as if that broker were down — a new leader, out of the
  ISR, a new leader epoch — and, once that is written (or if it changes nothing), as usual: it
  catches up and rejoins the ISR, and may be elected again. Comparing zxids needs no memory of
  the epochs seen: a controller elected after the bounce, or a pass that lost a race, still sees
  it. The controller also remembers, as Kafka's does, the brokers it saw come back with a new
  epoch, for the next pass: a state another writer changed after the new registration (a
  leader's ISR change) still names the bounced broker then.

Every change the controller makes bumps the leader epoch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from .znodes import NO_LEADER, PartitionState, TopicAssignment

__all__ = ["bounced_replicas", "finish_reassignment", "invalid_move", "plan_partition", "reassign",
           "warming_by_partition"]


def warming_by_partition(marks: frozenset[tuple[int, str, int]]) -> dict[tuple[str, int], frozenset[int]]:
    out: dict[tuple[str, int], set[int]] = {}
    for broker, topic, partition in marks:
        out.setdefault((topic, partition), set()).add(broker)
    return {k: frozenset(v) for k, v in out.items()}


def bounced_replicas(state: PartitionState | None, epochs: Mapping[int, int],
                     seen_bounced: frozenset[int] = frozenset()) -> frozenset[int]:
    """The brokers ``state`` names as leader or ISR member that registered again after it was
    written: their broker epoch (``epochs``, by live broker) is larger than the state's mzxid;
    and those of ``seen_bounced`` (the controller saw their epoch change since its last pass, as
    Kafka's ``processBrokerChange`` does: this also covers a state another writer changed after
    the new registration) (pure; see the module docstring)."""
    if state is None:
        return frozenset()
    named = (state.leader, *state.isr)
    newer = frozenset(r for r in named if state.mzxid >= 0 and epochs.get(r, -1) > state.mzxid)
    return newer | frozenset(r for r in named if r in seen_bounced)


def plan_partition(replicas: tuple[int, ...], state: PartitionState | None, live: frozenset[int], *,
                   unclean: bool, preferred: bool, controller_epoch: int,
                   shutting_down: frozenset[int] = frozenset(),
                   warming: frozenset[int] = frozenset(),
                   bounced: frozenset[int] = frozenset()) -> PartitionState | None:
    """The state the controller writes for one partition, or None if it stays (pure).
    ``warming``: replicas to choose last; ``bounced``: live replicas to handle as failed first
    (see the module docstring)."""
    alive = [r for r in replicas if r in live]
    if state is None:
        if not alive:
            return None
        return PartitionState(alive[0], 0, tuple(alive), controller_epoch)
    if bounced:
        # Kafka's onBrokerFailure of the bounced brokers; their onBrokerStartup is the pass below,
        # once this state is written (its mzxid is then newer than their epochs).
        failed = plan_partition(replicas, state, live - bounced, unclean=unclean, preferred=preferred,
                                controller_epoch=controller_epoch, shutting_down=shutting_down, warming=warming)
        if failed is not None:
            return failed
    if state.leader == -2:  # being deleted
        return None
    # A leader no longer among the replicas (a reassignment overridden before it finished) goes.
    leader_live = state.leader in live and state.leader in replicas
    if leader_live:
        # Only replicas stay in the ISR: a replica dropped by an overriding reassignment leaves it.
        isr = tuple(r for r in state.isr if r in live and r in replicas)
        leader = state.leader
        if shutting_down:
            staying = [r for r in replicas if r in isr and r not in shutting_down]
            staying.sort(key=lambda r: r in warming)  # stable: assignment order otherwise
            if leader in shutting_down and staying:
                leader = staying[0]
            if leader not in shutting_down:
                isr = tuple(r for r in isr if r not in shutting_down)
        if (preferred and alive and alive[0] != leader and alive[0] in isr and alive[0] not in shutting_down
                and alive[0] not in warming):
            leader = alive[0]
        if isr == state.isr and leader == state.leader:
            return None
        return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)
    candidates = [r for r in replicas if r in live and r in state.isr]
    candidates.sort(key=lambda r: (r in shutting_down, r in warming))  # stable: assignment order otherwise
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


def finish_reassignment(assignment: TopicAssignment, partition: int, state: PartitionState, live: frozenset[int],
                        shutting_down: frozenset[int], controller_epoch: int) -> PartitionState | None:
    """The state that completes a partition's reassignment, once every target replica is in the
    ISR and a live target replica can lead; None while it must wait (pure)."""
    target = assignment.target(partition)
    if state.leader < 0 or not all(r in state.isr for r in target):
        return None
    if state.leader in target and state.leader in live:
        leader = state.leader
    else:
        candidates = [r for r in target if r in live and r in state.isr]
        candidates.sort(key=lambda r: r in shutting_down)  # stable: target order otherwise
        if not candidates:
            return None
        leader = candidates[0]
    isr = tuple(r for r in state.isr if r in target)
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)


def reassign(assignment: TopicAssignment, partition: int, target: tuple[int, ...] | None) -> TopicAssignment:
    """``assignment`` with ``partition`` moving to ``target`` (None: back to its original replicas),
    as KIP-455 lays it out: replicas = target then the original ones not in it, adding = target
    minus original, removing = original minus target. A move that overrides an unfinished one
    starts from that one's original replicas (pure)."""
    original = assignment.original(partition)
    if target is None:
        # Cancelled: the original replicas are the target; those being added are removed again.
        target = original
    replicas = tuple(dict.fromkeys(target + original))
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    partitions = dict(assignment.partitions)
    partitions[partition] = replicas
    adds, removes = dict(assignment.adding), dict(assignment.removing)
    adds.pop(partition, None)
    removes.pop(partition, None)
    if adding:
        adds[partition] = adding
    if removing:
        removes[partition] = removing
    return replace(assignment, partitions=partitions, adding=adds, removing=removes)


def invalid_move(current: TopicAssignment, partition: int, target: tuple[int, ...] | None, live: frozenset[int],
                  allow_rf_change: bool) -> tuple[int, str] | None:
    """Why Kafka's controller would refuse this move, as (error code, message); None if valid."""
    from protocol.errors import ErrorCode

    if partition not in current.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Partition {current.name}-{partition} does not exist."
    if target is None:
        if not current.reassigning(partition):
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment of {current.name}-{partition} is in progress."
        return None
    if not target:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified."
    if len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate replica ids in {list(target)}."
    if any(r < 0 for r in target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in {list(target)}."
    dead = [r for r in target if r not in live]
    if dead:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment has brokers that are not alive. Replica list: {list(target)}, "
                f"live broker list: {sorted(live)}")
    if not allow_rf_change and len(target) != len(current.original(partition)):
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor of {current.name}-{partition} would change from "
                f"{len(current.original(partition))} to {len(target)}.")
    return None
