"""Segment files of ``__consumer_offsets`` to Arrow record batches, one row per record, with no
Spark and no running server: the parsing core of the ``consumer_offsets`` data source.

It uses the server's own codecs (``protocol.records`` for RecordBatch v2, CRC and compression;
``protocol.consumer_offsets`` for keys and values), so there is one definition of the format.
Rules for a log that is being written or has been damaged:

1. A segment is read only up to the size it had when the job was planned, so a server that
   keeps appending cannot make a task read a half-written batch; a batch cut off at that size
   (or at the end of the file) ends the segment quietly: it is a write in progress.
2. A batch that fails validation (CRC, impossible lengths, records that do not decode) gives
   one ``corrupt`` row naming the file and byte position, and the rest of that segment is
   skipped — nothing after a bad batch can be trusted. The job goes on with other segments.
3. Records of a type the codec does not know (KIP-848 keys, say) become ``unknown`` rows, never
   silently nothing; control batches (transaction markers) become ``control`` rows.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from protocol.consumer_offsets import (
    GroupMetadataValue,
    MalformedRecordError,
    UnknownRecordVersion,
    decode_group_metadata_value,
    decode_offset_commit_key,
    decode_key,
    key_version,
    offset_commit_fields,
)
from protocol.records import (
    CorruptBatchError,
    decode_records,
    iter_batch_positions,
)

from .schema import CONTROL, CORRUPT, GROUP_METADATA, OFFSET_COMMIT, RAW_COLUMNS, UNKNOWN

__all__ = ["Segment", "list_segments", "read_segment", "arrow_schema", "rows_to_batch", "OFFSETS_TOPIC"]

OFFSETS_TOPIC = "__consumer_offsets"
#: Rows per Arrow batch: big enough that per-batch costs vanish, small enough for task memory.
BATCH_ROWS = 65_536


@dataclass(frozen=True)
class Segment:
    """A segment file as planned: path, the size to read up to, and where it sits in the log."""

    path: str
    size: int
    log_partition: int
    base_offset: int


def list_segments(path: str | Path) -> list[Segment]:
    """The ``.log`` segments under a data directory (every ``__consumer_offsets-N``) or under one
    partition directory, with their sizes now (rule 1). Cleaner leftovers (``.cleaned``,
    ``.swap``, ``.deleted``) are not segments."""
    root = Path(path)
    if root.name.startswith(OFFSETS_TOPIC + "-"):
        dirs = [root]
    else:
        dirs = sorted(p for p in root.glob(OFFSETS_TOPIC + "-*") if p.is_dir())
    out = []
    for d in dirs:
        try:
            partition = int(d.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        for f in sorted(d.glob("*.log")):
            try:
                base = int(f.stem)
                size = f.stat().st_size
            except (ValueError, OSError):
                continue
            out.append(Segment(str(f), size, partition, base))
    return out


def arrow_schema() -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    from .schema import RAW_SCHEMA
    return to_arrow_schema(RAW_SCHEMA, timezone="UTC")


_MEMBER_FIELDS = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                  "session_timeout_ms", "subscription", "assignment")


def _members(value: GroupMetadataValue) -> list[dict[str, Any]]:
    return [dict(zip(_MEMBER_FIELDS, (m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                      m.rebalance_timeout, m.session_timeout, m.subscription, m.assignment)))
            for m in value.members]


class _Columns:
    """Per-column lists, appended row by row and turned into one Arrow batch."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {c: [] for c in RAW_COLUMNS}
        self.n = 0

    def add(self, **row: Any) -> None:
        for name, values in self.cols.items():
            values.append(row.get(name))
        self.n += 1


def rows_to_batch(cols: dict[str, list[Any]], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(cols[f.name], type=f.type) for f in schema], schema=schema)


def read_segment(segment: Segment, schema: pa.Schema, *, verify_crc: bool = True) -> Iterator[pa.RecordBatch]:
    """The rows of one segment as Arrow batches (see the module rules)."""
    try:
        fd = os.open(segment.path, os.O_RDONLY)
    except FileNotFoundError:
        return  # the cleaner replaced it after planning; its records live in the new segment
    try:
        size = min(segment.size, os.fstat(fd).st_size)
        if size == 0:
            return
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mm:
            yield from _read(bytes(mm), segment, schema, verify_crc)
    finally:
        os.close(fd)


def _read(data: bytes, segment: Segment, schema: pa.Schema, verify_crc: bool) -> Iterator[pa.RecordBatch]:
    out = _Columns()
    # Hot loop: the common rows are appended to the column lists directly.
    c = out.cols
    c_lp, c_seg, c_off, c_ts, c_pid, c_txn, c_ctl = (c["log_partition"], c["segment_base_offset"], c["offset"],
                                                    c["batch_timestamp_ms"], c["producer_id"], c["is_transactional"],
                                                    c["is_control"])
    c_type, c_kv, c_vv, c_tomb = c["record_type"], c["key_version"], c["value_version"], c["is_tombstone"]
    c_group, c_topic, c_part, c_coff, c_epoch, c_meta, c_cts, c_ets = (
        c["group_id"], c["topic"], c["partition"], c["committed_offset"], c["leader_epoch"], c["commit_metadata"],
        c["commit_timestamp_ms"], c["expire_timestamp_ms"])
    rest = [c[name] for name in ("protocol_type", "generation", "protocol", "leader", "state_timestamp_ms",
                                 "members", "error")]
    lp, seg_base = segment.log_partition, segment.base_offset
    pos = 0
    try:
        for pos, header in iter_batch_positions(data):
            records = decode_records(data, pos, header, check_crc=verify_crc)
            txn = header.is_transactional
            control = header.is_control
            for record in records:
                offset = header.base_offset + record.offset_delta
                ts = record.timestamp(header)
                if control:
                    out.add(log_partition=lp, segment_base_offset=seg_base, offset=offset, batch_timestamp_ms=ts,
                            producer_id=header.producer_id, is_transactional=txn, is_control=True,
                            record_type=CONTROL, is_tombstone=False)
                    continue
                key, value = record.key, record.value
                try:
                    if key is None:
                        raise MalformedRecordError("record without a key")
                    kv = key_version(key)
                    if kv <= 1:
                        group, topic, partition = decode_offset_commit_key(key)
                        if value is None:
                            fields: tuple[Any, ...] = (None, None, None, None, None)
                            vv = None
                        else:
                            fields = offset_commit_fields(value)
                            vv = value[0] << 8 | value[1]
                        c_lp.append(lp); c_seg.append(seg_base); c_off.append(offset); c_ts.append(ts)  # noqa: E702
                        c_pid.append(header.producer_id); c_txn.append(txn); c_ctl.append(False)  # noqa: E702
                        c_type.append(OFFSET_COMMIT); c_kv.append(kv); c_vv.append(vv)  # noqa: E702
                        c_tomb.append(value is None); c_group.append(group); c_topic.append(topic)  # noqa: E702
                        c_part.append(partition); c_coff.append(fields[0]); c_epoch.append(fields[1])  # noqa: E702
                        c_meta.append(fields[2]); c_cts.append(fields[3]); c_ets.append(fields[4])  # noqa: E702
                        for col in rest:
                            col.append(None)
                        out.n += 1
                    else:
                        typed = decode_key(key)  # group metadata, or UnknownRecordVersion
                        gm = None if value is None else decode_group_metadata_value(value)
                        out.add(log_partition=lp, segment_base_offset=seg_base, offset=offset, batch_timestamp_ms=ts,
                                producer_id=header.producer_id, is_transactional=txn, is_control=False,
                                record_type=GROUP_METADATA, key_version=kv,
                                value_version=None if value is None else value[0] << 8 | value[1],
                                is_tombstone=value is None, group_id=typed.group,
                                protocol_type=gm.protocol_type if gm else None,
                                generation=gm.generation if gm else None, protocol=gm.protocol if gm else None,
                                leader=gm.leader if gm else None,
                                state_timestamp_ms=gm.current_state_timestamp if gm else None,
                                members=_members(gm) if gm else None)
                except UnknownRecordVersion:
                    out.add(log_partition=lp, segment_base_offset=seg_base, offset=offset, batch_timestamp_ms=ts,
                            producer_id=header.producer_id, is_transactional=txn, is_control=False,
                            record_type=UNKNOWN, key_version=key_version(key) if key and len(key) >= 2 else None,
                            is_tombstone=value is None)
                except MalformedRecordError as exc:
                    raise CorruptBatchError(f"record at offset {offset}: {exc}", pos) from None
            if out.n >= BATCH_ROWS:
                yield rows_to_batch(out.cols, schema)
                out = _Columns()
                c = out.cols
                c_lp, c_seg, c_off, c_ts, c_pid, c_txn, c_ctl = (
                    c["log_partition"], c["segment_base_offset"], c["offset"], c["batch_timestamp_ms"],
                    c["producer_id"], c["is_transactional"], c["is_control"])
                c_type, c_kv, c_vv, c_tomb = c["record_type"], c["key_version"], c["value_version"], c["is_tombstone"]
                c_group, c_topic, c_part, c_coff, c_epoch, c_meta, c_cts, c_ets = (
                    c["group_id"], c["topic"], c["partition"], c["committed_offset"], c["leader_epoch"],
                    c["commit_metadata"], c["commit_timestamp_ms"], c["expire_timestamp_ms"])
                rest = [c[name] for name in ("protocol_type", "generation", "protocol", "leader",
                                             "state_timestamp_ms", "members", "error")]
    except CorruptBatchError as exc:
        where = exc.position if exc.position else pos
        out.add(log_partition=lp, segment_base_offset=seg_base, offset=-1, record_type=CORRUPT,
                error=f"{segment.path}: {exc.reason} at byte {where}")
    if out.n:
        yield rows_to_batch(out.cols, schema)


def plan_partitions(segments: list[Segment], max_bytes: int, min_partitions: int) -> list[list[Segment]]:
    """Bin-pack segments into input partitions of about ``max_bytes``, but into at least
    ``min_partitions`` when there are that many segments: small ``__consumer_offsets`` segments
    would otherwise cost a task each (~50 ms of scheduling per task)."""
    if not segments:
        return []
    total = sum(s.size for s in segments)
    target = max(1, min(max_bytes, -(-total // max(1, min_partitions))))
    bins: list[list[Segment]] = []
    current: list[Segment] = []
    size = 0
    for seg in sorted(segments, key=lambda s: (s.log_partition, s.base_offset)):
        if current and size + seg.size > target:
            bins.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size
    if current:
        bins.append(current)
    return bins

