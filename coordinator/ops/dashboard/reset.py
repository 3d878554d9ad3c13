"""Resetting a group's offsets from the dashboard, with kafka-consumer-groups.sh's rules.

The form names a scope (every partition the group has committed, or topics with optional
partition lists, as ``--all-topics`` / ``--topic t[:p,...]``) and a scenario (``--to-earliest``,
``--to-latest``, ``--to-current``, ``--to-offset``, ``--shift-by``, ``--to-datetime``,
``--by-duration``). The plan follows ``ConsumerGroupCommand.prepareOffsetsToReset`` and
``checkOffsetsRange`` (docs: https://kafka.apache.org/documentation/#basic_ops_consumer_group),
with the earliest, latest and by-timestamp offsets read in-process from the node's view instead
of ListOffsets. Only an Empty or Dead group is reset, with the tool's error text.

Executing sends the plan through the node's own OffsetCommit handler, as Admin's
``alterConsumerGroupOffsets`` does on the wire (no member id, generation -1), with the HTTP
user as the request's principal: the handler's ACL checks (READ on the group and the topics)
decide, and its per-partition error codes are what the page shows.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator.context import RequestContext
from coordinator.offset_reset.datetimes import parse_datetime, timestamp_for_duration
from coordinator.offset_reset.scenarios import ResetUsageError, lookups_for, parse_topic_args, plan_reset
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, request_class
from protocol.errors import ErrorCode

__all__ = ["SCENARIOS", "ResetError", "ResetForm", "PlanRow", "Plan", "parse_form", "inactive_error",
           "make_plan", "execute_plan"]

#: Form value → (label, what the value field means, or None when the scenario takes none).
SCENARIOS: dict[str, tuple[str, str | None]] = {
    "to-earliest": ("Earliest", None),
    "to-latest": ("Latest", None),
    "to-current": ("Current", None),
    "to-offset": ("To offset", "offset"),
    "shift-by": ("Shift by", "number of offsets (may be negative)"),
    "to-datetime": ("To datetime", "YYYY-MM-DDTHH:mm:SS.sss (UTC unless a zone is given)"),
    "by-duration": ("By duration", "PnDTnHnMnS"),
}
#: kafka-consumer-groups only resets groups in these states (``ConsumerGroupCommand.resetOffsets``).
RESETTABLE_STATES = frozenset({"Empty", "Dead"})


class ResetError(ValueError):
    """Bad input or a refused reset: one line, nothing changed."""


@dataclass(frozen=True)
class ResetForm:
    scenario: str
    value: str
    all_topics: bool
    #: topic → partitions (None: every partition of the topic).
    topics: dict[str, list[int] | None]


@dataclass(frozen=True)
class PlanRow:
    topic: str
    partition: int
    current: int | None
    new_offset: int
    #: The error name after execution ("" before, "NONE" once committed).
    result: str = ""


@dataclass
class Plan:
    group_id: str
    rows: list[PlanRow]
    warnings: list[str] = field(default_factory=list)


def parse_form(form: Mapping[str, str]) -> ResetForm:
    scenario = (form.get("scenario") or "").strip()
    if scenario not in SCENARIOS:
        raise ResetError("Option '[reset-offsets]' requires one of the following scenarios: "
                         + ", ".join(f"[{s}]" for s in SCENARIOS))
    value = (form.get("value") or "").strip()
    if SCENARIOS[scenario][1] is not None and not value:
        raise ResetError(f"Option [{scenario}] requires an argument")
    scope = (form.get("scope") or "").strip()
    topics: dict[str, list[int] | None] = {}
    if scope == "topics":
        try:
            explicit, whole = parse_topic_args((form.get("topics") or "").split())
        except ResetUsageError as exc:
            raise ResetError(str(exc)) from None
        for topic in whole:
            topics[topic] = None
        for topic, partition in explicit:
            known = topics.setdefault(topic, [])
            if known is not None:
                known.append(partition)
        if not topics:
            raise ResetError("One of the reset scopes should be defined: --all-topics, --topic.")
    elif scope != "all-topics":
        raise ResetError("One of the reset scopes should be defined: --all-topics, --topic.")
    return ResetForm(scenario, value, scope == "all-topics", topics)


def inactive_error(group_id: str, state: str) -> str | None:
    """The tool's refusal for a group that is not Empty or Dead, or None."""
    if state in RESETTABLE_STATES:
        return None
    return (f"Assignments can only be reset if the group '{group_id}' is inactive, "
            f"but the current state is {state}.")


def _long(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ResetError(f"Invalid {what}: '{value}' is not a number") from None


async def make_plan(view: Any, group_id: str, form: ResetForm, now_ms: int) -> Plan:
    """The new offsets (and the tool's warnings) for ``form``; ResetError for bad input."""
    group = view.group(group_id)
    state = group.state if group is not None else "Dead"
    refused = inactive_error(group_id, state)
    if refused:
        raise ResetError(refused)
    committed: dict[tuple[str, int], int] = {
        tp: c.offset for tp, c in (group.offsets.items() if group is not None else ()) if c.offset >= 0}
    hosted: dict[str, list[int]] = {}
    for topic, partition in view.partitions():
        hosted.setdefault(topic, []).append(partition)
    if form.all_topics:
        targets = sorted(committed)
    else:
        targets = []
        for topic, partitions in form.topics.items():
            if topic not in hosted:
                raise ResetError(f"Topic '{topic}' does not exist")
            for p in (sorted(hosted[topic]) if partitions is None else partitions):
                if p not in hosted[topic]:
                    raise ResetError(f"Partition {topic}-{p} does not exist")
                targets.append((topic, p))
    scenario, value = form.scenario, None
    if scenario in ("to-offset", "shift-by"):
        value = _long(form.value, "offset" if scenario == "to-offset" else "shift")
    needs = lookups_for(scenario)
    refresh = getattr(view, "refresh_offsets", None)
    if refresh is not None and needs & {"earliest", "latest", "timestamp"}:
        await refresh(targets)  # partitions led by other nodes: their leaders' offsets now
    earliest = {tp: view.earliest(*tp) for tp in targets} if "earliest" in needs else {}
    latest = {tp: view.latest(*tp) for tp in targets} if "latest" in needs else {}
    for_timestamp: dict[tuple[str, int], int | None] = {}
    if "timestamp" in needs:
        try:
            ts = (parse_datetime(form.value) if scenario == "to-datetime"
                  else timestamp_for_duration(now_ms, form.value))
        except ValueError as exc:
            raise ResetError(str(exc)) from None
        asked = [view.offset_for_timestamp(tp[0], tp[1], ts) for tp in targets]
        # Awaited together: lookups for partitions led by the same node go in one request.
        answers = await asyncio.gather(*(_answer(a) for a in asked))
        for tp, found in zip(targets, answers, strict=True):
            # The view answers the high watermark when no record is at or after ts; ListOffsets
            # answers -1 there, which is what the plan's "is empty" notice is about.
            for_timestamp[tp] = -1 if found is not None and found == latest.get(tp) else found
    try:
        planned = plan_reset(scenario, targets, value=value, committed=committed, earliest=earliest,
                             latest=latest, for_timestamp=for_timestamp)
    except ResetUsageError as exc:
        raise ResetError(str(exc)) from None
    rows = [PlanRow(t, p, committed.get((t, p)), offset) for (t, p), offset in sorted(planned.offsets.items())]
    return Plan(group_id, rows, [n.strip() for n in planned.notices] + planned.warnings)


async def _answer(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _request(plan: Plan, version: int) -> Any:
    cls = request_class(ApiKey.OFFSET_COMMIT)
    Topic = cls.OffsetCommitRequestTopic
    by_topic: dict[str, list[Any]] = {}
    for row in plan.rows:
        # Admin's alterConsumerGroupOffsets: OffsetAndMetadata(offset), so no leader epoch, no metadata.
        by_topic.setdefault(row.topic, []).append(Topic.OffsetCommitRequestPartition(
            partition_index=row.partition, committed_offset=row.new_offset, committed_leader_epoch=-1,
            committed_metadata=""))
    return cls(version=version, group_id=plan.group_id, generation_id_or_member_epoch=-1, member_id="",
               group_instance_id=None, retention_time_ms=-1,
               topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()])


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


async def execute_plan(handlers: Mapping[Any, Any], plan: Plan, *, principal: str, client_host: str,
                       peer: str) -> Plan:
    """Commit ``plan`` through the OffsetCommit handler as ``principal``; the plan with each row's result."""
    if not plan.rows:
        return plan
    version = SUPPORTED_VERSIONS[ApiKey.OFFSET_COMMIT][1]
    ctx = RequestContext(api_key=int(ApiKey.OFFSET_COMMIT), api_version=version, correlation_id=0,
                         client_id="groupcoord-dashboard", peer=peer, principal=principal, client_host=client_host)
    answer = handlers[ApiKey.OFFSET_COMMIT](ctx, _request(plan, version))
    if inspect.isawaitable(answer):
        answer = await answer
    errors = {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}
    rows = [PlanRow(r.topic, r.partition, r.current, r.new_offset,
                    _error_name(errors.get((r.topic, r.partition), int(ErrorCode.UNKNOWN_SERVER_ERROR))))
            for r in plan.rows]
    return Plan(plan.group_id, rows, plan.warnings)
