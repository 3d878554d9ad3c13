"""The ACL index: a change applied to an index gives the same index as building it afresh, and
filters select what Kafka's ``ResourcePatternFilter`` / ``AccessControlEntryFilter`` select."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from coordinator.security.acl_bindings import AccessControlEntry, AclBindingFilter, ResourcePattern, normalize_host
from coordinator.security.acl_cache import AclCache, AclIndex

patterns = st.builds(ResourcePattern, st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP]),
                     st.sampled_from(["a", "ab", "abc", "b", "*"]),
                     st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]))
entries = st.builds(AccessControlEntry, st.sampled_from(["User:x", "User:y", "User:*"]),
                    st.sampled_from(["*", "::1"]),
                    st.sampled_from([AclOperation.READ, AclOperation.ALL, AclOperation.DESCRIBE]),
                    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]))
changes = st.dictionaries(patterns, st.frozensets(entries, max_size=3), max_size=4)


def same(a: AclIndex, b: AclIndex) -> None:
    assert dict(a.acls) == dict(b.acls)
    assert a.count == b.count
    assert {t: n for t, n in a.literal.items() if n} == {t: n for t, n in b.literal.items() if n}
    assert {t: n for t, n in a.prefixed.items() if n} == {t: n for t, n in b.prefixed.items() if n}
    assert {t: n for t, n in a.prefix_lengths.items() if n} == {t: n for t, n in b.prefix_lengths.items() if n}
    flat = lambda i: {(t, p, x) for t, ps in i.by_type.items() for p, xs in ps.items() for x in xs}  # noqa: E731
    assert flat(a) == flat(b)


@settings(max_examples=150)
@given(st.lists(changes, min_size=1, max_size=5))
def test_a_changed_index_equals_one_built_afresh(steps: list[dict[ResourcePattern, frozenset[AccessControlEntry]]]) \
        -> None:
    cache = AclCache()
    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for step in steps:
        cache.update(step)
        acls.update(step)
        same(cache.index, AclIndex(acls))


def test_filters() -> None:
    topic = lambda name, pattern=PatternType.LITERAL: ResourcePattern(ResourceType.TOPIC, name, pattern)  # noqa: E731
    match = AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.MATCH)
    assert match.matches_pattern(topic("orders")) and match.matches_pattern(topic("*"))
    assert match.matches_pattern(topic("ord", PatternType.PREFIXED))
    assert not match.matches_pattern(topic("orders-eu")) and not match.matches_pattern(topic("x", PatternType.PREFIXED))
    assert not match.matches_pattern(ResourcePattern(ResourceType.GROUP, "orders", PatternType.LITERAL))
    any_pattern = AclBindingFilter(ResourceType.ANY, "ord", PatternType.ANY)
    assert any_pattern.matches_pattern(topic("ord", PatternType.PREFIXED)) and any_pattern.matches_pattern(topic("ord"))
    assert not any_pattern.matches_pattern(topic("orders"))
    entry = AccessControlEntry.of("User:x", "0:0:0:0:0:0:0:1", AclOperation.READ, AclPermissionType.DENY)
    assert AclBindingFilter.of(1, None, 1, None, "::1", 1, 1).matches_entry(entry)
    assert not AclBindingFilter.of(1, None, 1, "User:y", None, 1, 1).matches_entry(entry)
    assert not AclBindingFilter.of(1, None, 1, None, None, AclOperation.WRITE, 1).matches_entry(entry)
    assert not AclBindingFilter.of(1, None, 1, None, None, 1, AclPermissionType.ALLOW).matches_entry(entry)
    assert AclBindingFilter.of(99, None, 99, None, None, 99, 99).resource_type == ResourceType.UNKNOWN
    assert normalize_host("::ffff:10.0.0.1") == "10.0.0.1" and normalize_host("somehost") == "somehost"
