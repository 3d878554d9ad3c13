"""``--delete`` and ``--delete-offsets`` with kafka-consumer-groups.sh 4.x's output
(``ConsumerGroupCommand.deleteGroups/deleteOffsets``). A failure names Kafka's exception and its message,
as the Java tool prints the exception (``org.apache.kafka.common.errors.GroupNotEmptyException: The group
is not empty.``; tools/kafka_errors.py)."""

from __future__ import annotations

from typing import TextIO

from protocol.errors import ErrorCode

from .group_admin import GroupAdmin, GroupAdminError
from .kafka_errors import error_message, exception_text
from .options import parse_topic_arg

__all__ = ["delete_groups", "delete_offsets"]

MISSING = "-"

def _quoted(ids: list[str]) -> str:
    return ", ".join(f"'{g}'" for g in ids)


def delete_groups(admin: GroupAdmin, ids: list[str], out: TextIO) -> dict[str, int]:
    results = admin.delete_groups(ids)
    ok = [g for g in ids if results.get(g) == 0]
    failed = [g for g in ids if results.get(g, 0) != 0]
    if not failed:
        print(f"Deletion of requested consumer groups ({_quoted(ok)}) was successful.", file=out)
    else:
        print("\nError: Deletion of some consumer groups failed:", file=out)
        for g in failed:
            print(f"* Group '{g}' could not be deleted due to: {exception_text(results[g])}", file=out)
        if ok:
            print(f"\nThese consumer groups were deleted successfully: {_quoted(ok)}", file=out)
    return results


def delete_offsets(admin: GroupAdmin, group: str, topic_args: list[str], out: TextIO) -> None:
    """OffsetDelete for the partitions named (``t:0,1``) and every partition of the topics named bare."""
    results: dict[tuple[str, int], int] = {}
    partitions: set[tuple[str, int]] = set()
    bare = []
    for arg in topic_args:
        topic, parts = parse_topic_arg(arg)
        if parts is None:
            bare.append(topic)
        else:
            partitions.update((topic, p) for p in parts)
    for topic in dict.fromkeys(bare):
        try:
            partitions.update((topic, p) for p in admin.partitions_of([topic])[topic])
        except GroupAdminError:
            results[(topic, -1)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Sent even when no partition is left (a bare topic that does not exist), as Kafka's tool does:
    # the group's own error still comes back.
    top, per_partition = admin.delete_offsets(group, sorted(partitions))
    for tp in partitions:
        # A group-level error fails every partition's result too (Kafka's Admin).
        results[tp] = top or per_partition.get(tp, 0)
    if not top:
        partition_errors = sorted(c for c in per_partition.values() if c)
        if partition_errors:
            top = partition_errors[0]
    if top == ErrorCode.NONE:
        print(f"Request succeeded for deleting offsets from group {group}.", file=out)
    elif top in (ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 ErrorCode.NON_EMPTY_GROUP):
        print(f"\nError: {error_message(top)}", file=out)
    elif top in (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                 ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        print("\nError: Encountered some partition-level error, see the follow-up details.", file=out)
    else:
        print(f"\nError: Encountered some unknown error: {ErrorCode(top).name}", file=out)
    width = max([15] + [len(t) for t, _ in results])
    lines = [f"{'TOPIC':<{width}} {'PARTITION':<10} {'STATUS':<15}"]
    # Kafka orders the rows by topic name and partition number joined as one string.
    for (topic, p), code in sorted(results.items(), key=lambda e: e[0][0] + str(e[0][1])):
        status = f"Error: {exception_text(code)}" if code else "Successful"
        lines.append(f"{topic:<{width}} {str(p) if p >= 0 else MISSING:<10} {status:<15}")
    out.write("".join("\n" + line for line in lines) + "\n")
