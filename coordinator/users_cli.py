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
import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from protocol.apis import ApiKey

from .admin_client import AdminConnection, ClientConfigError, ClientError, read_properties
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
    except (UsageError, ClientConfigError) as e:
        print(f"groupcoord users: {e}", file=err)
        return 2
    except (Failed, ClientError, OSError, ValueError) as e:
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

    props = read_properties(args.command_config) if args.command_config else {}
    with AdminConnection(args.bootstrap_server, props, client_id="groupcoord-users") as conn:
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
