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
from collections.abc import Callable
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


#: The most one batch may decompress to. Kafka's consumers and validator stream records out of a
#: compressed batch; we decompress whole batches, so a small "bomb" (a megabyte of zstd that
#: expands to gigabytes) must be refused instead of exhausting memory. 128 MiB is over a hundred
#: times the default max.message.bytes: no real producer's batch comes near it.
MAX_DECOMPRESSED_BYTES = 128 << 20
#: First guess of the expansion ratio; the buffer doubles until the data fits or the cap is hit.
_FIRST_GUESS_RATIO = 8
_BUFFER_TOO_SMALL = "failed to write whole buffer"


def _bounded(decompress_into: Callable[[bytes | bytearray | memoryview, bytearray], int],
             data: bytes | bytearray | memoryview, limit: int) -> bytes:
    """Decompress with a cramjam codec's ``decompress_into`` into a buffer that grows up to ``limit``."""
    size = min(max(len(data) * _FIRST_GUESS_RATIO, 1 << 16), limit)
    while True:
        out = bytearray(size)
        try:
            n = decompress_into(data, out)
        except Exception as exc:
            if _BUFFER_TOO_SMALL not in str(exc):
                raise
            if size >= limit:
                raise CompressionError(f"batch decompresses to more than {limit} bytes") from None
            size = min(size * 2, limit)
            continue
        if n == size and size < limit:
            # Exactly full: it may have been cut at the buffer's end; try once more with room.
            size = min(size * 2, limit)
            continue
        if n == size:
            raise CompressionError(f"batch decompresses to {limit} bytes or more")
        del out[n:]
        return bytes(out)


def decompress(codec: int, data: bytes | bytearray | memoryview, max_size: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decompress a batch's records section. Raises CompressionError on any malformed input and
    on output larger than ``max_size``."""
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return _bounded(cramjam.gzip.decompress_into, data, max_size)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(bytes(data), max_size)
        if codec == Compression.LZ4:
            return _bounded(cramjam.lz4.decompress_into, data, max_size)
        if codec == Compression.ZSTD:
            # cramjam decodes zstd as a stream, so frames without a content size are fine.
            return _bounded(cramjam.zstd.decompress_into, data, max_size)
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


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    if data.startswith(_XERIAL_MAGIC):
        return _xerial_decompress(data, max_size)
    if data.startswith(_FRAMED_SNAPPY_MAGIC):
        return _bounded(cramjam.snappy.decompress_into, data, max_size)
    if cramjam.snappy.decompress_raw_len(data) > max_size:
        raise CompressionError(f"batch decompresses to more than {max_size} bytes")
    return bytes(cramjam.snappy.decompress_raw(data))


def _xerial_decompress(data: bytes, max_size: int) -> bytes:
    if len(data) < _XERIAL_HEADER_SIZE:
        raise CompressionError("xerial snappy header is truncated")
    out = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise CompressionError("xerial snappy block length is truncated")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CompressionError(f"xerial snappy block of {size} bytes overruns the data")
        block = data[pos : pos + size]
        # A raw snappy block starts with its uncompressed length: check it before expanding.
        total += cramjam.snappy.decompress_raw_len(block)
        if total > max_size:
            raise CompressionError(f"batch decompresses to more than {max_size} bytes")
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += size
    return b"".join(out)
