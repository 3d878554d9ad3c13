"""What security costs on one node (issue 33): the same requests over PLAINTEXT and over SASL_SSL.

One ``groupcoord serve`` with three listeners — PLAINTEXT, SASL_PLAINTEXT and SASL_SSL (a CA and a
server certificate for 127.0.0.1 made with trustme) — SCRAM-SHA-512 user ``admin`` (4096
iterations, made offline with ``groupcoord users add``) and the ACL authorizer on, with
``User:admin`` and ``User:ANONYMOUS`` as super users so that both sides pass the same check.

Measured, each phase for ``--seconds`` after ``--warmup`` seconds, CPU = the server process's
utime + stime (``/proc/<pid>/stat``) over the window:

- **OffsetCommit / OffsetFetch** (10 partitions, simple-consumer commits, ``--window`` requests in
  flight on ``--connections`` connections): requests/s and server CPU µs per request, PLAINTEXT
  against SASL_SSL (one TLS session, SCRAM-SHA-512 once per connection, then the same frames).
- **TLS handshakes**: new connections to the SASL_SSL listener that finish the TLS handshake and
  an ApiVersions exchange, then close (``--connections`` at a time): per second, and server CPU ms each.
- **SCRAM-SHA-512 authentications**: SaslHandshake v1 + two SaslAuthenticate rounds on new
  connections, on SASL_PLAINTEXT (SCRAM alone) and on SASL_SSL (TLS + SCRAM). The client keeps
  its SaltedPassword (RFC 5802 §3) across logins, so its PBKDF2 runs once and the figure is the
  server's.
- **An ACL check with 10,000 ACLs**: ``bench/acl_bench.py``, run as a child process.

The client runs beside the server on the same machine: a loaded machine lowers the rates, the
CPU per request less so. Run: ``.venv/bin/python bench/security_bench.py`` (~2 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import secrets
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import trustme  # noqa: E402
from kafka.protocol.metadata import ApiVersionsRequest  # noqa: E402
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest  # noqa: E402
from loadgen import messages  # noqa: E402
from loadgen.cpu import cpu_seconds  # noqa: E402
from loadgen.groups import create_topic, ensure_coordinator  # noqa: E402
from loadgen.wire import SIZE, Conn, decode, encode, with_cid  # noqa: E402

from protocol.apis import ApiKey  # noqa: E402

USER, PASSWORD, MECHANISM = "admin", "admin-secret", "SCRAM-SHA-512"
TOPIC, GROUP, PARTITIONS = "sec-bench", "sec-bench-group", 10
COMMIT_V, FETCH_V = 9, 9  # the highest the loader speaks with topic names (bench/loadgen/wire.py)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """The server process with its three listeners."""

    def __init__(self, root: Path) -> None:
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        cert.private_key_and_cert_chain_pem.write_to_path(str(root / "server.pem"))
        self.client_ssl = ssl.create_default_context()
        ca.configure_trust(self.client_ssl)
        data = root / "data"
        data.mkdir()
        subprocess.run([sys.executable, "-m", "coordinator", "users", "add", USER, "--mechanism", MECHANISM,
                        "--password", PASSWORD, "--data-dir", str(data)], cwd=REPO, check=True, capture_output=True)
        self.ports = {name: free_port() for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")}
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        self.log = root / "server.log"
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(data),
                "--set", f"listeners={listeners}", "--set", f"ssl.keystore.location={root / 'server.pem'}",
                "--set", f"sasl.enabled.mechanisms={MECHANISM}", "--set", "authorizer.class.name=groupcoord",
                "--set", f"super.users=User:{USER};User:ANONYMOUS",
                "--set", "offsets.topic.num.partitions=1", "--set", "offsets.topic.replication.factor=1"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 30
        for port in self.ports.values():
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(self.log.read_text())
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(self.log.read_text()) from None
                    time.sleep(0.05)

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


class ScramSha512:
    """A SCRAM-SHA-512 client (RFC 5802) that keeps SaltedPassword per (salt, iterations)."""

    salted: dict[tuple[bytes, int], bytes] = {}

    def first(self) -> bytes:
        self.nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        self.bare = f"n={USER},r={self.nonce}"
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        key = (salt, iterations)
        if key not in self.salted:
            self.salted[key] = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), salt, iterations)
        salted = self.salted[key]
        client_key = hmac.digest(salted, b"Client Key", "sha512")
        stored_key = hashlib.sha512(client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, "sha512")
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


class Client:
    """One connection: request/response for the handshakes, then a pipelined window for the load."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.cid = reader, writer, 0

    @classmethod
    async def open(cls, port: int, tls: ssl.SSLContext | None) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls,
                                                       server_hostname="127.0.0.1" if tls else None)
        return cls(reader, writer)

    async def request(self, api: int, version: int, message: Any) -> Any:
        self.cid += 1
        self.writer.write(encode(api, version, message, self.cid))
        size = SIZE.unpack(await self.reader.readexactly(4))[0]
        cid, response = decode(api, version, await self.reader.readexactly(size))
        assert cid == self.cid, (cid, self.cid)
        return response

    async def api_versions(self) -> None:
        r = await self.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
            version=3, client_software_name="security-bench", client_software_version="1"))
        assert r.error_code == 0, r

    async def scram(self) -> None:
        r = await self.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(version=1, mechanism=MECHANISM))
        assert r.error_code == 0, r
        scram = ScramSha512()
        r = await self.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(version=2, auth_bytes=scram.first()))
        assert r.error_code == 0, r
        r = await self.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
            version=2, auth_bytes=scram.final(bytes(r.auth_bytes))))
        assert r.error_code == 0, (r.error_code, r.error_message)

    async def pipeline(self, frame: bytes, window: int, stop: asyncio.Event, counts: list[int]) -> None:
        """Keep ``window`` copies of ``frame`` in flight until ``stop``; count answers in counts[0]."""
        in_flight = 0
        while not stop.is_set() or in_flight:
            while in_flight < window and not stop.is_set():
                self.cid += 1
                self.writer.write(with_cid(frame, self.cid))
                in_flight += 1
            size = SIZE.unpack(await self.reader.readexactly(4))[0]
            await self.reader.readexactly(size)
            in_flight -= 1
            counts[0] += 1

    def close(self) -> None:
        self.writer.close()


async def measure(node: Node, warmup: float, seconds: float,
                  work: Callable[[asyncio.Event, list[int]], Awaitable[None]]) -> tuple[float, float]:
    """Run ``work`` for warmup + seconds; (operations per second, server CPU seconds per operation)
    over the measured window."""
    stop, counts = asyncio.Event(), [0]
    task = asyncio.ensure_future(work(stop, counts))
    await asyncio.sleep(warmup)
    n0, c0, t0 = counts[0], node.cpu(), time.monotonic()
    await asyncio.sleep(seconds)
    n1, c1, t1 = counts[0], node.cpu(), time.monotonic()
    stop.set()
    await task
    done = n1 - n0
    return done / (t1 - t0), (c1 - c0) / max(done, 1)


async def offsets(node: Node, listener: str, frame: bytes, args: argparse.Namespace) -> tuple[float, float]:
    tls = node.client_ssl if listener == "SASL_SSL" else None
    clients = [await Client.open(node.ports[listener], tls) for _ in range(args.connections)]
    for c in clients:
        await c.api_versions()
        if listener != "PLAINTEXT":
            await c.scram()

    # One answer checked before the load: every partition without error (the offsets partition
    # may still be loading right after start: NOT_COORDINATOR and its kin are waited out).
    api, version = int.from_bytes(frame[4:6], "big"), int.from_bytes(frame[6:8], "big")
    deadline = time.monotonic() + 30
    while True:
        clients[0].cid += 1
        clients[0].writer.write(with_cid(frame, clients[0].cid))
        size = SIZE.unpack(await clients[0].reader.readexactly(4))[0]
        errors = messages.response_errors(api, version, await clients[0].reader.readexactly(size))
        if not errors:
            break
        assert set(errors) <= {14, 15, 16} and time.monotonic() < deadline, f"{listener} api {api}: {errors}"
        await asyncio.sleep(0.2)

    async def work(stop: asyncio.Event, counts: list[int]) -> None:
        await asyncio.gather(*(c.pipeline(frame, args.window, stop, counts) for c in clients))

    try:
        return await measure(node, args.warmup, args.seconds, work)
    finally:
        for c in clients:
            c.close()


async def logins(node: Node, listener: str, scram: bool, args: argparse.Namespace) -> tuple[float, float]:
    """New connections, each: TLS handshake (SASL_SSL), ApiVersions, SCRAM (if ``scram``), close."""
    tls = node.client_ssl if listener == "SASL_SSL" else None

    async def one_at_a_time(stop: asyncio.Event, counts: list[int]) -> None:
        while not stop.is_set():
            c = await Client.open(node.ports[listener], tls)
            await c.api_versions()
            if scram:
                await c.scram()
            c.close()
            counts[0] += 1

    async def work(stop: asyncio.Event, counts: list[int]) -> None:
        await asyncio.gather(*(one_at_a_time(stop, counts) for _ in range(args.connections)))

    return await measure(node, args.warmup, args.seconds, work)


def row(name: str, rate: float, cpu: float, unit: str = "µs") -> str:
    scale = 1e6 if unit == "µs" else 1e3
    return f"| {name} | {rate:,.0f} | {cpu * scale:,.{1 if unit == 'µs' else 2}f} {unit} |"


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp:
        node = Node(Path(tmp))
        try:
            conn = await Conn("127.0.0.1", node.ports["PLAINTEXT"]).open()
            await create_topic(conn, {ApiKey.CREATE_TOPICS: 7}, TOPIC, PARTITIONS)
            conn.close()
            # FindCoordinator creates __consumer_offsets on first use, as in Kafka.
            await ensure_coordinator("127.0.0.1", node.ports["PLAINTEXT"], {ApiKey.FIND_COORDINATOR: 3,
                                     ApiKey.OFFSET_COMMIT: COMMIT_V, ApiKey.OFFSET_FETCH: FETCH_V,
                                     ApiKey.HEARTBEAT: 4}, [GROUP], TOPIC, 60)
            commit = messages.commit_frame(COMMIT_V, GROUP, TOPIC, PARTITIONS)
            fetch = messages.fetch_frame(FETCH_V, GROUP, TOPIC, PARTITIONS)
            print(f"groupcoord {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=REPO, capture_output=True, text=True).stdout.strip()}, "
                  f"load average {os.getloadavg()[0]:.1f} at start; {args.connections} connections, window {args.window}, "
                  f"{args.seconds:g} s measured after {args.warmup:g} s", flush=True)
            print("\n| requests (10 partitions) | requests/s | server CPU per request |\n|---|---|---|")
            for name, frame in (("OffsetCommit v9", commit), ("OffsetFetch v9", fetch)):
                for listener in ("PLAINTEXT", "SASL_SSL"):
                    rate, cpu = await offsets(node, listener, frame, args)
                    print(row(f"{name}, {listener}", rate, cpu), flush=True)
            print("\n| new connections | per second | server CPU each |\n|---|---|---|")
            for name, listener, scram in (("PLAINTEXT: connect + ApiVersions", "PLAINTEXT", False),
                                          ("SASL_SSL: TLS handshake + ApiVersions", "SASL_SSL", False),
                                          ("SASL_PLAINTEXT: ApiVersions + SCRAM-SHA-512", "SASL_PLAINTEXT", True),
                                          ("SASL_SSL: TLS + ApiVersions + SCRAM-SHA-512", "SASL_SSL", True)):
                rate, cpu = await logins(node, listener, scram, args)
                print(row(name, rate, cpu, "ms"), flush=True)
            print(f"\nload average {os.getloadavg()[0]:.1f} at the end", flush=True)
        finally:
            node.stop()
    if not args.no_acl:
        print("\nbench/acl_bench.py:", flush=True)
        subprocess.run([sys.executable, str(REPO / "bench" / "acl_bench.py")], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per phase [8]")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds before measuring [2]")
    parser.add_argument("--connections", type=int, default=4, help="connections at a time [4]")
    parser.add_argument("--window", type=int, default=32, help="requests in flight per connection [32]")
    parser.add_argument("--no-acl", action="store_true", help="leave out bench/acl_bench.py")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
