"""What a handler may hand the server besides a response object: frames it encoded itself.

These are plain values (no I/O happens here): the hosted-topics handlers build them, and the
server (``coordinator/server/``) writes them, sending a :class:`FileRange` with ``sendfile``.
They live below both so that neither imports the other.

``unsupported_api_versions_response`` is here for the same reason: the connection answers an
ApiVersions request above our maximum itself (KIP-511), before any handler sees it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka.protocol.metadata import ApiVersionsResponse

from .apis import SUPPORTED_VERSIONS, ApiKey
from .errors import ErrorCode
from .fetch_response import FileRange, RecordsRef
from .kafka_types import KafkaResponse, KafkaStruct

__all__ = ["FileRange", "EncodedResponse", "CloseConnection", "api_version_entries",
           "unsupported_api_versions_response"]


class EncodedResponse:
    """A response frame encoded by its handler: ``bytes`` parts and ``RecordsRef`` parts whose
    ``source`` is ``bytes`` or a :class:`FileRange`."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[bytes | RecordsRef]) -> None:
        self.parts = parts


class CloseConnection:
    """No response: close the connection once what was answered before is sent. A Produce with
    acks=0 that failed on some partition answers so, as Kafka does (KafkaApis.handleProduceRequest:
    the producer learns of the error only by the close, and refreshes its metadata)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def api_version_entries(versions: Mapping[ApiKey, tuple[int, int]] = SUPPORTED_VERSIONS) -> list[KafkaStruct]:
    """Every API we serve with its version range (of the node's table), as ApiVersionsResponse lists them."""
    return [
        ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=low, max_version=high)
        for key, (low, high) in sorted(versions.items())
    ]


def unsupported_api_versions_response(versions: Mapping[ApiKey, tuple[int, int]] = SUPPORTED_VERSIONS
                                      ) -> KafkaResponse:
    """The v0-format answer to an ApiVersions request above our maximum version (KIP-511)."""
    return ApiVersionsResponse(version=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
                               api_keys=api_version_entries(versions))
