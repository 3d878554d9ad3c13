"""``groupcoord groups --zookeeper HOST:PORT[/chroot]``: the ZooKeeper mode kafka-consumer-groups.sh had up to
Kafka 1.1 (``kafka.admin.ConsumerGroupCommand.ZkConsumerGroupService``, removed in 2.0.0; KIP-109 / Kafka's 1.1
"Managing Consumer Groups", https://kafka.apache.org/11/documentation.html#basic_ops_consumer_group), for groups
of the old high-level consumer that keep their members and offsets under ``/consumers`` (Kafka's "ZooKeeper
Directories", https://kafka.apache.org/0100/documentation.html#impl_zookeeper).

- ``--list``: the children of ``/consumers``, one per line.
- ``--delete --group G``: removes ``/consumers/G`` unless a consumer is registered under ``/consumers/G/ids``
  (Kafka 1.1's ``AdminUtils.deleteConsumerGroupInZK``), with 1.1's messages.
- ``--delete --group G --topic T``: removes the group's ``owners/T`` and ``offsets/T`` unless a consumer is
  registered (the whole group when T is the only topic it owns partitions of); ``--delete --topic T``: that for
  every group with offsets of T, skipping the active ones (1.1's ``deleteConsumerGroupInfoForTopicInZK`` and
  ``deleteAllConsumerGroupInfoForTopicInZK``,
  https://github.com/apache/kafka/blob/1.1/core/src/main/scala/kafka/admin/AdminUtils.scala).
- ``--describe --group G``: per partition TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID, the
  current offset stored in Kafka for the group or else ``/consumers/G/offsets/T/P``, the consumer from the owner
  znode (the thread id ``<consumer id>-<thread>`` without its thread), the log end offset asked of each
  partition's leader among the brokers registered in that ZooKeeper (``/brokers/ids``) with ListOffsets; then a
  line for each registered consumer that owns no partition.

The messages, the table's layout and the exit statuses are those of Kafka 1.1's ``ConsumerGroupCommand``
(https://github.com/apache/kafka/blob/1.1/core/src/main/scala/kafka/admin/ConsumerGroupCommand.scala); where this
tool differs, docs/groups_tool.md says so. The znodes are read through :mod:`coordinator.cluster.zk_consumers`; a malformed one (an offset that is not a
number, registration JSON that does not parse) is reported naming its path and the rest is still shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TextIO

from .group_admin import GroupAdmin, GroupAdminError
from .options import UsageError

__all__ = ["NOTE", "check_zk_args", "run_zk"]

#: Kafka 1.1's notice on stderr in this mode (ConsumerGroupCommand.main, ``opts.useOldConsumer``), printed once
#: the options passed their checks and before ZooKeeper is connected.
NOTE = "Note: This will only show information about consumers that use ZooKeeper (not those using the Java consumer API)."

MISSING = "-"
#: The actions Kafka 1.1's main counts (--reset-offsets too: accepted with --zookeeper, it fails when run).
_ZK_ACTIONS = ("list", "describe", "delete", "reset-offsets")
#: Options of this tool that Kafka 1.1 did not have at all: joptsimple refused them while parsing.
_UNKNOWN_IN_1_1 = ("all-groups", "delete-offsets", "type")
#: 1.1's ``availableUnless(zkConnectOpt)`` options (KIP-175's --describe views).
_UNAVAILABLE_WITH_ZOOKEEPER = ("members", "offsets", "state", "verbose")
_RESET_SCENARIOS = ("to-offset", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current", "shift-by",
                    "from-file")
#: Kafka 1.1's --reset-offsets warning when neither --dry-run nor --execute is given (its wording, before 2.x's).
RESET_WARNING = ("WARN: In a future major release, the default behavior of this command will be to prompt the user "
                 "before executing the reset rather than doing a dry run. You should add the --dry-run option "
                 "explicitly if you are scripting this command and want to keep the current default behavior "
                 "without prompting.")


def _cannot_combine(used: str, other: str) -> UsageError:
    # Kafka 1.1's CommandLineUtils.checkInvalidArgs, without a space before the second option (fixed in 2.x).
    return UsageError(f'Option "[{used}]" can\'t be used with option"[{other}]"')


def check_zk_args(seen: dict[str, list[str | None]], err: TextIO | None = None) -> None:
    """Kafka 1.1's checks of the ZooKeeper mode, in its order and words: joptsimple's while parsing, the
    one-action rule of ``main``, then ``ConsumerGroupCommandOptions.checkArgs``
    (https://github.com/apache/kafka/blob/1.1/core/src/main/scala/kafka/admin/ConsumerGroupCommand.scala,
    https://github.com/apache/kafka/blob/1.1/core/src/main/scala/kafka/utils/CommandLineUtils.scala).
    ``--watch`` is this tool's own and refused here; ``--output json`` is this tool's own and kept."""
    has = seen.__contains__
    for name in seen:  # joptsimple stops at the first option it does not know ...
        if name in _UNKNOWN_IN_1_1:
            raise UsageError(f"{name} is not a recognized option")
    for name in seen:  # ... and checks availability once all are read
        if name in _UNAVAILABLE_WITH_ZOOKEEPER:
            raise UsageError(f"Option(s) [{name}] are unavailable given other options on the command line")
    if has("watch"):
        raise UsageError("Option [watch] is not valid with [zookeeper].")
    if sum(has(a) for a in _ZK_ACTIONS) != 1:
        raise UsageError("Command must include exactly one action: " + ", ".join(f"--{a}" for a in _ZK_ACTIONS))
    if has("bootstrap-server"):
        raise UsageError("Option [bootstrap-server] is not valid with [zookeeper].")
    if has("describe") and not has("group"):
        raise UsageError('Missing required argument "[group]"')
    if has("delete") and not has("group") and not has("topic"):
        raise UsageError("Option [delete] either takes [group], [topic], or both")
    if has("reset-offsets"):
        if has("dry-run") and has("execute"):
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not has("dry-run") and not has("execute") and err is not None:
            print(RESET_WARNING, file=err)
        if not has("group"):
            raise UsageError('Missing required argument "[group]"')
        for scenario in _RESET_SCENARIOS:
            for other in _RESET_SCENARIOS:
                if other != scenario and has(scenario) and has(other):
                    raise _cannot_combine(scenario, other)
    if has("group") and has("list"):
        raise _cannot_combine("group", "list")
    for action in ("list", "describe"):
        if has("topic") and has(action):
            raise _cannot_combine("topic", action)
    if has("output") and seen["output"][-1] != "json":
        raise UsageError(f"Invalid output format '{seen['output'][-1]}'. Valid formats are: json")


@dataclass
class ZkOffsetRow:
    """One line of the describe table; ``topic`` and ``partition`` are None on the line of a registered consumer
    that owns no partition."""

    topic: str | None
    partition: int | None
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None


@dataclass
class ZkGroupView:
    group: str
    exists: bool
    rows: list[ZkOffsetRow] = field(default_factory=list)
    #: znodes that did not read (this tool's own, on stderr)
    errors: list[str] = field(default_factory=list)
    #: Kafka 1.1's lines for partitions without an offset znode (on stdout, before the table)
    missing_offsets: list[str] = field(default_factory=list)


class ZkFailure(Exception):
    """What Kafka 1.1's main caught and printed as ``Error: Executing consumer group command failed due to …``."""


def _no_node(path: str) -> ZkFailure:
    # The message of the ZkNoNodeException 1.1 got from zkclient's getChildren: the KeeperException it wraps.
    return ZkFailure(f"org.apache.zookeeper.KeeperException$NoNodeException: KeeperErrorCode = NoNode for {path}")


def consumer_of(thread_id: str) -> str:
    """The consumer id of an owner znode's thread id ``<consumer id>-<thread>`` (ConsumerThreadId's ``%s-%d``):
    what comes before its last ``-``, as Kafka 1.1 cut it. An owner without a ``-`` (which 1.1 failed on) is
    shown whole."""
    head, dash, _ = thread_id.rpartition("-")
    return head if dash else thread_id


def registered_brokers(client: Any) -> tuple[list[str], list[str]]:
    """HOST:PORT of each broker registered under /brokers/ids (Kafka's BrokerIdZNode JSON), and the errors of
    registrations that do not read, each naming its znode."""
    from kazoo.exceptions import NoNodeError

    from ..cluster.znodes import ZnodeError, decode_broker

    addresses: list[str] = []
    errors: list[str] = []
    try:
        ids = client.get_children("/brokers/ids")
    except NoNodeError:
        return [], ["no brokers are registered in this ZooKeeper (/brokers/ids does not exist)"]
    for broker_id in sorted(ids):
        path = f"/brokers/ids/{broker_id}"
        try:
            data, _ = client.get(path)
            reg = decode_broker(path, data)
        except NoNodeError:
            continue  # the broker went away between the listing and the read
        except ZnodeError as exc:
            errors.append(str(exc))
            continue
        host = f"[{reg.host}]" if ":" in reg.host else reg.host
        addresses.append(f"{host}:{reg.port}")
    return addresses, errors


def describe_group(client: Any, group: str, timeout_ms: int) -> ZkGroupView:
    """The rows of one group as Kafka 1.1's ``ZkConsumerGroupService.collectGroupOffsets`` made them: every
    partition of the group's topics (sorted here by topic and partition; 1.1 kept ZooKeeper's child order), then
    one line per subscribed topic of each registered consumer that owns no partition (its rebalance not done, or
    more consumers than partitions). 1.1 took the topics from ``/consumers/G/owners`` only, so it showed nothing
    of a group whose consumers had all stopped (their owner znodes are ephemeral); the topics under
    ``/consumers/G/offsets`` are added here so that such a group's offsets and lag are still shown."""
    from ..cluster.zk_consumers import CONSUMERS, ZkConsumers, group_path, offset_path

    if client.exists(CONSUMERS) is None:
        raise _no_node(CONSUMERS)  # 1.1 listed /consumers to look for the group
    if client.exists(group_path(group)) is None:
        return ZkGroupView(group, exists=False)
    zk_group = ZkConsumers(client).read_group(group)
    view = ZkGroupView(group, exists=True, errors=list(zk_group.errors))
    owners = {tp: consumer_of(thread) for tp, thread in zk_group.owners.items()}
    topics = set(_children(client, f"{group_path(group)}/owners")) | {t for t, _ in owners} | {
        t for t, _ in zk_group.offsets}
    tps = set(owners) | set(zk_group.offsets)
    ends: dict[tuple[str, int], int | None] = {}
    in_kafka: dict[tuple[str, int], int] = {}
    brokers, broker_errors = registered_brokers(client)
    view.errors.extend(broker_errors)
    if topics and brokers:
        try:
            with GroupAdmin(",".join(brokers), timeout_ms=timeout_ms) as admin:
                for topic, partitions in admin.partitions_of(sorted(topics)).items():
                    tps.update((topic, p) for p in partitions)
                ends = admin.offsets(tps, "latest")
                # 1.1 asked the group's coordinator first (OffsetFetch v2) and read ZooKeeper only for a partition
                # with no offset stored in Kafka: a group moving to Kafka storage by dual commit showed its Kafka
                # offsets (the rule of coordinator/ops/zk_era_groups.py too).
                try:
                    committed = admin.committed_offsets([group]).get(group, {})
                    in_kafka = {tp: c.offset for tp, c in committed.items() if tp in tps}
                except GroupAdminError as exc:
                    view.errors.append(f"offsets stored in Kafka unavailable, ZooKeeper's shown: {exc}")
        except GroupAdminError as exc:
            view.errors.append(f"log end offsets unavailable from the registered brokers {','.join(brokers)}: {exc}")
    for topic, partition in sorted(tps):
        current = in_kafka.get((topic, partition), zk_group.offsets.get((topic, partition)))
        # A malformed offset znode is among view.errors already; 1.1's line is for an absent one.
        if current is None and client.exists(offset_path(group, topic, partition)) is None:
            view.missing_offsets.append(f"Could not fetch offset from zookeeper for group '{group}' partition "
                                        f"'{topic}-{partition}' due to missing offset data in zookeeper.")
        end = ends.get((topic, partition))
        # 1.1's getLag: none for an offset of -1 (never committed) or an unknown log end.
        lag = end - current if end is not None and current is not None and current != -1 else None
        view.rows.append(ZkOffsetRow(topic, partition, current, end, lag, owners.get((topic, partition))))
    owning = set(owners.values())
    for member in zk_group.members:
        if member.consumer_id not in owning:
            view.rows.extend(ZkOffsetRow(None, None, None, None, None, member.consumer_id)
                             for _ in member.subscription)
    return view


def _active(client: Any, group: str) -> bool | None:
    """A consumer registered under ``/consumers/<group>/ids`` (Kafka 1.1's ``isConsumerGroupActive``); None when
    that znode does not exist, which 1.1 reported as a group that does not exist."""
    from kazoo.exceptions import NoNodeError

    from ..cluster.zk_consumers import ids_path

    try:
        return bool(client.get_children(ids_path(group)))
    except NoNodeError:
        return None


def _children(client: Any, path: str) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def delete_group(client: Any, group: str) -> str:
    """Kafka 1.1's deleteConsumerGroupInZK with deleteGroupsInfo's messages: refused while a consumer is
    registered, and for a group without ``ids`` (1.1 read it and caught the missing znode)."""
    from ..cluster.zk_consumers import group_path

    # The refusals are 1.1's printError lines: "Error: " first, on stdout.
    active = _active(client, group)
    if active is None:
        return f"Error: Delete for group '{group}' failed because group does not exist."
    if active:
        return f"Error: Delete for group '{group}' failed because its consumers are still active."
    client.delete(group_path(group), recursive=True)
    return f"Deleted all consumer group information for group '{group}' in zookeeper."


def _delete_topic_of_group(client: Any, group: str, topic: str) -> bool | None:
    """AdminUtils.deleteConsumerGroupInfoForTopicInZK: False while a consumer is registered, None without
    ``ids``; the whole group goes when ``topic`` is the only topic under its ``owners``, else its
    ``owners/<topic>`` and ``offsets/<topic>``."""
    from ..cluster.zk_consumers import group_path, offsets_path, owners_path

    active = _active(client, group)
    if active is None or active:
        return None if active is None else False
    if _children(client, f"{group_path(group)}/owners") == [topic]:
        client.delete(group_path(group), recursive=True)
    else:
        for path in (owners_path(group, topic), offsets_path(group, topic)):
            client.delete(path, recursive=True)
    return True


def delete_group_topic(client: Any, group: str, topic: str) -> str:
    """Kafka 1.1's ``--delete --group G --topic T`` line for one group (deleteGroupsInfoForTopic)."""
    done = _delete_topic_of_group(client, group, topic)
    if done is None:
        return f"Error: Delete for group '{group}' topic '{topic}' failed because group does not exist."
    if not done:
        return f"Error: Delete for group '{group}' topic '{topic}' failed because its consumers are still active."
    return f"Deleted consumer group information for group '{group}' topic '{topic}' in zookeeper."


def delete_topic_of_all_groups(client: Any, topic: str) -> str:
    """Kafka 1.1's deleteAllConsumerGroupInfoForTopicInZK: the groups with offsets of ``topic``, active ones
    left as they are. As in 1.1, a group without ``offsets`` (it never committed), or one with offsets of
    ``topic`` but without ``ids``, stops the command with ZooKeeper's NoNode (ZkFailure); the groups are taken
    in name order here (1.1: a hash set's)."""
    from kazoo.exceptions import NoNodeError

    from ..cluster.zk_consumers import CONSUMERS, ids_path, offsets_path

    for group in _children(client, CONSUMERS):
        try:
            topics = client.get_children(offsets_path(group))
        except NoNodeError:
            raise _no_node(offsets_path(group)) from None
        if topic in topics and _delete_topic_of_group(client, group, topic) is None:
            raise _no_node(ids_path(group))
    return f"Deleted consumer group information for all inactive consumer groups for topic '{topic}' in zookeeper."


def _text(value: object) -> str:
    return MISSING if value is None else str(value)


def print_group(view: ZkGroupView, out: TextIO, err: TextIO) -> None:
    """Kafka 1.1's printOffsets for the ZooKeeper mode: a blank line, then the table; TOPIC and CONSUMER-ID as
    wide as their longest value (at least 15), the other columns 10 and 15 wide, every line ending in a space
    after CONSUMER-ID. A group with nothing to show gets the header alone."""
    for error in view.errors:
        print(f"Error: {error}", file=err)
    if not view.exists:
        print(f"Error: The consumer group '{view.group}' does not exist.", file=out)
        return
    for line in view.missing_offsets:
        print(f"Error: {line}", file=out)
    header = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")
    rows = [tuple(_text(c) for c in (r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag,
                                     r.consumer_id)) for r in view.rows]
    widths = (max([15, *(len(r[0]) for r in rows)]), 10, 15, 15, 15, max([15, *(len(r[5]) for r in rows)]))
    print(file=out)
    for cells in [header, *rows]:
        print("".join(f"{c:<{w}} " for c, w in zip(cells, widths, strict=True)), file=out)


def group_json(view: ZkGroupView) -> dict[str, Any]:
    if not view.exists:
        return {"group": view.group, "storage": "zookeeper",
                "error": f"The consumer group '{view.group}' does not exist.", "errors": view.errors}
    return {"group": view.group, "storage": "zookeeper",
            "partitions": [{"topic": r.topic, "partition": r.partition, "current_offset": r.current_offset,
                            "log_end_offset": r.log_end_offset, "lag": r.lag, "consumer_id": r.consumer_id}
                           for r in view.rows],
            "errors": view.errors + view.missing_offsets}


def run_zk(args: Any, out: TextIO, err: TextIO) -> int:
    """The ZooKeeper mode once its options were checked, with Kafka 1.1's exit statuses: 0 also when the command
    failed (main printed the failure on stdout), 1 when ZooKeeper could not be reached (1.1 connected before its
    try, so the exception ended the JVM) and, this tool's own, for ``--reset-offsets``."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    print(NOTE, file=err)
    connect = args.zookeeper
    client = KazooClient(hosts=connect, timeout=args.timeout / 1000.0)
    try:
        client.start(timeout=args.timeout / 1000.0)
    except KazooTimeoutError:
        client.stop()
        client.close()
        # Kafka 1.1 died here with zkclient's ZkTimeoutException (after 30 s) and its stack; a clear line naming
        # the connect string instead, same exit status.
        print(f"groupcoord groups: cannot connect to ZooKeeper at {connect} within {args.timeout} ms", file=err)
        return 1
    try:
        return _act(client, args, out, err)
    except ZkFailure as exc:
        print(f"Error: Executing consumer group command failed due to {exc}", file=out)
        return 0
    finally:
        client.stop()
        client.close()


def _act(client: Any, args: Any, out: TextIO, err: TextIO) -> int:
    from ..cluster.zk_consumers import CONSUMERS, ZkConsumers
    from .json_output import dump

    as_json = args.output == "json"
    if args.reset_offsets:
        # Kafka 1.1 accepted the option and then failed with an UnsupportedOperationException without a message
        # ("failed due to null"); the same refusal, saying why and what to use instead, as a failure.
        print("Error: --reset-offsets does not act on ZooKeeper-based groups (nor did Kafka 1.1's); set their "
              "offsets with 'groupcoord zk-offsets import' or move them with 'groupcoord zk-offsets migrate'",
              file=out)
        return 1
    if args.list:
        if client.exists(CONSUMERS) is None and not as_json:
            raise _no_node(CONSUMERS)  # 1.1's getChildren("/consumers")
        groups = sorted(ZkConsumers(client).groups())
        if as_json:
            dump([{"group": g, "storage": "zookeeper"} for g in groups], out)
        else:
            for g in groups:
                print(g, file=out)
        return 0
    if args.delete:
        if len(args.topic) > 1:
            raise _one_value_only("topic")
        topic = args.topic[-1] if args.topic else None
        if topic is not None:
            from ..topics.registry import topic_name_error

            problem = topic_name_error(topic)
            if problem is not None:  # Kafka's Topic.validate, thrown to main's catch-all
                raise ZkFailure(problem)
            if not args.group:
                print(delete_topic_of_all_groups(client, topic), file=out)
                return 0
        for group in dict.fromkeys(args.group):
            print(delete_group(client, group) if topic is None else delete_group_topic(client, group, topic), file=out)
        return 0
    if as_json:
        if client.exists(CONSUMERS) is None:
            dump([group_json(ZkGroupView(g, exists=False)) for g in dict.fromkeys(args.group)], out)
            return 0
        dump([group_json(describe_group(client, g, args.timeout)) for g in dict.fromkeys(args.group)], out)
        return 0
    if len(args.group) > 1:  # (--output json, this tool's own, takes several)
        raise _one_value_only("group")
    print_group(describe_group(client, args.group[0], args.timeout), out, err)
    return 0


def _one_value_only(option: str) -> ZkFailure:
    # 1.1 read --group of --describe and --topic of --delete with joptsimple's valueOf, which throws on a
    # repeated option (MultipleArgumentsForOptionException, joptsimple 5's message template).
    return ZkFailure(f"Found multiple arguments for option {option}, but you asked for only one")
