"""The live-server fuzzer (issue 22, deliverable 2), a short run in CI.

``bench/live_fuzz.py`` runs a million frames by hand; here the same code runs 40,000 over four
connections against a real ``groupcoord serve`` while confluent-kafka produces (acks=all),
consumes in a two-member group and commits, and asserts everything the long run asserts: the
server stays up and answers every probe, its RSS stays bounded, no acknowledged record or commit
is lost or changed, no client error, no handler failure in the log, closings logged (rate-limited).
The checks themselves are tested below on made-up figures, so they are known to be able to fail.
"""

from __future__ import annotations

import os

import pytest

from bench.live_fuzz import (
    RSS_GROWTH_BOUND,
    FrameGen,
    Result,
    analyze_log,
    check,
    load_corpus,
    run,
)

SEED = int(os.environ.get("LIVE_FUZZ_SEED", "22"))


@pytest.mark.clients
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_live_fuzz_short_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = run(frames=40_000, connections=4, seed=SEED, data_dir=tmp_path, probe_bound=10.0,
                 timeout=240, progress=False)
    print(result.summary())
    assert not result.failures, result.summary()
    c = result.counters
    # the fuzzing reached the server: it answered some frames and refused others
    assert c["responses"] > 1000 and c["server_closed"] > 1000, c
    assert min(c["sent_a"], c["sent_b"], c["sent_c"]) > 3000, c
    assert result.log is not None and result.log.closing_lines > 0


# --- the checks fail when they should -----------------------------------------------------------


def _passing() -> Result:
    r = Result(frames=100, connections=1, seed=0, seconds=10.0, fuzz_window_s=8.0)
    r.counters = {"sent": 100, "server_closed": 90, "stalled": 2, "responses": 8}
    r.probes = 8
    r.server_alive = True
    r.rss_start = r.rss_warm = r.rss_end = r.rss_peak = 100 << 20
    r.acked_records = 10
    r.commits_acked = 3
    r.acked_commit_offsets = {0: 5}
    r.fetched_commit_offsets = {0: 5}
    r.log = analyze_log("")
    r.log.closing_lines, r.log.summarized_closings = 20, 71
    return r


def test_check_passes_a_clean_run() -> None:
    r = _passing()
    check(r)
    assert r.failures == []


@pytest.mark.parametrize("spoil", [
    lambda r: setattr(r, "server_alive", False),
    lambda r: r.probe_failures.append("probe 3: timeout"),
    lambda r: setattr(r, "rss_peak", r.rss_warm + RSS_GROWTH_BOUND),
    lambda r: r.records_missing.append((0, 4)),
    lambda r: r.records_changed.append((0, 4, b"a", b"b")),
    lambda r: setattr(r, "fetched_commit_offsets", {0: 4}),
    lambda r: r.client_errors.update({"producer:_TRANSPORT": 1}),
    lambda r: r.commit_errors.update({"COORDINATOR_NOT_AVAILABLE": 1}),
    lambda r: r.log.bad_lines.append("level=ERROR msg=\"handler failed\""),  # type: ignore[union-attr]
    lambda r: setattr(r.log, "max_closing_per_window", 11),
    lambda r: setattr(r.log, "summarized_closings", 0),  # closings the log does not account for
    lambda r: r.counters.update(sent=99),
    lambda r: r.counters.update(responses=0),  # frames neither answered, closed nor dropped
], ids=["dead", "probe", "rss", "missing", "changed", "commit", "client-error", "commit-error",
        "handler-failed", "rate-limit", "unlogged-closings", "short", "unaccounted"])
def test_check_fails_a_spoiled_run(spoil) -> None:  # type: ignore[no-untyped-def]
    r = _passing()
    spoil(r)
    check(r)
    assert r.failures


def test_analyze_log_counts_closings_and_summaries() -> None:
    lines = []
    for i in range(5):
        lines.append(f'ts=2026-11-25T20:00:00.{i:03d}Z level=WARNING logger=groupcoord.server '
                     f'msg="closing connection" peer=127.0.0.1:{4000 + i} reason="malformed request: x {i}"')
    lines.append('ts=2026-11-25T20:00:01.000Z level=WARNING logger=groupcoord.server '
                 'msg="more connections closed, not logged one by one" host=127.0.0.1 closed=123 window_s=1.0')
    lines.append('ts=2026-11-25T20:00:01.100Z level=ERROR logger=groupcoord.server msg="handler failed" '
                 'api=FETCH peer=127.0.0.1:1 exc="Traceback (most recent call last):\\n..."')
    figures = analyze_log("\n".join(lines))
    assert figures.closing_lines == 5
    assert figures.summary_lines == 1 and figures.summarized_closings == 123
    assert figures.max_closing_per_window == 5
    assert len(figures.bad_lines) == 1
    assert figures.reasons == {"malformed request: x N": 5}


def test_frame_kinds() -> None:
    """Each kind is what it says: (a) and (b) carry a size prefix that matches, (c) a recorded
    body whose lengths were changed (or its size prefix)."""
    import random
    import struct

    corpus = load_corpus()
    assert sum(1 for r in corpus if r.lengths) > 100  # the schema walk follows the recorded bodies
    gen = FrameGen(random.Random(1), corpus)
    for _ in range(500):
        for frame in (gen.kind_a(), gen.kind_b()):
            assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        frame = gen.kind_c()
        assert frame[4:] not in {r.payload for r in corpus} or struct.unpack_from(">i", frame)[0] != len(frame) - 4
