"""Wire helpers: frames with correlation ids, response decoding, a small request/response client
for setup, and ApiVersions negotiation.

Requests are encoded once with the schema codec (kafka-python's generated message classes, as
``protocol/apis.py`` maps them) and sent as the same bytes over and over; only the correlation id
at a fixed offset is patched per send.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kafka.protocol.api_message import ApiMessage

from protocol.apis import ApiKey, request_class, response_class

SIZE = struct.Struct(">i")
CID = struct.Struct(">i")
#: Offset of the correlation id in a request frame: size (4), api key (2), api version (2).
CID_OFFSET = 8
CLIENT_ID = "groupcoord-bench"

#: What the loader can encode and means to send, per API: (lowest, highest). The highest versions
#: stop before topic ids (OffsetCommit/OffsetFetch v10 name topics by id only).
LOADER_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.JOIN_GROUP: (1, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.FIND_COORDINATOR: (1, 3),
    ApiKey.METADATA: (1, 12),
}


def encode(api: int, version: int, message: Any, correlation_id: int = 0, client_id: str | None = CLIENT_ID) -> bytes:
    """A complete request frame, size prefix included."""
    cls = request_class(api)
    flexible = cls.flexible_version_q(version)
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    header = struct.pack(">hhi", api, version, correlation_id) + cid + (b"\x00" if flexible else b"")
    body = message.encode(version=version)
    return SIZE.pack(len(header) + len(body)) + header + body


def with_cid(frame: bytes, correlation_id: int) -> bytes:
    """The same frame with another correlation id."""
    return frame[:CID_OFFSET] + CID.pack(correlation_id) + frame[CID_OFFSET + 4:]


def header_size(api: int, version: int) -> int:
    """Bytes of response header (correlation id, and the tag buffer of header v1) before the body."""
    if api == ApiKey.API_VERSIONS:
        return 4  # always response header v0 (KIP-511)
    return 5 if response_class(api).flexible_version_q(version) else 4


def decode(api: int, version: int, frame: bytes) -> tuple[int, Any]:
    """Decode a response frame (without its size prefix): (correlation id, response)."""
    cls = response_class(api)
    (cid,) = CID.unpack_from(frame, 0)
    pos = header_size(api, version)
    if api == ApiKey.API_VERSIONS:
        try:
            return cid, ApiMessage.decode.__func__(cls, frame[pos:], version=version)  # type: ignore[attr-defined]
        except Exception:
            return cid, ApiMessage.decode.__func__(cls, frame[pos:], version=0)  # type: ignore[attr-defined]
    return cid, cls.decode(frame[pos:], version=version)


class Conn:
    """One connection for request/response exchanges (setup, joins, probes). Not for load."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.cid = 0

    async def open(self, timeout: float = 10.0) -> Conn:
        self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), timeout)
        return self

    async def send(self, api: int, version: int, message: Any) -> int:
        self.cid += 1
        self.writer.write(encode(api, version, message, self.cid))
        return self.cid

    async def receive(self, api: int, version: int) -> Any:
        size = SIZE.unpack(await self.reader.readexactly(4))[0]
        cid, response = decode(api, version, await self.reader.readexactly(size))
        return response

    async def request(self, api: int, version: int, message: Any) -> Any:
        cid = await self.send(api, version, message)
        size = SIZE.unpack(await self.reader.readexactly(4))[0]
        got, response = decode(api, version, await self.reader.readexactly(size))
        if got != cid:
            raise RuntimeError(f"correlation id {got} answered, {cid} expected (api {api} v{version})")
        return response

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


async def api_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    """The server's ApiVersions answer: {api key: (min, max)}."""
    from kafka.protocol.metadata import ApiVersionsRequest

    conn = await Conn(host, port).open()
    try:
        for version in (3, 0):
            kw: dict[str, Any] = {"version": version}
            if version >= 3:
                kw.update(client_software_name="groupcoord-bench", client_software_version="1")
            response = await conn.request(ApiKey.API_VERSIONS, version, ApiVersionsRequest(**kw))
            if response.error_code == 0:
                return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        raise RuntimeError(f"ApiVersions failed: error {response.error_code}")
    finally:
        conn.close()


def negotiate(server: dict[int, tuple[int, int]]) -> dict[ApiKey, int]:
    """The highest version of each API that both the loader and the server speak."""
    chosen: dict[ApiKey, int] = {}
    for api, (lo, hi) in LOADER_VERSIONS.items():
        if api not in server:
            continue
        s_lo, s_hi = server[api]
        top = min(hi, s_hi)
        if top >= max(lo, s_lo):
            chosen[api] = top
    return chosen
