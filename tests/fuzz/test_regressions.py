"""Replay every fuzz harness's seeds, saved crash inputs and simple mutations, without atheris.

This is how a crash found by ``run.py`` stays fixed: its input is saved under
``tests/fuzz/regressions/<name>/`` and fed through ``one_input`` here on every test run. The
deterministic mutations (every single-bit flip of the first bytes, every truncation of the small
seeds, a few length-field overwrites) give each harness a few thousand hostile inputs even when no
fuzzer has run, so a decoder regression that needs no search to find fails here directly.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from tests.fuzz.harness import discover, load, regression_inputs

HARNESSES = discover()
#: Bits flipped in the first bytes of each seed (headers and length fields live there).
_FLIP_BYTES = 80
#: Seeds at most this long are also truncated at every position.
_TRUNCATE_UP_TO = 256
#: Values written over each 4-byte-aligned int32 and each int16 of the first bytes.
_HOSTILE_INT32 = (-1, -2, 0x7FFFFFFF, 0x10000)
_HOSTILE_INT16 = (-1, 0x7FFF)


def _mutations(seed: bytes) -> Iterator[bytes]:
    # The first two bytes of most harnesses select a mode; keep them so mutations hit the decoder.
    head = min(len(seed), _FLIP_BYTES)
    for i in range(2, head):
        for bit in range(8):
            out = bytearray(seed)
            out[i] ^= 1 << bit
            yield bytes(out)
    if len(seed) <= _TRUNCATE_UP_TO:
        for end in range(2, len(seed)):
            yield seed[:end]
    for i in range(2, head - 3):
        for value in _HOSTILE_INT32:
            yield seed[:i] + struct.pack(">i", value) + seed[i + 4 :]
        for value in _HOSTILE_INT16:
            yield seed[:i] + struct.pack(">h", value) + seed[i + 2 :]


def test_harnesses_discovered() -> None:
    # The three wire harnesses at least; the disk harnesses add theirs.
    assert {"frames", "requests", "records"} <= set(HARNESSES)


@pytest.mark.parametrize("name", HARNESSES)
def test_seeds_and_regressions(name: str) -> None:
    harness = load(name)
    seeds = harness.seeds()
    assert seeds, f"fuzz_{name}.py has no seeds"
    assert all(isinstance(s, bytes) for s in seeds)
    for data in seeds:
        harness.one_input(data)
    for path in regression_inputs(name):
        harness.one_input(path.read_bytes())


@pytest.mark.parametrize("name", HARNESSES)
def test_mutated_seeds(name: str) -> None:
    harness = load(name)
    # A sample of the seeds keeps this to seconds for a harness with hundreds of them.
    seeds = harness.seeds()
    for data in seeds[:: max(1, len(seeds) // 24)]:
        for mutated in _mutations(data):
            harness.one_input(mutated)
