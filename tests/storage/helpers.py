"""Shared helpers for the storage tests: building batches and reading a log back as records."""

from __future__ import annotations

from protocol.records import BatchHeader, build_batch, decode_records, iter_batch_positions
from storage import Log


def batch(*items: tuple[bytes | None, bytes | None], ts: int = 1000) -> bytes:
    return build_batch(list(items), timestamp_ms=ts)


def kv(i: int, ts: int = 1000, key: bytes | None = None) -> bytes:
    return build_batch([(key if key is not None else b"k%d" % i, b"v%d" % i)], timestamp_ms=ts)


def all_batches(log: Log) -> list[tuple[BatchHeader, bytes]]:
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20)
        if not data:
            break
        for pos, h in iter_batch_positions(data):
            if h.last_offset >= off:
                out.append((h, data[pos : pos + h.size]))
            off = h.last_offset + 1
    return out


def all_records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record from the log start to the end."""
    out = []
    for h, data in all_batches(log):
        for r in decode_records(data, 0, h):
            o = h.base_offset + r.offset_delta
            if o >= log.log_start_offset:
                out.append((o, r.key, r.value))
    return out
