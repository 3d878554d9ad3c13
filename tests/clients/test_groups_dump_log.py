"""``groupcoord dump-log <data>/__consumer_offsets-<p> --offsets-decoder`` after a real group ran
(three confluent-kafka members, range, graceful stop): the group's partition holds its
GroupMetadata records (a generation with three members, then the Empty group after everyone
left) and one offset commit per partition ending at the consumed end offsets."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.hashing import partition_for
from tests.clients.group_scenario import P, run_group_scenario

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]


def test_groups_dump_log_shows_group_records(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = server_factory({"group.initial.rebalance.delay.ms": "0"})
    out = run_group_scenario(server, tmp_path, ["confluent"] * 3, "range", kill_member=False,
                             restart_server=False, n1=1200)
    group, topic = out.group, out.topic
    part = partition_for(group, 50)
    path = server.data_dir / f"__consumer_offsets-{part}"
    assert path.is_dir(), f"{path} missing: {sorted(p.name for p in server.data_dir.iterdir())[:60]}"
    res = subprocess.run([sys.executable, "-m", "coordinator", "dump-log", str(path), "--offsets-decoder"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"dump-log exit {res.returncode}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    text = res.stdout
    decoded = [ln.strip()[1:].strip() for ln in text.splitlines() if ln.lstrip().startswith("|") and "::" in ln]
    metas = [d for d in decoded if d.startswith(f"{group}::GroupMetadata(")]
    assert metas, f"no GroupMetadata record for {group} in partition {part}:\n{text[-4000:]}"
    full = [m for m in metas if m.count("MemberMetadata(") == 3]
    assert full, "no GroupMetadata with the three members:\n" + "\n".join(metas)
    assert all("protocolType=consumer" in m for m in metas), metas
    assert all("protocol=range" in m for m in full), full
    assert re.search(r"generation=\d+", full[-1]), full[-1]
    assert metas[-1].count("MemberMetadata(") == 0 and "members=[]" in metas[-1], \
        "the last GroupMetadata should be the Empty group (all members left):\n" + "\n".join(metas)
    gens = [int(re.search(r"generation=(\d+)", m).group(1)) for m in metas]  # type: ignore[union-attr]
    assert gens == sorted(gens), f"generations not increasing: {gens}"
    last: dict[int, int] = {}
    for d in decoded:
        m = re.match(rf"\[{re.escape(group)},{re.escape(topic)},(\d+)\]::OffsetAndMetadata\(offset=(\d+),", d)
        if m:
            last[int(m.group(1))] = int(m.group(2))
    assert last == {p: 1200 // P for p in range(P)}, f"last committed offsets in the log: {last}"
