"""Where the hosted topics' partitions end, for lag: from the data directory's own logs, or from
a file when the data lives elsewhere.

From a data directory: ``topics.json`` names the topics; each ``<topic>-<p>`` directory's segment
headers give, without decoding records, every batch's last offset and max timestamp. That is both
the log end offset now and the end offset at any earlier time (the last batch stamped at or
before it), which the Burrow-style evaluation needs for the lag at each commit.

From a file: JSON ``[{"topic": "t", "partition": 0, "log_end_offset": 42}, ...]`` or CSV with
the header ``topic,partition,log_end_offset``.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from protocol.records import CorruptBatchError, iter_batch_positions

__all__ = ["end_offsets_from_data_dir", "end_offsets_from_file", "end_offset_history"]


def _topics(data_dir: Path) -> dict[str, int]:
    registry = data_dir / "topics.json"
    if not registry.exists():
        return {}
    raw = json.loads(registry.read_text())
    entries = raw.get("topics", raw) if isinstance(raw, dict) else raw
    out = {}
    items = entries.values() if isinstance(entries, dict) else entries
    for entry in items:
        name = entry.get("name")
        count = entry.get("num_partitions") or entry.get("partitions")
        if name and name != "__consumer_offsets" and isinstance(count, int):
            out[name] = count
    return out


def end_offset_history(data_dir: str | Path) -> list[tuple[str, int, int, int]]:
    """(topic, partition, end offset after a batch, that batch's max timestamp) for every batch
    of every hosted partition, in log order."""
    root = Path(data_dir)
    rows = []
    for topic, count in sorted(_topics(root).items()):
        for p in range(count):
            d = root / f"{topic}-{p}"
            for seg in sorted(d.glob("*.log")):
                try:
                    data = seg.read_bytes()
                    for _pos, h in iter_batch_positions(data):
                        rows.append((topic, p, h.last_offset + 1, h.max_timestamp))
                except (OSError, CorruptBatchError):
                    continue  # a damaged tail: the end offset stops at the last good batch
    return rows


def end_offsets_from_data_dir(data_dir: str | Path) -> list[tuple[str, int, int]]:
    """(topic, partition, log end offset) for every hosted partition, empty ones included."""
    root = Path(data_dir)
    ends: dict[tuple[str, int], int] = {}
    for topic, count in _topics(root).items():
        for p in range(count):
            end = 0
            d = root / f"{topic}-{p}"
            segs = sorted(d.glob("*.log"))
            if segs:
                end = int(segs[-1].stem)
                try:
                    for _pos, h in iter_batch_positions(segs[-1].read_bytes()):
                        end = h.last_offset + 1
                except (OSError, CorruptBatchError):
                    pass
            ends[(topic, p)] = end
    return [(t, p, e) for (t, p), e in sorted(ends.items())]


def end_offsets_from_file(path: str | Path) -> list[tuple[str, int, int]]:
    text = Path(path).read_text()
    if os.fspath(path).endswith(".json") or text.lstrip().startswith("["):
        return [(r["topic"], int(r["partition"]), int(r["log_end_offset"])) for r in json.loads(text)]
    return [(r["topic"], int(r["partition"]), int(r["log_end_offset"]))
            for r in csv.DictReader(text.splitlines())]
