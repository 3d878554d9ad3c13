"""DescribeConfigs (api key 32, v1–v4): the values in force for topics and for this broker.

Admin clients ask for it when describing topics and brokers. A topic key reports its override, or
the broker setting it derives from, or Kafka's default, each with the matching config source.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..config import SETTINGS, Config
from ..context import NodeInfo, RequestContext
from ..topics.configs import TOPIC_CONFIGS, TYPE_BOOLEAN, TYPE_INT, TYPE_LONG, TYPE_STRING, effective_topic_configs
from ..topics.service import TopicService

__all__ = ["ConfigApis"]

# ConfigResource types (org.apache.kafka.common.config.ConfigResource.Type).
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# DescribeConfigsResponse config sources.
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _broker_type(setting: Any) -> int:
    """Kafka's ConfigDef type: settings bounded by Integer.MAX_VALUE are INT, wider ones LONG."""
    if isinstance(setting.default, bool):
        return TYPE_BOOLEAN
    if isinstance(setting.default, int):
        return TYPE_INT if getattr(setting.parse, "upper_bound", 2**63 - 1) <= 2**31 - 1 else TYPE_LONG
    return TYPE_STRING


class ConfigApis:
    def __init__(self, node: NodeInfo, config: Config, topics: TopicService) -> None:
        self.node = node
        self.config = config
        self.topics = topics

    def describe_configs(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        synonyms = bool(request.include_synonyms)
        docs = version >= 3 and bool(request.include_documentation)
        results = []
        for resource in request.resources:
            keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
            if resource.resource_type == RESOURCE_TOPIC:
                results.append(self._topic(resource.resource_name, keys, synonyms, docs))
            elif resource.resource_type == RESOURCE_BROKER:
                results.append(self._broker(resource.resource_name, keys, synonyms, docs))
            else:
                results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                      error_message=f"Unsupported resource type {resource.resource_type}",
                                      resource_type=resource.resource_type, resource_name=resource.resource_name,
                                      configs=[]))
        return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)

    def _topic(self, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> Any:
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

    def _broker(self, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> Any:
        if name not in ("", str(self.node.node_id)):
            return Result(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"Unexpected broker id, expected {self.node.node_id} but received {name}",
                          resource_type=RESOURCE_BROKER, resource_name=name, configs=[])
        entries = []
        for key, setting in sorted(SETTINGS.items()):
            if keys is not None and key not in keys:
                continue
            value = self.config[key]
            explicit = key in self.config.explicit
            source = SOURCE_STATIC_BROKER if explicit else SOURCE_DEFAULT
            chain = []
            if synonyms:
                if explicit:
                    chain.append(Synonym(name=key, value=_text(value), source=SOURCE_STATIC_BROKER))
                chain.append(Synonym(name=key, value=_text(setting.default), source=SOURCE_DEFAULT))
            entries.append(Entry(name=key, value=_text(value), read_only=True, config_source=source,
                                 is_default=not explicit, is_sensitive=False, synonyms=chain,
                                 config_type=_broker_type(setting), documentation=setting.doc if docs else None))
        return Result(error_code=0, error_message=None, resource_type=RESOURCE_BROKER, resource_name=name, configs=entries)

    def handlers(self) -> dict[ApiKey, Any]:
        return {ApiKey.DESCRIBE_CONFIGS: self.describe_configs}
