"""Latency samples and their percentiles.

Each loader process keeps every measured latency (microseconds) in an ``array('q')`` — appending
is the cheapest thing a Python hot loop can do — and ships it to the driver as bytes; the driver
concatenates and sorts once. A million samples are 8 MB, so sorted samples stay affordable.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field


@dataclass
class Result:
    """What one loader process (or the merge of several) measured inside the window."""

    requests: int = 0  # responses to requests sent inside the measured window
    items: int = 0  # partitions (commit/fetch) or requests (heartbeat) in those
    errors: int = 0  # error codes != 0 in those responses (every response is checked)
    error_responses: int = 0  # responses carrying at least one error
    error_kinds: dict[int, int] = field(default_factory=dict)  # error code -> count
    total_responses: int = 0  # every response, warm-up and drain included
    sent: int = 0
    loader_cpu_s: float = 0.0  # process CPU of the loader(s) inside the window
    window_s: float = 0.0
    late_ms: float = 0.0  # paced mode: worst lag of the send schedule
    latencies_us: array = field(default_factory=lambda: array("q"))
    failures: list[str] = field(default_factory=list)  # connection errors, timeouts

    def merge(self, other: Result) -> None:
        self.requests += other.requests
        self.items += other.items
        self.errors += other.errors
        self.error_responses += other.error_responses
        for code, n in other.error_kinds.items():
            self.error_kinds[code] = self.error_kinds.get(code, 0) + n
        self.total_responses += other.total_responses
        self.sent += other.sent
        self.loader_cpu_s += other.loader_cpu_s
        self.window_s = max(self.window_s, other.window_s)
        self.late_ms = max(self.late_ms, other.late_ms)
        self.latencies_us.extend(other.latencies_us)
        self.failures.extend(other.failures)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["latencies_us"] = self.latencies_us.tobytes()
        return state

    def __setstate__(self, state: dict) -> None:
        samples = array("q")
        samples.frombytes(state["latencies_us"])
        state["latencies_us"] = samples
        self.__dict__.update(state)


def percentiles(samples: array, qs: tuple[float, ...] = (0.5, 0.99, 0.999)) -> dict[float, float]:
    """Nearest-rank percentiles in milliseconds (NaN when there are no samples)."""
    if not samples:
        return {q: float("nan") for q in qs}
    ordered = sorted(samples)
    n = len(ordered)
    return {q: ordered[min(n - 1, max(0, int(q * n + 0.5) - 1))] / 1000.0 for q in qs}
