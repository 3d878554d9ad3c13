"""The leader-epoch checkpoint file (``storage/leader_epoch.py``, Kafka's ``leader-epoch-checkpoint``).

Edge: the text file a partition directory holds and ``Log.open`` reads back on every start, before
the log answers OffsetsForLeaderEpoch (KIP-101) from it.

Properties asserted on any file contents:

1. ``read_epoch_checkpoint`` returns entries or raises ``CorruptCheckpointError`` (``Log.open``
   catches exactly that and rebuilds the cache from the batches); nothing else.
2. Accepted entries are what the writer could have written: epochs and start offsets strictly
   increase, are not negative, and fit the wire (int32 epoch, int64 offset), since every value
   read is answered to a follower in an OffsetsForLeaderEpoch response.
3. Written back by ``LeaderEpochCache.flush``, the entries read back the same.
4. The cache loaded from them answers ``end_offset_for`` with an epoch no newer than the one asked
   and an offset the cache or the log end holds, and its mutations keep rule 1 of the file.

The first byte of the input picks a log end offset for the lookups; the rest is the file.
"""

from __future__ import annotations

import shutil
import tempfile
from itertools import pairwise
from pathlib import Path

from storage.errors import CorruptCheckpointError
from storage.files import LEADER_EPOCH_FILE
from storage.leader_epoch import EpochEntry, LeaderEpochCache, read_epoch_checkpoint
from tests.fuzz.harness import Finding, quiet, scratch_dir

NAME = "epoch_checkpoint"
INSTRUMENT = ("storage.leader_epoch",)

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

_dir: Path | None = None


def _path() -> Path:
    """One directory per process, reused by every input."""
    global _dir
    if _dir is None:
        _dir = scratch_dir("fuzz-epoch-")
    return _dir / LEADER_EPOCH_FILE


def seeds() -> list[bytes]:
    """Files the cache itself writes: empty, one entry, several, large values; plus Kafka's own
    layout of a typical file."""
    directory = Path(tempfile.mkdtemp(prefix="fuzz-epoch-seeds-"))
    try:
        out = []
        for entries in ([], [(0, 0)], [(0, 0), (3, 1284), (7, 99_000)], [(5, 10), (_INT32_MAX, _INT64_MAX)]):
            cache = LeaderEpochCache(directory / LEADER_EPOCH_FILE)
            for epoch, start in entries:
                cache.assign(epoch, start, flush=False)
            cache.flush()
            out.append(bytes([200]) + cache.path.read_bytes())
        out.append(bytes([10]) + b"0\n2\n0 0\n1 5\n")
        return out
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _check_lookups(cache: LeaderEpochCache, log_end: int) -> None:
    entries = cache.entries
    known_offsets = {e.start_offset for e in entries} | {log_end, -1}
    probes = {-1, 0, 1, _INT32_MAX} | {e.epoch + d for e in entries[:8] for d in (-1, 0, 1)}
    for epoch in probes:
        answer_epoch, answer_offset = cache.end_offset_for(epoch, log_end)
        if answer_epoch > epoch or answer_offset not in known_offsets:
            raise Finding(f"end_offset_for({epoch}) = {(answer_epoch, answer_offset)} over {entries}")


def _check_rule_1(entries: tuple[EpochEntry, ...], after: str) -> None:
    for a, b in pairwise(entries):
        if not (a.epoch < b.epoch and a.start_offset < b.start_offset):
            raise Finding(f"after {after} the entries {entries} break rule 1")


def one_input(data: bytes) -> None:
    if not data:
        return
    # ``assign`` warns when it removes conflicting entries; at fuzzing rates that is all the output.
    with quiet():
        _check(data[0] * 1000, data[1:])


def _check(log_end: int, content: bytes) -> None:
    path = _path()
    path.write_bytes(content)
    try:
        entries = read_epoch_checkpoint(path)
    except CorruptCheckpointError:
        return
    if entries is None:
        raise Finding("read_epoch_checkpoint found no file where there is one")
    # Property 2.
    for e in entries:
        if not (0 <= e.epoch <= _INT32_MAX and 0 <= e.start_offset <= _INT64_MAX):
            raise Finding(f"accepted an entry no writer produces: {e}")
    _check_rule_1(tuple(entries), "reading")
    # Property 3: what the cache writes, it reads back.
    cache = LeaderEpochCache(path, entries)  # not marked persisted: flush rewrites the file
    cache.flush()
    try:
        again = read_epoch_checkpoint(path)
    except CorruptCheckpointError as exc:
        raise Finding(f"the cache wrote a file it does not read back: {exc}") from exc
    if again != entries:
        raise Finding(f"read {entries}, wrote and read back {again}")
    # Property 4.
    _check_lookups(cache, max(log_end, entries[-1].start_offset if entries else 0))
    if entries:
        cache.truncate_from_start(entries[len(entries) // 2].start_offset + 1, flush=False)
        _check_rule_1(cache.entries, "truncate_from_start")
        cache.assign(entries[0].epoch, entries[-1].start_offset, flush=False)
        _check_rule_1(cache.entries, "assign")


if __name__ == "__main__":
    import sys

    from tests.fuzz.run import main

    sys.exit(main([NAME, *sys.argv[1:]]))
