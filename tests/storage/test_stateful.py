"""Model-based test: random appends, reads, rolls, truncations, compactions and crashes.

The model is the list of records appended (offset, key, value, last offset of their batch) and
``durable_end``, the offset below which everything was fsynced. After a simulated crash (file
descriptors dropped without the clean marker, then the active segment cut at a random byte or a
random byte flipped, both only past the durable point) the reopened log must hold a prefix of
the model that includes everything durable. After compaction every retained record must be
unchanged at its offset and every key's last record must still be there.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.records import build_batch, iter_batch_positions
from storage import Log, LogOptions

from .helpers import all_batches

OPTS = LogOptions(segment_bytes=400, index_interval_bytes=64, flush_policy="none", cleanup_policy="compact",
                  file_delete_delay_ms=0, cleaner_max_keys=2)  # 2 keys: passes often stop early
KEYS = [b"a", b"b", b"c", b"d", b"e"]

records_st = st.lists(
    st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=0, max_size=20))), min_size=1, max_size=3)


@pytest.fixture(autouse=True, scope="module")
def _no_fsync() -> Iterator[None]:
    """Simulated crashes keep the page cache, so real fsyncs buy nothing here but time."""
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="storage-stateful-"))
        self.loop = asyncio.new_event_loop()
        self.log = Log.open(self.root, "t", 0, OPTS, clock=lambda: 1_000_000)
        #: offset -> (key, value, last offset of the batch holding it)
        self.model: dict[int, tuple[bytes, bytes | None, int]] = {}
        self.durable_end = 0

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            if not self.log.closed:
                self.run(self.log.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)

    def log_records(self) -> dict[int, tuple[bytes, bytes | None, int]]:
        from protocol.records import decode_records

        out = {}
        for h, data in all_batches(self.log):
            for r in decode_records(data, 0, h):
                out[h.base_offset + r.offset_delta] = (r.key, r.value, h.last_offset)
        return out

    @rule(appends=st.lists(st.lists(records_st, min_size=1, max_size=2), min_size=1, max_size=4))
    def append(self, appends: list[list[list[tuple[bytes, bytes | None]]]]) -> None:
        payloads = [[build_batch(recs, timestamp_ms=1000) for recs in batches] for batches in appends]

        async def go():  # type: ignore[no-untyped-def]
            return await asyncio.gather(*[self.log.append(p) for p in payloads])

        expected_next = self.log.log_end_offset
        results = self.run(go())
        for batches, res in zip(appends, results, strict=True):
            assert res.base_offset == expected_next  # appends land at the end, in queue order
            off = res.base_offset
            for recs in batches:
                last = off + len(recs) - 1
                for k, v in recs:
                    self.model[off] = (k, v, last)
                    off += 1
            assert off - 1 == res.last_offset
            expected_next = off

    @rule()
    def flush(self) -> None:
        self.run(self.log.flush())
        self.durable_end = self.log.log_end_offset

    @rule()
    def roll(self) -> None:
        self.run(self.log.roll())
        self.durable_end = self.log.log_end_offset

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        end = self.log.log_end_offset
        start = self.log.log_start_offset
        offset = data.draw(st.integers(start, end))
        max_bytes = data.draw(st.integers(0, 500))
        got = self.log.read(offset, max_bytes)
        if offset == end:
            assert got == b""
            return
        positions = list(iter_batch_positions(got))
        if not positions:  # only possible when compaction left nothing at or after the offset
            assert not [o for o in self.model if o >= offset]
            return
        assert sum(h.size for _p, h in positions) == len(got)
        assert len(got) <= max_bytes or len(positions) == 1
        first = positions[0][1]
        assert first.last_offset >= offset
        # nothing retained between the requested offset and the first batch returned
        assert not [o for o in self.model if offset <= o < first.base_offset]

    @precondition(lambda self: self.log.log_end_offset > self.log.log_start_offset)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log.log_start_offset, self.log.log_end_offset))
        self.run(self.log.truncate_to(offset))
        self.model = {o: r for o, r in self.model.items() if r[2] < offset}
        self.durable_end = min(self.durable_end, self.log.log_end_offset)

    @rule()
    def compact(self) -> None:
        self.run(self.log.roll())
        self.durable_end = self.log.log_end_offset
        self.run(self.log.clean(force=True))
        got = self.log_records()
        for o, r in got.items():
            assert self.model[o] == r, f"record at {o} changed by compaction"
        last: dict[bytes, int] = {}
        for o in sorted(self.model):
            last[self.model[o][0]] = o
        for k, o in last.items():
            assert o in got, f"last record of key {k!r} at {o} was removed"
        self.model = got

    @rule(data=st.data(), mode=st.sampled_from(["cut", "flip", "none", "drop-index"]))
    def crash(self, data: st.DataObject, mode: str) -> None:
        # A roll fsyncs the sealed segment and moves the recovery point past it: that data is
        # durable too, and recovery rightly trusts it without the contiguity check.
        self.durable_end = max(self.durable_end, min(self.log.recovery_point, self.log.log_end_offset))
        active = self.log.active_segment
        found = active.find(self.durable_end)
        durable_pos = found[0] if found is not None else active.size
        size = active.size
        path = active.path
        self.log.abort()
        if mode == "cut" and size > durable_pos:
            cut = data.draw(st.integers(durable_pos, size))
            os.truncate(path, cut)
        elif mode == "flip" and size > durable_pos:
            at = data.draw(st.integers(durable_pos, size - 1))
            with open(path, "r+b") as f:
                f.seek(at)
                b = f.read(1)[0]
                f.seek(at)
                f.write(bytes([b ^ (1 << data.draw(st.integers(0, 7)))]))
        elif mode == "drop-index":
            for p in self.log.directory.glob("*.index"):
                if data.draw(st.booleans()):
                    p.unlink()
        self.log = Log.open(self.root, "t", 0, OPTS, clock=lambda: 1_000_000)
        got = self.log_records()
        end = self.log.log_end_offset
        assert end >= self.durable_end, f"durable data lost: end {end} < durable {self.durable_end}"
        expected = {o: r for o, r in self.model.items() if o < end}
        assert got == expected
        self.model = expected
        self.durable_end = end  # recovery fsyncs what it kept

    @invariant()
    def log_matches_model(self) -> None:
        if self.log.closed:
            return
        assert self.log_records() == self.model
        if self.model:
            # compaction can leave a gap at the end (an emptied batch or segment), never data past it
            assert self.log.log_end_offset >= max(r[2] for r in self.model.values()) + 1


LogMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get('STORAGE_STATEFUL_EXAMPLES', '60')), stateful_step_count=30, deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # explain's tracing is slow
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestLogMachine = LogMachine.TestCase
