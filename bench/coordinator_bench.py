"""Group-coordinator benchmark (issue 6): the same protocol-level workloads against groupcoord and
Tansu, side by side, with ratios (groupcoord ÷ Tansu) and the issue's targets. One command::

Kept in one file (~500 lines): a benchmark is one command, and its workloads share one harness
(servers, load, result table) that no other module uses.

    .venv/bin/python bench/coordinator_bench.py                 # everything (~15 min + log generation)
    .venv/bin/python bench/coordinator_bench.py --quick         # smoke check, ~2 min
    .venv/bin/python bench/coordinator_bench.py --only commit,fetch --server both
    .venv/bin/python bench/coordinator_bench.py --only load     # restart-and-load (groupcoord only)

Workloads (fresh server per workload and server, so no state leaks between them):

- ``commit``: OffsetCommit storm, simple-consumer commits (generation -1, no member) of 10
  partitions of an existing topic per request, over many groups (every coordinator partition).
- ``fetch``: OffsetFetch storm of the same shape, after one commit per group.
- ``heartbeat``: a stable group of M members (joined and synced first), then pipelined heartbeats
  with their member ids and generation.
- ``latency``: OffsetCommit at a fixed rate (open loop, default 5,000 requests/s in total).
- ``rebalance``: M members (100, 1,000) join one group at once: two-phase JoinGroup, the leader
  assigns, everybody syncs; time from the first JoinGroup sent to the last SyncGroup answered.
- ``load`` (groupcoord only): a generated ``__consumer_offsets`` log of 10 M commit records over
  100,000 groups; wall time from process start until every offsets partition serves the right
  offset, then RSS. Tansu's memory engine has nothing to load.
- ``memory`` (groupcoord only): RSS per cached offset, 1 M offsets over 10,000 groups, minus the
  RSS of the same server on an empty log.

groupcoord runs durable (fsync before every acknowledgement, its default) with
``group.initial.rebalance.delay.ms=0``; Tansu runs ``--storage-engine memory://tansu/`` (not
durable; it has no initial-rebalance-delay setting). Server CPU is utime+stime from
``/proc/<pid>/stat`` over the measured window, so "CPU per 1,000 requests" stays fair on a small
machine where the loader competes with the server for the same cores.

Result table: stdout and ``bench/results/coordinator-<date>[-quick].md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(REPO), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import offsets_log_gen  # noqa: E402
import peers  # noqa: E402
from loadgen import cpu, driver, groups, messages  # noqa: E402
from loadgen.storm import Spec  # noqa: E402
from loadgen.wire import negotiate  # noqa: E402

from protocol.apis import ApiKey  # noqa: E402

TOPIC = "bench"
OFFSETS_PARTITIONS = offsets_log_gen.OFFSETS_PARTITIONS
GROUPCOORD_SETTINGS = {"group.initial.rebalance.delay.ms": "0",
                       "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}


class Config:
    def __init__(self, args: argparse.Namespace) -> None:
        self.quick = args.quick
        self.seconds = args.seconds or (3.0 if args.quick else 10.0)
        self.warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 2.0)
        self.processes = args.processes
        self.connections = args.connections
        self.depth = args.depth
        self.partitions = args.partitions
        self.groups = args.groups
        self.members = args.members
        self.rate = args.rate
        self.rebalance_sizes = [100] if args.quick else [100, 1000]
        self.tansu_rebalance_cap = 15.0 if args.quick else 30.0
        self.work = Path(tempfile.mkdtemp(prefix="coordinator-bench-"))


# --- servers ---------------------------------------------------------------------------------


def start(which: str, cfg: Config, name: str) -> peers.Server:
    if which == "groupcoord":
        data = cfg.work / f"{name}-groupcoord" / "data"
        return peers.start_groupcoord(data, GROUPCOORD_SETTINGS)
    return peers.start_tansu(cfg.work / f"{name}-tansu")


def versions_text(v: dict[ApiKey, int], apis: tuple[ApiKey, ...]) -> str:
    short = {ApiKey.OFFSET_COMMIT: "OC", ApiKey.OFFSET_FETCH: "OF", ApiKey.HEARTBEAT: "HB",
             ApiKey.JOIN_GROUP: "JG", ApiKey.SYNC_GROUP: "SG"}
    return " ".join(f"{short[a]} v{v[a]}" for a in apis if a in v)


# --- workloads -------------------------------------------------------------------------------


def storm_specs(cfg: Config, server: peers.Server, api: ApiKey, version: int, frames: list[bytes], items: int,
                rate: float = 0.0, connections: int | None = None, depth: int | None = None) -> list[Spec]:
    conns = connections or cfg.connections
    return [Spec(server.host, server.port, api, version, part, items_per_request=items, connections=conns,
                 depth=depth or cfg.depth, rate=rate / cfg.processes if rate else 0.0, warmup=cfg.warmup,
                 seconds=cfg.seconds)
            for part in driver.split(frames, cfg.processes)]


def storm_row(m: driver.Measurement, versions: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    row = m.summary()
    row["versions"] = versions
    row["thread_cpu_ms_per_1000"] = round(m.server_cpu_threads_s * 1e6 / max(m.result.requests, 1), 2)
    if extra:
        row.update(extra)
    return row


def offsets_workload(kind: str, cfg: Config, server: peers.Server, rate: float = 0.0,
                     partitions: int | None = None) -> dict[str, Any]:
    v = negotiate(server.versions)
    per_request = partitions or cfg.partitions
    names = [f"{kind}-group-{i}" for i in range(cfg.groups)]
    asyncio.run(groups.prepare_offsets(server.host, server.port, v, TOPIC, cfg.partitions, names,
                                       commit=(kind == "fetch")))
    if kind == "fetch":
        api, version = ApiKey.OFFSET_FETCH, v[ApiKey.OFFSET_FETCH]
        frames = [messages.fetch_frame(version, g, TOPIC, per_request) for g in names]
    else:
        api, version = ApiKey.OFFSET_COMMIT, v[ApiKey.OFFSET_COMMIT]
        frames = [messages.commit_frame(version, g, TOPIC, per_request) for g in names]
    specs = storm_specs(cfg, server, api, version, frames, per_request, rate=rate)
    m = driver.run(specs, server.pid)
    extra: dict[str, Any] = {"partitions_per_request": per_request}
    if rate:
        extra.update(rate=rate, late_ms=round(m.result.late_ms, 2))
    return storm_row(m, versions_text(v, (api,)), extra)


def heartbeat_workload(cfg: Config, server: peers.Server) -> dict[str, Any]:
    v = negotiate(server.versions)

    async def join() -> tuple[list[groups.Member], list[groups.RebalanceResult]]:
        return await groups.stable_group(server.host, server.port, v, cfg.members, 1, timeout=120)

    loop = asyncio.new_event_loop()
    members: list[groups.Member] = []
    try:
        members, joined = loop.run_until_complete(join())
        hv = v[ApiKey.HEARTBEAT]
        frames = [messages.heartbeat_frame(hv, m.group, m.generation, m.member_id) for m in members]
        specs = storm_specs(cfg, server, ApiKey.HEARTBEAT, hv, frames, 1)
        m = driver.run(specs, server.pid)
    finally:
        for mem in members:
            mem.conn.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
    return storm_row(m, versions_text(v, (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT)),
                     {"members": len(members), "setup_s": round(joined[0].seconds or 0, 3),
                      "setup_generations": joined[0].generations})


def rebalance_workload(cfg: Config, server: peers.Server, members: int) -> dict[str, Any]:
    v = negotiate(server.versions)
    timeout = cfg.tansu_rebalance_cap if server.name == "tansu" else 30.0
    c0 = cpu.cpu_seconds(server.pid)
    r = asyncio.run(groups.rebalance(server.host, server.port, v, members, f"rebalance-{members}", timeout))
    c1 = cpu.cpu_seconds(server.pid)
    return {"members": members, "seconds": r.seconds, "generations": r.generations, "joins": r.joins,
            "syncs": r.syncs, "errors": r.errors, "timeout": timeout, "server_cpu_s": round(c1 - c0, 3),
            "versions": versions_text(v, (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP))}


def load_workload(cfg: Config, g: int, p: int, rounds: int) -> dict[str, Any]:
    """Restart-and-load: copy the cached generated log, then time first start (whole log replayed,
    no snapshot), restart after a graceful stop (snapshots), restart after SIGKILL."""
    source, info = offsets_log_gen.generate(g, p, rounds)
    data = cfg.work / "load" / "data"
    shutil.rmtree(data.parent, ignore_errors=True)
    data.parent.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(source), str(data)], check=True)
    subprocess.run(["sync"], check=True)
    probe_groups = offsets_log_gen.probes(g)
    expect = {name: offsets_log_gen.expected_offset(rounds, 0) for name in probe_groups.values()}

    def serve() -> tuple[float, float, peers.Server]:
        server = peers.start_groupcoord(data, GROUPCOORD_SETTINGS, log=cfg.work / "load" / "server.log", wait=False)
        listening = server.wait_ready(timeout=600)
        v = negotiate(server.versions)

        async def probe() -> None:
            conn = await groups.Conn(server.host, server.port).open()
            try:
                await groups.wait_serving(conn, v, list(probe_groups.values()), TOPIC, timeout=600, expect=expect)
            finally:
                conn.close()

        try:
            asyncio.run(probe())
        except BaseException:
            server.stop()
            raise
        return time.perf_counter() - server.started, listening, server

    out: dict[str, Any] = dict(info)
    runs = []
    live: list[peers.Server] = []
    try:
        _load_runs(serve, runs, live)
    finally:
        for server in live:
            server.stop()
    out["runs"] = runs
    shutil.rmtree(data.parent, ignore_errors=True)
    return out


def _load_runs(serve: Callable[[], tuple[float, float, peers.Server]], runs: list[dict[str, Any]],
               live: list[peers.Server]) -> None:
    server: peers.Server | None = None
    for label, how in (("first start, whole log (no snapshot)", None), ("restart after graceful stop", signal.SIGTERM),
                       ("restart after SIGKILL", signal.SIGKILL)):
        if how is not None and server is not None:
            server.stop(how)
        seconds, listening, server = serve()
        live.append(server)
        time.sleep(0.5)
        rss = cpu.rss_bytes(server.pid)
        runs.append({"case": label, "serving_s": round(seconds, 2), "listening_s": round(listening, 2),
                     "rss_mb": round(rss / 2**20, 1), "cpu_s": round(cpu.cpu_seconds(server.pid), 2)})
        print(f"    load: {runs[-1]}", flush=True)


def memory_workload(cfg: Config, g: int, p: int) -> dict[str, Any]:
    source, info = offsets_log_gen.generate(g, p, 1)
    data = cfg.work / "memory" / "data"
    shutil.rmtree(data.parent, ignore_errors=True)
    data.parent.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(source), str(data)], check=True)
    probe_groups = offsets_log_gen.probes(g)
    expect = {name: offsets_log_gen.expected_offset(1, 0) for name in probe_groups.values()}

    def loaded_rss(d: Path, check: bool) -> int:
        server = peers.start_groupcoord(d, GROUPCOORD_SETTINGS, log=d.parent / "server.log")
        v = negotiate(server.versions)

        async def probe() -> None:
            conn = await groups.Conn(server.host, server.port).open()
            try:
                if not check:
                    await groups.create_topic(conn, v, TOPIC, p)
                while await groups.find_coordinator(conn, v, probe_groups[0]) != 0:  # creates __consumer_offsets
                    await asyncio.sleep(0.05)
                await groups.wait_serving(conn, v, list(probe_groups.values()), TOPIC, timeout=600,
                                          expect=expect if check else None)
            finally:
                conn.close()

        try:
            asyncio.run(probe())
            time.sleep(2.0)
            return cpu.rss_bytes(server.pid)
        finally:
            server.stop()

    empty = loaded_rss(cfg.work / "memory-empty" / "data", check=False)
    full = loaded_rss(data, check=True)
    offsets = g * p
    shutil.rmtree(data.parent, ignore_errors=True)
    return {"offsets": offsets, "groups": g, "rss_empty_mb": round(empty / 2**20, 1),
            "rss_mb": round(full / 2**20, 1), "bytes_per_offset": round((full - empty) / offsets, 1)}


# --- table -----------------------------------------------------------------------------------


def fmt(v: Any, digits: int = 0) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if v != v:
            return "—"
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def errors_text(row: dict[str, Any]) -> str:
    n = row["errors"]
    fails = row.get("failures") or []
    if not n and not fails:
        return f"0 of {row['checked']:,}"
    kinds = ", ".join(f"{messages.ERROR_NAMES.get(int(k), k)}×{c:,}" for k, c in row["error_kinds"].items())
    text = f"**{n:,} ERRORS** ({kinds})" if n else ""
    if fails:
        text += f" **FAILURES**: {'; '.join(fails)}"
    return text


TARGETS = {
    "commit": ("server CPU/req ≤ 0.5×, throughput ≥ 1.5× (durable)", 0.5, 1.5),
    "fetch": ("server CPU/req ≤ 0.5×", 0.5, None),
    "heartbeat": ("server CPU/req ≤ 0.25×", 0.25, None),
}


def tree_state() -> str:
    """The commit measured, and whether the server's code had uncommitted changes (read-only git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "coordinator", "protocol", "storage"],
                               cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{head}{' + uncommitted changes in ' + str(len(dirty.splitlines())) + ' server files' if dirty else ''}"
    except Exception:  # noqa: BLE001
        return "unknown"


def fsync_ms(directory: Path, samples: int = 30) -> float:
    """Median time of write(4 KiB) + fsync in ``directory``: durable commits wait for this."""
    path = directory / "fsync-probe"
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for _ in range(samples):
            os.write(fd, b"x" * 4096)
            t = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return sorted(times)[len(times) // 2] * 1000


def render(results: dict[str, dict[str, dict[str, Any]]], cfg: Config, command: str, load_before: str,
           load_after: str, started: str) -> str:
    u = os.uname()
    lines = [f"### {started} — `{command}`", "",
             f"Machine: {os.cpu_count()} vCPUs, {platform.processor() or u.machine}, Linux {u.release}, "
             f"Python {platform.python_version()}. Load average (1/5/15 min) before: {load_before}; after: "
             f"{load_after}. Disk: write+fsync median {cfg.fsync_ms:.2f} ms. Code: {cfg.tree}. groupcoord: durable (fsync before ack), "
             f"`{' '.join(f'--set {k}={v}' for k, v in GROUPCOORD_SETTINGS.items())}`. Tansu: "
             f"{peers.tansu_version()}, `--storage-engine memory://tansu/` (not durable; no initial-rebalance-delay "
             "setting). Loader: "
             f"{cfg.processes} processes × {cfg.connections} connections × {cfg.depth} requests in flight, "
             f"{cfg.warmup:g} s warm-up + {cfg.seconds:g} s measured; {cfg.groups:,} groups, "
             f"{cfg.partitions} partitions per commit/fetch request; heartbeats from {cfg.members} members of one group. "
             "CPU = server utime+stime over the measured window ÷ requests answered in it. Every response is checked.",
             ""]
    storm = [k for k in ("commit", "fetch", "heartbeat", "latency", "latency-1p") if k in results]
    if storm:
        lines += ["| workload | server | versions | requests/s | items/s | server CPU ms / 1k req | server cores | "
                  "loader cores | p50 ms | p99 ms | errors (of responses checked) | gc ÷ Tansu | target | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in storm:
        rows = results[name]
        gc, ta = rows.get("groupcoord"), rows.get("tansu")
        for which in ("groupcoord", "tansu"):
            row = rows.get(which)
            if row is None:
                continue
            ratio = target = verdict = ""
            if which == "groupcoord":
                bad = row["errors"] or row.get("failures")
                if name in TARGETS:
                    target, cpu_limit, tput_limit = TARGETS[name]
                    if ta is not None:
                        cpu_r = gc["cpu_ms_per_1000"] / ta["cpu_ms_per_1000"] if ta["cpu_ms_per_1000"] else float("nan")
                        tput_r = gc["requests_per_s"] / ta["requests_per_s"] if ta["requests_per_s"] else float("nan")
                        ratio = f"CPU {cpu_r:.2f}×, throughput {tput_r:.2f}×"
                        ok = cpu_r <= cpu_limit and (tput_limit is None or tput_r >= tput_limit)
                        verdict = "met" if ok and not bad and not (ta["errors"] or ta.get("failures")) else "**missed**"
                        if ta["errors"] or ta.get("failures"):
                            verdict += " (Tansu errors: not comparable)"
                    else:
                        verdict = "no Tansu run"
                elif name.startswith("latency"):
                    rate = row.get("rate", cfg.rate)
                    target = (f"p99 ≤ 5 ms at {rate:,.0f} commit requests/s "
                              f"({row['partitions_per_request']} partitions each), durable")
                    if ta is not None and ta["p99_ms"]:
                        ratio = f"p99 {gc['p99_ms'] / ta['p99_ms']:.2f}×"
                    reached = row["requests_per_s"] >= 0.95 * rate
                    verdict = "met" if row["p99_ms"] <= 5.0 and reached and not bad else "**missed**"
                    if not reached:
                        verdict += " (rate not reached)"
                    cap = results.get("commit", {}).get("groupcoord")
                    if cap and row["partitions_per_request"] == cfg.partitions and cap["requests_per_s"] < rate:
                        verdict += (f" — open loop above this server's commit capacity "
                                    f"({cap['requests_per_s']:,}/s in the commit storm): the queue grows")
            lines.append(
                f"| {name} | {which} | {row['versions']} | {fmt(row['requests_per_s'])} | {fmt(row['items_per_s'])} | "
                f"{fmt(row['cpu_ms_per_1000'], 1)} | {fmt(row['server_cores'], 2)} | {fmt(row['loader_cores'], 2)} | "
                f"{fmt(row['p50_ms'], 2)} | {fmt(row['p99_ms'], 2)} | {errors_text(row)} | {ratio} | {target} | {verdict} |")
    reb = [k for k in results if k.startswith("rebalance")]
    if reb:
        lines += ["", "| workload | server | versions | joined and synced in | generations | JoinGroup / SyncGroup calls | "
                  "errors seen (retried) | server CPU s | target | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
        for name in reb:
            rows = results[name]
            for which in ("groupcoord", "tansu"):
                row = rows.get(which)
                if row is None:
                    continue
                secs = row["seconds"]
                shown = f"{secs:.3f} s" if secs is not None else f"> {row['timeout']:.0f} s (not finished; capped)"
                limit = 0.25 if row["members"] <= 100 else 2.0
                target = verdict = ""
                if which == "groupcoord":
                    target = f"≤ {limit} s (initial delay 0)"
                    verdict = "met" if secs is not None and secs <= limit else "**missed**"
                    ta = rows.get("tansu")
                    if ta is not None and ta["seconds"] and secs:
                        verdict += f"; Tansu ÷ gc = {ta['seconds'] / secs:,.0f}×"
                errs = ", ".join(f"{messages.ERROR_NAMES.get(int(k), k)}×{c}" for k, c in row["errors"].items()) or "none"
                lines.append(f"| {name} | {which} | {row['versions']} | {shown} | {row['generations']} | "
                             f"{row['joins']:,} / {row['syncs']:,} | {errs} | {row['server_cpu_s']} | {target} | {verdict} |")
    if "load" in results or "memory" in results:
        lines += ["", "groupcoord only (Tansu's memory engine has no log to load and keeps no comparable cache):", "",
                  "| workload | case | result | target | verdict |", "|---|---|---|---|---|"]
    if "load" in results:
        r = results["load"]["groupcoord"]
        desc = (f"{r['records']:,} records ({r['records_per_batch']} per batch, {r['log_bytes'] / 2**20:,.0f} MiB) over "
                f"{r['groups']:,} groups, {r['live_offsets']:,} live offsets, {r['offsets_partitions']} partitions")
        for run in r["runs"]:
            ok = run["serving_s"] <= 10.0
            lines.append(f"| load | {run['case']} | serving in {run['serving_s']:.2f} s (listening at "
                         f"{run['listening_s']:.2f} s), RSS {run['rss_mb']:,.0f} MB, CPU {run['cpu_s']:.1f} s; {desc} | "
                         f"≤ 10 s | {'met' if ok else '**missed**'} |")
    if "memory" in results:
        r = results["memory"]["groupcoord"]
        lines.append(f"| memory | {r['offsets']:,} offsets over {r['groups']:,} groups | {r['bytes_per_offset']:.0f} B "
                     f"per offset (RSS {r['rss_mb']:,.0f} MB loaded − {r['rss_empty_mb']:,.0f} MB empty) | ≤ 200 B | "
                     f"{'met' if r['bytes_per_offset'] <= 200 else '**missed**'} |")
    return "\n".join(lines) + "\n"


# --- driver ----------------------------------------------------------------------------------

ALL = ("commit", "fetch", "heartbeat", "latency", "rebalance", "load", "memory")


def main() -> int:
    ap = argparse.ArgumentParser(description="Coordinator benchmark: groupcoord vs Tansu (issue 6).")
    ap.add_argument("--quick", action="store_true", help="short runs, small load/memory logs (~2 minutes)")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(ALL)}")
    ap.add_argument("--server", choices=("groupcoord", "tansu", "both"), default="both")
    ap.add_argument("--processes", type=int, default=2, help="loader processes (default 2)")
    ap.add_argument("--connections", type=int, default=8, help="connections per loader process")
    ap.add_argument("--depth", type=int, default=8, help="requests in flight per connection")
    ap.add_argument("--seconds", type=float, default=0.0, help="measured window (default 10, quick 3)")
    ap.add_argument("--warmup", type=float, default=None, help="warm-up before the window (default 2, quick 1)")
    ap.add_argument("--partitions", type=int, default=10, help="partitions per commit/fetch request")
    ap.add_argument("--groups", type=int, default=1000, help="groups the commit/fetch storms spread over")
    ap.add_argument("--members", type=int, default=100, help="members of the heartbeating group")
    ap.add_argument("--rate", type=float, default=5000.0, help="latency workload: commit requests/s in total")
    ap.add_argument("--out", default="", help="result file (default bench/results/coordinator-<date>[-quick].md)")
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w] or list(ALL)
    for w in only:
        if w not in ALL:
            ap.error(f"unknown workload {w!r}; choose from {', '.join(ALL)}")
    cfg = Config(args)
    # SIGTERM (e.g. from timeout) unwinds like Ctrl-C, so every server started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    servers = ("groupcoord", "tansu") if args.server == "both" else (args.server,)
    if "tansu" in servers:
        peers.tansu_binary()
    command = "python bench/coordinator_bench.py " + " ".join(sys.argv[1:])
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load_before = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    cfg.fsync_ms = fsync_ms(cfg.work)
    cfg.tree = tree_state()
    results: dict[str, dict[str, dict[str, Any]]] = {}

    def each(name: str, fn: Callable[[peers.Server], dict[str, Any]], which_servers: tuple[str, ...]) -> None:
        for which in which_servers:
            server = start(which, cfg, name)
            try:
                row = fn(server)
            except Exception as e:  # noqa: BLE001 - report and go on with the other workloads
                row = None
                print(f"  {name:<14} {which:<10} FAILED: {e!r}", flush=True)
            finally:
                alive = server.alive()
                server.stop()
            if not alive:
                print(f"  {name:<14} {which:<10} SERVER DIED; log {server.log}:\n{server.log_tail()}", flush=True)
            if row is not None:
                results.setdefault(name, {})[which] = row
                shown = {k: v for k, v in row.items() if k not in ("failures",) or v}
                print(f"  {name:<14} {which:<10} {json.dumps(shown, default=str)}", flush=True)

    interrupted = ""
    try:
        if "commit" in only:
            each("commit", lambda s: offsets_workload("commit", cfg, s), servers)
        if "fetch" in only:
            each("fetch", lambda s: offsets_workload("fetch", cfg, s), servers)
        if "heartbeat" in only:
            each("heartbeat", lambda s: heartbeat_workload(cfg, s), servers)
        if "latency" in only:
            each("latency", lambda s: offsets_workload("commit", cfg, s, rate=cfg.rate), servers)
            each("latency-1p", lambda s: offsets_workload("commit", cfg, s, rate=cfg.rate, partitions=1), servers)
        if "rebalance" in only:
            for n in cfg.rebalance_sizes:
                each(f"rebalance{n}", lambda s, n=n: rebalance_workload(cfg, s, n), servers)
        if "load" in only and "groupcoord" in servers:
            g, p, r = (10_000, 10, 10) if cfg.quick else (100_000, 10, 10)
            results["load"] = {"groupcoord": load_workload(cfg, g, p, r)}
        if "memory" in only and "groupcoord" in servers:
            g, p = (1_000, 100) if cfg.quick else (10_000, 100)
            results["memory"] = {"groupcoord": memory_workload(cfg, g, p)}
            print(f"  memory         groupcoord {json.dumps(results['memory']['groupcoord'])}", flush=True)
    except (KeyboardInterrupt, SystemExit) as e:  # still write what was measured
        interrupted = f"interrupted ({type(e).__name__} {getattr(e, 'code', '')}) — partial results"
        print(f"  {interrupted}", flush=True)
    shutil.rmtree(cfg.work, ignore_errors=True)
    load_after = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    text = render(results, cfg, command, load_before, load_after, started)
    if interrupted:
        text = text.replace("\n\n", f"\n\n**Run {interrupted}.**\n\n", 1)
    print()
    print(text)
    out = Path(args.out) if args.out else (HERE / "results" / f"coordinator-{datetime.date.today()}"
                                           f"{'-quick' if cfg.quick else ''}.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as f:  # several runs a day append, newest last
        f.write(text + "\n")
    raw = out.with_suffix(".jsonl")
    with open(raw, "a") as f:
        f.write(json.dumps({"started": started, "command": command, "results": results}, default=str) + "\n")
    print(f"appended to {out} (raw numbers: {raw})")
    return 143 if interrupted else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
