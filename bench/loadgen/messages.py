"""Request builders for the workloads, at whichever versions were negotiated, and response checks.

Every builder returns a complete frame (correlation id 0, patched per send by the loader).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from protocol.apis import ApiKey

from .wire import decode, encode

#: Error codes by name, for the reports.
ERROR_NAMES = {0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 14: "COORDINATOR_LOAD_IN_PROGRESS",
               15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR", 22: "ILLEGAL_GENERATION",
               25: "UNKNOWN_MEMBER_ID", 27: "REBALANCE_IN_PROGRESS", 35: "UNSUPPORTED_VERSION",
               42: "INVALID_REQUEST", 79: "MEMBER_ID_REQUIRED", -1: "UNKNOWN_SERVER_ERROR"}


def commit_frame(version: int, group: str, topic: str, partitions: int, offset: int = 1000,
                 generation: int = -1, member_id: str = "") -> bytes:
    """A simple-consumer OffsetCommit (generation -1, no member) of ``partitions`` partitions."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return encode(ApiKey.OFFSET_COMMIT, version, OffsetCommitRequest(
        version=version, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=None, retention_time_ms=-1,
        topics=[T(name=topic, partitions=[P(partition_index=p, committed_offset=offset + p, committed_leader_epoch=-1,
                                             committed_metadata="") for p in range(partitions)])]))


def fetch_frame(version: int, group: str, topic: str, partitions: int) -> bytes:
    """An OffsetFetch of ``partitions`` partitions of one topic for one group (v8+: batched form)."""
    if version >= 8:
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        T = G.OffsetFetchRequestTopics
        message = OffsetFetchRequest(version=version, groups=[G(
            group_id=group, member_id=None, member_epoch=-1,
            topics=[T(name=topic, partition_indexes=list(range(partitions)))])], require_stable=False)
    else:
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        message = OffsetFetchRequest(version=version, group_id=group,
                                     topics=[T(name=topic, partition_indexes=list(range(partitions)))],
                                     require_stable=False)
    return encode(ApiKey.OFFSET_FETCH, version, message)


def heartbeat_frame(version: int, group: str, generation: int, member_id: str) -> bytes:
    return encode(ApiKey.HEARTBEAT, version, HeartbeatRequest(
        version=version, group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None))


def join_request(version: int, group: str, member_id: str, session_ms: int = 45_000,
                 rebalance_ms: int = 30_000) -> Any:
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(version=version, group_id=group, session_timeout_ms=session_ms,
                            rebalance_timeout_ms=rebalance_ms, member_id=member_id, group_instance_id=None,
                            protocol_type="consumer", protocols=[P(name="range", metadata=b"\x00\x01bench")],
                            reason=None)


def sync_request(version: int, group: str, generation: int, member_id: str,
                 assignments: list[tuple[str, bytes]]) -> Any:
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest(version=version, group_id=group, generation_id=generation, member_id=member_id,
                            group_instance_id=None, protocol_type="consumer", protocol_name="range",
                            assignments=[A(member_id=m, assignment=a) for m, a in assignments])


def error_codes(message: Any) -> list[int]:
    """Every ``error_code`` anywhere in a decoded response (top level, groups, topics, partitions)."""
    codes: list[int] = []

    def walk(obj: Any) -> None:
        if isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item)
            return
        fields = getattr(obj, "fields", None) or getattr(type(obj), "fields", None)
        if not fields:
            return
        for name in fields:
            value = getattr(obj, name, None)
            if name == "error_code" and value is not None:
                codes.append(int(value))
            elif isinstance(value, (list, tuple)) or hasattr(value, "fields"):
                walk(value)

    walk(message)
    return codes


def response_errors(api: int, version: int, frame: bytes) -> list[int]:
    """The non-zero error codes in a response frame (size prefix stripped); [-2] if undecodable."""
    try:
        _cid, message = decode(api, version, frame)
    except Exception:  # noqa: BLE001
        return [-2]
    return [c for c in error_codes(message) if c]
