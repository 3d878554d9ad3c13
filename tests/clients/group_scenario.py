"""Consumer-group scenarios for the group tests: members are stock-client processes
(``java/GroupConsumer.java``, ``group_member.py``, ``js/group_consumer.js``, ``kcat -G``) that
print one line per assignment change, consumed record and commit; the scenario produces,
kills members, crashes the server and checks what the members printed against what was
produced and what OffsetFetch reports.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.clients import py_clients as pc
from tests.clients.background import Background, start_java
from tests.clients.records_io import Rec, create_topic
from tests.clients.tools import JS_SRC, _which, kafkajs_dir, kcat_path

HERE = Path(__file__).resolve().parent
P = 12
SESSION_MS = 6000


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """``count`` records, record i on partition i % P (so each partition gets count / P)."""
    recs = [Rec(i % P, int(time.time() * 1000), f"k{i}".encode(), f"v{i}".encode()) for i in range(start, start + count)]
    pc.confluent_produce(bootstrap, topic, recs)


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """OffsetFetch through kafka-python's admin client: partition -> committed offset."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        res = admin.list_group_offsets(group)[group]
        return {tp.partition: om.offset for tp, om in res.items()}
    finally:
        admin.close()


def _parts(s: str) -> set[int]:
    return {int(x) for x in s.split(",") if x.strip() != ""}


_KCAT_PART = re.compile(r"\[(\d+)\]")


@dataclass
class Member:
    name: str
    kind: str
    bg: Background
    stop_file: Path
    killed_at: int | None = None  # line index when SIGKILLed
    log_path: Path | None = None  # where ctx() writes the full stdout/stderr

    # -------------------------------------------------------------- parsed view of the lines

    def events(self) -> list[tuple[str, str]]:
        out = []
        for line in list(self.bg.lines):
            tag, _, rest = line.partition(" ")
            out.append((tag, rest))
        if self.kind == "kcat":  # rebalance lines are on stderr: "% Group g rebalanced ...: assigned: t [0], ..."
            out = [e for e in out if e[0] == "R"]
        return out

    def assignment(self) -> set[int] | None:
        """Current assignment (last A minus later REV/LOST); None before the first A."""
        cur: set[int] | None = None
        if self.kind == "kcat":
            for line in list(self.bg.err_lines):
                if "assigned:" in line:
                    cur = set(int(x) for x in _KCAT_PART.findall(line.split("assigned:", 1)[1]))
                elif "revoked:" in line and cur is not None:
                    cur -= set(int(x) for x in _KCAT_PART.findall(line.split("revoked:", 1)[1]))
            return cur
        for tag, rest in self.events():
            if tag == "A":
                cur = _parts(rest)
            elif tag in ("REV", "LOST") and cur is not None:
                cur -= _parts(rest)
        return cur

    def records(self, since: int = 0) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for tag, rest in self.events()[since:] if tag == "R"
                for a, b in [rest.split()]]

    def commits(self) -> dict[int, int]:
        c: dict[int, int] = {}
        for tag, rest in self.events():
            if tag == "C":
                p, o = map(int, rest.split())
                c[p] = max(c.get(p, 0), o)
        return c

    def mark(self) -> int:
        return len(self.bg.lines)

    def alive(self) -> bool:
        return self.bg.proc.poll() is None

    # -------------------------------------------------------------- control

    def kill(self) -> None:
        """SIGKILL the member's whole process group (no LeaveGroup, no commit)."""
        self.killed_at = self.mark()
        try:
            os.killpg(self.bg.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.bg.proc.wait()

    def request_stop(self) -> None:
        if self.kind == "kcat":
            if self.alive():
                self.bg.proc.send_signal(signal.SIGTERM)
        else:
            self.stop_file.touch()

    def describe(self) -> str:
        return f"=== member {self.name} ({self.kind}) ===\n" + self.bg.describe(tail=40)


def start_member(kind: str, name: str, bootstrap: str, topic: str, group: str, strategy: str, tmp: Path,
                 instance: str = "-", session_ms: int = SESSION_MS, delay_ms: int = 30, max_poll: int = 25,
                 seek_committed: bool = False) -> Member:
    """A member process. ``seek_committed`` (Java, consumer protocol only): GroupConsumer.java's
    "seek-committed", the workaround for kafka-clients 3.9.1 resetting a partition assigned while
    it updates fetch positions to ``auto.offset.reset`` instead of its committed offset
    (KAFKA-17066, https://issues.apache.org/jira/browse/KAFKA-17066; tests/clients/FINDINGS.md)."""
    assert not seek_committed or (kind == "java" and strategy.startswith("consumer")), \
        "seek_committed: Java consumer-protocol members only"
    stop = tmp / f"stop-{name}-{uuid.uuid4().hex[:6]}"
    common = [bootstrap, topic, group]
    if kind == "java":
        seek = ["seek-committed"] if seek_committed else []
        bg = start_java("GroupConsumer", [*common, strategy, instance, session_ms, stop, delay_ms, max_poll, *seek],
                        sources=["GroupConsumer.java"])
    elif kind in ("confluent", "kafka-python", "aiokafka"):
        bg = Background([sys.executable, str(HERE / "group_member.py"), kind, *common, strategy, instance,
                         session_ms, stop, delay_ms, max_poll])
    elif kind == "kafkajs":
        assert instance == "-" and strategy == "roundrobin", "kafkajs: RoundRobinAssigner, no static membership"
        node = _which("node")
        bg = Background(["/usr/bin/env", f"NODE_PATH={kafkajs_dir() / 'node_modules'}", node,
                         str(JS_SRC / "group_consumer.js"), *common, session_ms, stop, delay_ms, 2048])
    elif kind == "kcat":
        args = [kcat_path(), "-u", "-E", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-f", "R %p %o\\n",
                "-X", f"session.timeout.ms={session_ms}", "-X", "heartbeat.interval.ms=500",
                "-X", f"partition.assignment.strategy={strategy}", "-X", "auto.commit.interval.ms=200",
                "-X", "fetch.max.bytes=4096", "-X", "message.max.bytes=4096", "-X", "max.partition.fetch.bytes=1024",
                "-X", "reconnect.backoff.max.ms=500"]
        if instance != "-":
            args += ["-X", f"group.instance.id={instance}"]
        bg = Background([*args, topic])
    else:
        raise ValueError(kind)
    return Member(name, kind, bg, stop, log_path=tmp / f"member-{name}-{uuid.uuid4().hex[:6]}.log")


def ctx(members: Sequence[Member], server=None) -> str:  # type: ignore[no-untyped-def]
    for m in members:
        if m.log_path is not None:
            m.log_path.write_text("\n".join(list(m.bg.lines)) + "\n--- stderr ---\n" + "\n".join(list(m.bg.err_lines)))
    s = "full member logs: " + ", ".join(str(m.log_path) for m in members) + "\n"
    s += "\n".join(m.describe() for m in members)
    if server is not None:
        s += "\n=== server log (tail) ===\n" + "\n".join(server.log_text().splitlines()[-60:])
    return s


def wait_until(pred: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def stable(members: Sequence[Member]) -> bool:
    """Every live member has a non-empty assignment; the assignments partition 0..P-1."""
    seen: list[int] = []
    for m in members:
        if not m.alive():
            continue
        a = m.assignment()
        if not a:
            return False
        seen += sorted(a)
    return sorted(seen) == list(range(P))


def wait_stable(members: Sequence[Member], timeout: float, hold: float = 1.5) -> bool:
    """``stable`` held continuously for ``hold`` seconds (rebalances have settled)."""
    deadline = time.monotonic() + timeout
    since: float | None = None
    while time.monotonic() < deadline:
        if stable(members):
            since = since or time.monotonic()
            if time.monotonic() - since >= hold:
                return True
        else:
            since = None
        time.sleep(0.1)
    return False


def consumed(members: Sequence[Member]) -> list[tuple[int, int, str]]:
    return [(p, o, m.name) for m in members for p, o in m.records()]


def all_consumed(members: Sequence[Member], total: int) -> bool:
    return len({(p, o) for p, o, _ in consumed(members)}) >= total


def check_exactly_once(members: Sequence[Member], total: int, allowed_dupe: Callable[[int, int, list[str]], bool],
                       why: str) -> None:
    """Every (partition, offset) < total/P per partition consumed; duplicates only where allowed."""
    by: dict[tuple[int, int], list[str]] = {}
    for p, o, name in consumed(members):
        by.setdefault((p, o), []).append(name)
    want = {(p, o) for p in range(P) for o in range(total // P)}
    missing = sorted(want - set(by))
    assert not missing, f"{len(missing)} records never consumed, e.g. {missing[:10]}\n{why}"
    extra = sorted(set(by) - want)
    assert not extra, f"consumed offsets that were never produced: {extra[:10]}\n{why}"
    dupes = {k: v for k, v in by.items() if len(v) > 1 and not allowed_dupe(k[0], k[1], v)}
    assert not dupes, (f"{len(dupes)} records consumed more than once (not explained by a killed member's "
                       f"uncommitted records), e.g. {sorted(dupes.items())[:10]}\n{why}")


def revoked_then_kept(m: Member, since: int = 0) -> list[str]:
    """Revocations of partitions that the member owns again in its next A line (eager behaviour)."""
    bad = []
    evs = m.events()
    for i, (tag, rest) in enumerate(evs):
        if i < since or tag != "REV":
            continue
        nxt = next((r for t, r in evs[i + 1:] if t == "A"), None)
        if nxt is not None and _parts(rest) & _parts(nxt):
            bad.append(f"REV {rest} then A {nxt}")
    return bad


@dataclass
class Outcome:
    members: list[Member] = field(default_factory=list)
    topic: str = ""
    group: str = ""
    takeover_s: float | None = None


def run_group_scenario(server, tmp: Path, kinds: Sequence[str], strategy: str, *, kill_member: bool = True,  # type: ignore[no-untyped-def]
                       restart_server: bool = True, n1: int = 3000, n2: int = 1200, n3: int = 1200,
                       cooperative: bool = False, stop_at_end: bool = True, group: str | None = None) -> Outcome:
    bs = server.bootstrap
    topic = uid("grp-t")
    group = group or uid("grp-g")
    create_topic(bs, topic, P)
    produce(bs, topic, 0, n1)
    out = Outcome(topic=topic, group=group)
    members = out.members
    try:
        for i, kind in enumerate(kinds):
            members.append(start_member(kind, f"m{i}-{kind}", bs, topic, group, strategy, tmp))

        # -------- phase 1: the group forms, every record once, one owner per partition, commits visible
        ok = wait_until(lambda: all_consumed(members, n1), 60)
        assert ok, f"phase 1: not all {n1} records consumed within 60 s\n{ctx(members, server)}"
        assert wait_stable(members, 30), f"phase 1: assignments never settled to one owner per partition\n" \
                                         f"{[(m.name, m.assignment()) for m in members]}\n{ctx(members, server)}"
        check_exactly_once(members, n1, lambda p, o, who: False, ctx(members, server))
        want = {p: n1 // P for p in range(P)}
        got: dict[int, int] = {}
        assert wait_until(lambda: (got.update(committed_offsets(bs, group)) or got) == want, 15, 0.5), \
            f"phase 1: OffsetFetch {got}, want {want}\n{ctx(members, server)}"
        if cooperative:
            bad = {m.name: revoked_then_kept(m) for m in members}
            assert not any(bad.values()), f"cooperative: a member revoked partitions it kept: {bad}\n{ctx(members)}"
        total = n1

        # -------- phase 2: SIGKILL one member, the others take its partitions
        if kill_member:
            victim = members[0]
            vcommits = dict(victim.commits())
            marks = {m.name: m.mark() for m in members}
            before = {m.name: m.assignment() for m in members}
            victim.kill()
            t0 = time.monotonic()
            produce(bs, topic, total, n2)
            total += n2
            survivors = [m for m in members if m is not victim]
            assert wait_stable(survivors, SESSION_MS / 1000 + 20, hold=0.5), \
                f"survivors never covered all partitions after the kill\n{ctx(members, server)}"
            # stable() turned true at (at most) now - hold
            out.takeover_s = time.monotonic() - t0 - 0.5
            print(f"takeover after SIGKILL of {victim.name}: {out.takeover_s:.1f} s")
            # A SIGKILLed member is only noticed when its session expires (its last heartbeat was
            # at most one heartbeat interval, 500 ms, before the kill), as on Kafka.
            assert out.takeover_s >= SESSION_MS / 1000 - 1.5, \
                f"takeover after {out.takeover_s:.1f} s, before the session timeout ({SESSION_MS} ms)\n{ctx(members, server)}"
            assert out.takeover_s <= SESSION_MS / 1000 + 6, \
                f"takeover took {out.takeover_s:.1f} s (> session {SESSION_MS} ms + 6 s)\n{ctx(members, server)}"
            assert wait_until(lambda: all_consumed(members, total), 40), \
                f"phase 2: not all {total} records consumed\n{ctx(members, server)}"

            def victim_uncommitted(p: int, o: int, who: list[str]) -> bool:
                """Consumed by the killed member after its last commit, and once more by a survivor."""
                return len(who) == 2 and victim.name in who and o >= vcommits.get(p, 0)

            check_exactly_once(members, total, victim_uncommitted, ctx(members, server))
            if cooperative:
                for m in survivors:
                    revs = [e for e in m.events()[marks[m.name]:] if e[0] in ("REV", "LOST")]
                    assert not revs, f"cooperative: {m.name} had {revs} when a member left\n{ctx(members)}"
                    assert before[m.name] <= (m.assignment() or set()), \
                        f"cooperative: {m.name} lost partitions {before[m.name]} -> {m.assignment()}\n{ctx(members)}"
            members_live = survivors
        else:
            members_live = list(members)

        # -------- phase 3: SIGKILL and restart the server; members resume from committed offsets
        if restart_server:
            want = {p: total // P for p in range(P)}
            got = {}
            assert wait_until(lambda: (got.update(committed_offsets(bs, group)) or got) == want, 20, 0.5), \
                f"before server kill: OffsetFetch {got}, want {want}\n{ctx(members, server)}"
            marks = {m.name: m.mark() for m in members_live}
            server.kill()
            time.sleep(0.5)
            server.start()
            produce(bs, topic, total, n3)
            total += n3
            assert wait_until(lambda: all_consumed(members_live, total) if not kill_member
                              else all_consumed(members, total), 60), \
                f"phase 3: not all {total} records consumed after the server restart\n{ctx(members, server)}"
            early = [(m.name, p, o) for m in members_live for p, o in m.records(marks[m.name]) if o < want[p]]
            assert not early, (f"after the server restart members re-consumed {len(early)} records below the "
                               f"committed offsets {want}, e.g. {early[:10]}\n{ctx(members, server)}")
            later = {}
            for m in members_live:
                for p, o in m.records(marks[m.name]):
                    later.setdefault((p, o), []).append(m.name)
            d = {k: v for k, v in later.items() if len(v) > 1}
            assert not d, f"after the server restart records consumed twice: {sorted(d.items())[:10]}\n{ctx(members, server)}"
            assert wait_stable(members_live, 30, hold=0.5), f"no stable assignment after the restart\n{ctx(members, server)}"

        # -------- end: graceful stop, final commits visible
        if stop_at_end:
            for m in members:
                if m.alive():
                    m.request_stop()
            for m in members:
                if m.alive():
                    rc = m.bg.wait(30)
                    assert rc is not None, f"{m.name} did not stop\n{ctx(members, server)}"
            want = {p: total // P for p in range(P)}
            got = {}
            assert wait_until(lambda: (got.update(committed_offsets(bs, group)) or got) == want, 15, 0.5), \
                f"end: OffsetFetch {got}, want {want}\n{ctx(members, server)}"
        return out
    finally:
        if stop_at_end:
            for m in members:
                m.bg.stop()
