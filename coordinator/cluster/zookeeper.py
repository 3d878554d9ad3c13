"""This node's ZooKeeper session (kazoo), its cluster id, and its broker registration.

kazoo is a threaded client: its calls block, and its state listener and watch callbacks run on
kazoo's own threads. At start-up (before the event loop serves anything) the app calls it
directly; later work from kazoo's threads is spawned on kazoo's handler, never on the event loop
(a state listener "must not block": kazoo's ``KazooClient.add_listener``,
https://kazoo.readthedocs.io/en/latest/api/client.html#kazoo.client.KazooClient.add_listener).

Registration follows Kafka's checked ephemeral create (``KafkaZkClient.registerBroker`` in
https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/zk/KafkaZkClient.scala, KAFKA-7165):
``/brokers/ids/<id>`` is created ephemeral; if it exists, it is ours when its ``ephemeralOwner`` is
this session or one of this node's earlier sessions (an expired session's ephemeral can linger a
moment, so it is deleted and created again); any other owner is another live node with the same
``broker.id``, and this node refuses to start. When the session expires
(SUSPENDED → LOST, ephemerals gone) kazoo opens a new one by itself and the registration is
created again in it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Protocol, TypeAlias

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from ..config import parse_zookeeper_connect
from .znodes import (
    CLUSTER_ID,
    PERSISTENT_PATHS,
    BrokerRegistration,
    ZnodeError,
    broker_path,
    decode_cluster_id,
    encode_broker,
    encode_cluster_id,
)

__all__ = ["ClusterError", "ZooKeeper", "ZkStat", "ZkTransaction", "ZkOpResult", "ZkEvent"]

# kazoo ships no type information (pyproject.toml's mypy section ignores its imports), so every
# kazoo value is ``Any`` to mypy; these names say at each use which kazoo object is meant.


class ZkStat(Protocol):
    """The fields we read of kazoo's ``ZnodeStat`` (a znode's stat, as a watch or ``get`` gives it)."""

    @property
    def version(self) -> int: ...

    @property
    def ephemeralOwner(self) -> int: ...

    @property
    def czxid(self) -> int: ...

    @property
    def mzxid(self) -> int: ...


#: A kazoo ``TransactionRequest`` (``client.transaction()``): ops queued, then one ``commit()``.
ZkTransaction: TypeAlias = Any
#: What ``commit()`` gives for each committed op: the path ``create`` made, the new stat of a
#: ``set_data``, True for ``check`` and ``delete``.
ZkOpResult: TypeAlias = str | ZkStat | bool
#: A kazoo ``WatchedEvent`` handed to a watch callback.
ZkEvent: TypeAlias = Any

log = logging.getLogger("groupcoord.cluster")

#: The longest pause between two attempts to reach ZooKeeper while the connection is down, before
#: kazoo's ±40 % jitter (so under a second). ZooKeeper's own client, which Kafka uses, pauses a
#: random 0–1 s before each reconnect (``ClientCnxn.SendThread.startConnect``,
#: https://github.com/apache/zookeeper/blob/release-3.8.0/zookeeper-server/src/main/java/org/apache/zookeeper/ClientCnxn.java).
#: kazoo's default doubles its pause without bound (0.1, 0.2, … 3.2, 6.4 s): after an outage of a
#: few seconds its next attempt could come after the session had timed out on a ZooKeeper that was
#: back (a restarted server gives each session a full timeout from its start-up) — the node lost a
#: session that could have survived, and came back as a bounced broker (KIP-380), its
#: leaderships failed over.
RECONNECT_MAX_DELAY_S = 0.7


class ClusterError(Exception):
    """A cluster-mode failure the operator must fix; the message says what and where."""


class ZooKeeper:
    """One session to the ensemble named by ``zookeeper.connect``."""

    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        self.connect = connect
        self.hosts, self.chroot = parse_zookeeper_connect(connect)
        self.connection_timeout_ms = connection_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        # kazoo asks for ``timeout`` seconds of session; the server clamps it to its bounds
        # (2..20 × tickTime by default).
        self.client = KazooClient(hosts=self.hosts, timeout=session_timeout_ms / 1000.0,
                                  connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2,
                                                              max_delay=RECONNECT_MAX_DELAY_S),
                                  logger=logging.getLogger("groupcoord.cluster.kazoo"))
        self._registration: BrokerRegistration | None = None
        #: Every session id this node has registered in: an ephemeral left by one of them is ours.
        self._our_sessions: set[int] = set()
        self._lost = False
        self._closing = False
        self._lock = threading.Lock()
        self.client.add_listener(self._on_state)

    # --- session ------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (blocking), create the chroot and Kafka's persistent parents."""
        try:
            self.client.start(timeout=self.connection_timeout_ms / 1000.0)
        except KazooTimeoutError:
            self.client.close()
            raise ClusterError(f"cannot reach ZooKeeper at {self.connect} within "
                               f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms)") from None
        if self.chroot:
            # Kafka creates a missing chroot; kazoo needs it to exist before it prefixes paths.
            self.client.ensure_path(self.chroot)
            self.client.chroot = self.chroot
        for path in PERSISTENT_PATHS:
            self.client.ensure_path(path)
        log.info("zookeeper session started", extra={"zookeeper": self.connect,
                                                      "session": f"0x{self.session_id:x}"})

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def session_id(self) -> int:
        return int(self.client.client_id[0]) if self.client.client_id else 0

    def close(self) -> None:
        """End the session: ZooKeeper deletes this node's ephemerals at once (a clean departure,
        where a crash leaves them until the session times out)."""
        self._closing = True
        try:
            self.client.stop()
        finally:
            self.client.close()

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's thread and must not block: the work is spawned on kazoo's handler.
        if self._closing:
            return
        if state == KazooState.LOST:
            self._lost = True
            log.warning("zookeeper session expired; this node's registration is gone until the new session",
                        extra={"zookeeper": self.connect})
        elif state == KazooState.SUSPENDED:
            log.warning("zookeeper connection suspended", extra={"zookeeper": self.connect})
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            if self._registration is not None:
                self.client.handler.spawn(self._register_again)

    # --- cluster id ---------------------------------------------------------------------------

    def cluster_id(self, proposal: str) -> str:
        """The id in ``/cluster/id``, created with ``proposal`` by the first node to ask.

        Kafka proposes a fresh random id; we propose the data directory's own id when it has
        one, so a node that already served alone keeps its id in a new cluster. The caller still
        refuses a data directory whose id differs (Kafka's InconsistentClusterIdException)."""
        try:
            self.client.create(CLUSTER_ID, encode_cluster_id(proposal), makepath=True)
            log.info("cluster id created", extra={"cluster_id": proposal})
            return proposal
        except NodeExistsError:
            data, _ = self.client.get(CLUSTER_ID)
            try:
                return decode_cluster_id(data)
            except ZnodeError as exc:
                raise ClusterError(str(exc)) from None

    # --- broker registration ------------------------------------------------------------------

    def register(self, registration: BrokerRegistration) -> None:
        """Create ``/brokers/ids/<id>`` in this session (blocking); ClusterError if another live
        node holds the id."""
        with self._lock:
            self._registration = registration
            self._create_registration(registration)

    def _register_again(self) -> None:
        registration = self._registration
        if registration is None:
            return
        try:
            with self._lock:
                self._create_registration(registration)
        except (ClusterError, KazooException) as exc:
            log.error("re-registration after session expiry failed", extra={"error": str(exc)})

    def _create_registration(self, registration: BrokerRegistration) -> None:
        path = broker_path(registration.broker_id)
        registration = dataclasses.replace(registration, timestamp_ms=int(time.time() * 1000))
        data = encode_broker(registration)
        for _ in range(3):
            session = self.session_id
            try:
                self.client.create(path, data, ephemeral=True, makepath=True)
            except NodeExistsError:
                try:
                    _, stat = self.client.get(path)
                except NoNodeError:
                    continue  # it just went (its session ended): try again
                owner = int(stat.ephemeralOwner)
                if owner == session:
                    self.client.set(path, data)
                elif owner in self._our_sessions:
                    # Left by one of our expired sessions and not yet removed by the server.
                    try:
                        self.client.delete(path, version=stat.version)
                    except NoNodeError:
                        pass
                    continue
                elif self._gone_within_session_timeout(path, owner):
                    # A node restarted after a crash finds its previous process's registration
                    # until that session times out. Kafka refuses to start then; waiting one
                    # session timeout tells a dead owner from a live one.
                    continue
                else:
                    raise ClusterError(
                        f"broker.id {registration.broker_id} is already registered in ZooKeeper at "
                        f"{self.connect} ({path}, session 0x{owner:x}): another live node uses this id; "
                        "give every node its own broker.id") from None
            self._our_sessions.add(session)
            log.info("registered in zookeeper", extra={"path": path, "endpoint": registration.endpoint,
                                                       "session": f"0x{session:x}"})
            return
        raise ClusterError(f"could not register {path} in ZooKeeper at {self.connect}: it kept changing")

    def _gone_within_session_timeout(self, path: str, owner: int) -> bool:
        # The previous process of this node asked for the same session timeout as we do; two
        # seconds more cover the server's expiry tick (tickTime 2000 by default).
        wait_s = self.session_timeout_ms / 1000.0 + 2.0
        log.warning("broker id registered by another session; waiting for it to expire",
                    extra={"path": path, "owner": f"0x{owner:x}", "wait_s": round(wait_s, 1)})
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            stat = self.client.exists(path)
            if stat is None or int(stat.ephemeralOwner) != owner:
                return True
            time.sleep(0.2)
        return False
