"""KIP-848's server-side partition assignors, pure functions of a group and its topics.

``ASSIGNORS`` maps the names a member may ask for (``group.consumer.assignors``; the first is
the default) to the assignors. The contract is :mod:`coordinator.group.assignors.spec`.
"""

from __future__ import annotations

from coordinator.group.assignors.range import RangeAssignor
from coordinator.group.assignors.spec import (
    Assignment,
    GroupSpec,
    MemberSpec,
    PartitionAssignor,
    PartitionAssignorError,
    TopicDescriber,
)
from coordinator.group.assignors.uniform import UniformAssignor

__all__ = ["ASSIGNORS", "Assignment", "GroupSpec", "MemberSpec", "PartitionAssignor", "PartitionAssignorError",
           "RangeAssignor", "TopicDescriber", "UniformAssignor"]

ASSIGNORS: dict[str, PartitionAssignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
