"""A leadership lease against stalls: a node that was stopped (SIGSTOP, a VM pause, a swap storm)
for longer than its ZooKeeper session may wake up still believing it leads, and serve reads from
its stale state before its ZooKeeper client notices the session is gone — a few hundred ms in
tests/coordinator/cluster/test_group_fault_schedule.py (an OffsetFetch answered with offsets older than one
the new coordinator had acknowledged). Kafka's ZooKeeper mode has the same window.

The event loop ticks every ``TICK_S``. While the last tick is older than half the session timeout
(a stall shorter than that cannot have cost the session, so no other node can have taken over
because of it), or after such a stall until a ZooKeeper round trip confirms the session, the
lease is off: partitions answer as if not led (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR), and
clients retry — at the new leader if there is one. Checking the age of the last tick at request
time covers the requests read in the first loop iteration after the resume, before any timer runs.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState

from .zookeeper import ZooKeeper

__all__ = ["StallGuard"]

log = logging.getLogger("groupcoord.cluster.liveness")

TICK_S = 0.1


class StallGuard:
    def __init__(self, zk: ZooKeeper, session_timeout_ms: int) -> None:
        self.zk = zk
        self.limit_s = session_timeout_ms / 2000.0
        self.last_tick = time.monotonic()
        self.suspect = False
        self._task: asyncio.Task[None] | None = None

    def fresh(self) -> bool:
        """Whether this node may act on what it believes it leads."""
        return not self.suspect and time.monotonic() - self.last_tick < self.limit_s

    def start(self) -> None:
        self.last_tick = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            gap = now - self.last_tick
            self.last_tick = now
            if gap >= self.limit_s and not self.suspect:
                self.suspect = True
                log.warning("event loop stalled; leadership suspended until ZooKeeper confirms the session",
                            extra={"stalled_s": round(gap, 2)})
                asyncio.get_running_loop().create_task(self._confirm())

    async def _confirm(self) -> None:
        """A round trip through the session: ZooKeeper answers only a live session, and its answer
        comes after every watch event queued before it (the view has caught up)."""
        while self.suspect:
            try:
                await asyncio.to_thread(self.zk.client.sync, "/")
                if self.zk.client.state == KazooState.CONNECTED:
                    # The view's updates were posted to the loop before this point: let them run.
                    await asyncio.sleep(0)
                    self.suspect = False
                    log.info("session confirmed after the stall; leadership resumed")
                    return
            except KazooException:
                pass
            await asyncio.sleep(0.2)
