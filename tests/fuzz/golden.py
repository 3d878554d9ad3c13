"""The recorded client frames (``tests/protocol/golden/client_request_frames.jsonl``) as seeds.

Frames real clients sent (librdkafka, the Java client, kafka-python, ...), one per line, without
the size prefix: the most realistic starting points for the frame and request harnesses.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

from protocol.apis import ApiKey, is_flexible
from protocol.connection import _skip_tagged_fields

_KNOWN = set(ApiKey)
GOLDEN = Path(__file__).resolve().parent.parent / "protocol" / "golden" / "client_request_frames.jsonl"


@cache
def frames() -> tuple[bytes, ...]:
    """Each recorded frame (header and body, no size prefix), duplicates dropped, in file order."""
    out: dict[bytes, None] = {}
    for line in GOLDEN.read_text().splitlines():
        if line.strip():
            out[bytes.fromhex(json.loads(line)["frame_hex"])] = None
    return tuple(out)


def split(frame: bytes) -> tuple[int, int, bytes]:
    """``(api key, api version, body)`` of a recorded frame: the request header skipped as the
    server's connection skips it (client id, then tagged fields for a flexible version)."""
    api_key, version, _correlation, client_id_len = struct.unpack_from(">hhih", frame)
    pos = 10 + max(client_id_len, 0)
    # Clients also sent apis we do not know (their header is then not ours to parse).
    if api_key in _KNOWN and is_flexible(api_key, version):
        pos = _skip_tagged_fields(memoryview(frame), pos)
    return api_key, version, frame[pos:]
