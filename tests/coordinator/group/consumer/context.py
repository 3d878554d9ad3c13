"""A GroupTestContext with topics and a stand-in server assignor, and ConsumerGroupHeartbeat and
ConsumerGroupDescribe wrappers; ``state`` summarises everything the records determine."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from coordinator.group.assignors.spec import GroupSpec, TopicDescriber
from coordinator.group.config import GroupConfig
from coordinator.group.topics_image import StaticTopicsImage
from protocol.consumer_group_messages import ConsumerGroupHeartbeatRequest
from tests.coordinator.group.group_test_context import GroupTestContext

Q = ConsumerGroupHeartbeatRequest


class RoundRobinAssignor:
    """A placeholder for the server assignors (``coordinator/group/assignors``, another part of
    issue 31): each topic's partitions dealt round-robin to its subscribers in member-id order;
    deterministic, never a partition twice, only subscribed and existing partitions."""

    def __init__(self, name: str) -> None:
        self.name = name

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in group.members}
        all_topics = sorted({t for spec in group.members.values() for t in spec.subscribed_topic_ids})
        for topic_id in all_topics:
            subscribers = sorted(m for m, spec in group.members.items() if topic_id in spec.subscribed_topic_ids)
            for p in range(max(topics.num_partitions(topic_id), 0)):
                out[subscribers[p % len(subscribers)]].setdefault(topic_id, set()).add(p)
        return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def assignors() -> dict[str, RoundRobinAssignor]:
    return {"uniform": RoundRobinAssignor("uniform"), "range": RoundRobinAssignor("range")}


class ConsumerGroupTestContext(GroupTestContext):
    def __init__(self, config: GroupConfig | None = None, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("topics", StaticTopicsImage())
        kwargs.setdefault("assignors", assignors())
        super().__init__(config, *args, **kwargs)

    @property
    def topics(self) -> StaticTopicsImage:
        topics: StaticTopicsImage = self.shard_kwargs["topics"]
        return topics

    @property
    def cgroups(self) -> Any:
        return self.shard.consumer_manager.groups

    def topic_id(self, name: str) -> uuid.UUID:
        topic = self.topics.get(name)
        assert topic is not None
        return topic.topic_id

    def cg_heartbeat(self, group_id: str = "g", member_id: str | None = "m1", member_epoch: int = 0, *,
                     instance_id: str | None = None, rack_id: str | None = None, rebalance_timeout_ms: int | None = None,
                     topics: list[str] | None = None, regex: str | None = None, assignor: str | None = None,
                     owned: Mapping[str, list[int]] | None = None, version: int = 1,
                     client_id: str = "client", client_host: str = "/127.0.0.1") -> Any:
        """One heartbeat. ``owned`` by topic name (None: not sent). A join (epoch 0) defaults to
        a full request: rebalance timeout 30 s, owned [], topics ["foo"]."""
        if member_epoch == 0:
            rebalance_timeout_ms = 30_000 if rebalance_timeout_ms is None else rebalance_timeout_ms
            owned = {} if owned is None else owned
            topics = ["foo"] if topics is None and regex is None else topics
        if rebalance_timeout_ms is None:
            rebalance_timeout_ms = -1
        request = Q(version=version, group_id=group_id, member_id=member_id, member_epoch=member_epoch,
                    instance_id=instance_id, rack_id=rack_id, rebalance_timeout_ms=rebalance_timeout_ms,
                    subscribed_topic_names=topics, subscribed_topic_regex=regex, server_assignor=assignor,
                    topic_partitions=None if owned is None else [
                        Q.TopicPartitions(topic_id=self.topic_id(t), partitions=p) for t, p in owned.items()])
        return self._apply(self.shard.consumer_group_heartbeat(request, version, client_id, client_host)).response

    def state(self) -> dict[str, Any]:
        """Everything the records determine about consumer groups and offsets."""
        out: dict[str, Any] = {}
        for gid, g in self.cgroups.items():
            out[gid] = (g.group_epoch, g.metadata_hash, g.creation_time_ms, g.assignment_epoch,
                        dict(g.members), {m: dict(a) for m, a in g.target.items()}, dict(g.owners),
                        dict(g.static_members), dict(g.regexes), g.partition_metadata, g.has_epoch_record,
                        g.has_assignment_record)
        return {"consumer": out, "hard": self.shard.hard_state()}


def assignment_of(response: Any, ctx: ConsumerGroupTestContext) -> dict[str, list[int]] | None:
    """The response's assignment by topic name (None when not given)."""
    if response.assignment is None:
        return None
    names = {t.topic_id: t.name for t in ctx.topics.all()}
    return {names[tp.topic_id]: sorted(tp.partitions) for tp in response.assignment.topic_partitions}
