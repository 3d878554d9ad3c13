"""``groupcoord groups --reset-offsets``: kafka-consumer-groups' reset, over the wire.

The steps and texts are Kafka's ``ConsumerGroupService.resetOffsets`` and the printing around it
(https://github.com/apache/kafka/blob/3.9.0/tools/src/main/java/org/apache/kafka/tools/consumer/group/ConsumerGroupCommand.java,
the row-per-line table of trunk, PR https://github.com/apache/kafka/pull/17058). Per group, in
order: the group must be Empty or Dead (an unknown group is Dead) or it is refused; the scope is
read (``--all-topics``: the committed partitions; ``--topic t``: every partition; ``t:0,2``: those);
the plan comes from ``coordinator/offset_reset`` with the offsets it needs fetched from the
partition leaders; ``--execute`` commits it with ``alter_offsets`` (OffsetCommit without a
member, which the coordinator refuses while the group has members). Then the plan table, or
with ``--export`` the CSV, is printed.

Exit status as Kafka's: 1 where Kafka prints its usage (an ``IllegalArgumentException``, a
missing offset), 0 otherwise — also after ``\\nError: ...`` lines (a refused group, a
malformed datetime, duration or CSV, an unknown topic).
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable
from typing import TextIO

from protocol.errors import ErrorCode

from ..offset_reset.csv_plan import CsvPlanError, export_csv, parse_csv
from ..offset_reset.datetimes import (
    DateTimeFormatError,
    DurationFormatError,
    parse_datetime,
    timestamp_for_duration,
)
from ..offset_reset.scenarios import (
    ResetPlan,
    ResetUsageError,
    TopicPartition,
    lookups_for,
    parse_topic_args,
    plan_reset,
)
from .group_admin import GroupAdmin, GroupAdminError

__all__ = ["NO_EXECUTE_WARNING", "run_reset"]

#: Printed on stderr when neither --dry-run nor --execute is given (ConsumerGroupCommandOptions.checkArgs);
#: "missing.In" without a space, as Kafka prints it.
NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing."
    "In a future major release, the default behavior of this command will be to prompt the user before executing "
    "the reset rather than doing a dry run. You should add the --dry-run option explicitly if you are scripting "
    "this command and want to keep the current default behavior without prompting."
)
#: Kafka's ``printOffsetsToReset`` columns.
_ROW = "\n{:<30} {:<30} {:<10} {:<15}"
#: The logger Kafka's clamping warnings name (config/tools-log4j.properties: ``[%d] %p %m (%c)%n`` on stderr).
_LOGGER = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
#: Reset scenarios by option, in the order prepareOffsetsToReset tests them.
_SCENARIO_OPTIONS = (("to_offset", "to-offset"), ("to_earliest", "to-earliest"), ("to_latest", "to-latest"),
                     ("shift_by", "shift-by"), ("to_datetime", "to-datetime"), ("by_duration", "by-duration"),
                     ("from_file", "from-file"), ("to_current", "to-current"))

Plan = dict[TopicPartition, int]


class _Failed(Exception):
    """Kafka's ``printError("Executing consumer group command failed due to " + msg)``: exit 0."""


def _opt(args: argparse.Namespace, name: str) -> object:
    return getattr(args, name, None)


def _strings(args: argparse.Namespace, name: str) -> list[str]:
    """A repeatable option's values (argparse leaves None when it is absent)."""
    return [str(v) for v in getattr(args, name, None) or []]


def _scenario(args: argparse.Namespace) -> str | None:
    for attr, scenario in _SCENARIO_OPTIONS:
        value = _opt(args, attr)
        if value is not None and value is not False:
            return scenario
    return None


def _groups(args: argparse.Namespace, admin: GroupAdmin) -> list[str]:
    if _opt(args, "all_groups"):
        # Admin.listConsumerGroups: classic groups of the consumer protocol (or none yet) and KIP-848 groups.
        return sorted(g.group_id for g in admin.list_groups() if g.protocol_type in ("consumer", "")
                      and (g.type is None or g.type.lower() in ("classic", "consumer")))
    return list(dict.fromkeys(_strings(args, "group")))


def _log_warn(err: TextIO, message: str) -> None:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    print(f"[{stamp}] WARN {message} ({_LOGGER})", file=err)


def _scope(args: argparse.Namespace, admin: GroupAdmin, group: str) -> list[TopicPartition]:
    """``getPartitionsToReset``."""
    if _opt(args, "all_topics"):
        return sorted(admin.committed_offsets([group]).get(group, {}))
    topic_args = _strings(args, "topic")
    if topic_args:
        explicit, whole = parse_topic_args(topic_args)
        # Kafka learns an unknown topic of t:0,2 only when ListOffsets fails; one Metadata call names it earlier.
        known = admin.partitions_of([t for t, _ in explicit] + whole)
        return explicit + [(t, p) for t in whole for p in known[t]]
    if not _opt(args, "from_file"):
        raise ResetUsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    return []


def _read_file_plan(args: argparse.Namespace) -> dict[str, Plan]:
    path = str(_opt(args, "from_file"))
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise _Failed(f"java.nio.file.NoSuchFileException: {path}") from None
    except OSError as exc:
        raise _Failed(f"java.io.IOException: {exc}") from None
    groups = _strings(args, "group")
    try:
        return parse_csv(text, group=groups[0] if len(groups) == 1 else None)
    except CsvPlanError as exc:
        raise _Failed(str(exc)) from None


def _plan(args: argparse.Namespace, admin: GroupAdmin, group: str, scenario: str,
          partitions: list[TopicPartition], now_ms: Callable[[], int], out: TextIO,
          file_plans: dict[str, dict[str, Plan]]) -> ResetPlan | None:
    """``prepareOffsetsToReset``: the lookups the scenario needs, then the pure plan.

    ``file_plans`` keeps the parsed ``--from-file`` (key ``"plans"``) once the first group has needed it:
    Kafka's ConsumerGroupCommand reads and parses the file again for every group, which made
    ``--all-groups`` quadratic (bench/RESULTS.md, "ZooKeeper-era offsets": 42–44 s for 1,000 groups).
    It is still read only when a group gets that far, so the errors (a missing file, a bad line) come at
    the same point of the output as before."""
    from_file: Plan | None = None
    value: int | None = None
    timestamp: int | None = None
    if scenario == "from-file":
        if "plans" not in file_plans:
            file_plans["plans"] = _read_file_plan(args)
        file_plan = file_plans["plans"].get(group)
        if file_plan is None:
            print(f"\nError: No reset plan for group {group} found", file=out)
            return None
        from_file = file_plan
        partitions = sorted(file_plan)
    elif scenario == "to-offset":
        value = int(str(_opt(args, "to_offset")))
    elif scenario == "shift-by":
        value = int(str(_opt(args, "shift_by")))
    elif scenario == "to-datetime":
        try:
            timestamp = parse_datetime(str(_opt(args, "to_datetime")))
        except DateTimeFormatError as exc:
            # Kafka wraps the ParseException in a RuntimeException, whose message is the cause's toString().
            raise _Failed(f"{exc.java_class}: {exc}") from None
    elif scenario == "by-duration":
        try:
            timestamp = timestamp_for_duration(now_ms(), str(_opt(args, "by_duration")))
        except DurationFormatError as exc:
            raise _Failed(str(exc)) from None
    needs = lookups_for(scenario)
    committed = ({tp: c.offset for tp, c in admin.committed_offsets([group]).get(group, {}).items()}
                 if "committed" in needs else None)
    earliest = admin.offsets(partitions, "earliest") if "earliest" in needs else None
    latest = admin.offsets(partitions, "latest") if "latest" in needs else None
    for_timestamp = admin.offsets(partitions, timestamp) if timestamp is not None else None
    return plan_reset(scenario, partitions, value=value, committed=committed, earliest=earliest, latest=latest,
                      for_timestamp=for_timestamp, from_file=from_file)


def _print_table(plans: dict[str, Plan], out: TextIO) -> None:
    """``printOffsetsToReset``: the header unless no group was looked at, a row per partition."""
    text = ""
    if plans:
        text += _ROW.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for group, plan in plans.items():
        for (topic, partition), offset in sorted(plan.items()):
            text += _ROW.format(group, topic, partition, offset)
    print(text, file=out)


def run_reset(args: argparse.Namespace, admin: GroupAdmin, out: TextIO, err: TextIO, *,
              usage: Callable[[str], int] | None = None, now_ms: Callable[[], int] | None = None,
              warn_missing_execute: bool = False) -> int:
    """Run ``--reset-offsets`` with options already validated by the command line; the exit status.

    ``args`` carries argparse's names for Kafka's options: ``group`` (list), ``all_groups``,
    ``topic`` (list), ``all_topics``, ``dry_run``, ``execute``, ``export``, and one scenario of
    ``to_earliest``, ``to_latest``, ``to_current`` (flags), ``to_offset``, ``shift_by`` (ints),
    ``to_datetime``, ``by_duration``, ``from_file`` (strings). ``usage`` prints a message with
    the tool's usage and returns its status (Kafka's ``printUsageAndExit``); without it the
    message goes to ``err`` and the status is 1. ``now_ms`` is the clock of ``--by-duration``.
    ``NO_EXECUTE_WARNING`` belongs to option checking (Kafka's ``checkArgs`` prints it, and so does
    ``groups_cli``); a caller that skips that step passes ``warn_missing_execute=True``.
    """
    clock = now_ms or (lambda: int(datetime.datetime.now(datetime.UTC).timestamp() * 1000))
    execute = bool(_opt(args, "execute")) and not _opt(args, "dry_run")
    if warn_missing_execute and not _opt(args, "dry_run") and not _opt(args, "execute"):
        print(NO_EXECUTE_WARNING, file=err)
    scenario = _scenario(args)
    try:
        if scenario is None:
            raise ResetUsageError(
                "Option '[reset-offsets]' requires one of the following scenarios: [to-offset, to-datetime, "
                "by-duration, to-earliest, to-latest, shift-by, from-file, to-current]")
        plans: dict[str, Plan] = {}
        file_plans: dict[str, dict[str, Plan]] = {}  # --from-file, parsed once (see _plan)
        groups = _groups(args, admin)
        described = admin.describe_groups(groups)
        for group in groups:
            description = described.get(group)
            state = description.state if description is not None else "Dead"
            if state not in ("Empty", "Dead"):
                print(f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the current "
                      f"state is {state}.", file=out)
                plans[group] = {}
                continue
            partitions = _scope(args, admin, group)
            plan = _plan(args, admin, group, scenario, partitions, clock, out, file_plans)
            if plan is None:
                plans[group] = {}
                continue
            for notice in plan.notices:
                print(notice, file=out)
            for warning in plan.warnings:
                _log_warn(err, warning)
            if execute and plan.offsets:
                errors = {tp: code for tp, code in admin.alter_offsets(group, plan.offsets).items() if code}
                if errors:
                    named = ", ".join(f"{t}-{p}: {ErrorCode(c).name}" for (t, p), c in sorted(errors.items()))
                    raise _Failed(f"Failed to alter the offsets of group '{group}': {named}")
            plans[group] = plan.offsets
    except ResetUsageError as exc:
        if usage is not None:
            return usage(str(exc))
        print(str(exc), file=err)
        return 1
    except (_Failed, GroupAdminError) as exc:
        print(f"\nError: Executing consumer group command failed due to {exc}", file=out)
        return 0
    if _opt(args, "export"):
        print(export_csv(plans, single_group=len(_strings(args, "group")) == 1), file=out)
    else:
        _print_table(plans, out)
    return 0
