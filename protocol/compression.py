"""The four compression codecs of RecordBatch v2, as Kafka clients write them.

A batch's attributes (bits 0-2) name the codec of everything after the 61-byte header; see
``protocol/records.py``. The codec ids are Kafka's ``CompressionType`` ids, and the framing each
codec uses inside a batch is the one Kafka's Java client writes, because that is what every other
client must be able to read:

* gzip (1): a standard gzip stream (RFC 1952). Several concatenated members are accepted.
* snappy (2): the Java producer goes through snappy-java's ``SnappyOutputStream``, the "xerial"
  framing: an 8-byte magic ``\\x82SNAPPY\\x00``, two int32 (version, compatible version), then
  blocks of int32 length + raw snappy data. librdkafka can be configured to write a bare raw
  snappy block. We write xerial, and read xerial, raw, and (for completeness) the official
  snappy framing format, which starts with the stream identifier chunk ``\\xff\\x06\\x00\\x00sNaPpY``.
* lz4 (3): the LZ4 *frame* format (KIP-57 fixed the header checksum Kafka once got wrong), with
  independent blocks, since Kafka's ``KafkaLZ4BlockInputStream`` rejects linked blocks.
* zstd (4): a standard zstd frame (KIP-110). Producers that stream may omit the content size,
  so decompression must not rely on it.

All four are done by ``cramjam``'s compiled codecs: a pure-Python codec would make every
compressed fetch and every recovery scan crawl.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

__all__ = ["Compression", "CompressionError", "compress", "decompress"]


class Compression(IntEnum):
    """Codec ids carried in a batch's attributes (Kafka ``CompressionType``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(ValueError):
    """Compressed data could not be decoded, or the codec id is not one Kafka defines."""


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
#: magic + int32 version + int32 minimum compatible version.
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = 16
#: snappy-java's default block size for SnappyOutputStream; Kafka's producer keeps it.
_XERIAL_BLOCK = 32 * 1024
_FRAMED_SNAPPY_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_INT32 = struct.Struct(">i")


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` the way Kafka's Java producer would for ``codec``."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        return _xerial_compress(bytes(data))
    if codec == Compression.LZ4:
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())
    if codec == Compression.ZSTD:
        # Level 3 is zstd's own default and the one Kafka uses unless compression.zstd.level says
        # otherwise (KIP-390); cramjam's default (11) is much slower for little gain.
        return bytes(cramjam.zstd.compress(data, level=3))
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a batch's records section. Raises CompressionError on any malformed input."""
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            # cramjam decodes zstd as a stream, so frames without a content size are fine.
            return bytes(cramjam.zstd.decompress(data))
    except CompressionError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, and ValueError/OSError
        raise CompressionError(f"{Compression(codec).name.lower()} data is malformed: {exc}") from exc
    raise CompressionError(f"unknown compression codec {codec}")


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if data.startswith(_XERIAL_MAGIC):
        return _xerial_decompress(data)
    if data.startswith(_FRAMED_SNAPPY_MAGIC):
        return bytes(cramjam.snappy.decompress(data))
    return bytes(cramjam.snappy.decompress_raw(data))


def _xerial_decompress(data: bytes) -> bytes:
    if len(data) < _XERIAL_HEADER_SIZE:
        raise CompressionError("xerial snappy header is truncated")
    out = []
    pos = _XERIAL_HEADER_SIZE
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise CompressionError("xerial snappy block length is truncated")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CompressionError(f"xerial snappy block of {size} bytes overruns the data")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(out)
