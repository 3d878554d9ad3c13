"""Several loader processes at once, one merged result, and the server's CPU over the window.

Every process gets a ``storm.Spec`` with the same wall-clock start; after the warm-up they all
measure the same ``seconds``-long window. Meanwhile this (otherwise idle) process reads the
server's utime+stime at the window's start and end, so CPU per request is the server's own CPU
for the requests answered in the window, whatever the loader costs.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import time
from dataclasses import dataclass, replace

from . import cpu
from .stats import Result, percentiles
from .storm import Spec, run_process


@dataclass
class Measurement:
    result: Result
    server_cpu_s: float
    server_cpu_threads_s: float
    seconds: float
    processes: int

    @property
    def requests_per_s(self) -> float:
        return self.result.requests / self.seconds

    @property
    def items_per_s(self) -> float:
        return self.result.items / self.seconds

    @property
    def cpu_ms_per_1000(self) -> float:
        """Server CPU milliseconds per 1,000 requests answered in the window."""
        return self.server_cpu_s * 1e6 / max(self.result.requests, 1)

    @property
    def server_cores(self) -> float:
        return self.server_cpu_s / self.seconds

    def latency_ms(self) -> dict[float, float]:
        return percentiles(self.result.latencies_us)

    def summary(self) -> dict[str, object]:
        p = self.latency_ms()
        r = self.result
        return {"requests_per_s": round(self.requests_per_s), "items_per_s": round(self.items_per_s),
                "cpu_ms_per_1000": round(self.cpu_ms_per_1000, 2), "server_cores": round(self.server_cores, 2),
                "loader_cores": round(r.loader_cpu_s / self.seconds, 2), "p50_ms": p[0.5], "p99_ms": p[0.99],
                "p999_ms": p[0.999], "errors": r.errors, "error_kinds": r.error_kinds,
                "checked": r.total_responses, "failures": r.failures[:5]}


def _worker(spec: Spec, queue: mp.Queue) -> None:  # type: ignore[type-arg]
    try:
        queue.put(run_process(spec))
    except BaseException as e:  # noqa: BLE001
        r = Result()
        r.failures.append(f"loader process failed: {e!r}")
        queue.put(r)


def run(specs: list[Spec], server_pid: int | None, start_in: float = 1.5) -> Measurement:
    """Run one process per spec, all starting together; the merged result and server CPU."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    start_at = time.time() + start_in
    specs = [replace(s, start_at=start_at) for s in specs]
    warmup, seconds = specs[0].warmup, specs[0].seconds
    procs = [ctx.Process(target=_worker, args=(s, queue), daemon=True) for s in specs]
    for p in procs:
        p.start()
    window_start = start_at + warmup
    time.sleep(max(0.0, window_start - time.time()))
    c0 = cpu.cpu_seconds(server_pid) if server_pid else 0.0
    t0 = cpu.thread_cpu_seconds(server_pid) if server_pid else 0.0
    time.sleep(max(0.0, window_start + seconds - time.time()))
    c1 = cpu.cpu_seconds(server_pid) if server_pid else 0.0
    t1 = cpu.thread_cpu_seconds(server_pid) if server_pid else 0.0
    merged = Result()
    deadline = time.monotonic() + seconds + warmup + 120
    got = 0
    while got < len(procs):
        try:
            merged.merge(queue.get(timeout=1.0))
            got += 1
        except queue_mod.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                merged.failures.append(f"{len(procs) - got} loader processes gave no result "
                                       f"(exit codes {[p.exitcode for p in procs]})")
                break
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.terminate()
    merged.window_s = seconds
    return Measurement(merged, c1 - c0, t1 - t0, seconds, len(specs))


def split(frames: list[bytes], processes: int) -> list[list[bytes]]:
    """Deal frames out to processes (each gets at least one)."""
    parts = [frames[i::processes] for i in range(processes)]
    return [p or frames[:1] for p in parts]
