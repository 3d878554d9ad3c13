"""A protocol-level load generator for Kafka group coordinators (issue #6).

It speaks the wire protocol directly, so any Kafka-compatible server can be measured with it:
every request is encoded once with the schema codec and then sent as the same bytes over and
over, pipelined, from several processes. Each process runs an asyncio loop with its share of the
connections; each connection keeps ``depth`` requests in flight (Kafka answers in order per
connection) or, in paced mode, sends on a schedule (open loop) so latency is measured at a fixed
rate rather than at saturation.

Responses are checked: every ``CHECK_EVERY``-th one is decoded with the schema codec and its
error codes counted, so a fast error can never pass for throughput.

Used by ``bench/coordinator_bench.py``; ``python bench/loadgen.py`` is not a command.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.protocol.consumer import (  # noqa: E402
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from protocol.apis import ApiKey  # noqa: E402
from tests.wire_client import decode_response, encode_request  # noqa: E402

CHECK_EVERY = 50
_SIZE = struct.Struct(">i")
#: Versions both servers speak (asked of each with ApiVersions by the driver's smoke check).
COMMIT_VERSION = 8
FETCH_VERSION = 7
JOIN_VERSION = 5
SYNC_VERSION = 3
HEARTBEAT_VERSION = 4


@dataclass
class Spec:
    kind: str  # commit | fetch | heartbeat
    port: int
    topic: str = "bench"
    partitions: int = 10
    connections: int = 8
    depth: int = 8
    seconds: float = 5.0
    warmup: float = 1.0
    rate: float = 0.0  # requests/s for this process in paced mode; 0 = closed loop
    groups: list[str] = field(default_factory=list)
    #: heartbeat: (group, generation, member id) per connection
    members: list[tuple[str, int, str]] = field(default_factory=list)


@dataclass
class Result:
    requests: int = 0
    errors: int = 0
    checked: int = 0
    latencies_us: list[int] = field(default_factory=list)


def commit_frame(group: str, topic: str, partitions: int, offset: int = 1000) -> bytes:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return encode_request(ApiKey.OFFSET_COMMIT, COMMIT_VERSION, 1, OffsetCommitRequest(
        version=COMMIT_VERSION, group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=[T(name=topic, partitions=[
            T.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset + p, committed_leader_epoch=-1,
                                           committed_metadata="") for p in range(partitions)])]))


def fetch_frame(group: str, topic: str, partitions: int) -> bytes:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    return encode_request(ApiKey.OFFSET_FETCH, FETCH_VERSION, 1, OffsetFetchRequest(
        version=FETCH_VERSION, group_id=group, topics=[T(name=topic, partition_indexes=list(range(partitions)))],
        require_stable=False))


def heartbeat_frame(group: str, generation: int, member_id: str) -> bytes:
    return encode_request(ApiKey.HEARTBEAT, HEARTBEAT_VERSION, 1, HeartbeatRequest(
        version=HEARTBEAT_VERSION, group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=None))


def _errors(kind: str, body: bytes) -> int:
    api, version = {"commit": (ApiKey.OFFSET_COMMIT, COMMIT_VERSION), "fetch": (ApiKey.OFFSET_FETCH, FETCH_VERSION),
                    "heartbeat": (ApiKey.HEARTBEAT, HEARTBEAT_VERSION)}[kind]
    _cid, resp = decode_response(api, version, body)
    if kind == "heartbeat":
        return int(resp.error_code != 0)
    codes = [p.error_code for t in resp.topics for p in t.partitions]
    if kind == "fetch":
        codes.append(resp.error_code)
    return sum(1 for c in codes if c)


async def _connection(spec: Spec, frames: list[bytes], result: Result, start: float, end: float) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", spec.port)
    sent: list[float] = []  # send times of requests in flight, oldest first
    head = 0
    done = asyncio.get_running_loop().create_future()

    async def read() -> None:
        nonlocal head
        n = 0
        while True:
            size = _SIZE.unpack(await reader.readexactly(4))[0]
            body = await reader.readexactly(size)
            now = time.perf_counter()
            t = sent[head]
            head += 1
            if start <= t < end:
                result.requests += 1
                result.latencies_us.append(int((now - t) * 1e6))
                n += 1
                if n % CHECK_EVERY == 1:
                    result.checked += 1
                    result.errors += _errors(spec.kind, body)
            if head == len(sent) and now >= end:
                done.set_result(None)
                return

    reading = asyncio.ensure_future(read())
    i = 0
    interval = spec.connections / spec.rate if spec.rate else 0.0
    next_send = time.perf_counter()
    while time.perf_counter() < end:
        if interval:
            now = time.perf_counter()
            if now < next_send:
                await asyncio.sleep(next_send - now)
            next_send += interval
            sent.append(time.perf_counter())
            writer.write(frames[i % len(frames)])
            i += 1
        else:
            while len(sent) - head < spec.depth:
                sent.append(time.perf_counter())
                writer.write(frames[i % len(frames)])
                i += 1
            await asyncio.sleep(0)
        await writer.drain()
    if len(sent) == head:
        done.set_result(None)
    await asyncio.wait_for(done, 30)
    reading.cancel()
    writer.close()


def _process(spec: Spec, start_at: float, queue: Any) -> None:
    async def main() -> Result:
        result = Result()
        # Wall-clock start shared by all processes; perf_counter for the timing itself.
        delay = max(0.0, start_at - time.time())
        await asyncio.sleep(delay)
        start = time.perf_counter() + spec.warmup
        end = start + spec.seconds
        tasks = []
        for c in range(spec.connections):
            if spec.kind == "heartbeat":
                group, generation, member = spec.members[c]
                frames = [heartbeat_frame(group, generation, member)]
            else:
                groups = spec.groups[c::spec.connections] or spec.groups
                make = commit_frame if spec.kind == "commit" else fetch_frame
                frames = [make(g, spec.topic, spec.partitions) for g in groups]
            tasks.append(_connection(spec, frames, result, start, end))
        await asyncio.gather(*tasks)
        return result

    queue.put(asyncio.run(main()))


def run(specs: list[Spec], start_in: float = 1.0) -> Result:
    """Run one process per spec, all starting together; merged result."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    start_at = time.time() + start_in
    procs = [ctx.Process(target=_process, args=(spec, start_at, queue)) for spec in specs]
    for p in procs:
        p.start()
    merged = Result()
    for _ in procs:
        r = queue.get(timeout=300)
        merged.requests += r.requests
        merged.errors += r.errors
        merged.checked += r.checked
        merged.latencies_us.extend(r.latencies_us)
    for p in procs:
        p.join()
    return merged


# --- group membership for heartbeats and rebalances ------------------------------------------


class Client:
    """One blocking-in-asyncio connection for request/response exchanges."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cid = 0

    async def open(self) -> Client:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def request(self, api: ApiKey, version: int, message: Any) -> Any:
        self.cid += 1
        self.writer.write(encode_request(api, version, self.cid, message))
        size = _SIZE.unpack(await self.reader.readexactly(4))[0]
        return decode_response(api, version, await self.reader.readexactly(size))[1]

    def close(self) -> None:
        self.writer.close()


async def join_and_sync(client: Client, group: str) -> tuple[int, str]:
    """The classic two-phase join (KIP-394), the leader assigns, everyone syncs; rejoins while
    the group is still rebalancing. Returns (generation, member id)."""
    member = ""
    P = JoinGroupRequest.JoinGroupRequestProtocol
    while True:
        join = await client.request(ApiKey.JOIN_GROUP, JOIN_VERSION, JoinGroupRequest(
            version=JOIN_VERSION, group_id=group, session_timeout_ms=45_000, rebalance_timeout_ms=60_000,
            member_id=member, group_instance_id=None, protocol_type="consumer",
            protocols=[P(name="range", metadata=b"bench")]))
        if join.error_code == 79:  # MEMBER_ID_REQUIRED
            member = join.member_id
            continue
        if join.error_code:
            await asyncio.sleep(0.05)
            continue
        member = join.member_id
        assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m.member_id, assignment=b"a")
                       for m in join.members] if join.leader == member else []
        sync = await client.request(ApiKey.SYNC_GROUP, SYNC_VERSION, SyncGroupRequest(
            version=SYNC_VERSION, group_id=group, generation_id=join.generation_id, member_id=member,
            group_instance_id=None, assignments=assignments))
        if sync.error_code == 0:
            return join.generation_id, member
        if sync.error_code != 27:  # not REBALANCE_IN_PROGRESS: a real error
            await asyncio.sleep(0.05)


async def rebalance(port: int, members: int, group: str, timeout: float) -> tuple[float | None, set[int]]:
    """``members`` clients join one group at once: seconds until the last one synced in the
    final generation (None if not within ``timeout``), and the generations they ended in."""
    clients = [await Client(port).open() for _ in range(members)]
    start = time.perf_counter()
    finished: list[tuple[int, float]] = []

    async def one(c: Client) -> None:
        generation, _member = await join_and_sync(c, group)
        finished.append((generation, time.perf_counter()))

    try:
        await asyncio.wait_for(asyncio.gather(*[one(c) for c in clients]), timeout)
    except asyncio.TimeoutError:
        return None, {g for g, _ in finished}
    finally:
        for c in clients:
            c.close()
    return max(t for _, t in finished) - start, {g for g, _ in finished}


def percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
