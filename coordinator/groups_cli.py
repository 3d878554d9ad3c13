"""``groupcoord groups``: kafka-consumer-groups.sh's actions and options, over the wire against any
Kafka-compatible bootstrap (docs: Kafka's "Managing Consumer Groups",
https://kafka.apache.org/documentation/#basic_ops_consumer_group).

Exit statuses are Kafka's: 1 for a usage mistake (message and help on stderr), 0 otherwise, including
when the cluster could not answer or a group does not exist (the error is printed on stdout as
``Error: ...``), so scripts should read the output rather than the status.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .admin_client import ClientConfigError, read_properties
from .tools.describe_views import (
    GroupOffsets,
    collect_members,
    collect_offsets,
    collect_states,
    print_members,
    print_offsets,
    print_states,
)
from .tools.group_admin import GroupAdmin, GroupAdminError
from .tools.options import (
    DESCRIPTION,
    UsageError,
    check_args,
    parse,
    parse_states,
    parse_types,
    print_usage,
    to_namespace,
    validate_reset_scope,
)

__all__ = ["run"]


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("groupcoord")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def run(argv: Sequence[str], out: TextIO | None = None, err: TextIO | None = None, *,
        watch_refreshes: int | None = None) -> int:
    """The command; ``watch_refreshes`` stops ``--watch`` after that many tables (tests)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        seen, _ = parse(argv)
        if not argv or "help" in seen:
            return print_usage(DESCRIPTION, err)
        if "version" in seen:
            print(_version(), file=out)
            return 0
        if "zookeeper" in seen:
            from .tools.zk_mode import check_zk_args

            check_zk_args(seen, err)
            zk_args = to_namespace(seen)
        else:
            zk_args = None
            check_args(seen, err)
        if "reset-offsets" in seen and zk_args is None:  # Kafka 1.1 never got that far with --zookeeper
            validate_reset_scope(seen)
        args = to_namespace(seen)
        states = parse_states(args.state) if args.list and args.state else []
        types = parse_types(args.type) if args.list and args.type else []
    except UsageError as exc:
        return print_usage(str(exc), err)
    if zk_args is not None:
        from .tools.zk_mode import run_zk

        return run_zk(zk_args, out, err)
    try:
        props = read_properties(Path(args.command_config)) if args.command_config else {}
        with GroupAdmin(args.bootstrap_server, props, timeout_ms=args.timeout) as admin:
            return _act(args, admin, states, types, out, err, watch_refreshes)
    except UsageError as exc:
        return print_usage(str(exc), err)
    except (GroupAdminError, ClientConfigError) as exc:
        print(f"\nError: Executing consumer group command failed due to {exc}", file=out)
        return 0
    except Exception as exc:  # Kafka's tool prints any failure with its stack trace and exits 0
        print(f"\nError: Executing consumer group command failed due to {exc}", file=out)
        traceback.print_exc(file=err)
        return 0


def _group_ids(args: argparse.Namespace, admin: GroupAdmin) -> list[str]:
    from .tools.listing import consumer_groups

    if args.all_groups:
        return [g.group_id for g in consumer_groups(admin)]
    return list(dict.fromkeys(args.group))


def _act(a: argparse.Namespace, admin: GroupAdmin, states: list[str], types: list[str], out: TextIO, err: TextIO,
         watch_refreshes: int | None) -> int:
    as_json = a.output == "json"
    if a.list:
        from .tools.listing import consumer_groups, print_listing

        listed = consumer_groups(admin, states=states, types=types)
        if as_json:
            from .tools.json_output import dump, listing_json

            dump(listing_json(listed), out)
        else:
            print_listing(listed, "type" in a.has, "state" in a.has, out)
        return 0
    if a.describe:
        return _describe(a, admin, as_json, out, err, watch_refreshes)
    if a.delete:
        from .tools.deleting import delete_groups

        delete_groups(admin, _group_ids(a, admin), out)
        return 0
    if a.delete_offsets:
        from .tools.deleting import delete_offsets

        delete_offsets(admin, a.group[0], a.topic, out)
        return 0
    from .tools.reset_offsets import run_reset

    # A usage error found while planning (e.g. --shift-by without a committed offset) prints the help too.
    return run_reset(a, admin, out, err, usage=lambda message: print_usage(message, err))


def _describe(a: argparse.Namespace, admin: GroupAdmin, as_json: bool, out: TextIO, err: TextIO,
              watch_refreshes: int | None) -> int:
    ids = _group_ids(a, admin)
    verbose = a.verbose
    if a.watch is not None or "watch" in a.has:
        from rich.console import Console

        from .tools.watch import watch

        interval = float(a.watch or 2.0)
        # Not a terminal (a pipe, a test): wide enough that ids and offsets are not cut.
        console = Console() if out is sys.stdout and out.isatty() else Console(file=out, width=240)
        from .tools.lag_seconds import lag_seconds

        def collect() -> tuple[list[GroupOffsets], dict[tuple[str, str, int], float | None]]:
            offsets = collect_offsets(admin, ids)
            return offsets, lag_seconds(admin, offsets)

        watch(collect, interval, console, refreshes=watch_refreshes)
        return 0
    if a.members:
        members = collect_members(admin, ids)
        if as_json:
            from .tools.json_output import dump, members_json

            dump(members_json(members), out)
        else:
            print_members(members, verbose, out, err)
    elif "state" in a.has:
        groups = collect_states(admin, ids)
        if as_json:
            from .tools.json_output import dump, states_json

            dump(states_json(groups), out)
        else:
            print_states(groups, verbose, out, err)
    else:
        offsets = collect_offsets(admin, ids)
        if as_json:
            from .tools.json_output import dump, offsets_json
            from .tools.lag_seconds import lag_seconds

            dump(offsets_json(offsets, lag_seconds(admin, offsets)), out)
        else:
            print_offsets(offsets, verbose, out, err)
    return 0
