"""Framing for the client side of the protocol: requests out, responses in (sans-IO).

Used by the replica fetcher (a node fetching from a leader is a client of it) and by tests that
speak the wire directly.
"""

from __future__ import annotations

import struct

from .apis import ApiKey, request_class, response_class
from .kafka_types import KafkaMessageClass, KafkaRequest, KafkaResponse

__all__ = ["encode_request", "decode_response"]


def encode_request(api_key: int, version: int, correlation_id: int, request: KafkaRequest, client_id: str | None = "test") -> bytes:
    """One whole request frame, size prefix included (request header v1, or v2 when flexible)."""
    cls = request_class(api_key)
    flexible = cls.flexible_version_q(version)
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    header = struct.pack(">hhi", api_key, version, correlation_id) + cid + (b"\x00" if flexible else b"")
    body: bytes = request.encode(version=version)
    return struct.pack(">i", len(header) + len(body)) + header + body


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, KafkaResponse]:
    """Decode a response frame (without its size prefix) into (correlation id, response)."""
    cls = response_class(api_key)
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    pos = 4
    if cls.flexible_version_q(version) and api_key != ApiKey.API_VERSIONS:
        pos += 1  # empty tagged fields of response header v1
    if api_key == ApiKey.API_VERSIONS:
        # As the Java client does: parse at the request version, and fall back to v0, the format
        # of the UNSUPPORTED_VERSION answer (KIP-511).
        try:
            return correlation_id, _decode_exact(cls, frame[pos:], version)
        except Exception:
            return correlation_id, _decode_exact(cls, frame[pos:], 0)
    return correlation_id, cls.decode(frame[pos:], version=version)


def _decode_exact(cls: KafkaMessageClass, data: bytes, version: int) -> KafkaResponse:
    from kafka.protocol.api_message import ApiMessage

    return ApiMessage.decode.__func__(cls, data, version=version)
