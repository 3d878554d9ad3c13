"""Builders of the kafka-python response objects the group handlers answer with.

Fields a version does not have are left at their defaults so that two responses of one version
compare equal field by field in tests. Strings that are only nullable from some version on
(JoinGroup ``ProtocolName`` from v7) are sent as ``""`` before it.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka.protocol.consumer import JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse

from protocol.errors import ErrorCode
from protocol.hot_responses import HeartbeatAnswer
from protocol.kafka_types import KafkaResponse, KafkaStruct

__all__ = ["join_response", "join_error", "sync_response", "heartbeat_response", "leave_response",
           "JoinMember", "LeaveMember"]

JoinMember = JoinGroupResponse.JoinGroupResponseMember
LeaveMember = LeaveGroupResponse.MemberResponse


def join_response(version: int, *, error: int = ErrorCode.NONE, generation_id: int = -1,
                  protocol_type: str | None = None, protocol_name: str | None = None, leader: str = "",
                  member_id: str = "", members: Iterable[KafkaStruct] = (), skip_assignment: bool = False) -> KafkaResponse:
    return JoinGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=int(error),
        generation_id=generation_id,
        protocol_type=protocol_type if version >= 7 else None,
        protocol_name=protocol_name if protocol_name is not None or version >= 7 else "",
        leader=leader,
        skip_assignment=skip_assignment if version >= 9 else False,
        member_id=member_id,
        members=[JoinMember(member_id=m.member_id, group_instance_id=m.group_instance_id if version >= 5 else None,
                            metadata=m.metadata) for m in members],
    )


def join_error(version: int, error: int, member_id: str = "") -> KafkaResponse:
    """A JoinGroup error: generation -1, no protocol, no leader, no members."""
    return join_response(version, error=error, member_id=member_id)


def sync_response(version: int, error: int = ErrorCode.NONE, assignment: bytes = b"",
                  protocol_type: str | None = None, protocol_name: str | None = None) -> KafkaResponse:
    return SyncGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=int(error),
        protocol_type=protocol_type if version >= 5 else None,
        protocol_name=protocol_name if version >= 5 else None,
        assignment=assignment,
    )


def heartbeat_response(version: int, error: int) -> HeartbeatAnswer:
    return HeartbeatAnswer(int(error))


def leave_response(version: int, error: int, members: list[tuple[str, str | None, int]]) -> KafkaResponse:
    """v0-2 carry one member, whose error is the top-level error (KIP-345 batching is v3+)."""
    if version < 3:
        if error == ErrorCode.NONE and members:
            error = members[0][2]
        return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=int(error))
    return LeaveGroupResponse(
        version=version, throttle_time_ms=0, error_code=int(error),
        members=[LeaveMember(member_id=m, group_instance_id=i, error_code=int(e)) for m, i, e in members],
    )
