"""One partition's replication state on this node (Kafka's ``Partition``): role, leader epoch,
ISR, the high watermark, and — on the leader — how far each follower has fetched.

Single-node mode has none of this (``PartitionLog.replication`` is None and the high watermark
is the durable log end). In cluster mode the cluster wing sets the role from the partition's
state znode (``become_leader`` / ``become_follower`` / ``update_isr``); the Fetch handler reports
follower fetches (``follower_fetched``); the Produce handler waits for the high watermark.

Rules (reference/cluster_replication.md §3):

1. The leader's high watermark is the lowest log end offset over itself and every follower in the
   ISR (§3.2); it never goes back on a leader, and does not move while the ISR is smaller than
   ``min.insync.replicas``. A follower whose position is not known yet (no fetch in this leader
   epoch) holds it where it is.
2. A follower is caught up if its last fetch reached the leader's log end, or reached the end the
   leader had at its previous fetch, within ``replica.lag.time.max.ms`` (§3.3).
3. A follower joins the ISR once it has fetched up to the high watermark and to the start of the
   current leader epoch, so a new member can never lack committed data (§3.3); the change is
   asked of the cluster wing (``request_isr``), which writes the state znode conditionally, and
   takes effect when the znode's new version comes back.
4. A follower's high watermark is min(leader's high watermark, own log end) (§3.1).
5. Waiters for the high watermark (acks=all) fail with :class:`NotLeader` the moment this node
   stops leading, so nothing is acknowledged from a log this node no longer leads (KAFKA-20634).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Replication", "FollowerProgress", "NotLeader"]

LEADER = "leader"
FOLLOWER = "follower"
OFFLINE = "offline"


class NotLeader(Exception):
    """This node stopped leading the partition while a request waited on it."""


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class FollowerProgress:
    #: The follower's log end offset as its last fetch told (-1: no fetch in this leader epoch).
    leo: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    #: The leader's log end when the last fetch arrived (for rule 2).
    leader_leo_at_last_fetch: int = -1
    #: The follower's log start offset as its last fetch told (-1: unknown); DeleteRecords
    #: waits for it (Kafka's DelayedDeleteRecords).
    log_start: int = -1


@dataclass(slots=True)
class Replication:
    broker_id: int
    #: The log end offset now: what the local log holds durably (a callable: the log moves).
    log_end: Callable[[], int]
    min_insync_replicas: int = 1
    clock_ms: Callable[[], int] = _now_ms
    role: str = OFFLINE
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    #: The state znode version this node applied (the partition epoch).
    zk_version: int = -1
    high_watermark: int = 0
    epoch_start_offset: int = 0
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    #: Set by the cluster wing: ask for the ISR to become this (rule 3, and shrinking).
    request_isr: Callable[[tuple[int, ...]], None] | None = None
    #: Set by the cluster wing: False while a stall may have cost this node its leadership
    #: (cluster/liveness.py); a leader then serves nothing.
    lease: Callable[[], bool] = lambda: True
    #: An ISR change asked for and not yet seen in the state znode.
    pending_isr: tuple[int, ...] | None = None
    #: Called when the high watermark moves (wakes fetch long polls and produce waiters).
    on_advance: Callable[[], None] = lambda: None
    _waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    # --- role changes (from the state znode) ---------------------------------------------------

    def become_leader(self, epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...], zk_version: int) -> None:
        now = self.clock_ms()
        self.role, self.leader_id, self.leader_epoch = LEADER, self.broker_id, epoch
        self.isr, self.replicas, self.zk_version = isr, replicas, zk_version
        self.pending_isr = None
        self.epoch_start_offset = self.log_end()
        # §3.3: on a new leader epoch, followers in the ISR count as caught up now; others not.
        self.followers = {r: FollowerProgress(last_caught_up_ms=now if r in isr else 0)
                          for r in replicas if r != self.broker_id}
        self.high_watermark = min(self.high_watermark, self.log_end())
        self.maybe_advance()

    def become_follower(self, leader: int, epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...],
                        zk_version: int) -> None:
        was_leader = self.role == LEADER
        self.role, self.leader_id, self.leader_epoch = FOLLOWER, leader, epoch
        self.isr, self.replicas, self.zk_version = isr, replicas, zk_version
        self.pending_isr = None
        self.followers = {}
        if was_leader:
            self.fail_waiters(f"no longer the leader (leader epoch {epoch}, leader {leader})")

    def go_offline(self, reason: str) -> None:
        self.role = OFFLINE
        self.fail_waiters(reason)

    def update_replicas(self, replicas: tuple[int, ...]) -> None:
        """The assignment changed under the same leader epoch (a reassignment started, KIP-455):
        new replicas are followers not caught up yet; replicas gone are no longer tracked."""
        self.replicas = replicas
        if self.role == LEADER:
            self.followers = {r: self.followers.get(r) or FollowerProgress(last_caught_up_ms=0)
                              for r in replicas if r != self.broker_id}

    def update_isr(self, isr: tuple[int, ...], zk_version: int) -> None:
        """The same leader and epoch with another ISR (a leader-driven change came back)."""
        self.isr, self.zk_version = isr, zk_version
        if self.pending_isr == isr:
            self.pending_isr = None
        self.maybe_advance()

    def fail_waiters(self, reason: str) -> None:
        waiters, self._waiters = self._waiters, []
        for _offset, fut in waiters:
            if not fut.done():
                fut.set_exception(NotLeader(reason))

    # --- the leader's side ----------------------------------------------------------------------

    def follower_fetched(self, replica_id: int, fetch_offset: int, log_start_offset: int = -1) -> None:
        """A follower asked for ``fetch_offset``: everything below it is in its log (rule 2/3).
        ``log_start_offset``: the follower's, as its fetch reports it."""
        progress = self.followers.get(replica_id)
        if progress is None:
            if replica_id not in self.replicas:
                return
            progress = self.followers[replica_id] = FollowerProgress()
        now = self.clock_ms()
        leader_leo = self.log_end()
        if fetch_offset >= leader_leo:
            progress.last_caught_up_ms = now
        elif fetch_offset >= progress.leader_leo_at_last_fetch >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.leo = fetch_offset
        progress.log_start = log_start_offset
        progress.last_fetch_ms = now
        progress.leader_leo_at_last_fetch = leader_leo
        if (replica_id not in self.isr and self.pending_isr is None and self.request_isr is not None
                and fetch_offset >= self.high_watermark and fetch_offset >= self.epoch_start_offset):
            self.pending_isr = tuple(sorted(self.isr + (replica_id,)))
            self.request_isr(self.pending_isr)
        self.maybe_advance()

    def lagging(self, lag_ms: int) -> list[int]:
        """ISR followers not caught up within ``lag_ms`` (rule 2): to be shrunk out."""
        now = self.clock_ms()
        leader_leo = self.log_end()
        out = []
        for r in self.isr:
            if r == self.broker_id:
                continue
            p = self.followers.get(r)
            if p is None or (p.leo != leader_leo and now - p.last_caught_up_ms > lag_ms):
                out.append(r)
        return out

    def maybe_advance(self) -> None:
        """Rule 1 on the leader; rule 4 is applied by the follower's fetcher."""
        if self.role != LEADER:
            return
        if len(self.isr) < self.min_insync_replicas:
            return
        candidate = self.log_end()
        for r in self.isr:
            if r == self.broker_id:
                continue
            p = self.followers.get(r)
            if p is None or p.leo < 0:
                return
            candidate = min(candidate, p.leo)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            self._wake()
            self.on_advance()

    def followers_log_start(self) -> int | None:
        """The lowest log start offset the ISR's followers reported (None: no follower in the
        ISR); -1 if one has not reported any in this leader epoch. Kafka's
        ``Partition.lowWatermarkIfLeader`` takes the live replicas; the ISR are the ones known
        to fetch."""
        starts = [self.followers[r].log_start if r in self.followers else -1
                  for r in self.isr if r != self.broker_id]
        return min(starts) if starts else None

    def set_follower_high_watermark(self, leader_hw: int) -> None:
        new = min(leader_hw, self.log_end())
        if new != self.high_watermark:
            self.high_watermark = new
            self.on_advance()

    # --- waiting for the high watermark ---------------------------------------------------------

    def wait_for(self, offset: int) -> asyncio.Future[None]:
        """Resolves once the high watermark reaches ``offset``; NotLeader if leadership goes."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A waiter that went away first (a snapshot task cancelled in the same step that failed
        # its future, at a resignation) leaves NotLeader unread: that is no news worth a log line.
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        if self.role != LEADER:
            fut.set_exception(NotLeader("not the leader"))
        elif self.high_watermark >= offset:
            fut.set_result(None)
        else:
            self._waiters.append((offset, fut))
        return fut

    def _wake(self) -> None:
        if not self._waiters:
            return
        hw = self.high_watermark
        still = []
        for offset, fut in self._waiters:
            if fut.done():
                continue
            if hw >= offset:
                fut.set_result(None)
            else:
                still.append((offset, fut))
        self._waiters = still
