"""Server configuration: Kafka's key names, defaults with reasons, strict validation.

Sources, later ones winning: built-in defaults, a Kafka-style properties file (``--config``),
then ``--set key=value`` pairs and the dedicated flags (``--data-dir``, ``--listen``). An unknown
key or a bad value stops start-up with a :class:`ConfigError` naming the key, the value and what
is allowed; the CLI turns it into exit code 2.

Keys use Kafka's names where Kafka has the concept, so a Kafka operator's knowledge carries over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

__all__ = ["ConfigError", "Config", "Setting", "SettingValue", "IntSetting", "FlagSetting", "TextSetting", "SETTINGS",
           "parse_properties", "load_config", "parse_host_port", "parse_zookeeper_connect", "parse_group_patterns"]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: A setting's value once parsed: every setting is an integer, a flag or a text.
SettingValue = int | bool | str

# Which keys hold which type, so ``config[key]`` with a literal key has that type; a test checks
# these against the defaults of ``SETTINGS`` (tests/coordinator/test_config_types.py).
IntSetting = Literal[
    "node.id", "broker.id", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
    "socket.request.max.bytes", "max.connections", "connections.max.idle.ms", "num.partitions",
    "default.replication.factor", "offsets.topic.replication.factor", "min.insync.replicas",
    "replica.lag.time.max.ms", "leader.imbalance.check.interval.seconds", "replica.fetch.wait.max.ms",
    "replica.fetch.backoff.ms", "replica.fetch.max.bytes", "replica.fetch.response.max.bytes",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate", "replication.quota.window.num",
    "replication.quota.window.size.seconds", "message.max.bytes", "log.segment.bytes", "log.retention.ms",
    "log.retention.bytes", "log.retention.check.interval.ms", "log.cleaner.backoff.ms",
    "producer.id.expiration.ms", "producer.id.expiration.check.interval.ms",
    "log.flush.interval.messages", "offsets.topic.num.partitions", "offsets.topic.segment.bytes",
    "offsets.retention.minutes", "offsets.retention.check.interval.ms", "offsets.snapshot.min.records",
    "offsets.commit.timeout.ms", "offset.metadata.max.bytes", "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.max.size",
    "group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
    "group.consumer.max.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
    "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
    "group.consumer.max.size", "group.consumer.regex.refresh.interval.ms", "group.consumer.assignment.interval.ms",
    "transaction.state.log.num.partitions", "transaction.state.log.segment.bytes",
    "transaction.state.log.replication.factor", "transaction.state.log.min.isr", "transaction.max.timeout.ms",
    "transactional.id.expiration.ms", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "sasl.server.max.receive.size", "connections.max.reauth.ms", "connection.failed.authentication.delay.ms",
    "http.request.max.bytes", "lag.sample.interval.ms", "lag.lookup.table.size", "lag.burrow.intervals",
    "lag.burrow.min.distance.ms", "lag.burrow.allowed.lag", "test.faults.max.duration.ms",
]
FlagSetting = Literal[
    "auto.create.topics.enable", "unclean.leader.election.enable", "auto.leader.rebalance.enable",
    "controlled.shutdown.enable", "delete.topic.enable", "transaction.partition.verification.enable",
    "allow.everyone.if.no.acl.found", "http.admin.enabled", "test.faults.enable",
]
TextSetting = Literal[
    "broker.rack", "zookeeper.connect", "offsets.zookeeper.mirror.groups", "listeners", "advertised.listeners", "log.dirs", "logging.level",
    "group.consumer.assignors", "group.consumer.migration.policy",
    "listener.security.protocol.map", "inter.broker.listener.name", "security.inter.broker.protocol",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.principal.mapping.rules", "ssl.enabled.protocols", "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "authorizer.class.name", "super.users",
    "http.listen", "lag.cluster.name",
]


class ConfigError(ValueError):
    """A configuration problem the operator must fix; the message says what and where."""


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    parse: Callable[[str], SettingValue]
    default: SettingValue
    allowed: str
    doc: str
    check: Callable[[SettingValue], bool] = lambda _v: True
    #: A secret (passwords, private keys, JAAS text): never shown (Kafka's ``ConfigDef.Type.PASSWORD``).
    sensitive: bool = False


@dataclass(frozen=True)
class _IntRange:
    """Parses an integer setting within ``lower_bound..upper_bound``; DescribeConfigs reads
    ``upper_bound`` to call the setting INT or LONG."""

    lower_bound: int
    upper_bound: int

    def __call__(self, text: str) -> int:
        value = int(text.strip().replace("_", ""))
        if not self.lower_bound <= value <= self.upper_bound:
            raise ValueError
        return value


def _int(lo: int, hi: int) -> Callable[[str], int]:
    return _IntRange(lo, hi)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError


def _choice(*options: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        for option in options:
            if text.strip().lower() == option.lower():
                return option
        raise ValueError

    return parse


def _text(text: str) -> str:
    return text.strip()


def parse_host_port(text: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``PLAINTEXT://host:port``: the first listener of a list."""
    _name, host, port = parse_listener_list(text, "listeners")[0]
    return host, port


#: Kafka's security protocols (docs/security.html §7.2); a listener's name maps to one of them.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _host_port(value: str) -> tuple[str, int]:
    if value.startswith("["):
        host, sep, port = value[1:].partition("]:")
        if not sep:
            raise ValueError(f"{value!r}: expected [IPV6]:PORT")
    else:
        host, sep, port = value.rpartition(":")
        if not sep:
            raise ValueError(f"{value!r}: expected HOST:PORT")
    try:
        port_number = int(port)
    except ValueError:
        raise ValueError(f"{value!r}: port {port!r} is not a number") from None
    if not 0 <= port_number <= 65535:
        raise ValueError(f"{value!r}: port {port_number} outside 0..65535")
    return host, port_number


def parse_listener_list(text: str, setting: str) -> list[tuple[str, str, int]]:
    """Kafka's listener list, ``NAME://host:port[,NAME://host:port...]``, as (NAME upper-cased,
    host, port). A bare ``host:port`` (groupcoord's older form, and ``--listen``) is one listener
    named PLAINTEXT. Names must be unique (SocketServerConfigs: "Each listener must have a
    different name"); ValueError naming ``setting`` otherwise. Ports are checked by the caller,
    because advertised listeners may repeat them."""
    value = text.strip()
    if not value:
        raise ValueError(f"{setting} is empty")
    result: list[tuple[str, str, int]] = []
    for item in value.split(","):
        item = item.strip()
        if "://" in item:
            name, rest = item.split("://", 1)
            name = name.strip().upper()
            if not name or not all(c.isalnum() or c in "_-" for c in name):
                raise ValueError(f"{setting}: bad listener name in {item!r}")
        else:
            name, rest = "PLAINTEXT", item
        host, port = _host_port(rest)
        if any(name == other for other, _h, _p in result):
            raise ValueError(f"{setting}: listener name {name} appears more than once; each listener must have "
                             "a different name")
        result.append((name, host, port))
    return result


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL[,NAME:PROTOCOL...]``, both upper-cased."""
    result: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ValueError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map: unknown security protocol {protocol!r} for "
                             f"listener {name} (expected one of {', '.join(SECURITY_PROTOCOLS)})")
        if name in result:
            raise ValueError(f"listener.security.protocol.map: listener {name} is mapped twice")
        result[name] = protocol
    return result


def parse_zookeeper_connect(text: str) -> tuple[str, str]:
    """``host:port[,host:port...][/chroot]`` → (hosts, chroot or ""); ValueError when malformed."""
    value = text.strip()
    hosts, slash, chroot = value.partition("/")
    # ZooKeeper's connect-string rules: a chroot of "/" is none; otherwise a valid absolute path.
    chroot = slash + chroot if slash and chroot else ""
    if not hosts:
        raise ValueError
    for entry in hosts.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ValueError
    if chroot and any(not part for part in chroot[1:].split("/")):
        raise ValueError
    return hosts, chroot


def parse_group_patterns(text: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """A comma-separated list of group ids, each exact or ``prefix*``: (the exact ids, the prefixes)."""
    names: set[str] = set()
    prefixes: list[str] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        if "*" in item[:-1]:
            raise ValueError(f"'*' only ends a prefix: {item!r}")
        if item.endswith("*"):
            prefixes.append(item[:-1])
        else:
            names.add(item)
    return frozenset(names), tuple(prefixes)


def _group_patterns(text: str) -> str:
    parse_group_patterns(text)
    return text.strip()


def _optional_zookeeper_connect(text: str) -> str:
    if text.strip():
        parse_zookeeper_connect(text)
    return text.strip()


#: The server-side assignors of KIP-848 consumer groups, by the name clients pick them with
#: (``group.remote.assignor``); Kafka's class names are accepted for them too, so a Kafka
#: ``server.properties`` carries over.
CONSUMER_ASSIGNORS = {"uniform": "uniform", "range": "range",
                      "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                      "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def _assignors(text: str) -> str:
    """A comma-separated list of known assignors, none twice, at least one (Kafka's
    ``ValidList.anyNonDuplicateValues(false, false)``); normalised to their names."""
    names = [CONSUMER_ASSIGNORS.get(item.strip(), "") for item in text.split(",")]
    if not names or "" in names or len(set(names)) != len(names):
        raise ValueError
    return ",".join(names)


def _optional_http_listen(text: str) -> str:
    """``http.listen``: empty (no HTTP listener) or one ``HOST:PORT`` / ``[V6]:PORT``."""
    value = text.strip()
    if value:
        if "://" in value or "," in value:
            raise ValueError(f"{value!r}: expected one HOST:PORT, without a listener name")
        _host_port(value)
    return value


def _listener(text: str) -> str:
    parse_listener_list(text, "listeners")
    return text.strip()


def _optional_listener(text: str) -> str:
    if text.strip():
        parse_listener_list(text, "advertised.listeners")
    return text.strip()


def _protocol_map(text: str) -> str:
    parse_protocol_map(text)
    return text.strip()


def _protocol(text: str) -> str:
    value = text.strip().upper()
    if value not in SECURITY_PROTOCOLS:
        raise ValueError
    return value


def _pem_only(text: str) -> str:
    # Only PEM stores are read (Python's ssl module has no JKS/PKCS12 loader); Kafka's PEM type
    # is KIP-651's.
    if text.strip().upper() != "PEM":
        raise ValueError
    return "PEM"


def _tls_versions(text: str) -> str:
    versions = [v.strip() for v in text.split(",") if v.strip()]
    # TLS 1.2 is the floor: older versions are broken and Python's ssl refuses them anyway.
    if not versions or any(v not in ("TLSv1.2", "TLSv1.3") for v in versions):
        raise ValueError
    return ",".join(versions)


_SETTINGS = [
    # --- node and network -----------------------------------------------------------------
    Setting("node.id", _int(0, INT32_MAX), 1, "an integer 0..2147483647",
            "This node's id in Metadata and FindCoordinator answers."),
    # Kafka's name for the same id; either may be set (if both, they must agree).
    Setting("broker.id", _int(-1, INT32_MAX), -1, "an integer 0..2147483647 (-1: the value of node.id)",
            "Alias of node.id, Kafka's ZooKeeper-mode name for it."),
    Setting("broker.rack", _text, "", "a rack name or empty",
            "This node's rack, written in its ZooKeeper registration (cluster mode)."),
    # --- cluster mode (reference/cluster_replication.md) -------------------------------------
    Setting("zookeeper.connect", _optional_zookeeper_connect, "", "empty or HOST:PORT[,HOST:PORT...][/chroot]",
            "Empty: a single node. Otherwise the ZooKeeper ensemble this node joins as a cluster member."),
    # Kafka's defaults: an 18 s session; the connection timeout defaults to the session timeout.
    Setting("zookeeper.session.timeout.ms", _int(1000, INT32_MAX), 18000, "milliseconds >= 1000",
            "ZooKeeper session timeout: how long a silent node stays registered (the server clamps it)."),
    Setting("zookeeper.connection.timeout.ms", _int(100, INT32_MAX), 18000, "milliseconds >= 100",
            "How long start-up waits to reach ZooKeeper before giving up."),
    Setting("listeners", _listener, "localhost:9092", "NAME://HOST:PORT[,NAME://HOST:PORT...] or HOST:PORT",
            "Where the server listens (--listen); a bare HOST:PORT is one PLAINTEXT listener."),
    Setting("advertised.listeners", _optional_listener, "", "NAME://HOST:PORT[,...], HOST:PORT or empty",
            "What clients are told to connect to, per listener; empty means the listener addresses."),
    # --- security (docs/security.html; reference in coordinator/security/) ---------------------
    Setting("listener.security.protocol.map", _protocol_map,
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "NAME:PROTOCOL[,...]",
            "The security protocol of each listener name."),
    Setting("inter.broker.listener.name", _text, "", "a listener name or empty",
            "The listener other nodes use to reach this one; empty: the one of security.inter.broker.protocol."),
    Setting("security.inter.broker.protocol", _protocol, "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
            "The protocol between nodes when inter.broker.listener.name is empty."),
    Setting("ssl.keystore.location", _text, "", "a PEM file path or empty",
            "The PEM file with this node's certificate chain and private key."),
    Setting("ssl.keystore.type", _pem_only, "PEM", "PEM", "Format of the key store (only PEM)."),
    Setting("ssl.key.password", _text, "", "a password or empty", "Password of an encrypted private key.",
            sensitive=True),
    Setting("ssl.keystore.certificate.chain", _text, "", "PEM text or empty",
            "This node's certificate chain inline (instead of ssl.keystore.location)."),
    Setting("ssl.keystore.key", _text, "", "PEM text or empty",
            "This node's private key inline (with ssl.keystore.certificate.chain).", sensitive=True),
    Setting("ssl.truststore.location", _text, "", "a PEM file path or empty",
            "CA certificates client certificates are verified against."),
    Setting("ssl.truststore.type", _pem_only, "PEM", "PEM", "Format of the trust store (only PEM)."),
    Setting("ssl.truststore.certificates", _text, "", "PEM text or empty",
            "Trusted CA certificates inline (instead of ssl.truststore.location)."),
    Setting("ssl.client.auth", _choice("none", "requested", "required"), "none", "none, requested or required",
            "Whether TLS clients must (required) or may (requested) present a certificate."),
    Setting("ssl.principal.mapping.rules", _text, "DEFAULT", "RULE:regex/replacement/[LU][,...] or DEFAULT",
            "How a client certificate's distinguished name becomes a principal name."),
    Setting("ssl.enabled.protocols", _tls_versions, "TLSv1.2,TLSv1.3", "TLSv1.2 and/or TLSv1.3",
            "TLS versions accepted."),
    Setting("sasl.enabled.mechanisms", _text, "GSSAPI", "a comma-separated list of SASL mechanisms",
            "The SASL mechanisms offered on SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."),
    Setting("sasl.mechanism.inter.broker.protocol", _text, "GSSAPI", "a SASL mechanism",
            "The SASL mechanism between nodes."),
    Setting("sasl.jaas.config", _text, "", "JAAS configuration text or empty",
            "Login module options (PLAIN's user_<name>=\"password\", the node's own credentials).", sensitive=True),
    # Kafka's pre-authentication frame cap (BrokerSecurityConfigs): 512 KiB.
    Setting("sasl.server.max.receive.size", _int(1, INT32_MAX), 524288, "bytes >= 1",
            "Largest frame accepted before SASL authentication completes."),
    Setting("connections.max.reauth.ms", _int(0, INT64_MAX), 0, "milliseconds >= 0 (0: no expiry)",
            "Lifetime of a SASL session before the client must re-authenticate (KIP-368)."),
    Setting("connection.failed.authentication.delay.ms", _int(0, INT32_MAX), 100, "milliseconds >= 0",
            "How long a failed authentication's answer is held before the connection closes."),
    Setting("authorizer.class.name", _text, "", "empty, kafka.security.authorizer.AclAuthorizer, "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer or groupcoord",
            "Empty: every request is allowed. Otherwise ACLs decide."),
    Setting("super.users", _text, "", "User:name[;User:name...] or empty",
            "Principals every ACL check allows."),
    Setting("allow.everyone.if.no.acl.found", _bool, False, "true or false",
            "Whether a resource without ACLs is open to all."),
    Setting("log.dirs", _text, "groupcoord-data", "a directory path",
            "The data directory (--data-dir): logs, topic registry, meta.properties."),
    # Kafka's socket.request.max.bytes default: 100 MiB. A larger size prefix closes the
    # connection before anything is allocated for it.
    Setting("socket.request.max.bytes", _int(1024, INT32_MAX), 104857600, "an integer 1024..2147483647",
            "Largest request frame accepted."),
    # Each connection holds buffers and a file descriptor. Kafka's default is unlimited; we cap
    # it so a connection storm degrades into refused connections, not an exhausted fd table.
    Setting("max.connections", _int(1, 1_000_000), 10000, "an integer 1..1000000",
            "Connections served at once; further ones are closed on accept."),
    # Kafka's connections.max.idle.ms default: 10 minutes.
    Setting("connections.max.idle.ms", _int(1000, INT64_MAX), 600000, "milliseconds >= 1000",
            "A connection with no request for this long is closed."),
    Setting("logging.level", _choice("DEBUG", "INFO", "WARNING", "ERROR"), "INFO",
            "DEBUG, INFO, WARNING or ERROR", "Level of the structured log written to stderr."),
    # --- topics -------------------------------------------------------------------------------
    Setting("auto.create.topics.enable", _bool, True, "true or false",
            "Create a topic when Metadata (or Produce) names one that does not exist."),
    Setting("num.partitions", _int(1, 100000), 1, "an integer 1..100000",
            "Partitions of an auto-created topic, and of CreateTopics with num_partitions -1."),
    Setting("default.replication.factor", _int(1, 32767), 1, "an integer 1..32767",
            "Replication factor of auto-created topics and of CreateTopics with replication_factor -1 "
            "(a single node holds one replica: more is refused there)."),
    # --- replication (cluster mode; reference/cluster_replication.md §2-3) ----------------------
    Setting("offsets.topic.replication.factor", _int(1, 32767), 3, "an integer 1..32767",
            "Cluster mode: replicas of __consumer_offsets; it is created once this many nodes are alive."),
    Setting("min.insync.replicas", _int(1, INT32_MAX), 1, "an integer >= 1",
            "Default of the topic config: in-sync replicas acks=all needs."),
    Setting("replica.lag.time.max.ms", _int(1, INT64_MAX), 30000, "milliseconds >= 1",
            "A follower not caught up for this long leaves the ISR."),
    Setting("unclean.leader.election.enable", _bool, False, "true or false",
            "Let a replica outside the ISR lead when no ISR member is alive (may lose acknowledged data)."),
    Setting("auto.leader.rebalance.enable", _bool, True, "true or false",
            "The controller moves leadership back to preferred replicas every leader.imbalance.check.interval.seconds."),
    Setting("leader.imbalance.check.interval.seconds", _int(1, INT32_MAX), 300, "seconds >= 1",
            "How often the controller runs the preferred-leader election."),
    Setting("controlled.shutdown.enable", _bool, True, "true or false",
            "On SIGTERM, hand leadership over before stopping."),
    Setting("replica.fetch.wait.max.ms", _int(0, INT32_MAX), 500, "milliseconds >= 0",
            "Longest a follower's fetch waits at the leader for new data."),
    Setting("replica.fetch.backoff.ms", _int(0, INT32_MAX), 1000, "milliseconds >= 0",
            "Pause after a failed follower fetch."),
    Setting("replica.fetch.max.bytes", _int(1, INT32_MAX), 1048576, "bytes >= 1",
            "Bytes a follower fetches per partition and request."),
    Setting("replica.fetch.response.max.bytes", _int(1, INT32_MAX), 10485760, "bytes >= 1",
            "Bytes a follower fetches per request."),
    # Replication throttles (KIP-73), usually set dynamically per broker by
    # kafka-reassign-partitions --throttle; they apply only to the replicas the topic configs
    # leader/follower.replication.throttled.replicas name, and never to in-sync replicas.
    Setting("leader.replication.throttled.rate", _int(1, INT64_MAX), INT64_MAX, "bytes per second >= 1",
            "Bytes per second a leader sends to throttled replicas outside the ISR."),
    Setting("follower.replication.throttled.rate", _int(1, INT64_MAX), INT64_MAX, "bytes per second >= 1",
            "Bytes per second a follower fetches for its throttled replicas outside the ISR."),
    Setting("replication.quota.window.num", _int(1, INT32_MAX), 11, "an integer >= 1",
            "Samples the replication throttles measure their rate over."),
    Setting("replication.quota.window.size.seconds", _int(1, INT32_MAX), 1, "seconds >= 1",
            "Length of one replication throttle sample."),
    Setting("delete.topic.enable", _bool, True, "true or false", "Whether DeleteTopics is allowed."),
    Setting("message.max.bytes", _int(0, INT32_MAX), 1048588, "an integer >= 0",
            "Largest record batch accepted (Kafka's default: 1 MiB + batch overhead)."),
    Setting("log.segment.bytes", _int(14, INT32_MAX), 1073741824, "an integer >= 14",
            "Segment size of hosted topics (1 GiB, Kafka's default)."),
    Setting("log.retention.ms", _int(-1, INT64_MAX), 604800000, "-1 (forever) or milliseconds",
            "Time retention of delete-policy topics (7 days, Kafka's default)."),
    Setting("log.retention.bytes", _int(-1, INT64_MAX), -1, "-1 (unlimited) or bytes",
            "Size retention per partition of delete-policy topics."),
    # Kafka's defaults: look for expired segments every 5 minutes; a cleaner with nothing to do
    # checks again after 15 seconds.
    Setting("log.retention.check.interval.ms", _int(1, INT64_MAX), 300000, "milliseconds >= 1",
            "How often delete-policy logs drop segments past retention."),
    Setting("log.cleaner.backoff.ms", _int(1, INT64_MAX), 15000, "milliseconds >= 1",
            "How often compacted logs are checked for a cleaning pass."),
    Setting("log.flush.interval.messages", _int(1, INT64_MAX), INT64_MAX, "an integer >= 1",
            "Hosted topics: fsync after this many messages (Kafka's default: never, rely on the OS)."),
    # Idempotent/transactional producer state per partition (KIP-854, Kafka's names, int bounds and
    # defaults: https://cwiki.apache.org/confluence/display/KAFKA/KIP-854+Separate+configuration+for+producer+ID+expiry).
    Setting("producer.id.expiration.ms", _int(1, INT32_MAX), 86400000, "milliseconds >= 1",
            "A producer with no open transaction whose last write is older than this is forgotten by "
            "each partition (its retries are then no longer recognised as duplicates)."),
    Setting("producer.id.expiration.check.interval.ms", _int(1, INT32_MAX), 600000, "milliseconds >= 1",
            "How often partitions look for expired producers."),
    # --- group coordinator ------------------------------------------------------------------------
    # Kafka's names and defaults: https://kafka.apache.org/documentation/#brokerconfigs, set in
    # https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorConfig.java
    Setting("offsets.topic.num.partitions", _int(1, 10000), 50, "an integer 1..10000",
            "Partitions of __consumer_offsets; groups are routed by Java hash of the group id."),
    Setting("offsets.topic.segment.bytes", _int(14, INT32_MAX), 104857600, "an integer >= 14",
            "Segment size of __consumer_offsets (100 MiB keeps load and compaction granular)."),
    Setting("offsets.retention.minutes", _int(1, INT32_MAX), 10080, "minutes >= 1",
            "Offsets of an Empty group expire this long after it became Empty (KIP-211)."),
    Setting("offsets.retention.check.interval.ms", _int(1, INT64_MAX), 600000, "milliseconds >= 1",
            "How often expired offsets are looked for."),
    Setting("offsets.snapshot.min.records", _int(1, INT64_MAX), 20000, "an integer >= 1",
            "groupcoord: snapshot an offsets partition once this many records, and at least as many as "
            "its last snapshot held, were appended since that snapshot (loading replays only the tail)."),
    Setting("offsets.commit.timeout.ms", _int(1, INT32_MAX), 5000, "milliseconds >= 1",
            "Cluster mode: how long a commit waits for the ISR before REQUEST_TIMED_OUT."),
    Setting("offset.metadata.max.bytes", _int(0, INT32_MAX), 4096, "an integer >= 0",
            "Longest commit metadata string; longer gets OFFSET_METADATA_TOO_LARGE."),
    Setting("offsets.zookeeper.mirror.groups", _group_patterns, "", "group ids or prefix* patterns, comma-separated",
            "groupcoord, cluster mode: acknowledged OffsetCommits of these groups are also written to "
            "/consumers/<group>/offsets in ZooKeeper (best effort), for tools of the ZooKeeper era."),
    # The transaction coordinator (KIP-98): Kafka's TransactionLogConfig and
    # TransactionStateManagerConfig names and defaults.
    Setting("transaction.state.log.num.partitions", _int(1, 10000), 50, "an integer 1..10000",
            "Partitions of __transaction_state; ids are routed by Java hash of the transactional id "
            "(never change it once the topic exists)."),
    Setting("transaction.state.log.segment.bytes", _int(14, INT32_MAX), 104857600, "an integer >= 14",
            "Segment size of __transaction_state."),
    Setting("transaction.state.log.replication.factor", _int(1, 32767), 3, "an integer 1..32767",
            "Cluster mode: replicas of __transaction_state; it is created once this many nodes are alive."),
    Setting("transaction.state.log.min.isr", _int(1, INT32_MAX), 2, "an integer >= 1",
            "Cluster mode: min.insync.replicas of __transaction_state (capped at its replication factor)."),
    Setting("transaction.max.timeout.ms", _int(1, INT32_MAX), 900000, "milliseconds >= 1",
            "Longest transaction timeout a producer may ask for; longer gets INVALID_TRANSACTION_TIMEOUT."),
    Setting("transactional.id.expiration.ms", _int(1, INT32_MAX), 604800000, "milliseconds >= 1",
            "A transactional id idle this long (no transaction running) is removed."),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", _int(1, INT32_MAX), 10000,
            "milliseconds >= 1", "How often transactions past their timeout are aborted."),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", _int(1, INT32_MAX), 3600000,
            "milliseconds >= 1", "How often expired transactional ids are removed."),
    Setting("transaction.partition.verification.enable", _bool, True, "true or false",
            "KIP-890 part 1: a transactional batch that opens a transaction on a partition is checked "
            "with the transaction coordinator first."),
    Setting("group.initial.rebalance.delay.ms", _int(0, INT32_MAX), 3000, "milliseconds >= 0",
            "How long a new group waits for more members before its first rebalance (KIP-134)."),
    Setting("group.min.session.timeout.ms", _int(0, INT32_MAX), 6000, "milliseconds >= 0",
            "Smallest session timeout a member may ask for."),
    Setting("group.max.session.timeout.ms", _int(0, INT32_MAX), 1800000, "milliseconds >= 0",
            "Largest session timeout a member may ask for."),
    Setting("group.max.size", _int(1, INT32_MAX), INT32_MAX, "an integer >= 1",
            "Members a classic group may hold (KIP-389)."),
    # --- KIP-848 consumer groups (group.protocol=consumer) ----------------------------------------
    # Kafka's names, defaults and bounds (GroupCoordinatorConfig, above; Kafka 4 docs "Consumer
    # Rebalance Protocol": https://kafka.apache.org/documentation/#consumer_rebalance_protocol).
    # The server, not the client, sets session timeout and heartbeat interval; the min/max pairs
    # bound the per-group overrides (IncrementalAlterConfigs on a GROUP resource). How they
    # relate to each other is checked in ``_check_consumer_group_settings``.
    Setting("group.consumer.session.timeout.ms", _int(1, INT32_MAX), 45000, "milliseconds >= 1",
            "A consumer-protocol member that does not heartbeat this long is fenced."),
    Setting("group.consumer.min.session.timeout.ms", _int(1, INT32_MAX), 45000, "milliseconds >= 1",
            "Smallest consumer.session.timeout.ms a group may set."),
    Setting("group.consumer.max.session.timeout.ms", _int(1, INT32_MAX), 60000, "milliseconds >= 1",
            "Largest consumer.session.timeout.ms a group may set."),
    Setting("group.consumer.heartbeat.interval.ms", _int(1, INT32_MAX), 5000, "milliseconds >= 1",
            "The interval consumer-protocol members are told to heartbeat at."),
    Setting("group.consumer.min.heartbeat.interval.ms", _int(1, INT32_MAX), 5000, "milliseconds >= 1",
            "Smallest consumer.heartbeat.interval.ms a group may set."),
    Setting("group.consumer.max.heartbeat.interval.ms", _int(1, INT32_MAX), 15000, "milliseconds >= 1",
            "Largest consumer.heartbeat.interval.ms a group may set."),
    Setting("group.consumer.max.size", _int(1, INT32_MAX), INT32_MAX, "an integer >= 1",
            "Members a consumer-protocol group may hold."),
    Setting("group.consumer.assignors", _assignors, "uniform,range",
            "a comma-separated list of uniform and range, each at most once",
            "Server-side assignors a member may pick (group.remote.assignor); the first is the default."),
    Setting("group.consumer.migration.policy", _choice("bidirectional", "upgrade", "downgrade", "disabled"),
            "bidirectional", "bidirectional, upgrade, downgrade or disabled",
            "Whether a group converts between the classic and the consumer protocol as members change."),
    # Kafka defines it as internal (for tests) with this lower bound.
    Setting("group.consumer.regex.refresh.interval.ms", _int(10000, INT32_MAX), 600000, "milliseconds >= 10000",
            "How often the topics a subscribed regex matches are resolved again."),
    # KIP-1263 (Kafka 4.3): the broker's bounds for it are 0 and 15 s.
    Setting("group.consumer.assignment.interval.ms", _int(0, 15000), 1000, "milliseconds 0..15000",
            "Least time between two target assignment computations of a group (0: on every change)."),
    # --- operations: HTTP listener, Prometheus metrics, lag monitoring (docs/metrics.md) -------
    # groupcoord's own keys (Kafka has no HTTP endpoint); the lag defaults are kafka-lag-exporter's
    # (lookup-table.memory.size 60) and Burrow's (storage intervals 10, min-distance 0,
    # evaluator allowed-lag 0), so their dashboards and alerts read the same numbers.
    Setting("http.listen", _optional_http_listen, "", "empty or HOST:PORT",
            "Where the HTTP listener (/metrics, /healthz, /readyz, the dashboard) listens; empty: none."),
    Setting("http.admin.enabled", _bool, False, "true or false",
            "Whether the dashboard offers mutating actions (offset resets); read-only when false."),
    Setting("http.request.max.bytes", _int(1024, INT32_MAX), 65536, "an integer >= 1024",
            "Largest HTTP request body the listener accepts; a larger one gets 413."),
    Setting("lag.sample.interval.ms", _int(100, INT32_MAX), 10000, "milliseconds >= 100",
            "How often the lag monitor samples log end offsets and committed offsets."),
    Setting("lag.lookup.table.size", _int(2, 100000), 60, "an integer 2..100000",
            "Points per partition of the offset-to-time table that estimates lag in seconds "
            "(kafka-lag-exporter's lookup-table.memory.size)."),
    Setting("lag.burrow.intervals", _int(1, 10000), 10, "an integer 1..10000",
            "Commits per partition in the window Burrow's rules evaluate (Burrow's storage intervals)."),
    Setting("lag.burrow.min.distance.ms", _int(0, INT32_MAX), 0, "milliseconds >= 0",
            "A commit closer than this to the previous one replaces it in the window (Burrow's min-distance)."),
    Setting("lag.burrow.allowed.lag", _int(0, INT64_MAX), 0, "an integer >= 0",
            "Lag at or below which a partition is OK without further rules (Burrow's allowed-lag)."),
    Setting("lag.cluster.name", _text, "", "a name or empty",
            "The cluster_name label of the lag metrics; empty: the cluster id."),
    # --- testing: fault injection (docs/testing.md) ---------------------------------------------
    # groupcoord's own keys: off by default, so a production node never exposes the fault endpoint.
    Setting("test.faults.enable", _bool, False, "true or false",
            "Whether faults may be injected (for tests: rebalances, coordinator moves, failed or slow requests)."),
    Setting("test.faults.max.duration.ms", _int(1, INT32_MAX), 300000, "milliseconds >= 1",
            "The longest any injected fault may last; a fault asking for more is refused."),
]

SETTINGS: dict[str, Setting] = {s.name: s for s in _SETTINGS}


def parse_properties(text: str, source: str) -> dict[str, str]:
    """Parse the subset of Java properties syntax Kafka configs use.

    ``key=value`` or ``key: value`` lines, ``#``/``!`` comments, blank lines, and a trailing
    backslash continuing a line. Raises ConfigError naming ``source`` and the line number.
    """
    result: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].strip()
        i += 1
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + lines[i].strip()
            i += 1
        if not line or line[0] in "#!":
            continue
        sep = min((p for p in (line.find("="), line.find(":")) if p >= 0), default=-1)
        if sep <= 0:
            raise ConfigError(f"{source}:{number}: expected key=value, got {line!r}")
        result[line[:sep].strip()] = line[sep + 1 :].strip()
    return result


class Config(Mapping[str, SettingValue]):
    """Validated settings. Read with ``config["offsets.topic.num.partitions"]``."""

    def __init__(self, values: Mapping[str, SettingValue], explicit: frozenset[str] = frozenset()) -> None:
        self._values = dict(values)
        #: Keys set by the operator (file, --set or flags) rather than left at their defaults.
        self.explicit = explicit

    @overload
    def __getitem__(self, key: IntSetting) -> int: ...

    @overload
    def __getitem__(self, key: FlagSetting) -> bool: ...

    @overload
    def __getitem__(self, key: TextSetting) -> str: ...

    @overload
    def __getitem__(self, key: str) -> SettingValue: ...

    def __getitem__(self, key: str) -> SettingValue:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def data_dir(self) -> Path:
        return Path(self["log.dirs"])

    def for_listener(self, listener: str, key: str, mechanism: str | None = None) -> SettingValue:
        """``key`` as listener ``listener`` sees it: ``listener.name.<listener>.<mechanism>.<key>``,
        then ``listener.name.<listener>.<key>``, then ``key`` (Kafka's lookup order,
        docs/security.html §7.2 and §7.4)."""
        prefix = f"listener.name.{listener.lower()}."
        if mechanism is not None:
            value = self._values.get(f"{prefix}{mechanism.lower()}.{key}")
            if value is not None:
                return value
        value = self._values.get(prefix + key)
        return self._values[key] if value is None else value

    @property
    def listen(self) -> tuple[str, int]:
        return parse_host_port(self["listeners"])


#: Settings a SASL mechanism may override per listener: ``listener.name.<l>.<mechanism>.<setting>``.
MECHANISM_SETTINGS = ("sasl.jaas.config", "connections.max.reauth.ms")

#: Settings a listener may override with ``listener.name.<l>.<setting>`` (docs/security.html §7.2).
LISTENER_SETTINGS = (
    "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.principal.mapping.rules", "ssl.enabled.protocols", "sasl.enabled.mechanisms",
    "sasl.jaas.config", "sasl.server.max.receive.size", "connections.max.reauth.ms",
    "connection.failed.authentication.delay.ms",
)


def _prefixed_setting(key: str) -> Setting | None:
    """The setting a ``listener.name.<listener>.[<mechanism>.]<setting>`` key overrides, or None."""
    rest = key[len("listener.name."):]
    listener, _, setting_name = rest.partition(".")
    if not listener or listener != listener.lower():
        return None
    if setting_name in LISTENER_SETTINGS:
        return SETTINGS[setting_name]
    mechanism, _, setting_name = setting_name.partition(".")
    if mechanism and mechanism == mechanism.lower() and setting_name in MECHANISM_SETTINGS:
        return SETTINGS[setting_name]
    return None


def _apply(values: dict[str, SettingValue], key: str, raw: str, source: str, explicit: set[str] | None = None) -> None:
    setting = SETTINGS.get(key)
    if setting is None and key.startswith("listener.name."):
        setting = _prefixed_setting(key)
        if setting is None:
            raise ConfigError(f"{source}: unknown configuration key {key!r}: expected listener.name.<listener, lower "
                              f"case>.<setting> with one of {', '.join(LISTENER_SETTINGS)}, or "
                              f"listener.name.<listener>.<mechanism, lower case>.sasl.jaas.config")
    if setting is None:
        raise ConfigError(f"{source}: unknown configuration key {key!r}; see docs/configuration.md for the keys groupcoord knows")
    try:
        values[key] = setting.parse(raw)
    except ValueError as exc:
        detail = f" ({exc})" if str(exc) and not str(exc).startswith("invalid literal") else ""
        raise ConfigError(f"{source}: invalid value {raw!r} for {key}: expected {setting.allowed}{detail}") from None
    if explicit is not None:
        explicit.add(key)


def load_config(
    config_file: Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    data_dir: str | None = None,
    listen: str | None = None,
) -> Config:
    """Build the configuration; raises ConfigError on any unknown key or invalid value."""
    values: dict[str, SettingValue] = {name: s.default for name, s in SETTINGS.items()}
    explicit: set[str] = set()
    if config_file is not None:
        try:
            text = config_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc.strerror}") from None
        for key, raw in parse_properties(text, str(config_file)).items():
            _apply(values, key, raw, f"config file {config_file}", explicit)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected key=value")
        _apply(values, key.strip(), raw, "--set", explicit)
    if data_dir is not None:
        _apply(values, "log.dirs", data_dir, "--data-dir", explicit)
    if listen is not None:
        _apply(values, "listeners", listen, "--listen", explicit)
    if "broker.id" in explicit and values["broker.id"] != -1:
        if "node.id" in explicit and values["node.id"] != values["broker.id"]:
            raise ConfigError(f"broker.id ({values['broker.id']}) and node.id ({values['node.id']}) name the same "
                              "id and must agree; set one of them")
        values["node.id"] = values["broker.id"]
    values["broker.id"] = values["node.id"]
    config = Config(values, frozenset(explicit))
    if config["group.min.session.timeout.ms"] > config["group.max.session.timeout.ms"]:
        raise ConfigError(
            "group.min.session.timeout.ms "
            f"({config['group.min.session.timeout.ms']}) must not exceed group.max.session.timeout.ms "
            f"({config['group.max.session.timeout.ms']})"
        )
    _check_consumer_group_settings(config)
    return config


def _check_consumer_group_settings(config: Config) -> None:
    """The relations Kafka's ``GroupCoordinatorConfig`` requires between the group.consumer.*
    settings: each value within its min/max, and the heartbeat interval below the session timeout
    (a member told to heartbeat less often than it is expected to would be fenced between beats)."""
    rules: list[tuple[IntSetting, str, IntSetting]] = [
        ("group.consumer.max.heartbeat.interval.ms", ">=", "group.consumer.min.heartbeat.interval.ms"),
        ("group.consumer.heartbeat.interval.ms", ">=", "group.consumer.min.heartbeat.interval.ms"),
        ("group.consumer.heartbeat.interval.ms", "<=", "group.consumer.max.heartbeat.interval.ms"),
        ("group.consumer.max.session.timeout.ms", ">=", "group.consumer.min.session.timeout.ms"),
        ("group.consumer.session.timeout.ms", ">=", "group.consumer.min.session.timeout.ms"),
        ("group.consumer.session.timeout.ms", "<=", "group.consumer.max.session.timeout.ms"),
        ("group.consumer.heartbeat.interval.ms", "<", "group.consumer.session.timeout.ms"),
    ]
    words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
    for key, relation, other in rules:
        a, b = config[key], config[other]
        holds = a >= b if relation == ">=" else a <= b if relation == "<=" else a < b
        if not holds:
            raise ConfigError(f"{key} ({a}) must be {words[relation]} {other} ({b})")
