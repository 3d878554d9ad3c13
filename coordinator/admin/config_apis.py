"""DescribeConfigs (api key 32, v1–v4): the values in force for topics and for this broker;
IncrementalAlterConfigs (api key 44, v0–v1) and AlterConfigs (api key 33, v0–v2): changing them.

Admin clients ask for it when describing topics and brokers. A topic key reports its override, or
the broker setting it derives from, or Kafka's default, each with the matching config source.

IncrementalAlterConfigs (KIP-339) sets, deletes, appends to or subtracts from topic overrides (in
ZooKeeper in cluster mode, every node applies them live) and the broker configs Kafka lets change
at runtime that mean something here: the replication throttles ``kafka-reassign-partitions
--throttle`` sets (KIP-73). Other broker keys are static: INVALID_REQUEST, as Kafka answers for a
config it cannot update dynamically. On a single node the throttles are kept in memory and have
no effect (nothing is replicated).

KIP-848 groups' overrides are the GROUP resource (type 32; coordinator/admin/group_configs.py):
DescribeConfigs answers a group's effective values (its override, DYNAMIC_GROUP_CONFIG, or the
broker setting), IncrementalAlterConfigs sets and deletes them (APPEND and SUBTRACT are refused
with INVALID_CONFIG: none of them is a list).

AlterConfigs is the older, non-incremental form that librdkafka's ``alter_configs`` and older tools
still send: the configs given for a resource replace all of its dynamic configs (a key left out is
deleted), so a client reads, edits and writes back the whole set. It goes through the same checks
as IncrementalAlterConfigs; only the way the new set is computed differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from kafka.protocol.admin import AlterConfigsResponse, DescribeConfigsResponse, IncrementalAlterConfigsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..config import SETTINGS, Config, Setting
from ..context import Handler, NodeInfo, RequestContext
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed, cluster_allowed
from ..topics.configs import (
    TOPIC_CONFIGS,
    TYPE_BOOLEAN,
    TYPE_INT,
    TYPE_LIST,
    TYPE_LONG,
    TYPE_STRING,
    effective_topic_configs,
    topic_config_error,
)
from ..topics.registry import TopicError
from ..topics.service import TopicService
from .group_configs import GROUP_CONFIGS, FileGroupConfigs, GroupConfigError, GroupConfigs

__all__ = ["ConfigApis", "DynamicBrokerConfigs", "MemoryBrokerConfigs", "DYNAMIC_BROKER_KEYS"]

#: Broker configs IncrementalAlterConfigs may change (``DynamicConfig.Broker`` in Kafka, narrowed to
#: what exists here). The log-dirs throttle is accepted (kafka-reassign-partitions --verify deletes it
#: with the others) and has no effect: a node has one log directory.
DYNAMIC_BROKER_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                 "replica.alter.log.dirs.io.max.bytes.per.second"})
DEFAULT_ENTITY = "<default>"

# IncrementalAlterConfigs operations (AlterConfigOp.OpType).
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


class DynamicBrokerConfigs(Protocol):
    """Where dynamic broker configs live: ZooKeeper in cluster mode, memory on a single node."""

    def broker(self, entity: str) -> dict[str, str]: ...

    async def alter_broker(self, entity: str, configs: dict[str, str]) -> None: ...


class MemoryBrokerConfigs:
    def __init__(self) -> None:
        self._configs: dict[str, dict[str, str]] = {}

    def broker(self, entity: str) -> dict[str, str]:
        return dict(self._configs.get(entity, {}))

    async def alter_broker(self, entity: str, configs: dict[str, str]) -> None:
        self._configs[entity] = dict(configs)


class _Invalid(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

# ConfigResource types (org.apache.kafka.common.config.ConfigResource.Type).
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
#: The types whose configs are the cluster's to authorize (Kafka's ``ConfigHelper`` and
#: ``handleIncrementalAlterConfigsRequest``), served here or not: the check comes first, so an
#: unsupported one is refused as Kafka refuses it when the principal may not touch the cluster.
_CLUSTER_RESOURCES = frozenset({RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS})

# DescribeConfigsResponse config sources.
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_DYNAMIC_GROUP = 8

#: DescribeConfigs' message for a denied resource (Kafka's ``Errors`` default messages).
_DENIED_MESSAGES: dict[int, str] = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
                    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed."}

AlterResult = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _broker_type(setting: Setting) -> int:
    """Kafka's ConfigDef type: settings bounded by Integer.MAX_VALUE are INT, wider ones LONG."""
    if isinstance(setting.default, bool):
        return TYPE_BOOLEAN
    if isinstance(setting.default, int):
        return TYPE_INT if getattr(setting.parse, "upper_bound", 2**63 - 1) <= 2**31 - 1 else TYPE_LONG
    return TYPE_STRING


class ConfigApis:
    def __init__(self, node: NodeInfo, config: Config, topics: TopicService,
                 dynamic: DynamicBrokerConfigs | None = None, groups: GroupConfigs | None = None, *,
                 authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.node = node
        #: DESCRIBE_CONFIGS / ALTER_CONFIGS on the resource (a broker's: on the cluster).
        self.authorizer = authorizer
        self.config = config
        self.topics = topics
        self.dynamic: DynamicBrokerConfigs = dynamic if dynamic is not None else MemoryBrokerConfigs()
        self.groups = groups if groups is not None else GroupConfigs(config, FileGroupConfigs(config.data_dir))

    def describe_configs(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version
        synonyms = bool(request.include_synonyms)
        docs = version >= 3 and bool(request.include_documentation)
        results = []
        for resource in request.resources:
            keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
            denied = self._denial(ctx, resource.resource_type, resource.resource_name, AclOperation.DESCRIBE_CONFIGS)
            if denied:
                results.append(Result(error_code=denied, error_message=_DENIED_MESSAGES[denied],
                                      resource_type=resource.resource_type, resource_name=resource.resource_name,
                                      configs=[]))
            elif resource.resource_type == RESOURCE_TOPIC:
                results.append(self._topic(resource.resource_name, keys, synonyms, docs))
            elif resource.resource_type == RESOURCE_BROKER:
                results.append(self._broker(resource.resource_name, keys, synonyms, docs))
            elif resource.resource_type == RESOURCE_GROUP:
                results.append(self._group(resource.resource_name, keys, synonyms, docs))
            else:
                results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                      error_message=f"Unsupported resource type {resource.resource_type}",
                                      resource_type=resource.resource_type, resource_name=resource.resource_name,
                                      configs=[]))
        return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)

    def _topic(self, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> KafkaStruct:
        info = self.topics.registry.get(name)
        if info is None:
            return Result(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          error_message=f"Topic {name} does not exist", resource_type=RESOURCE_TOPIC,
                          resource_name=name, configs=[])
        entries = []
        for key, (value, origin) in sorted(effective_topic_configs(info.configs, self.config).items()):
            if keys is not None and key not in keys:
                continue
            definition = TOPIC_CONFIGS[key]
            broker_key = definition.broker_key
            broker_explicit = broker_key is not None and broker_key in self.config.explicit
            source = {"topic": SOURCE_DYNAMIC_TOPIC, "broker": SOURCE_STATIC_BROKER if broker_explicit else SOURCE_DEFAULT,
                      "default": SOURCE_DEFAULT}[origin]
            chain = []
            if synonyms:
                if key in info.configs:
                    chain.append(Synonym(name=key, value=info.configs[key], source=SOURCE_DYNAMIC_TOPIC))
                if broker_key is not None:
                    if broker_explicit:
                        chain.append(Synonym(name=broker_key, value=_text(self.config[broker_key]),
                                             source=SOURCE_STATIC_BROKER))
                    chain.append(Synonym(name=broker_key, value=_text(SETTINGS[broker_key].default), source=SOURCE_DEFAULT))
            entries.append(Entry(name=key, value=value, read_only=False, config_source=source,
                                 is_default=source == SOURCE_DEFAULT, is_sensitive=False, synonyms=chain,
                                 config_type=definition.type, documentation=definition.doc if docs else None))
        return Result(error_code=0, error_message=None, resource_type=RESOURCE_TOPIC, resource_name=name, configs=entries)

    def _broker(self, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> KafkaStruct:
        if name not in ("", str(self.node.node_id)):
            return Result(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"Unexpected broker id, expected {self.node.node_id} but received {name}",
                          resource_type=RESOURCE_BROKER, resource_name=name, configs=[])
        entries = []
        own = self.dynamic.broker(str(self.node.node_id)) if name else {}
        default = self.dynamic.broker(DEFAULT_ENTITY)
        for key, setting in sorted(SETTINGS.items()):
            if keys is not None and key not in keys:
                continue
            value: str | None = _text(self.config[key])
            explicit = key in self.config.explicit
            source = SOURCE_STATIC_BROKER if explicit else SOURCE_DEFAULT
            if key in own:
                value, source = own[key], SOURCE_DYNAMIC_BROKER
            elif key in default:
                value, source = default[key], SOURCE_DYNAMIC_DEFAULT_BROKER
            chain = []
            if synonyms:
                if key in own:
                    chain.append(Synonym(name=key, value=own[key], source=SOURCE_DYNAMIC_BROKER))
                if key in default:
                    chain.append(Synonym(name=key, value=default[key], source=SOURCE_DYNAMIC_DEFAULT_BROKER))
                if explicit:
                    chain.append(Synonym(name=key, value=_text(self.config[key]), source=SOURCE_STATIC_BROKER))
                chain.append(Synonym(name=key, value=_text(setting.default), source=SOURCE_DEFAULT))
            if setting.sensitive:  # Kafka shows a PASSWORD setting as null, synonyms included
                value, chain = None, [Synonym(name=c.name, value=None, source=c.source) for c in chain]
            entries.append(Entry(name=key, value=value, read_only=key not in DYNAMIC_BROKER_KEYS, config_source=source,
                                 is_default=source == SOURCE_DEFAULT, is_sensitive=setting.sensitive, synonyms=chain,
                                 config_type=_broker_type(setting), documentation=setting.doc if docs else None))
        return Result(error_code=0, error_message=None, resource_type=RESOURCE_BROKER, resource_name=name, configs=entries)

    def _group(self, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> KafkaStruct:
        if not name:
            return Result(error_code=ErrorCode.INVALID_REQUEST, error_message="Group name must not be empty",
                          resource_type=RESOURCE_GROUP, resource_name=name, configs=[])
        overrides = self.groups.store.group(name)
        entries = []
        for key, definition in sorted(GROUP_CONFIGS.items()):
            if keys is not None and key not in keys:
                continue
            broker_key = definition.broker_key
            broker_explicit = broker_key in self.config.explicit
            if key in overrides:
                value, source = overrides[key], SOURCE_DYNAMIC_GROUP
            else:
                value = _text(self.config[broker_key])
                source = SOURCE_STATIC_BROKER if broker_explicit else SOURCE_DEFAULT
            chain = []
            if synonyms:
                if key in overrides:
                    chain.append(Synonym(name=key, value=overrides[key], source=SOURCE_DYNAMIC_GROUP))
                if broker_explicit:
                    chain.append(Synonym(name=broker_key, value=_text(self.config[broker_key]),
                                         source=SOURCE_STATIC_BROKER))
                chain.append(Synonym(name=broker_key, value=_text(SETTINGS[broker_key].default), source=SOURCE_DEFAULT))
            entries.append(Entry(name=key, value=value, read_only=False, config_source=source,
                                 is_default=source == SOURCE_DEFAULT, is_sensitive=False, synonyms=chain,
                                 config_type=TYPE_INT, documentation=definition.doc if docs else None))
        return Result(error_code=0, error_message=None, resource_type=RESOURCE_GROUP, resource_name=name, configs=entries)

    # --- IncrementalAlterConfigs (KIP-339) -------------------------------------------------------

    async def incremental_alter_configs(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        validate_only = bool(request.validate_only)
        responses = []
        for resource in request.resources:
            ops = resource.configs

            def change(current: dict[str, str], is_list: Callable[[str], bool]) -> dict[str, str]:
                return self._apply_ops(current, ops, is_list)  # noqa: B023 (called before the next turn)

            code = self._denial(ctx, resource.resource_type, resource.resource_name, AclOperation.ALTER_CONFIGS)
            message = None
            if not code:
                code, message = await self._alter(resource.resource_type, resource.resource_name,
                                                  [op.name for op in resource.configs], change, validate_only)
            responses.append(AlterResult(error_code=code, error_message=message, resource_type=resource.resource_type,
                                         resource_name=resource.resource_name))
        return IncrementalAlterConfigsResponse(version=ctx.api_version, throttle_time_ms=0, responses=responses)

    # --- AlterConfigs (the non-incremental form) --------------------------------------------------

    async def alter_configs(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        """Each resource's dynamic configs become exactly the given set (module docstring).

        A resource named twice in one request is refused both times with INVALID_REQUEST
        "Duplicate resource.", as Kafka's controller refuses it (``ControllerApis`` legacy
        AlterConfigs): which of the two sets to apply would be a guess. A key given twice keeps
        its last value, and a null value leaves the key out (deleted), as Kafka reads the
        request into a map.
        """
        validate_only = bool(request.validate_only)
        seen: dict[tuple[int, str], int] = {}
        for resource in request.resources:
            key = (resource.resource_type, resource.resource_name)
            seen[key] = seen.get(key, 0) + 1
        responses = []
        code: int
        message: str | None
        for resource in request.resources:
            denied = self._denial(ctx, resource.resource_type, resource.resource_name, AclOperation.ALTER_CONFIGS)
            if denied:
                code, message = denied, None
            elif seen[(resource.resource_type, resource.resource_name)] > 1:
                code, message = ErrorCode.INVALID_REQUEST, "Duplicate resource."
            else:
                wanted: dict[str, str | None] = {c.name: c.value for c in resource.configs}
                replacement = {k: v for k, v in wanted.items() if v is not None}

                def change(current: dict[str, str], is_list: Callable[[str], bool]) -> dict[str, str]:
                    return dict(replacement)  # noqa: B023 (called before the next turn)

                code, message = await self._alter(resource.resource_type, resource.resource_name,
                                                  list(wanted), change, validate_only)
            responses.append(AlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=code, error_message=message, resource_type=resource.resource_type,
                resource_name=resource.resource_name))
        return AlterConfigsResponse(version=ctx.api_version, throttle_time_ms=0, responses=responses)

    # --- shared by both forms ---------------------------------------------------------------------

    def _denial(self, ctx: RequestContext, resource_type: int, name: str, operation: AclOperation) -> int:
        """The error for a resource the principal may not describe or alter (Kafka's ConfigHelper
        and ``configsAuthorizationApiError``): a broker's configs are the cluster's; 0 if allowed."""
        if not self.authorizer.enabled:
            return ErrorCode.NONE
        if resource_type in _CLUSTER_RESOURCES:
            return ErrorCode.NONE if cluster_allowed(self.authorizer, ctx, operation) \
                else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if resource_type == RESOURCE_TOPIC:
            return ErrorCode.NONE if allowed(self.authorizer, ctx, operation, ResourceType.TOPIC, name) \
                else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if resource_type == RESOURCE_GROUP:
            return ErrorCode.NONE if allowed(self.authorizer, ctx, operation, ResourceType.GROUP, name) \
                else ErrorCode.GROUP_AUTHORIZATION_FAILED
        return ErrorCode.NONE  # an unsupported type is refused by its own check

    async def _alter(self, resource_type: int, name: str, keys: list[str],
                     change: Callable[[dict[str, str], Callable[[str], bool]], dict[str, str]],
                     validate_only: bool) -> tuple[int, str | None]:
        """Validate and apply one resource's change; (error code, message). ``change`` maps the
        resource's current dynamic configs to the new ones; ``keys`` are the keys the request names."""
        try:
            if resource_type == RESOURCE_TOPIC:
                await self._alter_topic(name, keys, change, validate_only)
            elif resource_type == RESOURCE_BROKER:
                await self._alter_broker(name, keys, change, validate_only)
            elif resource_type == RESOURCE_GROUP:
                await self._alter_group(name, keys, change, validate_only)
            else:
                raise _Invalid(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")
        except (_Invalid, TopicError) as exc:
            return exc.error_code, exc.message
        return ErrorCode.NONE, None

    @staticmethod
    def _apply_ops(current: dict[str, str], ops: Iterable[KafkaStruct], is_list: Callable[[str], bool]) -> dict[str, str]:
        """``current`` after the operations (KIP-339: APPEND/SUBTRACT only on list configs)."""
        new = dict(current)
        seen = set()
        for op in ops:
            name, value, kind = op.name, op.value, op.config_operation
            if name in seen:
                raise _Invalid(ErrorCode.INVALID_CONFIG, f"Error due to duplicate config keys: {name}")
            seen.add(name)
            if kind == OP_SET:
                if value is None:
                    raise _Invalid(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
                new[name] = value
            elif kind == OP_DELETE:
                new.pop(name, None)
            elif kind in (OP_APPEND, OP_SUBTRACT):
                if not is_list(name):
                    raise _Invalid(ErrorCode.INVALID_CONFIG,
                                   f"Config value append is not allowed for config key: {name}" if kind == OP_APPEND
                                   else f"Config value subtract is not allowed for config key: {name}")
                items = [v for v in new.get(name, "").split(",") if v.strip()]
                given = [v for v in (value or "").split(",") if v.strip()]
                if kind == OP_APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                new[name] = ",".join(items)
            else:
                raise _Invalid(ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind} for {name}")
        return new

    async def _alter_topic(self, name: str, keys: list[str],
                           change: Callable[[dict[str, str], Callable[[str], bool]], dict[str, str]],
                           validate_only: bool) -> None:
        info = self.topics.registry.get(name)
        if info is None:
            raise _Invalid(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        new = change(info.configs, lambda key: key in TOPIC_CONFIGS and TOPIC_CONFIGS[key].type == TYPE_LIST)
        for key, value in new.items():
            if info.configs.get(key) == value:
                continue
            problem = topic_config_error(key, value)
            if problem is not None:
                raise _Invalid(ErrorCode.INVALID_CONFIG, problem)
        for key in keys:  # deleting an unknown key is also an error, as Kafka's validation says
            if key not in TOPIC_CONFIGS:
                raise _Invalid(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
        if not validate_only and new != info.configs:
            await self.topics.alter_configs(name, new)

    async def _alter_broker(self, name: str, keys: list[str],
                            change: Callable[[dict[str, str], Callable[[str], bool]], dict[str, str]],
                            validate_only: bool) -> None:
        if name not in ("", str(self.node.node_id)):
            raise _Invalid(ErrorCode.INVALID_REQUEST,
                           f"Unexpected broker id, expected {self.node.node_id} or empty string, but received {name}")
        entity = str(self.node.node_id) if name else DEFAULT_ENTITY
        static = sorted(key for key in keys if key not in DYNAMIC_BROKER_KEYS)
        if static:
            raise _Invalid(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {static}")
        current = self.dynamic.broker(entity)
        new = change(current, lambda key: False)
        for key, value in new.items():
            if current.get(key) != value and not (value.isdigit() and int(value) >= 1):
                raise _Invalid(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: "
                                                         "bytes per second >= 1 expected")
        if not validate_only and new != current:
            await self.dynamic.alter_broker(entity, new)

    async def _alter_group(self, name: str, keys: list[str],
                           change: Callable[[dict[str, str], Callable[[str], bool]], dict[str, str]],
                           validate_only: bool) -> None:
        if not name:
            raise _Invalid(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        for key in keys:  # deleting an unknown key is also an error
            if key not in GROUP_CONFIGS:
                raise _Invalid(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {key}")
        current = dict(self.groups.store.group(name))
        new = change(current, lambda key: False)  # no group config is a list: APPEND/SUBTRACT refused
        try:
            self.groups.validate(new)
        except GroupConfigError as exc:
            raise _Invalid(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if not validate_only and new != current:
            await self.groups.store.alter_group(name, new)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
                ApiKey.ALTER_CONFIGS: self.alter_configs,
                ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs}
