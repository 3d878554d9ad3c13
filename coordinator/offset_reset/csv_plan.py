"""kafka-consumer-groups' reset-plan CSV: what ``--export`` prints and ``--from-file`` reads.

Kafka writes it with Jackson's CsvMapper (``CsvUtils``,
https://github.com/apache/kafka/blob/3.9.0/tools/src/main/java/org/apache/kafka/tools/consumer/group/CsvUtils.java):
no header, one record per line ending in ``\\n``; ``topic,partition,offset`` when one ``--group``
was given, ``group,topic,partition,offset`` otherwise (several groups, ``--all-groups``).
Reading (``parseResetPlan``) splits the text on ``\\n`` (trailing empty lines dropped); with one
``--group`` the three-column form is used when the first line reads as one, else every line must
hold four columns. Where Jackson would quietly read a short line with a 0 offset, this module
refuses it: a malformed line is a ``CsvPlanError`` naming the line.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping

__all__ = ["CsvPlanError", "export_csv", "parse_csv"]

TopicPartition = tuple[str, int]
_INT = re.compile(r"[-+]?[0-9]+")


class CsvPlanError(ValueError):
    """A line of a reset-plan CSV that is not a plan record; the message names the line."""


def _cell(value: str) -> str:
    # Jackson quotes a value holding the separator, a quote or a line break, doubling quotes.
    if any(c in value for c in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


def export_csv(plan: Mapping[str, Mapping[TopicPartition, int]], single_group: bool) -> str:
    """The CSV of a plan (group → partition → offset), groups and partitions sorted."""
    lines: list[str] = []
    for group in sorted(plan):
        for (topic, partition), offset in sorted(plan[group].items()):
            cells = [topic, str(partition), str(offset)]
            if not single_group:
                cells.insert(0, group)
            lines.append(",".join(_cell(c) for c in cells) + "\n")
    return "".join(lines)


def _split_lines(text: str) -> list[str]:
    """``String.split("\\n")``: trailing empty strings dropped (a lone "" stays)."""
    lines = text.split("\n")
    while len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _record(line: str, columns: int) -> tuple[str, ...] | None:
    """The cells of one line if it is a record of ``columns`` columns (last two integers)."""
    rows = list(csv.reader([line], strict=True)) if line.strip() else []
    if len(rows) != 1 or len(rows[0]) != columns:
        return None
    cells = tuple(rows[0])
    partition, offset = cells[-2], cells[-1]
    if not (_INT.fullmatch(partition) and _INT.fullmatch(offset)):
        return None
    if not (-(2**31) <= int(partition) < 2**31 and -(2**63) <= int(offset) < 2**63):
        return None
    return cells


def parse_csv(text: str, group: str | None = None) -> dict[str, dict[TopicPartition, int]]:
    """A reset plan (group → partition → offset) from CSV text.

    ``group`` is the one ``--group`` given, None for several groups or ``--all-groups``.
    A later line for the same partition wins, as in Kafka's map.
    """
    lines = _split_lines(text)
    three = group is not None and _safe_record(lines[0], 3) is not None
    columns = 3 if three else 4
    layout = "topic,partition,offset" if three else "group,topic,partition,offset"
    plan: dict[str, dict[TopicPartition, int]] = {}
    for number, line in enumerate(lines, start=1):
        cells = _safe_record(line, columns)
        if cells is None:
            raise CsvPlanError(f"Malformed reset plan line {number}: {line!r}; expected {layout}")
        if three:
            assert group is not None
            gid, topic, partition, offset = group, cells[0], cells[1], cells[2]
        else:
            gid, topic, partition, offset = cells
        plan.setdefault(gid, {})[(topic, int(partition))] = int(offset)
    return plan


def _safe_record(line: str, columns: int) -> tuple[str, ...] | None:
    try:
        return _record(line, columns)
    except csv.Error:
        return None
