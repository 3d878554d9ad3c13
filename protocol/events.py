"""Events a :class:`~protocol.connection.ServerConnection` yields, and its ``NEED_DATA`` sentinel."""

from __future__ import annotations

from dataclasses import dataclass

from .kafka_types import KafkaRequest

__all__ = ["NEED_DATA", "RequestReceived", "UnsupportedApiVersions", "ProtocolViolation"]


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


#: Returned by ``next_event`` when the buffered bytes hold no complete frame yet.
NEED_DATA = _NeedData()


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A complete, decoded request. ``request`` is the kafka-python message for that version."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: KafkaRequest
    size: int


@dataclass(frozen=True, slots=True)
class UnsupportedApiVersions:
    """An ApiVersions request above our maximum version.

    Kafka answers it in the v0 format with UNSUPPORTED_VERSION and its supported ranges, so the
    client can retry with a version both sides speak (KIP-511). Its body is not decoded: we do not
    know that version's schema.
    """

    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """The peer sent something we cannot parse. The connection must be closed; it is unusable."""

    reason: str
