"""Per-group configs of KIP-848 consumer groups: Kafka's GROUP config resource (ConfigResource
type 32), described with DescribeConfigs and changed with IncrementalAlterConfigs.

A group may override three broker settings for itself (Kafka's ``GroupConfig``,
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupConfig.java):
``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms`` and
``consumer.assignment.interval.ms`` (KIP-1263). A new value must lie within the broker's
``group.consumer.min/max.*`` bounds and leave the session timeout above the heartbeat interval;
a stored value the bounds no longer admit (the broker's were changed since) is clamped to them
when the group coordinator reads it, as Kafka's ``GroupConfig.evaluate`` does.

Where they live: on a single node, ``group_configs.json`` in the data directory, rewritten
atomically (fsynced, like ``topics.json``) on each change; in a cluster, ZooKeeper's
``/config/groups/<group>``, watched by every node (cluster/dynamic_configs.py, zk_watcher.py).
The group coordinator reads a group's overrides through ``GroupConfigs.overrides``, already
parsed and clamped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from ..config import Config, ConfigError, IntSetting
from ..data_dir import atomic_write

__all__ = ["GROUP_CONFIGS", "GroupConfigKey", "GroupConfigStore", "FileGroupConfigs", "GroupConfigs",
           "GroupConfigError"]


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    name: str
    #: The broker setting that is its default (the synonym DescribeConfigs lists).
    broker_key: IntSetting
    #: Kafka's ConfigDef lower bound (``atLeast``).
    at_least: int
    #: The broker settings bounding it, or fixed bounds (KIP-1263's 0..15000 for the assignment
    #: interval, whose broker bounds groupcoord does not make settings of).
    min_key: IntSetting | None
    max_key: IntSetting | None
    fixed_bounds: tuple[int, int] = (0, 0)
    doc: str = ""


SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
ASSIGNMENT_INTERVAL = "consumer.assignment.interval.ms"

GROUP_CONFIGS: dict[str, GroupConfigKey] = {key.name: key for key in (
    GroupConfigKey(SESSION_TIMEOUT, "group.consumer.session.timeout.ms", 1,
                   "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
                   doc="The timeout to detect client failures when using the consumer group protocol."),
    GroupConfigKey(HEARTBEAT_INTERVAL, "group.consumer.heartbeat.interval.ms", 1,
                   "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
                   doc="The heartbeat interval given to the members of a consumer group."),
    GroupConfigKey(ASSIGNMENT_INTERVAL, "group.consumer.assignment.interval.ms", 0, None, None, (0, 15000),
                   doc="The least time between two target assignment computations of a consumer group."),
)}


class GroupConfigError(ValueError):
    """An override refused: the message is Kafka's (answered with INVALID_CONFIG)."""


#: No overrides (shared, read-only).
NO_CONFIGS: Mapping[str, str] = MappingProxyType({})
_NO_OVERRIDES: Mapping[str, int] = MappingProxyType({})


class GroupConfigStore(Protocol):
    """Where groups' overrides are kept: a file on one node, ZooKeeper in a cluster. ``group``
    answers without copying (it is read on every consumer heartbeat): the mapping is read-only
    and replaced, never changed in place, when the group's overrides change."""

    def group(self, group_id: str) -> Mapping[str, str]: ...

    async def alter_group(self, group_id: str, configs: dict[str, str]) -> None: ...


class FileGroupConfigs:
    """A single node's group overrides: ``group_configs.json`` in the data directory."""

    FILE = "group_configs.json"

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / self.FILE
        self._groups: dict[str, dict[str, str]] = {}
        if self._path.exists():
            try:
                doc = json.loads(self._path.read_text(encoding="utf-8"))
                self._groups = {str(g): {str(k): str(v) for k, v in c.items()} for g, c in doc["groups"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(f"{self._path}: unreadable group configs ({type(exc).__name__}: {exc})") from None

    def group(self, group_id: str) -> Mapping[str, str]:
        return self._groups.get(group_id, NO_CONFIGS)

    async def alter_group(self, group_id: str, configs: dict[str, str]) -> None:
        groups = dict(self._groups)
        if configs:
            groups[group_id] = dict(configs)
        else:
            groups.pop(group_id, None)
        doc = {"version": 1, "groups": {g: dict(sorted(c.items())) for g, c in sorted(groups.items())}}
        # Durable before the answer: fsynced, and the old file or the new one after a crash.
        atomic_write(self._path, json.dumps(doc, indent=1).encode())
        self._groups = groups


class GroupConfigs:
    """The rules of group overrides against this node's settings, over a store."""

    def __init__(self, config: Config, store: GroupConfigStore) -> None:
        self.config = config
        self.store = store
        #: ``overrides`` parsed once per stored mapping: group id -> (the mapping, its parse).
        self._parsed: dict[str, tuple[Mapping[str, str], Mapping[str, int]]] = {}

    def bounds(self, key: GroupConfigKey) -> tuple[int, int]:
        if key.min_key is None or key.max_key is None:
            return key.fixed_bounds
        return self.config[key.min_key], self.config[key.max_key]

    def default(self, name: str) -> int:
        return self.config[GROUP_CONFIGS[name].broker_key]

    def validate(self, configs: Mapping[str, str]) -> None:
        """Raise GroupConfigError unless ``configs`` (a group's whole new set of overrides) is
        acceptable: known names, integers within Kafka's and the broker's bounds, and the session
        timeout above the heartbeat interval (the broker's value standing in for one not set)."""
        parsed: dict[str, int] = {}
        for name, text in configs.items():
            key = GROUP_CONFIGS.get(name)
            if key is None:
                raise GroupConfigError(f"Unknown group config name: {name}")
            try:
                value = int(text.strip())
            except ValueError:
                raise GroupConfigError(f"Invalid value {text} for configuration {name}: "
                                       "Not a number of type INT") from None
            if not -(2**31) <= value < 2**31:
                raise GroupConfigError(f"Invalid value {text} for configuration {name}: Not a number of type INT")
            if value < key.at_least:
                raise GroupConfigError(f"Invalid value {value} for configuration {name}: "
                                       f"Value must be at least {key.at_least}")
            parsed[name] = value
        for name, value in parsed.items():
            low, high = self.bounds(GROUP_CONFIGS[name])
            if not low <= value <= high:
                raise GroupConfigError(f"{name} must be in the range {low} to {high} inclusive.")
        if SESSION_TIMEOUT in parsed or HEARTBEAT_INTERVAL in parsed:
            session = parsed.get(SESSION_TIMEOUT, self.default(SESSION_TIMEOUT))
            heartbeat = parsed.get(HEARTBEAT_INTERVAL, self.default(HEARTBEAT_INTERVAL))
            if session <= heartbeat:
                raise GroupConfigError(f"{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}")

    def overrides(self, group_id: str) -> Mapping[str, int]:
        """What the group coordinator reads (several times per consumer heartbeat): the group's
        overrides as integers, each clamped to the broker's current bounds; a stored value that
        no longer parses is left out. Parsed again only when the stored mapping was replaced."""
        stored = self.store.group(group_id)
        if not stored:
            return _NO_OVERRIDES
        cached = self._parsed.get(group_id)
        if cached is not None and cached[0] is stored:
            return cached[1]
        result: dict[str, int] = {}
        for name, text in stored.items():
            key = GROUP_CONFIGS.get(name)
            if key is None:
                continue
            try:
                value = int(text)
            except ValueError:
                continue
            low, high = self.bounds(key)
            result[name] = min(max(value, low), high)
        parsed = MappingProxyType(result)
        self._parsed[group_id] = (stored, parsed)
        return parsed
