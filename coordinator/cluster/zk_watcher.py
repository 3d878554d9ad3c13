"""Keeps a :class:`~.view.ClusterView` in step with ZooKeeper through watches.

Watched: the children of ``/brokers/ids`` (live brokers) and of ``/brokers/topics``, each topic's
assignment and ``/config/topics/<t>``, each group's ``/config/groups/<group>``, each partition's ``state``, ``/controller``, and
groupcoord's own ``/admin/controlled_shutdown`` and ``/admin/warming_replicas``. kazoo's
``DataWatch`` / ``ChildrenWatch`` re-arm themselves after each event and after a new session, so
a node that lost its session sees the whole cluster again once it has a new one.

Callbacks run on kazoo's single watch thread, one after another; each posts its decoded value to
the event loop with ``call_soon_threadsafe``, which keeps ZooKeeper's order. A znode that does not
decode is logged with its path and skipped (znodes.py's decoders raise only ZnodeError, so a
corrupt or foreign znode is a log line, never a crash).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import TypeVarTuple

from kazoo.client import KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from .view import ClusterView
from .znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_GROUPS,
    CONTROLLED_SHUTDOWN,
    CONTROLLER,
    DEFAULT_ENTITY,
    DELETE_TOPICS,
    WARMING_REPLICAS,
    BrokerRegistration,
    ZnodeError,
    broker_config_path,
    broker_path,
    decode_broker,
    decode_controller,
    decode_partition_state,
    decode_topic,
    decode_topic_config,
    decode_warming_replica,
    group_of_znode,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from .zookeeper import ZkEvent, ZkStat, ZooKeeper

__all__ = ["ZkWatcher"]

log = logging.getLogger("groupcoord.cluster.watch")
#: The arguments of a call posted to the event loop.
_Args = TypeVarTuple("_Args")


class ZkWatcher:
    def __init__(self, zk: ZooKeeper, view: ClusterView, loop: asyncio.AbstractEventLoop,
                 broker_id: int | None = None) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.view = view
        self.loop = loop
        self._lock = threading.Lock()
        self._topics: set[str] = set()
        self._partitions: set[tuple[str, int]] = set()
        self._groups: set[str] = set()
        self._stopped = False

    def _post(self, fn: Callable[[*_Args], None], *args: *_Args) -> None:
        if self._stopped:
            return
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: shutting down
            pass

    def start(self) -> None:
        client = self.zk.client
        client.add_listener(self._on_session)
        ChildrenWatch(client, BROKER_IDS, self._on_brokers)
        DataWatch(client, CONTROLLER, self._on_controller)
        ChildrenWatch(client, BROKER_TOPICS, self._on_topics)
        client.ensure_path(CONTROLLED_SHUTDOWN)
        ChildrenWatch(client, CONTROLLED_SHUTDOWN, self._on_shutting_down)
        ChildrenWatch(client, DELETE_TOPICS, self._on_deleting)
        client.ensure_path(WARMING_REPLICAS)
        ChildrenWatch(client, WARMING_REPLICAS, self._on_warming)
        client.ensure_path(CONFIG_GROUPS)
        ChildrenWatch(client, CONFIG_GROUPS, self._on_groups)
        if self.broker_id is not None:
            for entity in (str(self.broker_id), DEFAULT_ENTITY):
                DataWatch(client, broker_config_path(entity),
                          lambda d, s, e=None, n=entity: self._on_broker_config(n, d, s))

    def stop(self) -> None:
        self._stopped = True

    def _on_session(self, state: str) -> None:
        self._post(self.view.set_connected, state == KazooState.CONNECTED)

    # --- brokers and controller -------------------------------------------------------------------

    def _on_brokers(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        brokers: dict[int, BrokerRegistration] = {}
        for child in children:
            path = f"{BROKER_IDS}/{child}"
            try:
                data, stat = self.zk.client.get(path)
                # The czxid is the broker epoch (KIP-380): a new one is a bounced broker.
                reg = dataclasses.replace(decode_broker(path, data), epoch=int(stat.czxid))
            except NoNodeError:
                continue
            except ZnodeError as exc:
                log.error("ignoring a broker registration", extra={"error": str(exc)})
                continue
            except KazooException as exc:
                log.warning("could not read a broker registration", extra={"path": path, "error": repr(exc)})
                continue
            brokers[reg.broker_id] = reg
        self._post(self.view.set_brokers, brokers)
        return True

    def _on_shutting_down(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        self._post(self.view.set_shutting_down, frozenset(int(c) for c in children if c.isdigit()))
        return True

    def _on_warming(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        marks = (decode_warming_replica(c) for c in children)
        self._post(self.view.set_warming, frozenset(m for m in marks if m is not None))
        return True

    def _on_deleting(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        self._post(self.view.set_deleting, frozenset(children))
        return True

    def _on_controller(self, data: bytes | None, stat: ZkStat | None, event: ZkEvent = None) -> bool:
        if self._stopped:
            return False
        controller = -1
        if stat is not None:
            try:
                controller = decode_controller(data)
            except ZnodeError as exc:
                log.error("unreadable controller znode", extra={"error": str(exc)})
        self._post(self.view.set_controller, controller)
        return True

    # --- topics and partitions -------------------------------------------------------------------

    def _on_topics(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        with self._lock:
            new = [name for name in children if name not in self._topics]
            self._topics.update(new)
        for name in new:
            DataWatch(self.zk.client, topic_config_path(name), lambda d, s, e=None, n=name: self._on_config(n, d, s))
            DataWatch(self.zk.client, topic_path(name), lambda d, s, e=None, n=name: self._on_topic(n, d, s))
        return True

    def _on_config(self, name: str, data: bytes | None, stat: ZkStat | None) -> bool:
        if self._stopped:
            return False
        if stat is None:
            return name in self._topics
        try:
            configs = decode_topic_config(topic_config_path(name), data)
        except ZnodeError as exc:
            log.error("ignoring a topic config", extra={"error": str(exc)})
            return True
        self._post(self.view.set_config, name, configs)
        return True

    def _on_groups(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        with self._lock:
            new = [name for name in children if name not in self._groups]
            self._groups.update(new)
        for name in new:
            path = f"{CONFIG_GROUPS}/{name}"
            DataWatch(self.zk.client, path, lambda d, s, e=None, n=name: self._on_group_config(n, d, s))
        return True

    def _on_group_config(self, name: str, data: bytes | None, stat: ZkStat | None) -> bool:
        if self._stopped:
            return False
        group_id = group_of_znode(name)
        if stat is None:  # deleted: forget it; a new child is watched afresh
            with self._lock:
                self._groups.discard(name)
            self._post(self.view.set_group_config, group_id, {})
            return False
        try:
            configs = decode_topic_config(f"{CONFIG_GROUPS}/{name}", data)  # the same {"config": …} form
        except ZnodeError as exc:
            log.error("ignoring a group config", extra={"error": str(exc)})
            return True
        self._post(self.view.set_group_config, group_id, configs)
        return True

    def _on_broker_config(self, entity: str, data: bytes | None, stat: ZkStat | None) -> bool:
        if self._stopped:
            return False
        configs: dict[str, str] = {}
        if stat is not None:
            try:
                configs = decode_topic_config(broker_config_path(entity), data)  # the same {"config": …} form
            except ZnodeError as exc:
                log.error("ignoring a broker config", extra={"error": str(exc)})
                return True
        self._post(self.view.set_broker_configs, entity, configs)
        return True

    def _on_topic(self, name: str, data: bytes | None, stat: ZkStat | None) -> bool:
        if self._stopped:
            return False
        if stat is None:
            with self._lock:
                self._topics.discard(name)
                self._partitions = {k for k in self._partitions if k[0] != name}
            self._post(self.view.set_topic, None, name)
            return False
        try:
            assignment = decode_topic(topic_path(name), data, stat.version)
        except ZnodeError as exc:
            log.error("ignoring a topic znode", extra={"error": str(exc)})
            return True
        self._post(self.view.set_topic, assignment, name)
        for p in sorted(assignment.partitions):
            with self._lock:
                if (name, p) in self._partitions:
                    continue
                self._partitions.add((name, p))
            DataWatch(self.zk.client, partition_state_path(name, p),
                      lambda d, s, e=None, n=name, q=p: self._on_state(n, q, d, s))
        return True

    def _on_state(self, topic: str, partition: int, data: bytes | None, stat: ZkStat | None) -> bool:
        if self._stopped:
            return False
        with self._lock:
            watched = (topic, partition) in self._partitions
        if not watched:
            return False
        if stat is None:
            return True  # not created yet: the controller will
        path = partition_state_path(topic, partition)
        try:
            state = decode_partition_state(path, data, stat.version, int(stat.mzxid))
        except ZnodeError as exc:
            log.error("ignoring a partition state", extra={"error": str(exc)})
            return True
        self._post(self.view.set_state, topic, partition, state)
        return True


def broker_registration(zk: ZooKeeper, broker_id: int) -> BrokerRegistration | None:
    try:
        data, _ = zk.client.get(broker_path(broker_id))
    except NoNodeError:
        return None
    return decode_broker(broker_path(broker_id), data)
