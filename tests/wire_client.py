"""A minimal blocking Kafka client for tests: frames kafka-python messages and reads responses.

It speaks through a real socket so server tests exercise the real network path, and lets a test
send exactly the version and fields it wants (stock clients choose those themselves).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.client import decode_response, encode_request

__all__ = ["WireClient", "encode_request", "decode_response"]


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
