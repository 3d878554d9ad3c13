"""Controller election through ZooKeeper, fenced by the controller epoch (Kafka's ZooKeeper mode).

One node is the controller: the one whose ephemeral ``/controller`` znode exists. Winning takes
one multi-op that creates ``/controller`` and sets ``/controller_epoch`` to E+1 *expecting the
version read with E* (``KafkaZkClient.registerControllerAndIncrementControllerEpoch``); a lost
race fails the whole transaction. The epoch znode's version after the win is the controller's
fencing token: every later controller write is a multi-op that starts with a version check of
``/controller_epoch`` (``commit_fenced``), so a deposed controller that has not noticed yet (a
paused process, a partitioned node) can never write (``wrapRequestWithControllerEpochCheck`` in
https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/zk/KafkaZkClient.scala).

Who elects when: a watch on ``/controller`` runs the election whenever it is absent (at start,
when the controller's session ends); a controller that sees ``/controller`` name another node,
or loses its session, resigns. Callbacks run on kazoo's threads; the election itself is spawned
on kazoo's handler so the watch never blocks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.recipe.watchers import DataWatch

from .znodes import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    ZnodeError,
    decode_controller,
    decode_controller_epoch,
    encode_controller,
)
from .zookeeper import ZkEvent, ZkOpResult, ZkStat, ZkTransaction, ZooKeeper

__all__ = ["ControllerToken", "ControllerMoved", "ControllerElection"]

log = logging.getLogger("groupcoord.cluster.controller")


@dataclass(frozen=True, slots=True)
class ControllerToken:
    """What a controller holds while it leads: its epoch and the version of ``/controller_epoch``
    that proves it is still the latest."""

    broker_id: int
    epoch: int
    epoch_zk_version: int


class ControllerMoved(Exception):
    """A fenced write by a controller that is no longer the controller (Kafka's ControllerMovedException)."""


class ControllerElection:
    def __init__(self, zk: ZooKeeper, broker_id: int,
                 on_elected: Callable[[ControllerToken], None] = lambda _t: None,
                 on_resigned: Callable[[ControllerToken], None] = lambda _t: None) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.on_elected = on_elected
        self.on_resigned = on_resigned
        #: The token while this node is the controller, else None.
        self.token: ControllerToken | None = None
        self._lock = threading.Lock()
        self._watch: DataWatch | None = None

    def start(self) -> None:
        """Create ``/controller_epoch`` (0) if this is a new cluster, then watch ``/controller``."""
        client = self.zk.client
        try:
            client.create(CONTROLLER_EPOCH, b"0", makepath=True)
        except NodeExistsError:
            pass
        client.add_listener(self._on_state)
        self._watch = DataWatch(client, CONTROLLER, self._on_controller)

    # --- watches (kazoo's threads) ------------------------------------------------------------

    def _on_controller(self, data: bytes | None, stat: ZkStat | None, event: ZkEvent = None) -> None:
        if self.zk.closing:
            return
        if stat is None:
            self.zk.client.handler.spawn(self._elect_in_background)
            return
        try:
            holder = decode_controller(data)
        except ZnodeError as exc:
            log.error("unreadable controller znode", extra={"error": str(exc)})
            return
        token = self.token
        if token is not None and holder != self.broker_id:
            self._resign(f"/controller names broker {holder}")

    def _on_state(self, state: str) -> None:
        # LOST: the session and so /controller are gone; another node may already lead.
        if state == KazooState.LOST and self.token is not None and not self.zk.closing:
            self._resign("zookeeper session expired")

    def _resign(self, reason: str) -> None:
        with self._lock:
            token, self.token = self.token, None
        if token is not None:
            log.warning("resigned as controller", extra={"epoch": token.epoch, "reason": reason})
            self.on_resigned(token)

    # --- election -----------------------------------------------------------------------------

    def _elect_in_background(self) -> None:
        try:
            self.elect()
        except KazooException as exc:
            # Connection lost mid-election (or the session closing): the watch on /controller is
            # re-armed with the new connection and runs the election again if it is still vacant.
            if not self.zk.closing:
                log.warning("controller election interrupted", extra={"error": repr(exc)})

    def elect(self) -> ControllerToken | None:
        """Try to become the controller; the token if this node won, None if another did."""
        client = self.zk.client
        token: ControllerToken | None
        with self._lock:
            if self.token is not None:
                return self.token
            if client.exists(CONTROLLER) is not None:
                return None
            data, stat = client.get(CONTROLLER_EPOCH)
            try:
                epoch = decode_controller_epoch(data)
            except ZnodeError as exc:
                log.error("cannot elect a controller", extra={"error": str(exc)})
                return None
            tx = client.transaction()
            tx.create(CONTROLLER, encode_controller(self.broker_id, int(time.time() * 1000)), ephemeral=True)
            tx.set_data(CONTROLLER_EPOCH, str(epoch + 1).encode(), version=stat.version)
            results = tx.commit()  # a lost race returns its errors; it does not raise
            if not any(isinstance(r, Exception) for r in results):
                token = ControllerToken(self.broker_id, epoch + 1, results[1].version)
            else:
                token = self._won_after_all(epoch + 1)
                if token is None:
                    return None
            self.token = token
        log.info("elected controller", extra={"broker_id": self.broker_id, "epoch": token.epoch})
        self.on_elected(token)
        return token

    def _won_after_all(self, epoch: int) -> ControllerToken | None:
        # A reply lost to a connection loss looks like a failure although the transaction ran:
        # it did if /controller names us, in this session, and the epoch is the one we wrote.
        client = self.zk.client
        try:
            data, stat = client.get(CONTROLLER)
            epoch_data, epoch_stat = client.get(CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        if (decode_controller(data) == self.broker_id and stat.ephemeralOwner == self.zk.session_id
                and decode_controller_epoch(epoch_data) == epoch):
            return ControllerToken(self.broker_id, epoch, epoch_stat.version)
        return None

    # --- fenced writes ------------------------------------------------------------------------

    def commit_fenced(self, token: ControllerToken, build: Callable[[ZkTransaction], None]) -> list[ZkOpResult]:
        """Run ``build(tx)`` ops in one transaction that first checks ``/controller_epoch`` is
        still at the token's version; ControllerMoved if another controller has been elected."""
        tx = self.zk.client.transaction()
        tx.check(CONTROLLER_EPOCH, token.epoch_zk_version)
        build(tx)
        results = tx.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerMoved(f"controller epoch {token.epoch} of broker {token.broker_id} is stale: "
                                  "another controller was elected")
        # The failing op carries the cause; the others report being rolled back.
        errors = [r for r in results if isinstance(r, Exception)
                  and not isinstance(r, (RolledBackError, RuntimeInconsistency))]
        if errors:
            raise errors[0]
        return list(results[1:])
