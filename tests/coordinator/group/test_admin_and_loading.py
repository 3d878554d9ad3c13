"""DescribeGroups, ListGroups, DeleteGroups; loading a partition by replaying its records."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.group.config import GroupConfig
from coordinator.group.group_state import GroupState
from protocol.consumer_offsets import GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitValue, serialize
from protocol.errors import ErrorCode as E

from .group_test_context import GroupTestContext, group_key, offset_key, subscription


def test_describe_stable_group_shows_metadata_and_assignments() -> None:
    ctx = GroupTestContext()
    ids, _ = ctx.stable_group("g", 2)
    group = ctx.describe_groups("g").groups[0]
    assert (group.error_code, group.group_state, group.protocol_type, group.protocol_data) == (
        0, "Stable", "consumer", "range")
    assert [(m.member_id, m.member_metadata, m.member_assignment) for m in group.members] == [
        (ids[0], subscription("foo"), f"assign-{ids[0]}".encode()),
        (ids[1], subscription("foo"), f"assign-{ids[1]}".encode())]


def test_describe_rebalancing_group_hides_metadata_and_unknown_group_is_dead() -> None:
    ctx = GroupTestContext()
    ids, _ = ctx.stable_group("g", 2)
    ctx.join_group("g", ids[0])
    described, unknown = ctx.describe_groups("g", "nobody").groups
    assert (described.group_state, described.protocol_data) == ("PreparingRebalance", "")
    assert all(m.member_metadata == b"" and m.member_assignment == b"" for m in described.members)
    assert (unknown.error_code, unknown.group_state, unknown.members) == (E.NONE, "Dead", [])
    assert (unknown.error_message, unknown.protocol_type) == (None, "")
    unknown = ctx.describe_groups("nobody", version=6).groups[0]
    assert (unknown.error_code, unknown.error_message, unknown.group_state) == (
        E.GROUP_ID_NOT_FOUND, "Group nobody not found.", "Dead")
    ctx.describe_groups("g", version=0).encode()


def test_list_groups_with_state_and_type_filters() -> None:
    ctx = GroupTestContext()
    ctx.stable_group("a", 1)
    ctx.commit_offsets("b", {("foo", 0): 1})
    def listed(**kw: object) -> list[tuple[str, str]]:
        return sorted((g.group_id, g.group_state) for g in ctx.list_groups(**kw).groups)
    assert listed() == [("a", "Stable"), ("b", "Empty")]
    assert listed(states=["STABLE"]) == [("a", "Stable")]
    assert listed(types=["Classic"]) == [("a", "Stable"), ("b", "Empty")]
    assert listed(types=["consumer"]) == []
    old = ctx.list_groups(version=0)
    assert sorted(g.protocol_type for g in old.groups) == ["", "consumer"]
    old.encode()


def test_delete_groups() -> None:
    ctx = GroupTestContext()
    ctx.stable_group("busy", 1)
    ids, generation = ctx.stable_group("idle", 1)
    ctx.commit_offsets("idle", {("foo", 0): 1, ("foo", 1): 2}, generation_id=generation, member_id=ids[0])
    ctx.leave_group("idle", [(ids[0], None)])
    response = ctx.delete_groups("busy", "idle", "nobody", "idle")
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("busy", E.NON_EMPTY_GROUP), ("idle", E.NONE), ("nobody", E.GROUP_ID_NOT_FOUND),
        ("idle", E.GROUP_ID_NOT_FOUND)]
    assert ctx.last_records == [(offset_key("idle", "foo", 0), None), (offset_key("idle", "foo", 1), None),
                                (group_key("idle"), None)]
    assert "idle" not in ctx.groups and ctx.fetch_offsets("idle", None).topics == []
    assert ctx.reload().shard.hard_state() == ctx.shard.hard_state()


# --- loading ---------------------------------------------------------------------------------


def member(member_id: str, assignment: bytes = b"", instance: str | None = None,
           session: int = 10_000) -> MemberMetadata:
    return MemberMetadata(member_id=member_id, client_id="c", client_host="h", rebalance_timeout=30_000,
                          session_timeout=session, subscription=subscription("foo"), assignment=assignment,
                          group_instance_id=instance)


def test_loading_builds_stable_and_empty_groups_from_their_last_records() -> None:
    log = [
        (group_key("g"), GroupMetadataValue("consumer", 1, "range", "m1", 5, (member("m1", b"x"),))),
        (group_key("g"), GroupMetadataValue("consumer", 2, "range", "m2", 6, (member("m2", b"y", "i2"),))),
        (group_key("e"), GroupMetadataValue("consumer", 4, None, None, 7, ())),
        (offset_key("simple", "foo", 0), OffsetCommitValue(offset=3, commit_timestamp=1)),
        (group_key("gone"), GroupMetadataValue("consumer", 1, None, None, 7, ())),
        (group_key("gone"), None),
        (offset_key("orphan", "foo", 0), OffsetCommitValue(offset=3, commit_timestamp=1)),
        (group_key("orphan"), None),
    ]
    ctx = GroupTestContext(log=log)
    g = ctx.group("g")
    assert (g.state, g.generation_id, g.leader_id, list(g.members)) == (GroupState.STABLE, 2, "m2", ["m2"])
    assert g.static_members == {"i2": "m2"} and g.members["m2"].assignment == b"y"
    assert g.subscribed_topics == {"foo"}
    e = ctx.group("e")
    assert (e.state, e.generation_id, e.protocol_type, e.state_timestamp_ms) == (GroupState.EMPTY, 4, "consumer", 7)
    assert ctx.group("simple").state is GroupState.EMPTY and ctx.group("simple").protocol_type is None
    assert ctx.group("orphan").state is GroupState.EMPTY  # offsets outlived the group's tombstone
    assert "gone" not in ctx.groups
    # Loaded members must heartbeat within their session timeout.
    assert ctx.heartbeat("g", "m2", 2, group_instance_id="i2").error_code == E.NONE
    ctx.sleep(10_000)
    assert "m2" not in ctx.group("g").members


def test_loaded_group_serves_sync_with_the_persisted_assignment() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    reloaded = ctx.reload()
    response = reloaded.sync_group("g", ids[1], generation).result()
    assert response.assignment == f"assign-{ids[1]}".encode()


def test_crash_during_completing_rebalance_falls_back_to_the_persisted_generation() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    ctx.join_group("g", ids[0])
    ctx.join_group("g", ids[1])
    assert ctx.group("g").generation_id == generation + 1
    reloaded = ctx.reload()
    assert reloaded.group("g").generation_id == generation
    assert reloaded.sync_group("g", ids[1], generation + 1).result().error_code == E.ILLEGAL_GENERATION


def test_over_sized_group_rebalances_after_loading() -> None:
    log = [(group_key("g"), GroupMetadataValue("consumer", 1, "range", "m1", 5,
                                                tuple(member(f"m{i}") for i in range(1, 4))))]
    ctx = GroupTestContext(GroupConfig(max_size=2), log=log)
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    joins = [ctx.join_group("g", f"m{i}") for i in range(1, 4)]
    assert joins[2].result().error_code == E.GROUP_MAX_SIZE_REACHED
    assert "m3" not in ctx.group("g").members


def test_replaying_a_group_record_onto_a_live_group_keeps_the_live_group() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    parked = ctx.join_group("g", ids[0])
    live = ctx.group("g")
    ctx.shard.replay(*serialize(group_key("g"), ctx.log[-1][1]))
    assert ctx.group("g") is live and live.state is GroupState.PREPARING_REBALANCE
    assert not parked.done()


def test_records_survive_the_codec() -> None:
    """What the handlers write round-trips through the __consumer_offsets codec."""
    from protocol.consumer_offsets import deserialize, serialize
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    ctx.commit_offsets("g", {("foo", 0): (5, "m", 2)}, generation_id=generation, member_id=ids[0])
    ctx.commit_offsets("s", {("foo", 0): 1}, retention_time_ms=10, version=3)
    ctx.leave_group("g", [(ids[0], None), (ids[1], None)])
    ctx.delete_groups("g")
    for key, value in ctx.log:
        assert deserialize(*serialize(key, value)) == (key, value)


def test_unloading_answers_parked_requests_not_coordinator() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    parked_join = ctx.join_group("g", ids[0])
    other = GroupTestContext()
    a, fa = other.join_new_member("h")
    b, fb = other.join_new_member("h")
    other.sleep(6_000)
    follower = b if fa.result().leader == a else a
    parked_sync = other.sync_group("h", follower, fa.result().generation_id)
    ctx.shard.on_unloaded()
    other.shard.on_unloaded()
    assert parked_join.result().error_code == E.NOT_COORDINATOR
    assert parked_sync.result().error_code == E.NOT_COORDINATOR


_GROUPS = ("a", "b", "c")
_record = st.one_of(
    st.tuples(st.sampled_from(_GROUPS), st.sampled_from(("foo", "bar")), st.integers(0, 1),
              st.one_of(st.none(), st.integers(0, 9))).map(
        lambda t: (offset_key(t[0], t[1], t[2]),
                   None if t[3] is None else OffsetCommitValue(offset=t[3], commit_timestamp=1))),
    st.tuples(st.sampled_from(_GROUPS), st.one_of(st.none(), st.integers(1, 5)), st.booleans()).map(
        lambda t: (group_key(t[0]), None if t[1] is None else GroupMetadataValue(
            "consumer", t[1], "range" if t[2] else None, "m1" if t[2] else None, 7,
            (member("m1", b"x"),) if t[2] else ()))))


@settings(max_examples=300, deadline=None)
@given(st.lists(_record, max_size=14))
def test_loading_any_log_builds_the_groups_of_the_last_records_and_of_the_offsets_left(
        log: list[tuple[object, object]]) -> None:
    """Replay keeps an Empty group for each group with offsets as it goes (so a hot standby's
    takeover does not build them all at once, issue 14); whatever the order of commits,
    tombstones and group records, the loaded groups are those of the last group records, plus an
    Empty one (state time unknown) for each other group with offsets left — none for a group
    whose offsets all went."""
    from coordinator.group.classic_group import ClassicGroup

    records: dict[str, object] = {}
    offsets: dict[str, set[tuple[str, int]]] = {}
    for key, value in log:
        if isinstance(key, GroupMetadataKey):
            records[key.group] = value
        else:
            kept = offsets.setdefault(key.group, set())
            (kept.discard if value is None else kept.add)((key.topic, key.partition))
    expected = {g: ClassicGroup.from_record(g, v) for g, v in records.items() if v is not None}
    expected.update({g: ClassicGroup(g, state_timestamp_ms=None) for g, kept in offsets.items()
                     if kept and g not in expected})

    def shape(group: ClassicGroup) -> tuple[object, ...]:
        return (group.state, group.state_timestamp_ms, group.generation_id, group.protocol_type,
                group.leader_id, sorted(group.members))

    ctx = GroupTestContext(log=log)
    assert {g: shape(x) for g, x in ctx.groups.items()} == {g: shape(x) for g, x in expected.items()}


def test_a_standby_builds_its_simple_groups_before_the_takeover() -> None:
    """The Empty groups of groups that only have offsets exist once their commits are replayed,
    before ``on_loaded``: the takeover keeps those objects and builds none."""
    from coordinator.group.shard import GroupCoordinatorShard

    ctx = GroupTestContext()
    standby = GroupCoordinatorShard(ctx.config, ctx.clock, ctx.timer)
    for i in range(100):
        standby.replay(*serialize(offset_key(f"g{i}", "foo", 0), OffsetCommitValue(offset=i, commit_timestamp=1)))
    before = dict(standby.group_manager.groups)
    assert len(before) == 100 and all(g.state_timestamp_ms is None for g in before.values())
    standby.on_loaded()
    assert all(standby.group_manager.groups[g] is group for g, group in before.items())
