"""Unsigned varints (the protobuf encoding Kafka uses for KIP-482 compact lengths and tagged
fields): seven bits per byte, low bits first, the high bit set on every byte but the last."""

from __future__ import annotations

__all__ = ["encode_uvarint"]


def encode_uvarint(n: int) -> bytes:
    """``n`` (non-negative) as an unsigned varint."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
