"""Cost of the KIP-848 server-side assignors (coordinator/group/assignors/) on a large group.

1,000 members subscribed to the same 10,000 partitions (one topic, or 100 topics of 100): the
full computation from scratch, then one member joining the assigned group and one leaving it, the
two rebalances a running group sees most. The uniform assignor also runs with racks (3 racks,
members and single replicas spread over them round-robin), and on a heterogeneous group (each
member subscribed to 50 of the 100 topics, drawn with a fixed seed). Each figure is the median of REPEATS
runs, in milliseconds of CPU-bound Python. Run: ``.venv/bin/python bench/assignors.py``.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coordinator.group.assignors import ASSIGNORS, Assignment, GroupSpec, MemberSpec  # noqa: E402

MEMBERS = 1_000
PARTITIONS = 10_000
REPEATS = 15
RACKS = ("r0", "r1", "r2")


class Topics:
    def __init__(self, counts: dict[uuid.UUID, int], racked: bool) -> None:
        self.counts = counts
        self.racked = racked

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        return self.counts.get(topic_id, -1)

    def racks(self, topic_id: uuid.UUID, partition: int) -> tuple[str, ...]:
        return (RACKS[partition % len(RACKS)],) if self.racked else ()


def median_ms(run: Callable[[], object]) -> float:
    gc.collect()  # each figure starts from the same heap, not after the previous figure's garbage
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def group(subscribed: frozenset[uuid.UUID], assigned: dict[str, Assignment], racked: bool,
          ids: list[str]) -> GroupSpec:
    return GroupSpec({m: MemberSpec(RACKS[i % len(RACKS)] if racked else None, subscribed, assigned.get(m, {}))
                      for i, m in enumerate(ids)})


def main() -> None:
    ids = [f"member-{i:04d}" for i in range(MEMBERS)]
    for name, racked in (("uniform", False), ("uniform", True), ("range", False)):
        assignor = ASSIGNORS[name]
        for n_topics in (1, 100):
            topic_ids = [uuid.UUID(int=t + 1) for t in range(n_topics)]
            topics = Topics({t: PARTITIONS // n_topics for t in topic_ids}, racked)
            subscribed = frozenset(topic_ids)
            fresh = group(subscribed, {}, racked, ids)
            full = median_ms(lambda: assignor.assign(fresh, topics))  # noqa: B023
            assigned = assignor.assign(fresh, topics)
            joined = group(subscribed, assigned, racked, [*ids, "member-new"])
            join = median_ms(lambda: assignor.assign(joined, topics))  # noqa: B023
            left = group(subscribed, assigned, racked, ids[1:])
            leave = median_ms(lambda: assignor.assign(left, topics))  # noqa: B023
            label = f"{name}{' racks=3' if racked else ''}"
            report(label, n_topics, full, join, leave)
    heterogeneous()


def report(label: str, n_topics: int, full: float, join: float, leave: float) -> None:
    print(f"{label:<16} members={MEMBERS} partitions={PARTITIONS} topics={n_topics:<3} "
          f"full_ms={full:6.1f} one_join_ms={join:5.1f} one_leave_ms={leave:5.1f}")


def heterogeneous() -> None:
    rng = random.Random(848)
    topic_ids = [uuid.UUID(int=t + 1) for t in range(100)]
    topics = Topics({t: PARTITIONS // 100 for t in topic_ids}, False)
    ids = [f"member-{i:04d}" for i in range(MEMBERS + 1)]
    subs = {m: frozenset(rng.sample(topic_ids, 50)) for m in ids}
    assignor = ASSIGNORS["uniform"]

    def spec(members: list[str], assigned: dict[str, Assignment]) -> GroupSpec:
        return GroupSpec({m: MemberSpec(None, subs[m], assigned.get(m, {})) for m in members})

    fresh = spec(ids[:-1], {})
    full = median_ms(lambda: assignor.assign(fresh, topics))
    assigned = assignor.assign(fresh, topics)
    joined, left = spec(ids, assigned), spec(ids[1:-1], assigned)
    report("uniform hetero", 100, full, median_ms(lambda: assignor.assign(joined, topics)),
           median_ms(lambda: assignor.assign(left, topics)))


if __name__ == "__main__":
    main()
