"""Lag in time for ``--describe --output json`` and ``--watch``: the age of the first record each group
has not consumed yet, read over the wire (``GroupAdmin.first_unconsumed_timestamps``, a small Fetch at
the committed offset from the partition leader, ``GroupAdmin.record_timestamps``) and turned into seconds by the rule the server's lag
monitor uses (``coordinator/lag/time_lag.py``, ``lag_seconds_from_record``): 0 when the group is caught
up, None when unknown (no commit, no log end, or no record readable at the committed offset)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..lag.time_lag import lag_seconds_from_record
from .describe_views import GroupOffsets
from .group_admin import GroupAdmin

__all__ = ["RowKey", "lag_seconds"]

#: (group, topic, partition)
RowKey = tuple[str, str, int]


def lag_seconds(admin: GroupAdmin, groups: Sequence[GroupOffsets],
                now_ms: int | None = None) -> dict[RowKey, float | None]:
    """Each row's lag in seconds, evaluated at ``now_ms`` (default: after the records were read). The
    offsets of every group are read together (``GroupAdmin.record_timestamps``): groups committed
    close together on one partition cost one read of it."""
    result: dict[RowKey, float | None] = {}
    wanted: dict[tuple[str, int], set[int]] = {}
    for g in groups:
        for r in g.rows:
            key = (g.group, r.topic, r.partition)
            if r.current_offset is None or r.log_end_offset is None:
                result[key] = None
            elif r.current_offset >= r.log_end_offset:
                result[key] = 0.0
            else:
                wanted.setdefault((r.topic, r.partition), set()).add(r.current_offset)
    timestamps = admin.record_timestamps(wanted) if wanted else {}
    now = int(time.time() * 1000) if now_ms is None else now_ms
    for g in groups:
        for r in g.rows:
            key = (g.group, r.topic, r.partition)
            if key not in result and r.current_offset is not None:
                result[key] = lag_seconds_from_record(timestamps.get(((r.topic, r.partition), r.current_offset)), now)
    return result
