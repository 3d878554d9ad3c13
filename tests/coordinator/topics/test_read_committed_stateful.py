"""read_committed against a model, across crashes (issue 32, "a crash at any step loses no
committed transaction and resurrects no aborted one").

A hypothesis state machine drives one real ``PartitionLog`` (small segments, so transactions
span them): transactional batches of a few producers, plain batches, COMMIT and ABORT markers,
and crashes — the log dropped as a crash would (or closed cleanly), some ``.txnindex`` files and
the producer-state snapshot deleted at random, and the partition opened again. After every step a
read_committed consumer reads the partition from offset 0 the way Kafka's does: Fetch's stable
read (``fetch._read_stable``, whole batches below the last stable offset) and its aborted
transactions (``PartitionLog.aborted_transactions``), records of an aborted transaction skipped
from its first offset until its ABORT marker, control batches never returned
(``CompletedFetch.nextFetchedRecord`` in Kafka's consumer:
https://github.com/apache/kafka/blob/3.9/clients/src/main/java/org/apache/kafka/clients/consumer/internals/CompletedFetch.java).
What it reads must be exactly the model's committed records, in log order, and the last stable
offset the model's (the first offset of the oldest open transaction, else the log end).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.topics.fetch import _read_stable
from coordinator.topics.partition_log import PRODUCER_SNAPSHOT, PartitionConfig, PartitionLog, load_producer_state
from protocol.fetch_response import RecordsRef
from protocol.records import build_batch, decode_records, iter_batch_positions, read_batch_header, read_end_txn_marker
from storage import Log, LogOptions
from storage.files import RECOVERY_POINT_FILE

OPTIONS = LogOptions(segment_bytes=400, index_interval_bytes=100, flush_policy="none", file_delete_delay_ms=0)
CONFIG = PartitionConfig(max_message_bytes=1 << 20, log_append_time=False, compression=None)
PRODUCERS = (1, 2, 3)
#: Small reads: several fetches per pass, each with its own aborted transactions and upper bound.
FETCH_BYTES = 300


def read_committed(plog: PartitionLog) -> list[bytes]:
    """The values a read_committed consumer reads from offset 0, fetch after fetch."""
    out: list[bytes] = []
    offset = 0
    lso = plog.last_stable_offset
    while offset < lso:
        data, upper = _read_stable(plog, offset, FETCH_BYTES, True, lso)
        if data is None:
            break
        if isinstance(data, RecordsRef):
            raise AssertionError("a read this small is not sent from the file")
        aborted = sorted(plog.aborted_transactions(offset, upper), key=lambda a: a[1])
        aborting: set[int] = set()
        for pos, header in iter_batch_positions(data):
            while aborted and aborted[0][1] <= header.last_offset:
                aborting.add(aborted.pop(0)[0])
            if header.is_control:
                marker = read_end_txn_marker(data, pos, header)
                if marker is not None and not marker[0]:
                    aborting.discard(header.producer_id)
            elif not (header.is_transactional and header.producer_id in aborting):
                out += [r.value or b"" for r in decode_records(data, pos, header)]
            offset = header.last_offset + 1
    return out


class ReadCommittedMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="read-committed-"))
        self.loop = asyncio.new_event_loop()
        self.plog = self._open()
        self.sequence = dict.fromkeys(PRODUCERS, 0)
        #: The records of each producer's open transaction, and where it started.
        self.open: dict[int, list[bytes]] = {}
        self.first_offset: dict[int, int] = {}
        self.committed: list[bytes] = []
        self.end = 0
        self.counter = 0

    def _open(self) -> PartitionLog:
        storage = Log.open(self.root, "t", 0, OPTIONS)
        return PartitionLog("t", 0, storage, CONFIG, load_producer_state(storage))

    def _values(self, n: int) -> list[bytes]:
        values = [b"v%d" % (self.counter + i) for i in range(n)]
        self.counter += n
        return values

    def _append(self, batch: bytearray) -> int:
        async def append() -> int:
            base, durable = self.plog.append_batch(batch, read_batch_header(batch, 0))
            await durable
            return base
        return self.loop.run_until_complete(append())

    @rule(pid=st.sampled_from(PRODUCERS), n=st.integers(1, 3))
    def transactional(self, pid: int, n: int) -> None:
        values = self._values(n)
        batch = bytearray(build_batch([(None, v) for v in values], timestamp_ms=1000, producer_id=pid,
                                      producer_epoch=0, base_sequence=self.sequence[pid], transactional=True))
        assert self._append(batch) == self.end
        self.sequence[pid] += n
        self.open.setdefault(pid, []).extend(values)
        self.first_offset.setdefault(pid, self.end)
        self.end += n

    @rule(n=st.integers(1, 2))
    def plain(self, n: int) -> None:
        values = self._values(n)
        assert self._append(bytearray(build_batch([(None, v) for v in values], timestamp_ms=1000))) == self.end
        self.committed += values
        self.end += n

    @rule(pid=st.sampled_from(PRODUCERS), commit=st.booleans())
    def marker(self, pid: int, commit: bool) -> None:
        async def append() -> int:
            written = self.plog.append_marker(pid, 0, commit, 0, 2000)
            assert not isinstance(written, int), written
            await written[1]
            return written[0]
        assert self.loop.run_until_complete(append()) == self.end
        self.end += 1
        values = self.open.pop(pid, [])
        self.first_offset.pop(pid, None)
        if commit:
            self.committed += values

    @rule(clean=st.booleans(), seed=st.integers(0, 2**32 - 1))
    def crash(self, clean: bool, seed: int) -> None:
        """A clean close or a crash, then the partition opened again. The producer-state
        snapshot may be lost either way (the state is rebuilt from the log). A crash may also
        lose ``.txnindex`` files, with the recovery point that vouched for them: a segment the
        recovery point covers after a clean shutdown is trusted with its indexes, as Kafka's
        ``LogLoader`` trusts it (a missing ``.txnindex`` is read as an empty one there too), so
        losing one of those is not a crash but damage neither detects."""
        if clean:
            self.loop.run_until_complete(self.plog.close())
        else:
            self.plog.log.abort()
        chance = random.Random(seed)
        directory = self.root / "t-0"
        lost_index = False
        for path in sorted(directory.iterdir()):
            if path.name.endswith(PRODUCER_SNAPSHOT) and chance.random() < 0.5:
                path.unlink()
            elif path.suffix == ".txnindex" and not clean and chance.random() < 0.5:
                path.unlink()
                lost_index = True
        if lost_index:
            (directory / RECOVERY_POINT_FILE).unlink(missing_ok=True)
        self.plog = self._open()

    @invariant()
    def reads_what_was_committed(self) -> None:
        plog = self.plog
        assert plog.log_end_offset == self.end
        assert plog.last_stable_offset == min(self.first_offset.values(), default=self.end)
        assert {p for p in PRODUCERS if plog.has_open_transaction(p)} == set(self.open)
        # Below the last stable offset every transaction is decided: the committed records of
        # the model that lie there, in log order (not the order of their commits), are what the
        # consumer reads.
        lso = plog.last_stable_offset
        offsets = self._offsets()
        expected = sorted((offsets[v], v) for v in self.committed if offsets[v] < lso)
        assert read_committed(plog) == [v for _, v in expected]

    def _offsets(self) -> dict[bytes, int]:
        """Each value's offset as the log holds it (every value is unique)."""
        found: dict[bytes, int] = {}
        offset = 0
        while True:
            data = self.plog.log.read(offset, 1 << 20)
            if not data:
                return found
            for pos, header in iter_batch_positions(data):
                if not header.is_control:
                    for record in decode_records(data, pos, header):
                        found[record.value or b""] = header.base_offset + record.offset_delta
                offset = header.last_offset + 1

    def teardown(self) -> None:
        try:
            if not self.plog.log._closed:
                self.loop.run_until_complete(self.plog.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)


ReadCommittedMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("READ_COMMITTED_EXAMPLES", "40")), stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
test_read_committed_matches_the_model = ReadCommittedMachine.TestCase
