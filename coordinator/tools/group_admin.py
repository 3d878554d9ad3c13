"""A blocking admin client for consumer groups, over the wire: what kafka-consumer-groups.sh asks of
Kafka's Admin (``listConsumerGroups``, ``describeConsumerGroups``, ``listConsumerGroupOffsets``,
``listOffsets``, ``describeTopics``, ``alterConsumerGroupOffsets``, ``deleteConsumerGroups``,
``deleteConsumerGroupOffsets``), against any Kafka-compatible cluster.

Requests are batched so that many groups cost a handful of round trips, not one per group:
FindCoordinator v4+ carries every group id at once (KIP-699,
https://cwiki.apache.org/confluence/display/KAFKA/KIP-699%3A+Update+FindCoordinator+to+resolve+multiple+Coordinators+at+a+time),
DescribeGroups, ConsumerGroupDescribe and DeleteGroups take a list of ids, OffsetFetch v8+ fetches
many groups in one request (KIP-709,
https://cwiki.apache.org/confluence/display/KAFKA/KIP-709%3A+Extend+OffsetFetch+requests+to+accept+multiple+group+ids),
and ListOffsets goes once to each partition leader.

Consumer groups of the KIP-848 protocol are described with ConsumerGroupDescribe, and a group it
does not know (GROUP_ID_NOT_FOUND: a classic group) or a node without the API (UNSUPPORTED_VERSION)
is described with DescribeGroups instead, as Kafka's Admin does
(clients/src/main/java/org/apache/kafka/clients/admin/internals/DescribeConsumerGroupsHandler.java).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol.apis import ApiKey, request_class
from protocol.consumer_group_messages import ConsumerGroupDescribeRequest
from protocol.consumer_protocol import MalformedConsumerProtocol, decode_assignment
from protocol.errors import ErrorCode
from protocol.records import CorruptBatchError, decode_records, iter_batch_positions

from ..admin_client import AdminConnection, ClientConfigError, ClientError
from .kafka_errors import exception_text

__all__ = [
    "CommittedOffset", "GroupAdmin", "GroupAdminError", "GroupDescription", "GroupListing", "MemberDescription",
    "Node", "TopicPartition",
]

TopicPartition = tuple[str, int]

#: The newest version of each API this client speaks; the node's ApiVersions may lower it.
_OURS: dict[ApiKey, int] = {
    ApiKey.METADATA: 12, ApiKey.FIND_COORDINATOR: 4, ApiKey.LIST_GROUPS: 5, ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 1, ApiKey.OFFSET_FETCH: 8, ApiKey.LIST_OFFSETS: 7, ApiKey.OFFSET_COMMIT: 8,
    ApiKey.DELETE_GROUPS: 2, ApiKey.OFFSET_DELETE: 0, ApiKey.FETCH: 12,
}

#: Coordinator errors after which the coordinator is looked up again and the request retried
#: (Kafka's Admin treats them as retriable until the call's timeout).
_RETRY_COORDINATOR = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.NOT_COORDINATOR}

#: Bytes asked per partition by ``first_unconsumed_timestamps``: room for a producer's usual batch
#: (``batch.size`` 16384) and then some; a bigger batch is asked for again on its own.
_PEEK_PARTITION_BYTES = 64 * 1024
_PEEK_MAX_BYTES = 16 * 1024 * 1024
#: Transaction markers skipped before giving up on finding a data record.
_MARKER_SKIP = 16

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest.LATEST_TIMESTAMP / EARLIEST_TIMESTAMP).
_LATEST, _EARLIEST = -1, -2


class GroupAdminError(Exception):
    """The cluster could not answer (unreachable, timed out, an unknown topic): the message says which."""


@dataclass(frozen=True)
class Node:
    id: int
    host: str
    port: int


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None
    type: str | None


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]
    target_assignment: list[TopicPartition] | None = None
    member_epoch: int | None = None
    upgraded: bool | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    type: str  # "classic" | "consumer"
    state: str  # Kafka's state names: Stable, Empty, PreparingRebalance, ..., Dead
    protocol_type: str
    assignor: str
    coordinator: Node | None
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None
    members: list[MemberDescription] = field(default_factory=list)
    error_code: int = 0


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int | None
    metadata: str | None


class GroupAdmin:
    """A client of one cluster: connections to each node as needed, closed on exit."""

    def __init__(self, bootstrap: str, props: dict[str, str] | None = None, timeout_ms: int = 5000) -> None:
        self.bootstrap = [b.strip() for b in bootstrap.split(",") if b.strip()]
        if not self.bootstrap:
            raise GroupAdminError("--bootstrap-server names no server")
        self.props = dict(props or {})
        self.timeout_ms = timeout_ms
        self._conns: dict[tuple[str, int], AdminConnection] = {}
        self._versions: dict[tuple[str, int], dict[int, int]] = {}
        self._nodes: dict[int, Node] | None = None

    # --- connections -----------------------------------------------------------------------

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _connect(self, host: str, port: int) -> AdminConnection:
        conn = self._conns.get((host, port))
        if conn is None:
            conn = AdminConnection(f"{host}:{port}", self.props, client_id="groupcoord-groups")
            try:
                conn.__enter__()
            except (ClientConfigError, ClientError) as exc:
                raise GroupAdminError(str(exc)) from None
            assert conn._sock is not None
            conn._sock.settimeout(max(self.timeout_ms, 1) / 1000)
            self._conns[(host, port)] = conn
            versions = self._call_raw(conn, ApiKey.API_VERSIONS, 3, request_class(ApiKey.API_VERSIONS)(
                version=3, client_software_name="groupcoord", client_software_version="1"))
            self._versions[(host, port)] = {k.api_key: k.max_version for k in versions.api_keys}
        return conn

    def _call_raw(self, conn: AdminConnection, key: ApiKey, version: int, request: Any) -> Any:
        try:
            return conn.call(key, version, request)
        except TimeoutError:
            conn.close()
            self._conns.pop((conn.host, conn.port), None)
            raise GroupAdminError(f"Timed out waiting for a node assignment. Call: {_CALLS.get(key, key.name)}") from None
        except (ClientError, OSError) as exc:
            conn.close()
            self._conns.pop((conn.host, conn.port), None)
            raise GroupAdminError(f"connection to {conn.host}:{conn.port} failed: {exc}") from None

    def _version(self, node: tuple[str, int], key: ApiKey) -> int | None:
        """The version to send: ours, lowered to what the node serves; None when it does not serve the API."""
        theirs = self._versions[node].get(int(key))
        return None if theirs is None else min(theirs, _OURS[key])

    def _request(self, node: Node | tuple[str, int], key: ApiKey, build: Any) -> tuple[Any, int]:
        """Send ``build(version)`` to the node; (response, version). UNSUPPORTED_VERSION as GroupAdminError
        unless the caller checks ``_version`` first."""
        addr = (node.host, node.port) if isinstance(node, Node) else node
        conn = self._connect(*addr)
        version = self._version(addr, key)
        if version is None:
            raise GroupAdminError(f"{addr[0]}:{addr[1]} does not serve {key.name}")
        return self._call_raw(conn, key, version, build(version)), version

    def _bootstrap_request(self, key: ApiKey, build: Any) -> tuple[Any, int]:
        """To the first node of --bootstrap-server (or of the cluster) that answers."""
        last: Exception | None = None
        candidates = [_split(b) for b in self.bootstrap]
        if self._nodes:
            candidates = [(n.host, n.port) for n in self._nodes.values()] + candidates
        for addr in candidates:
            try:
                return self._request(addr, key, build)
            except GroupAdminError as exc:
                last = exc
        raise GroupAdminError(str(last))

    def _deadline(self) -> float:
        return time.monotonic() + self.timeout_ms / 1000

    # --- cluster metadata ------------------------------------------------------------------------

    def _metadata(self, topics: list[str] | None) -> Any:
        M = request_class(ApiKey.METADATA)

        def build(v: int) -> Any:
            wanted = None if topics is None else [M.MetadataRequestTopic(name=t, topic_id=None) for t in topics]
            return M(version=v, topics=wanted, allow_auto_topic_creation=False,
                     include_cluster_authorized_operations=False, include_topic_authorized_operations=False)

        response, _ = self._bootstrap_request(ApiKey.METADATA, build)
        self._nodes = {b.node_id: Node(b.node_id, b.host, b.port) for b in response.brokers}
        return response

    def nodes(self) -> dict[int, Node]:
        if self._nodes is None:
            self._metadata([])
        assert self._nodes is not None
        return self._nodes

    def partitions_of(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """Every partition of each topic (Metadata); an unknown topic raises GroupAdminError naming it."""
        wanted = list(dict.fromkeys(topics))
        if not wanted:
            return {}
        response = self._metadata(wanted)
        found: dict[str, list[int]] = {}
        for t in response.topics:
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise GroupAdminError(f"Topic '{t.name}' does not exist")
            if t.error_code:
                raise GroupAdminError(f"Topic '{t.name}': {ErrorCode(t.error_code).name}")
            found[t.name] = sorted(p.partition_index for p in t.partitions)
        for t in wanted:
            if t not in found:
                raise GroupAdminError(f"Topic '{t}' does not exist")
        return found

    def _leaders(self, topics: Iterable[str]) -> dict[TopicPartition, int]:
        response = self._metadata(sorted(set(topics)))
        return {(t.name, p.partition_index): p.leader_id for t in response.topics if not t.error_code
                for p in t.partitions}

    # --- groups ----------------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] | None = None, types: Iterable[str] | None = None) -> list[GroupListing]:
        """ListGroups to every node, with the state and type filters (v4, v5) when given."""
        states, types = list(states or []), list(types or [])
        seen: dict[str, GroupListing] = {}
        L = request_class(ApiKey.LIST_GROUPS)
        for node in self.nodes().values():
            response, version = self._request(node, ApiKey.LIST_GROUPS,
                                              lambda v: L(version=v, states_filter=states, types_filter=types))
            if response.error_code:
                raise GroupAdminError(f"ListGroups to {node.host}:{node.port}: {ErrorCode(response.error_code).name}")
            if (states and version < 4) or (types and version < 5):
                raise GroupAdminError(f"{node.host}:{node.port} cannot filter groups by state or type")
            for g in response.groups:
                seen[g.group_id] = GroupListing(g.group_id, g.protocol_type,
                                                g.group_state if version >= 4 else None,
                                                g.group_type if version >= 5 else None)
        return list(seen.values())

    def find_coordinators(self, ids: Iterable[str]) -> dict[str, Node]:
        """Each group's coordinator: one batched FindCoordinator (v4+), retried while one is unavailable."""
        pending = list(dict.fromkeys(ids))
        found: dict[str, Node] = {}
        deadline = self._deadline()
        F = request_class(ApiKey.FIND_COORDINATOR)
        while pending:
            response, version = self._bootstrap_request(
                ApiKey.FIND_COORDINATOR,
                lambda v, keys=pending: F(version=v, key_type=0, coordinator_keys=keys) if v >= 4 else F(
                    version=v, key_type=0, key=keys[0]))
            answers = response.coordinators if version >= 4 else [
                _Answer(pending[0], response.node_id, response.host, response.port, response.error_code)]
            retry = []
            for c in answers:
                if c.error_code == 0:
                    found[c.key] = Node(c.node_id, c.host, c.port)
                elif c.error_code in _RETRY_COORDINATOR:
                    retry.append(c.key)
                else:
                    raise GroupAdminError(exception_text(c.error_code))
            if version < 4:
                pending = pending[1:] + retry
            else:
                pending = retry
            if retry:
                _wait_or_fail(deadline, "findCoordinator")
        return found

    def _by_coordinator(self, ids: Iterable[str]) -> dict[Node, list[str]]:
        groups: dict[Node, list[str]] = defaultdict(list)
        for gid, node in self.find_coordinators(ids).items():
            groups[node].append(gid)
        return groups

    def describe_groups(self, ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Every group described, by its coordinator: ConsumerGroupDescribe, then DescribeGroups for the
        groups it does not know. An unknown group comes back in state Dead with no members."""
        pending = list(dict.fromkeys(ids))
        result: dict[str, GroupDescription] = {}
        deadline = self._deadline()
        while pending:
            retry: list[str] = []
            for node, gids in self._by_coordinator(pending).items():
                classic: list[str] = gids
                if self._version_at(node, ApiKey.CONSUMER_GROUP_DESCRIBE) is not None:
                    classic = []
                    response, _ = self._request(node, ApiKey.CONSUMER_GROUP_DESCRIBE, lambda v, gids=gids: ConsumerGroupDescribeRequest(
                        version=v, group_ids=gids, include_authorized_operations=False))
                    for g in response.groups:
                        if g.error_code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):
                            classic.append(g.group_id)
                        elif g.error_code in _RETRY_COORDINATOR:
                            retry.append(g.group_id)
                        else:
                            result[g.group_id] = _consumer_group(g, node)
                if classic:
                    D = request_class(ApiKey.DESCRIBE_GROUPS)
                    response, _ = self._request(node, ApiKey.DESCRIBE_GROUPS, lambda v, D=D, classic=classic: D(
                        version=v, groups=classic, include_authorized_operations=False))
                    for g in response.groups:
                        if g.error_code in _RETRY_COORDINATOR:
                            retry.append(g.group_id)
                        else:
                            result[g.group_id] = _classic_group(g, node)
            pending = retry
            if retry:
                _wait_or_fail(deadline, "describeConsumerGroups")
        return result

    def _version_at(self, node: Node, key: ApiKey) -> int | None:
        self._connect(node.host, node.port)
        return self._version((node.host, node.port), key)

    def committed_offsets(self, ids: Iterable[str]) -> dict[str, dict[TopicPartition, CommittedOffset]]:
        """Each group's committed offsets (OffsetFetch, all topics; v8+ many groups per request).
        Partitions without a committed offset are left out."""
        pending = list(dict.fromkeys(ids))
        result: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        deadline = self._deadline()
        O = request_class(ApiKey.OFFSET_FETCH)
        while pending:
            retry: list[str] = []
            for node, gids in self._by_coordinator(pending).items():
                if (self._version_at(node, ApiKey.OFFSET_FETCH) or 0) >= 8:
                    response, _ = self._request(node, ApiKey.OFFSET_FETCH, lambda v, gids=gids: O(version=v, require_stable=False, groups=[
                        O.OffsetFetchRequestGroup(group_id=g, member_id=None, member_epoch=-1, topics=None) for g in gids]))
                    answers = [(g.group_id, g.error_code, g.topics) for g in response.groups]
                else:
                    answers = []
                    for gid in gids:
                        response, _ = self._request(node, ApiKey.OFFSET_FETCH, lambda v, gid=gid: O(
                            version=v, group_id=gid, topics=None, require_stable=False))
                        answers.append((gid, response.error_code, response.topics))
                for gid, error, topics in answers:
                    if error in _RETRY_COORDINATOR:
                        retry.append(gid)
                        continue
                    if error and error != ErrorCode.GROUP_ID_NOT_FOUND:
                        raise GroupAdminError(exception_text(error))
                    result[gid] = {
                        (t.name, p.partition_index): CommittedOffset(
                            p.committed_offset, None if p.committed_leader_epoch < 0 else p.committed_leader_epoch,
                            p.metadata)
                        for t in topics or () for p in t.partitions if p.error_code == 0 and p.committed_offset >= 0}
            pending = retry
            if retry:
                _wait_or_fail(deadline, "listConsumerGroupOffsets")
        return result

    def offsets(self, tps: Iterable[TopicPartition], spec: str | int) -> dict[TopicPartition, int | None]:
        """Each partition's ``"earliest"`` or ``"latest"`` offset (the high watermark) or the first offset at
        or after a timestamp (ms), from its leader; None where the leader is unknown, it answers an error,
        or no record is that recent."""
        wanted = list(dict.fromkeys(tps))
        result: dict[TopicPartition, int | None] = {tp: None for tp in wanted}
        if not wanted:
            return result
        timestamp = {"latest": _LATEST, "earliest": _EARLIEST}.get(spec, spec) if isinstance(spec, str) else spec
        if not isinstance(timestamp, int):
            raise ValueError(f"offset spec {spec!r}: earliest, latest or a timestamp in ms")
        leaders = self._leaders(t for t, _ in wanted)
        nodes = self.nodes()
        by_leader: dict[Node, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for t, p in wanted:
            node = nodes.get(leaders.get((t, p), -1))
            if node is not None:
                by_leader[node][t].append(p)
        L = request_class(ApiKey.LIST_OFFSETS)
        for node, topics in by_leader.items():
            response, _ = self._request(node, ApiKey.LIST_OFFSETS, lambda v, topics=topics: L(
                version=v, replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=t, partitions=[
                    L.ListOffsetsTopic.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                    for p in ps]) for t, ps in topics.items()]))
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code == 0 and p.offset >= 0:
                        result[(t.name, p.partition_index)] = p.offset
        return result

    def first_unconsumed_timestamps(self, tps_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The timestamp of the first record at or after each committed offset: what a consumer of the
        group reads next, for lag in time (``record_timestamps`` for one offset per partition)."""
        found = self.record_timestamps({tp: (offset,) for tp, offset in tps_offsets.items()})
        return {tp: found[(tp, offset)] for tp, offset in tps_offsets.items()}

    def record_timestamps(self, wanted: Mapping[TopicPartition, Collection[int]]
                          ) -> dict[tuple[TopicPartition, int], int | None]:
        """For each partition and each offset asked, the timestamp of the first data record at or after
        it. Small Fetches (isolation read_uncommitted, no wait), one per partition leader for all its
        partitions, each partition read from the lowest offset not answered yet, so that offsets close
        together (many groups on one topic) are answered by one read; transaction markers are skipped,
        and an offset below the log start reads from the log start (retention deleted the records in
        between).

        None where there is no such record (the offset is at the high watermark: the caller says lag
        0), the leader is unknown or answers an error, or the call's timeout ran out. A batch larger
        than its share of the response comes back cut (or empty) and is asked for again in a later
        Fetch, where the first partition always gets one whole batch (KIP-74,
        https://cwiki.apache.org/confluence/display/KAFKA/KIP-74%3A+Add+Fetch+Response+Size+Limit+in+Bytes)."""
        result: dict[tuple[TopicPartition, int], int | None] = {
            (tp, o): None for tp, offsets in wanted.items() for o in offsets}
        # Per partition: the offsets not answered yet, and where to read next.
        pending = {tp: sorted(set(offsets)) for tp, offsets in wanted.items() if offsets}
        position = {tp: max(offsets[0], 0) for tp, offsets in pending.items()}
        if not pending:
            return result
        leaders = self._leaders(t for t, _ in pending)
        nodes = self.nodes()
        idle: dict[TopicPartition, int] = defaultdict(int)
        deadline = self._deadline()
        F = request_class(ApiKey.FETCH)
        while pending:
            by_leader: dict[Node, list[TopicPartition]] = defaultdict(list)
            for tp in list(pending):
                node = nodes.get(leaders.get(tp, -1))
                if node is None:
                    del pending[tp]
                else:
                    by_leader[node].append(tp)
            out_of_range: list[TopicPartition] = []
            done: list[TopicPartition] = []
            for node, tps in by_leader.items():
                by_topic: dict[str, list[int]] = defaultdict(list)
                for t, p in tps:
                    by_topic[t].append(p)
                response, _ = self._request(node, ApiKey.FETCH, lambda v, by_topic=by_topic, at=dict(position): F(
                    version=v, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=_PEEK_MAX_BYTES,
                    isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                    topics=[F.FetchTopic(topic=t, partitions=[F.FetchTopic.FetchPartition(
                        partition=p, current_leader_epoch=-1, fetch_offset=at[(t, p)], last_fetched_epoch=-1,
                        log_start_offset=-1, partition_max_bytes=_PEEK_PARTITION_BYTES) for p in ps])
                        for t, ps in by_topic.items()]))
                for topic in response.responses:
                    for part in topic.partitions:
                        tp = (topic.topic, part.partition_index)
                        if tp not in pending:
                            continue
                        if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                            out_of_range.append(tp)
                            continue
                        if part.error_code or position[tp] >= part.high_watermark:
                            done.append(tp)
                            continue
                        try:
                            records, end = _data_records(bytes(part.records or b""))
                        except CorruptBatchError:
                            done.append(tp)
                            continue
                        if end is None:
                            continue  # no whole batch: too big for its share, asked again
                        at, left = position[tp], []
                        for o in pending[tp]:
                            first = _first_at_or_after(records, max(o, at))
                            if first is None:
                                left.append(o)
                            else:
                                result[(tp, o)] = first
                        if len(left) == len(pending[tp]):
                            idle[tp] += 1  # only markers (or records before the offsets) read
                        pending[tp] = left
                        position[tp] = max([end] + left[:1])
                        if not left or idle[tp] > _MARKER_SKIP:
                            done.append(tp)
            for tp in done:
                pending.pop(tp, None)
            if out_of_range:
                starts = self.offsets(out_of_range, "earliest")
                for tp in out_of_range:
                    start = starts.get(tp)
                    if start is not None and start > position[tp]:
                        position[tp] = start
                    else:
                        pending.pop(tp, None)
            if pending and time.monotonic() >= deadline:
                break
        return result

    def alter_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """OffsetCommit with no member id and generation -1, as Admin's alterConsumerGroupOffsets: the
        coordinator accepts it only for a group without active members."""
        C = request_class(ApiKey.OFFSET_COMMIT)
        by_topic: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for (t, p), o in offsets.items():
            by_topic[t].append((p, o))
        node = self._coordinator(group)
        response, _ = self._request(node, ApiKey.OFFSET_COMMIT, lambda v: C(
            version=v, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            retention_time_ms=-1, topics=[C.OffsetCommitRequestTopic(name=t, partitions=[
                C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=-1, commit_timestamp=-1,
                    committed_metadata="") for p, o in ps]) for t, ps in by_topic.items()]))
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def _coordinator(self, group: str) -> Node:
        return self.find_coordinators([group])[group]

    def delete_groups(self, ids: Iterable[str]) -> dict[str, int]:
        """DeleteGroups to each coordinator: group id → error code (NON_EMPTY_GROUP for a group with members)."""
        result: dict[str, int] = {}
        D = request_class(ApiKey.DELETE_GROUPS)
        for node, gids in self._by_coordinator(ids).items():
            response, _ = self._request(node, ApiKey.DELETE_GROUPS, lambda v, gids=gids: D(version=v, groups_names=gids))
            result.update({r.group_id: r.error_code for r in response.results})
        return result

    def delete_offsets(self, group: str, tps: Iterable[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: (the group's error code, each partition's)."""
        by_topic: dict[str, list[int]] = defaultdict(list)
        for t, p in tps:
            by_topic[t].append(p)
        O = request_class(ApiKey.OFFSET_DELETE)
        node = self._coordinator(group)
        response, _ = self._request(node, ApiKey.OFFSET_DELETE, lambda v: O(version=v, group_id=group, topics=[
            O.OffsetDeleteRequestTopic(name=t, partitions=[
                O.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in by_topic.items()]))
        return response.error_code, {(t.name, p.partition_index): p.error_code
                                     for t in response.topics for p in t.partitions}


@dataclass(frozen=True)
class _Answer:
    key: str
    node_id: int
    host: str
    port: int
    error_code: int


#: Kafka's Admin call names, for its timeout message.
_CALLS = {ApiKey.LIST_GROUPS: "listConsumerGroups", ApiKey.DESCRIBE_GROUPS: "describeConsumerGroups",
          ApiKey.CONSUMER_GROUP_DESCRIBE: "describeConsumerGroups", ApiKey.OFFSET_FETCH: "listConsumerGroupOffsets",
          ApiKey.LIST_OFFSETS: "listOffsets", ApiKey.METADATA: "describeTopics",
          ApiKey.FIND_COORDINATOR: "findCoordinator", ApiKey.OFFSET_COMMIT: "alterConsumerGroupOffsets",
          ApiKey.DELETE_GROUPS: "deleteConsumerGroups", ApiKey.OFFSET_DELETE: "deleteConsumerGroupOffsets",
          ApiKey.FETCH: "fetch"}


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise GroupAdminError(f"--bootstrap-server must be HOST:PORT, not {address!r}")
    return host.strip("[]"), int(port)


def _wait_or_fail(deadline: float, call: str) -> None:
    if time.monotonic() >= deadline:
        raise GroupAdminError(f"Timed out waiting for a node assignment. Call: {call}")
    time.sleep(0.05)


def _data_records(data: bytes) -> tuple[list[tuple[int, int]], int | None]:
    """The (offset, timestamp) of the data records in the whole batches of fetched bytes, in offset
    order, and the offset after the last whole batch (None when there is none)."""
    records: list[tuple[int, int]] = []
    end: int | None = None
    try:
        for pos, header in iter_batch_positions(data):
            end = header.last_offset + 1
            if not header.is_control:
                records += [(header.base_offset + r.offset_delta, r.timestamp(header))
                            for r in decode_records(data, pos, header)]
    except CorruptBatchError:
        if end is None:
            raise
        # What came before the damaged batch still counts; the next read starts at the damaged one.
    return records, end


def _first_at_or_after(records: list[tuple[int, int]], offset: int) -> int | None:
    i = bisect_left(records, (offset, -(2**63)))
    return records[i][1] if i < len(records) else None


def _tps(assignment: Any) -> list[TopicPartition]:
    return sorted((tp.topic_name, p) for tp in assignment.topic_partitions for p in tp.partitions)


def _consumer_group(g: Any, node: Node) -> GroupDescription:
    members = [MemberDescription(
        m.member_id, m.instance_id, m.client_id, m.client_host, _tps(m.assignment), _tps(m.target_assignment),
        m.member_epoch, None if getattr(m, "member_type", -1) == -1 else m.member_type == 1) for m in g.members]
    return GroupDescription(g.group_id, "consumer", g.group_state, "consumer", g.assignor_name, node,
                            g.group_epoch, g.assignment_epoch, members, g.error_code)


def _classic_group(g: Any, node: Node) -> GroupDescription:
    members = []
    for m in g.members:
        assignment: list[TopicPartition] = []
        # Only the consumer protocol's assignment bytes have a known layout (Kafka's Admin decodes
        # those of protocol type "consumer" or empty, and leaves the others' empty).
        if g.protocol_type in ("consumer", "") and m.member_assignment:
            try:
                decoded = decode_assignment(bytes(m.member_assignment))
                assignment = sorted((t, p) for t, ps in decoded.assigned_partitions for p in ps)
            except MalformedConsumerProtocol:
                pass
        members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment))
    return GroupDescription(g.group_id, "classic", g.group_state, g.protocol_type, g.protocol_data, node,
                            None, None, members, g.error_code)
