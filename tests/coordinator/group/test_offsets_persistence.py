"""Acknowledged commits survive restarts: OffsetFetch after a SIGKILL or a graceful stop returns
exactly what was acknowledged before it (issue 5 acceptance)."""

from __future__ import annotations

import random
import threading
import time

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.wire_client import WireClient

TOPIC = "persisted"
PARTITIONS = 8
C = OffsetCommitRequest.OffsetCommitRequestTopic


def _setup(server) -> None:  # type: ignore[no-untyped-def]
    with WireClient(server.host, server.port) as c:
        CT = CreateTopicsRequest.CreatableTopic
        c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=5000, topics=[CT(
            name=TOPIC, num_partitions=PARTITIONS, replication_factor=1, assignments=[], configs=[])]))
        c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=["warmup"]))


def _commit(c: WireClient, group: str, offsets: dict[int, int]) -> int:
    """Commit as a simple consumer (generation -1, no member id); returns the worst error."""
    req = OffsetCommitRequest(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, topics=[C(name=TOPIC, partitions=[
                                  C.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                                 committed_leader_epoch=-1, committed_metadata=f"m{o}")
                                  for p, o in offsets.items()])])
    resp = c.request(ApiKey.OFFSET_COMMIT, 8, req)
    return max(abs(x.error_code) for t in resp.topics for x in t.partitions)


def _fetch_all(c: WireClient, groups: list[str]) -> dict[str, dict[int, tuple[int, str]]]:
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    deadline = time.monotonic() + 30
    while True:
        resp = c.request(ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(version=8, require_stable=True, groups=[
            G(group_id=g, topics=None) for g in groups]))
        if all(g.error_code == 0 for g in resp.groups):
            return {g.group_id: {p.partition_index: (p.committed_offset, p.metadata) for t in g.topics
                                 for p in t.partitions} for g in resp.groups}
        assert all(g.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for g in resp.groups if g.error_code)
        assert time.monotonic() < deadline, "partitions did not finish loading"
        time.sleep(0.1)


def test_offsets_acknowledged_before_sigkill_come_back_exactly(server) -> None:
    _setup(server)
    groups = [f"group-{i}" for i in range(40)]
    acknowledged: dict[str, dict[int, tuple[int, str]]] = {g: {} for g in groups}
    # The commit each committer had sent but not seen answered when the server died: it may or may
    # not have become durable, so either outcome is right for it (and only for it).
    in_flight: dict[int, tuple[str, dict[int, int]]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    # One committer per group slice would race acknowledgements of the same partition; each
    # committer owns its own groups so "last acknowledged" is well defined.
    def owned(seed: int) -> None:
        mine = groups[seed::4]
        rng = random.Random(seed)
        try:
            with WireClient(server.host, server.port) as c:
                while not stop.is_set():
                    group = rng.choice(mine)
                    offsets = {p: rng.randrange(10**9) for p in rng.sample(range(PARTITIONS), 3)}
                    in_flight[seed] = (group, offsets)
                    if _commit(c, group, offsets) == 0:
                        with lock:
                            acknowledged[group].update({p: (o, f"m{o}") for p, o in offsets.items()})
                    del in_flight[seed]
        except (ConnectionError, OSError):
            pass

    threads = [threading.Thread(target=owned, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    server.kill()
    stop.set()
    for t in threads:
        t.join(10)
    committed = sum(len(v) for v in acknowledged.values())
    assert committed > 100
    server.start()
    with WireClient(server.host, server.port) as c:
        fetched = _fetch_all(c, groups)
    for group in groups:
        pending = [offsets for g, offsets in in_flight.values() if g == group]
        allowed = [acknowledged[group]]
        for offsets in pending:
            allowed.append({**acknowledged[group], **{p: (o, f"m{o}") for p, o in offsets.items()}})
        assert fetched[group] in allowed, group


def test_offsets_survive_a_graceful_restart_and_unknown_groups_stay_empty(server) -> None:
    _setup(server)
    with WireClient(server.host, server.port) as c:
        deadline = time.monotonic() + 30
        while _commit(c, "calm", {0: 5, 1: 6}) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert server.stop() == 0
    server.start()
    with WireClient(server.host, server.port) as c:
        got = _fetch_all(c, ["calm", "never-committed"])
        assert got == {"calm": {0: (5, "m5"), 1: (6, "m6")}, "never-committed": {}}
