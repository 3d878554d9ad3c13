"""Lag in offsets, as the two tools operators compare us with compute it.

* ``kafka-consumer-groups.sh --describe`` prints LAG = LOG-END-OFFSET - CURRENT-OFFSET, and ``-``
  when either side is missing or the committed offset is -1 (no commit)
  (``ConsumerGroupCommand.java``, https://github.com/apache/kafka/blob/3.9/tools/src/main/java/org/apache/kafka/tools/consumer/group/ConsumerGroupCommand.java).
  A committed offset past the log end (a truncated or recreated topic) gives a negative lag there.
* kafka-lag-exporter's ``kafka_consumergroup_group_lag`` is the latest offset minus the committed
  offset floored at 0, and NaN for a partition without a commit
  (https://github.com/seglo/kafka-lag-exporter, ``ConsumerGroupCollector.scala``).
"""

from __future__ import annotations

__all__ = ["tool_lag", "exporter_lag"]


def tool_lag(committed: int | None, log_end: int | None) -> int | None:
    """kafka-consumer-groups' LAG column; None prints as ``-``."""
    if committed is None or log_end is None or committed < 0:
        return None
    return log_end - committed


def exporter_lag(committed: int | None, log_end: int | None) -> int | None:
    """kafka-lag-exporter's offset lag; None is its NaN (no commit, or no known log end)."""
    if committed is None or log_end is None or committed < 0:
        return None
    return max(log_end - committed, 0)
