"""ZooKeeper-era consumer groups: the ``/consumers`` znodes the Scala consumer and Kafka 0.8.2–2.x brokers wrote.

Layout (Kafka 0.10's design docs, "ZooKeeper Directories",
https://kafka.apache.org/0100/documentation.html#impl_zookeeper):

- ``/consumers/<group>/ids/<consumer_id>``: ephemeral, the member's JSON registration;
- ``/consumers/<group>/owners/<topic>/<partition>``: ephemeral, the owning consumer thread id;
- ``/consumers/<group>/offsets/<topic>/<partition>``: persistent, the next offset to consume as a plain
  decimal in UTF-8, no metadata (``ZkUtils``/``ZkData.ConsumerOffset`` in
  https://github.com/apache/kafka/blob/2.8/core/src/main/scala/kafka/zk/ZkData.scala).

Readers never crash on a foreign or corrupt znode: parse errors are :class:`ZkConsumerError` naming the path,
and :meth:`ZkConsumers.read_group` collects them beside what it could read. The kazoo client is passed in
(the node's session, coordinator/cluster/zookeeper.py, or a tool's own); its calls block.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError

__all__ = ["ZkConsumerError", "TransactionTooLarge", "MAX_TRANSACTION_BYTES", "estimate_transaction_bytes",
           "transaction_bytes",
           "ConsumerRegistration", "ZkGroup", "ZkConsumers", "consumers_path", "ids_path", "owners_path", "offsets_path", "offset_path", "parse_offset", "format_offset", "parse_registration"]

CONSUMERS = "/consumers"

#: What one ZooKeeper request may carry: ``jute.maxbuffer``'s default, 0xfffff bytes, counted from the request
#: header on (the 4-byte length prefix excluded); ZooKeeper closes the connection of a longer request ("Len
#: error", https://zookeeper.apache.org/doc/r3.8.0/zookeeperAdmin.html, "jute.maxbuffer"). Measured on
#: ZooKeeper 3.8.0 with kazoo: a ``multi`` of 1,048,544 such bytes is applied, one of 1,048,657 loses the
#: connection. The sizes below are exact (ZooKeeper's jute records), so no margin is taken.
MAX_TRANSACTION_BYTES = 0xFFFFF

#: The request header (xid, op type) and the ``multi``'s closing header (type -1, done, err -1).
_MULTI_FIXED_BYTES = 8 + 9
#: Per operation beyond its path and data, from ZooKeeper's jute records (zookeeper.jute): the MultiHeader
#: (type, done, err: 9) and the two length prefixes (8), then for a CreateRequest the ACL vector of one
#: world:anyone entry (4 + 4 + 4+5 + 4+6 = 27) and the flags (4), for a SetDataRequest the version (4).
_CREATE_OVERHEAD_BYTES = 9 + 8 + 27 + 4
_SET_OVERHEAD_BYTES = 9 + 8 + 4


class ZkConsumerError(Exception):
    """A ``/consumers`` znode whose value is not what Kafka's ZooKeeper-era consumers write there, or a
    transaction on them that ZooKeeper refused."""


class TransactionTooLarge(ZkConsumerError):
    """Offsets too many for one ZooKeeper request (``jute.maxbuffer``); nothing was sent."""


def consumers_path() -> str:
    return CONSUMERS


def group_path(group: str) -> str:
    return f"{CONSUMERS}/{group}"


def ids_path(group: str) -> str:
    return f"{CONSUMERS}/{group}/ids"


def owners_path(group: str, topic: str) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}"


def offsets_path(group: str, topic: str | None = None) -> str:
    """``/consumers/<g>/offsets`` or, with a topic, ``/consumers/<g>/offsets/<t>``."""
    base = f"{CONSUMERS}/{group}/offsets"
    return base if topic is None else f"{base}/{topic}"


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


def format_offset(offset: int) -> bytes:
    """The znode value: ``offset.toString`` in UTF-8 (Kafka's ``ConsumerOffset.encode``)."""
    return str(int(offset)).encode()


def parse_offset(path: str, data: bytes | None) -> int:
    """The offset in a znode's value; ZkConsumerError naming the path and the value if it is not a decimal."""
    try:
        text = (data or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise ZkConsumerError(f"{path}: offset is not UTF-8: {data!r}") from None
    stripped = text.strip()
    # Kafka decodes with Scala's ``toLong``: an optional sign and ASCII digits only (no '_', no '+'
    # inside, which Python's int() would also take).
    body = stripped[1:] if stripped[:1] == "-" else stripped
    if not body or not body.isascii() or not body.isdigit():
        raise ZkConsumerError(f"{path}: offset is not a decimal number: {text!r}")
    value = int(stripped)
    if not -(2 ** 63) <= value < 2 ** 63:
        raise ZkConsumerError(f"{path}: offset out of the 64-bit range: {text!r}")
    return value


@dataclass(frozen=True)
class ConsumerRegistration:
    """A member's ``ids`` znode (Kafka 0.8's ``ZookeeperConsumerConnector.registerConsumerInZK``)."""

    consumer_id: str
    #: topic (or, for a wildcard subscription, the pattern) → number of streams
    subscription: dict[str, int]
    pattern: str
    timestamp_ms: int


def parse_registration(path: str, data: bytes | None) -> ConsumerRegistration:
    """A registration ``{"version":1,"subscription":{...},"pattern":"static","timestamp":"..."}``;
    ZkConsumerError naming the path when it is not one. The consumer id is the znode's name."""
    try:
        value: Any = json.loads((data or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ZkConsumerError(f"{path}: consumer registration is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ZkConsumerError(f"{path}: consumer registration is not a JSON object: {data!r}")
    subscription = value.get("subscription", {})
    if not isinstance(subscription, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in subscription.items()):
        raise ZkConsumerError(f"{path}: subscription is not a map of topic to stream count: {subscription!r}")
    pattern = value.get("pattern", "static")
    if not isinstance(pattern, str):
        raise ZkConsumerError(f"{path}: pattern is not a string: {pattern!r}")
    raw_timestamp = value.get("timestamp", "-1")
    try:
        # Kafka writes the timestamp as a string of milliseconds; accept a number too.
        if isinstance(raw_timestamp, bool):
            raise ValueError
        timestamp_ms = int(raw_timestamp)
    except (TypeError, ValueError):
        raise ZkConsumerError(f"{path}: timestamp is not a number: {raw_timestamp!r}") from None
    return ConsumerRegistration(path.rsplit("/", 1)[-1], dict(subscription), pattern, timestamp_ms)


@dataclass
class ZkGroup:
    """All a ZooKeeper-era group has in ``/consumers/<group>``; ``errors`` names each znode that could not be read."""

    group: str
    members: list[ConsumerRegistration] = field(default_factory=list)
    owners: dict[tuple[str, int], str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _partition(path: str, name: str) -> int:
    if not name.isascii() or not name.isdigit():
        raise ZkConsumerError(f"{path}: partition znode name is not a number: {name!r}")
    return int(name)


class ZkConsumers:
    """Reads and writes ``/consumers`` through a started kazoo client (blocking calls).

    kazoo queues a request made while ZooKeeper is unreachable until the session reconnects, so a call
    may block for as long as ZooKeeper is down. With ``request_timeout_s`` the calls a broker makes for a
    client's request (get_offset, set_offset, set_groups_offsets) give up after that long with a
    ZkConsumerError instead. Kafka 1.1–2.x brokers waited without bound there (``KafkaZkClient``'s
    ``retryRequestsUntilConnected`` and ``ZooKeeperClient.waitUntilConnected``, "Wait indefinitely",
    https://github.com/apache/kafka/blob/2.8/core/src/main/scala/kafka/zookeeper/ZooKeeperClient.scala),
    so their clients saw no answer until their own request timeout; as there, the request given up on
    stays queued and reaches ZooKeeper when it is back."""

    def __init__(self, client: Any, *, request_timeout_s: float | None = None) -> None:
        self.client = client
        self.request_timeout_s = request_timeout_s

    def _wait(self, pending: Any) -> Any:
        """The result of a kazoo ``*_async`` call, waiting at most ``request_timeout_s``."""
        try:
            return pending.get(timeout=self.request_timeout_s)
        except KazooTimeoutError:
            raise ZkConsumerError(f"ZooKeeper did not answer within {self.request_timeout_s:g} s "
                                  f"(state {self.client.state})") from None

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []

    def groups(self) -> list[str]:
        return self._children(CONSUMERS)

    def offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets; malformed znodes are left out (read_group names them)."""
        return self._read_offsets(group, [])

    def get_offset(self, group: str, topic: str, partition: int) -> int | None:
        """One partition's offset, None when its znode is absent; ZkConsumerError when malformed."""
        path = offset_path(group, topic, partition)
        try:
            data, _ = self._wait(self.client.get_async(path))
        except NoNodeError:
            return None
        return parse_offset(path, data)

    def _read_offsets(self, group: str, errors: list[str]) -> dict[tuple[str, int], int]:
        offsets: dict[tuple[str, int], int] = {}
        for topic in self._children(offsets_path(group)):
            for name in self._children(offsets_path(group, topic)):
                path = f"{offsets_path(group, topic)}/{name}"
                try:
                    partition = _partition(path, name)
                    data, _ = self.client.get(path)
                    offsets[(topic, partition)] = parse_offset(path, data)
                except NoNodeError:
                    continue  # deleted between the listing and the read
                except ZkConsumerError as exc:
                    errors.append(str(exc))
        return offsets

    def read_group(self, group: str) -> ZkGroup:
        result = ZkGroup(group)
        for member in self._children(ids_path(group)):
            path = f"{ids_path(group)}/{member}"
            try:
                data, _ = self.client.get(path)
                result.members.append(parse_registration(path, data))
            except NoNodeError:
                continue  # an ephemeral gone with its session
            except ZkConsumerError as exc:
                result.errors.append(str(exc))
        owners_root = f"{CONSUMERS}/{group}/owners"
        for topic in self._children(owners_root):
            for name in self._children(owners_path(group, topic)):
                path = f"{owners_path(group, topic)}/{name}"
                try:
                    partition = _partition(path, name)
                    data, _ = self.client.get(path)
                    result.owners[(topic, partition)] = (data or b"").decode("utf-8", "replace")
                except NoNodeError:
                    continue
                except ZkConsumerError as exc:
                    result.errors.append(str(exc))
        result.offsets = self._read_offsets(group, result.errors)
        return result

    def set_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Set the znode, creating it and its parents when absent (Kafka 1.1+'s ``setOrCreateConsumerOffset``)."""
        path = offset_path(group, topic, partition)
        data = format_offset(offset)
        try:
            self._wait(self.client.set_async(path, data))
        except NoNodeError:
            try:
                self._wait(self.client.create_async(path, data, makepath=True))
            except NodeExistsError:
                self._wait(self.client.set_async(path, data))

    def set_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """Write all ``offsets`` of ``group`` in one ZooKeeper transaction: all or nothing (see set_groups_offsets)."""
        self.set_groups_offsets({group: offsets})

    def set_groups_offsets(self, offsets: Mapping[str, Mapping[tuple[str, int], int]], *,
                           max_request_bytes: int = MAX_TRANSACTION_BYTES) -> None:
        """Write the offsets of every group in ``offsets`` in one ZooKeeper transaction: all or nothing.

        Missing parents (``/consumers/<g>/offsets/<t>`` and above) are created inside the same transaction,
        so a failed one leaves no empty group behind either; each offset znode is set if it exists, created
        otherwise. ZooKeeper refuses a request larger than its ``jute.maxbuffer`` (default 0xfffff bytes,
        https://zookeeper.apache.org/doc/r3.8.0/zookeeperAdmin.html, "jute.maxbuffer") by closing the
        connection, so a transaction larger than ``max_request_bytes`` is refused here, before anything
        is written (TransactionTooLarge; see check_fits). A znode created or deleted by someone else between
        the checks and the commit fails the transaction; it is planned again, up to three times, then raised
        (nothing written)."""
        wanted = {g: dict(o) for g, o in offsets.items() if o}
        if not wanted:
            return
        for attempt in range(3):
            transaction = self._plan(wanted)
            self._refuse_if_too_large(wanted, transaction, max_request_bytes)
            results = self._wait(transaction.commit_async())
            failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
            if not failures:
                return
            # A race with another writer (a parent or znode appeared or vanished): plan again.
            if attempt < 2 and all(isinstance(f, (NodeExistsError, NoNodeError)) for f in failures):
                continue
            groups = ("group " if len(wanted) == 1 else "groups ") + ", ".join(wanted)
            raise ZkConsumerError(f"ZooKeeper transaction writing offsets of {groups} failed, nothing written: "
                                  f"{failures[0]!r}")

    def check_fits(self, offsets: Mapping[str, Mapping[tuple[str, int], int]], *,
                   max_request_bytes: int = MAX_TRANSACTION_BYTES) -> None:
        """TransactionTooLarge when set_groups_offsets(offsets) could not send its transaction; writes nothing.

        The bound with every znode created (estimate_transaction_bytes, no ZooKeeper call) decides most
        cases; above it, the transaction is planned (reads only) and its exact size counts, as setting an
        existing znode takes 27 bytes less than creating it."""
        wanted = {g: dict(o) for g, o in offsets.items() if o}
        if wanted:
            self._refuse_if_too_large(wanted, None, max_request_bytes)

    def _refuse_if_too_large(self, wanted: dict[str, dict[tuple[str, int], int]], transaction: Any,
                             max_request_bytes: int) -> None:
        chroot = getattr(self.client, "chroot", "") or ""
        if estimate_transaction_bytes(wanted, chroot=chroot) <= max_request_bytes:
            return
        size = transaction_bytes(transaction if transaction is not None else self._plan(wanted))
        if size > max_request_bytes:
            count = sum(len(o) for o in wanted.values())
            raise TransactionTooLarge(
                f"{count} offsets of {len(wanted)} groups make a ZooKeeper transaction of {size} bytes, "
                f"more than the {max_request_bytes} one request may carry (ZooKeeper's jute.maxbuffer); "
                "nothing written")

    def _plan(self, wanted: dict[str, dict[tuple[str, int], int]]) -> Any:
        """The kazoo transaction writing ``wanted`` (parents created, each znode set or created), not sent."""
        transaction = self.client.transaction()
        # One listing per topic tells which offset znodes exist (set) and which do not (create).
        present: dict[tuple[str, str], set[str]] = {}
        created: set[str] = set()
        for group, by_partition in wanted.items():
            for topic in sorted({t for t, _ in by_partition}):
                missing = self._missing_parents(offsets_path(group, topic))
                for parent in missing:
                    if parent not in created:
                        created.add(parent)
                        transaction.create(parent, b"")
                present[(group, topic)] = set() if missing else set(self._listing(offsets_path(group, topic)))
        for group, by_partition in wanted.items():
            for (topic, partition), offset in sorted(by_partition.items()):
                path = offset_path(group, topic, partition)
                data = format_offset(offset)
                if str(partition) in present[(group, topic)]:
                    transaction.set_data(path, data)
                else:
                    transaction.create(path, data)
        return transaction

    def _missing_parents(self, path: str) -> list[str]:
        """The ancestors of ``path`` and ``path`` itself that do not exist, outermost first."""
        missing: list[str] = []
        while path and path != "/" and self._wait(self.client.exists_async(path)) is None:
            missing.append(path)
            path = path.rsplit("/", 1)[0]
        return missing[::-1]

    def _listing(self, path: str) -> list[str]:
        try:
            return list(self._wait(self.client.get_children_async(path)))
        except NoNodeError:
            return []



def estimate_transaction_bytes(offsets: Mapping[str, Mapping[tuple[str, int], int]], *, chroot: str = "") -> int:
    """The bytes of the ``multi`` request set_groups_offsets sends for ``offsets`` when every znode, parents
    included, is created: an upper bound, exact for an import into an empty ``/consumers``. Every path
    carries the client's ``chroot`` (kazoo prefixes it to each operation)."""
    prefix = len(chroot.rstrip("/").encode())

    def create(path: str, data_bytes: int) -> int:
        return _CREATE_OVERHEAD_BYTES + prefix + len(path.encode()) + data_bytes

    size = _MULTI_FIXED_BYTES + create(CONSUMERS, 0)
    for group, by_partition in offsets.items():
        parents = {group_path(group), offsets_path(group)} | {offsets_path(group, t) for t, _ in by_partition}
        size += sum(create(p, 0) for p in parents)
        for (topic, partition), offset in by_partition.items():
            size += create(offset_path(group, topic, partition), len(format_offset(offset)))
    return size


def transaction_bytes(transaction: Any) -> int:
    """The exact bytes (request header on) of a planned kazoo transaction's ``multi`` request."""
    from kazoo.protocol.serialization import Transaction

    return 8 + len(Transaction(transaction.operations).serialize())
