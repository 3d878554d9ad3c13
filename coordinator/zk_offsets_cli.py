"""``groupcoord zk-offsets``: the ZooKeeper-era consumer offsets under ``/consumers`` (issue 36).

``migrate`` moves one group's offsets between ZooKeeper and Kafka's offsets storage, only forward
(coordinator/tools/zk_migration.py), a dry run unless ``--execute``.

``export`` and ``import`` do what Kafka's ExportZkOffsets and ImportZkOffsets tools did (Kafka
0.8.2–1.1, ``core/src/main/scala/kafka/tools/``; removed in 2.0.0), in the same file format
(coordinator/tools/zk_offsets_file.py), with two differences: ``--zookeeper`` names the ensemble
(Kafka's ``--zkconnect``; ``groupcoord groups --zookeeper`` spells it so), and ``import`` is all or
nothing: the whole file is checked before anything is written, a malformed line is an error naming its
line number, and the whole file is written in one ZooKeeper transaction (Kafka's tool printed the errors
and went on, line by line); a file too large for one ZooKeeper request (``jute.maxbuffer``, about 1 MB,
some 8,000–10,000 new offsets of 50 characters) is refused before anything is written, and ``--transaction-per-group``
writes such a file one group (one transaction) at a time. docs/zk_offsets.md describes the command.

Exit codes: 0 success, 1 failure (ZooKeeper unreachable, a malformed input file), 2 bad usage.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .tools.zk_migration import TO_KAFKA, TO_ZOOKEEPER

__all__ = ["run", "build_parser"]

PROG = "groupcoord zk-offsets"


class _Failure(Exception):
    """A failure reported as ``groupcoord zk-offsets: <message>`` with exit status 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Export, import, migrate the ZooKeeper-era consumer offsets under /consumers "
        "(Kafka's ExportZkOffsets / ImportZkOffsets file format).")
    parser.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]",
                        help="the ZooKeeper connect string (Kafka's zookeeper.connect)")
    parser.add_argument("--timeout-ms", type=int, default=10000,
                        help="how long to try to reach ZooKeeper; default 10000")
    sub = parser.add_subparsers(dest="action", required=True)
    export = sub.add_parser("export", help="write the offsets of the groups to a file, one line per partition")
    export.add_argument("--output-file", required=True, type=Path)
    export.add_argument("--group", dest="groups", action="append", default=[],
                        help="a group to export; repeatable; default every group under /consumers")
    imp = sub.add_parser("import", help="write the offsets of a file to ZooKeeper (up to its first empty line)")
    imp.add_argument("--input-file", required=True, type=Path)
    imp.add_argument("--transaction-per-group", action="store_true",
                     help="write group by group, each group in one ZooKeeper transaction, instead of the whole "
                     "file in one; for a file too large for one ZooKeeper request (jute.maxbuffer)")
    migrate = sub.add_parser("migrate", help="move a group's offsets between ZooKeeper and Kafka's offsets storage "
                             "(a dry run unless --execute)")
    migrate.add_argument("--group", required=True)
    migrate.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]")
    migrate.add_argument("--direction", choices=(TO_KAFKA, TO_ZOOKEEPER), default=TO_KAFKA,
                         help=f"where the offsets go; default {TO_KAFKA}")
    migrate.add_argument("--execute", action="store_true", help="write the offsets marked 'moves'")
    migrate.add_argument("--force", action="store_true",
                         help="write even while the group has live members in ZooKeeper or in Kafka")
    return parser


@contextmanager
def _zookeeper(connect: str, timeout_ms: int) -> Iterator[Any]:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    # kazoo's own log lines (its retries, "Failed connecting to Zookeeper ...") would reach stderr
    # through logging's last-resort handler; this command says what failed in one line of its own.
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    client = KazooClient(hosts=connect, timeout=timeout_ms / 1000)
    try:
        client.start(timeout=timeout_ms / 1000)
    except KazooTimeoutError:
        client.close()
        raise _Failure(f"cannot connect to ZooKeeper at {connect} within {timeout_ms} ms") from None
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _export(args: argparse.Namespace) -> None:
    from .cluster.zk_consumers import ZkConsumers
    from .tools.zk_offsets_file import format_zk_offsets

    with _zookeeper(args.zookeeper, args.timeout_ms) as client:
        consumers = ZkConsumers(client)
        present = consumers.groups()
        missing = [g for g in args.groups if g not in present]
        if missing:
            raise _Failure(f"no such group under /consumers in {args.zookeeper}: {', '.join(missing)}")
        groups = list(dict.fromkeys(args.groups)) or present
        offsets: dict[str, dict[tuple[str, int], int]] = {}
        for group in groups:
            read = consumers.read_group(group)
            # As ExportZkOffsets did with a znode it could not read: say so, leave it out.
            for error in read.errors:
                if f"/consumers/{group}/offsets/" in error:
                    print(f"{PROG}: skipped: {error}", file=sys.stderr)
            offsets[group] = read.offsets
    args.output_file.write_text(format_zk_offsets(offsets))
    count = sum(len(o) for o in offsets.values())
    print(f"Exported {count} offsets of {len(offsets)} groups to {args.output_file}")


#: Why kazoo's ConnectionLoss (which carries no message) ends a write: ZooKeeper closes the connection of a
#: request longer than its jute.maxbuffer exactly as it does when it goes away.
_CONNECTION_LOST = ("the connection to ZooKeeper was lost (ZooKeeper closes it on a request larger than its "
                    "jute.maxbuffer, or it went away)")


def _import(args: argparse.Namespace) -> None:
    from .tools.zk_offsets_file import ZkOffsetsFileError, parse_zk_offsets

    try:
        text = args.input_file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise _Failure(f"cannot read {args.input_file}: {exc}") from None
    try:
        lines = parse_zk_offsets(text)
    except ZkOffsetsFileError as exc:
        raise _Failure(f"{args.input_file} {exc}; nothing imported") from None
    by_group: dict[str, dict[tuple[str, int], int]] = {}
    for line in lines:
        by_group.setdefault(line.group, {})[(line.topic, line.partition)] = line.offset
    with _zookeeper(args.zookeeper, args.timeout_ms) as client:
        if args.transaction_per_group:
            _import_per_group(args, client, by_group)
        else:
            _import_whole_file(args, client, by_group)
    print(f"Imported {len(lines)} offsets of {len(by_group)} groups from {args.input_file}")


def _import_whole_file(args: argparse.Namespace, client: Any, by_group: dict[str, dict[tuple[str, int], int]]) -> None:
    from kazoo.exceptions import ConnectionLoss, KazooException, SessionExpiredError
    from kazoo.handlers.threading import KazooTimeoutError

    from .cluster.zk_consumers import TransactionTooLarge, ZkConsumerError, ZkConsumers

    try:
        # The whole file in one ZooKeeper transaction (zk_consumers.set_groups_offsets): all or nothing,
        # or refused before sending when it is more than one ZooKeeper request may carry.
        ZkConsumers(client).set_groups_offsets(by_group)
    except TransactionTooLarge as exc:
        raise _Failure(f"{args.input_file}: {exc}; --transaction-per-group writes it group by group "
                       "(each group all or nothing)") from None
    except (ConnectionLoss, SessionExpiredError, KazooTimeoutError) as exc:
        # The transaction was sent but its answer lost: ZooKeeper applied all of it or none.
        raise _Failure(f"ZooKeeper at {args.zookeeper}: {_CONNECTION_LOST} while importing "
                       f"({type(exc).__name__}): either every offset of the file or none was written; "
                       "export to see which") from None
    except (KazooException, ZkConsumerError) as exc:
        raise _Failure(f"ZooKeeper at {args.zookeeper}: {exc}; nothing imported") from None


def _import_per_group(args: argparse.Namespace, client: Any, by_group: dict[str, dict[tuple[str, int], int]]) -> None:
    """Each group in one ZooKeeper transaction, in the file's order; each group written is named on stderr,
    and a failure says which group failed and that the groups before it are written."""
    from kazoo.exceptions import ConnectionLoss, KazooException, SessionExpiredError
    from kazoo.handlers.threading import KazooTimeoutError

    from .cluster.zk_consumers import TransactionTooLarge, ZkConsumerError, ZkConsumers

    consumers = ZkConsumers(client)
    # Every group checked first: a group too large for one request is refused before any is written.
    for group, offsets in by_group.items():
        try:
            consumers.check_fits({group: offsets})
        except TransactionTooLarge as exc:
            raise _Failure(f"{args.input_file}: group {group}: {exc} (one group is one transaction); "
                           "nothing imported") from None
    groups = list(by_group)
    for index, group in enumerate(groups):
        try:
            consumers.set_groups_offsets({group: by_group[group]})
        except (ConnectionLoss, SessionExpiredError, KazooTimeoutError, KazooException, ZkConsumerError) as exc:
            if isinstance(exc, (ConnectionLoss, SessionExpiredError, KazooTimeoutError)):
                what = (f"{_CONNECTION_LOST} while writing group {group} ({type(exc).__name__}): "
                        f"either all {len(by_group[group])} offsets of {group} or none were written")
            else:
                what = f"writing group {group} failed: {exc}"
            before = f"the {index} group(s) before it are written (listed above)" if index else "no group before it"
            raise _Failure(f"ZooKeeper at {args.zookeeper}: {what}; {before}; "
                           f"the {len(groups) - index - 1} group(s) after it are not written") from None
        print(f"{PROG}: wrote group {group} ({len(by_group[group])} offsets)", file=sys.stderr)


def _migrate(args: argparse.Namespace) -> None:
    from protocol.errors import ErrorCode

    from .cluster.zk_consumers import ZkConsumers, ids_path
    from .tools.group_admin import GroupAdmin
    from .tools.zk_migration import format_plan, moved_offsets, plan_migration

    group = args.group
    with _zookeeper(args.zookeeper, args.timeout_ms) as client:
        consumers = ZkConsumers(client)
        read = consumers.read_group(group)
        for error in read.errors:
            print(f"{PROG}: skipped: {error}", file=sys.stderr)
        with GroupAdmin(args.bootstrap_server, timeout_ms=args.timeout_ms) as admin:
            committed = admin.committed_offsets([group]).get(group, {})
            kafka = {tp: c.offset for tp, c in committed.items() if c.offset >= 0}
            live = []
            if read.members:
                live.append(f"{len(read.members)} consumer(s) registered in ZooKeeper ({ids_path(group)})")
            described = admin.describe_groups([group]).get(group)
            if described is not None and described.members:
                live.append(f"{len(described.members)} member(s) in Kafka (state {described.state})")
            rows = plan_migration(group, read.offsets, kafka, args.direction)
            print(format_plan(rows), end="")
            moved = moved_offsets(rows, args.direction)
            if not args.execute:
                print(f"Dry run: nothing written; --execute moves the {len(moved)} offset(s) marked 'moves'.")
                for what in live:
                    print(f"Note: the group has {what}; --execute would need --force.", file=sys.stderr)
                return
            if live and not args.force:
                # A live consumer would overwrite the moved offsets with its own next commit, or
                # (Kafka) the coordinator refuses offsets from outside the generation.
                raise _Failure(f"group {group} has {' and '.join(live)}: stop them first or pass --force; "
                               "nothing written")
            if args.direction == TO_KAFKA:
                answers = admin.alter_offsets(group, moved) if moved else {}
                failed = {tp: code for tp, code in answers.items() if code != 0}
                if failed:
                    names = ", ".join(f"{t}-{p}: {ErrorCode(code).name}" for (t, p), code in sorted(failed.items()))
                    raise _Failure(f"Kafka at {args.bootstrap_server} refused offsets of group {group}: {names}")
            else:
                from kazoo.exceptions import ConnectionLoss, SessionExpiredError

                try:
                    consumers.set_offsets(group, moved)  # one transaction
                except (ConnectionLoss, SessionExpiredError) as exc:
                    raise _Failure(f"ZooKeeper at {args.zookeeper}: {_CONNECTION_LOST} while writing group "
                                   f"{group} ({type(exc).__name__}): either all {len(moved)} offsets or none were "
                                   "written; run migrate again to see which") from None
    print(f"Moved {len(moved)} offset(s) of group {group} {args.direction}.")


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from kazoo.exceptions import KazooException

    from .admin_client import ClientConfigError, ClientError
    from .cluster.zk_consumers import ZkConsumerError
    from .tools.group_admin import GroupAdminError

    try:
        if args.action == "export":
            _export(args)
        elif args.action == "import":
            _import(args)
        else:
            _migrate(args)
    except _Failure as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except (KazooException, ZkConsumerError) as exc:
        from kazoo.exceptions import ConnectionLoss

        # kazoo's exceptions often carry no message (ConnectionLoss never does): say what it means.
        detail = _CONNECTION_LOST if isinstance(exc, ConnectionLoss) else str(exc) or "no detail given"
        print(f"{PROG}: ZooKeeper at {args.zookeeper}: {type(exc).__name__}: {detail}", file=sys.stderr)
        return 1
    except (GroupAdminError, ClientError, ClientConfigError) as exc:
        print(f"{PROG}: Kafka at {args.bootstrap_server}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    return 0
