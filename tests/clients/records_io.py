"""Record sets for the produce/consume client tests, and the line format shared with the
Java (``java/ProduceConsume.java``) and kafkajs (``js/produce_consume.js``) programs.

Input file, one record a line::

    <partition> <timestamp> <key> <value> <headers>

Consumed record line printed by the programs::

    R <partition> <offset> <timestamp> <timestamp-type> <key> <value> <headers>

``<key>``/``<value>``: ``-`` for null, else ``x`` + lowercase hex (``x`` alone: empty).
``<headers>``: ``h`` + comma-separated ``<key-utf8-as-hex-field>:<value-field>`` in order.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

Headers = tuple[tuple[str, "bytes | None"], ...]


@dataclass(frozen=True)
class Rec:
    partition: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str
    key: bytes | None
    value: bytes | None
    headers: Headers

    def rec(self) -> Rec:
        return Rec(self.partition, self.timestamp, self.key, self.value, self.headers)


# ------------------------------------------------------------------------------ encoding


def enc(b: bytes | None) -> str:
    return "-" if b is None else "x" + b.hex()


def dec(s: str) -> bytes | None:
    if s == "-":
        return None
    assert s.startswith("x"), s
    return bytes.fromhex(s[1:])


def enc_headers(headers: Headers) -> str:
    return "h" + ",".join(f"{enc(k.encode())}:{enc(v)}" for k, v in headers)


def dec_headers(s: str) -> Headers:
    assert s.startswith("h"), s
    if s == "h":
        return ()
    out = []
    for item in s[1:].split(","):
        k, _, v = item.partition(":")
        key = dec(k)
        assert key is not None
        out.append((key.decode(), dec(v)))
    return tuple(out)


def write_records(path: Path, recs: Sequence[Rec]) -> Path:
    with open(path, "w") as f:
        for r in recs:
            f.write(f"{r.partition} {r.timestamp} {enc(r.key)} {enc(r.value)} {enc_headers(r.headers)}\n")
    return path


def parse_got(stdout: str) -> list[Got]:
    out = []
    for line in stdout.splitlines():
        if not line.startswith("R "):
            continue
        _, p, o, ts, tt, k, v, h = line.split(" ")
        out.append(Got(int(p), int(o), int(ts), tt, dec(k), dec(v), dec_headers(h)))
    return out


def parse_acks(stdout: str) -> dict[int, tuple[int, int]]:
    """``A <index> <partition> <offset>`` lines: index -> (partition, offset)."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("A "):
            _, i, p, o = line.split(" ")[:4]
            out[int(i)] = (int(p), int(o))
    return out


# ------------------------------------------------------------------------------ record sets


def make_records(n: int = 300, partitions: int = 3, *, null_values: bool = True,
                 null_header_values: bool = True, null_keys: bool = True) -> list[Rec]:
    """Keys, values (text, binary, empty, large compressible, null), headers (none, several,
    duplicate keys, non-ASCII keys, binary, empty and null values), explicit timestamps near now
    (so retention never deletes them), some out of order."""
    base = int(time.time() * 1000) - 600_000
    recs = []
    for i in range(n):
        p = i % partitions
        key: bytes | None = f"key-{i}".encode()
        if null_keys and i % 50 == 7:
            key = None
        elif i % 40 == 3:
            key = b""
        if i % 7 == 0:
            value: bytes | None = bytes((i * 31 + j) % 256 for j in range(64 + i % 50))
        elif i % 11 == 0:
            value = b""
        elif null_values and i % 23 == 1:
            value = None
        elif i % 29 == 2:
            value = (f"large-{i}-" * 400).encode()  # ~4 KB, compressible
        else:
            value = f"value-{i} \u00e9\u4e2d".encode()
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 1:
            headers = [("h-a", str(i).encode()), ("bin", bytes([i % 256, 0, 255])), ("h-a", b"dup")]
        elif i % 3 == 2:
            headers = [("\u00fcn\u00efc\u00f6de", b"\xff\xfe"), ("empty", b"")]
            if null_header_values and i % 10 == 2:
                headers.append(("null-h", None))
        ts = base + i * 10
        if i % 17 == 5:
            ts = base - 5_000 + i  # older than its predecessors: CreateTime need not be monotonic
        recs.append(Rec(p, ts, key, value, tuple(headers)))
    return recs


def by_partition(recs: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in recs:
        out.setdefault(r.partition, []).append(r)
    return out


def assert_same(expected: Sequence[Rec], got: Sequence[Got], ctx: str = "", first_offset: int = 0,
                timestamp_type: str = "CreateTime") -> None:
    """Per partition: the same records, in order, at consecutive offsets from ``first_offset``."""
    exp = by_partition(expected)
    act: dict[int, list[Got]] = {}
    for g in got:
        act.setdefault(g.partition, []).append(g)
    assert sorted(act) == sorted(exp), f"partitions differ: got {sorted(act)}, expected {sorted(exp)}\n{ctx}"
    for p, recs in exp.items():
        gots = act[p]
        offsets = [g.offset for g in gots]
        assert offsets == list(range(first_offset, first_offset + len(recs))), \
            f"partition {p}: offsets {offsets[:20]}... (len {len(offsets)}), expected {first_offset}..{first_offset + len(recs) - 1}\n{ctx}"
        for i, (e, g) in enumerate(zip(recs, gots, strict=True)):
            assert g.rec() == e, f"partition {p} record #{i} (offset {g.offset}) differs:\n got {g}\n exp {e}\n{ctx}"
        assert {g.timestamp_type for g in gots} == {timestamp_type}, f"partition {p}: {ctx}"


# ------------------------------------------------------------------------------ topics


def create_topic(bootstrap: str, topic: str, partitions: int = 3, config: dict[str, str] | None = None) -> None:
    """CreateTopics through confluent-kafka's AdminClient (fails the test on an error)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    fut = admin.create_topics([NewTopic(topic, partitions, 1, config=dict(config or {}))], request_timeout=10)
    fut[topic].result(timeout=15)
