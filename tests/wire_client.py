"""A minimal blocking Kafka client for tests: frames kafka-python messages and reads responses.

It speaks through a real socket so server tests exercise the real network path, and lets a test
send exactly the version and fields it wants (stock clients choose those themselves).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.apis import ApiKey, request_class, response_class


def encode_request(api_key: int, version: int, correlation_id: int, request: Any, client_id: str | None = "test") -> bytes:
    cls = request_class(api_key)
    flexible = cls.flexible_version_q(version)
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    header = struct.pack(">hhi", api_key, version, correlation_id) + cid + (b"\x00" if flexible else b"")
    body = request.encode(version=version)
    return struct.pack(">i", len(header) + len(body)) + header + body


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
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


def _decode_exact(cls: Any, data: bytes, version: int) -> Any:
    from kafka.protocol.api_message import ApiMessage

    return ApiMessage.decode.__func__(cls, data, version=version)  # type: ignore[attr-defined]


class WireClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, request: Any) -> int:
        correlation_id = self._next_id
        self._next_id += 1
        self.sock.sendall(encode_request(api_key, version, correlation_id, request))
        return correlation_id

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("server closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, request: Any) -> Any:
        correlation_id = self.send(api_key, version, request)
        got, response = decode_response(api_key, version, self.read_frame())
        assert got == correlation_id, (got, correlation_id)
        return response
