"""``groupcoord acls``: add, remove and list ACLs, with ``kafka-acls.sh``'s options (Kafka docs §7.5,
https://kafka.apache.org/documentation/#security_authz_cli).

Where the ACLs are:

* ``--bootstrap-server HOST:PORT``: over the wire, with CreateAcls / DeleteAcls / DescribeAcls
  (the server needs an authorizer, and this caller ALTER / DESCRIBE on the cluster); a secured
  listener with ``--command-config FILE``, Kafka's client properties (``coordinator/admin_client.py``);
* ``--data-dir DIR``: offline, the single node's ``acls.json`` (a running node reads it at start,
  so stop it first or use ``--bootstrap-server``);
* ``--authorizer-properties zookeeper.connect=HOST:PORT[/chroot]``: offline, a cluster's ACLs in
  ZooKeeper (the nodes see the change at once, through their watches).

``--add`` makes every combination of ``--allow-principal`` × ``--allow-host`` × ``--operation``
(ALLOW) and of ``--deny-principal`` × ``--deny-host`` × ``--operation`` (DENY) on each resource;
hosts default to ``*``, operations to ``All``. ``--producer`` / ``--consumer`` are kafka-acls'
shortcuts. ``--remove`` without principals removes every ACL of the resources (after a
confirmation unless ``--force``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from .admin_client import AdminConnection, ClientConfigError, ClientError, read_properties
from .security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, AclPermissionType, PatternType, ResourceType
from .security.acl_bindings import (
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    parse_pascal,
    validate_binding,
)

__all__ = ["add_acls_parser", "run_acls"]

_O = AclOperation
OPERATION_NAMES = ["Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
                   "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens", "All"]


class AclsCliError(Exception):
    """A usage mistake; printed without a traceback."""


def add_acls_parser(sub: Any) -> None:
    p = sub.add_parser("acls", help="add, remove or list ACLs (kafka-acls.sh's options)",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", help="HOST:PORT of a running node")
    p.add_argument("--command-config", help="client properties for --bootstrap-server on a secured listener "
                   "(security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location)")
    where.add_argument("--data-dir", help="a single node's data directory (offline)")
    where.add_argument("--authorizer-properties", nargs="+", metavar="KEY=VALUE",
                       help="zookeeper.connect=HOST:PORT[/chroot]: a cluster's ACLs in ZooKeeper (offline)")
    p.add_argument("--topic", action="append", default=[], help="a topic (repeatable; '*' for all)")
    p.add_argument("--group", action="append", default=[], help="a consumer group (repeatable; '*' for all)")
    p.add_argument("--transactional-id", action="append", default=[], help="a transactional id (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", default="literal",
                   help="literal (default), prefixed; and for --list/--remove also any, match")
    p.add_argument("--allow-principal", action="append", default=[], help="e.g. User:alice (repeatable)")
    p.add_argument("--deny-principal", action="append", default=[], help="e.g. User:mallory (repeatable)")
    p.add_argument("--allow-host", action="append", default=[], help="an IP address; default *")
    p.add_argument("--deny-host", action="append", default=[], help="an IP address; default *")
    p.add_argument("--operation", action="append", default=[], help=f"one of {', '.join(OPERATION_NAMES)}")
    p.add_argument("--principal", action="append", default=[], help="--list: only these principals' ACLs")
    p.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE, CREATE on --topic (+ --transactional-id)")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--consumer", action="store_true", help="READ, DESCRIBE on --topic and READ on --group")
    p.add_argument("--force", action="store_true", help="--remove without asking")


# --- building the bindings and filters ---------------------------------------------------------------


def _pattern_type(args: argparse.Namespace, *, filtering: bool) -> PatternType:
    try:
        pattern = parse_pascal(PatternType, args.resource_pattern_type)
    except ValueError:
        raise AclsCliError(f"--resource-pattern-type {args.resource_pattern_type!r}: expected literal, prefixed, "
                           "any or match") from None
    allowed = (PatternType.LITERAL, PatternType.PREFIXED) + ((PatternType.ANY, PatternType.MATCH) if filtering else ())
    if pattern not in allowed:
        raise AclsCliError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid when "
                           f"{'adding' if not filtering else 'filtering'} acls.")
    return pattern


def _resources(args: argparse.Namespace, pattern: PatternType) -> dict[ResourceType, list[str]]:
    resources: dict[ResourceType, list[str]] = {}
    if args.topic:
        resources[ResourceType.TOPIC] = list(args.topic)
    if args.group:
        resources[ResourceType.GROUP] = list(args.group)
    if args.transactional_id:
        resources[ResourceType.TRANSACTIONAL_ID] = list(args.transactional_id)
    if args.cluster:
        resources[ResourceType.CLUSTER] = [CLUSTER_NAME]
    return resources


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    ops: list[AclOperation] = []
    for name in args.operation or ["All"]:
        try:
            op = parse_pascal(AclOperation, name)
        except ValueError:
            op = AclOperation.UNKNOWN
        if op in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise AclsCliError(f"--operation {name!r}: expected one of {', '.join(OPERATION_NAMES)}")
        ops.append(op)
    return ops


def _entries(args: argparse.Namespace, ops: Sequence[AclOperation]) -> list[AccessControlEntry]:
    if args.allow_host and not args.allow_principal:
        raise AclsCliError("--allow-host can only be used with --allow-principal")
    if args.deny_host and not args.deny_principal:
        raise AclsCliError("--deny-host can only be used with --deny-principal")
    entries: list[AccessControlEntry] = []
    for principals, hosts, perm in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                    (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in principals:
            for host in hosts or [WILDCARD_HOST]:
                entries.extend(AccessControlEntry.of(principal, host, op, perm) for op in ops)
    return entries


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    pattern = _pattern_type(args, filtering=False)
    if args.producer or args.consumer:
        return _shortcut_bindings(args, pattern)
    resources = _resources(args, pattern)
    if not resources:
        raise AclsCliError("You must specify one of: --topic, --cluster, --group, --transactional-id")
    ops = _operations(args)
    entries = _entries(args, ops)
    if not entries:
        raise AclsCliError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    bindings: list[AclBinding] = []
    for rtype, names in resources.items():
        supported = SUPPORTED_OPERATIONS[rtype] | {AclOperation.ALL}
        wrong = [op for op in ops if op not in supported]
        if wrong:
            raise AclsCliError(f"ResourceType {rtype.name} only supports operations "
                               f"{', '.join(sorted(o.name for o in supported))}")
        bindings.extend(AclBinding(ResourcePattern(rtype, name, pattern), e) for name in names for e in entries)
    for b in bindings:
        validate_binding(b)
    return bindings


def _shortcut_bindings(args: argparse.Namespace, pattern: PatternType) -> list[AclBinding]:
    """kafka-acls' ``--producer`` and ``--consumer``."""
    if not args.topic:
        raise AclsCliError("With --producer or --consumer you must specify a --topic")
    if args.consumer and not args.group:
        raise AclsCliError("With --consumer you must specify a --group")
    wanted: list[tuple[ResourceType, list[str], list[AclOperation]]] = []
    if args.producer:
        wanted.append((ResourceType.TOPIC, args.topic, [_O.WRITE, _O.DESCRIBE, _O.CREATE]))
        if args.transactional_id:
            wanted.append((ResourceType.TRANSACTIONAL_ID, args.transactional_id, [_O.WRITE, _O.DESCRIBE]))
        if args.idempotent:
            wanted.append((ResourceType.CLUSTER, [CLUSTER_NAME], [_O.IDEMPOTENT_WRITE]))
    if args.consumer:
        wanted.append((ResourceType.TOPIC, args.topic, [_O.READ, _O.DESCRIBE]))
        wanted.append((ResourceType.GROUP, args.group, [_O.READ]))
    bindings: list[AclBinding] = []
    for rtype, names, ops in wanted:
        entries = _entries(args, ops)
        if not entries:
            raise AclsCliError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        rpattern = PatternType.LITERAL if rtype == ResourceType.CLUSTER else pattern
        for name in names:
            bindings.extend(AclBinding(ResourcePattern(rtype, name, rpattern), e) for e in entries)
    return sorted(set(bindings))


def filters_for(args: argparse.Namespace, *, removing: bool) -> list[AclBindingFilter]:
    pattern = _pattern_type(args, filtering=True)
    resources = _resources(args, pattern)
    if removing and not resources:
        raise AclsCliError("You must specify one of: --topic, --cluster, --group, --transactional-id")
    targets: list[tuple[ResourceType, str | None]] = [(rtype, name) for rtype, names in resources.items()
                                                      for name in names]
    if not targets:  # kafka-acls --list with no resource: every ACL, whatever its pattern type
        targets, pattern = [(ResourceType.ANY, None)], PatternType.ANY
    if removing and (args.allow_principal or args.deny_principal):
        entries = _entries(args, _operations(args))
        return [AclBindingFilter(rtype, name, pattern, e.principal, e.host, e.operation, e.permission)
                for rtype, name in targets for e in entries]
    principals: list[str | None] = list(args.principal) or [None]
    return [AclBindingFilter(rtype, name, pattern, principal) for rtype, name in targets for principal in principals]


# --- where the ACLs are ---------------------------------------------------------------------------------


class _Target:
    def add(self, bindings: list[AclBinding]) -> list[str | None]: raise NotImplementedError
    def remove(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]: raise NotImplementedError
    def list(self, flt: AclBindingFilter) -> list[AclBinding]: raise NotImplementedError
    def close(self) -> None: pass


class _StoreTarget(_Target):
    def __init__(self, store: Any, closer: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.closer = closer

    def add(self, bindings: list[AclBinding]) -> list[str | None]:
        return [None if e is None else str(e) for e in self.store.add(bindings)]

    def remove(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        return list(self.store.remove(filters))

    def list(self, flt: AclBindingFilter) -> list[AclBinding]:
        return list(self.store.list(flt))

    def close(self) -> None:
        self.store.close()
        self.closer()


class _WireTarget(_Target):
    """A blocking client of one node: v3 of the three ACL APIs (kafka-python's messages)."""

    VERSION = 3

    def __init__(self, bootstrap: str, props: dict[str, str]) -> None:
        try:
            self.conn = AdminConnection(bootstrap, props, client_id="groupcoord-acls").__enter__()
        except (ClientConfigError, ClientError) as exc:
            raise AclsCliError(str(exc)) from None

    def _call(self, api_key: int, request: Any) -> Any:
        try:
            return self.conn.call(api_key, self.VERSION, request)
        except ClientError as exc:
            raise AclsCliError(f"{exc} (does it serve the ACL APIs?)") from None
        except OSError as exc:
            raise AclsCliError(f"connection to {self.conn.host}:{self.conn.port} failed: {exc}") from None

    @staticmethod
    def _fail(code: int, message: str | None) -> None:
        if code:
            from protocol.errors import ErrorCode

            try:
                name = ErrorCode(code).name
            except ValueError:
                name = str(code)
            raise AclsCliError(f"{name}: {message or ''}".rstrip(": "))

    def add(self, bindings: list[AclBinding]) -> list[str | None]:
        from kafka.protocol.admin import CreateAclsRequest

        creations = [CreateAclsRequest.AclCreation(
            resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
            resource_pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal, host=b.entry.host,
            operation=int(b.entry.operation), permission_type=int(b.entry.permission)) for b in bindings]
        response = self._call(30, CreateAclsRequest(version=self.VERSION, creations=creations))
        if any(r.error_code in (31, 54) for r in response.results):  # the same for all: say it once
            self._fail(response.results[0].error_code, response.results[0].error_message)
        return [None if not r.error_code else f"{r.error_message}" for r in response.results]

    def remove(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        from kafka.protocol.admin import DeleteAclsRequest

        wire = [DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=int(f.resource_type), resource_name_filter=f.name,
            pattern_type_filter=int(f.pattern_type), principal_filter=f.principal, host_filter=f.host,
            operation=int(f.operation), permission_type=int(f.permission)) for f in filters]
        response = self._call(31, DeleteAclsRequest(version=self.VERSION, filters=wire))
        out = []
        for result in response.filter_results:
            self._fail(result.error_code, result.error_message)
            out.append([AclBinding(ResourcePattern(ResourceType(m.resource_type), m.resource_name,
                                                   PatternType(m.pattern_type)),
                                   AccessControlEntry(m.principal, m.host, AclOperation(m.operation),
                                                      AclPermissionType(m.permission_type)))
                        for m in result.matching_acls])
        return out

    def list(self, flt: AclBindingFilter) -> list[AclBinding]:
        from kafka.protocol.admin import DescribeAclsRequest

        response = self._call(29, DescribeAclsRequest(
            version=self.VERSION, resource_type_filter=int(flt.resource_type), resource_name_filter=flt.name,
            pattern_type_filter=int(flt.pattern_type), principal_filter=flt.principal, host_filter=flt.host,
            operation=int(flt.operation), permission_type=int(flt.permission)))
        self._fail(response.error_code, response.error_message)
        return sorted(AclBinding(ResourcePattern(ResourceType(r.resource_type), r.resource_name,
                                                 PatternType(r.pattern_type)),
                                 AccessControlEntry(a.principal, a.host, AclOperation(a.operation),
                                                    AclPermissionType(a.permission_type)))
                      for r in response.resources for a in r.acls)

    def close(self) -> None:
        self.conn.close()


def _target(args: argparse.Namespace) -> _Target:
    if args.bootstrap_server:
        try:
            props = read_properties(Path(args.command_config)) if args.command_config else {}
        except ClientConfigError as exc:
            raise AclsCliError(str(exc)) from None
        return _WireTarget(args.bootstrap_server, props)
    if args.data_dir:
        from .security.acl_store import FileAclStore

        path = Path(args.data_dir)
        if not path.is_dir():
            raise AclsCliError(f"--data-dir {args.data_dir}: no such directory")
        return _StoreTarget(FileAclStore(path))
    props = dict(p.partition("=")[::2] for p in args.authorizer_properties)
    connect = props.get("zookeeper.connect")
    if not connect:
        raise AclsCliError("--authorizer-properties needs zookeeper.connect=HOST:PORT[/chroot]")
    from kazoo.client import KazooClient

    from .security.acl_store import ZkAclStore

    client = KazooClient(hosts=connect, timeout=10.0)
    try:
        client.start(timeout=10)
    except Exception as exc:
        raise AclsCliError(f"cannot reach ZooKeeper at {connect}: {exc}") from None
    store = ZkAclStore(client)
    store.start()

    def stop() -> None:
        client.stop()
        client.close()

    return _StoreTarget(store, stop)


# --- output, as kafka-acls prints it -------------------------------------------------------------------


def _entry_text(e: AccessControlEntry) -> str:
    return (f"(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
            f"permissionType={e.permission.name})")


def _print_grouped(out: TextIO, heading: str, bindings: Sequence[AclBinding]) -> None:
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in sorted(bindings):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in by_pattern.items():
        out.write(f"{heading} `{pattern}`: \n")
        for e in entries:
            out.write(f" \t{_entry_text(e)} \n")
        out.write("\n")


def run_acls(args: argparse.Namespace, out: TextIO = sys.stdout, confirm: Callable[[str], str] = input) -> int:
    try:
        if args.add:
            bindings = bindings_to_add(args)
            target = _target(args)
            try:
                _print_grouped(out, "Adding ACLs for resource", bindings)
                errors = target.add(bindings)
                failed = [(b, e) for b, e in zip(bindings, errors, strict=True) if e is not None]
                for b, e in failed:
                    out.write(f"Error while adding ACL {_entry_text(b.entry)} on `{b.pattern}`: {e}\n")
                patterns = sorted({b.pattern for b in bindings})
                current = [b for p in patterns for b in target.list(
                    AclBindingFilter(p.resource_type, p.name, p.pattern_type))]
                _print_grouped(out, "Current ACLs for resource", current)
                return 1 if failed else 0
            finally:
                target.close()
        if args.remove:
            filters = filters_for(args, removing=True)
            if not args.force:
                what = ", ".join(f"{f.resource_type.name}:{f.name}" for f in filters)
                if confirm(f"Are you sure you want to remove ACLs matching {what}? (y/n) ").strip().lower() != "y":
                    out.write("Nothing removed.\n")
                    return 0
            target = _target(args)
            try:
                removed = [b for deleted in target.remove(filters) for b in deleted]
                _print_grouped(out, "Removed ACLs for resource", removed)
                return 0
            finally:
                target.close()
        filters = filters_for(args, removing=False)
        target = _target(args)
        try:
            listed = sorted({b for f in filters for b in target.list(f)})
            _print_grouped(out, "Current ACLs for resource", listed)
            return 0
        finally:
            target.close()
    except AclsCliError as exc:
        print(f"groupcoord acls: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # AclError and ConfigError (an unreadable acls.json)
        print(f"groupcoord acls: {exc}", file=sys.stderr)
        return 2
