"""Where the hosted topics' partitions end, for consumer lag: read from the topics' own logs in
the data directory, or loaded from a file when the data lives elsewhere. Plain Python and
pyarrow; no Spark (the job turns the rows into a DataFrame).

From a data directory (``read_log_offsets``): ``topics.json`` (the topic registry, see
``coordinator/topics/registry.py``: ``{"version": 1, "topics": [{"name", "id", "partitions",
"configs"}]}``) names the topics and their partition counts; ``__consumer_offsets`` is left out.
For each ``<topic>-<p>`` directory:

* ``log_end_offset``: the last batch's last offset + 1, from the batch *headers* of the last
  segment (no record is decoded; a cut-off or damaged tail ends the scan, as it would end the
  log at recovery). An empty last segment ends at its base offset; a missing directory at 0.
* ``log_start_offset``: the storage engine's ``log-start-offset-checkpoint``, but never below
  the first segment's base offset (retention may have deleted segments since it was written).

``end_offset_history`` gives, for every batch of every hosted partition, the end offset after it
and its max timestamp: the end offset at any earlier time, for lag at each commit.

From a file (``load_log_offsets``), for when the topics' logs are not in this data directory:

* JSON: a list of objects ``[{"topic": "orders", "partition": 0, "log_end_offset": 1234,
  "log_start_offset": 0}, ...]`` (``log_start_offset`` optional);
* CSV: a header line ``topic,partition,log_end_offset[,log_start_offset]``, then one row per
  partition. Chosen by the ``.json`` suffix, or by the text starting with ``[``.

``kafka-get-offsets.sh --time -1`` output (``topic:partition:offset``) is one ``sed`` away from
the CSV form.
"""

from __future__ import annotations

import csv
import json
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

from protocol.records import BatchHeader, CorruptBatchError, iter_batch_positions
from storage.files import LOG_START_OFFSET_FILE, read_checkpoint

__all__ = [
    "PartitionEnd",
    "ARROW_SCHEMA",
    "read_log_offsets",
    "load_log_offsets",
    "to_table",
    "end_offsets_from_data_dir",
    "end_offsets_from_file",
    "end_offset_history",
]

OFFSETS_TOPIC = "__consumer_offsets"


class PartitionEnd(NamedTuple):
    topic: str
    partition: int
    log_end_offset: int
    log_start_offset: int | None = None


ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("log_end_offset", pa.int64(), nullable=False),
    pa.field("log_start_offset", pa.int64()),
])


def hosted_topics(data_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Topic name -> partition count from ``topics.json``; empty if there is none."""
    registry = Path(data_dir) / "topics.json"
    if not registry.exists():
        return {}
    doc = json.loads(registry.read_text(encoding="utf-8"))
    return {t["name"]: int(t["partitions"]) for t in doc.get("topics", []) if t["name"] != OFFSETS_TOPIC}


def _segments(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.log") if p.stem.isdigit())


def _batch_headers(segment: Path) -> Iterator[BatchHeader]:
    """Headers of the complete batches of a segment, up to a cut-off or damaged one."""
    with open(segment, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
            try:
                for _pos, header in iter_batch_positions(mm):
                    yield header
            except CorruptBatchError:
                return


def _partition_offsets(directory: Path) -> tuple[int, int | None]:
    segs = _segments(directory)
    if not segs:
        return 0, read_checkpoint(directory / LOG_START_OFFSET_FILE)
    end = int(segs[-1].stem)
    for header in _batch_headers(segs[-1]):
        end = header.last_offset + 1
    start = max(read_checkpoint(directory / LOG_START_OFFSET_FILE) or 0, int(segs[0].stem))
    return end, min(start, end)


def read_log_offsets(data_dir: str | os.PathLike[str]) -> list[PartitionEnd]:
    """Every hosted partition's end (and start) offset, in (topic, partition) order."""
    root = Path(data_dir)
    out = []
    for topic, count in sorted(hosted_topics(root).items()):
        for p in range(count):
            end, start = _partition_offsets(root / f"{topic}-{p}")
            out.append(PartitionEnd(topic, p, end, start))
    return out


def load_log_offsets(path: str | os.PathLike[str]) -> list[PartitionEnd]:
    """Offsets from a JSON or CSV file (formats in the module docstring).

    Raises:
        ValueError: a row lacks a field or holds a non-integer, with the row named.
    """
    text = Path(path).read_text(encoding="utf-8")
    if os.fspath(path).endswith(".json") or text.lstrip().startswith("["):
        # JSON holds anything (json.loads is typed Any): each field is converted, and checked, below.
        entries: list[dict[str, Any]] = json.loads(text)
    else:
        entries = list(csv.DictReader(text.splitlines()))
    out = []
    for i, entry in enumerate(entries, 1):
        try:
            start = entry.get("log_start_offset")
            out.append(PartitionEnd(str(entry["topic"]), int(entry["partition"]), int(entry["log_end_offset"]),
                                    None if start in (None, "") else int(start)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: entry {i} {entry!r}: {exc!r}") from None
    return out


def to_table(rows: list[PartitionEnd]) -> pa.Table:
    """The rows as a pyarrow Table (``ARROW_SCHEMA``)."""
    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    return pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, ARROW_SCHEMA, strict=True)],
                                schema=ARROW_SCHEMA)


def end_offset_history(data_dir: str | os.PathLike[str]) -> list[tuple[str, int, int, int]]:
    """(topic, partition, end offset after a batch, that batch's max timestamp) for every batch
    of every hosted partition, in log order: the end offset at any past time."""
    root = Path(data_dir)
    rows = []
    for topic, count in sorted(hosted_topics(root).items()):
        for p in range(count):
            for segment in _segments(root / f"{topic}-{p}"):
                rows += [(topic, p, h.last_offset + 1, h.max_timestamp) for h in _batch_headers(segment)]
    return rows


# The forms ``pipeline.cli`` uses: (topic, partition, log end offset) triples.

def end_offsets_from_data_dir(data_dir: str | os.PathLike[str]) -> list[tuple[str, int, int]]:
    return [(r.topic, r.partition, r.log_end_offset) for r in read_log_offsets(data_dir)]


def end_offsets_from_file(path: str | os.PathLike[str]) -> list[tuple[str, int, int]]:
    return [(r.topic, r.partition, r.log_end_offset) for r in load_log_offsets(path)]
