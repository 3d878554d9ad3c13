"""KIP-848 consumer groups (issue 31 item 10): heartbeat cost, convergence after a join, partitions
moved on a scale-up. One command per part::

    .venv/bin/python bench/consumer_group_bench.py shard      # steady heartbeat CPU, consumer vs classic
    .venv/bin/python bench/consumer_group_bench.py socket     # the same over a socket, server CPU/request
    .venv/bin/python bench/consumer_group_bench.py converge   # 1,000 members, one joins: intervals to Stable
    .venv/bin/python bench/consumer_group_bench.py moved      # 100 members, one joins: partitions moved
    .venv/bin/python bench/consumer_group_bench.py clients --members 100   # Java 3.9.1 consumers, scaled by one
    .venv/bin/python bench/consumer_group_bench.py profile    # cProfile of steady heartbeats at the shard

``shard`` drives ``GroupCoordinatorShard`` through the test context (``tests/coordinator/group/``):
the handler plus the records path the runtime runs (each record serialized and replayed), no
sockets; the request decode and response encode a socket adds are timed on their own.

``converge`` and ``moved`` simulate the members on the context's mock clock, with the real server
assignors (``coordinator/group/assignors``): every member heartbeats once per heartbeat interval at
its own phase, sending only its epoch (the Java client sends a field only when it changed); a
member whose assignment changed acknowledges at once with its owned partitions, as the Java
client does when it finishes reconciling (``ack=next``: only at its next tick instead). Converged
means the group is Stable and every member's epoch is the group epoch. Time in the coordinator is
the CPU and wall time of the heartbeats it handled, from the join until converged.

``clients`` runs ``bench/java/GroupScaleBench.java`` (one JVM, one thread per consumer, a producer
thread) once per strategy: classic ``range`` (eager), ``cooperative-sticky``, and
``group.protocol=consumer``. ``socket --profile FILE`` runs the server under cProfile.
Results: bench/RESULTS.md, "KIP-848 consumer groups".
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(REPO), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import peers  # noqa: E402
from kafka.protocol.consumer import HeartbeatRequest  # noqa: E402
from loadgen import cpu, driver, groups  # noqa: E402
from loadgen.storm import Spec  # noqa: E402
from loadgen.wire import Conn, encode, negotiate  # noqa: E402

from coordinator.group.assignors import ASSIGNORS  # noqa: E402
from coordinator.group.classic_group import ClassicGroupMember  # noqa: E402
from coordinator.group.config import GroupConfig  # noqa: E402
from coordinator.group.consumer.group import ConsumerGroupState  # noqa: E402
from coordinator.group.group_state import GroupState  # noqa: E402
from protocol.apis import ApiKey  # noqa: E402
from protocol.consumer_group_messages import ConsumerGroupHeartbeatRequest as Q  # noqa: E402
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext  # noqa: E402
from tests.coordinator.group.group_test_context import GroupTestContext  # noqa: E402

GROUP = "g"
TOPIC = "t"


def machine() -> str:
    return (f"{platform.node()} {os.cpu_count()} cores {platform.python_implementation()} "
            f"{platform.python_version()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def steady_request(member_id: str, epoch: int, owned: Any = None) -> Any:
    return Q(version=1, group_id=GROUP, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
             rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
             topic_partitions=owned)


# --- members on a mock clock ----------------------------------------------------------------------


class Sim:
    """A consumer group of simulated members on the test context's clock."""

    def __init__(self, members: int, partitions: int, assignment_interval_ms: int = 1_000) -> None:
        self.overrides: dict[str, int] = {}
        self.ctx = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=assignment_interval_ms),
                                            assignors=ASSIGNORS, group_configs=lambda group_id: self.overrides)
        self.ctx.topics.create(TOPIC, partitions)
        self.topic_id = self.ctx.topic_id(TOPIC)
        self.interval = GroupConfig().consumer_heartbeat_interval_ms
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, frozenset[int]] = {}
        self.phase: dict[str, int] = {}
        self.handled = 0
        self.cpu_s = 0.0
        self.wall_s = 0.0
        for i in range(members):
            self.join(f"m{i:05d}", phase=self.interval * i // members)
        self.run_until_converged(max_intervals=50)

    @property
    def group(self) -> Any:
        return self.ctx.cgroups[GROUP]

    def converged(self) -> bool:
        g = self.group
        return g.state is ConsumerGroupState.STABLE and all(e == g.group_epoch for e in self.epoch.values())

    def _send(self, request: Any) -> Any:
        c0, w0 = time.process_time(), time.perf_counter()
        response = self.ctx._apply(self.ctx.shard.consumer_group_heartbeat(request, 1, "client", "/127.0.0.1")).response
        self.cpu_s += time.process_time() - c0
        self.wall_s += time.perf_counter() - w0
        self.handled += 1
        if response.error_code:
            raise RuntimeError(f"{request.member_id}: error {response.error_code} {response.error_message}")
        return response

    def _take(self, member_id: str, response: Any) -> bool:
        """Apply a response to the member; True when its assignment changed (it acknowledges)."""
        self.epoch[member_id] = response.member_epoch
        if response.assignment is None:
            return False
        new = frozenset(p for tp in response.assignment.topic_partitions for p in tp.partitions)
        changed = new != self.owned.get(member_id)
        self.owned[member_id] = new
        return changed

    def join(self, member_id: str, phase: int) -> bool:
        self.phase[member_id] = phase
        request = Q(version=1, group_id=GROUP, member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
                    rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC], subscribed_topic_regex=None,
                    server_assignor="uniform", topic_partitions=[])
        self.owned[member_id] = frozenset()
        return self._take(member_id, self._send(request))

    def heartbeat(self, member_id: str, ack: bool) -> bool:
        owned = [Q.TopicPartitions(topic_id=self.topic_id, partitions=sorted(self.owned[member_id]))] if ack else None
        return self._take(member_id, self._send(steady_request(member_id, self.epoch[member_id], owned)))

    def run_until_converged(self, max_intervals: int, ack_now: bool = True, pending_acks: set[str] | None = None
                            ) -> float:
        """Heartbeat every member at its phase until converged; the clock time it took, in ms."""
        start = self.ctx.clock.now
        acks: set[str] = set(pending_acks or ())
        due: list[tuple[int, int, str, bool]] = []  # (time, order, member, regular tick?)
        seq = 0
        for m, phase in self.phase.items():
            t = start - start % self.interval + phase
            if t <= start:
                t += self.interval
            due.append((t, seq, m, True))
            seq += 1
        if ack_now:
            for m in acks:
                due.append((start, seq, m, False))
                seq += 1
        heapq.heapify(due)
        while not self.converged():
            t, _, m, tick = heapq.heappop(due)
            if t - start > max_intervals * self.interval:
                raise RuntimeError(f"not converged in {max_intervals} intervals")
            if t > self.ctx.clock.now:
                self.ctx.sleep(t - self.ctx.clock.now)
            if tick:
                heapq.heappush(due, (t + self.interval, seq, m, True))
                seq += 1
            elif m not in acks:
                continue  # already acknowledged on a tick
            ack = m in acks
            acks.discard(m)
            if self.heartbeat(m, ack):
                acks.add(m)
                if ack_now:
                    heapq.heappush(due, (t, seq, m, False))
                    seq += 1
        return self.ctx.clock.now - start

    def assignment(self) -> dict[str, frozenset[int]]:
        return {m: frozenset(p for ps in a.values() for p in ps) for m, a in self.group.target.items()}


def scale_by_one(members: int, partitions: int, interval_ms: int, ack_now: bool) -> dict[str, Any]:
    sim = Sim(members, partitions)
    sim.overrides["consumer.assignment.interval.ms"] = interval_ms
    sim.ctx.sleep(sim.interval * 3 // 2 + 7)  # a moment well after the last assignment, between ticks
    before = sim.assignment()
    sim.handled, sim.cpu_s, sim.wall_s = 0, 0.0, 0.0
    joined_at = sim.ctx.clock.now
    new = f"m{members:05d}"
    changed = sim.join(new, phase=joined_at % sim.interval)
    join_cpu_ms = sim.cpu_s * 1e3
    ms = sim.run_until_converged(max_intervals=20, ack_now=ack_now, pending_acks={new} if changed else set())
    after = sim.assignment()
    owner_before = {p: m for m, ps in before.items() for p in ps}
    moved = sum(1 for m, ps in after.items() for p in ps if owner_before.get(p) != m)
    sizes = sorted(len(ps) for ps in after.values())
    return {"members": members, "partitions": partitions, "assignment_interval_ms": interval_ms,
            "ack": "now" if ack_now else "next", "intervals": round(ms / sim.interval, 3), "clock_ms": ms,
            "heartbeats": sim.handled, "cpu_ms": round(sim.cpu_s * 1e3, 1), "join_cpu_ms": round(join_cpu_ms, 1), "wall_ms": round(sim.wall_s * 1e3, 1),
            "moved": moved, "new_member_got": len(after.get(new, ())), "min_moved": partitions // (members + 1),
            "sizes": (sizes[0], sizes[-1]), "group_epoch": sim.group.group_epoch}


# --- steady heartbeat CPU at the shard ------------------------------------------------------------


def timed(fn: Any, items: list[Any], repeat: int) -> float:
    """CPU seconds per call of ``fn(item)`` over ``repeat`` passes through ``items``."""
    c0 = time.process_time()
    for _ in range(repeat):
        for item in items:
            fn(item)
    return (time.process_time() - c0) / (repeat * len(items))


def shard_part(members: int, partitions: int, repeat: int) -> dict[str, Any]:
    sim = Sim(members, partitions)
    ctx = sim.ctx
    requests = [steady_request(m, sim.epoch[m]) for m in sim.phase]
    shard = ctx.shard

    def consumer(request: Any) -> None:
        ctx._apply(shard.consumer_group_heartbeat(request, 1, "client", "/127.0.0.1"))

    for r in requests:  # warm: every member answered once more, nothing changes
        consumer(r)
    records_before = len(ctx.log)
    consumer_us = timed(consumer, requests, repeat) * 1e6
    assert len(ctx.log) == records_before, "a steady heartbeat wrote records"
    frames = [r.encode(version=1) for r in requests]
    response = shard.consumer_group_heartbeat(requests[0], 1, "client", "/127.0.0.1").response
    consumer_codec_us = timed(lambda f: (Q.decode(f, version=1), response.encode(version=1)), frames, repeat) * 1e6

    classic = GroupTestContext(GroupConfig(initial_rebalance_delay_ms=0))
    group = classic.shard.group_manager.ensure_group(GROUP)
    for i in range(members):
        group.add(ClassicGroupMember(f"m{i:05d}", None, "c", "h", 45_000, 30_000, "consumer", [("range", b"")]))
    for state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
        group.transition_to(state, 0)
    generation = group.generation_id
    hb = [HeartbeatRequest(version=4, group_id=GROUP, generation_id=generation, member_id=m, group_instance_id=None)
          for m in group.members]

    def classic_hb(request: Any) -> None:
        result = classic._apply(classic.shard.heartbeat(request, 4))
        assert result.response.error_code == 0, result.response

    for r in hb:
        classic_hb(r)
    classic_us = timed(classic_hb, hb, repeat) * 1e6
    hb_frames = [r.encode(version=4) for r in hb]
    hb_response = classic.shard.heartbeat(hb[0], 4).response
    classic_codec_us = timed(lambda f: (HeartbeatRequest.decode(f, version=4), hb_response.encode(version=4)),
                             hb_frames, repeat) * 1e6
    return {"members": members, "partitions": partitions, "heartbeats": repeat * members,
            "consumer_us": round(consumer_us, 2), "consumer_codec_us": round(consumer_codec_us, 2),
            "classic_us": round(classic_us, 2), "classic_codec_us": round(classic_codec_us, 2)}


def profile_shard(members: int, partitions: int) -> None:
    import cProfile
    import pstats

    sim = Sim(members, partitions)
    requests = [steady_request(m, sim.epoch[m]) for m in sim.phase] * 20
    shard, ctx = sim.ctx.shard, sim.ctx
    prof = cProfile.Profile()
    prof.enable()
    for r in requests:
        ctx._apply(shard.consumer_group_heartbeat(r, 1, "client", "/127.0.0.1"))
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


# --- over a socket ----------------------------------------------------------------------------------


async def consumer_members(host: str, port: int, members: int) -> list[tuple[str, int]]:
    """``members`` consumers join one group over one connection each and heartbeat until all
    hold the group epoch; their (member id, epoch)."""
    conns = [await Conn(host, port).open() for _ in range(members)]
    ids = [f"sock-{i:05d}-{os.getpid()}" for i in range(members)]
    epoch = dict.fromkeys(ids, 0)
    owned: dict[str, list[int]] = {m: [] for m in ids}
    topic_id = None
    try:
        for _ in range(60):
            group_epoch = 0
            for conn, m in zip(conns, ids, strict=True):
                joining = epoch[m] == 0
                tps = [Q.TopicPartitions(topic_id=topic_id, partitions=owned[m])] if topic_id and not joining else None
                r = await conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, Q(
                    version=1, group_id=GROUP, member_id=m, member_epoch=epoch[m], instance_id=None, rack_id=None,
                    rebalance_timeout_ms=30_000 if joining else -1,
                    subscribed_topic_names=[TOPIC] if joining else None, subscribed_topic_regex=None,
                    server_assignor=None, topic_partitions=[] if joining else tps))
                if r.error_code:
                    raise RuntimeError(f"{m}: {r.error_code} {r.error_message}")
                epoch[m] = r.member_epoch
                group_epoch = max(group_epoch, r.member_epoch)
                if r.assignment is not None:
                    owned[m] = [p for tp in r.assignment.topic_partitions for p in tp.partitions]
                    topic_id = next((tp.topic_id for tp in r.assignment.topic_partitions), topic_id)
            if len(set(epoch.values())) == 1 and group_epoch > 0:
                return list(epoch.items())
            await asyncio.sleep(0.2)
        raise RuntimeError("the socket group did not settle")
    finally:
        for c in conns:
            c.close()


def start_server(work: Path, settings: dict[str, str], profile: Path | None) -> peers.Server:
    """groupcoord as ``peers.start_groupcoord`` starts it, optionally under cProfile (written when
    the server exits on SIGTERM)."""
    if profile is None:
        return peers.start_groupcoord(work / "data", settings)
    port = peers.free_port()
    argv = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "coordinator", "serve",
            "--data-dir", str(work / "data"), "--listen", f"127.0.0.1:{port}"]
    for key, value in settings.items():
        argv += ["--set", f"{key}={value}"]
    server = peers.Server("groupcoord", argv, port, work / "groupcoord.log")
    server.wait_ready()
    return server


def socket_part(members: int, partitions: int, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="cg-bench-"))
    settings = {"group.initial.rebalance.delay.ms": "0", "group.consumer.assignment.interval.ms": "0"}
    out: dict[str, Any] = {"members": members, "partitions": partitions, "seconds": args.seconds,
                           "processes": args.processes, "connections": args.connections, "depth": args.depth}
    profile = Path(args.profile).resolve() if args.profile else None
    with start_server(work, settings, profile) as server:
        v = negotiate(server.versions)

        async def setup() -> tuple[list[tuple[str, int]], list[groups.Member]]:
            conn = await Conn(server.host, server.port).open()
            await groups.create_topic(conn, v, TOPIC, partitions)
            conn.close()
            await groups.ensure_coordinator(server.host, server.port, v, [GROUP], topic=TOPIC)
            consumers = await consumer_members(server.host, server.port, members)
            classic: list[groups.Member] = []
            if "classic" in args.only:
                classic, _ = await groups.stable_group(server.host, server.port, v, members, 1, timeout=120)
            return consumers, classic

        loop = asyncio.new_event_loop()
        consumers, classic = loop.run_until_complete(setup())
        try:
            cg = [encode(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, steady_request(m, e)) for m, e in consumers]
            hv = v[ApiKey.HEARTBEAT]
            hb = [encode(ApiKey.HEARTBEAT, hv, HeartbeatRequest(version=hv, group_id=m.group, generation_id=m.generation,
                                                                 member_id=m.member_id, group_instance_id=None))
                  for m in classic]
            workloads = {"consumer": (ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, cg), "classic": (ApiKey.HEARTBEAT, hv, hb)}
            for rnd in range(args.rounds):
                for name in args.only:
                    api, version, frames = workloads[name]
                    specs = [Spec(server.host, server.port, api, version, part, connections=args.connections,
                                  depth=args.depth, warmup=1.0, seconds=args.seconds)
                             for part in driver.split(frames, args.processes)]
                    m = driver.run(specs, server.pid)
                    s = m.summary()
                    out[f"{name}-{rnd + 1}"] = {
                        "version": version, "requests_per_s": s["requests_per_s"],
                        "server_cpu_us": round(m.cpu_ms_per_1000, 1), "server_cores": s["server_cores"],
                        "p50_ms": s["p50_ms"], "p99_ms": s["p99_ms"], "errors": s["errors"],
                        "error_kinds": s["error_kinds"], "failures": s["failures"]}
                    print(name, out[f"{name}-{rnd + 1}"], flush=True)
        finally:
            for mem in classic:
                mem.conn.close()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()
    return out


def clients_part(members: int, partitions: int, args: argparse.Namespace) -> list[dict[str, str]]:
    """Java 3.9.1 consumers (threads of one JVM, ``bench/java/GroupScaleBench.java``): the group
    of ``members`` scaled by one, for each strategy, each on a fresh topic and group."""
    import subprocess

    from tests.clients.tools import java_classpath

    work = Path(tempfile.mkdtemp(prefix="cg-clients-"))
    classpath = java_classpath()
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(work), str(HERE / "java" / "GroupScaleBench.java")],
                   check=True, timeout=120)
    rows = []
    with peers.start_groupcoord(work / "data", {"group.initial.rebalance.delay.ms": "3000"}) as server:
        v = negotiate(server.versions)
        for strategy in args.strategies.split(","):
            topic = f"scale-{strategy}"

            async def create(topic: str = topic) -> None:
                conn = await Conn(server.host, server.port).open()
                await groups.create_topic(conn, v, topic, partitions)
                conn.close()

            asyncio.run(create())
            c0 = cpu.cpu_seconds(server.pid)
            started = time.perf_counter()
            res = subprocess.run(["java", "-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
                                  os.pathsep.join([str(work), classpath]), "GroupScaleBench",
                                  f"{server.host}:{server.port}", topic, f"group-{strategy}", strategy, str(members),
                                  str(partitions), str(args.rate), str(args.quiet_ms), str(args.timeout_ms)],
                                 capture_output=True, text=True, timeout=args.timeout_ms / 1000 * 2 + 120)
            line = (res.stdout.strip().splitlines() or [f"error=no output rc={res.returncode}"])[-1]
            row = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            row["wall_s"] = f"{time.perf_counter() - started:.1f}"
            row["server_cpu_s"] = f"{cpu.cpu_seconds(server.pid) - c0:.1f}"
            row["load"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
            if res.returncode:
                row["stderr"] = res.stderr[-800:]
            print(row, flush=True)
            rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=("shard", "socket", "converge", "moved", "profile", "clients"))
    ap.add_argument("--members", type=int)
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--processes", type=int, default=2, help="socket: loader processes")
    ap.add_argument("--rounds", type=int, default=2, help="socket: measured windows per protocol, alternating")
    ap.add_argument("--only", default="consumer,classic", help="socket: protocols to measure")
    ap.add_argument("--profile", default="", help="socket: run the server under cProfile, stats to this file")
    ap.add_argument("--strategies", default="range,cooperative-sticky,consumer", help="clients: strategies")
    ap.add_argument("--rate", type=int, default=2000, help="clients: records produced per second")
    ap.add_argument("--quiet-ms", type=int, default=8000, help="clients: no assignment change this long = stable")
    ap.add_argument("--timeout-ms", type=int, default=90_000, help="clients: bound on each phase")
    args = ap.parse_args()
    print(machine(), flush=True)
    if args.part == "shard":
        for members in ([args.members] if args.members else [100, 1000]):
            print(shard_part(members, args.partitions or members * 10, args.repeat), flush=True)
    elif args.part == "profile":
        profile_shard(args.members or 1000, args.partitions or 10_000)
    elif args.part == "socket":
        args.only = args.only.split(",")
        print(socket_part(args.members or 100, args.partitions or 1000, args)) 
    elif args.part == "converge":
        members = args.members or 1000
        for interval in (1000, 0):
            for ack_now in (True, False):
                print(scale_by_one(members, args.partitions or members * 10, interval, ack_now), flush=True)
    elif args.part == "clients":
        clients_part(args.members or 20, args.partitions or (args.members or 20) * 10, args)
    elif args.part == "moved":
        members = args.members or 100
        for partitions in ([args.partitions] if args.partitions else [1000, 1010, 10_000]):
            print(scale_by_one(members, partitions, 0, True), flush=True)
    print(machine(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
