"""``groupcoord users``: SCRAM users, on a stopped node's data directory or through a running server.

``users add NAME --mechanism SCRAM-SHA-512 [--iterations N] (--password P | --password-file F)``,
``users delete NAME --mechanism M``, ``users list`` — each with ``--data-dir DIR`` (offline: the
node must be stopped, its directory lock says so) or ``--bootstrap-server HOST:PORT`` (the
AlterUserScramCredentials and DescribeUserScramCredentials APIs, as ``kafka-configs.sh
--bootstrap-server … --entity-type users`` uses them; reference/security.md §4.3). Over the wire the
salt is chosen and the password salted here, so the password never leaves this process.
``--command-config`` takes the client settings Kafka's tools take for a secured listener:
``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism``,
``sasl.jaas.config`` (``username``/``password``) and ``ssl.truststore.location`` (PEM).

Exit codes: 0 done, 1 a failure reported by the server or the store, 2 bad usage.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import hashlib
import hmac
import os
import socket
import ssl
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from protocol.apis import ApiKey
from protocol.client import decode_response, encode_request

from .security.sasl.jaas import JaasError, single_login_module
from .security.sasl.scram import escape_saslname
from .security.sasl.scram_formatter import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    make_credential,
    mechanism_id,
    mechanism_name,
    salted_password,
    secure_random_string,
)
from .security.scram_credentials import FileScramStore

__all__ = ["add_parser", "run"]


class UsageError(Exception):
    pass


class Failed(Exception):
    pass


def add_parser(sub: Any) -> None:
    users = sub.add_parser("users", help="SCRAM users: add, delete, list (offline or over the wire)")
    users_sub = users.add_subparsers(dest="users_command", required=True)

    def target(p: argparse.ArgumentParser) -> None:
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--data-dir", type=Path, help="a stopped node's data directory (log.dirs)")
        where.add_argument("--bootstrap-server", help="HOST:PORT of a running server")
        p.add_argument("--command-config", type=Path,
                       help="client properties for --bootstrap-server (security.protocol, sasl.*, ssl.*)")

    add = users_sub.add_parser("add", help="create or replace a user's SCRAM credential")
    add.add_argument("name")
    add.add_argument("--mechanism", required=True, choices=sorted(MECHANISMS))
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                     help=f"{MIN_ITERATIONS}..{MAX_ITERATIONS}; default {DEFAULT_ITERATIONS}")
    secret = add.add_mutually_exclusive_group(required=True)
    secret.add_argument("--password", help="the password (visible in the process list: prefer --password-file)")
    secret.add_argument("--password-file", type=Path, help="a file whose first line is the password")
    target(add)
    delete = users_sub.add_parser("delete", help="remove a user's SCRAM credential for a mechanism")
    delete.add_argument("name")
    delete.add_argument("--mechanism", required=True, choices=sorted(MECHANISMS))
    target(delete)
    listing = users_sub.add_parser("list", help="every user with SCRAM credentials, and their iterations")
    target(listing)


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        if args.users_command == "add":
            if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
                raise UsageError(f"--iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}")
            password = args.password if args.password is not None else _read_password(args.password_file)
            if not args.name:
                raise UsageError("the user name must not be empty")
        if args.data_dir is not None:
            _offline(args, out, password if args.users_command == "add" else "")
        else:
            _online(args, out, password if args.users_command == "add" else "")
    except UsageError as e:
        print(f"groupcoord users: {e}", file=err)
        return 2
    except (Failed, OSError, ValueError) as e:
        print(f"groupcoord users: {e}", file=err)
        return 1
    return 0


def _read_password(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    if not lines or not lines[0]:
        raise UsageError(f"{path}: the first line (the password) is empty")
    return lines[0]


def _describe_line(name: str, iterations: dict[str, int]) -> str:
    # kafka-configs.sh --describe --entity-type users prints this line per user.
    configs = ", ".join(f"{mech}=iterations={n}" for mech, n in sorted(iterations.items()))
    return f"SCRAM credential configs for user-principal '{name}' are {configs}"


# --- offline -------------------------------------------------------------------------------------------


@contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    if not data_dir.is_dir():
        raise UsageError(f"{data_dir} is not a directory")
    fd = os.open(data_dir / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Failed(f"data directory {data_dir} is in use by a running groupcoord: "
                         "use --bootstrap-server") from None
        yield
    finally:
        os.close(fd)


def _offline(args: argparse.Namespace, out: TextIO, password: str) -> None:
    with _locked(args.data_dir):
        store = FileScramStore(args.data_dir)
        if args.users_command == "add":
            store.alter({(args.name, args.mechanism): make_credential(args.mechanism, password, args.iterations)},
                        set())
            print(f"Completed updating config for user {args.name}.", file=out)
        elif args.users_command == "delete":
            if store.get(args.name, args.mechanism) is None:
                raise Failed("Attempt to delete a user credential that does not exist")
            store.alter({}, {(args.name, args.mechanism)})
            print(f"Completed updating config for user {args.name}.", file=out)
        else:
            for name, mechs in sorted(store.users().items()):
                print(_describe_line(name, {m: c.iterations for m, c in mechs.items()}), file=out)


# --- over the wire ---------------------------------------------------------------------------------------


def _online(args: argparse.Namespace, out: TextIO, password: str) -> None:
    from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

    props = _read_properties(args.command_config) if args.command_config else {}
    with _Connection(args.bootstrap_server, props) as conn:
        if args.users_command == "list":
            response = conn.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                                 DescribeUserScramCredentialsRequest(version=0, users=None))
            if response.error_code:
                raise Failed(f"error {response.error_code}: {response.error_message}")
            for result in response.results:
                iterations = {mechanism_name(i.mechanism) or str(i.mechanism): i.iterations
                              for i in result.credential_infos}
                print(_describe_line(result.user, iterations), file=out)
            return
        request_cls = AlterUserScramCredentialsRequest
        deletions, upsertions = [], []
        if args.users_command == "add":
            salt = secure_random_string().encode()
            upsertions.append(request_cls.ScramCredentialUpsertion(
                name=args.name, mechanism=mechanism_id(args.mechanism), iterations=args.iterations, salt=salt,
                salted_password=salted_password(args.mechanism, password, salt, args.iterations)))
        else:
            deletions.append(request_cls.ScramCredentialDeletion(name=args.name,
                                                                 mechanism=mechanism_id(args.mechanism)))
        response = conn.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                             request_cls(version=0, deletions=deletions, upsertions=upsertions))
        for result in response.results:
            if result.error_code:
                raise Failed(f"error {result.error_code} for user {result.user}: {result.error_message}")
        print(f"Completed updating config for user {args.name}.", file=out)


def _read_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props


class _Connection:
    """One blocking connection: TLS and SASL (PLAIN, SCRAM) as ``props`` ask, then request/response."""

    def __init__(self, bootstrap: str, props: dict[str, str]) -> None:
        host, _, port = bootstrap.rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"--bootstrap-server must be HOST:PORT, not {bootstrap!r}")
        self.host, self.port, self.props = host.strip("[]"), int(port), props
        self._sock: socket.socket | None = None
        self._correlation = 0

    def __enter__(self) -> _Connection:
        sock = socket.create_connection((self.host, self.port), timeout=30)
        protocol = self.props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise UsageError(f"security.protocol {protocol} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
        if protocol.endswith("SSL"):
            context = ssl.create_default_context(cafile=self.props.get("ssl.truststore.location") or None)
            if self.props.get("ssl.endpoint.identification.algorithm", "https") == "":
                context.check_hostname = False
            sock = context.wrap_socket(sock, server_hostname=self.host)
        self._sock = sock
        if protocol.startswith("SASL"):
            self._authenticate()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sock is not None:
            self._sock.close()

    def call(self, api_key: int, version: int, request: Any) -> Any:
        assert self._sock is not None
        self._correlation += 1
        self._sock.sendall(encode_request(api_key, version, self._correlation, request, client_id="groupcoord-users"))
        (size,) = struct.unpack(">i", self._recv(4))
        _, response = decode_response(api_key, version, self._recv(size))
        return response

    def _recv(self, n: int) -> bytes:
        assert self._sock is not None
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise Failed("the server closed the connection")
            chunks += chunk
        return bytes(chunks)

    def _authenticate(self) -> None:
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        mechanism = self.props.get("sasl.mechanism", "GSSAPI")
        if mechanism != "PLAIN" and mechanism not in MECHANISMS:
            raise UsageError(f"sasl.mechanism {mechanism} is not supported here (PLAIN, SCRAM-SHA-256/512)")
        try:
            options = single_login_module(self.props.get("sasl.jaas.config", "")).options
        except JaasError as e:
            raise UsageError(f"sasl.jaas.config: {e}") from None
        user, password = options.get("username", ""), options.get("password", "")
        handshake = self.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(version=1, mechanism=mechanism))
        if handshake.error_code:
            raise Failed(f"SASL mechanism {mechanism} not enabled (server offers {handshake.mechanisms})")

        def step(token: bytes) -> bytes:
            response = self.call(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(version=2, auth_bytes=token))
            if response.error_code:
                raise Failed(f"authentication failed: {response.error_message}")
            return bytes(response.auth_bytes)

        if mechanism == "PLAIN":
            step(f"\x00{user}\x00{password}".encode())
            return
        _scram_client(mechanism, user, password, step)


def _scram_client(mechanism: str, user: str, password: str, step: Any) -> None:
    """The client half of RFC 5802, enough for this tool (no SASLprep, as Kafka's own client)."""
    h = MECHANISMS[mechanism]
    nonce = secure_random_string()
    first_bare = f"n={escape_saslname(user)},r={nonce}"
    server_first = step(f"n,,{first_bare}".encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    if not fields.get("r", "").startswith(nonce):
        raise Failed("the server's SCRAM nonce does not extend ours")
    iterations = int(fields["i"])
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise Failed(f"the server asks for {iterations} SCRAM iterations")
    salted = salted_password(mechanism, password, base64.b64decode(fields["s"]), iterations)
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", h)
    signature = hmac.digest(hashlib.new(h, client_key).digest(), auth_message, h)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    server_final = step(f"{without_proof},p={proof}".encode()).decode()
    expected = hmac.digest(hmac.digest(salted, b"Server Key", h), auth_message, h)
    if not hmac.compare_digest(server_final, "v=" + base64.b64encode(expected).decode()):
        raise Failed("the server's SCRAM signature is wrong")
