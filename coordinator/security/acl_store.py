"""Where ACL bindings are kept: a file in the data directory on a single node, ZooKeeper in a cluster.

Both stores keep an :class:`~.acl_cache.AclCache` current (the authorizer reads it) and offer
``add`` / ``remove`` / ``list`` / ``watch``. Both block (file writes are fsynced; ZooKeeper
calls wait for the server): call them from a worker thread when serving.

**File** (``acls.json``): rewritten whole on each change, to a temporary file that is fsynced
and renamed over the old one (storage/files.py ``atomic_write``), so a crash leaves the old
ACLs or the new ones. A file that does not parse stops the node with an error naming it: an
authorizer that silently started with no ACLs would deny (or, with
``allow.everyone.if.no.acl.found``, allow) everything.

**ZooKeeper**, in Kafka's ZooKeeper-mode layout so Kafka's tools and brokers read the same ACLs
(``ZkData.scala``, https://github.com/apache/kafka/blob/3.8.0/core/src/main/scala/kafka/zk/ZkData.scala):
LITERAL patterns at ``/kafka-acl/<ResourceType>/<name>``, PREFIXED at
``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, each holding
``{"version":1,"acls":[{"principal":…,"permissionType":"Allow","operation":"Read","host":"*"}]}``.
A writer changes a resource's znode conditionally on the version it read (retrying when another
node got there first, as Kafka's ``AclAuthorizer.updateResourceAcls`` does) and, in the same
ZooKeeper transaction, creates a sequential ``acl_changes_`` node under ``/kafka-acl-changes``
(data ``TOPIC:name``) or ``/kafka-acl-extended-changes`` (JSON naming the pattern). Every node
watches both change paths and re-reads the resources named, so a change made on one node is in
force on every node as soon as the watch fires (milliseconds). Change nodes older than 15
minutes are deleted, as Kafka's ``ZkNodeChangeNotificationListener`` does.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kazoo.client import KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.recipe.watchers import ChildrenWatch

from storage.files import atomic_write

from ..config import ConfigError
from .acl import AclOperation, AclPermissionType, PatternType, ResourceType
from .acl_bindings import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    ResourcePattern,
    parse_pascal,
    pascal_name,
)
from .acl_cache import AclCache

__all__ = ["AclStore", "FileAclStore", "ZkAclStore", "AclStoreError", "ACL_FILE", "LITERAL_ACLS", "EXTENDED_ACLS",
           "LITERAL_CHANGES", "EXTENDED_CHANGES", "znode_path", "encode_acls", "decode_acls"]

log = logging.getLogger("groupcoord.security.acls")

ACL_FILE = "acls.json"
LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: Kafka's ``ZkNodeChangeNotificationListener`` default change expiration.
CHANGE_EXPIRATION_S = 15 * 60
#: Kafka's ``AclAuthorizer.maxUpdateRetries``.
MAX_UPDATE_RETRIES = 10
#: The resource types that have a directory under each ACL root (``AclEntry.ResourceTypes``).
STORED_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                ResourceType.DELEGATION_TOKEN, ResourceType.USER)

_Acls = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


class AclStoreError(Exception):
    """The store could not be read or written; the message says which file or znode."""


class AclStore(Protocol):
    cache: AclCache

    def add(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        """Store the bindings; per binding, None or why it was refused. Blocking."""
        ...

    def remove(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete what each filter matches; per filter, the bindings deleted. Blocking."""
        ...

    def list(self, flt: AclBindingFilter | None = None) -> list[AclBinding]: ...

    def watch(self, callback: Callable[[], None]) -> None: ...

    def close(self) -> None: ...


def _group(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, set()).add(b.entry)
    return grouped


def _removals(acls: _Acls, filters: Sequence[AclBindingFilter]) -> tuple[list[list[AclBinding]],
                                                                          dict[ResourcePattern, set[AccessControlEntry]]]:
    """What each filter deletes (a binding two filters match is reported by both, as KRaft's
    ``AclControlManager.deleteAcls`` does) and the entries to remove per pattern."""
    per_filter: list[list[AclBinding]] = []
    gone: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for flt in filters:
        deleted = sorted(AclBinding(p, e) for p, entries in acls.items() if flt.matches_pattern(p)
                         for e in entries if flt.matches_entry(e))
        per_filter.append(deleted)
        for b in deleted:
            gone.setdefault(b.pattern, set()).add(b.entry)
    return per_filter, gone


# --- Kafka's JSON for one resource's ACLs ------------------------------------------------------------


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": pascal_name(e.permission),
             "operation": pascal_name(e.operation), "host": e.host} for e in sorted(entries)]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(where: str, data: bytes | None) -> frozenset[AccessControlEntry]:
    """A resource's ACL JSON (``AclEntry.fromBytes``); AclStoreError naming ``where`` if it is not."""
    if not data:
        return frozenset()
    try:
        doc = json.loads(data)
        return frozenset(AccessControlEntry.of(str(a["principal"]), str(a["host"]),
                                               parse_pascal(AclOperation, str(a["operation"])),
                                               parse_pascal(AclPermissionType, str(a["permissionType"])))
                         for a in doc["acls"])
    except (ValueError, KeyError, TypeError) as exc:
        raise AclStoreError(f"{where}: unreadable ACLs ({type(exc).__name__}: {exc})") from None


# --- single node: a file -------------------------------------------------------------------------------


class FileAclStore:
    """A single node's ACLs: ``acls.json`` in the data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / ACL_FILE
        self.cache = AclCache()
        self._lock = threading.Lock()
        if self.path.exists():
            self.cache.replace_all(self._read())

    def _read(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
            for r in doc["resources"]:
                pattern = ResourcePattern(parse_pascal(ResourceType, str(r["resourceType"])), str(r["name"]),
                                          parse_pascal(PatternType, str(r["patternType"])))
                acls[pattern] = decode_acls(str(self.path), json.dumps(r).encode())
            return acls
        except (OSError, ValueError, KeyError, TypeError, AclStoreError) as exc:
            raise ConfigError(f"{self.path}: unreadable ACL file ({type(exc).__name__}: {exc}); "
                              "fix or remove it (removing it drops every ACL)") from None

    def _write(self, acls: _Acls) -> None:
        resources = []
        for pattern in sorted(acls):
            doc = json.loads(encode_acls(acls[pattern]))
            resources.append({"resourceType": pascal_name(pattern.resource_type), "name": pattern.name,
                              "patternType": pattern.pattern_type.name.lower(), "acls": doc["acls"]})
        atomic_write(self.path, json.dumps({"version": 1, "resources": resources}, indent=1).encode())

    def add(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        with self._lock:
            acls = dict(self.cache.acls())
            changed = False
            for pattern, entries in _group(bindings).items():
                new = acls.get(pattern, frozenset()) | entries
                if new != acls.get(pattern):
                    acls[pattern] = frozenset(new)
                    changed = True
            if changed:
                self._write(acls)  # durable before the cache (and the answer) says so
                self.cache.replace_all(acls)
        return [None] * len(bindings)

    def remove(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        with self._lock:
            acls = dict(self.cache.acls())
            per_filter, gone = _removals(acls, filters)
            if gone:
                for pattern, entries in gone.items():
                    acls[pattern] = acls[pattern] - entries
                acls = {p: e for p, e in acls.items() if e}
                self._write(acls)
                self.cache.replace_all(acls)
        return per_filter

    def list(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        return self.cache.bindings(flt)

    def watch(self, callback: Callable[[], None]) -> None:
        self.cache.add_listener(callback)

    def close(self) -> None:
        pass


# --- cluster: ZooKeeper ---------------------------------------------------------------------------------


def znode_path(pattern: ResourcePattern) -> str:
    root = LITERAL_ACLS if pattern.pattern_type == PatternType.LITERAL else \
        f"{EXTENDED_ACLS}/{pattern.pattern_type.name.lower()}"
    return f"{root}/{pascal_name(pattern.resource_type)}/{pattern.name}"


def _change_node(pattern: ResourcePattern) -> tuple[str, bytes]:
    if pattern.pattern_type == PatternType.LITERAL:
        # ``LiteralAclChangeStore``: "<ResourceType>:<name>" (Java's enum name; read case-insensitively).
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
             "patternType": pattern.pattern_type.name}
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(event, separators=(",", ":")).encode()


def _decode_change(root: str, data: bytes) -> ResourcePattern:
    text = data.decode()
    if root == LITERAL_CHANGES:
        rtype, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:name, got {text!r}")
        return ResourcePattern(parse_pascal(ResourceType, rtype), name, PatternType.LITERAL)
    doc = json.loads(text)
    return ResourcePattern(parse_pascal(ResourceType, str(doc["resourceType"])), str(doc["name"]),
                           parse_pascal(PatternType, str(doc["patternType"])))


_Change = Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]


def _adding(entries: frozenset[AccessControlEntry]) -> _Change:
    return lambda current: current | entries


def _removing(entries: frozenset[AccessControlEntry]) -> _Change:
    return lambda current: current - entries


class _HasKazoo(Protocol):
    client: Any


class ZkAclStore:
    """A cluster's ACLs in ZooKeeper. ``zookeeper`` is this node's session (cluster/zookeeper.py's
    ``ZooKeeper``) or a bare kazoo client. ``start()`` loads every ACL and starts watching."""

    def __init__(self, zookeeper: _HasKazoo | Any) -> None:
        #: The kazoo client (kazoo ships no types: Any).
        self.client: Any = zookeeper.client if hasattr(zookeeper, "client") else zookeeper
        self.cache = AclCache()
        #: Reads and cache updates in one order: a later read is never overtaken by an earlier one.
        self._refresh_lock = threading.Lock()
        self._seen: dict[str, dict[str, float]] = {LITERAL_CHANGES: {}, EXTENDED_CHANGES: {}}
        self._armed: set[str] = set()
        self._stopped = False
        self._lost = False

    def start(self) -> None:
        client = self.client
        for root in (LITERAL_ACLS, f"{EXTENDED_ACLS}/{PatternType.PREFIXED.name.lower()}"):
            for rtype in STORED_TYPES:
                client.ensure_path(f"{root}/{pascal_name(rtype)}")
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            client.ensure_path(root)
        # Watch first, then load, so that no change falls between the two (Kafka's order too).
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            ChildrenWatch(client, root, lambda children, r=root: self._on_changes(r, children))
        self._load_all()
        client.add_listener(self._on_session)

    def close(self) -> None:
        self._stopped = True

    def _on_session(self, state: str) -> None:
        # Change nodes purged while this node was away are not replayed: read everything again.
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost and not self._stopped:
            self._lost = False
            self.client.handler.spawn(self._load_all)

    # --- reading ---------------------------------------------------------------------------------

    def _read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int | None]:
        path = znode_path(pattern)
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return frozenset(), None
        return decode_acls(path, data), int(stat.version)

    def _load_all(self) -> None:
        with self._refresh_lock:
            acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
            roots = [(LITERAL_ACLS, PatternType.LITERAL),
                     (f"{EXTENDED_ACLS}/{PatternType.PREFIXED.name.lower()}", PatternType.PREFIXED)]
            for root, pattern_type in roots:
                for type_name in self._children(root):
                    try:
                        rtype = parse_pascal(ResourceType, type_name)
                    except ValueError:
                        log.warning("ignoring an unknown ACL resource type", extra={"path": f"{root}/{type_name}"})
                        continue
                    for name in self._children(f"{root}/{type_name}"):
                        pattern = ResourcePattern(rtype, name, pattern_type)
                        try:
                            entries, _ = self._read(pattern)
                        except AclStoreError as exc:
                            log.error("ignoring unreadable ACLs", extra={"error": str(exc)})
                            continue
                        if entries:
                            acls[pattern] = entries
            self.cache.replace_all(acls)
        log.info("ACLs loaded from zookeeper", extra={"acls": len(self.cache)})

    def _children(self, path: str) -> list[str]:
        try:
            return list(self.client.get_children(path))
        except NoNodeError:
            return []

    def _refresh(self, patterns: Iterable[ResourcePattern]) -> None:
        with self._refresh_lock:
            changes: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
            for pattern in patterns:
                try:
                    changes[pattern], _ = self._read(pattern)
                except AclStoreError as exc:
                    log.error("ignoring unreadable ACLs", extra={"error": str(exc)})
            self.cache.update(changes)

    def _on_changes(self, root: str, children: list[str]) -> bool:
        """kazoo's watch thread: re-read the resources the new change nodes name."""
        if self._stopped:
            return False
        try:
            self._process_changes(root, children)
        except KazooException as exc:
            # The connection dropped mid-way: the watch fires again on the new connection, and
            # after a new session everything is read again (_on_session).
            log.warning("could not read ACL changes", extra={"path": root, "error": repr(exc)})
        return True

    def _process_changes(self, root: str, children: list[str]) -> None:
        seen = self._seen[root]
        now = time.time()
        if root not in self._armed:
            # The first call lists what was there before start(), which loads it all anyway.
            self._armed.add(root)
            seen.update((child, now) for child in children)
            return
        patterns: list[ResourcePattern] = []
        fresh: dict[str, float] = {}
        for child in sorted(children):
            if child in seen:
                continue
            path = f"{root}/{child}"
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                continue
            fresh[child] = stat.ctime / 1000.0
            try:
                patterns.append(_decode_change(root, data))
            except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                log.error("ignoring an unreadable ACL change", extra={"path": path, "error": repr(exc)})
        if patterns:
            self._refresh(patterns)
        seen.update(fresh)  # only once applied: a failure above leaves them to the next call
        for child, created in list(seen.items()):
            if child not in children:
                del seen[child]
            elif now - created > CHANGE_EXPIRATION_S:
                try:
                    self.client.delete(f"{root}/{child}")
                except NoNodeError:
                    pass

    # --- writing ---------------------------------------------------------------------------------

    def _update(self, pattern: ResourcePattern, change: _Change) -> None:
        """Read-modify-write one resource's znode, conditional on its version, with the change
        node in the same transaction."""
        client = self.client
        path = znode_path(pattern)
        client.ensure_path(path.rpartition("/")[0])
        change_path, change_data = _change_node(pattern)
        for attempt in range(MAX_UPDATE_RETRIES):
            current, version = self._read(pattern)
            new = change(current)
            if new == current:
                return
            tx = client.transaction()
            if version is None:
                tx.create(path, encode_acls(new))
            elif new:
                tx.set_data(path, encode_acls(new), version=version)
            else:
                tx.delete(path, version=version)
            tx.create(change_path, change_data, sequence=True)
            results = tx.commit()
            errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
            if any(isinstance(r, (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError)) for r in errors):
                time.sleep(0.01 * (attempt + 1))  # another node changed it first: read again
                continue
            if errors:
                raise errors[0]
            return
        raise AclStoreError(f"{path}: kept changing under {MAX_UPDATE_RETRIES} conditional updates")

    def add(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        results: list[AclError | None] = []
        valid: list[AclBinding] = []
        for b in bindings:
            # A znode name cannot hold "/" (Kafka's ZooKeeper AclAuthorizer refuses it too).
            if "/" in b.pattern.name:
                results.append(AclError(f"ACL binding contains invalid resource name: {b.pattern.name}"))
            else:
                results.append(None)
                valid.append(b)
        grouped = _group(valid)
        for pattern, entries in grouped.items():
            self._update(pattern, _adding(frozenset(entries)))
        self._refresh(grouped)  # in force here before the answer, not only when the watch fires
        return results

    def remove(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        # Refresh what a filter naming one pattern selects: it may not have reached this node yet.
        self._refresh({ResourcePattern(f.resource_type, f.name, f.pattern_type) for f in filters
                       if f.matches_at_most_one() and f.name is not None})
        per_filter, gone = _removals(self.cache.acls(), filters)
        for pattern, entries in gone.items():
            self._update(pattern, _removing(frozenset(entries)))
        self._refresh(gone)
        return per_filter

    def list(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        return self.cache.bindings(flt)

    def watch(self, callback: Callable[[], None]) -> None:
        self.cache.add_listener(callback)
