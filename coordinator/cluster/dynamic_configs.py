"""Config changes after creation, written where Kafka's ZooKeeper mode keeps them: topic overrides
in ``/config/topics/<t>``, dynamic broker configs in ``/config/brokers/<id>`` (or ``<default>``),
KIP-848 groups' overrides in ``/config/groups/<group>`` (our own path, znodes.py), each followed by a ``/config/changes/config_change_<seq>`` notification as Kafka's
``AdminZkClient.changeConfigs`` writes it
(https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/zk/AdminZkClient.scala). Our nodes
watch the config znodes themselves (zk_watcher), so a change reaches every node's view directly.

Blocking: call from a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from types import MappingProxyType

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from .view import ClusterView
from .znodes import (
    CONFIG_CHANGES,
    CONFIG_GROUPS,
    broker_config_path,
    decode_topic_config,
    encode_config_change,
    encode_topic_config,
    group_config_path,
    group_znode_name,
    topic_config_path,
)
from .zookeeper import ZooKeeper

__all__ = ["ZkConfigs", "ConfigChanged"]

log = logging.getLogger("groupcoord.cluster.configs")
_NO_CONFIGS: Mapping[str, str] = MappingProxyType({})


class ConfigChanged(Exception):
    """The config znode moved between our read and our write, several times in a row."""


class ZkConfigs:
    def __init__(self, zk: ZooKeeper, view: ClusterView | None = None) -> None:
        self.zk = zk
        self.view = view

    # --- dynamic broker configs, as the admin APIs see them (event loop) ---------------------------

    def broker(self, entity: str) -> dict[str, str]:
        """What this node's view holds for ``entity`` (its own id or ``<default>``)."""
        return dict(self.view.broker_configs.get(entity, {})) if self.view is not None else {}

    async def alter_broker(self, entity: str, configs: dict[str, str]) -> None:
        await asyncio.to_thread(self.set_broker, entity, configs)
        # Answer once the change is in force here, so a describe right after shows it.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while self.view is not None and self.broker(entity) != configs and loop.time() < deadline:
            await asyncio.sleep(0.01)

    # --- KIP-848 groups' overrides (coordinator/admin/group_configs.py; event loop) ----------------

    def group(self, group_id: str) -> Mapping[str, str]:
        """Read on every consumer heartbeat: the view's own mapping, not a copy (the view replaces
        it on a change, never edits it)."""
        return self.view.group_configs.get(group_id, _NO_CONFIGS) if self.view is not None else _NO_CONFIGS

    async def alter_group(self, group_id: str, configs: dict[str, str]) -> None:
        await asyncio.to_thread(self.set_group, group_id, configs)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while self.view is not None and self.group(group_id) != configs and loop.time() < deadline:
            await asyncio.sleep(0.01)

    # --- writes (blocking) ------------------------------------------------------------------------

    def read(self, path: str) -> dict[str, str]:
        try:
            data, _ = self.zk.client.get(path)
        except NoNodeError:
            return {}
        return decode_topic_config(path, data)

    def set_topic(self, name: str, configs: dict[str, str]) -> None:
        self._write(topic_config_path(name), f"topics/{name}", configs, create=False)

    def set_broker(self, entity: str, configs: dict[str, str]) -> None:
        self._write(broker_config_path(entity), f"brokers/{entity}", configs, create=True)

    def set_group(self, group_id: str, configs: dict[str, str]) -> None:
        self.zk.client.ensure_path(CONFIG_GROUPS)  # not one of Kafka's paths: no node may have made it yet
        self._write(group_config_path(group_id), f"groups/{group_znode_name(group_id)}", configs, create=True)

    def _write(self, path: str, entity_path: str, configs: dict[str, str], *, create: bool) -> None:
        client = self.zk.client
        for _ in range(5):
            try:
                _, stat = client.get(path)
            except NoNodeError:
                if not create:
                    raise
                stat = None
            tx = client.transaction()
            if stat is None:
                tx.create(path, encode_topic_config(configs))
            else:
                tx.set_data(path, encode_topic_config(configs), version=stat.version)
            tx.create(CONFIG_CHANGES, encode_config_change(entity_path), sequence=True)
            results = tx.commit()
            errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
            if any(isinstance(r, (BadVersionError, NodeExistsError)) for r in errors):
                continue  # changed under us: read again
            if errors:
                raise errors[0]
            log.info("config changed", extra={"entity": entity_path, "config": configs})
            return
        raise ConfigChanged(f"{path} kept changing")
