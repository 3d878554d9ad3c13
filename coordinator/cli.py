"""The ``groupcoord`` command: ``serve``, ``dump-log``, ``cluster up``, ``users``, ``acls``, ``groups``, ``faults``,
``pipeline``, ``zk-offsets`` and ``--version``.

Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad configuration (argparse's convention);
``dump-log`` exits 141 (as if killed by SIGPIPE) when the reader of its output goes away; ``groups`` keeps
kafka-consumer-groups.sh's statuses (1 for a usage mistake, else 0: coordinator/groups_cli.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from importlib import metadata
from pathlib import Path

from .acls_cli import add_acls_parser
from .config import ConfigError, load_config

__all__ = ["main"]


def _version() -> str:
    try:
        return metadata.version("groupcoord")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupcoord", description="A Kafka-wire-compatible consumer group coordinator.")
    parser.add_argument("--version", action="version", version=f"groupcoord {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the server")
    serve.add_argument("--config", type=Path, help="a Kafka-style properties file")
    serve.add_argument("--data-dir", help="data directory (log.dirs); default ./groupcoord-data")
    serve.add_argument("--listen", help="HOST:PORT to listen on (listeners); default localhost:9092")
    serve.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override one configuration key; repeatable")

    dump = sub.add_parser("dump-log", help="print the batches and records of a segment file or partition directory")
    dump.add_argument("path", type=Path)
    decoders = dump.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="decode __consumer_offsets records as Kafka's OffsetsMessageFormatter does")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="decode __transaction_state records as Kafka's kafka-dump-log does")
    cluster = sub.add_parser("cluster", help="a local cluster: ZooKeeper and N nodes on loopback ports")
    cluster_sub = cluster.add_subparsers(dest="cluster_command", required=True)
    up = cluster_sub.add_parser("up", help="start ZooKeeper and the nodes, print the bootstrap, stop on Ctrl-C")
    up.add_argument("--nodes", type=int, default=3, help="how many nodes (broker ids 1..N); default 3")
    up.add_argument("--base-port", type=int, default=9092, help="node i listens on BASE_PORT + i - 1; default 9092")
    up.add_argument("--dir", type=Path, default=Path("groupcoord-cluster"),
                    help="ZooKeeper's and the nodes' data, and the nodes' logs; default ./groupcoord-cluster")
    up.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration key for every node, {port} and {id} in the value standing for the "
                         "node's port and broker id (e.g. 'listeners=SASL_SSL://127.0.0.1:{port}'); repeatable")
    from .users_cli import add_parser as add_users_parser

    add_users_parser(sub)
    add_acls_parser(sub)
    # Parsed by coordinator/groups_cli.py with kafka-consumer-groups.sh's rules; listed here for --help.
    sub.add_parser("groups", help="list, describe, delete consumer groups, reset or delete their offsets "
                   "(kafka-consumer-groups.sh; see `groupcoord groups --help`)", add_help=False)
    # Parsed by coordinator/faults_cli.py; listed here for --help.
    sub.add_parser("faults", help="inject, list and clear faults on a node started with test.faults.enable=true "
                   "(see `groupcoord faults --help`)", add_help=False)
    # Parsed by coordinator/zk_offsets_cli.py; listed here for --help.
    sub.add_parser("zk-offsets", help="export, import, migrate ZooKeeper-era consumer offsets (Kafka's ExportZkOffsets / "
                   "ImportZkOffsets format; see `groupcoord zk-offsets --help`)", add_help=False)
    pipeline = sub.add_parser("pipeline", help="offsets analytics on Spark (see `groupcoord pipeline run --help`)",
                              add_help=False)
    pipeline.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pipeline"]:
        # Imported only here: serving never loads pyspark.
        from pipeline.cli import main as pipeline_main

        return pipeline_main(argv[1:])
    if argv[:1] == ["groups"]:
        from .groups_cli import run as run_groups

        return run_groups(argv[1:])
    if argv[:1] == ["faults"]:
        from .faults_cli import run as run_faults

        return run_faults(argv[1:])
    if argv[:1] == ["zk-offsets"]:
        from .zk_offsets_cli import run as run_zk_offsets

        return run_zk_offsets(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "cluster":
        from .cluster.local_cluster import run_local_cluster

        return run_local_cluster(args.dir, args.nodes, args.base_port, args.overrides, sys.stdout)
    if args.command == "users":
        from .users_cli import run as run_users

        return run_users(args)
    if args.command == "acls":
        from .acls_cli import run_acls

        return run_acls(args)
    if args.command == "dump-log":
        from .dump_log import dump_log

        try:
            status = dump_log(args.path, args.offsets_decoder, sys.stdout,
                              transaction_log_decoder=args.transaction_log_decoder)
            # Flushed here, inside the try: a short dump sits in the buffer until exit, and a
            # reader that has already gone makes this flush the write that fails.
            sys.stdout.flush()
        except BrokenPipeError:
            return _reader_gone()
        return status
    return 2


#: The status a shell reports for a command killed by SIGPIPE (128 + 13), as ``cat big | head`` gives.
EXIT_BROKEN_PIPE = 141


def _reader_gone() -> int:
    """The reader of stdout closed it (``dump-log PATH | head``): stop without a traceback.

    Python ignores SIGPIPE, so a C tool's silent death becomes a BrokenPipeError here. stdout
    is pointed at /dev/null before returning, because the interpreter flushes sys.stdout once
    more at exit and the bytes still in its buffer would fail again ("Exception ignored ...
    BrokenPipeError").

    The status is 141 rather than 0 or 1: the dump did not reach its end, so 0 ("every file read
    to its end") would be untrue, and 1 already means a corrupt batch. 141 is what the shell
    reports for any other tool cut short by its reader, so ``set -o pipefail`` scripts see the
    same as with ``cat``, and ``$?`` after ``dump-log ... | head`` (the status of ``head``) stays 0.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def run_event_loop(main: Coroutine[object, None, int]) -> int:
    """Run the server's coroutine on asyncio's own loop, or on uvloop (libuv, in C) when
    ``GROUPCOORD_EVENT_LOOP=uvloop`` and it is installed. uvloop measured about 20% less server CPU
    per durable OffsetCommit (bench/RESULTS.md) but is not the default: with it, the stock-client
    test of kafka-python's cooperative-sticky group did not settle (2026-11-24), not yet explained."""
    if os.environ.get("GROUPCOORD_EVENT_LOOP") == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            exit_code: int = uvloop.run(main)  # uvloop is untyped: its run returns what main does
            return exit_code
    return asyncio.run(main)


def _crash_restart_hook() -> Callable[[], None]:
    """The ``crash-restart`` test fault (docs/testing.md) for ``groupcoord serve``: the process
    replaces itself with a fresh ``groupcoord serve`` of the same arguments, with no shutdown step.
    Python opens its files and sockets close-on-exec, so the data directory lock and the
    listeners go with the old image. A moment later, so the answer to the request is sent first."""
    argv = list(sys.argv[1:])

    def exec_again() -> None:
        logging.getLogger("groupcoord").warning("crash-restart requested (test.faults.enable)")
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "coordinator", *argv])

    def hook() -> None:
        asyncio.get_running_loop().call_later(0.05, exec_again)

    return hook


def _serve(args: argparse.Namespace) -> int:
    from .logs import setup_logging

    try:
        config = load_config(args.config, args.overrides, args.data_dir, args.listen)
    except ConfigError as exc:
        print(f"groupcoord: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(config["logging.level"])
    from .app import App
    from .cluster.zookeeper import ClusterError

    try:
        app = App(config)
    except ConfigError as exc:
        print(f"groupcoord: {exc}", file=sys.stderr)
        return 2
    except ClusterError as exc:
        print(f"groupcoord: {exc}", file=sys.stderr)
        return 1
    app.crash_restart_hook = _crash_restart_hook()
    try:
        return run_event_loop(app.run())
    except ClusterError as exc:
        print(f"groupcoord: {exc}", file=sys.stderr)
        app.close()
        return 1
    except OSError as exc:
        host, port = config.listen
        # The HTTP listener's error names its own address (ops/http_listener.py).
        where = getattr(exc, "listen_address", None) or f"{host}:{port}"
        print(f"groupcoord: cannot listen on {where}: {exc.strerror or exc}", file=sys.stderr)
        app.close()
        return 1
