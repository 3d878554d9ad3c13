"""``__consumer_offsets`` segment files to Arrow record batches, one row per record (schema:
``schema.RAW_SCHEMA``). Spark-free: importing this module or calling it starts no JVM.

Theory of operation.
  ``parse_segment`` maps the file, looks at no byte past the size it is given (the size the job
  planned), and yields ``pa.RecordBatch``es of about ``batch_rows`` rows. Rows come in log order,
  except that within one yielded batch the rows decoded by the codec (below) follow the others:
  putting them back in place would cost a ``take`` over every column, and every row carries its
  offset (Spark promises no order anyway).

  There are two decoders, and the server's codecs are the reference:

  * The *reference path* (``rows.py``; ``fast=False``, and whatever the fast path does not
    take) walks the file with ``protocol.records.iter_batch_positions``, decodes each batch with
    ``decode_records`` and each record with ``protocol.consumer_offsets.decode_key`` /
    ``decode_value`` / ``decode_control_record`` (``protocol.consumer_group_records`` for the
    KIP-848 records, key versions 3-8 and 16): the one definition of the format.
  * The *fast path* (``fast_path.py``, the default) handles what the coordinator writes nearly
    all the time: uncompressed, non-control batches of headerless records with 1-2 byte varints,
    holding OffsetCommit keys (v0/v1) with v1 or v3 values or tombstones. Python steps once per batch
    (its length, its CRC); the chain of record lengths is followed for record k of every batch
    at once with numpy; then every field of a chunk of records is read with numpy gathers at
    computed byte positions, and strings are cut out of the file's bytes by Arrow (which checks
    the UTF-8). A batch whose *framing* is anything else (compression, control, headers, a bad
    CRC, long varints, lengths that do not add up) goes to the reference path whole. In a plain
    batch, a record whose key or value is not an OffsetCommit v1/v3 (group metadata, value
    versions 0/2/4, unknown versions, anything malformed) goes through the codec on its own;
    group metadata v0-v3 through a struct-based reader (``rows.plain_group_metadata_row``) that hands
    anything odd back to the codec. So the fast path never decides that bytes are bad, only that
    they are the plain case. ``tests/pipeline/test_columns.py`` checks that both paths give the
    same rows on every version, on a mixed log, and on damaged and cut-off files.

Rules for a log that is being written, or has been damaged:
  1. Only ``limit_bytes`` are read. A batch cut off at that point (or at the end of the file) ends
     the segment quietly: it is a write in progress, not damage.
  2. A batch that fails validation (bad length or magic, CRC mismatch, records that do not parse)
     gives one ``CORRUPT`` row, ``error = "<file>: <reason> at byte <position>"``, and ends the
     segment: nothing after a bad batch can be trusted. No record of that batch is emitted (a
     batch is atomic, as it is for the server). The caller goes on with other segments.
  3. Key or value versions the codecs do not know (share-group records, say) become ``UNKNOWN`` rows
     with whatever is known (key version, and group/topic/partition when only the value version is
     new); control batches (transaction markers) become ``CONTROL`` rows. Nothing is dropped.
"""

from __future__ import annotations

import functools
import mmap
import os
from collections.abc import Iterator

import pyarrow as pa

from protocol.records import BatchBuffer

from .fast_path import FastParser
from .rows import SegmentContext, reference_rows, rows_to_batch
from .schema import RAW_SCHEMA

__all__ = ["parse_segment", "parse_buffer", "arrow_schema", "BATCH_ROWS"]

#: Rows per Arrow batch: large enough that per-batch costs (numpy calls, Arrow IPC framing to the
#: JVM) vanish, small enough that a task holds a few MB, not a segment's worth.
BATCH_ROWS = 65_536


@functools.lru_cache(maxsize=1)
def arrow_schema() -> pa.Schema:
    """RAW_SCHEMA as the exact Arrow schema Spark checks yielded batches against (types and
    nullability must match, see the pyspark notes)."""
    from pyspark.sql.pandas.types import to_arrow_schema  # pure Python: no JVM

    return to_arrow_schema(RAW_SCHEMA, timezone="UTC")


# ---------------------------------------------------------------------------------------------
# Entry points


def parse_segment(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview,
    log_partition: int,
    segment_base_offset: int,
    limit_bytes: int | None = None,
    *,
    verify_crc: bool = True,
    name: str | None = None,
    batch_rows: int = BATCH_ROWS,
    fast: bool = True,
    schema: pa.Schema | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of one segment as Arrow batches (see the module rules).

    Args:
        source: the segment's path (memory-mapped), or its bytes.
        log_partition: the ``__consumer_offsets`` partition, for the ``log_partition`` column.
        segment_base_offset: the segment's base offset (its file name), for that column.
        limit_bytes: read no further than this (the size at planning time); None = all.
        verify_crc: check each batch's CRC-32C (cheap with the C extension; turn off only to
            read a log known to be damaged as far as it goes).
        name: how ``error`` names the file; defaults to the path.
        batch_rows: rows per yielded batch (approximate: batches are not split).
        fast: use the fast path where it applies (see the module docstring).
        schema: the Arrow schema to produce; defaults to ``arrow_schema()``.

    Raises:
        FileNotFoundError: the file is gone (the cleaner may have replaced it); the data source
            skips such a segment. Damaged data never raises: it becomes a CORRUPT row.
    """
    schema = schema or arrow_schema()
    if isinstance(source, (bytes, bytearray, memoryview)):
        end = len(source) if limit_bytes is None else min(limit_bytes, len(source))
        yield from parse_buffer(source, end, log_partition, segment_base_offset, verify_crc=verify_crc,
                                name=name or "<buffer>", batch_rows=batch_rows, fast=fast, schema=schema)
        return
    path = os.fspath(source)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        end = size if limit_bytes is None else min(limit_bytes, size)
        if end <= 0:
            return
        # mmap, not read(): a task holds a window of the file, not a copy of a 100 MiB segment.
        mm = mmap.mmap(fd, end, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    try:
        yield from parse_buffer(mm, end, log_partition, segment_base_offset, verify_crc=verify_crc,
                                name=name or path, batch_rows=batch_rows, fast=fast, schema=schema)
    finally:
        try:
            mm.close()
        except BufferError:  # a view still alive (an exception mid-chunk): the GC closes it
            pass


def parse_buffer(
    buf: BatchBuffer,
    end: int,
    log_partition: int,
    segment_base_offset: int,
    *,
    verify_crc: bool = True,
    name: str = "<buffer>",
    batch_rows: int = BATCH_ROWS,
    fast: bool = True,
    schema: pa.Schema | None = None,
) -> Iterator[pa.RecordBatch]:
    """``parse_segment`` over bytes already in memory (or an mmap): ``buf[:end]``."""
    schema = schema or arrow_schema()
    ctx = SegmentContext(buf, end, log_partition, segment_base_offset, verify_crc, name, schema)
    if fast:
        parser = FastParser(ctx)
        try:
            yield from parser.batches(batch_rows)
        finally:
            parser.close()
    else:
        for rows in reference_rows(ctx, batch_rows):
            yield rows_to_batch(rows, schema)


