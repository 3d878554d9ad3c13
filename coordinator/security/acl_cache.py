"""Every ACL binding this node knows, indexed for the authorizer's check on every request.

The stores (acl_store.py) keep one :class:`AclCache` current; the authorizer reads it. A check
must not scan: with 10,000 ACLs it looks up the resource's LITERAL name, LITERAL ``*`` and, for
PREFIXED patterns, ``name[:n]`` for each prefix length ``n`` in use (a handful of dict lookups),
and within each pattern the entries of the principal and of ``User:*``, already expanded into
the operations they deny or allow per host.

A change builds a new :class:`AclIndex` (sharing what the change does not touch) and swaps it in
with one assignment, so a reader on another thread (kazoo's watch thread applies ZooKeeper
changes) sees the old index or the new one, never half of a change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .acl import AclOperation, AclPermissionType, PatternType, ResourceType
from .acl_bindings import (
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
)

__all__ = ["AclCache", "AclIndex", "PatternAcls", "ALLOW_IMPLIES", "DENY_IMPLIES"]

_O = AclOperation
_ALL_OPERATIONS = frozenset(AclOperation)
#: What an ALLOW entry of an operation grants: itself, DESCRIBE for READ/WRITE/DELETE/ALTER,
#: DESCRIBE_CONFIGS for ALTER_CONFIGS, everything for ALL (``AclAuthorizer.authorizeAction``,
#: https://github.com/apache/kafka/blob/3.8.0/core/src/main/scala/kafka/security/authorizer/AclAuthorizer.scala).
ALLOW_IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {op: frozenset({op}) for op in AclOperation}
ALLOW_IMPLIES.update({
    _O.ALL: _ALL_OPERATIONS,
    _O.READ: frozenset({_O.READ, _O.DESCRIBE}),
    _O.WRITE: frozenset({_O.WRITE, _O.DESCRIBE}),
    _O.DELETE: frozenset({_O.DELETE, _O.DESCRIBE}),
    _O.ALTER: frozenset({_O.ALTER, _O.DESCRIBE}),
    _O.ALTER_CONFIGS: frozenset({_O.ALTER_CONFIGS, _O.DESCRIBE_CONFIGS}),
})
#: A DENY entry denies only its own operation, or everything for ALL: DENY READ leaves DESCRIBE
#: to the other entries (``AclOperation``'s Javadoc).
DENY_IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {op: frozenset({op}) for op in AclOperation}
DENY_IMPLIES[_O.ALL] = _ALL_OPERATIONS

#: principal → host → the operations granted (or denied) there.
_ByPrincipal = dict[str, dict[str, frozenset[AclOperation]]]


@dataclass(frozen=True, slots=True)
class PatternAcls:
    """The entries of one resource pattern, as a check reads them."""

    deny: _ByPrincipal
    allow: _ByPrincipal

    @staticmethod
    def build(entries: Iterable[AccessControlEntry]) -> PatternAcls:
        deny: dict[str, dict[str, set[AclOperation]]] = {}
        allow: dict[str, dict[str, set[AclOperation]]] = {}
        for e in entries:
            if e.permission == AclPermissionType.DENY:
                deny.setdefault(e.principal, {}).setdefault(e.host, set()).update(DENY_IMPLIES[e.operation])
            elif e.permission == AclPermissionType.ALLOW:
                allow.setdefault(e.principal, {}).setdefault(e.host, set()).update(ALLOW_IMPLIES[e.operation])
        return PatternAcls({p: {h: frozenset(o) for h, o in hs.items()} for p, hs in deny.items()},
                           {p: {h: frozenset(o) for h, o in hs.items()} for p, hs in allow.items()})


_EMPTY_ACLS: Mapping[ResourcePattern, frozenset[AccessControlEntry]] = MappingProxyType({})


class AclIndex:
    """One immutable snapshot of all bindings and the lookup tables built from it. Never changed
    once built: :meth:`changed` makes a new one, sharing the tables no change touches."""

    __slots__ = ("acls", "literal", "prefixed", "prefix_lengths", "by_type", "count")

    def __init__(self, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        self.acls: MappingProxyType[ResourcePattern, frozenset[AccessControlEntry]] = MappingProxyType(
            {p: e for p, e in acls.items() if e})
        self.literal: dict[ResourceType, dict[str, PatternAcls]] = {}
        self.prefixed: dict[ResourceType, dict[str, PatternAcls]] = {}
        #: per type, the distinct PREFIXED name lengths, shortest first.
        self.prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        #: per type, per principal: its bindings (authorize_by_resource_type reads these).
        self.by_type: dict[ResourceType, dict[str, tuple[AclBinding, ...]]] = {}
        self.count = 0
        by_type: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        for pattern, entries in self.acls.items():
            table = self.literal if pattern.pattern_type == PatternType.LITERAL else self.prefixed
            table.setdefault(pattern.resource_type, {})[pattern.name] = PatternAcls.build(entries)
            principals = by_type.setdefault(pattern.resource_type, {})
            for entry in entries:
                principals.setdefault(entry.principal, []).append(AclBinding(pattern, entry))
            self.count += len(entries)
        self.by_type = {t: {p: tuple(b) for p, b in ps.items()} for t, ps in by_type.items()}
        for rtype, names in self.prefixed.items():
            self.prefix_lengths[rtype] = tuple(sorted({len(n) for n in names}))

    def changed(self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> AclIndex:
        """A new index with each named pattern's entries replaced (emptied: removed). Its cost
        is that of the patterns changed and of their principals' bindings, plus copying the
        outer tables (in C): a change among 10,000 ACLs does not rebuild the other 9,999."""
        new = object.__new__(AclIndex)
        acls = self.acls.copy()  # the dict under the proxy, copied in C
        literal = dict(self.literal)
        prefixed = dict(self.prefixed)
        prefix_lengths = dict(self.prefix_lengths)
        by_type = dict(self.by_type)
        count = self.count
        copied: set[tuple[int, ResourceType]] = set()
        touched_prefixes: set[ResourceType] = set()
        principals_touched: dict[ResourceType, set[str]] = {}
        added: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        for pattern, entries in changes.items():
            old = acls.pop(pattern, frozenset())
            if entries:
                acls[pattern] = entries
            count += len(entries) - len(old)
            is_literal = pattern.pattern_type == PatternType.LITERAL
            table = literal if is_literal else prefixed
            rtype = pattern.resource_type
            if (is_literal, rtype) not in copied:  # copy a type's table once, on its first change
                table[rtype] = dict(table.get(rtype, {}))
                copied.add((is_literal, rtype))
            names = table[rtype]
            if entries:
                names[pattern.name] = PatternAcls.build(entries)
            else:
                names.pop(pattern.name, None)
            if not is_literal:
                touched_prefixes.add(rtype)
            principals_touched.setdefault(rtype, set()).update(e.principal for e in old | entries)
            for e in entries:
                added.setdefault((rtype, e.principal), []).append(AclBinding(pattern, e))
        for rtype in touched_prefixes:
            prefix_lengths[rtype] = tuple(sorted({len(n) for n in prefixed[rtype]}))
        for rtype, principals in principals_touched.items():
            table_of = dict(by_type.get(rtype, {}))
            for principal in principals:
                kept = [b for b in table_of.get(principal, ()) if b.pattern not in changes]
                kept.extend(added.get((rtype, principal), ()))
                if kept:
                    table_of[principal] = tuple(kept)
                else:
                    table_of.pop(principal, None)
            by_type[rtype] = table_of
        new.acls = MappingProxyType(acls)
        new.literal, new.prefixed, new.prefix_lengths, new.by_type, new.count = (
            literal, prefixed, prefix_lengths, by_type, count)
        return new

    def matching(self, resource_type: ResourceType, name: str) -> list[PatternAcls]:
        """The patterns that apply to a resource: LITERAL ``name`` and ``*``, PREFIXED prefixes."""
        found: list[PatternAcls] = []
        literal = self.literal.get(resource_type)
        if literal is not None:
            acls = literal.get(name)
            if acls is not None:
                found.append(acls)
            if name != WILDCARD_RESOURCE:
                acls = literal.get(WILDCARD_RESOURCE)
                if acls is not None:
                    found.append(acls)
        prefixed = self.prefixed.get(resource_type)
        if prefixed is not None:
            size = len(name)
            for length in self.prefix_lengths[resource_type]:
                if length > size:
                    break
                acls = prefixed.get(name[:length])
                if acls is not None:
                    found.append(acls)
        return found

    def bindings(self) -> Iterator[AclBinding]:
        for pattern, entries in self.acls.items():
            for entry in entries:
                yield AclBinding(pattern, entry)


class AclCache:
    """The current :class:`AclIndex`, replaced whole on each change; listeners hear of changes."""

    def __init__(self, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]] = _EMPTY_ACLS) -> None:
        self.index = AclIndex(acls)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def replace_all(self, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        with self._lock:
            self.index = AclIndex(acls)
        self._changed()

    def update(self, changes: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        """Set the entries of each pattern named (an empty set removes the pattern)."""
        if not changes:
            return
        with self._lock:
            self.index = self.index.changed(changes)
        self._changed()

    def add_listener(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    def acls(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        return self.index.acls

    def bindings(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every binding the filter selects, sorted (a stable answer for describe and list)."""
        index = self.index
        found = [AclBinding(p, e) for p, entries in index.acls.items()
                 if flt is None or flt.matches_pattern(p)
                 for e in entries if flt is None or flt.matches_entry(e)]
        found.sort()
        return found

    def __len__(self) -> int:
        return self.index.count
