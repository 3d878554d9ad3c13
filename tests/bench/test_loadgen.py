"""The issue-6 load generator against a real groupcoord server, for about a second per workload:
commits, fetches, heartbeats of a joined group and a 10-member rebalance must all get answers
and no errors, so the instrument in ``bench/loadgen`` cannot silently rot. (No Tansu here.)
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from loadgen import cpu, driver, groups, messages  # noqa: E402
from loadgen.storm import Spec, run_process  # noqa: E402
from loadgen.wire import api_versions, negotiate  # noqa: E402

from protocol.apis import ApiKey  # noqa: E402

TOPIC = "bench"


def _measure(server, api: ApiKey, version: int, frames: list[bytes], items: int, rate: float = 0.0,  # type: ignore[no-untyped-def]
             processes: int = 0):
    """``processes`` > 0: through the multi-process driver; 0: one loader in this process (faster)."""
    n = max(processes, 1)
    specs = [Spec(server.host, server.port, api, version, part, items_per_request=items, connections=2, depth=4,
                  rate=rate / n, warmup=0.2, seconds=0.8) for part in driver.split(frames, n)]
    if processes:
        m = driver.run(specs, server.proc.pid, start_in=1.5)
    else:
        specs[0].start_at = time.time()
        c0 = cpu.cpu_seconds(server.proc.pid)
        m = driver.Measurement(run_process(specs[0]), cpu.cpu_seconds(server.proc.pid) - c0, 0.0, 0.8, 1)
    r = m.result
    assert r.failures == [], r.failures
    assert r.requests > 0
    assert r.errors == 0, r.error_kinds
    assert len(r.latencies_us) == r.requests
    assert m.server_cpu_s >= 0
    return m


def test_loadgen_workloads_against_groupcoord(server_factory) -> None:  # type: ignore[no-untyped-def]
    # The bench's setting: no initial rebalance delay (the default 3 s would dominate the joins).
    server = server_factory({"group.initial.rebalance.delay.ms": "0"})
    versions = negotiate(asyncio.run(api_versions(server.host, server.port)))
    assert versions[ApiKey.OFFSET_COMMIT] == 9 and versions[ApiKey.HEARTBEAT] == 4
    names = [f"g-{i}" for i in range(60)]
    asyncio.run(groups.prepare_offsets(server.host, server.port, versions, TOPIC, 10, names, commit=True))

    oc, of = versions[ApiKey.OFFSET_COMMIT], versions[ApiKey.OFFSET_FETCH]
    commits = _measure(server, ApiKey.OFFSET_COMMIT, oc, [messages.commit_frame(oc, g, TOPIC, 10) for g in names], 10,
                       processes=2)
    assert commits.result.items == 10 * commits.result.requests
    _measure(server, ApiKey.OFFSET_FETCH, of, [messages.fetch_frame(of, g, TOPIC, 10) for g in names], 10)
    paced = _measure(server, ApiKey.OFFSET_COMMIT, oc, [messages.commit_frame(oc, g, TOPIC, 10) for g in names], 10,
                     rate=400)
    assert 200 <= paced.requests_per_s <= 600

    async def heartbeats() -> list[groups.Member]:
        members, _ = await groups.stable_group(server.host, server.port, versions, 5, 1, timeout=30)
        return members

    loop = asyncio.new_event_loop()
    members = loop.run_until_complete(heartbeats())
    hv = versions[ApiKey.HEARTBEAT]
    try:
        _measure(server, ApiKey.HEARTBEAT, hv,
                 [messages.heartbeat_frame(hv, m.group, m.generation, m.member_id) for m in members], 1)
    finally:
        for m in members:
            m.conn.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    r = asyncio.run(groups.rebalance(server.host, server.port, versions, 10, "rebalance-10", timeout=20))
    assert r.seconds is not None, r
    assert len(r.generations) == 1 and r.generations[0] > 0


def test_checker_counts_errors(server) -> None:  # type: ignore[no-untyped-def]
    """A heartbeat for an unknown member must come back as an error, counted, not as throughput."""
    versions = negotiate(asyncio.run(api_versions(server.host, server.port)))
    asyncio.run(groups.ensure_coordinator(server.host, server.port, versions, ["nobody-group"]))
    hv = versions[ApiKey.HEARTBEAT]
    spec = Spec(server.host, server.port, ApiKey.HEARTBEAT, hv,
                [messages.heartbeat_frame(hv, "nobody-group", 1, "ghost")], connections=1, depth=2, warmup=0.1,
                seconds=0.3, start_at=time.time())
    r = run_process(spec)
    assert r.requests > 0
    assert r.error_responses == r.requests
    assert set(r.error_kinds) <= {25, 16, 15, 14, 22}, r.error_kinds
