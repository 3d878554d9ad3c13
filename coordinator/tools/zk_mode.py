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
  current offset from ``/consumers/G/offsets/T/P``, the consumer from the owner znode (the thread id
  ``<consumer id>-<thread>`` without its thread), the log end offset asked of each partition's leader among the
  brokers registered in that ZooKeeper (``/brokers/ids``) with ListOffsets.

The znodes are read through :mod:`coordinator.cluster.zk_consumers`; a malformed one (an offset that is not a
number, registration JSON that does not parse) is reported naming its path and the rest is still shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from .group_admin import GroupAdmin, GroupAdminError
from .options import UsageError

__all__ = ["NOTE", "check_zk_args", "run_zk"]

#: Kafka 1.1's notice on stderr in this mode (ConsumerGroupCommand.main, ``opts.useOldConsumer``).
NOTE = "Note: This will only show information about consumers that use ZooKeeper (not those using the Java consumer API)."

MISSING = "-"
_THREAD_SUFFIX = re.compile(r"-\d+$")
#: The actions of Kafka 1.1's ZooKeeper mode (it refused --reset-offsets; --delete-offsets came with 2.4).
_ZK_ACTIONS = ("list", "describe", "delete")


def check_zk_args(seen: dict[str, list[str | None]]) -> None:
    """Kafka 1.1's checks of the ZooKeeper mode: no --bootstrap-server beside it, exactly one action, a group for
    --describe; options that only the Kafka-storage mode has are refused in the same words."""
    has = seen.__contains__
    if has("bootstrap-server"):
        raise UsageError("Option [bootstrap-server] is not valid with [zookeeper].")
    for other in ("reset-offsets", "delete-offsets", "all-groups", "command-config", "watch", "members",
                  "state", "type"):
        if has(other):
            raise UsageError(f"Option [{other}] is not valid with [zookeeper].")
    if sum(has(a) for a in _ZK_ACTIONS) != 1:
        raise UsageError("Command must include exactly one action: " + ", ".join(f"--{a}" for a in _ZK_ACTIONS))
    if has("describe") and not has("group"):
        raise UsageError("Option [describe] takes the option: [group]")
    if has("delete") and not has("group") and not has("topic"):
        # Kafka 1.1's ConsumerGroupCommandOptions.checkArgs, joptsimple's "[name]" spelling.
        raise UsageError("Option [delete] either takes [group], [topic], or both")
    if has("list") and has("group"):
        raise UsageError('Option "[group]" can\'t be used with option "[list]"')
    if has("topic") and not has("delete"):  # 1.1: --topic only with --delete
        action = next(a for a in _ZK_ACTIONS if has(a))
        raise UsageError(f'Option "[topic]" can\'t be used with option "[{action}]"')
    if has("output") and seen["output"][-1] != "json":
        raise UsageError(f"Invalid output format '{seen['output'][-1]}'. Valid formats are: json")


@dataclass
class ZkOffsetRow:
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None


@dataclass
class ZkGroupView:
    group: str
    exists: bool
    rows: list[ZkOffsetRow] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def consumer_of(thread_id: str) -> str:
    """The consumer id of an owner znode's thread id ``<consumer id>-<thread>`` (ConsumerThreadId's ``%s-%d``)."""
    return _THREAD_SUFFIX.sub("", thread_id)


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
    """The rows of one group: every partition of the topics it has offsets or owners for (Kafka 1.1 described
    all partitions of those topics), sorted by topic and partition."""
    from ..cluster.zk_consumers import ZkConsumers, group_path

    if client.exists(group_path(group)) is None:
        return ZkGroupView(group, exists=False)
    zk_group = ZkConsumers(client).read_group(group)
    view = ZkGroupView(group, exists=True, errors=list(zk_group.errors))
    owners = {tp: consumer_of(thread) for tp, thread in zk_group.owners.items()}
    tps = set(owners) | set(zk_group.offsets)
    ends: dict[tuple[str, int], int | None] = {}
    brokers, broker_errors = registered_brokers(client)
    view.errors.extend(broker_errors)
    if tps and brokers:
        try:
            with GroupAdmin(",".join(brokers), timeout_ms=timeout_ms) as admin:
                topics = sorted({t for t, _ in tps})
                for topic, partitions in admin.partitions_of(topics).items():
                    tps.update((topic, p) for p in partitions)
                ends = admin.offsets(tps, "latest")
        except GroupAdminError as exc:
            view.errors.append(f"log end offsets unavailable from the registered brokers {','.join(brokers)}: {exc}")
    for topic, partition in sorted(tps):
        current = zk_group.offsets.get((topic, partition))
        end = ends.get((topic, partition))
        lag = end - current if end is not None and current is not None and current >= 0 else None
        view.rows.append(ZkOffsetRow(topic, partition, current, end, lag, owners.get((topic, partition))))
    return view


def delete_group(client: Any, group: str) -> str:
    """Kafka 1.1's deleteConsumerGroupInZK: refused while a consumer is registered; a group with no znodes at all
    is "deleted" too, as 1.1 answered."""
    from ..cluster.zk_consumers import group_path

    # The refusal is 1.1's printError line: "Error: " first, on stdout.
    if _active(client, group):
        return f"Error: Delete for group '{group}' failed because its consumers are still active."
    client.delete(group_path(group), recursive=True)
    return f"Deleted all consumer group information for group '{group}' in zookeeper."


def _active(client: Any, group: str) -> bool:
    """A consumer registered under ``/consumers/<group>/ids`` (Kafka's ``isConsumerGroupActive``)."""
    from kazoo.exceptions import NoNodeError

    from ..cluster.zk_consumers import ids_path

    try:
        return bool(client.get_children(ids_path(group)))
    except NoNodeError:
        return False


def _children(client: Any, path: str) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def delete_group_topic(client: Any, group: str, topic: str) -> str:
    """Kafka 1.1's deleteConsumerGroupInfoForTopicInZK: refused while a consumer is registered; the whole group
    goes when ``topic`` is the only topic under its ``owners``, else its ``owners/<topic>`` and
    ``offsets/<topic>``. Messages as 1.1's ``deleteForTopic``."""
    from ..cluster.zk_consumers import group_path, offsets_path, owners_path

    if _active(client, group):
        return f"Error: Delete for group '{group}' topic '{topic}' failed because its consumers are still active."
    if _children(client, f"{group_path(group)}/owners") == [topic]:
        client.delete(group_path(group), recursive=True)
    else:
        for path in (owners_path(group, topic), offsets_path(group, topic)):
            client.delete(path, recursive=True)
    return f"Deleted consumer group information for group '{group}' topic '{topic}' in zookeeper."


def delete_topic_of_all_groups(client: Any, topic: str) -> str:
    """Kafka 1.1's deleteAllConsumerGroupInfoForTopicInZK: the groups with offsets of ``topic``, active ones
    left as they are."""
    from ..cluster.zk_consumers import CONSUMERS, offsets_path

    for group in _children(client, CONSUMERS):
        if topic in _children(client, offsets_path(group)):
            delete_group_topic(client, group, topic)
    return f"Deleted consumer group information for all inactive consumer groups for topic '{topic}' in zookeeper."


def _text(value: object) -> str:
    return MISSING if value is None else str(value)


def print_group(view: ZkGroupView, out: TextIO, err: TextIO) -> None:
    for error in view.errors:
        print(f"Error: {error}", file=err)
    if not view.exists:
        print(f"\nError: The consumer group '{view.group}' does not exist.", file=out)
        return
    if not view.rows:
        print(f"\nConsumer group '{view.group}' has no offsets and no owned partitions in ZooKeeper.", file=err)
        return
    # The widths of Kafka 0.10's ZooKeeper describe (%-30s %-10s %-15s %-15s %-15s %s), without its GROUP column
    # as 1.1 printed it.
    widths = (30, 10, 15, 15, 15)
    header = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")
    rows = [(r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag, r.consumer_id) for r in view.rows]
    for i, cells in enumerate([header, *rows]):
        line = " ".join([*(f"{_text(c):<{w}}" for c, w in zip(cells, widths, strict=False)), _text(cells[-1])])
        print("\n" + line if i == 0 else line, file=out)


def group_json(view: ZkGroupView) -> dict[str, Any]:
    if not view.exists:
        return {"group": view.group, "storage": "zookeeper",
                "error": f"The consumer group '{view.group}' does not exist.", "errors": view.errors}
    return {"group": view.group, "storage": "zookeeper",
            "partitions": [{"topic": r.topic, "partition": r.partition, "current_offset": r.current_offset,
                            "log_end_offset": r.log_end_offset, "lag": r.lag, "consumer_id": r.consumer_id}
                           for r in view.rows],
            "errors": view.errors}


def run_zk(args: Any, out: TextIO, err: TextIO) -> int:
    """The ZooKeeper mode once its options were checked: Kafka's exit statuses (0 also when ZooKeeper or the
    brokers could not answer; the error is printed on stdout)."""
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
        print(f"\nError: Executing consumer group command failed due to Could not connect to ZooKeeper at "
              f"{connect} within {args.timeout} ms", file=out)
        return 0
    try:
        return _act(client, args, out, err)
    finally:
        client.stop()
        client.close()


def _act(client: Any, args: Any, out: TextIO, err: TextIO) -> int:
    from ..cluster.zk_consumers import ZkConsumers
    from .json_output import dump

    as_json = args.output == "json"
    if args.list:
        groups = sorted(ZkConsumers(client).groups())
        if as_json:
            dump([{"group": g, "storage": "zookeeper"} for g in groups], out)
        else:
            for g in groups:
                print(g, file=out)
        return 0
    if args.delete:
        topic = args.topic[-1] if args.topic else None
        if topic is not None:
            from ..topics.registry import topic_name_error

            problem = topic_name_error(topic)
            if problem is not None:  # Kafka's Topic.validate, thrown to main's catch-all
                print(f"Error: Executing consumer group command failed due to {problem}", file=out)
                return 0
            if not args.group:
                print(delete_topic_of_all_groups(client, topic), file=out)
                return 0
        for group in dict.fromkeys(args.group):
            print(delete_group(client, group) if topic is None else delete_group_topic(client, group, topic), file=out)
        return 0
    views: Sequence[ZkGroupView] = [describe_group(client, g, args.timeout) for g in dict.fromkeys(args.group)]
    if as_json:
        dump([group_json(v) for v in views], out)
    else:
        for view in views:
            print_group(view, out, err)
    return 0
