"""Setup and group membership: topic creation, waiting for coordinators, joins, syncs, and the
rebalance timer (M members joining one group at once).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from protocol.apis import ApiKey

from . import messages
from .wire import Conn, decode

RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


async def create_topic(conn: Conn, versions: dict[ApiKey, int], topic: str, partitions: int) -> None:
    v = versions[ApiKey.CREATE_TOPICS]
    CT = CreateTopicsRequest.CreatableTopic
    r = await conn.request(ApiKey.CREATE_TOPICS, v, CreateTopicsRequest(
        version=v, topics=[CT(name=topic, num_partitions=partitions, replication_factor=1, assignments=[],
                              configs=[])], timeout_ms=30_000, validate_only=False))
    code = r.topics[0].error_code
    if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
        raise RuntimeError(f"CreateTopics {topic}: error {code} {r.topics[0].error_message}")


async def find_coordinator(conn: Conn, versions: dict[ApiKey, int], group: str) -> int:
    v = min(versions.get(ApiKey.FIND_COORDINATOR, 3), 3)
    r = await conn.request(ApiKey.FIND_COORDINATOR, v, FindCoordinatorRequest(version=v, key=group, key_type=0))
    return int(r.error_code)


async def ensure_coordinator(host: str, port: int, versions: dict[ApiKey, int], group_ids: list[str],
                             topic: str = "bench", timeout: float = 120.0) -> None:
    """What a client does before joining: FindCoordinator (which creates ``__consumer_offsets`` on
    first use, as in Kafka), then wait until the coordinators answer without a retriable error."""
    conn = await Conn(host, port).open()
    try:
        deadline = time.perf_counter() + timeout
        while await find_coordinator(conn, versions, group_ids[0]) != 0:
            if time.perf_counter() > deadline:
                raise RuntimeError("FindCoordinator kept failing")
            await asyncio.sleep(0.05)
        await wait_serving(conn, versions, group_ids, topic, timeout)
    finally:
        conn.close()


async def wait_serving(conn: Conn, versions: dict[ApiKey, int], groups: list[str], topic: str,
                       timeout: float, expect: dict[str, int] | None = None) -> float:
    """Seconds until an OffsetFetch of partition 0 answers for every group without a retriable
    coordinator error (and, if ``expect`` is given, with the expected committed offset)."""
    v = versions[ApiKey.OFFSET_FETCH]
    start = time.perf_counter()
    pending = list(groups)
    while True:
        frames = [messages.fetch_frame(v, g, topic, 1) for g in pending]
        still = []
        for f in frames:  # pipelined: send all, then read all
            conn.writer.write(f)
        for g in pending:
            size = int.from_bytes(await conn.reader.readexactly(4), "big", signed=True)
            _cid, r = decode(ApiKey.OFFSET_FETCH, v, await conn.reader.readexactly(size))
            codes = set(messages.error_codes(r))
            if codes & RETRIABLE:
                still.append(g)
                continue
            if codes - {0}:
                raise RuntimeError(f"OffsetFetch {g}: errors {sorted(codes)}")
            if expect is not None:
                groups_ = getattr(r, "groups", None) if v >= 8 else None
                topics = groups_[0].topics if groups_ else r.topics
                got = topics[0].partitions[0].committed_offset
                if got != expect[g]:
                    raise RuntimeError(f"OffsetFetch {g}: offset {got}, expected {expect[g]}")
        pending = still
        if not pending:
            return time.perf_counter() - start
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"{len(pending)} groups still not served after {timeout} s")
        await asyncio.sleep(0.01)


async def prepare_offsets(host: str, port: int, versions: dict[ApiKey, int], topic: str, partitions: int,
                          groups: list[str], commit: bool) -> None:
    """Create the topic, find every group's coordinator, wait until they serve; optionally commit
    once per group (so fetches have something to return)."""
    conn = await Conn(host, port).open()
    try:
        await create_topic(conn, versions, topic, partitions)
        for g in groups[:1]:
            await find_coordinator(conn, versions, g)
        await wait_serving(conn, versions, groups, topic, timeout=120)
        if commit:
            v = versions[ApiKey.OFFSET_COMMIT]
            for i in range(0, len(groups), 200):
                chunk = groups[i:i + 200]
                for g in chunk:
                    conn.writer.write(messages.commit_frame(v, g, topic, partitions))
                for g in chunk:
                    size = int.from_bytes(await conn.reader.readexactly(4), "big", signed=True)
                    errs = messages.response_errors(ApiKey.OFFSET_COMMIT, v, await conn.reader.readexactly(size))
                    if errs:
                        raise RuntimeError(f"priming OffsetCommit for {g}: errors {errs}")
    finally:
        conn.close()


# --- membership ---------------------------------------------------------------------------------


@dataclass
class Member:
    conn: Conn
    group: str
    member_id: str = ""
    generation: int = -1
    joins: int = 0
    syncs: int = 0
    synced_at: float = 0.0
    errors: dict[int, int] = field(default_factory=dict)


async def join_and_sync(m: Member, versions: dict[ApiKey, int], rebalance_ms: int = 30_000) -> None:
    """The classic protocol: JoinGroup (two-phase from v4: MEMBER_ID_REQUIRED hands out the id),
    the leader assigns, everyone syncs; on REBALANCE_IN_PROGRESS the member rejoins."""
    jv, sv = versions[ApiKey.JOIN_GROUP], versions[ApiKey.SYNC_GROUP]
    while True:
        m.joins += 1
        join = await m.conn.request(ApiKey.JOIN_GROUP, jv, messages.join_request(jv, m.group, m.member_id,
                                                                                  rebalance_ms=rebalance_ms))
        if join.error_code == 79:  # MEMBER_ID_REQUIRED
            m.member_id = join.member_id
            continue
        if join.error_code:
            m.errors[join.error_code] = m.errors.get(join.error_code, 0) + 1
            if join.error_code == 25:  # UNKNOWN_MEMBER_ID: start over
                m.member_id = ""
            await asyncio.sleep(0.01)
            continue
        m.member_id = join.member_id
        assignments = [(x.member_id, b"\x00\x01assignment") for x in join.members] if join.leader == m.member_id else []
        m.syncs += 1
        sync = await m.conn.request(ApiKey.SYNC_GROUP, sv, messages.sync_request(
            sv, m.group, join.generation_id, m.member_id, assignments))
        if sync.error_code == 0:
            m.generation = join.generation_id
            m.synced_at = time.perf_counter()
            return
        m.errors[sync.error_code] = m.errors.get(sync.error_code, 0) + 1
        if sync.error_code != 27:  # REBALANCE_IN_PROGRESS is expected: rejoin; others: pause
            await asyncio.sleep(0.01)


async def heartbeat(m: Member, versions: dict[ApiKey, int]) -> int:
    from kafka.protocol.consumer import HeartbeatRequest

    hv = versions[ApiKey.HEARTBEAT]
    r = await m.conn.request(ApiKey.HEARTBEAT, hv, HeartbeatRequest(
        version=hv, group_id=m.group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None))
    return int(r.error_code)


@dataclass
class RebalanceResult:
    members: int
    seconds: float | None  # first JoinGroup sent -> last member synced in the final generation
    generations: list[int]
    joins: int
    syncs: int
    errors: dict[int, int]
    timeout: float


async def rebalance(host: str, port: int, versions: dict[ApiKey, int], members: int, group: str,
                    timeout: float) -> RebalanceResult:
    """``members`` connections (opened before the clock starts) join one group at once. Done when
    every member has synced and all are in the same generation; members that synced in an older
    generation learn of the new one by heartbeat (every 50 ms) and rejoin, as clients do."""
    sem = asyncio.Semaphore(200)

    async def connect() -> Conn:
        async with sem:
            return await Conn(host, port).open(timeout=30)

    await ensure_coordinator(host, port, versions, [group])
    conns = await asyncio.gather(*[connect() for _ in range(members)])
    ms = [Member(c, group) for c in conns]
    start = time.perf_counter()
    finished = asyncio.get_running_loop().create_future()

    def all_done() -> bool:
        gens = {m.generation for m in ms}
        return len(gens) == 1 and -1 not in gens

    async def one(m: Member) -> None:
        while not finished.done():
            await join_and_sync(m, versions, rebalance_ms=int(timeout * 1000))
            if all_done():
                if not finished.done():
                    finished.set_result(time.perf_counter())
                return
            while not finished.done():  # synced; wait for the others, heartbeating
                await asyncio.sleep(0.05)
                if finished.done():
                    return
                code = await heartbeat(m, versions)
                if code:
                    m.generation = -1
                    break

    tasks = [asyncio.ensure_future(one(m)) for m in ms]
    try:
        end = await asyncio.wait_for(asyncio.shield(finished), timeout)
        seconds: float | None = max(m.synced_at for m in ms) - start
        del end
    except TimeoutError:
        seconds = None
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in conns:
        c.close()
    errors: dict[int, int] = {}
    for m in ms:
        for k, n in m.errors.items():
            errors[k] = errors.get(k, 0) + n
    return RebalanceResult(members, seconds, sorted({m.generation for m in ms}), sum(m.joins for m in ms),
                           sum(m.syncs for m in ms), errors, timeout)


async def stable_group(host: str, port: int, versions: dict[ApiKey, int], members: int, groups: int,
                       timeout: float = 120.0) -> tuple[list[Member], list[RebalanceResult]]:
    """``members`` members spread over ``groups`` groups, all joined and synced in one generation
    per group. Their connections stay open (returned) so no server drops them."""
    per = members // groups
    out: list[Member] = []
    results = []
    for g in range(groups):
        name = f"hb-group-{g}"
        await ensure_coordinator(host, port, versions, [name])
        sem = asyncio.Semaphore(200)

        async def connect(sem: asyncio.Semaphore) -> Conn:
            async with sem:
                return await Conn(host, port).open(timeout=30)

        conns = await asyncio.gather(*[connect(sem) for _ in range(per)])
        ms = [Member(c, name) for c in conns]
        start = time.perf_counter()

        async def one(m: Member, ms: list[Member] = ms) -> None:
            while True:
                await join_and_sync(m, versions)
                gens = {x.generation for x in ms}
                while len(gens) != 1 or -1 in gens:
                    await asyncio.sleep(0.05)
                    code = await heartbeat(m, versions)
                    if code:
                        m.generation = -1
                        break
                    gens = {x.generation for x in ms}
                else:
                    return

        await asyncio.wait_for(asyncio.gather(*[one(m) for m in ms]), timeout)
        results.append(RebalanceResult(per, time.perf_counter() - start, sorted({m.generation for m in ms}),
                                       sum(m.joins for m in ms), sum(m.syncs for m in ms), {}, timeout))
        out.extend(ms)
    return out, results


