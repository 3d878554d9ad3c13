"""Cost of one ACL check (coordinator/security/authorizer.py) with 10,000 ACLs.

The ACLs: 2,000 principals, each with 4 LITERAL topic ACLs and 1 PREFIXED group ACL (10,000 in
all), plus a LITERAL ``*`` DENY for one principal and 50 PREFIXED topic prefixes of assorted
lengths, so a check walks the LITERAL name, LITERAL ``*`` and several prefix lengths. Checks
cycle through 1,000 (principal, host, operation, resource) cases: allowed by a LITERAL ACL, by an
implication (DESCRIBE from WRITE), by a PREFIXED ACL, denied for want of an ACL, and denied by a
DENY. Also the cost of the KIP-430 bit field of a topic (one check per supported operation) and
of authorizeByResourceType, and of one ACL change (a new index). A check is measured the first
time (computed from the index) and again (the authorizer remembers decisions until the ACLs
change). Figures are the median of REPEATS runs, in ns per call.
Run: ``.venv/bin/python bench/acl_bench.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coordinator.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType  # noqa: E402
from coordinator.security.acl_bindings import AccessControlEntry, ResourcePattern, normalize_host  # noqa: E402
from coordinator.security.acl_cache import AclCache  # noqa: E402
from coordinator.security.authorizer import AclAuthorizer  # noqa: E402

PRINCIPALS = 2_000
CASES = 1_000
CALLS = 100_000
REPEATS = 5
O, T = AclOperation, ResourceType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def build() -> AclCache:
    acls: dict[ResourcePattern, set[AccessControlEntry]] = {}

    def add(rtype: ResourceType, name: str, pattern: PatternType, principal: str, op: AclOperation,
            perm: AclPermissionType = ALLOW, host: str = "*") -> None:
        acls.setdefault(ResourcePattern(rtype, name, pattern), set()).add(
            AccessControlEntry.of(principal, host, op, perm))

    for i in range(PRINCIPALS):
        user = f"User:u{i}"
        for j in range(4):
            add(T.TOPIC, f"topic-{i}-{j}", PatternType.LITERAL, user, (O.READ, O.WRITE)[j % 2])
        add(T.GROUP, f"group-{i}-", PatternType.PREFIXED, user, O.READ, host=f"10.0.{i // 256}.{i % 256}")
    add(T.TOPIC, "*", PatternType.LITERAL, "User:u7", O.ALL, DENY)
    for k in range(50):
        add(T.TOPIC, "topic-" + str(k) * (1 + k % 5), PatternType.PREFIXED, f"User:u{k}", O.DESCRIBE)
    cache = AclCache({p: frozenset(e) for p, e in acls.items()})
    assert len(cache) >= 10_000
    return cache


def cases() -> list[tuple[str, str, AclOperation, ResourceType, str]]:
    out = []
    for n in range(CASES):
        i = (n * 7919) % PRINCIPALS
        user, host = f"User:u{i}", f"10.0.{i // 256}.{i % 256}"
        kind = n % 5
        if kind == 0:
            out.append((user, host, O.READ, T.TOPIC, f"topic-{i}-0"))  # LITERAL ALLOW
        elif kind == 1:
            out.append((user, host, O.DESCRIBE, T.TOPIC, f"topic-{i}-1"))  # implied by WRITE
        elif kind == 2:
            out.append((user, host, O.READ, T.GROUP, f"group-{i}-consumers"))  # PREFIXED ALLOW
        elif kind == 3:
            out.append((user, host, O.WRITE, T.TOPIC, f"topic-{i}-0"))  # no ACL for WRITE: denied
        else:
            out.append(("User:u7", host, O.READ, T.TOPIC, "topic-7-0"))  # wildcard DENY
    return out


def per_call_ns(fn: Callable[..., object], args_list: list[tuple[Any, ...]]) -> float:
    runs = []
    n = len(args_list)
    for _ in range(REPEATS):
        start = time.perf_counter_ns()
        for k in range(CALLS):
            fn(*args_list[k % n])
        runs.append((time.perf_counter_ns() - start) / CALLS)
    return statistics.median(runs)


def main() -> None:
    cache = build()
    authorizer = AclAuthorizer(cache, frozenset({"User:admin"}))
    checks = cases()
    print(f"{len(cache):,} ACLs on {len(cache.acls()):,} resource patterns")

    def computed(principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        # What authorize does the first time it is asked (the answer is then remembered).
        return authorizer._decide(cache.index.matching(rtype, name), principal, normalize_host(host), op)

    print(f"authorize, computed:        {per_call_ns(computed, checks):8.0f} ns/check")
    print(f"authorize, remembered:      {per_call_ns(authorizer.authorize, checks):8.0f} ns/check")
    superuser = [("User:admin", "10.0.0.1", O.ALTER, T.TOPIC, "t")]
    print(f"authorize (super user):     {per_call_ns(authorizer.authorize, superuser):8.0f} ns/check")
    ops = [(p, h, t, name) for p, h, _, t, name in checks if t == T.TOPIC]
    print(f"authorized_operations:      {per_call_ns(authorizer.authorized_operations, ops):8.0f} ns/call")
    by_type = [(p, h, O.WRITE, T.TOPIC) for p, h, *_ in checks[:50]]
    global CALLS
    CALLS = 2_000  # linear in the principal's own ACLs
    print(f"authorize_by_resource_type: {per_call_ns(authorizer.authorize_by_resource_type, by_type):8.0f} ns/call")
    changes = []
    for k in range(21):
        pattern = ResourcePattern(T.TOPIC, f"new-{k}", PatternType.LITERAL)
        start = time.perf_counter()
        cache.update({pattern: frozenset({AccessControlEntry.of("User:x", "*", O.READ, ALLOW)})})
        changes.append(time.perf_counter() - start)
    print(f"one change (new index):     {statistics.median(changes) * 1e3:8.2f} ms")

if __name__ == "__main__":
    main()
