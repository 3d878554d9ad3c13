"""The same input gives the same assignment in another process, whatever its string hash seed
(member ids are strings; their sets and dicts iterate in a per-process order)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

SCRIPT = """
import random, uuid
from coordinator.group.assignors import ASSIGNORS, GroupSpec, MemberSpec

class Topics:
    def num_partitions(self, t): return counts.get(t, -1)
    def racks(self, t, p): return (("r0", "r1", "r2")[(p * 7 + t.int) % 3],)

rng = random.Random(5)
topic_ids = [uuid.UUID(int=i + 1) for i in range(12)]
counts = {t: rng.randint(0, 30) for t in topic_ids}
def spec(shared):
    return GroupSpec({f"member-{i}": MemberSpec(
        rng.choice([None, "r0", "r1", "r2"]),
        frozenset(topic_ids[:6] if shared else rng.sample(topic_ids, rng.randint(0, 6))),
        {t: frozenset(rng.sample(range(35), 4)) for t in rng.sample(topic_ids, 3)}) for i in range(60)})
for shared in (True, False):
    group = spec(shared)
    for name in sorted(ASSIGNORS):
        out = ASSIGNORS[name].assign(group, Topics())
        print(name, sorted((m, sorted((t.int, sorted(ps)) for t, ps in a.items())) for m, a in out.items()))
"""


def _run(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_same_assignment_under_any_hash_seed() -> None:
    first = _run("1")
    assert first.count("uniform") == 2 and first.count("range") == 2
    assert _run("2") == first
    assert _run("31337") == first
