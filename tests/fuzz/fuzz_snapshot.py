"""Coordinator state snapshots (``coordinator/runtime/snapshot.py``), read and loaded as a
partition load does.

Edge: the ``coordinator.snapshot`` file of a ``__consumer_offsets`` partition directory. Loading
reads it (``read_snapshot``), replays its batches through the runtime's own ``loader.replay_steps``
into a fresh group shard, and ends with ``on_loaded``, which rebuilds the live groups.

Properties asserted on any file contents:

1. ``read_snapshot`` returns a ``Snapshot`` or raises ``SnapshotError`` (the runtime then deletes
   the file and replays the whole log); nothing else.
2. Replaying an accepted snapshot raises nothing but ``MalformedRecordError`` (a record that does
   not decode fails the load, as in Kafka; unknown record types are skipped inside the replay).
3. A loaded state written out again as a snapshot (``snapshot_records`` -> ``encode_snapshot``)
   reads back and reloads to the same hard state: a snapshot stands for the state it came from.

The file is guarded by CRCs, so random bytes rarely get past the header. The first input byte
therefore chooses repairs applied to the rest before it is written: bit 0 recomputes every batch
CRC, bit 1 sets the header's record count to the records the batches hold, bit 2 recomputes the
header CRC. Repaired inputs reach the batch walk and the record decoders; unrepaired ones test the
checks themselves.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import crc32c

from coordinator.group.config import GroupConfig
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.runtime.errors import RecordReplayError
from coordinator.runtime.loader import replay_steps
from coordinator.runtime.snapshot import (
    SNAPSHOT_FILE,
    SnapshotEncoder,
    SnapshotError,
    encode_snapshot,
    read_snapshot,
)
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MalformedRecordError,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecordVersion,
    serialize,
)
from tests.fuzz.harness import Finding, quiet, scratch_dir

NAME = "snapshot"
INSTRUMENT = ("coordinator.runtime.snapshot", "coordinator.runtime.loader", "protocol.records",
              "protocol.consumer_offsets", "coordinator.group.shard", "coordinator.group.group_manager",
              "coordinator.group.offset_manager", "coordinator.group.classic_group")

FIX_BATCH_CRCS, FIX_COUNT, FIX_HEADER_CRC = 1, 2, 4
# Layout of the header (see snapshot.py): magic 8, offset 8, captured_ms 8, count 8, CRC 4.
_COUNT_AT, _CRC_AT, _HEADER_SIZE = 24, 32, 36
_NOW_MS = 1_700_000_000_000


class _Clock:
    def now_ms(self) -> int:
        return _NOW_MS


class _Timer:
    """Loading only schedules (session deadlines, the expiry job); nothing here runs them."""

    def __init__(self) -> None:
        self.keys: dict[str, Callable[[], Any]] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], Any], *, name: str = "timer") -> None:
        self.keys[key] = operation

    def cancel(self, key: str) -> None:
        self.keys.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.keys


def _new_shard() -> GroupCoordinatorShard:
    return GroupCoordinatorShard(GroupConfig(), _Clock(), _Timer())


# The runtime's replay step (``loader.replay_steps``) reads only the partition's shard, and its
# ``where`` for log lines.


def _load(batches: bytes) -> GroupCoordinatorShard:
    shard = _new_shard()
    part = SimpleNamespace(shard=shard, where={"partition": "__consumer_offsets-0"})
    try:
        for _progress in replay_steps(part, UnknownRecordVersion, batches, 0):  # type: ignore[arg-type]
            pass
    except RecordReplayError as exc:
        # The loader names where the record is and keeps the shard's own error as the cause:
        # property 2 is about the cause.
        assert exc.__cause__ is not None
        raise exc.__cause__ from None
    shard.on_loaded()
    return shard


_dir: Path | None = None


def _directory() -> Path:
    """One directory per process, reused by every input (a new one each time costs more than
    the input)."""
    global _dir
    if _dir is None:
        _dir = scratch_dir("fuzz-snapshot-")
    return _dir


def _state_records() -> list[tuple[bytes, bytes]]:
    members = (MemberMetadata("m-1", "c", "/10.0.0.1", 30_000, 10_000,
                              b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff", b"\x00\x01", "i-1"),)
    records = [
        serialize(GroupMetadataKey("g1"), GroupMetadataValue("consumer", 2, "range", "m-1", _NOW_MS, members)),
        serialize(GroupMetadataKey("g2"), GroupMetadataValue("", 0, None, None)),
        serialize(OffsetCommitKey("g1", "t", 0), OffsetCommitValue(42, "md", _NOW_MS, 3)),
        serialize(OffsetCommitKey("g1", "t", 1), OffsetCommitValue(7, "", _NOW_MS, -1, _NOW_MS + 1)),
        serialize(OffsetCommitKey("g3", "u", 5), OffsetCommitValue(0, "", _NOW_MS)),
    ]
    return [(k, v) for k, v in records if v is not None]


def seeds() -> list[bytes]:
    """Snapshots the runtime writes: empty, a small state from a real shard, and one spread over
    several batches; each with no repair and with every repair (a no-op on valid files)."""
    shard = _new_shard()
    for key, value in _state_records():
        shard.replay(key, value)
    shard.on_loaded()
    files = [encode_snapshot(0, _NOW_MS, []), encode_snapshot(5, _NOW_MS, shard.snapshot_records())]
    encoder = SnapshotEncoder(9, _NOW_MS)
    for record in _state_records():
        encoder.add([record])
    files.append(encoder.finish())
    out = []
    for f in files:
        out += [bytes([0]) + f, bytes([FIX_BATCH_CRCS | FIX_COUNT | FIX_HEADER_CRC]) + f]
    return out


def _repair(flags: int, data: bytes) -> bytes:
    buf = bytearray(data)
    records = 0
    pos = _HEADER_SIZE
    while len(buf) - pos >= 61:  # a whole v2 batch header
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        size = 12 + length
        if length < 49 or pos + size > len(buf):
            break
        if flags & FIX_BATCH_CRCS:
            struct.pack_into(">I", buf, pos + 17, crc32c.crc32c(memoryview(buf)[pos + 21 : pos + size]))
        records += struct.unpack_from(">i", buf, pos + 57)[0]
        pos += size
    if len(buf) >= _HEADER_SIZE:
        if flags & FIX_COUNT:
            struct.pack_into(">q", buf, _COUNT_AT, records)
        if flags & FIX_HEADER_CRC:
            struct.pack_into(">I", buf, _CRC_AT, crc32c.crc32c(memoryview(buf)[:_CRC_AT]))
    return bytes(buf)


def _check(data: bytes) -> None:
    directory = _directory()
    (directory / SNAPSHOT_FILE).write_bytes(data)
    try:
        snap = read_snapshot(directory)
    except SnapshotError:
        return
    if snap is None:
        raise Finding("read_snapshot found no snapshot in a directory holding one")
    try:
        shard = _load(snap.batches)
    except MalformedRecordError:
        return
    # Property 3: the loaded state survives a snapshot of itself.
    state = shard.hard_state()
    (directory / SNAPSHOT_FILE).write_bytes(encode_snapshot(snap.offset, snap.captured_ms, shard.snapshot_records()))
    try:
        again = read_snapshot(directory)
        if again is None or (again.offset, again.captured_ms) != (snap.offset, snap.captured_ms):
            raise Finding(f"the snapshot of a loaded state reads back as {again!r}")
        reloaded = _load(again.batches).hard_state()
    except (SnapshotError, MalformedRecordError) as exc:
        raise Finding(f"the snapshot of a loaded state does not load: {exc!r}") from exc
    if reloaded != state:
        raise Finding(f"a loaded state snapshotted and loaded again became {reloaded!r}, was {state!r}")


def one_input(data: bytes) -> None:
    if not data:
        return
    # Replay warns for every skipped batch or record; at fuzzing rates that is all the output.
    with quiet(logging.CRITICAL):
        _check(_repair(data[0], data[1:]))


if __name__ == "__main__":
    import sys

    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
