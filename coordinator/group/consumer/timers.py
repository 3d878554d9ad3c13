"""The timers of KIP-848 consumer groups (soft state): their keys, the members' session and
rebalance timeouts, and the resolution of a regex new to the group.

Keys as Kafka keys them (``GroupMetadataManager.consumerGroupSessionTimeoutKey``,
``consumerGroupRebalanceTimeoutKey``; a classic member's join and sync timeouts):
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
Sessions cost O(1) per heartbeat and cause no timer churn: a heartbeat only moves the member's
stored deadline, and the session timer re-arms itself for what is left when it fires early.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from protocol.consumer_group_records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
)

from ...runtime.contract import Clock, CoordinatorResult, Record, Timer
from ..topics_image import TopicsImage
from .group import ConsumerGroup, ResolvedRegex
from .member import ConsumerGroupMember, MemberState
from .metadata_hash import topics_hash

__all__ = ["ConsumerGroupTimers", "session_timeout_key", "rebalance_timeout_key", "regex_resolution_key",
           "classic_join_timeout_key", "classic_sync_timeout_key"]

log = logging.getLogger("groupcoord.group.consumer")

ResponseT = TypeVar("ResponseT")


def session_timeout_key(group_id: str, member_id: str) -> str:
    return f"session-timeout-{group_id}-{member_id}"


def rebalance_timeout_key(group_id: str, member_id: str) -> str:
    return f"rebalance-timeout-{group_id}-{member_id}"


def regex_resolution_key(group_id: str) -> str:
    return f"regex-resolution-{group_id}"


def classic_join_timeout_key(group_id: str, member_id: str) -> str:
    """A classic member told to rejoin must do so within its rebalance timeout."""
    return f"join-timeout-{group_id}-{member_id}"


def classic_sync_timeout_key(group_id: str, member_id: str) -> str:
    """A classic member that joined must send SyncGroup within its rebalance timeout."""
    return f"sync-timeout-{group_id}-{member_id}"


class ConsumerGroupTimers:
    """Base of :class:`~coordinator.group.consumer.manager.ConsumerGroupManager`: its timers."""

    groups: dict[str, ConsumerGroup]
    clock: Clock
    timer: Timer
    topics: TopicsImage
    regex_resolver: Callable[[str, Iterable[str]], frozenset[str]]
    session_deadlines: dict[tuple[str, str], int]
    hash_checked_at: dict[str, int]
    topic_filters: dict[str, Callable[[str], bool]]
    loaded: bool

    if TYPE_CHECKING:
        # The manager's.
        def session_timeout_ms(self, group_id: str) -> int: ...

        def member_session_timeout_ms(self, group_id: str, member: ConsumerGroupMember | None) -> int: ...

        def fence_member(self, group: ConsumerGroup, member_id: str, response: ResponseT | None = None
                         ) -> CoordinatorResult[ResponseT]: ...

        @staticmethod
        def _subscribed_names(members: Mapping[str, ConsumerGroupMember], regexes: Mapping[str, ResolvedRegex]
                              ) -> set[str]: ...

    def _schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """Move the member's session deadline (``timeout_ms``: a classic member's own; None: the
        group's). A heartbeat only stores the new deadline; the
        timer is armed when none is, and when it fires early it re-arms itself for what is left
        (no timer churn per heartbeat, as the classic sessions of ``rebalance.py``)."""
        timeout = self.session_timeout_ms(group_id) if timeout_ms is None else timeout_ms
        self.session_deadlines[(group_id, member_id)] = self.clock.now_ms() + timeout
        key = session_timeout_key(group_id, member_id)
        if not self.timer.is_scheduled(key):
            self._arm_session_timer(group_id, member_id, timeout)

    def _arm_session_timer(self, group_id: str, member_id: str, delay_ms: int) -> None:
        def expire() -> CoordinatorResult[None]:
            deadline = self.session_deadlines.get((group_id, member_id))
            group = self.groups.get(group_id)
            if deadline is None or group is None or member_id not in group.members:
                self.session_deadlines.pop((group_id, member_id), None)
                return CoordinatorResult()
            left = deadline - self.clock.now_ms()
            if left > 0:
                self._arm_session_timer(group_id, member_id, left)
                return CoordinatorResult()
            log.info("[GroupId %s] Member %s fenced from the group because its session expired.", group_id, member_id)
            return self.fence_member(group, member_id)

        self.timer.schedule(session_timeout_key(group_id, member_id), delay_ms, expire,
                            name="consumer-group-session-timeout")

    def _schedule_rebalance_timeout(self, group_id: str, member_id: str, member_epoch: int, timeout_ms: int) -> None:
        def expire() -> CoordinatorResult[None]:
            group = self.groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            if group is None or member is None or member.member_epoch != member_epoch:
                return CoordinatorResult()
            log.info("[GroupId %s] Member %s fenced from the group because it failed to transition from epoch %d "
                     "within %dms.", group_id, member_id, member_epoch, timeout_ms)
            return self.fence_member(group, member_id)

        self.timer.schedule(rebalance_timeout_key(group_id, member_id), max(timeout_ms, 0), expire,
                            name="consumer-group-rebalance-timeout")

    def on_loaded(self) -> None:
        """Every member gets a fresh session; a member still revoking gets a fresh rebalance timeout;
        a regex a member brought before the previous coordinator could resolve it is resolved."""
        self.loaded = True
        for group in self.groups.values():
            if any(m.subscribed_topic_regex and m.subscribed_topic_regex not in group.regexes
                   for m in group.members.values()):
                self._schedule_regex_resolution(group.group_id)
            for member in group.members.values():
                self._schedule_session_timeout(group.group_id, member.member_id,
                                               self.member_session_timeout_ms(group.group_id, member))
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group.group_id, member.member_id, member.member_epoch,
                                                     member.rebalance_timeout_ms)

    def on_unloaded(self) -> None:
        for group in self.groups.values():
            for member_id in group.members:
                self.timer.cancel(session_timeout_key(group.group_id, member_id))
                self.timer.cancel(rebalance_timeout_key(group.group_id, member_id))
        self.session_deadlines.clear()

    def cancel_classic_timers(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(classic_join_timeout_key(group_id, member_id))
        self.timer.cancel(classic_sync_timeout_key(group_id, member_id))

    def _regex_candidates(self, group_id: str) -> list[str]:
        """The topic names a regex of the group may match: every topic of the image, or with an
        authorizer those the refreshing member's principal may DESCRIBE (Kafka 4.0)."""
        names = [t.name for t in self.topics.all()]
        describable = self.topic_filters.get(group_id)
        return names if describable is None else [n for n in names if describable(n)]

    def _schedule_regex_resolution(self, group_id: str) -> None:
        def resolve() -> CoordinatorResult[None]:
            group = self.groups.get(group_id)
            if group is None:
                return CoordinatorResult()
            wanted = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
            names = self._regex_candidates(group_id)
            version, now = self.topics.version, self.clock.now_ms()
            records: list[Record] = []
            regexes = dict(group.regexes)
            for pattern in sorted(wanted - group.regexes.keys()):
                try:
                    topics = tuple(sorted(self.regex_resolver(pattern, names)))
                except ValueError as exc:  # compiled when it came; cannot fail unless the engine changed
                    log.warning("[GroupId %s] Regular expression %r no longer compiles: %s", group_id, pattern, exc)
                    topics = ()
                records.append((ConsumerGroupRegularExpressionKey(group_id, pattern),
                                ConsumerGroupRegularExpressionValue(topics, version, now)))
                regexes[pattern] = ResolvedRegex(topics, version, now)
            if not records:
                return CoordinatorResult()
            # The resolved topics join the group's subscription: a new epoch, and a new target
            # assignment at the next heartbeat.
            metadata_hash = topics_hash(self._subscribed_names(group.members, regexes), self.topics)
            self.hash_checked_at[group_id] = version
            records.append((ConsumerGroupMetadataKey(group_id),
                            ConsumerGroupMetadataValue(group.group_epoch + 1, metadata_hash, group.creation_time_ms)))
            return CoordinatorResult(records)

        if not self.timer.is_scheduled(regex_resolution_key(group_id)):
            self.timer.schedule(regex_resolution_key(group_id), 0, resolve, name="consumer-group-regex-resolution")

