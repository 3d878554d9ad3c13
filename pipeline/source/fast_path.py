"""The fast path of ``columns``: plain OffsetCommit batches to Arrow columns with numpy, every
other batch or record handed to the reference rows of ``rows`` (see the ``columns`` docstring).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import crc32c as _crc32c
import numpy as np
import pyarrow as pa

from protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptBatchError,
    Record,
    read_batch_header,
)

from .rows import (
    SegmentContext,
    corrupt_row,
    plain_group_metadata_row,
    record_row,
    rows_of_batch,
    rows_to_batch,
)
from .schema import OFFSET_COMMIT

_PREFIX_LENGTH = struct.Struct(">i")  # batchLength, at byte 8 of a batch
_PREFIX = struct.Struct(">iibI")  # batchLength, partitionLeaderEpoch, magic, crc: bytes 8..21
#: Below this many batches still walking, the record walk goes on in Python (see ``_walk``).
_LOCKSTEP_MIN = 32
_CONTROL_OR_COMPRESSED = 0x20 | 0x07  # attributes bits: control, compression codec
_TIMESTAMP_TYPE = 0x08  # LogAppendTime: every record's timestamp is the batch's maxTimestamp
_TRANSACTIONAL = 0x10
_MIN_RECORD_SIZE = 7  # a length varint + attributes + five one-byte varints (records.py)


class _NotPlain(Exception):
    """A batch the fast path leaves to the reference path."""


class FastParser:
    """Rule of this class: it only ever *accepts* a batch; any doubt sends the batch to
    ``rows_of_batch``, which decodes it or names what is wrong.

    Fields are read with numpy at arrays of byte positions, through views of the buffer that
    put an N-byte big-endian integer at *every* byte offset (stride 1): one gather per field and
    record, whatever the alignment, and no index arithmetic per byte.
    """

    def __init__(self, ctx: SegmentContext) -> None:
        self.ctx = ctx
        end = ctx.end
        self.u8 = np.frombuffer(ctx.buf, dtype=np.uint8, count=end)
        self.views = {code: np.ndarray(shape=(max(end - width + 1, 0),), dtype=code, buffer=ctx.buf, strides=(1,))
                      for code, width in ((">i2", 2), (">i4", 4), (">i8", 8))}

    def close(self) -> None:
        """Drop the views, so that the mmap they look into can be closed."""
        self.views.clear()
        self.u8 = np.zeros(0, dtype=np.uint8)

    # --- numpy readers. Positions derived from doubtful lengths are clipped so that they cannot
    # fault; the records they belong to are rejected by the checks anyway.

    def _read(self, code: str, idx: np.ndarray, safe: bool = False) -> np.ndarray:
        """The integers at byte positions ``idx`` (``safe``: positions inside validated records)."""
        view = self.views[code] if code != "u1" else self.u8
        if not safe and idx.size and int(idx.max()) >= len(view):  # positions are never negative
            if not len(view):
                return np.zeros(idx.shape, dtype=np.int64)
            idx = np.minimum(idx, len(view) - 1)
        values: np.ndarray = view[idx].astype(np.int64)
        return values

    def _take(self, idx: np.ndarray) -> np.ndarray:
        return self._read("u1", idx)

    def _i16(self, idx: np.ndarray) -> np.ndarray:
        return self._read(">i2", idx)

    def _i32(self, idx: np.ndarray, safe: bool = False) -> np.ndarray:
        return self._read(">i4", idx, safe)

    def _i64(self, idx: np.ndarray, safe: bool = False) -> np.ndarray:
        return self._read(">i8", idx, safe)

    def _varint(self, ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Zigzag varints of 1 or 2 bytes at ``ptr``: (value, next position, ok). Longer ones are
        legal but not plain: ``ok`` is False and the batch goes to the reference path."""
        # Two byte gathers: cheaper than one unaligned big-endian 16-bit gather.
        x0 = self._take(ptr)
        x1 = self._take(ptr + 1)
        two = x0 >= 0x80
        z = np.where(two, (x0 & 0x7F) | (x1 << 7), x0)
        return (z >> 1) ^ -(z & 1), ptr + 1 + two, ~two | (x1 < 0x80)

    def _strings(self, starts: np.ndarray, lengths: np.ndarray, null: np.ndarray | None = None,
                 null_starts: np.ndarray | None = None) -> pa.Array:
        """A string array of ``lengths[i]`` bytes from ``starts[i]``; Arrow checks the UTF-8
        (``pa.ArrowInvalid`` if not, which sends the chunk to the reference path).

        The fields lie in the buffer in order and do not overlap, so they are the even elements
        of one string array over the buffer itself whose odd elements are the bytes in between;
        Arrow's ``take`` copies the even ones out in C++. ``starts`` must increase; null rows
        (``null``) are empty strings at ``null_starts`` (positions in order with the others).
        """
        n = len(starts)
        if null is not None:
            assert null_starts is not None
            starts = np.where(null, null_starts, starts)
            lengths = np.where(null, 0, lengths)
        ends = starts + lengths
        base = int(starts[0])
        offsets = np.empty(2 * n + 1, dtype=np.int64)
        offsets[0:-1:2] = starts
        offsets[1::2] = ends
        offsets[-1] = offsets[-2]
        offsets -= base
        top = int(ends[-1])
        if top - base >= 2**31:
            raise pa.ArrowInvalid("string span too long for int32 offsets")  # chunk via the codec
        window = self.u8[base:top]
        spread = pa.StringArray.from_buffers(2 * n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(window))
        picked = spread.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
        del spread, window
        if null is not None and null.any():
            bitmap = pa.py_buffer(np.packbits(~null, bitorder="little"))
            picked = pa.StringArray.from_buffers(n, picked.buffers()[1], picked.buffers()[2], bitmap)
        picked.validate(full=True)
        return picked

    # --- the walk

    def batches(self, batch_rows: int) -> Iterator[pa.RecordBatch]:
        ctx = self.ctx
        buf, end = ctx.buf, ctx.end
        positions: list[int] = []
        plain_crc: list[bool] = []
        # Step 1: batch positions (one Python step per batch), with the CRC check. A batch whose
        # length cannot be right is kept as the last position; the reference path will name the
        # error. A CRC mismatch only makes the batch not plain: the reference path reports it.
        pos = 0
        unpack_prefix = _PREFIX.unpack_from
        verify = ctx.verify_crc
        view = memoryview(buf)[:end]
        crc32c = _crc32c.crc32c  # what protocol.records.compute_crc calls, minus a memoryview per batch
        try:
            while end - pos >= LOG_OVERHEAD:
                length, _leader_epoch, _magic, crc = unpack_prefix(buf, pos + 8) if end - pos >= 21 else (
                    _PREFIX_LENGTH.unpack_from(buf, pos + 8)[0], 0, 0, 0)
                if length < MIN_BATCH_LENGTH:
                    positions.append(pos)
                    plain_crc.append(False)
                    break
                nxt = pos + LOG_OVERHEAD + length
                if nxt > end:
                    break  # cut off: a write in progress (rule 1)
                positions.append(pos)
                plain_crc.append(not verify or crc32c(view[pos + 21:nxt]) == crc)
                pos = nxt
        finally:
            view.release()
        if not positions:
            return
        # Step 2: header fields of all batches at once; mark the ones that are not plain.
        p = np.array(positions, dtype=np.int64)
        size = self._i32(p + 8) + LOG_OVERHEAD
        attrs = self._i16(p + 21)
        count = self._i32(p + 57)
        plain = (np.array(plain_crc, dtype=bool) & (self._take(p + 16) == 2) & (size >= BATCH_HEADER_SIZE)
                 & (p + size <= end) & ((attrs & _CONTROL_OR_COMPRESSED) == 0) & (count > 0)
                 & (count * _MIN_RECORD_SIZE <= size - BATCH_HEADER_SIZE))
        header = _Headers(p, size, attrs, count, self._i64(p), self._i64(p + 27), self._i64(p + 35),
                          self._i64(p + 43), plain)
        # Step 3: chunks of about batch_rows rows, in order; stop after a corrupt batch.
        estimate = np.cumsum(np.where(plain, count, 1))
        start = 0
        while start < len(positions):
            before = int(estimate[start - 1]) if start else 0
            stop = int(np.searchsorted(estimate, before + batch_rows, side="left")) + 1
            stop = min(max(stop, start + 1), len(positions))
            batch, corrupt = self._chunk(header, start, stop)
            if batch is not None and batch.num_rows:
                yield batch
            if corrupt:
                return
            start = stop

    def _chunk(self, h: _Headers, first: int, stop: int) -> tuple[pa.RecordBatch | None, bool]:
        try:
            return self._chunk_fast(h, first, stop, h.plain[first:stop].copy())
        except pa.ArrowInvalid:
            # A string that is not UTF-8 in a "plain" batch: let the codec say which record.
            return self._chunk_fast(h, first, stop, np.zeros(stop - first, dtype=bool))

    def _walk(self, h: _Headers, first: int, stop: int, plain: np.ndarray) -> np.ndarray:
        """Where each record of the plain batches starts (its length varint), in order.

        The chain of length varints is the only sequential part of a batch. It is followed for
        record k of *every* batch at once, one numpy step per k, while many batches are left;
        the few long batches left after that are finished one record at a time in Python. A
        chain that does not land exactly on its batch's end makes the batch not plain.
        """
        buf = self.ctx.buf
        bidx = np.flatnonzero(plain)
        counts = h.count[first:stop][bidx]
        firsts = np.zeros(len(bidx), dtype=np.int64)
        np.cumsum(counts[:-1], out=firsts[1:])
        starts = np.zeros(int(counts.sum()), dtype=np.int64)
        q = h.pos[first:stop][bidx] + BATCH_HEADER_SIZE
        ends = q - BATCH_HEADER_SIZE + h.size[first:stop][bidx]
        ok = np.ones(len(bidx), dtype=bool)
        active = np.arange(len(bidx))
        k = 0
        while len(active) > _LOCKSTEP_MIN:
            qa = q[active]
            starts[firsts[active] + k] = qa
            length, body, good = self._varint(qa)
            ok[active[~(good & (length >= 6))]] = False
            q[active] = body + length
            k += 1
            active = active[counts[active] > k]
        for i in active.tolist():  # the long tail, in Python
            qi, base = int(q[i]), int(firsts[i])
            try:
                for kk in range(k, int(counts[i])):
                    starts[base + kk] = qi
                    z = buf[qi]
                    if z < 0x80:
                        qi += 1
                    else:
                        y = buf[qi + 1]
                        if y >= 0x80:
                            raise _NotPlain
                        z = (z & 0x7F) | (y << 7)
                        qi += 2
                    if z & 1 or z < 12:  # zigzag: odd = negative; a record takes 6 bytes or more
                        raise _NotPlain
                    qi += z >> 1
            except (_NotPlain, IndexError):
                ok[i] = False
            q[i] = qi
        ok &= q == ends
        plain[bidx[~ok]] = False
        return starts

    def _chunk_fast(self, h: _Headers, first: int, stop: int, plain: np.ndarray) -> tuple[pa.RecordBatch | None, bool]:
        ctx = self.ctx
        buf = ctx.buf
        nb = stop - first
        positions = h.pos[first:stop].tolist()
        # Step 3a: where the records of the plain batches start.
        walked = plain.copy()
        starts = self._walk(h, first, stop, plain)
        # Step 3b: the record framing of every record at once. A record that is not plain
        # (a header, a long varint, a null key, a length that does not add up) sends its whole
        # batch to the reference path.
        rb = np.repeat(np.arange(nb), np.where(walked, h.count[first:stop], 0))  # chunk-local batch of each record
        r = _Records(rb=rb, s=starts)
        length, body, ok = self._varint(r.s)
        rec_end = body + length
        r.ts_delta, q, ok1 = self._varint(body + 1)  # + the attributes byte
        r.off_delta, q, ok2 = self._varint(q)
        r.klen, r.kp, ok3 = self._varint(q)
        r.vlen, r.vp, ok4 = self._varint(r.kp + np.maximum(r.klen, 0))
        q = r.vp + np.maximum(r.vlen, 0)
        ok &= (plain[r.rb] & ok1 & ok2 & ok3 & ok4 & (length >= 6) & (r.klen >= 2) & (r.vlen >= -1)
               & (self._take(q) == 0) & (q + 1 == rec_end))
        if not ok.all():
            bad = np.zeros(nb, dtype=bool)
            bad[r.rb[~ok]] = True
            plain &= ~bad
            r = r.where(plain[r.rb])
        # Step 3c: keys and values. OffsetCommitKey v0/v1 (version, group, topic, partition;
        # trailing bytes ignored as the codec does) with an OffsetCommitValue v3 (offset, leader
        # epoch, metadata, commit time) or v1 (offset, metadata, commit time, expire time) or a
        # tombstone is plain; any other record goes through the codec on its own.
        kp, vp, klen, vlen = r.kp, r.vp, r.klen, r.vlen
        head = self._i32(kp)  # key version and group length, one read
        r.kv = head >> 16
        r.glen = ((head & 0xFFFF) ^ 0x8000) - 0x8000
        r.tp = kp + 4 + np.maximum(r.glen, 0)
        r.tlen = self._i16(r.tp)
        r.tomb = vlen == -1
        vv = self._i16(vp)
        v3 = (vv == 3) & (vlen >= 16)
        v1 = (vv == 1) & (vlen >= 12)
        mlen = self._i16(np.where(v3, vp + 14, vp + 10))
        v3 &= (mlen >= 0) & (vlen >= 24 + mlen)
        v1 &= (mlen >= 0) & (vlen >= 28 + mlen)
        r.vv, r.v3, r.v1, r.mlen = vv, v3, v1, mlen
        fast = ((klen >= 4) & ((r.kv == 0) | (r.kv == 1)) & (r.glen >= 0) & (klen >= 6 + r.glen) & (r.tlen >= 0)
                & (klen >= 10 + r.glen + r.tlen) & (r.tomb | v3 | v1))
        slow = r.where(~fast) if not fast.all() else None
        if slow is not None:
            r = r.where(fast)
        # Step 3d: the rest through the codec, in log order, up to a corrupt batch: whole batches
        # that are not plain, and single records of plain batches.
        work = [(b, -1) for b in np.flatnonzero(~plain).tolist()]
        if slow is not None:
            work += zip(slow.rb.tolist(), range(len(slow.rb)), strict=True)
            work.sort()
        general: list[list[object]] = []
        general_batch: list[int] = []  # chunk-local batch of each general row
        corrupt_at = -1
        headers: dict[int, BatchHeader] = {}
        for b, i in work:
            try:
                if i < 0:
                    rows = rows_of_batch(ctx, positions[b])
                else:
                    header = headers.get(b) or headers.setdefault(b, read_batch_header(buf, positions[b]))
                    assert slow is not None
                    kp_i, kl_i, vp_i, vl_i = (int(slow.kp[i]), int(slow.klen[i]), int(slow.vp[i]),
                                              int(slow.vlen[i]))
                    record = Record(int(slow.off_delta[i]), int(slow.ts_delta[i]), bytes(buf[kp_i:kp_i + kl_i]),
                                    None if vl_i < 0 else bytes(buf[vp_i:vp_i + vl_i]))
                    row = plain_group_metadata_row(ctx, header, record) if int(slow.kv[i]) == 2 else None
                    rows = [row if row is not None else record_row(ctx, header, record, positions[b])]
            except CorruptBatchError as exc:
                # Rule 2: the batch is atomic and nothing after it is read. The corrupt row takes
                # its place.
                while general_batch and general_batch[-1] == b:
                    general.pop(), general_batch.pop()
                rows = [corrupt_row(ctx, exc)]
                corrupt_at = b
            general += rows
            general_batch += [b] * len(rows)
            if corrupt_at >= 0:
                r = r.where(r.rb < corrupt_at)
                break
        # Step 3e: Arrow columns for the plain records.
        n = len(r.rb)
        schema = ctx.schema
        fast_batch = self._arrow(h, first, r, n) if n else None
        if not general:
            return fast_batch, corrupt_at >= 0
        general_arrow = rows_to_batch(general, schema)
        if fast_batch is None:
            return general_arrow, corrupt_at >= 0
        # The codec's rows follow the plain rows (not in log order: putting them back in place
        # would cost a ``take`` over every column; every row carries its offset).
        return pa.concat_batches([fast_batch, general_arrow]), corrupt_at >= 0

    def _arrow(self, h: _Headers, first: int, r: _Records, n: int) -> pa.RecordBatch:
        ctx = self.ctx
        gb = r.rb + first
        attrs = h.attrs[gb]
        tomb, vp, v3, v1, mlen = r.tomb, r.vp, r.v3, r.v1, r.mlen
        # Where a field is absent (tombstones; the expire time of v3) read 8 harmless bytes at the
        # record's start instead: a plain record is at least 17 bytes, so they exist.
        rec = r.s
        meta_start = np.where(v3, vp + 16, vp + 12)
        after_meta = meta_start + np.maximum(mlen, 0)
        columns = {
            "log_partition": np.full(n, ctx.lp, dtype=np.int32),
            "segment_base_offset": np.full(n, ctx.seg_base, dtype=np.int64),
            "offset": h.base_offset[gb] + r.off_delta,
            "batch_timestamp_ms": np.where(attrs & _TIMESTAMP_TYPE, h.max_ts[gb], h.base_ts[gb] + r.ts_delta),
            "producer_id": h.producer_id[gb],
            "is_transactional": (attrs & _TRANSACTIONAL) != 0,
            "is_control": np.zeros(n, dtype=bool),
            "record_type": _constant_strings(OFFSET_COMMIT, n),
            "key_version": r.kv.astype(np.int16),
            "value_version": pa.array(r.vv.astype(np.int16), mask=tomb),
            "is_tombstone": tomb,
            "group_id": self._strings(r.kp + 4, r.glen),
            "topic": self._strings(r.tp + 2, r.tlen),
            "partition": self._i32(r.tp + 2 + r.tlen, True).astype(np.int32),
            "committed_offset": pa.array(self._i64(np.where(tomb, rec, vp + 2), True), mask=tomb),
            "leader_epoch": pa.array(np.where(v3, self._i32(np.where(v3, vp + 10, rec), True), -1).astype(np.int32),
                                     mask=tomb),
            "commit_metadata": self._strings(meta_start, mlen, null=tomb, null_starts=r.s),
            "commit_timestamp_ms": pa.array(self._i64(np.where(tomb, rec, after_meta), True), mask=tomb),
            "expire_timestamp_ms": pa.array(self._i64(np.where(v1, after_meta + 8, rec), True), mask=~(v1 & ~tomb)),
        }
        arrays = [_as_array(columns.get(f.name), f.type, n) for f in ctx.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=ctx.schema)


class _Records:
    """Per-record numpy arrays of a chunk (positions and decoded fields), filtered together."""

    # The fields the parser sets, step by step (every array has one element per record).
    rb: np.ndarray  # the record's batch (chunk-local index)
    s: np.ndarray  # where the record starts
    ts_delta: np.ndarray
    off_delta: np.ndarray
    klen: np.ndarray
    kp: np.ndarray
    vlen: np.ndarray
    vp: np.ndarray
    kv: np.ndarray
    mlen: np.ndarray
    glen: np.ndarray
    tlen: np.ndarray
    tp: np.ndarray
    vv: np.ndarray
    v3: np.ndarray
    v1: np.ndarray
    tomb: np.ndarray

    def __init__(self, **arrays: np.ndarray) -> None:
        self.__dict__.update(arrays)

    def where(self, mask: np.ndarray) -> _Records:
        return _Records(**{k: v[mask] for k, v in self.__dict__.items()})


class _Headers:
    """Header fields of a segment's batches, as numpy arrays indexed by batch."""

    __slots__ = ("pos", "size", "attrs", "count", "base_offset", "base_ts", "max_ts", "producer_id", "plain")

    def __init__(self, pos: np.ndarray, size: np.ndarray, attrs: np.ndarray, count: np.ndarray,
                 base_offset: np.ndarray, base_ts: np.ndarray, max_ts: np.ndarray, producer_id: np.ndarray,
                 plain: np.ndarray) -> None:
        self.pos, self.size, self.attrs, self.count = pos, size, attrs, count
        self.base_offset, self.base_ts, self.max_ts, self.producer_id = base_offset, base_ts, max_ts, producer_id
        self.plain = plain


_AR2 = np.arange(2)
_AR4 = np.arange(4)
_AR8 = np.arange(8)


def _constant_strings(text: str, n: int) -> pa.Array:
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def _as_array(values: object, type_: pa.DataType, n: int) -> pa.Array:
    if values is None:
        return pa.nulls(n, type=type_)
    if isinstance(values, pa.Array):
        return values
    return pa.array(values, type=type_)

