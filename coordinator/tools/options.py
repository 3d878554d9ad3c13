"""The options of ``groupcoord groups`` and their validation, with kafka-consumer-groups.sh's messages.

Kafka's tool parses with joptsimple and reports every usage mistake the same way
(``CommandLineUtils.printUsageAndExit``): the message on stderr, then the option help, exit status 1.
:class:`UsageError` carries the message; :func:`print_usage` prints it that way. The checks and their
order follow Kafka 4.x's ``ConsumerGroupCommandOptions.checkArgs`` and ``ConsumerGroupCommand.main``
(https://github.com/apache/kafka/tree/trunk/tools/src/main/java/org/apache/kafka/tools/consumer/group),
with the 4.0 fixes of the 3.9 messages that named the wrong options (apache/kafka PR #16961).

Options are spelled joptsimple's way: ``--name value`` or ``--name=value``, a long name may be cut to
any unambiguous prefix, an option's name prints as ``[name]`` in messages. ``--output json`` and
``--watch`` are this tool's own additions.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

__all__ = [
    "ACTIONS", "DESCRIPTION", "RESET_SCENARIOS", "UsageError", "parse", "parse_states", "parse_topic_arg",
    "parse_types", "print_usage", "validate_reset_scope",
]

DESCRIPTION = ("This tool helps to list all consumer groups, describe a consumer group, delete consumer group info, "
               "or reset consumer group offsets.")

FLAG, REQUIRED, OPTIONAL = "flag", "required", "optional"


@dataclass(frozen=True)
class Option:
    name: str
    kind: str
    help: str
    metavar: str = ""
    number: bool = False  # a Java Long
    multi: bool = False  # repeatable: every value kept
    available_if: tuple[str, ...] = ()


# In the order the help lists them (joptsimple sorts by name).
_OPTIONS = [
    Option("all-groups", FLAG, "Act on every consumer group."),
    Option("all-topics", FLAG, "With --reset-offsets: every partition the group has a committed offset for."),
    Option("bootstrap-server", REQUIRED, "REQUIRED: the server(s) to connect to, HOST:PORT[,HOST:PORT...].",
           "server to connect to"),
    Option("by-duration", REQUIRED, "Reset offsets to those of this long ago, an ISO-8601 duration 'PnDTnHnMnS'.",
           "duration"),
    Option("command-config", REQUIRED, "A properties file of client settings (TLS, SASL) for the connections.",
           "command config property file"),
    Option("delete", FLAG, "Delete the given consumer groups (only groups without active members)."),
    Option("delete-offsets", FLAG, "Delete the committed offsets of one group for the given topics."),
    Option("describe", FLAG, "Describe the given consumer groups: offsets and lag (the default), members or state."),
    Option("dry-run", FLAG, "Show what --reset-offsets would do and change nothing (the default)."),
    Option("execute", FLAG, "Carry out --reset-offsets."),
    Option("export", FLAG, "Print the reset plan as CSV (the input of --from-file)."),
    Option("from-file", REQUIRED, "Reset offsets to those in a CSV file.", "path to CSV file"),
    Option("group", REQUIRED, "A consumer group; repeatable.", "consumer group", multi=True),
    Option("help", FLAG, "Print this help."),
    Option("list", FLAG, "List the consumer groups."),
    Option("members", FLAG, "With --describe: the members of each group.", available_if=("describe",)),
    Option("offsets", FLAG, "With --describe: committed offsets, log-end offsets and lag of each partition "
                            "(the default view).", available_if=("describe",)),
    Option("output", REQUIRED, "With --list or --describe: 'json' prints the same data as JSON objects.",
           "format", available_if=("describe", "list")),
    Option("reset-offsets", FLAG, "Reset the committed offsets of groups without active members."),
    Option("shift-by", REQUIRED, "Move each committed offset by this many (negative: backwards).",
           "number-of-offsets", number=True),
    Option("state", OPTIONAL, "With --describe: the state of each group. With --list: show states, or keep only "
                              "groups in these comma-separated states.", "String", available_if=("describe", "list")),
    Option("timeout", REQUIRED, "How long to wait for the cluster's answers, in milliseconds.",
           "timeout (ms)", number=True),
    Option("to-current", FLAG, "Reset offsets to the current committed offsets."),
    Option("to-datetime", REQUIRED, "Reset offsets to the first record at or after this time, "
                                    "'YYYY-MM-DDTHH:mm:SS.sss' (UTC unless a zone is given).", "datetime"),
    Option("to-earliest", FLAG, "Reset offsets to the earliest offset."),
    Option("to-latest", FLAG, "Reset offsets to the latest offset."),
    Option("to-offset", REQUIRED, "Reset offsets to this offset.", "offset", number=True),
    Option("topic", REQUIRED, "A topic, or topic:0,1,2 for some of its partitions (the partitions count for "
                              "--reset-offsets and --delete-offsets); repeatable.", "topic", multi=True),
    Option("type", OPTIONAL, "With --list: show types, or keep only groups of these comma-separated types "
                             "(classic, consumer).", "String", available_if=("list",)),
    Option("verbose", FLAG, "With --describe: more columns (epochs, assignments).", available_if=("describe",)),
    Option("version", FLAG, "Print the version and exit."),
    Option("watch", OPTIONAL, "With --describe: a table of lag and state, refreshed every SECONDS (default 2) "
                              "until Ctrl-C.", "SECONDS", available_if=("describe",)),
    Option("zookeeper", REQUIRED, "The ZooKeeper of old (ZooKeeper-based) consumers, HOST:PORT[/chroot]: --list, "
                                  "--describe and --delete act on their groups in /consumers (Kafka 1.1's ZooKeeper mode).",
           "urls"),
]
_BY_NAME = {o.name: o for o in _OPTIONS}

ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
RESET_SCENARIOS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current", "shift-by",
                   "from-file")
_GROUP_SCOPE = "[group], [all-groups]"

#: Kafka's GroupState names allowed for consumer groups (GroupState.groupStatesForType(CONSUMER)).
VALID_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
VALID_TYPES = ("Classic", "Consumer")

_LONG = re.compile(r"[+-]?\d+")


class UsageError(Exception):
    """A usage mistake: printed with the help, exit status 1 (Kafka's printUsageAndExit)."""


def _o(name: str) -> str:
    return f"[{name}]"


def _resolve(name: str) -> Option:
    if name in _BY_NAME:
        return _BY_NAME[name]
    matches = [o for o in _OPTIONS if o.name.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    # joptsimple reports an unknown option by its name, without dashes.
    raise UsageError(f"{name} is not a recognized option")


def parse(argv: Sequence[str]) -> tuple[dict[str, list[str | None]], list[str]]:
    """Tokens → ({option name: [values]}, non-option arguments), as joptsimple reads them."""
    seen: dict[str, list[str | None]] = {}
    rest: list[str] = []
    i = 0
    argv = list(argv)
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            rest.extend(argv[i:])
            break
        if not token.startswith("-") or token == "-":
            rest.append(token)
            continue
        name, eq, inline = token.lstrip("-").partition("=")
        option = _resolve(name)
        value: str | None = None
        if option.kind == FLAG:
            if eq:
                raise UsageError(f"Option {_o(option.name)} does not take an argument")
        elif eq:
            value = inline
        elif option.kind == REQUIRED:
            if i >= len(argv):
                raise UsageError(f"Option {_o(option.name)} requires an argument")
            value = argv[i]
            i += 1
        elif i < len(argv) and not argv[i].startswith("-"):
            value = argv[i]
            i += 1
        if option.number and value is not None and not (_LONG.fullmatch(value) and -2**63 <= int(value) < 2**63):
            raise UsageError(f"Cannot parse argument '{value}' of option {option.name}")
        seen.setdefault(option.name, []).append(value)
    for name in seen:
        needs = _BY_NAME[name].available_if
        if needs and not any(n in seen for n in needs):
            raise UsageError(f"Option(s) [{name}] are unavailable given other options on the command line")
    return seen, rest


def _check_invalid(seen: dict[str, list[str | None]], used: str, invalid: Sequence[str]) -> None:
    """CommandLineUtils.checkInvalidArgs: ``used`` excludes each of ``invalid``."""
    if used in seen:
        for other in invalid:
            if other in seen:
                raise UsageError(f'Option "{_o(used)}" can\'t be used with option "{_o(other)}"')


def check_args(seen: dict[str, list[str | None]], err: TextIO) -> None:
    """ConsumerGroupCommandOptions.checkArgs, then the one-action rule of ConsumerGroupCommand.main."""
    has = seen.__contains__
    if not has("bootstrap-server"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if has("describe"):
        if not has("group") and not has("all-groups"):
            raise UsageError(f"Option [describe] takes one of these options: {_GROUP_SCOPE}")
        if sum(has(o) for o in ("members", "offsets", "state")) > 1:
            raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if has("state") and seen["state"][-1] is not None:
            raise UsageError("Option [describe] does not take a value for [state]")
    if has("delete"):
        if not has("group") and not has("all-groups"):
            raise UsageError(f"Option [delete] takes one of these options: {_GROUP_SCOPE}")
        if has("topic"):
            raise UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if has("delete-offsets") and (not has("group") or not has("topic")):
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")
    if has("reset-offsets"):
        if has("dry-run") and has("execute"):
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not has("dry-run") and not has("execute"):
            # Kafka's text, missing space after "missing." included.
            print("WARN: No action will be performed as the --execute option is missing.In a future major release, "
                  "the default behavior of this command will be to prompt the user before executing the reset "
                  "rather than doing a dry run. You should add the --dry-run option explicitly if you are scripting "
                  "this command and want to keep the current default behavior without prompting.", file=err)
        if not has("group") and not has("all-groups"):
            raise UsageError(f"Option [reset-offsets] takes one of these options: {_GROUP_SCOPE}")
        for scenario in RESET_SCENARIOS:
            _check_invalid(seen, scenario, [s for s in RESET_SCENARIOS if s != scenario])
    _check_invalid(seen, "group", ["all-groups"])
    _check_invalid(seen, "group", ["list"])
    _check_invalid(seen, "topic", ["list", "describe"])
    if sum(has(a) for a in ACTIONS) != 1:
        raise UsageError("Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS))
    if has("output") and seen["output"][-1] != "json":
        raise UsageError(f"Invalid output format '{seen['output'][-1]}'. Valid formats are: json")
    # --watch draws the offsets view as a live table: not JSON, not the other views.
    _check_invalid(seen, "watch", ["output", "members", "state"])
    if has("watch"):
        value = seen["watch"][-1]
        try:
            seconds = 2.0 if value is None else float(value)
        except ValueError:
            seconds = -1.0
        if not seconds > 0:
            raise UsageError(f"Invalid --watch interval '{value}': a number of seconds above 0")


def parse_states(text: str) -> list[str]:
    """``--state a,b`` of --list, case-insensitive (GroupState.parse); Kafka's error for an unknown state."""
    by_lower = {s.lower(): s for s in VALID_STATES}
    states = [by_lower.get(s.strip().lower()) for s in text.split(",")]
    if any(s is None for s in states):
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(VALID_STATES)}")
    return [s for s in states if s is not None]


def parse_types(text: str) -> list[str]:
    """``--type classic,consumer`` of --list, case-insensitive (GroupType.parse)."""
    types = [s.strip().lower() for s in text.split(",")]
    if any(t not in ("classic", "consumer") for t in types):
        raise UsageError(f"Invalid types list '{text}'. Valid types are: {', '.join(VALID_TYPES)}")
    return types


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` (Kafka's parseTopicsWithPartitions; messages as Kafka's, quote and all)."""
    parts = arg.split(":")
    if len(parts) == 1:
        return arg, None
    if len(parts) != 2:
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    topic, partitions = parts
    if topic == "" or partitions == "":
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    result = []
    for p in partitions.split(","):
        if not re.fullmatch(r"[+-]?\d+", p.strip()):
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{arg}''")
        result.append(int(p))
    return topic, result


def validate_reset_scope(seen: dict[str, list[str | None]]) -> None:
    """The reset checks Kafka makes once it plans a group's reset (getPartitionsToReset, then
    prepareOffsetsToReset), made here before anything is asked of the cluster."""
    if not any(o in seen for o in ("all-topics", "topic", "from-file")):
        raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    for arg in seen.get("topic", []):
        assert arg is not None
        parse_topic_arg(arg)
    if not any(s in seen for s in RESET_SCENARIOS):
        scenarios = ", ".join(_o(s) for s in RESET_SCENARIOS)
        raise UsageError(f"Option '[reset-offsets]' requires one of the following scenarios: [{scenarios}]")


def to_namespace(seen: dict[str, list[str | None]]) -> argparse.Namespace:
    """The parsed options as attributes (``bootstrap_server``, ``group`` (list), ``topic`` (list), ``all_groups``,
    ``to_offset`` (int) …): flags are bools, absent values None, ``timeout`` defaults to 5000."""
    ns = argparse.Namespace()
    for option in _OPTIONS:
        attr = option.name.replace("-", "_")
        values = seen.get(option.name)
        if option.kind == FLAG:
            setattr(ns, attr, values is not None)
        elif option.multi:
            setattr(ns, attr, [v for v in values or [] if v is not None])
        elif values is None:
            setattr(ns, attr, None)
        else:
            value = values[-1]
            setattr(ns, attr, int(value) if option.number and value is not None else value)
    if ns.timeout is None:
        ns.timeout = 5000
    ns.has = {name: True for name in seen}
    return ns


def print_usage(message: str, err: TextIO) -> int:
    """CommandLineUtils.printUsageAndExit: the message, the option help, status 1."""
    print(message, file=err)
    print_help(err)
    return 1


def print_help(err: TextIO) -> None:
    rows = []
    for o in _OPTIONS:
        left = f"--{o.name}"
        if o.kind == REQUIRED:
            left += f" <{o.metavar}>"
        elif o.kind == OPTIONAL:
            left += f" [{o.metavar}]"
        rows.append((left, o.help + (" (default: 5000)" if o.name == "timeout" else "")))
    width = max(len(left) for left, _ in rows) + 2
    print(f"{'Option':<{width}}Description", file=err)
    print(f"{'------':<{width}}-----------", file=err)
    for left, text in rows:
        print(f"{left:<{width}}{text}", file=err)
