"""Every handler answers every version it serves with a response that encodes."""

from __future__ import annotations

import pytest

from coordinator.group.config import GroupConfig
from protocol.errors import ErrorCode as E

from .group_test_context import GroupTestContext


@pytest.mark.parametrize("version", range(0, 10))
def test_join_sync_heartbeat_leave_encode_at_every_version(version: int) -> None:
    ctx = GroupTestContext(GroupConfig(initial_rebalance_delay_ms=0))
    first = ctx.join_group("g", version=version)
    ctx.sleep(0)
    response = first.result()
    if version >= 4:
        assert response.error_code == E.MEMBER_ID_REQUIRED
        response.encode()
        first = ctx.join_group("g", response.member_id, version=version)
        ctx.sleep(0)
        response = first.result()
    assert response.error_code == E.NONE
    response.encode()
    member_id, generation = response.member_id, response.generation_id
    sync_version = min(version, 5)
    sync = ctx.sync_group("g", member_id, generation, assignments={member_id: b"a"}, version=sync_version).result()
    assert sync.error_code == E.NONE and sync.assignment == b"a"
    sync.encode()
    beat = ctx.heartbeat("g", member_id, generation, version=min(version, 4))
    assert beat.error_code == E.NONE
    beat.encode(version=min(version, 4))
    leave = ctx.leave_group("g", [(member_id, None)], version=min(version, 5))
    assert leave.error_code == E.NONE
    leave.encode()
    ctx.join_group("g", "stranger", version=version).result().encode()


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_encodes_at_every_version(version: int) -> None:
    ctx = GroupTestContext()
    response = ctx.commit_offsets("g", {("t", 0): 1}, version=version)
    assert response.topics[0].partitions[0].error_code == E.NONE
    response.encode(version=version)


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_encodes_at_every_version(version: int) -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("t", 0): 1})
    response = ctx.fetch_offsets("g", {"t": [0, 1]}, version=version)
    response.encode(version=version)
    if version >= 2:
        ctx.fetch_offsets("g", None, version=version).encode(version=version)


@pytest.mark.parametrize("version", range(0, 6))
def test_describe_and_list_encode_at_every_version(version: int) -> None:
    ctx = GroupTestContext()
    ctx.stable_group("g", 1)
    ctx.describe_groups("g", "x", version=version).encode()
    ctx.list_groups(version=version).encode()


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_groups_and_offsets_encode(version: int) -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("t", 0): 1})
    ctx.delete_offsets("g", {"t": [0]}).encode()
    ctx.delete_groups("g", "x", version=version).encode()
