"""``groupcoord groups`` refuses each usage mistake as kafka-consumer-groups.sh 4.x does: Kafka's message
on stderr, then the option help, exit status 1, and nothing on stdout (the messages of
ConsumerGroupCommandOptions.checkArgs and ConsumerGroupCommand, reference rows of the operations notes
§1.2). No server is needed: each check comes before the first connection (the address below refuses)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from coordinator.groups_cli import run
from coordinator.tools.options import parse_topic_arg

BS = ["--bootstrap-server", "127.0.0.1:1"]

RESET_WARNING = ("WARN: No action will be performed as the --execute option is missing.In a future major release, "
                 "the default behavior of this command will be to prompt the user before executing the reset rather "
                 "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
                 "command and want to keep the current default behavior without prompting.")


def groups(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def assert_usage(argv: list[str], message: str) -> str:
    status, out, err = groups(*argv)
    assert (status, out) == (1, ""), (status, out, err)
    first, _, rest = err.partition("\n")
    assert first == message, err
    assert rest.startswith("Option ") and "--bootstrap-server <server to connect to>" in rest, err
    return err


CASES = [
    ([*BS], "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"),
    ([*BS, "--list", "--describe", "--all-groups"],
     "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"),
    (["--list"], 'Missing required argument "[bootstrap-server]"'),
    ([*BS, "--describe"], "Option [describe] takes one of these options: [group], [all-groups]"),
    ([*BS, "--describe", "--group", "g", "--members", "--state"],
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    ([*BS, "--describe", "--group", "g", "--offsets", "--members"],
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    ([*BS, "--describe", "--group", "g", "--state", "Stable"], "Option [describe] does not take a value for [state]"),
    ([*BS, "--delete"], "Option [delete] takes one of these options: [group], [all-groups]"),
    ([*BS, "--delete", "--group", "g", "--topic", "t"],
     "The consumer does not support topic-specific offset deletion from a consumer group."),
    ([*BS, "--delete-offsets", "--group", "g"], "Option [delete-offsets] takes the following options: [group], [topic]"),
    ([*BS, "--delete-offsets", "--topic", "t"], "Option [delete-offsets] takes the following options: [group], [topic]"),
    ([*BS, "--reset-offsets", "--group", "g", "--dry-run", "--execute", "--to-earliest", "--all-topics"],
     "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
    ([*BS, "--reset-offsets", "--dry-run", "--to-earliest", "--all-topics"],
     "Option [reset-offsets] takes one of these options: [group], [all-groups]"),
    ([*BS, "--reset-offsets", "--group", "g", "--dry-run", "--to-earliest", "--shift-by", "1", "--all-topics"],
     'Option "[to-earliest]" can\'t be used with option "[shift-by]"'),
    ([*BS, "--reset-offsets", "--group", "g", "--dry-run", "--to-offset", "3", "--from-file", "x.csv"],
     'Option "[to-offset]" can\'t be used with option "[from-file]"'),
    ([*BS, "--describe", "--group", "g", "--all-groups"], 'Option "[group]" can\'t be used with option "[all-groups]"'),
    ([*BS, "--list", "--group", "g"], 'Option "[group]" can\'t be used with option "[list]"'),
    ([*BS, "--list", "--topic", "t"], 'Option "[topic]" can\'t be used with option "[list]"'),
    ([*BS, "--describe", "--group", "g", "--topic", "t"], 'Option "[topic]" can\'t be used with option "[describe]"'),
    ([*BS, "--reset-offsets", "--group", "g", "--dry-run", "--to-earliest"],
     "One of the reset scopes should be defined: --all-topics, --topic."),
    ([*BS, "--reset-offsets", "--group", "g", "--dry-run", "--all-topics"],
     "Option '[reset-offsets]' requires one of the following scenarios: [[to-offset], [to-datetime], [by-duration], "
     "[to-earliest], [to-latest], [to-current], [shift-by], [from-file]]"),
    ([*BS, "--reset-offsets", "--group", "g", "--dry-run", "--to-earliest", "--topic", "t:x"],
     "Invalid partition 'x' specified in topic arg 't:x''"),
    ([*BS, "--reset-offsets", "--group", "g", "--dry-run", "--to-earliest", "--topic", "t:1:2"],
     "Invalid topic arg 't:1:2', expected topic name and partitions"),
    ([*BS, "--list", "--state", "stable,bogus"],
     "Invalid state list 'stable,bogus'. Valid states are: PreparingRebalance, CompletingRebalance, Stable, Dead, "
     "Empty, Assigning, Reconciling"),
    ([*BS, "--list", "--type", "share"], "Invalid types list 'share'. Valid types are: Classic, Consumer"),
    ([*BS, "--members", "--list"], "Option(s) [members] are unavailable given other options on the command line"),
    ([*BS, "--describe", "--group", "g", "--type"],
     "Option(s) [type] are unavailable given other options on the command line"),
    ([*BS, "--list", "--verbose"], "Option(s) [verbose] are unavailable given other options on the command line"),
    ([*BS, "--list", "--bogus"], "bogus is not a recognized option"),
    ([*BS, "--describe", "--group"], "Option [group] requires an argument"),
    ([*BS, "--describe", "--all-groups", "--timeout", "soon"], "Cannot parse argument 'soon' of option timeout"),
    ([*BS, "--describe", "--all-groups", "--output", "yaml"], "Invalid output format 'yaml'. Valid formats are: json"),
    ([*BS, "--describe", "--all-groups", "--watch", "--output", "json"],
     'Option "[watch]" can\'t be used with option "[output]"'),
    ([*BS, "--describe", "--all-groups", "--members", "--watch", "1"],
     'Option "[watch]" can\'t be used with option "[members]"'),
    ([*BS, "--describe", "--all-groups", "--watch", "0"],
     "Invalid --watch interval '0': a number of seconds above 0"),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(a[2:]) or "no-action" for a, _ in CASES])
def test_usage_mistake(argv: list[str], message: str) -> None:
    assert_usage(argv, message)


def test_reset_without_mode_warns_before_refusing() -> None:
    status, out, err = groups(*BS, "--reset-offsets", "--to-earliest", "--all-topics")
    assert (status, out) == (1, "")
    lines = err.splitlines()
    assert lines[:2] == [RESET_WARNING, "Option [reset-offsets] takes one of these options: [group], [all-groups]"]


def test_no_arguments_and_help_print_the_description_and_exit_1() -> None:
    description = ("This tool helps to list all consumer groups, describe a consumer group, delete consumer group "
                   "info, or reset consumer group offsets.")
    assert_usage([], description)
    assert_usage(["--help"], description)


def test_version_exits_0() -> None:
    status, out, err = groups("--version")
    assert (status, err) == (0, "") and out.strip()


def test_long_options_may_be_shortened_as_joptsimple_allows() -> None:
    # --desc is --describe, --bootstrap is --bootstrap-server: the check that fails is the group scope.
    assert_usage(["--bootstrap", "127.0.0.1:1", "--desc"], "Option [describe] takes one of these options: [group], [all-groups]")
    # An ambiguous prefix is not an option ("--to" is to-offset, to-datetime, ...).
    assert_usage([*BS, "--to", "1"], "to is not a recognized option")


def test_an_unreachable_cluster_is_an_error_on_stdout_with_status_0() -> None:
    status, out, err = groups("--bootstrap-server", "127.0.0.1:1", "--list", "--timeout", "500")
    assert status == 0, err
    assert out.startswith("\nError: Executing consumer group command failed due to "), out


def test_topic_args() -> None:
    assert parse_topic_arg("t") == ("t", None)
    assert parse_topic_arg("t:0,2") == ("t", [0, 2])


def test_the_groupcoord_command_runs_the_tool() -> None:
    done = subprocess.run([sys.executable, "-m", "coordinator", "groups", "--list"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith('Missing required argument "[bootstrap-server]"\n'), done.stderr
