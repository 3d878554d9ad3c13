"""What the target-assignment step hands a server assignor, by shape (the contract of
``coordinator/group/assignors/spec.py``; duck-typed so that this package does not depend on the
assignors package's classes)."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["MemberSpec", "GroupSpec", "TopicDescriber", "PartitionAssignor", "default_assignors"]

AssignorAssignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: AssignorAssignment


@dataclass(frozen=True, slots=True)
class GroupSpec:
    members: dict[str, MemberSpec]


class TopicDescriber(Protocol):
    def num_partitions(self, topic_id: uuid.UUID) -> int: ...

    def racks(self, topic_id: uuid.UUID, partition: int) -> tuple[str, ...]: ...


class PartitionAssignor(Protocol):
    @property
    def name(self) -> str: ...

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> Mapping[str, Mapping[uuid.UUID, frozenset[int]]]: ...


def default_assignors() -> Mapping[str, PartitionAssignor]:
    """The server assignors of ``coordinator/group/assignors`` once that package exists; none
    before (a group then fails its target assignment with UNKNOWN_SERVER_ERROR). Looked up by
    name at run time because the package is built in parallel (issue 31); once it is merged a
    plain ``from ..assignors import ASSIGNORS`` replaces this."""
    try:
        module = importlib.import_module("coordinator.group.assignors")
    except ImportError:
        return {}
    assignors: Mapping[str, PartitionAssignor] = module.ASSIGNORS
    return assignors
