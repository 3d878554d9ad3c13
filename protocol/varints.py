"""Unsigned varints (the protobuf encoding Kafka uses for KIP-482 compact lengths and tagged
fields, and, zigzag-folded, for the fields of a record): seven bits per byte, low bits first, the
high bit set on every byte but the last.

One reader for every decoder of protocol/. Its rules are Kafka's ``ByteUtils``: at most 5 bytes for
a varint (int32), 10 for a varlong (int64), so that garbage cannot build a huge integer; a varint
cut short by the end of the data is malformed too. Both raise :class:`VarintError`, which each
caller turns into its own error type (a malformed request, record or batch).
"""

from __future__ import annotations

__all__ = ["VarintError", "encode_uvarint", "read_uvarint"]


class VarintError(ValueError):
    """A varint longer than its type allows, or cut short by the end of the data."""


def encode_uvarint(n: int) -> bytes:
    """``n`` (non-negative) as an unsigned varint."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(data: bytes | bytearray | memoryview, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it; ``max_bytes`` is 5 for a varint, 10
    for a varlong. Every bit read is kept: a caller that needs Java's width (the 5th byte can carry
    bits beyond 32) masks them itself."""
    value = 0
    try:
        for shift in range(0, 7 * max_bytes, 7):
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
    except IndexError:
        raise VarintError(f"varint cut short at byte {pos} by the end of the data") from None
    raise VarintError(f"varint longer than {max_bytes} bytes")
