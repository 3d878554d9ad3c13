"""``--list``: group ids one per line, or with ``--state``/``--type`` a table of GROUP [TYPE] [STATE]
(Kafka 4.x ``ConsumerGroupCommand.listGroups/printGroupInfo``: GROUP as wide as the longest id, at least 15,
plus 10; TYPE and STATE 20 wide; ``Unknown`` when the server did not say)."""

from __future__ import annotations

from typing import TextIO

from .group_admin import GroupAdmin, GroupListing

__all__ = ["consumer_groups", "print_listing", "type_name"]


def consumer_groups(admin: GroupAdmin, states: list[str] | None = None,
                    types: list[str] | None = None) -> list[GroupListing]:
    """The consumer groups (classic groups of the consumer protocol type or none, and KIP-848 groups), as
    Kafka's ListGroupsOptions.forConsumerGroups(): share, streams and Connect groups are left out."""
    listed = admin.list_groups(states=states, types=types)
    return [g for g in listed if g.protocol_type in ("consumer", "")
            and (g.type is None or g.type.lower() in ("classic", "consumer"))]


def type_name(group_type: str | None) -> str:
    """GroupType.toString(): Classic, Consumer (the wire carries them in lower case)."""
    return "Unknown" if not group_type else group_type[:1].upper() + group_type[1:].lower()


def print_listing(groups: list[GroupListing], with_type: bool, with_state: bool, out: TextIO) -> None:
    if not with_type and not with_state:
        for g in groups:
            print(g.group_id, file=out)
        return
    width = max([15] + [len(g.group_id) for g in groups]) + 10

    def line(cells: list[str]) -> str:
        return f"{cells[0]:<{width}}" + "".join(f" {c:<20}" for c in cells[1:])

    header = ["GROUP"] + (["TYPE"] if with_type else []) + (["STATE"] if with_state else [])
    print(line(header), file=out)
    for g in groups:
        cells = [g.group_id] + ([type_name(g.type)] if with_type else []) + (
            [g.state or "Unknown"] if with_state else [])
        print(line(cells), file=out)
