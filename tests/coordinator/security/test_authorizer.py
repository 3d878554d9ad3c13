"""Kafka's ACL evaluation (reference/security.md §6): super users, DENY wins, ALLOW implications,
LITERAL / ``*`` / PREFIXED, ``User:*``, hosts, allow-everyone, authorizeByResourceType, bit fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.config import ConfigError
from coordinator.security.acl import (
    AclOperation,
    AclPermissionType,
    NoAuthorizer,
    PatternType,
    ResourceType,
)
from coordinator.security.acl_bindings import AccessControlEntry, AclBinding, ResourcePattern
from coordinator.security.acl_cache import AclCache
from coordinator.security.authorizer import AclAuthorizer, build_authorizer

O, T = AclOperation, ResourceType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(name: str, op: AclOperation, perm: AclPermissionType = ALLOW, principal: str = "User:alice",
        pattern: PatternType = LIT, rtype: ResourceType = T.TOPIC, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry.of(principal, host, op, perm))


def authorizer(*bindings: AclBinding, super_users: frozenset[str] = frozenset(),
               allow_if_no_acl: bool = False) -> AclAuthorizer:
    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for b in bindings:
        acls[b.pattern] = acls.get(b.pattern, frozenset()) | {b.entry}
    return AclAuthorizer(AclCache(acls), super_users, allow_if_no_acl)


def can(a: AclAuthorizer, op: AclOperation, name: str = "t", principal: str = "User:alice", host: str = "10.0.0.1",
        rtype: ResourceType = T.TOPIC) -> bool:
    return a.authorize(principal, host, op, rtype, name)


CONCRETE_OPS = [op for op in AclOperation if op not in (O.UNKNOWN, O.ANY, O.ALL)]
#: ALLOW implications (AclAuthorizer / StandardAuthorizerData): what each ALLOW grants.
IMPLIED = {O.READ: {O.DESCRIBE}, O.WRITE: {O.DESCRIBE}, O.DELETE: {O.DESCRIBE}, O.ALTER: {O.DESCRIBE},
           O.ALTER_CONFIGS: {O.DESCRIBE_CONFIGS}}


@given(st.sampled_from(CONCRETE_OPS + [O.ALL]), st.sampled_from(CONCRETE_OPS))
def test_allow_implications(granted: AclOperation, asked: AclOperation) -> None:
    a = authorizer(acl("t", granted))
    expected = granted == O.ALL or asked == granted or asked in IMPLIED.get(granted, set())
    assert can(a, asked) is expected


@given(st.sampled_from(CONCRETE_OPS + [O.ALL]), st.sampled_from(CONCRETE_OPS))
def test_deny_implies_nothing_but_itself_and_all(denied: AclOperation, asked: AclOperation) -> None:
    a = authorizer(acl("t", O.ALL), acl("t", denied, DENY))
    assert can(a, asked) is not (denied == O.ALL or denied == asked)


#: Patterns that all apply to a topic named "topic".
APPLYING = [("topic", LIT), ("*", LIT), ("t", PRE), ("topic", PRE)]


@given(deny_pattern=st.sampled_from(APPLYING), allow_pattern=st.sampled_from(APPLYING),
       deny_principal=st.sampled_from(["User:alice", "User:*"]),
       allow_principal=st.sampled_from(["User:alice", "User:*"]),
       deny_host=st.sampled_from(["*", "10.0.0.1"]), allow_op=st.sampled_from([O.READ, O.ALL]))
def test_deny_wins_wherever_it_comes_from(deny_pattern: tuple[str, PatternType], allow_pattern: tuple[str, PatternType],
                                         deny_principal: str, allow_principal: str, deny_host: str,
                                         allow_op: AclOperation) -> None:
    a = authorizer(acl(allow_pattern[0], allow_op, pattern=allow_pattern[1], principal=allow_principal),
                   acl(deny_pattern[0], O.READ, DENY, pattern=deny_pattern[1], principal=deny_principal,
                       host=deny_host))
    assert not can(a, O.READ, "topic")
    assert can(a, O.READ, "topic", host="10.0.0.2") is (deny_host != "*")


@given(st.text(alphabet="ab-", min_size=1, max_size=6), st.text(alphabet="ab-", min_size=1, max_size=6))
def test_prefix_versus_literal(acl_name: str, resource: str) -> None:
    prefixed = authorizer(acl(acl_name, O.READ, pattern=PRE))
    literal = authorizer(acl(acl_name, O.READ, pattern=LIT))
    assert can(prefixed, O.READ, resource) is resource.startswith(acl_name)
    assert can(literal, O.READ, resource) is (resource == acl_name)


def test_wildcard_resource_and_principal() -> None:
    a = authorizer(acl("*", O.WRITE, principal="User:*"))
    assert can(a, O.WRITE, "anything", principal="User:bob")
    assert not can(a, O.WRITE, "anything", rtype=T.GROUP)  # another resource type


def test_principals_are_exact_and_case_sensitive() -> None:
    a = authorizer(acl("t", O.READ, principal="User:alice"))
    assert not can(a, O.READ, principal="User:Alice")
    assert not can(a, O.READ, principal="Group:alice")


def test_hosts_ipv6_spellings_and_mapped_ipv4() -> None:
    a = authorizer(acl("t", O.READ, host="0:0:0:0:0:0:0:1"), acl("t", O.WRITE, host="192.168.1.5"))
    assert can(a, O.READ, host="::1")
    assert not can(a, O.READ, host="::2")
    assert can(a, O.WRITE, host="::ffff:192.168.1.5")
    assert not can(a, O.WRITE, host="")
    deny_host = authorizer(acl("t", O.READ), acl("t", O.READ, DENY, host="::1"))
    assert not can(deny_host, O.READ, host="0:0:0:0:0:0:0:1")
    assert can(deny_host, O.READ, host="127.0.0.1")


def test_super_users_pass_denies() -> None:
    a = authorizer(acl("t", O.ALL, DENY, principal="User:*"), super_users=frozenset({"User:admin"}))
    assert can(a, O.ALTER, principal="User:admin")
    assert not can(a, O.ALTER, principal="User:alice")


def test_allow_everyone_only_where_no_acl_applies() -> None:
    a = authorizer(acl("t", O.READ, principal="User:bob"), allow_if_no_acl=True)
    assert can(a, O.WRITE, "other")  # nothing on "other"
    assert not can(a, O.WRITE, "t")  # an ACL exists on t, even if for someone else
    assert not can(authorizer(), O.READ)  # default: deny
    prefixed = authorizer(acl("t", O.READ, principal="User:bob", pattern=PRE), allow_if_no_acl=True)
    assert not can(prefixed, O.READ, "topic")


def test_authorized_operations_bitfields() -> None:
    full = authorizer(acl("t", O.ALL), acl("kafka-cluster", O.ALL, rtype=T.CLUSTER), acl("g", O.ALL, rtype=T.GROUP))
    assert full.authorized_operations("User:alice", "h", T.TOPIC, "t") == 3576
    assert full.authorized_operations("User:alice", "h", T.CLUSTER, "kafka-cluster") == 8096
    assert full.authorized_operations("User:alice", "h", T.GROUP, "g") == 3400
    read_only = authorizer(acl("t", O.READ))
    assert read_only.authorized_operations("User:alice", "h", T.TOPIC, "t") == (1 << 3) | (1 << 8)
    assert NoAuthorizer().authorized_operations("User:x", "h", T.TOPIC, "t") == 3576


def test_authorize_by_resource_type() -> None:
    by_type = AclAuthorizer.authorize_by_resource_type
    assert not by_type(authorizer(), "User:alice", "h", O.WRITE, T.TOPIC)
    assert by_type(authorizer(acl("t1", O.WRITE)), "User:alice", "h", O.WRITE, T.TOPIC)
    assert by_type(authorizer(acl("t1", O.ALL)), "User:alice", "h", O.WRITE, T.TOPIC)
    # READ does not imply WRITE, and implications play no part here (DESCRIBE from READ).
    assert not by_type(authorizer(acl("t1", O.READ)), "User:alice", "h", O.DESCRIBE, T.TOPIC)
    # A LITERAL DENY of the same name, or a PREFIXED DENY of a prefix, dominates.
    assert not by_type(authorizer(acl("t1", O.WRITE), acl("t1", O.WRITE, DENY)), "User:alice", "h", O.WRITE, T.TOPIC)
    assert not by_type(authorizer(acl("t1", O.WRITE), acl("t", O.WRITE, DENY, pattern=PRE)),
                       "User:alice", "h", O.WRITE, T.TOPIC)
    assert not by_type(authorizer(acl("topic", O.WRITE, pattern=PRE), acl("top", O.WRITE, DENY, pattern=PRE)),
                       "User:alice", "h", O.WRITE, T.TOPIC)
    # A longer PREFIXED DENY does not dominate a shorter PREFIXED ALLOW.
    assert by_type(authorizer(acl("top", O.WRITE, pattern=PRE), acl("topic", O.WRITE, DENY, pattern=PRE)),
                   "User:alice", "h", O.WRITE, T.TOPIC)
    # A wildcard DENY denies everything; a wildcard ALLOW allows.
    assert not by_type(authorizer(acl("t1", O.WRITE), acl("*", O.WRITE, DENY, principal="User:*")),
                       "User:alice", "h", O.WRITE, T.TOPIC)
    assert by_type(authorizer(acl("*", O.WRITE, principal="User:*")), "User:bob", "h", O.WRITE, T.TOPIC)
    # Super users pass, DENY or not.
    assert by_type(authorizer(acl("*", O.ALL, DENY, principal="User:*"), super_users=frozenset({"User:root"})),
                   "User:root", "h", O.WRITE, T.TOPIC)
    # Another host's ALLOW does not count.
    assert not by_type(authorizer(acl("t1", O.WRITE, host="10.9.9.9")), "User:alice", "10.0.0.1", O.WRITE, T.TOPIC)
    with pytest.raises(ValueError):
        by_type(authorizer(), "User:alice", "h", O.ANY, T.TOPIC)


def test_build_authorizer() -> None:
    assert isinstance(build_authorizer(""), NoAuthorizer)
    for name in ("kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"):
        built = build_authorizer(name, "User:Bob; User:Alice", True)
        assert isinstance(built, AclAuthorizer)
        assert built.super_users == {"User:Bob", "User:Alice"} and built.allow_if_no_acl
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        build_authorizer("com.example.MyAuthorizer")


def test_a_change_to_the_cache_is_seen_by_the_authorizer() -> None:
    cache = AclCache()
    a = AclAuthorizer(cache)
    assert not can(a, O.READ)
    binding = acl("t", O.READ)
    cache.update({binding.pattern: frozenset({binding.entry})})
    assert can(a, O.READ)
    cache.update({binding.pattern: frozenset()})
    assert not can(a, O.READ)
